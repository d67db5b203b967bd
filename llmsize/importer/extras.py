"""What a checkpoint holds beside its text decoder, counted from config.json where its shapes say it all (the
catalog's `extra`): the vision towers of Qwen3-VL / Qwen3.5, Gemma 3, Gemma 4 and Llama 4, which engines load by
default, and multi-token-prediction layers (Qwen3.5's mtp_num_hidden_layers, DeepSeek-V3's and GLM's
num_nextn_predict_layers), which they load only to draft for speculative decoding. Each formula is checked against
transformers' modules built on the meta device and the checkpoints' published totals (tests/test_import_config.py)."""

from __future__ import annotations

from llmsize.errors import shown
from llmsize.importer.config_fields import CORE, ConfigError, ConfigReader

# transformers Qwen3VLVisionConfig / Qwen3VLMoeVisionConfig (deepstack after blocks 8, 16 and 24) and
# Qwen3_5VisionConfig / Qwen3_5MoeVisionConfig (no deepstack) defaults, keyed by the wrapper's model_type
_VISION = {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "in_channels": 3,
           "patch_size": 16,
           "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 3584,
           "num_position_embeddings": 2304}
VISION_DEFAULTS = {"qwen3_vl": {**_VISION, "deepstack_visual_indexes": [8, 16, 24]},
                   "qwen3_vl_moe": {**_VISION, "deepstack_visual_indexes": [8, 16, 24]},
                   "qwen3_5": {**_VISION, "deepstack_visual_indexes": []},
                   "qwen3_5_moe": {**_VISION, "deepstack_visual_indexes": []}}


def vit_block_params(h: int, i: int, q: int | None = None, norm_vectors: int = 2, attn_bias: bool = True,
                     mlp_bias: bool = True) -> int:
    """One pre-norm ViT block: two norms of `norm_vectors` vectors of h each (a LayerNorm's weight and bias: 2; an
    RMSNorm's weight: 1), q/k/v projections h -> 3q and the output q -> h (q the attention width, h where None), a
    two-layer MLP h -> i -> h, each projection with its bias where attn_bias / mlp_bias. The Qwen3-VL, SigLIP,
    Llama 4, Muse Glimmer and MoonViT towers' blocks (their functions below)."""
    q = q or h
    return (2 * norm_vectors * h + h * 3 * q + q * h + 2 * h * i + (3 * q + h if attn_bias else 0)
            + (i + h if mlp_bias else 0))


def qwen_vision_params(c: ConfigReader) -> int:
    """Parameters of a Qwen3-VL-style vision tower (transformers modeling_qwen3_vl.py Qwen3VLVisionModel, which
    Qwen3.5's Qwen3_5VisionModel reuses), from its vision_config; h the width, i the MLP's, m = h x merge^2:
    patch_embed, a Conv3d with bias: in x temporal x patch^2 x h + h; pos_embed: positions x h;
    each of `depth` blocks: two LayerNorms 4h, qkv h x 3h + 3h, proj h x h + h, fc1 h x i + i, fc2 i x h + h;
    the merger: LayerNorm(h) 2h, fc1 m x m + m, fc2 m x out + out; each deepstack merger the same with LayerNorm(m).
    Qwen3.5-27B's tower (h 1152, i 4304, 27 blocks, out 5120, no deepstack) is 460,730,096, as transformers 5.23
    builds it on the meta device."""
    depth, h, i, ch, p, tp, merge, out, pos = c.need(
        "depth", "hidden_size", "intermediate_size", "in_channels", "patch_size", "temporal_patch_size",
        "spatial_merge_size", "out_hidden_size", "num_position_embeddings")
    deepstack = c.get("deepstack_visual_indexes") or []
    if not isinstance(deepstack, list):
        raise ConfigError(f"{c.where}: deepstack_visual_indexes is {str(deepstack)[:40]!r}, not a list of block "
                          "indices.", "Fix the config.json.")
    m = h * merge * merge
    block = vit_block_params(h, i)
    mlp = m * m + m + m * out + out
    return ch * tp * p * p * h + h + pos * h + depth * block + (2 * h + mlp) + len(deepstack) * (2 * m + mlp)


