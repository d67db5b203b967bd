"""config.json mappers of mixture-of-experts decoders: Qwen3-MoE-style attention over experts, DeepSeek's MLA
(and V3.2's sparse attention indexer), Llama 4, gpt-oss, GLM-4.5 MoE, ERNIE 4.5 MoE."""

from __future__ import annotations

from llmsize.errors import shown
from llmsize.importer.config_fields import (
    QK_NORM_MOE,
    ConfigError,
    ConfigReader,
    Mapped,
    attention_entry,
    common_fields,
    head_counts,
    layer_stack_fields,
    layer_windows,
    mtp_notes,
)
from llmsize.importer.extras import nextn_layers


def map_moe_dense_attn(c: ConfigReader, model_type: str) -> Mapped:
    """Mixtral, MiniMax-M2 and Qwen3-MoE: every layer (bar Qwen's mlp_only_layers) routes to experts, no shared one."""
    layers = c.need("num_hidden_layers")[0]
    heads, kv, hd = head_counts(c)
    windows = layer_windows(c, model_type, layers)
    if model_type in ("mixtral", "minimax_m2"):
        experts, k, inter = c.need("num_local_experts", "num_experts_per_tok", "intermediate_size")
        dense_layers: set[int] = set()
        if c.get("shared_intermediate_size"):
            raise ConfigError(f"{c.where}: shared_intermediate_size {c.get('shared_intermediate_size')!r} (a shared "
                              "expert), which this model type's mapping does not hold.",
                              "Plan a GGUF of the model (its tensors say what each layer holds).")
    else:
        experts, k, inter = c.need("num_experts", "num_experts_per_tok", "moe_intermediate_size")
        step = c.get("decoder_sparse_step") or 1
        only = c.get("mlp_only_layers") or []
        if not isinstance(only, list) or not all(type(i) is int for i in only):
            raise ConfigError(f"{c.where}: mlp_only_layers is not a list of layer indices.", "Fix the config.json.")
        dense_layers = set(only) | {i for i in range(layers) if (i + 1) % step}
    moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter}
    specs = []
    for i, window in enumerate(windows):
        mixer = attention_entry("sliding" if window else "full", heads, kv, hd,
                      qk_norm=model_type in QK_NORM_MOE or (model_type == "minimax_m2" and bool(c.get("use_qk_norm"))),
                      bias="all" if c.get("attention_bias") else "none", sliding_window=window)
        mlp = {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0]} if i in dense_layers else moe
        specs.append({"mixer": mixer, "mlp": mlp})
    return Mapped({**common_fields(c, False), **layer_stack_fields(specs)},
                  mtp_notes(c.get("use_mtp") and c.get("num_mtp_modules"), "module"))


# model types whose every MLA layer carries DeepSeek Sparse Attention's indexer: DeepSeek-V3.2, and GLM-5's
# glm_moe_dsa, DeepSeek-V3.2's layers at other widths (vLLM's GlmMoeDsaForCausalLM subclasses its DeepseekV2 model;
# mlx-lm's glm_moe_dsa.py: `class Model(DSV32Model)`)
SPARSE_ATTENTION = ("deepseek_v32", "glm_moe_dsa")


def _indexer_reuse(c: ConfigReader, layers: int) -> list[bool]:
    """Which sparse-attention layers reuse an earlier layer's top-k instead of running their own indexer (GLM-5.2:
    indexer_types 'full' or 'shared' a layer; IndexCache, arXiv 2603.12201). Without indexer_types, vLLM's rule
    from index_topk_freq and index_skip_topk_offset (deepseek_v2.py: a layer skips the top-k where
    max(layer - offset + 1, 0) % freq != 0); neither: every layer runs its own."""
    types = c.get("indexer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or set(types) - {"full", "shared"}:
            odd = sorted({str(t) for t in types} - {"full", "shared"}) if isinstance(types, list) else []
            raise ConfigError(f"{c.where}: indexer_types is not one of 'full' or 'shared' for each of the {layers} "
                              f"layers{f' (it holds {shown(odd[0], 20)!r})' if odd else ''}.", "Fix the config.json.")
        if types[0] != "full":
            raise ConfigError(f"{c.where}: indexer_types starts with a 'shared' layer, which has no earlier top-k "
                              "to reuse.", "Fix the config.json.")
        return [t == "shared" for t in types]
    freq, offset = (c.get(k) for k in ("index_topk_freq", "index_skip_topk_offset"))
    freq, offset = 1 if freq is None else freq, 0 if offset is None else offset
    if type(freq) is not int or type(offset) is not int or freq < 1 or offset < 0:
        raise ConfigError(f"{c.where}: index_topk_freq {freq!r} / index_skip_topk_offset {offset!r} are not a "
                          "positive period and a non-negative offset.", "Fix the config.json.")
    return [max(i - offset + 1, 0) % freq != 0 for i in range(layers)]


def _dense_then_moe(c: ConfigReader, layers: int, router_bias: bool) -> list[dict]:
    """Each layer's MLP in DeepSeek-V3's layout, which GLM-4.5's and Kimi K2's keep: the first
    first_k_dense_replace layers dense, then every moe_layer_freq-th layer n_routed_experts (num_experts_per_tok of
    moe_intermediate_size) and n_shared_experts of the same width; `router_bias`: the router's
    e_score_correction_bias."""
    dense = {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0]}
    experts = c.get("n_routed_experts")
    if not experts:
        return [dense] * layers
    k, inter = c.need("num_experts_per_tok", "moe_intermediate_size")
    moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter}
    if c.get("n_shared_experts"):
        moe["num_shared_experts"] = c.get("n_shared_experts")
    if router_bias:
        moe["router_bias"] = True
    first, freq = c.get("first_k_dense_replace") or 0, c.get("moe_layer_freq") or 1
    return [moe if i >= first and i % freq == 0 else dense for i in range(layers)]


