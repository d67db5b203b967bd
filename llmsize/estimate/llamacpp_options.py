"""llama.cpp's (and Ollama's) options as the command line gives them, and what follows from them alone: the
settings its ledger takes, the tokens one --parallel slot holds, Ollama's default num_ctx, and the memory the card
offers llama.cpp's allocator."""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.errors import InvalidValueError
from llmsize.estimate.llamacpp_memory import LlamaCppSettings
from llmsize.units import GiB

OLLAMA_KV_TYPES = ("f16", "q8_0", "q4_0")  # OLLAMA_KV_CACHE_TYPE's values (ollama docs/faq.md)


@dataclass(frozen=True)
class LlamaCppOptions:
    """The CLI's llama.cpp options, as given."""

    context: int
    parallel: int = 1
    kv_unified: bool = False
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: str | None = None  # on | off | auto | None (the engine's default)
    ubatch_size: int = 512
    swa_full: bool = False
    gpu_layers: int | None = None
    n_cpu_moe: int = 0
    cpu_moe: bool = False
    output_first: bool = True  # -ngl's first layer the output (llama.cpp since PR #18148); False: a build before
    mmproj: object = None  # --mmproj: a type (the model's tower as an mmproj file of it) or a read file (MmprojFile)


def card_memory(gpu, wired_limit_bytes: float | None = None) -> tuple[int, str]:
    """What the card offers a CUDA/ROCm/Metal allocator, and in words what that is: the CUDA total where known, else
    the reported total (else the nominal size); a unified machine's GPU share (Metal's working set, or
    --wired-limit-gb) where that is less; on one whose GPU may use all its RAM (DGX Spark, Jetson), the share the
    plan budgets there too (capacity.SHARED_RAM_GPU_UTIL), the OS and its page cache keeping the rest, so that the
    ledger and the plan agree."""
    from llmsize.estimate.capacity import SHARED_RAM_GPU_UTIL
    from llmsize.estimate.unified import usable_memory

    usable = usable_memory(gpu, wired_limit_bytes)
    own = gpu.memory_cuda_bytes or gpu.memory_reported_bytes or gpu.memory_nominal_bytes
    if not usable.unified:
        return own, ("the total CUDA reports" if gpu.memory_cuda_bytes else "the total the driver reports"
                     if gpu.memory_reported_bytes else "the card's nominal size (no reported total is catalogued)")
    if usable.shares_all_ram:
        return int(min(own, usable.bytes) * SHARED_RAM_GPU_UTIL), f"{SHARED_RAM_GPU_UTIL:g} of {usable.basis}"
    return int(min(own, usable.bytes)), usable.basis


def card_bytes(gpu, wired_limit_bytes: float | None = None) -> int:
    """What the card offers its allocator (card_memory), in bytes."""
    return card_memory(gpu, wired_limit_bytes)[0]


def ollama_default_context(gpu, model, wired_limit_bytes: float | None = None) -> tuple[int, str]:
    """Ollama's num_ctx when none is set, by the GPU memory it detects: "< 24 GiB VRAM: 4k context - 24-48 GiB
    VRAM: 32k context - >= 48 GiB VRAM: 256k context" (ollama/ollama docs/context-length.mdx), in its code at
    "slightly lower thresholds (47/23 GiB vs. 48/24 GiB)" of the devices' total memory (server/routes.go, v0.33.2:
    `totalVRAM >= 23*format.GibiByte`), so that a 24 GB card's 23.6 GiB gets 32k; at most the model's own context
    (its `ollama ps` example: gemma4 at 131072). The memory is what the card offers its allocator (card_bytes: the
    CUDA total; on a Mac, Metal's working set)."""
    ctx = min(ollama_num_ctx(gpu, wired_limit_bytes), model.max_position_embeddings)
    return ctx, ollama_context_words(ctx, gpu, wired_limit_bytes)


def ollama_context(context: int, model) -> tuple[int, str | None]:
    """The num_ctx Ollama runs for an asked context: at most the model's trained context ("requested context size
    too large for model", llm/server.go, ollama @fb307609), with the note that says so where it lowers it."""
    if context <= model.max_position_embeddings:
        return context, None
    return model.max_position_embeddings, (
        f"--context {context:,}: Ollama lowers num_ctx to the model's trained context, "
        f"{model.max_position_embeddings:,} (\"requested context size too large for model\", llm/server.go, "
        "ollama @fb307609)")


