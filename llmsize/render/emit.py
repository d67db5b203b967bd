"""The engine command a plan corresponds to, so users scale out on an engine they already run.

vLLM (`vllm serve`): --tensor-parallel-size, --pipeline-parallel-size, --max-model-len,
--gpu-memory-utilization, --kv-cache-dtype (auto | fp8), --quantization, --max-num-seqs (vLLM engine
arguments). SGLang (`python -m sglang.launch_server`): --tp-size, --pp-size, --context-length,
--mem-fraction-static, --kv-cache-dtype (auto | fp8_e4m3), --quantization, --max-running-requests
(docs.sglang.io server arguments). Both read a checkpoint's own quantization from its config; only FP8 can
be applied on the fly to a 16-bit checkpoint (`--quantization fp8`), other formats need a quantized one.
"""

from __future__ import annotations

import shlex

from llmsize.estimate.engines import given_util, launch_sequences
from llmsize.estimate.plan import Plan
from llmsize.estimate.runtimes import RUNTIME_NAMES
from llmsize.estimate.speculative import spec_pipeline_note
from llmsize.render.emit_fleet import (
    ENGINE_KV,
    family_args,
    node_launch,
    remote_code_args,
    spec_flags,
    text_alone_args,
)

ONLINE = {"fp8"}  # formats the engines quantize to while loading a 16-bit checkpoint
FLAGS = {
    "vllm": {"prog": ("vllm", "serve"), "tp": "--tensor-parallel-size", "pp": "--pipeline-parallel-size",
             "len": "--max-model-len", "util": "--gpu-memory-utilization", "seqs": "--max-num-seqs",
             "kv": "--kv-cache-dtype", "quant": "--quantization"},
    "sglang": {"prog": ("python", "-m", "sglang.launch_server"), "tp": "--tp-size", "pp": "--pp-size",
               "len": "--context-length", "util": "--mem-fraction-static", "seqs": "--max-running-requests",
               "kv": "--kv-cache-dtype", "quant": "--quantization"},
}


def serve_command(p: Plan, engine: str, local_path: str | None = None, max_model_len: int | None = None) -> str:
    """The launch line: the user's --max-model-len (else the plan's context, capped at the model's), and as
    the most sequences the engine may run at once, what both the plan's memory and the engine's own ledger hold at
    that context (engines.launch_sequences; a comment above the line where the engine would not start)."""
    model = local_path or p.model.hf_repo or p.model.id
    notes = []
    if not (local_path or p.model.hf_repo):
        notes.append(f"# {p.model.id} has no hf_repo in the catalog: put the checkpoint path or repo id here")
    quant = None
    if p.fmt.id != p.model.release.quant:
        if p.fmt.id in ONLINE and p.model.release.quant in ("bf16", "fp16", "fp32"):
            quant = p.fmt.id
        else:
            maker = ("a GGUF file (llama.cpp's convert_hf_to_gguf.py and llama-quantize; vLLM's GGUF support is "
                     "experimental)" if p.fmt.id.startswith(("gguf-", "ggml-"))
                     else "a checkpoint with that format per component (a ModelOpt MIXED_PRECISION export, as "
                     "NVIDIA's NVFP4 releases are)" if p.fmt.recipe
                     else f"a {p.fmt.id} checkpoint (e.g. made with llm-compressor)")
            notes.append(f"# the plan assumes {p.fmt.id} weights but the checkpoint is {p.model.release.quant}: "
                         f"serve {maker}")
    kv = p.inputs.kv_dtype
    kv_arg = ENGINE_KV[engine].get(kv)
    if kv_arg is None and kv not in ("bf16", "fp16", "fp32"):
        notes.append(f"# --kv-dtype {kv} has no {engine} equivalent here: the engine keeps its default cache dtype")
    ctx = max_model_len or min(p.inputs.context_tokens, p.model.max_position_embeddings)
    if max_model_len and max_model_len > p.model.max_position_embeddings:
        notes.append(f"# --max-model-len {max_model_len:,} is beyond the model's {p.model.max_position_embeddings:,} "
                     "positions: the engine refuses it unless told to override")
    # with --spec, what the cache holds beside the draft's weights and cache (speculative.SpecDecode.max_sequences)
    held = p.speculative.max_sequences if p.speculative is not None else p.max_sequences
    seqs = held if held >= 1 else None
    capped = not max_model_len and p.inputs.context_tokens > p.model.max_position_embeddings
    if capped:  # the line runs at the model's limit; the plan's sequence count is at the context asked for
        notes.append(f"# --context {p.inputs.context_tokens:,} is beyond the model's "
                     f"{p.model.max_position_embeddings:,} positions: the line runs at {ctx:,}, --max-num-seqs left "
                     f"to the engine (plan --context {ctx} for the sequences that length holds)")
        seqs = None
    elif seqs is None:
        notes.append(f"# not one sequence of {p.inputs.context_tokens:,} tokens fits this plan's memory: "
                     "--max-num-seqs left to the engine")
    if seqs is not None or not capped:  # the engine's own ledger at the line's length: its requests, or no start
        seqs, refused = launch_sequences(p, engine, ctx, seqs)
        if refused:
            notes.append(f"# {RUNTIME_NAMES[engine]}: {refused}")
    tp, pp = p.inputs.tp, p.inputs.pp
    spec_pp = spec_pipeline_note(p.inputs.spec, engine, pp)
    if spec_pp:
        notes.append(f"# {spec_pp}")
    flags = FLAGS[engine]
    args = list(flags["prog"]) + ([model] if engine == "vllm" else ["--model-path", model])
    for key, value in (("tp", tp), ("pp", pp), ("len", ctx), ("util", given_util(p)),
                       ("seqs", seqs), ("kv", kv_arg), ("quant", quant)):
        if value is not None:
            args += [flags[key], value]
    if p.inputs.fp4_kernel == "marlin":  # vLLM's own flag (Rodder5/sm120-quant-bench's launch line, vLLM 0.26.0)
        args += ["--linear-backend", "marlin"]
    args += text_alone_args(p.model, p.inputs.language_model_only)
    args += spec_flags(engine, p.inputs.spec)
    args += remote_code_args(p.model) + family_args(p.model, engine)
    node_notes, node_flags = node_launch(engine, p.comm.nodes if p.comm is not None else 1, "the server")
    notes += node_notes
    args += node_flags
    line = " ".join(shlex.quote(str(a)) for a in args)
    return "\n".join(notes + [line])