def _with_nextn(c: ConfigReader, fields: dict, last: dict, notes: list[str] | None = None) -> Mapped:
    """The mapped fields, with the checkpoint's multi-token-prediction layers (num_nextn_predict_layers) as an extra
    (importer.extras.nextn_layers)."""
    mtp = nextn_layers(c.get("num_nextn_predict_layers"), fields["hidden_size"], fields["vocab_size"], last)
    return Mapped({**fields, "extra": [mtp]} if mtp else fields, list(notes or []))


def map_deepseek(c: ConfigReader, model_type: str) -> Mapped:
    layers, heads = c.need("num_hidden_layers", "num_attention_heads")
    kv_rank, nope, rope, v = c.need("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    mixer = {"kind": "mla", "num_attention_heads": heads, "kv_lora_rank": kv_rank, "qk_nope_head_dim": nope,
             "qk_rope_head_dim": rope, "v_head_dim": v}
    if c.get("q_lora_rank"):
        mixer["q_lora_rank"] = c.get("q_lora_rank")
    if model_type in SPARSE_ATTENTION:  # DeepSeek Sparse Attention: the lightning indexer of every layer
        n, d, k = c.need("index_n_heads", "index_head_dim", "index_topk")
        mixer["indexer"] = {"n_heads": n, "head_dim": d, "topk": k}
    reuses = _indexer_reuse(c, layers) if model_type in SPARSE_ATTENTION else [False] * layers
    # DeepSeek-V3's e_score_correction_bias comes with its noaux_tc routing
    mlps = _dense_then_moe(c, layers, router_bias=c.get("topk_method") == "noaux_tc")
    shared = {**mixer, "indexer": {**mixer["indexer"], "shared": True}} if any(reuses) else mixer
    specs = [{"mixer": shared if reuses[i] else mixer, "mlp": mlp} for i, mlp in enumerate(mlps)]
    notes = [f"{sum(reuses)} of {layers} layers reuse an earlier layer's top-k (indexer_types 'shared'): no indexer "
             "weights or key cache there"] if any(reuses) else []
    return _with_nextn(c, {**common_fields(c, False), **layer_stack_fields(specs)}, specs[-1], notes)


def map_llama4(c: ConfigReader, model_type: str) -> Mapped:
    """Llama 4 (llama4_text, transformers Llama4TextConfig and its defaults): RoPE layers attend within chunks of
    attention_chunk_size, every no_rope_layer_interval-th layer (no_rope_layers: 0) globally without RoPE; moe_layers
    (every interleave_moe_layer_step-th) route to num_experts_per_tok of num_local_experts experts of
    intermediate_size beside one shared expert of that size, the others run a dense MLP of intermediate_size_mlp.
    Its QK norm is an L2 norm without weights."""
    layers = c.need("num_hidden_layers")[0]
    heads, kv, hd = head_counts(c)
    experts, k, inter, dense_inter = c.need("num_local_experts", "num_experts_per_tok", "intermediate_size",
                                            "intermediate_size_mlp")
    rope = c.get("no_rope_layers")
    if rope is None or rope == []:  # meta-llama's own configs carry [], which transformers reads as the default
        interval = c.get("no_rope_layer_interval") or 4
        rope = [int((i + 1) % interval != 0) for i in range(layers)]
    step = c.get("interleave_moe_layer_step") or 1
    moe_layers = c.get("moe_layers")
    if moe_layers is None:
        moe_layers = list(range(step - 1, layers, step))
    for name, v in (("no_rope_layers", rope), ("moe_layers", moe_layers)):
        if not isinstance(v, list) or not all(type(i) is int for i in v):
            raise ConfigError(f"{c.where}: {name} is not a list of integers.", "Fix the config.json.")
    if len(rope) < layers or any(i not in (0, 1) for i in rope):
        raise ConfigError(f"{c.where}: no_rope_layers has {len(rope)} entries for {layers} layers, or an entry not 0 "
                          "or 1 (1: the layer uses RoPE).", "Fix the config.json.")
    bad = [i for i in moe_layers if not 0 <= i < layers]
    if bad or len(set(moe_layers)) != len(moe_layers):
        held = shown(bad[0] if bad else "a repeated index", 20)
        raise ConfigError(f"{c.where}: moe_layers holds {held}, not a layer index of 0 to {layers - 1} given once.",
                          "Fix the config.json.")
    chunk = c.get("attention_chunk_size")
    moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter,
           "num_shared_experts": 1, "shared_intermediate_size": inter}
    dense = {"kind": "dense", "intermediate_size": dense_inter}
    routed = set(moe_layers)
    specs = [{"mixer": attention_entry("sliding", heads, kv, hd, sliding_window=chunk) if rope[i] and chunk
              else attention_entry("full", heads, kv, hd), "mlp": moe if i in routed else dense} for i in range(layers)]
    notes = []
    if chunk and any(rope[:layers]):
        notes.append(f"chunked local attention (attention_chunk_size {chunk}) on the RoPE layers costed as a window "
                     "of one chunk: their cache holds at most a chunk, as llama.cpp's chunked cache does (vLLM's and "
                     "SGLang's depend on their release and settings)")
    return Mapped({**common_fields(c, False), **layer_stack_fields(specs)}, notes)