def ollama_context_words(ctx: int, gpu, wired_limit_bytes: float | None = None, each_model: bool = False) -> str:
    """The note that says a context is Ollama's default num_ctx (`each_model`: capped at each model's own)."""
    return (f"--context {ctx:,}: Ollama's default num_ctx where the GPU offers "
            f"{card_bytes(gpu, wired_limit_bytes) / GiB:,.1f} GiB" + (", each model at most its own" if each_model
                                                                      else "") + " (--context sets another)")


OLLAMA_NUM_CTX_RULE = "4,096 below 23 GiB of GPU memory, 32,768 below 47 GiB, 262,144 above"  # ollama_num_ctx's


def ollama_num_ctx(gpu, wired_limit_bytes: float | None = None) -> int:
    """Ollama's default num_ctx by the GPU memory alone (ollama_default_context caps it at a model's context); on a
    Mac, Metal's working set or the wired limit given."""
    vram = card_bytes(gpu, wired_limit_bytes) / GiB
    return 4096 if vram < 23 else 32768 if vram < 47 else 262144


def ollama_flash_attn(gpu=None, backend: str | None = None) -> bool:
    """Ollama's flash attention where OLLAMA_FLASH_ATTENTION is unset: `--flash-attn auto` to llama-server where
    the devices support it (llm/llama_server.go LlamaServerFlashAttention, ollama @fb307609; its llama engine since
    v0.13.4, #13052, 2025-12-12; docs/faq.mdx: "Ollama uses Flash Attention automatically when the selected backend
    and devices support it"): Metal, ROCm, Vulkan, and CUDA from compute capability 6.0 but 7.2 (ml/device.go
    cudaFlashAttentionSupported; any device under `backend` vulkan); a card whose capability the catalog lacks is
    taken as supported."""
    if (backend or "").lower() == "vulkan":
        return True
    cc = getattr(gpu, "cc", None)
    return not (getattr(gpu, "vendor", None) == "NVIDIA" and cc is not None and (cc < (6, 0) or cc == (7, 2)))


def flash_attn_on(engine: str | None, flash_attn: str | None, gpu=None, backend: str | None = None) -> bool:
    """Whether the engine runs flash attention: --flash-attn as given (auto: llama.cpp's, on where the GPU runs the
    attention, as planned; Ollama's, OLLAMA_FLASH_ATTENTION unset, its default), else llama.cpp's default (on) and
    Ollama's (on where the card supports it: ollama_flash_attn)."""
    if flash_attn in ("on", "off"):
        return flash_attn == "on"
    return ollama_flash_attn(gpu, backend) if engine == "ollama" else True


def settings(engine: str, o: LlamaCppOptions, n_layer: int, gpu=None, backend: str | None = None
             ) -> LlamaCppSettings:
    fa = flash_attn_on(engine, o.flash_attn, gpu, backend)
    return LlamaCppSettings(ctx_size=o.context * o.parallel if engine == "ollama" else o.context,
                            parallel=o.parallel, kv_unified=o.kv_unified and engine != "ollama",
                            cache_type_k=o.cache_type_k.lower(), cache_type_v=o.cache_type_v.lower(), flash_attn=fa,
                            ubatch_size=o.ubatch_size, swa_full=o.swa_full, gpu_layers=o.gpu_layers,
                            n_cpu_moe=n_layer if o.cpu_moe else o.n_cpu_moe, output_first=o.output_first,
                            mmproj=o.mmproj, mmproj_host=mmproj_on_host(engine, o, n_layer))


def mmproj_on_host(engine: str, o: LlamaCppOptions, n_layer: int) -> bool:
    """Whether the engine keeps an mmproj on the CPU: Ollama does where num_gpu is set below the model's layers
    (0 included: shouldDisableMMProjOffload passes --no-mmproj-offload, llm/llama_server.go, ollama @fb307609; its
    own placement, num_gpu unset, keeps it on the GPU and widens --fit's margin for it); llama-server keeps it on
    the GPU unless told --no-mmproj-offload."""
    return bool(o.mmproj) and engine == "ollama" and o.gpu_layers is not None and o.gpu_layers < n_layer + 1


