"""The llama-server command line and the Ollama Modelfile a llama.cpp ledger (estimate/llamacpp_memory.py)
corresponds to. llama-server's flags (tools/server/README.md): -m, -c, -ngl, -np, -kvu, -ctk, -ctv, -fa on|off,
-b, -ub, --n-cpu-moe / --cpu-moe, --swa-full, --mmproj, -md, --spec-type, --spec-draft-n-max. Ollama (docs/modelfile.md,
docs/faq.mdx): PARAMETER num_ctx (per slot), num_gpu (layers on the GPU) and draft_num_predict (the model's MTP
tensors; a separate draft model is refused: Ollama runs a DRAFT file as an MTP head) in the Modelfile;
OLLAMA_NUM_PARALLEL,
OLLAMA_FLASH_ATTENTION and OLLAMA_KV_CACHE_TYPE (one type for K and V, which needs flash attention) in the server's
environment."""

from __future__ import annotations

import re
import shlex

from llmsize.errors import InvalidValueError
from llmsize.estimate.llamacpp_options import ollama_flash_attn

LLAMA_N_BATCH = 2048  # llama.cpp's default -b (common/common.h n_batch); the ubatch is min(-b, -ub)


SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.I)  # gguf-split's names: MODEL-00001-of-00003.gguf


def _model_path(p, local_path: str | None) -> tuple[str, list[str]]:
    if local_path and local_path.lower().endswith(".gguf"):
        # llama.cpp loads a split model from its first file, which names the others
        return SPLIT.sub(lambda m: f"-{1:05d}-of-{m.group(2)}.gguf", local_path), []
    if local_path:  # a safetensors folder: llama.cpp loads GGUF files only
        name = f"{p.model.id}-{p.fmt.id.removeprefix('gguf-').upper()}.gguf"
        how = (f"convert_hf_to_gguf.py, then llama-quantize to {p.fmt.id.removeprefix('gguf-').upper()}"
               if p.fmt.id.startswith("gguf-") else f"convert_hf_to_gguf.py --outtype {p.fmt.id}")
        return name, [f"# {name}: llama.cpp loads GGUF files only; convert {local_path} ({how}) and put the file's "
                      "path here"]
    name = f"{p.model.id}-{p.fmt.id.removeprefix('gguf-').upper()}.gguf"
    src = f" of {p.model.hf_repo}" if p.model.hf_repo else ""
    return name, [f"# {name}: put the path of the GGUF file{src} in {p.fmt.id} here"]


def llama_server_command(p, led, local_path: str | None = None) -> str:
    s = led.settings
    path, notes = _model_path(p, local_path)
    args = ["llama-server", "-m", path, "-c", str(s.ctx_size), "-ngl", str(led.gpu_layers), "-np", str(s.parallel)]
    if s.kv_unified:
        args.append("-kvu")
    if s.cache_type_k != "f16":
        args += ["-ctk", s.cache_type_k]
    if s.cache_type_v != "f16":
        args += ["-ctv", s.cache_type_v]
    args += ["-fa", "on" if s.flash_attn else "off"]
    if s.ubatch_size != 512:
        if s.ubatch_size > LLAMA_N_BATCH:  # llama.cpp caps -ub at -b (2048 by default)
            args += ["-b", str(s.ubatch_size)]
        args += ["-ub", str(s.ubatch_size)]
    moe = any(g.mlp is not None and g.mlp.kind == "moe" for g in p.model.layer_groups)
    if s.n_cpu_moe and not moe:  # nothing to move (the ledger says so): a flag that reads as a split would mislead
        notes.append(f"# --n-cpu-moe {s.n_cpu_moe} left out: {p.model.id} has no routed experts")
    elif s.n_cpu_moe >= led.n_layer:
        args.append("--cpu-moe")
    elif s.n_cpu_moe:
        args += ["--n-cpu-moe", str(s.n_cpu_moe)]
    if s.swa_full:
        args.append("--swa-full")
    if s.mmproj is not None:
        args += ["--mmproj", _mmproj_path(p, s, notes)]
    if s.mmproj is not None and s.mmproj_host:  # the projector where the plan put it: on the CPU
        args.append("--no-mmproj-offload")
    args += _spec_args(p, notes)
    return "\n".join(notes + [shlex.join(args)])


def _mmproj_path(p, s, notes: list[str]) -> str:
    """The mmproj the ledger holds: the file the plan read, or the name of the one convert_hf_to_gguf.py --mmproj
    writes in its type, with the note to put its path there."""
    if not isinstance(s.mmproj, str):
        return s.mmproj.path
    name = f"mmproj-{p.model.id}-{s.mmproj.upper()}.gguf"
    notes.append(f"# {name}: put the path of the model's mmproj file in {s.mmproj.upper()} here")
    return name


