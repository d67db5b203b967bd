"""SGLang's defaults that depend on the card (SGLang 0.5.23, sglang/srt/arg_groups/memory_hook.py and
cuda_graph_hook.py): the prompt chunk one forward takes and the share of memory its static pool keeps."""

from __future__ import annotations

from llmsize.catalog.schema import ExtraParams, GpuSpec, ModelSpec


def _sglang_gpu_mib(gpu: GpuSpec) -> float:
    """The card's total as SGLang reads it (nvidia-smi memory.total, rocminfo), MiB."""
    return (gpu.memory_reported_bytes or gpu.memory_bytes) / 2**20


def sglang_chunked_prefill(gpu: GpuSpec) -> int:
    mib = _sglang_gpu_mib(gpu)
    return 2048 if mib < 20 * 1024 else 4096 if mib < 60 * 1024 else 8192 if mib < 160 * 1024 else 16384


def _sglang_decode_graph_bs(gpu: GpuSpec, tp: int) -> int:
    """The largest decode batch SGLang captures a CUDA graph for, by band (memory_hook.py)."""
    mib = _sglang_gpu_mib(gpu)
    if mib < 20 * 1024:
        return 8
    if mib < 35 * 1024:
        return 48 if tp < 4 else 160
    if mib < 60 * 1024:
        return 32 if tp < 4 else 160
    return (256 if tp < 4 else 512) if mib < 160 * 1024 else 512


def _prefill_graph_sizes(max_bs: int) -> int:
    """How many token counts SGLang captures a prefill graph for up to max_bs (cuda_graph_hook.py
    generate_prefill_cuda_graph_batch_sizes)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1025, 64))
             + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512)))
    return sum(1 for s in sizes if s <= max_bs)


# multimodal architectures that keep SGLang's prefill CUDA graphs (configs/model_config.py
# multimodal_breakable_cuda_graph_supported_model_archs), as the catalog's families name them
MM_PREFILL_GRAPH_FAMILIES = ("qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe", "kimi_k2",
                             "muse_glimmer_text", "kimi_linear")  # kimi_linear with a tower: Kimi K3
# architectures whose prefill graphs stop at a token count of their own, not at the chunk (0.5.23
# arg_groups/cuda_graph_hook.py apply_muse_glimmer_prefill_cuda_graph_max_bs_default: 512 for Muse Glimmer)
PREFILL_GRAPH_MAX_TOKENS = {"muse_glimmer_text": 512}


# SGLang serves these families text-only unless --enable-multimodal (0.5.23 configs/model_config.py,
# mm_disabled_models: Gemma3ForConditionalGeneration, Llama4ForConditionalGeneration): its model config is then not
# multimodal, so neither the margin of adjust_mem_fraction_for_vlm nor the multimodal rule on prefill graphs applies
SGLANG_TEXT_ONLY_FAMILIES = ("gemma3", "llama4")


def sglang_vision_tower(model: ModelSpec) -> ExtraParams | None:
    """The loaded vision tower of a model SGLang serves as multimodal by default (its vision_config recorded, or its
    encoder's shape), or None: no tower, or a family SGLang serves text-only unless told (SGLANG_TEXT_ONLY_FAMILIES)."""
    from llmsize.estimate.runtime_model import base_family, vision_tower_of

    return None if base_family(model) in SGLANG_TEXT_ONLY_FAMILIES else vision_tower_of(model)


def sglang_text_only_note(model: ModelSpec) -> str | None:
    """For a model with a vision tower that SGLang serves text-only unless --enable-multimodal (Gemma 3), what that
    means and what the flag costs; None otherwise."""
    from llmsize.estimate.runtime_model import vision_tower_of

    tower = vision_tower_of(model)
    if tower is None or sglang_vision_tower(model) is not None:
        return None
    factor, _ = vlm_factor(tower)
    return (f"SGLang serves this model text-only unless --enable-multimodal (mm_disabled_models): images are refused; "
            f"with the flag, its default fraction takes x {factor:.3f} for the vision tower "
            "(adjust_mem_fraction_for_vlm) and a multimodal model's rule on prefill graphs.")


def vlm_factor(tower: ExtraParams) -> tuple[float, str]:
    """adjust_mem_fraction_for_vlm (0.5.23 arg_groups/memory_hook.py): 0.95 x clamp(1 - 0.1 x (L x H^2 /
    (24 x 1024^2) - 1), 0.8, 1.05), a ViT-L/14 the baseline, L = getattr(vision_config, "num_hidden_layers", 24) and
    H = getattr(vision_config, "hidden_size", 1024): a Qwen3.5 tower of 27 blocks counted as `depth` is taken for 24
    (Qwen3.6-27B, 1,152 wide: 0.925), Gemma 4 26B-A4B's 27 x 1,152 give 0.910, Gemma 4 12B's embedder (neither
    attribute) 0.95. A tower whose vision_config is not recorded takes L from its parameters, 4 H^2 + 2 H I a layer
    (attention, MLP). With the factor, the words that say where L and H came from."""
    vc = tower.vision_config
    if vc is not None:
        layers = vc.num_hidden_layers if vc.num_hidden_layers is not None else 24
        hidden = vc.hidden_size if vc.hidden_size is not None else 1024
        said = (f"{layers} layers" + ("" if vc.num_hidden_layers is not None else
                                      " (SGLang's default: the vision_config has no num_hidden_layers)")
                + f" x {hidden:,} wide" + ("" if vc.hidden_size is not None else " (nor a hidden_size: the default)"))
    else:
        enc = tower.encoder
        hidden = enc.hidden_size
        layers = tower.params / (4 * hidden * hidden + 2 * hidden * enc.intermediate_size)
        said = f"{layers:.1f} layers (from its parameters) x {hidden:,} wide"
    ratio = layers * hidden * hidden / (24 * 1024 * 1024)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0))), said