def slot_tokens(engine: str, o: LlamaCppOptions) -> int:
    """The tokens one slot holds: llama.cpp's n_ctx_seq (its -c shared by the --parallel slots, each c / np padded
    to 256 cells, unless --kv-unified), Ollama's num_ctx."""
    from llmsize.estimate.llamacpp_memory import context_cells

    return context_cells(settings(engine, o, 0))[1]


def slot_context(engine: str, o: LlamaCppOptions, prompt_tokens: int | None) -> tuple[int, str | None]:
    """The sequence a plan sizes under the engine's slots: one slot's tokens (slot_tokens) where -c is shared by the
    --parallel slots, with the note that says so; the whole -c (no note) where one slot holds it. A --prompt longer
    than a slot is refused."""
    per_slot = slot_tokens(engine, o)
    if per_slot >= o.context:
        return o.context, None
    if prompt_tokens is not None and prompt_tokens > per_slot:
        raise InvalidValueError(f"--prompt {prompt_tokens:,} is longer than the {per_slot:,} tokens each of the "
                                f"--parallel {o.parallel} slots holds (--context {o.context:,} shared).",
                                "Raise --context, lower --parallel, or add --kv-unified.")
    return per_slot, (f"--context {o.context:,} is llama.cpp's -c, shared by the --parallel {o.parallel} slots: each "
                      f"holds {per_slot:,} tokens, the sequence this plan sizes (--kv-unified lets one reach all)")


def check_options(engine: str, o: LlamaCppOptions) -> None:
    """Refuse llama.cpp options that contradict each other or that the engine (Ollama) has no setting for."""
    if o.cpu_moe and o.n_cpu_moe:
        raise InvalidValueError(f"--cpu-moe (every layer's experts) and --n-cpu-moe {o.n_cpu_moe} disagree.",
                                "Give one of them.")
    if engine == "ollama" and o.kv_unified:
        raise InvalidValueError("--kv-unified is llama-server's -kvu, and Ollama has no such setting (each of its "
                                "OLLAMA_NUM_PARALLEL slots gets num_ctx).", "Drop --kv-unified, or use --engine "
                                "llamacpp.")
    if engine == "ollama" and (o.cpu_moe or o.n_cpu_moe):
        flag = "--cpu-moe" if o.cpu_moe else f"--n-cpu-moe {o.n_cpu_moe}"
        raise InvalidValueError(f"{flag}: Ollama has no setting that keeps routed experts on the host (its num_gpu "
                                "moves whole layers).", "Use --gpu-layers N, or --engine llamacpp for --n-cpu-moe.")
    s = settings(engine, o, 0)
    if engine == "ollama" and s.swa_full:
        raise InvalidValueError("--swa-full: Ollama has no setting for a full-size sliding-window cache (none among "
                                "its Modelfile parameters, docs/modelfile.md, or its server's environment, "
                                "docs/faq.md).", "Drop --swa-full, or use --engine llamacpp.")
    if engine == "ollama" and s.cache_type_k not in OLLAMA_KV_TYPES:
        raise InvalidValueError(f"--cache-type-k/-v {s.cache_type_k}: Ollama's OLLAMA_KV_CACHE_TYPE takes "
                                f"{', '.join(OLLAMA_KV_TYPES)} (docs/faq.md).",
                                "Give q8_0 or q4_0, or use --engine llamacpp.")
    if engine == "ollama" and s.cache_type_k != s.cache_type_v:
        raise InvalidValueError(
            f"--cache-type-k {s.cache_type_k} --cache-type-v {s.cache_type_v}: Ollama sets one type for K and V "
            "(OLLAMA_KV_CACHE_TYPE).", "Give both the same type, or use --engine llamacpp.")
    if engine == "ollama" and s.cache_type_k != "f16" and not s.flash_attn:
        raise InvalidValueError(
            f"--cache-type-k/-v {s.cache_type_k} without flash attention: a quantized V cache needs it (llama.cpp, "
            "which Ollama runs, refuses one without).", "Drop --flash-attn off, or use an f16 cache.")