# transformers SiglipVisionConfig defaults (Gemma3Config's vision_config when none is given)
SIGLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
                   "num_channels": 3,
                   "image_size": 224, "patch_size": 16, "vision_use_head": True}


def siglip_gemma3_params(c: ConfigReader, text_hidden: int) -> int:
    """Parameters of Gemma 3's SigLIP tower and projector (transformers SiglipVisionModel, Gemma3MultiModalProjector),
    from its vision_config; h the width, i the MLP's: patch_embedding, a Conv2d with bias, channels x patch^2 x h + h;
    position_embedding (image / patch)^2 x h; each layer two LayerNorms 4h, q/k/v/out 4 (h^2 + h), fc1 h x i + i,
    fc2 i x h + h; post_layernorm 2h; the projector [h, text hidden] and its RMSNorm h. Gemma 3 27B's (h 1152, i 4304,
    27 layers, 896 px in patches of 14, no pooling head): 416,866,032 + 6,194,304 = 423,060,336, as transformers 5.23
    builds them on the meta device and the catalog's hand count has it."""
    layers, h, i, ch, image, p = c.need("num_hidden_layers", "hidden_size", "intermediate_size", "num_channels",
                                        "image_size", "patch_size")
    if c.get("vision_use_head") is not False:
        raise ConfigError(f"{c.where}: vision_use_head is not false: a SigLIP pooling head Gemma 3 has not.",
                          "Fix the config.json.")
    layer = vit_block_params(h, i)
    return ch * p * p * h + h + (image // p) ** 2 * h + layers * layer + 2 * h + h * text_hidden + h


# transformers Llama4VisionConfig defaults
LLAMA4_VISION_DEFAULTS = {"hidden_size": 768, "intermediate_size": 5632, "num_hidden_layers": 34,
                          "num_attention_heads": 16, "num_channels": 3,
                          "image_size": 448, "patch_size": 14, "projector_input_dim": 4096,
                          "projector_output_dim": 4096, "vision_output_dim": 7680}


def llama4_vision_params(c: ConfigReader, text_hidden: int) -> int:
    """Parameters of Llama 4's vision tower and projector (transformers Llama4VisionModel,
    Llama4MultiModalProjector), from its vision_config; h the width, i the MLP's: patch_embedding, a linear without
    bias over each patch, channels x patch^2 x h; class_embedding h; positional_embedding_vlm ((image / patch)^2 + 1)
    x h; layernorm_pre and layernorm_post 2h each; each layer q/k/v/o with biases 4 (h^2 + h), fc1 h x i + i, fc2
    i x h + h, two LayerNorms 4h; vision_adapter (the pixel-shuffle MLP, no biases) i x projector_input_dim +
    projector_output_dim^2; the projector vision_output_dim x text hidden, no bias. Llama 4 Scout's (h 1408, i 5632,
    34 layers, 336 px in patches of 14, 4096 out, text 5120): 871,932,416, as transformers 5.23 builds it."""
    layers, h, i, ch, image, p, p_in, p_out, out = c.need(
        "num_hidden_layers", "hidden_size", "intermediate_size", "num_channels", "image_size", "patch_size",
        "projector_input_dim", "projector_output_dim", "vision_output_dim")
    layer = vit_block_params(h, i)
    return (ch * p * p * h + h + ((image // p) ** 2 + 1) * h + 4 * h + layers * layer + i * p_in + p_out * p_out
            + out * text_hidden)


def gemma4_vision_params(c: ConfigReader, text_hidden: int) -> int:
    """Parameters of Gemma 4's vision tower and its embedder into the text model (transformers Gemma4VisionModel,
    Gemma4MultimodalEmbedder), from a vision_config without clipped linears; h the width, i the MLP's, q = heads x
    head_dim, k = KV heads x head_dim: the patch embedder's position table 2 x position_embedding_size x h and input
    projection (3 x patch^2) x h; each layer q, k and v projections h x (q + 2k), o q x h, q/k norms 2 x head_dim, a
    gated MLP 3 x h x i, four norms 4h; the embedder h x text hidden; no biases. Gemma 4 26B-A4B's (h 1152, i 4304,
    27 layers, 16 heads of 72, patches of 16, table 10,240): 569,548,080 + 1152 x 2816 = 572,792,112, as transformers
    5.23 builds them."""
    layers, h, i, heads, hd, p, table = c.need("num_hidden_layers", "hidden_size", "intermediate_size",
                                               "num_attention_heads", "head_dim", "patch_size",
                                               "position_embedding_size")
    kv = (c.get("num_key_value_heads") or heads) * hd
    q = heads * hd
    layer = h * (q + 2 * kv) + q * h + 2 * hd + 3 * h * i + 4 * h
    return 2 * table * h + 3 * p * p * h + layers * layer + h * text_hidden


def muse_glimmer_vision_params(c: ConfigReader, raw: dict, text_hidden: int) -> int:
    """Parameters of Muse Glimmer's perception encoder, adapter and projection (vLLM 0.34 muse_glimmer.py
    MuseGlimmerVisionEncoder, MuseGlimmerVisionAdapter, vision_projection), from its vision_config and the wrapper's
    out_hidden_size (o) and projector_hidden_size (p); h the width, i the MLP's: conv1_linear, no bias, over each
    patch of temporal x 3 x patch^2 values; positional_embedding_vlm height x width x h; ln_pre and ln_post
    (LayerNorms) 2h each; each block two LayerNorms 4h, qkv h x 3h + 3h, o h x h + h, c_fc h x i + i, c_proj
    i x h + h; the adapter o x p + p x p and the projection p x text hidden, without biases. Muse-Glimmer-30B's
    (h 1536, i 8960, 50 blocks, o 6144, p 4096, text 6656): 1,852,639,744 in the encoder + 69,206,016, the
    figures public runtime inspections print (tests/test_import_config.py)."""
    layers, h, i, p, tp, ph, pw = (c.count(k) for k in ("num_hidden_layers", "hidden_size", "intermediate_size",
                                                         "patch_size", "patch_temporal", "pos_emb_height",
                                                         "pos_emb_width"))
    wrapper = ConfigReader(raw, {}, c.where.removesuffix(" vision_config"))
    o, proj = wrapper.count("out_hidden_size"), wrapper.count("projector_hidden_size")
    block = vit_block_params(h, i)
    return tp * 3 * p * p * h + ph * pw * h + 4 * h + layers * block + o * proj + proj * proj + proj * text_hidden


# KimiK25VisionConfig and its MoonViT (SGLang 0.5.23 models/kimi_k25.py): LayerNorms, biases on the patch embedding,
# attention (attn_bias True) and MLP, the "patchmerger" projector; Kimi K3's config names each of these
MOONVIT_DEFAULTS = {"kimi_k25": {"norm_type": "layernorm", "mm_projector_type": "patchmerger"}, "kimi_k3": {}}


def moonvit_params(c: ConfigReader, text_hidden: int) -> int:
    """Parameters of Kimi K2.5's and K3's MoonViT tower and projector (SGLang 0.5.23 models/kimi_k25.py and
    kimi_k3_vl.py; configs/kimi_k25.py and kimi_k3.py), from vision_config's vt_* keys; h the width, q
    qkv_hidden_size (else h), i the MLP's, m = mm_hidden_size (else h) x merge^2: the patch embedding, a Conv2d of
    3 x patch^2 x h (and a bias where patch_embed_proj_bias), the position table height x width x h; each block norm0
    and norm1 (RMSNorm: a weight; LayerNorm: and a bias), wqkv h x 3q and wo q x h (and biases where attn_bias), fc0
    h x i and fc1 i x h (and biases where linear_bias); the final norm; the projector: "patchmerger" a LayerNorm of h,
    linear_1 m x m and linear_2 m x text hidden with biases; "patchmergerv2" proj.0 m x m, proj.2 m x text hidden and
    post_norm. Kimi K2.5's (h 1,152, i 4,304, 27 blocks, patches of 14, a 64 x 64 table, biases, LayerNorms, text
    7,168): 416,866,032 + 54,277,888; Kimi K3's (h 1,024, q 1,536, i 4,096, no biases, RMSNorms, v2):
    401,214,464 + 46,144,512."""
    layers, h, i, p, ph, pw = (c.count(k) for k in ("vt_num_hidden_layers", "vt_hidden_size", "vt_intermediate_size",
                                                    "patch_size", "init_pos_emb_height", "init_pos_emb_width"))
    q = c.count("qkv_hidden_size", default=h)
    mm = c.count("mm_hidden_size", default=h)
    merge = c.get("merge_kernel_size")
    if not (isinstance(merge, list) and len(merge) == 2 and all(type(x) is int and 0 < x <= 64 for x in merge)):
        raise ConfigError(f"{c.where}: merge_kernel_size is {shown(repr(merge), 30)}, not two whole counts.",
                          "Fix the config.json's vision_config.")
    flags = {k: c.flag(k, True) for k in ("patch_embed_proj_bias", "attn_bias", "linear_bias")}
    norm = c.get("norm_type")
    if norm not in ("rmsnorm", "layernorm"):
        raise ConfigError(f"{c.where}: norm_type is {shown(repr(norm), 20)}, not rmsnorm or layernorm.",
                          "Fix the config.json's vision_config.")
    n = 2 if norm == "layernorm" else 1
    block = vit_block_params(h, i, q, n, flags["attn_bias"], flags["linear_bias"])
    m = mm * merge[0] * merge[1]
    tower = 3 * p * p * h + (h if flags["patch_embed_proj_bias"] else 0) + ph * pw * h + layers * block + n * h
    projector = c.get("mm_projector_type")
    if projector == "patchmerger":
        return tower + 2 * h + (m * m + m) + (m * text_hidden + text_hidden)
    if projector == "patchmergerv2":
        return tower + m * m + m * text_hidden + text_hidden
    raise ConfigError(f"{c.where}: mm_projector_type is {shown(repr(projector), 30)}, not patchmerger or "
                      "patchmergerv2.", "Fix the config.json's vision_config.")


def _tower(name: str, params: int, modules: str, c: ConfigReader, kind: str | None, heads: str, layers: int | None,
           **shape) -> dict:
    """A vision tower's `extra` entry: loaded by default (vLLM: --language-model-only leaves it out), not read when
    decoding text, outside a config-only count's official figure; with its shape as an image encoder (the
    catalog's VisionEncoder: `heads` the config's name for its attention heads, `shape` the rest of its fields)
    where the config gives it all, and its vision_config's num_hidden_layers (`layers`: None where its config class
    counts its blocks otherwise) and hidden_size."""
    encoder = {"kind": kind, "hidden_size": c.get("hidden_size"), "intermediate_size": c.get("intermediate_size"),
               "num_heads": c.get(heads), "patch_size": c.get("patch_size"), **shape}
    whole = kind is not None and all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                     for k, v in encoder.items() if k != "kind")
    return {"name": f"{name} (vision_config)", "params": params, "in_official_count": False,
            **({"encoder": encoder} if whole else {}),
            "vision_config": {"num_hidden_layers": layers, "hidden_size": encoder["hidden_size"]},
            "note": f"counted from vision_config's shapes ({modules}); loaded by default (vLLM: "
                    "--language-model-only leaves it out); not read when decoding text"}


MAX_EXTRA_PARAMS = 10**16  # ExtraParams.params's bound: beyond it, shapes no checkpoint has


def vision_tower(raw: dict, text_hidden: int, where: str) -> dict | None:
    """vision_tower_entry, refused in the config's terms where its shapes make more parameters than any checkpoint
    holds (a hidden_size of 10^12, say)."""
    tower = vision_tower_entry(raw, text_hidden, where)
    if tower is not None and tower["params"] > MAX_EXTRA_PARAMS:
        raise ConfigError(f"{where} vision_config: its shapes make {tower['params']:.3g} parameters, more than any "
                          "checkpoint holds.", "Fix the config.json's vision_config.")
    return tower


def vision_tower_entry(raw: dict, text_hidden: int, where: str) -> dict | None:
    """The catalog's `extra` entry for a Qwen3-VL, Qwen3.5, Gemma 3 or 4 or Llama 4 checkpoint's vision tower, or None
    for any other config. vLLM loads it unless told --language-model-only (vllm-project/recipes Qwen/Qwen3.5.md), so it
    is `loaded`; llama.cpp and mlx-lm run the text model alone (runtime_model.TEXT_ONLY)."""
    model_type = str(raw.get("model_type") or "")
    vision = raw.get("vision_config")
    if model_type not in (*VISION_DEFAULTS, *MOONVIT_DEFAULTS, "gemma3", "gemma4", "llama4", "muse_glimmer") \
            or vision is None:
        return None
    if not isinstance(vision, dict):
        raise ConfigError(f"{where}: vision_config is {str(vision)[:40]!r}, not a JSON object.", "Fix the config.json.")
    at = f"{where} vision_config"
    if model_type == "gemma4":  # a tower of clipped linears, or one beside an audio tower, is not counted here
        if vision.get("use_clipped_linears") or raw.get("audio_config") is not None:
            return None
        c = ConfigReader(vision, {}, at)
        return _tower("vision tower + embedder", gemma4_vision_params(c, text_hidden),
                      "transformers Gemma4VisionModel, Gemma4MultimodalEmbedder", c, "gemma4", "num_attention_heads",
                      c.get("num_hidden_layers"), merge=c.get("pooling_kernel_size"))
    if model_type == "llama4":
        c = ConfigReader(vision, LLAMA4_VISION_DEFAULTS, at, omittable=CORE)
        return _tower("vision tower + projector", llama4_vision_params(c, text_hidden),
                      "transformers Llama4VisionModel, Llama4MultiModalProjector", c, "llama4", "num_attention_heads",
                      c.get("num_hidden_layers"), image_size=c.get("image_size"))
    if model_type in MOONVIT_DEFAULTS:  # SGLang's KimiK25VisionConfig and KimiK3VisionConfig hold
        c = ConfigReader(vision, MOONVIT_DEFAULTS[model_type], at)  # vt_num_hidden_layers, vt_hidden_size as the usual
        named = ConfigReader({**vision, "hidden_size": vision.get("vt_hidden_size")}, {}, at)
        return _tower("MoonViT vision tower + projector", moonvit_params(c, text_hidden),
                      f"SGLang 0.5.23 models/{'kimi_k25.py' if model_type == 'kimi_k25' else 'kimi_k3_vl.py'}",
                      named, None, "vt_num_attention_heads", c.count("vt_num_hidden_layers"))
    if model_type == "muse_glimmer":  # an encoder llama.cpp's mmproj sizing does not know: no encoder shape
        c = ConfigReader(vision, {}, at)
        return _tower("perception encoder + adapter + projection", muse_glimmer_vision_params(c, raw, text_hidden),
                      "vLLM 0.34 muse_glimmer.py MuseGlimmerVisionEncoder, MuseGlimmerVisionAdapter", c, None,
                      "num_attention_heads", c.get("num_hidden_layers"))
    if model_type == "gemma3":
        c = ConfigReader(vision, SIGLIP_DEFAULTS, at, omittable=CORE)
        return _tower("SigLIP vision tower + multimodal projector", siglip_gemma3_params(c, text_hidden),
                      "transformers SiglipVisionModel, Gemma3MultiModalProjector", c, "siglip", "num_attention_heads",
                      c.get("num_hidden_layers"), image_size=c.get("image_size"))
    c = ConfigReader(vision, VISION_DEFAULTS[model_type], at, omittable=CORE)
    out = c.get("out_hidden_size")
    if out != text_hidden:  # the merger feeds the text model (an absent field's class default 3584 need not)
        said = "given" if "out_hidden_size" in vision else "transformers' default, the field being absent"
        raise ConfigError(f"{at}: out_hidden_size is {out} ({said}), not the text model's hidden_size {text_hidden}: "
                          "its merger could not feed the text model.", "Fix the config.json's vision_config.")
    # Qwen3VLVisionConfig counts its blocks as `depth` and has no num_hidden_layers unless the config gives one
    layers = vision.get("num_hidden_layers")
    return _tower("vision tower + merger", qwen_vision_params(c), "transformers Qwen3VLVisionModel", c, "qwen_vl",
                  "num_heads",
                  layers if isinstance(layers, int) and not isinstance(layers, bool) and layers > 0 else None,
                  merge=c.get("spatial_merge_size"))


def layer_params(layer: dict, hidden: int) -> int:
    """Parameters of one decoder layer given as a layer-group entry (mixer, mlp, norms), as the catalog counts it."""
    from llmsize.catalog.schema import LayerGroup
    from llmsize.estimate.params import layer_pieces

    return sum(p.params for p in layer_pieces(LayerGroup(count=1, **layer), hidden))


def mtp_layers(count: int, hidden: int, layer: dict) -> dict | None:
    """The catalog's `extra` entry for Qwen3-Next / Qwen3.5's `count` multi-token-prediction layers, or None for
    none: each a full-attention decoder layer like the model's (`layer`, a layer-group entry: its MLP, experts
    included), and once, fc [2h -> h] and three RMSNorms of h (pre_fc_norm_hidden, pre_fc_norm_embedding, norm);
    the embedding and the lm_head are the model's (vllm model_executor/models/qwen3_next_mtp.py and qwen3_5_mtp.py,
    Qwen3NextMultiTokenPredictor / Qwen3_5MultiTokenPredictor). Engines load them only for speculative decoding
    (vLLM --speculative-config '{"method": "mtp", ...}')."""
    if not count:
        return None
    per_layer = layer_params(layer, hidden)
    return {"name": f"multi-token-prediction layers (mtp_num_hidden_layers {count})",
            "params": count * per_layer + 2 * hidden * hidden + 3 * hidden, "in_official_count": False,
            "loaded": False, **({"layers": count} if count > 1 else {}),
            "note": "counted from config.json: a full-attention decoder layer each, fc [2h -> h] and three norms; "
                    "the embedding and lm_head are the model's; loaded for speculative decoding (--spec mtp)"}


def nextn_layers(count, hidden: int, vocab: int, layer: dict) -> dict | None:
    """The catalog's `extra` entry for DeepSeek-V3-style multi-token-prediction layers (num_nextn_predict_layers:
    DeepSeek-V3 and V3.2, GLM-4.5 to 5), or None for none, as their checkpoints store them past the decoder
    (model.layers.{num_hidden_layers}...): each a decoder layer like the model's last (its routed experts), eh_proj
    [2h -> h], three norms (enorm, hnorm, shared_head.norm) and copies of its own of the embedding and the output
    head (embed_tokens, shared_head.head: vocab x h each; vllm deepseek_mtp.py DeepSeekMultiTokenPredictorLayer,
    glm4_moe_mtp.py). GLM-4.5-Air's one: 3,616,573,568, its checkpoint's 110,468,824,832 with the decoder. Engines
    load them only for speculative decoding."""
    if not count:
        return None
    own = count * (layer_params(layer, hidden) + 2 * hidden * hidden + 3 * hidden)
    return {"name": f"multi-token-prediction layers (num_nextn_predict_layers {count})",
            "params": own + count * 2 * vocab * hidden, "in_official_count": False, "loaded": False,
            **({"layers": count} if count > 1 else {}),
            "draft_params": own,  # vLLM's drafter takes the target's embedding and lm_head (speculative.draft_memory)
            "note": "counted from config.json: a decoder layer like the last each, eh_proj [2h -> h], three norms and "
                    "its own embedding and output head copies; loaded for speculative decoding (--spec mtp)"}
