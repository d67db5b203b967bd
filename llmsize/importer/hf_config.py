"""Hugging Face config.json -> ModelSpec layer groups, one mapper per model_type, a generic fallback. The dense
decoders' mappers are here; the families' in hf_gemma, hf_moe and hf_hybrid; how a field is read, in config_fields.

config.json stores only the fields that differ from the config class's defaults, so each mapper carries
the defaults of its transformers configuration class (named beside it). Multimodal configs are read
through their `text_config`. A vision tower is counted from vision_config where importer/extras.py knows its
architecture (Qwen3-VL / Qwen3.5, Gemma 3, Gemma 4, Llama 4); any other tower a config-only import leaves out and
says so (safetensors headers count them exactly).
"""

from __future__ import annotations

import re

from llmsize.errors import shown
from llmsize.importer.config_fields import (
    BAD_VALUE,
    CORE,
    QK_NORM_DENSE,
    STANDARD,
    TEXT_PART_ONLY,
    ConfigError,
    ConfigReader,
    Mapped,
    attention_entry,
    common_fields,
    head_counts,
    head_width,
    layer_stack_fields,
    layer_windows,
)
from llmsize.importer.extras import vision_tower
from llmsize.importer.hf_deepseek_v4 import REQUIRED as DEEPSEEK_V4_REQUIRED
from llmsize.importer.hf_deepseek_v4 import map_deepseek_v4
from llmsize.importer.hf_gemma import map_gemma2, map_gemma3, map_gemma3n, map_gemma4, map_muse_glimmer
from llmsize.importer.hf_hybrid import (
    map_granite_hybrid,
    map_kimi_linear,
    map_lfm2,
    map_nemotron_h,
    map_qwen3_hybrid,
)
from llmsize.importer.hf_moe import (
    map_deepseek,
    map_ernie45_moe,
    map_glm4_moe,
    map_gpt_oss,
    map_llama4,
    map_moe_dense_attn,
)

# ---------------------------------------------------------------------------------- dense decoders

