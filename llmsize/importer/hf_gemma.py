"""config.json mappers of Google's Gemma 2, 3, 3n and 4: interleaved sliding-window and global layers, Gemma 4's
KV-sharing layers and per-layer embeddings, Gemma 3n's AltUp and LAuReL; and of Meta's Muse Glimmer, a Gemma 2
derivative."""

from __future__ import annotations

from llmsize.importer.config_fields import (
    TEXT_PART_ONLY,
    ConfigError,
    ConfigReader,
    Mapped,
    attention_entry,
    common_fields,
    head_counts,
    layer_stack_fields,
)


def map_gemma3(c: ConfigReader, model_type: str) -> Mapped:
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = head_counts(c)
    window = c.get("sliding_window")
    types = c.layer_types(layers, ("sliding_attention", "full_attention"))
    if types is None:
        pattern = c.get("sliding_window_pattern") or 6
        types = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)]
    if "sliding_attention" in types and window is None:
        raise ConfigError(f"{c.where}: sliding layers but sliding_window is null.", "Fix the config.json.")
    specs = []
    for t in types:
        mixer = attention_entry("sliding" if t == "sliding_attention" else "full", heads, kv, hd, qk_norm=True,
                      sliding_window=window if t == "sliding_attention" else None)
        specs.append({"mixer": mixer, "mlp": {"kind": "dense", "intermediate_size": inter}, "norms": 4})
    return Mapped({**common_fields(c, True), **layer_stack_fields(specs)},
                  [f"vision tower {TEXT_PART_ONLY}"])


def map_gemma2(c: ConfigReader, model_type: str) -> Mapped:
    """transformers Gemma2: every other layer slides (the first does: Gemma2Config's layer_types, `sliding_attention`
    where (i + 1) % 2, when config.json has none), 4 norms a layer (pre and post attention and MLP), no q/k norms;
    the embedding tied unless config.json says otherwise (Gemma2Config's tie_word_embeddings defaults to true)."""
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = head_counts(c)
    window = c.get("sliding_window")
    types = c.layer_types(layers, ("sliding_attention", "full_attention"))
    if types is None:
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
    if "sliding_attention" in types and window is None:
        raise ConfigError(f"{c.where}: sliding layers but sliding_window is null.", "Fix the config.json.")
    specs = [{"mixer": attention_entry("sliding" if t == "sliding_attention" else "full", heads, kv, hd,
                             sliding_window=window if t == "sliding_attention" else None),
              "mlp": {"kind": "dense", "intermediate_size": inter}, "norms": 4} for t in types]
    return Mapped({**common_fields(c, True), **layer_stack_fields(specs)})


def map_muse_glimmer(c: ConfigReader, model_type: str) -> Mapped:
    """Meta's Muse Glimmer text model (vLLM 0.34 model_executor/models/muse_glimmer.py, "a Gemma2 derivative"):
    layer_types slide a window of sliding_window or attend in full (NoPE); each layer's qkv and o projections, an
    output_gate_proj (hidden -> heads x head_dim, a sigmoid gate on the attention's output), a SiLU-gated MLP, four
    norms (input, post-attention, pre- and post-feedforward); the q/k norms and the embedding's norm have no
    weight; the final norm has one; lm_head untied unless the config ties it."""
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = head_counts(c)
    c.need("layer_types")
    types = c.layer_types(layers, ("sliding_attention", "full_attention"))
    window = c.need("sliding_window")[0] if "sliding_attention" in types else None
    specs = [{"mixer": attention_entry("sliding" if t == "sliding_attention" else "full", heads, kv, hd,
                                       output_gate=True, sliding_window=window if t == "sliding_attention" else None),
              "mlp": {"kind": "dense", "intermediate_size": inter}, "norms": 4} for t in types]
    return Mapped({**common_fields(c, False), **layer_stack_fields(specs)})