def sglang_mem_fraction(gpu: GpuSpec, tp: int, pp: int = 1, mla: bool = False, tower: ExtraParams | None = None,
                        family: str | None = None) -> tuple[float, str]:
    """SGLang 0.5.23's mem_fraction_static when not given (arg_groups/memory_hook.py, the default path: no
    post-capture sizing), and how it came: round((total - reserved) / total, 3), total the card's MiB as nvidia-smi
    or rocminfo prints it, reserved = 512 + 1.5 x max(chunked_prefill_size, 2048) + tp x pp / 8 x 1024 + the CUDA
    graphs' (2 x the largest decode graph's batch, and on CUDA the prefill graphs': 8 a captured token count, 1,536
    for an MLA model; the sizes up to the chunk, or PREFILL_GRAPH_MAX_TOKENS), at least 10,240 on a card of more
    than 60 GiB. H100 0.830, H200 0.903, RTX 4090 0.704. A multimodal model (`tower`: its vision tower,
    sglang_vision_tower) loses the prefill graphs unless its architecture keeps them, and takes vlm_factor of the
    fraction."""
    mib = _sglang_gpu_mib(gpu)
    chunk = sglang_chunked_prefill(gpu)
    reserved = 512 + 1.5 * max(chunk, 2048) + tp * pp / 8 * 1024 + 2 * _sglang_decode_graph_bs(gpu, tp)
    prefill_graphs = gpu.vendor == "NVIDIA" and (tower is None or family in MM_PREFILL_GRAPH_FAMILIES)
    if prefill_graphs:  # prefill graphs are CUDA's default (BREAKABLE); off on HIP from 0.5.22
        reserved += 1.5 * 1024 if mla else 8 * _prefill_graph_sizes(PREFILL_GRAPH_MAX_TOKENS.get(family, chunk))
    if mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    f = round((mib - reserved) / mib, 3)
    why = (f"SGLang's default for this card at tp {tp}: (its {mib:,.0f} MiB - {reserved:,.0f} MiB of activations "
           "and CUDA graphs reserved) / its total")
    if tower is not None:
        factor, shape = vlm_factor(tower)
        f *= factor
        why += f", x {factor:.3f} for its vision tower (adjust_mem_fraction_for_vlm: {shape})"
    return f, why


# SGLang 0.5.23 caps a hybrid's running requests at max_mamba_cache_size // ratio (mem_cache/kv_cache_configurator.py
# resolve_max_num_reqs, _calculate_mamba_ratio): 3 state slots a request with the radix cache on
# (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO), and 2 more under the "extra_buffer" strategy, which "auto" picks with
# the overlap schedule (the default) for the architectures that support it (arg_groups/overrides.py
# _mamba_radix_cache_resolution, _MAMBA_EXTRA_BUFFER_ARCHS; allocation_sizing.get_mamba_tracking_slots: 2 with
# overlap): Qwen3-Next, Qwen3.5 / 3.6, Kimi Linear, Nemotron-H, Granite 4.0-H, Falcon-H1. LFM2 keeps no buffer: 3.
# Published: sgl-project/sglang#38846 (0.5.19, Qwopus3.6-27B-v2-FP8, of the Qwen3.5/3.6 family, an RTX 6000 Ada) logs
# "max_running_requests is capped to 9 by the mamba state cache (max_mamba_cache_size=47, 5 state slots per request)".
SGLANG_MAMBA_SLOTS_PER_REQUEST = 3
SGLANG_MAMBA_EXTRA_BUFFER_SLOTS = 2
SGLANG_MAMBA_EXTRA_BUFFER_FAMILIES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe",
                                      "kimi_linear", "nemotron_h", "granitemoehybrid", "falcon_h1")


def sglang_mamba_slots_per_request(family: str) -> int:
    """State slots SGLang's radix cache keeps a running request of a hybrid model, by its architecture's strategy."""
    extra = SGLANG_MAMBA_EXTRA_BUFFER_SLOTS if family in SGLANG_MAMBA_EXTRA_BUFFER_FAMILIES else 0
    return SGLANG_MAMBA_SLOTS_PER_REQUEST + extra