# transformers LlamaConfig / MistralConfig / Qwen2Config / Qwen3Config / Phi3Config defaults
DEFAULTS = {
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "max_position_embeddings": 2048},
    "mistral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 4096 * 32,
                "sliding_window": 4096},
    "mixtral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 4096 * 32,
                "num_local_experts": 8, "num_experts_per_tok": 2},
    "qwen2": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 32768},
    "qwen3": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128,
              "max_position_embeddings": 32768},
    "qwen3_moe": {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 24,
                  "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
                  "num_experts_per_tok": 8, "moe_intermediate_size": 768, "decoder_sparse_step": 1,
                  "max_position_embeddings": 32768},
    "phi3": {"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
             "num_attention_heads": 32, "max_position_embeddings": 4096},
    # Gemma3TextConfig (gemma-architecture.md: vocab 262208, window pattern 6)
    "gemma3_text": {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
                    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "max_position_embeddings": 131072, "sliding_window": 4096, "sliding_window_pattern": 6},
    # Gemma2Config (transformers' configuration_gemma2.py)
    "gemma2": {"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
               "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 8192,
               "sliding_window": 4096},
    # GraniteMoeHybridConfig's Mamba defaults (transformers configuration_granitemoehybrid.py @008f5c8c)
    "granitemoehybrid": {"mamba_n_heads": 128, "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4,
                         "mamba_expand": 2},
    # Lfm2Config's MLP-width defaults (transformers configuration_lfm2.py @05cd1ec1)
    "lfm2": {"block_auto_adjust_ff_dim": True, "block_ffn_dim_multiplier": 1.0, "block_multiple_of": 256,
             "conv_L_cache": 3},
    # Ernie4_5_MoeConfig's defaults, documented as ERNIE-4.5-21B-A3B-PT's configuration (transformers
    # configuration_ernie4_5_moe.py @f479d930)
    "ernie4_5_moe": {"vocab_size": 103424, "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 28,
                     "num_attention_heads": 20, "num_key_value_heads": 4, "max_position_embeddings": 131072,
                     "tie_word_embeddings": True, "moe_intermediate_size": 1536, "moe_k": 6, "moe_num_experts": 64,
                     "moe_num_shared_experts": 2, "moe_layer_start_index": 1, "moe_layer_end_index": -1,
                     "moe_layer_interval": 1},
    # Olmo2Config / Olmo3Config (transformers configuration_olmo2.py / configuration_olmo3.py, 5.19)
    "olmo2": {"vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "max_position_embeddings": 2048},
    "olmo3": {"vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "max_position_embeddings": 2048, "sliding_window": 4096},
    # FalconConfig
    "falcon": {"vocab_size": 65024, "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
               "max_position_embeddings": 2048, "multi_query": True},
}


def map_dense(c: ConfigReader, model_type: str) -> Mapped:
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = head_counts(c)
    bias = "qkv" if model_type == "qwen2" else ("all" if c.get("attention_bias") else "none")
    mlp = {"kind": "dense", "intermediate_size": inter}
    if c.get("mlp_bias"):
        mlp["bias"] = True
    windows = layer_windows(c, model_type, layers)
    # BitNet (transformers BitNetDecoderLayer): an attn_sub_norm (hidden) before o_proj and an ffn_sub_norm
    # (intermediate) before down_proj, beside the two layer norms
    # (and 1bitLLM's BitnetForCausalLM, model_type llama: inner_attn_ln and ffn_layernorm, the same two)
    bitnet = model_type == "bitnet" or "BitnetForCausalLM" in (c.get("architectures") or [])
    sub_norms = {"norms": 3, "extra_params": inter} if bitnet else {}
    specs = [{"mixer": attention_entry("sliding" if w else "full", heads, kv, hd, bias=bias,
                             qk_norm=model_type in QK_NORM_DENSE, sliding_window=w), "mlp": mlp, **sub_norms}
             for w in windows]
    notes = []
    if model_type == "phi3" and windows[0]:
        notes.append(f"config.json sets sliding_window {windows[0]} on every layer; taken as given")
    return Mapped({**common_fields(c, False), **layer_stack_fields(specs)}, notes)


def map_olmo(c: ConfigReader, model_type: str) -> Mapped:
    """OLMo 2 and OLMo 3 (transformers modeling_olmo2.py / modeling_olmo3.py, 5.19): Llama's projections and gated
    MLP, the two layer norms after attention and after the MLP (post_attention_layernorm, post_feedforward_layernorm)
    in place of the two before, and q_norm / k_norm over the whole query and key projections (heads x head_dim and
    KV heads x head_dim weights, not one head's width). OLMo 3 slides its window on the layers layer_types says;
    Olmo3Config makes every fourth layer full where the config leaves layer_types out."""
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = head_counts(c)
    notes, given = [], {}
    if model_type == "olmo3" and c.get("layer_types") is None:
        given["layer_types"] = ["sliding_attention" if (i + 1) % 4 else "full_attention" for i in range(layers)]
        notes.append("layer_types not given: every fourth layer full, the others sliding (Olmo3Config's default)")
    if model_type == "olmo2":
        given["sliding_window"] = None  # OLMo 2 attends over the whole context on every layer
    windows = layer_windows(c.with_fields(**given), model_type, layers)
    bias = "all" if c.get("attention_bias") else "none"
    specs = [{"mixer": attention_entry("sliding" if w else "full", heads, kv, hd, bias=bias, sliding_window=w),
              "mlp": {"kind": "dense", "intermediate_size": inter}, "extra_params": (heads + kv) * hd}
             for w in windows]
    return Mapped({**common_fields(c, False), **layer_stack_fields(specs)}, notes)


def map_gptj(c: ConfigReader, model_type: str) -> Mapped:
    """transformers GPTJConfig / modeling_gptj.py (its attribute_map names n_embd, n_layer, n_head and n_positions
    as the usual fields: ATTRIBUTE_MAPS): attention and MLP side by side on one LayerNorm (weight and bias) a layer,
    q/k/v/out_proj without biases, fc_in / fc_out with them (n_inner, or 4 x n_embd when null), ln_f with a bias;
    rotary on the first rotary_dim of each head, no weights. Its lm_head has a bias (vocab_size values, not counted:
    0.001% of GPT-J 6B)."""
    layers, hidden = c.need("num_hidden_layers", "hidden_size")
    heads = c.need("num_attention_heads")[0]
    inter = c.get("intermediate_size") or 4 * hidden
    layer = {"count": layers, "mixer": attention_entry("full", heads, heads, head_width(c, heads)),
             "mlp": {"kind": "dense", "intermediate_size": inter, "gated": False, "bias": True}, "norms": 2}
    return Mapped({**common_fields(c, False), "final_norms": 2, "layer_groups": [layer]},
                  ["lm_head bias (vocab_size values) not counted"])


# transformers' attribute_map of config classes whose config.json names the usual fields otherwise
ATTRIBUTE_MAPS = {"gptj": {"n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
                           "n_positions": "max_position_embeddings", "n_inner": "intermediate_size"}}


def map_falcon(c: ConfigReader, model_type: str) -> Mapped:
    """FalconConfig: multi_query -> one KV head; new_decoder_architecture -> num_kv_heads groups and two
    LayerNorms per layer; MLP 4 x hidden, not gated; LayerNorms carry weight and bias."""
    layers, hidden, heads = c.need("num_hidden_layers", "hidden_size", "num_attention_heads")
    new = bool(c.get("new_decoder_architecture"))
    kv = (c.get("num_kv_heads") or heads) if new else (1 if c.get("multi_query", True) else heads)
    bias = "all" if c.get("bias") else "none"
    mixer = attention_entry("full", heads, kv, head_width(c, heads), bias=bias)
    mlp = {"kind": "dense", "intermediate_size": c.get("ffn_hidden_size") or 4 * hidden, "gated": False}
    if c.get("bias"):
        mlp["bias"] = True
    norms = 4 if new or not c.get("parallel_attn", True) else 2
    fields = {**common_fields(c, True), "final_norms": 2,
              "layer_groups": [{"count": layers, "mixer": mixer, "mlp": mlp, "norms": norms}]}
    return Mapped(fields)


# fields of layers a generic decoder (attention + one gated MLP a layer) cannot stand for: routed experts, state-space
# and linear-attention mixers, per-layer head splits. An unknown type carrying one is refused, not read as dense (a
# MiniMax-M2 config read as dense was 4.8 B parameters of its 229 B; Llama 4 Scout's 11 B of 109 B).
NOT_GENERIC = ("num_local_experts", "n_routed_experts", "num_experts", "moe_intermediate_size", "num_experts_per_tok",
               "shared_expert_intermediate_size", "ssm_state_size", "mamba_num_heads", "linear_num_value_heads",
               "hybrid_override_pattern", "swa_num_attention_heads", "kv_lora_rank", "q_lora_rank")


# heads of encoder-only models (BERT, RoBERTa, DeBERTa, ELECTRA...): no causal decoder, no KV cache, no decode loop
ENCODER_HEADS = ("ForMaskedLM", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
                 "ForMultipleChoice", "ForPreTraining", "ForNextSentencePrediction")


def map_generic(c: ConfigReader, model_type: str) -> Mapped:
    arches = c.raw.get("architectures")
    arches = [a for a in arches if isinstance(a, str)] if isinstance(arches, list) else []
    encoder = c.raw.get("is_encoder_decoder") is True or (
        any(a.endswith(ENCODER_HEADS) for a in arches) and not any(a.endswith("ForCausalLM") for a in arches))
    if encoder:
        what = "an encoder-decoder" if c.raw.get("is_encoder_decoder") is True else "an encoder-only model"
        raise ConfigError(f"{c.where}: model_type {model_type!r} is not known and the config describes {what} "
                          f"({shown(', '.join(arches) or 'is_encoder_decoder')}), not a decoder LLM: llmsize sizes "
                          "causal decoders (a KV cache, token-by-token decode).",
                          "Give a decoder model's config (architectures ...ForCausalLM).")
    types = c.get("layer_types")
    odd = (sorted({t for t in types if t not in ("full_attention", "sliding_attention")})
           if isinstance(types, list) else [])
    if odd:
        raise ConfigError(f"{c.where}: model_type {model_type!r} is not known and its layer_types hold {odd[0]!r} "
                          "layers, which a generic decoder cannot stand for.",
                          "Plan a catalog entry of the model, or a GGUF of it.")
    special = [k for k in NOT_GENERIC if c.raw.get(k) not in (None, 0, 1, False, "")]  # a count of 1: no routing
    if special:
        raise ConfigError(f"{c.where}: model_type {model_type!r} is not known and its config has {special[0]} = "
                          f"{c.raw.get(special[0])!r} (routed experts, latent attention, a recurrent mixer or split "
                          "heads), which a generic decoder cannot stand for.",
                          "Plan a catalog entry of the model, or a GGUF of it (its tensors say what each layer holds).")
    missing = [k for k in STANDARD if c.get(k) is None]
    if missing:
        raise ConfigError(f"{c.where}: model_type {model_type!r} is not known and the config lacks "
                          f"{', '.join(missing)}.",
                          f"A generic decoder needs {', '.join(STANDARD)} (and num_key_value_heads, head_dim "
                          "if not MHA).")
    m = map_dense(c, "llama")
    m.generic = True
    m.notes.insert(0, f"model_type {model_type!r} is not known to llmsize: mapped as a generic decoder "
                      "(attention + gated MLP per layer, 2 norms); check it against the architecture")
    return m


MAPPERS = {
    "llama": map_dense, "mistral": map_dense, "qwen2": map_dense, "qwen3": map_dense, "phi3": map_dense,
    "bitnet": map_dense,  # BitNet b1.58: Llama's layers (ReLU^2 MLP, no biases) with two sub-norms
    "mixtral": map_moe_dense_attn, "qwen3_moe": map_moe_dense_attn,
    "qwen3_vl_text": map_dense, "qwen3_vl_moe_text": map_moe_dense_attn,  # Qwen3-VL's text models (text_config)
    "gemma2": map_gemma2, "gemma3": map_gemma3, "gemma3_text": map_gemma3,
    "gemma3n": map_gemma3n, "gemma3n_text": map_gemma3n,
    "gemma4": map_gemma4, "gemma4_text": map_gemma4, "gemma4_unified": map_gemma4, "gemma4_unified_text": map_gemma4,
    "falcon": map_falcon, "gptj": map_gptj, "deepseek_v2": map_deepseek, "deepseek_v3": map_deepseek,
    "gpt_oss": map_gpt_oss,
    "deepseek_v32": map_deepseek,  # DeepSeek-V3.2(-Exp): V3's layers, each MLA with a sparse-attention indexer
    "glm4_moe_lite": map_deepseek,  # transformers Glm4MoeLite: DeepSeek-V3's MLA + routed/shared experts
    "kimi_k2": map_deepseek,  # Kimi K2 / K2.5's text model: architectures DeepseekV3ForCausalLM
    "glm_moe_dsa": map_deepseek,  # GLM-5, GLM-5.1 (GlmMoeDsaForCausalLM): DeepSeek-V3.2's layers
    "deepseek_v4": map_deepseek_v4,  # DeepSeek-V4-Flash, -Pro: compressed attention, hyper-connections
    "glm4_moe": map_glm4_moe,
    "llama4_text": map_llama4, "llama4": map_llama4,
    "minimax_m2": map_moe_dense_attn,  # MiniMax-M2: GQA with QK norm, every layer routed (num_local_experts), no shared
    "nemotron_h": map_nemotron_h,
    "qwen3_next": map_qwen3_hybrid, "qwen3_5_text": map_qwen3_hybrid, "qwen3_5_moe_text": map_qwen3_hybrid,
    "qwen3_5": map_qwen3_hybrid, "qwen3_5_moe": map_qwen3_hybrid,
    "kimi_linear": map_kimi_linear,
    "granitemoehybrid": map_granite_hybrid,
    "ernie4_5_moe": map_ernie45_moe,
    "lfm2": map_lfm2, "lfm2_moe": map_lfm2,
    # IBM Granite 3.x and 4.1 (transformers modular_granite.py @023633dd: Llama's layers, attention_multiplier,
    # residual_multiplier, embedding_multiplier and logits_scaling, none of which holds a weight)
    "granite": map_dense,
    "olmo2": map_olmo, "olmo3": map_olmo,
    "muse_glimmer_text": map_muse_glimmer, "muse_glimmer": map_muse_glimmer,
}


def text_part(raw: dict, where: str = "config.json") -> dict:
    """The language-model part of a (possibly multimodal) config."""
    text = raw.get("text_config")
    if "text_config" in raw and not (isinstance(text, dict) and text):
        raise ConfigError(f"{where}: text_config is {shown(repr(text), 30)}, not the language model's settings "
                          "(a non-empty JSON object).", "Fix the config.json.")
    if isinstance(text, dict):
        merged = dict(text)
        for k in ("tie_word_embeddings", "quantization_config"):
            if k in raw and k not in merged:
                merged[k] = raw[k]
        return merged
    return raw


# what each mapper needs whatever the layers (checked first, so one error lists every missing field)
REQUIRED = {"falcon": ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"),
            "gptj": ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"),  # n_inner may be null
            "gemma3n": ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"),  # widths: a list
            "gemma3n_text": ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"),
            "nemotron_h": ("hidden_size", "vocab_size"),
            # LFM2's MLP width may be block_ff_dim (lfm2_ff)
            "lfm2": ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"),
            "deepseek_v2": ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"),
            "deepseek_v3": ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"),
            "deepseek_v32": ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"),
            "glm4_moe_lite": ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"),
            "glm_moe_dsa": ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                            "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "kv_lora_rank",
                            "intermediate_size", "index_n_heads", "index_head_dim", "index_topk"),
            "kimi_k2": ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "n_routed_experts",
                        "num_experts_per_tok", "moe_intermediate_size", "kv_lora_rank", "intermediate_size"),
            **{t: CORE + ("num_local_experts", "num_experts_per_tok", "intermediate_size_mlp")
               for t in ("llama4_text", "llama4")},
            "gpt_oss": CORE + ("num_local_experts", "num_experts_per_tok"),
            "deepseek_v4": DEEPSEEK_V4_REQUIRED,
            **{t: ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
               for t in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe")}}
# fields a real config.json of the type leaves to its transformers class (google/gemma-3-27b-it's text_config has no
# vocab_size: tests/data/hf-configs/SOURCES.yaml)
# google/gemma-3-4b-it's text_config leaves its heads to the class too (its values are the class defaults)
OMITTABLE = {"gemma3_text": ("vocab_size", "num_attention_heads", "num_key_value_heads", "head_dim")}


def map_config(raw: dict, where: str) -> Mapped:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: the top level is not a JSON object.")
    text = text_part(raw, where)
    model_type = str(text.get("model_type") or raw.get("model_type") or "")
    mapper = MAPPERS.get(model_type) or MAPPERS.get(str(raw.get("model_type") or "")) or map_generic
    key = "gemma3_text" if model_type.startswith("gemma3") else model_type
    renames = ATTRIBUTE_MAPS.get(model_type, {})
    if renames:
        text = {**{k: v for k, v in text.items() if k not in renames}, **{renames[k]: v for k, v in text.items()
                                                                           if k in renames}}
    c = ConfigReader(text, DEFAULTS.get(key, {}), where, OMITTABLE.get(key, ()))
    try:
        if mapper is not map_generic:
            c.need(*REQUIRED.get(model_type, CORE))
        m = mapper(c, model_type)
    except BAD_VALUE as e:  # a field of the wrong type (a string for a count, a zero head count...)
        msg = str(e).splitlines()[0][:120] if str(e) else ""
        raise ConfigError(f"{where}: a field has an unexpected value ({e.__class__.__name__}: {msg}).") from None
    tower = vision_tower(raw, m.fields["hidden_size"], where)
    if tower is not None:  # counted: the mapper's "not counted" note goes
        m.fields["extra"] = [tower, *m.fields.get("extra", [])]
        m.notes = [n for n in m.notes if not (n.startswith(("vision tower ", "vision/audio ")) and TEXT_PART_ONLY in n)]
    elif isinstance(raw.get("text_config"), dict) and (raw.get("vision_config") is not None or "Conditional" in str(
            raw.get("architectures"))) and not any(TEXT_PART_ONLY in n for n in m.notes):
        m.notes.append(f"vision tower {TEXT_PART_ONLY}")  # Kimi K2.5, Llama 4: a wrapper whose text model alone is told
    if c.get("use_bidirectional_attention") == "vision" and raw.get("vision_config") is not None:
        m.fields["vision_prefix_lm"] = True  # Gemma 4 (vLLM's Gemma4ModelArchConfigConvertor.is_mm_prefix_lm)
    if c.taken:
        m.notes.append("config.json leaves " + ", ".join(f"{k} = {v!r}" for k, v in c.taken.items())
                       + f" to the defaults (transformers' class for model_type {model_type!r})")
    return m


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9.\-]+", "-", text.lower()).strip("-.")
    return s or "imported-model"