def map_gpt_oss(c: ConfigReader, model_type: str) -> Mapped:
    layers, inter, experts, k = c.need("num_hidden_layers", "intermediate_size", "num_local_experts",
                                       "num_experts_per_tok")
    heads, kv, hd = head_counts(c)
    types = c.layer_types(layers, ("sliding_attention", "full_attention")) or [
        "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter,
           "bias": True, "router_bias": True}
    specs = []
    for t in types:
        sliding = t == "sliding_attention"
        specs.append({"mixer": attention_entry("sliding" if sliding else "full", heads, kv, hd, bias="all", sinks=True,
                                     sliding_window=c.need("sliding_window")[0] if sliding else None),
                      "mlp": moe})
    return Mapped({**common_fields(c, False), **layer_stack_fields(specs)})


def map_glm4_moe(c: ConfigReader, model_type: str) -> Mapped:
    """GLM-4.5, 4.6, 4.7 and 4.5-Air (transformers Glm4MoeAttention, Glm4MoeMoE): GQA whose q/k/v carry a bias where
    attention_bias is set (o_proj none), q/k norms where use_qk_norm is; the first first_k_dense_replace layers a
    dense MLP, the rest n_routed_experts and n_shared_experts of moe_intermediate_size (the router's
    e_score_correction_bias beside its weight)."""
    layers = c.need("num_hidden_layers", "n_routed_experts")[0]
    heads, kv, hd = head_counts(c)
    mixer = attention_entry("full", heads, kv, hd, bias="qkv" if c.get("attention_bias") else "none",
                  qk_norm=bool(c.get("use_qk_norm")))
    specs = [{"mixer": mixer, "mlp": mlp} for mlp in _dense_then_moe(c, layers, router_bias=True)]
    return _with_nextn(c, {**common_fields(c, False), **layer_stack_fields(specs)}, specs[-1])


def map_ernie45_moe(c: ConfigReader, model_type: str) -> Mapped:
    """ERNIE 4.5 MoE (transformers modular_ernie4_5_moe.py @a4d4492d, configuration_ernie4_5_moe.py @f479d930; vLLM
    ernie45_moe.py @a4cd9d0d): Llama's attention (q/k/v with use_bias); layer i routes when (i + 1) is a multiple of
    moe_layer_interval and moe_layer_start_index <= i <= moe_layer_end_index (-1: the last layer), to moe_k of
    moe_num_experts SwiGLU experts of moe_intermediate_size, with a router beside its e_score_correction_bias and
    moe_num_shared_experts shared experts of the same width run as one MLP; the other layers a dense MLP of
    intermediate_size (ERNIE-4.5-21B-A3B: layer 0)."""
    layers = c.need("num_hidden_layers")[0]
    heads, kv, hd = head_counts(c)
    experts, k, inter = c.need("moe_num_experts", "moe_k", "moe_intermediate_size")
    start, end = (c.count(key, low=-1, high=layers) for key in ("moe_layer_start_index", "moe_layer_end_index"))
    every = c.count("moe_layer_interval", high=layers)
    end = layers - 1 if end == -1 else end
    moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter,
           "router_bias": True}
    shared = c.get("moe_num_shared_experts")
    if shared:
        moe["num_shared_experts"] = shared
    bias = c.flag("use_bias", False)
    if bias:
        moe["bias"] = True
    dense = {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0], "bias": bias}
    routed = [(i + 1) % every == 0 and start <= i <= end for i in range(layers)]
    if not any(routed):
        raise ConfigError(f"{c.where}: moe_layer_start_index {start}, moe_layer_end_index {end} and "
                          f"moe_layer_interval {every} route none of the {layers} layers.", "Fix the config.json.")
    mixer = attention_entry("full", heads, kv, hd, bias="qkv" if bias else "none")
    specs = [{"mixer": mixer, "mlp": moe if r else dense} for r in routed]
    return Mapped({**common_fields(c, True), **layer_stack_fields(specs)},
                  mtp_notes(c.get("num_nextn_predict_layers")))