def map_gemma4(c: ConfigReader, model_type: str) -> Mapped:
    """transformers gemma4 / gemma4_unified (gemma-architecture.md): sliding layers GQA with head_dim,
    full layers num_global_key_value_heads x global_head_dim with K = V; 4 norms and a layer_scalar.
    The E2B/E4B models (modeling_gemma4.py): the last num_kv_shared_layers layers read the cache of the last earlier
    layer of their attention type (is_kv_shared_layer), their MLP twice intermediate_size wide where
    use_double_wide_mlp (`config.use_double_wide_mlp and is_kv_shared_layer`: E2B's 15-34 at 12,288, the rest
    6,144 in its safetensors header); per-layer embeddings of hidden_size_per_layer_input a layer."""
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = head_counts(c)
    c.need("layer_types")
    types = c.layer_types(layers, ("sliding_attention", "full_attention"))
    first_shared = _first_shared_layer(c, layers, types, c.get("num_kv_shared_layers") or 0)
    specs = []
    for i, t in enumerate(types):
        if c.get("enable_moe_block"):
            experts, k, moe_inter = c.need("num_experts", "top_k_experts", "moe_intermediate_size")
            mlp = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": moe_inter,
                   "num_shared_experts": 1, "shared_intermediate_size": inter}
        else:
            wide = c.get("use_double_wide_mlp") and i >= first_shared > 0
            mlp = {"kind": "dense", "intermediate_size": inter * (2 if wide else 1)}
        if t == "sliding_attention":
            mixer = attention_entry("sliding", heads, kv, hd, qk_norm=True, sliding_window=c.need("sliding_window")[0])
        else:
            mixer = attention_entry("full", heads, c.get("num_global_key_value_heads") or kv,
                                    c.get("global_head_dim") or hd, qk_norm=True,
                                    k_eq_v=bool(c.get("attention_k_eq_v")))
        if i >= first_shared:
            mixer["kv_shared"] = True
        specs.append({"mixer": mixer, "mlp": mlp, "norms": 4, "extra_params": 1})
    return Mapped({**common_fields(c, True), **layer_stack_fields(specs), **_per_layer_input(c)},
                  [f"vision/audio embedders {TEXT_PART_ONLY}"])


def _first_shared_layer(c: ConfigReader, layers: int, types: list[str], shared) -> int:
    """The first of the last `shared` (num_kv_shared_layers) layers, which read the cache of the last earlier layer
    of their attention type (transformers modeling_gemma4.py / modeling_gemma3n.py is_kv_shared_layer)."""
    if type(shared) is not int or not 0 <= shared < layers:
        raise ConfigError(f"{c.where}: num_kv_shared_layers is {shared!r:.40}; expected a count from 0 to "
                          f"{layers - 1} (num_hidden_layers less one).", "Fix the config.json.")
    first = layers - shared
    if shared and not {types[i] for i in range(first, layers)} <= set(types[:first]):
        raise ConfigError(f"{c.where}: a layer among the last {shared} (num_kv_shared_layers) has no earlier layer "
                          "of its attention type to share a cache with.", "Fix the config.json.")
    return first


def _per_layer_input(c: ConfigReader) -> dict:
    """Per-layer embeddings (hidden_size_per_layer_input a layer, vocab_size_per_layer_input rows), where the
    config has them."""
    width = c.get("hidden_size_per_layer_input")
    if not width:
        return {}
    return {"per_layer_input": {"hidden_size": width, "vocab_size": c.need("vocab_size_per_layer_input")[0]}}


def map_gemma3n(c: ConfigReader, model_type: str) -> Mapped:
    """transformers Gemma3nTextConfig / modeling_gemma3n.py: Gemma 4 E's layers before it (sliding and full
    attention with q/k norms, per-layer embeddings, the last num_kv_shared_layers layers reading an earlier layer's
    cache, 4 norms a layer) plus AltUp (altup_num_inputs streams) and LAuReL (laurel_rank) in every layer;
    intermediate_size one width or one a layer; layer_types, where the config has none, a full layer after every
    four sliding ones (Gemma3nTextConfig.__post_init__: full where (i + 1) % 5 == 0). Activation sparsity (the
    first layers' MLP gate, activation_sparsity_pattern) changes no weight a step reads."""
    layers, window = c.need("num_hidden_layers", "sliding_window")
    heads, kv, hd = head_counts(c)
    inter = c.raw.get("intermediate_size")  # a list (one a layer) where the config was saved after __post_init__
    widths = inter if isinstance(inter, list) else [c.need("intermediate_size")[0]] * layers
    if len(widths) != layers or not all(type(w) is int and 0 < w <= 2**24 for w in widths):
        raise ConfigError(f"{c.where}: intermediate_size {str(inter)[:40]} is neither a width nor one a layer for "
                          f"its {layers} layers.", "Fix the config.json.")
    types = c.layer_types(layers, ("sliding_attention", "full_attention"))
    if types is None:
        types = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(layers)]
    first_shared = _first_shared_layer(c, layers, types, c.need("num_kv_shared_layers")[0])
    specs = []
    for i, t in enumerate(types):
        mixer = attention_entry("sliding" if t == "sliding_attention" else "full", heads, kv, hd, qk_norm=True,
                      sliding_window=window if t == "sliding_attention" else None)
        if i >= first_shared:
            mixer["kv_shared"] = True
        specs.append({"mixer": mixer, "mlp": {"kind": "dense", "intermediate_size": widths[i]}, "norms": 4})
    streams, rank = c.need("altup_num_inputs", "laurel_rank")
    return Mapped({**common_fields(c, True), **layer_stack_fields(specs), **_per_layer_input(c),
                   "altup": {"num_inputs": streams}, "laurel_rank": rank},
                  [f"vision/audio towers {TEXT_PART_ONLY}"])