def _draft_path(p, notes: list[str]) -> str:
    """The draft model's GGUF in the plan's file type, with the note to put its path there."""
    name = f"{p.inputs.spec.draft.id}-{p.fmt.id.removeprefix('gguf-').upper()}.gguf"
    notes.append(f"# {name}: put the path of the draft model's GGUF here")
    return name


def _spec_args(p, notes: list[str]) -> list[str]:
    """llama-server's speculative decoding as the plan was sized with it (--spec): the model's own MTP tensors with
    --spec-type draft-mtp and --spec-draft-n-max k (llama.cpp PR #22673, merged 2026-05-16; the families
    speculative.LLAMACPP_MTP_FAMILIES lists), or a draft model's file with -md and --spec-type draft-simple (which
    llama-server turns on by itself where a draft model is given without a type, with a warning:
    common/speculative.cpp common_speculative_init)."""
    spec = p.inputs.spec
    if spec is None:
        return []
    if spec.draft is None:
        notes.append("# --spec-type draft-mtp needs a GGUF that kept the MTP tensors (some quants leave them out) "
                     "and a llama-server built after 2026-05-16")
        return ["--spec-type", "draft-mtp", "--spec-draft-n-max", str(spec.k)]
    return ["-md", _draft_path(p, notes), "--spec-type", "draft-simple", "--spec-draft-n-max", str(spec.k)]


def _ollama_spec_lines(p) -> list[str]:
    """Ollama's speculative decoding as the plan was sized with it (--spec mtp=k): the tokens drafted a step,
    PARAMETER draft_num_predict k, which the model's embedded MTP tensors need to be drafted with at all
    (docs/modelfile.mdx; ollama @fb307609). A separate draft model is refused: Ollama hands a Modelfile's DRAFT file
    to llama-server as an MTP head (--spec-type draft-mtp), or as a DFlash one where its architecture is dflash
    (llm/llama_server.go externalDraftType, @fb307609), never as a draft model of its own."""
    spec = p.inputs.spec
    if spec is None:
        return []
    if spec.draft is not None:
        raise InvalidValueError(f"--emit ollama with --spec draft={spec.draft.id}: Ollama runs a Modelfile's DRAFT "
                                "file as the model's MTP (or DFlash) head, not as a draft model of its own.",
                                "Use --emit llama-server (-md runs a draft model), or --spec mtp=N on a model with "
                                "MTP tensors.")
    return [f"PARAMETER draft_num_predict {spec.k}"]


def _from(path: str) -> str:
    """A Modelfile FROM line, quoted where the path has a space; a path holding a double quote or a line break,
    which a Modelfile line cannot carry, refused."""
    if '"' in path or "\n" in path or "\r" in path:
        from llmsize.errors import shown

        raise InvalidValueError(f"--emit ollama: the path `{shown(path)}` holds a double quote or a line break, which "
                                "a Modelfile's FROM line cannot carry.", "Rename or link the file without them.")
    return f'FROM "{path}"' if any(c.isspace() for c in path) else f"FROM {path}"


def ollama_modelfile(p, led, local_path: str | None = None) -> str:
    s = led.settings
    path, notes = _model_path(p, local_path)
    per_slot = s.ctx_size // max(1, s.parallel)
    lines = notes + [_from(path)]
    if s.mmproj is not None:  # a second FROM: `ollama create` takes a clip GGUF among its files as the model's
        # projector (server/create.go isProjectorGGUF, ollama @fb307609)
        lines.append(_from(_mmproj_path(p, s, lines)))
    lines.append(f"PARAMETER num_ctx {per_slot}")
    if s.mmproj and not s.mmproj_host and led.gpu_layers < led.n_layer + 1:  # Ollama's own placement, kept
        lines.append(f"# num_gpu left to Ollama (the plan's placement: {led.gpu_layers} layers): set below the "
                     "model's layers it moves the projector to the CPU (shouldDisableMMProjOffload)")
    else:
        lines.append(f"PARAMETER num_gpu {led.gpu_layers}")
    if s.ubatch_size != 512:  # Ollama's num_batch sets llama.cpp's batch and ubatch (default 512)
        lines.append(f"PARAMETER num_batch {s.ubatch_size}")
    lines += _ollama_spec_lines(p)
    env = [f"OLLAMA_NUM_PARALLEL={s.parallel}"]
    if s.flash_attn != ollama_flash_attn(p.gpu, p.inputs.backend):  # Ollama's default: the card's (auto)
        env.append(f"OLLAMA_FLASH_ATTENTION={int(s.flash_attn)}")
    if s.cache_type_v != "f16":  # one type for K and V, with flash attention (llamacpp_plan checks both)
        env.append(f"OLLAMA_KV_CACHE_TYPE={s.cache_type_v}")
    lines.append("# environment of `ollama serve`:")
    lines.append(" ".join(env) + " ollama serve")
    return "\n".join(lines)
