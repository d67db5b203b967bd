"""Hugging Face config.json -> ModelSpec layer groups, one mapper per model_type, a generic fallback.

config.json stores only the fields that differ from the config class's defaults, so each mapper carries
the defaults of its transformers configuration class (named beside it). Multimodal configs are read
through their `text_config`. Vision and audio towers are not described by the text config: a config-only
import leaves them out and says so (safetensors headers count them exactly).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from llmsize.errors import LlmsizeError

# what a field of the wrong type or value raises inside a mapper
BAD_VALUE = (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError, OverflowError, IndexError)
STANDARD = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")


class ConfigError(LlmsizeError):
    """A config.json that cannot be mapped to layer groups."""


@dataclass
class Mapped:
    """What a mapper returns: the ModelSpec fields it knows, and what the report should say."""

    fields: dict
    notes: list[str] = field(default_factory=list)
    generic: bool = False


class _Cfg:
    """config (text part) with the class defaults behind it; `need` names the file on a missing field."""

    def __init__(self, raw: dict, defaults: dict, where: str):
        self.raw, self.defaults, self.where = raw, defaults, where

    def get(self, key, default=None):
        v = self.raw.get(key)
        if v is None:
            v = self.defaults.get(key, default)
        return v

    def need(self, *keys):
        missing = [k for k in keys if self.get(k) is None]
        if missing:
            raise ConfigError(f"{self.where}: missing {', '.join(missing)} (model_type "
                              f"{self.raw.get('model_type')!r}).",
                              "A config.json with these fields is needed to size the model.")
        return [self.get(k) for k in keys]


def _groups(layers: list[dict]) -> list[dict]:
    """Consecutive or not, identical layers become one group with a count (order does not change sizes)."""
    counts: Counter = Counter()
    first: dict = {}
    for spec in layers:
        key = repr(sorted(spec.items()))
        counts[key] += 1
        first.setdefault(key, spec)
    return [{"count": n, **first[k]} for k, n in counts.items()]


def _attn(kind: str, heads: int, kv: int, hd: int, **extra) -> dict:
    d = {"kind": kind, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd}
    d.update({k: v for k, v in extra.items() if v not in (None, False, "none")})
    return d


def _common(c: _Cfg, tie_default: bool) -> dict:
    vocab, hidden = c.need("vocab_size", "hidden_size")
    return {"vocab_size": vocab, "hidden_size": hidden,
            "tie_word_embeddings": bool(c.get("tie_word_embeddings", tie_default)),
            "max_position_embeddings": c.get("max_position_embeddings") or 2048}


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
    # FalconConfig
    "falcon": {"vocab_size": 65024, "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
               "max_position_embeddings": 2048, "multi_query": True},
}


def _heads(c: _Cfg) -> tuple[int, int, int]:
    hidden, heads = c.need("hidden_size", "num_attention_heads")
    kv = c.get("num_key_value_heads") or heads
    hd = c.get("head_dim") or hidden // heads
    return heads, kv, hd


def _sliding(c: _Cfg, model_type: str) -> int | None:
    """The window every layer uses, or None. Qwen2/3 carry a window but apply it only with use_sliding_window."""
    w = c.get("sliding_window")
    if model_type.startswith("qwen") and not c.get("use_sliding_window"):
        return None
    return w or None


def map_dense(c: _Cfg, model_type: str) -> Mapped:
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = _heads(c)
    bias = "qkv" if model_type == "qwen2" else ("all" if c.get("attention_bias") else "none")
    window = _sliding(c, model_type)
    kind = "sliding" if window else "full"
    mixer = _attn(kind, heads, kv, hd, bias=bias, qk_norm=model_type in ("qwen3", "qwen3_moe"),
                  sliding_window=window)
    mlp = {"kind": "dense", "intermediate_size": inter}
    if c.get("mlp_bias"):
        mlp["bias"] = True
    notes = []
    if model_type == "phi3" and window:
        notes.append(f"config.json sets sliding_window {window} on every layer; taken as given")
    return Mapped({**_common(c, False), "layer_groups": [{"count": layers, "mixer": mixer, "mlp": mlp}]}, notes)


def map_moe_dense_attn(c: _Cfg, model_type: str) -> Mapped:
    """Mixtral and Qwen3-MoE: every layer (bar Qwen's mlp_only_layers) routes to experts, no shared one."""
    layers = c.need("num_hidden_layers")[0]
    heads, kv, hd = _heads(c)
    window = _sliding(c, model_type)
    mixer = _attn("sliding" if window else "full", heads, kv, hd, qk_norm=model_type == "qwen3_moe",
                  bias="all" if c.get("attention_bias") else "none", sliding_window=window)
    if model_type == "mixtral":
        experts, k, inter = c.need("num_local_experts", "num_experts_per_tok", "intermediate_size")
        dense_layers: set[int] = set()
    else:
        experts, k, inter = c.need("num_experts", "num_experts_per_tok", "moe_intermediate_size")
        step = c.get("decoder_sparse_step") or 1
        dense_layers = set(c.get("mlp_only_layers") or []) | {i for i in range(layers) if (i + 1) % step}
    moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter}
    specs = []
    for i in range(layers):
        mlp = {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0]} if i in dense_layers else moe
        specs.append({"mixer": mixer, "mlp": mlp})
    return Mapped({**_common(c, False), "layer_groups": _groups(specs)})


def map_gemma3(c: _Cfg, model_type: str) -> Mapped:
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = _heads(c)
    window = c.get("sliding_window")
    types = c.get("layer_types")
    if not types:
        pattern = c.get("sliding_window_pattern") or 6
        types = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)]
    specs = []
    for t in types:
        mixer = _attn("sliding" if t == "sliding_attention" else "full", heads, kv, hd, qk_norm=True,
                      sliding_window=window if t == "sliding_attention" else None)
        specs.append({"mixer": mixer, "mlp": {"kind": "dense", "intermediate_size": inter}, "norms": 4})
    return Mapped({**_common(c, True), "layer_groups": _groups(specs)},
                  ["vision tower not in config.json's text part: not counted without safetensors headers"])


def map_gemma4(c: _Cfg, model_type: str) -> Mapped:
    """transformers gemma4 / gemma4_unified (gemma-architecture.md): sliding layers GQA with head_dim,
    full layers num_global_key_value_heads x global_head_dim with K = V; 4 norms and a layer_scalar."""
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = _heads(c)
    types = c.need("layer_types")[0]
    if len(types) != layers:
        raise ConfigError(f"{c.where}: layer_types has {len(types)} entries for {layers} layers.")
    if c.get("enable_moe_block"):
        experts, k, moe_inter = c.need("num_experts", "top_k_experts", "moe_intermediate_size")
        mlp = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": moe_inter,
               "num_shared_experts": 1, "shared_intermediate_size": inter}
    else:
        mlp = {"kind": "dense", "intermediate_size": inter * (2 if c.get("use_double_wide_mlp") else 1)}
    specs = []
    for t in types:
        if t == "sliding_attention":
            mixer = _attn("sliding", heads, kv, hd, qk_norm=True, sliding_window=c.need("sliding_window")[0])
        else:
            mixer = _attn("full", heads, c.get("num_global_key_value_heads") or kv, c.get("global_head_dim") or hd,
                          qk_norm=True, k_eq_v=bool(c.get("attention_k_eq_v")))
        specs.append({"mixer": mixer, "mlp": mlp, "norms": 4, "extra_params": 1})
    return Mapped({**_common(c, True), "layer_groups": _groups(specs)},
                  ["vision/audio embedders not in config.json's text part: not counted without safetensors headers"])


def map_falcon(c: _Cfg, model_type: str) -> Mapped:
    """FalconConfig: multi_query -> one KV head; new_decoder_architecture -> num_kv_heads groups and two
    LayerNorms per layer; MLP 4 x hidden, not gated; LayerNorms carry weight and bias."""
    layers, hidden, heads = c.need("num_hidden_layers", "hidden_size", "num_attention_heads")
    new = bool(c.get("new_decoder_architecture"))
    kv = (c.get("num_kv_heads") or heads) if new else (1 if c.get("multi_query", True) else heads)
    bias = "all" if c.get("bias") else "none"
    mixer = _attn("full", heads, kv, hidden // heads, bias=bias)
    mlp = {"kind": "dense", "intermediate_size": c.get("ffn_hidden_size") or 4 * hidden, "gated": False}
    if c.get("bias"):
        mlp["bias"] = True
    norms = 4 if new or not c.get("parallel_attn", True) else 2
    fields = {**_common(c, True), "final_norms": 2,
              "layer_groups": [{"count": layers, "mixer": mixer, "mlp": mlp, "norms": norms}]}
    return Mapped(fields)


def map_deepseek(c: _Cfg, model_type: str) -> Mapped:
    layers, heads = c.need("num_hidden_layers", "num_attention_heads")
    kv_rank, nope, rope, v = c.need("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    mixer = {"kind": "mla", "num_attention_heads": heads, "kv_lora_rank": kv_rank, "qk_nope_head_dim": nope,
             "qk_rope_head_dim": rope, "v_head_dim": v}
    if c.get("q_lora_rank"):
        mixer["q_lora_rank"] = c.get("q_lora_rank")
    first_dense = c.get("first_k_dense_replace") or 0
    freq = c.get("moe_layer_freq") or 1
    experts = c.get("n_routed_experts")
    moe = None
    if experts:
        k, inter = c.need("num_experts_per_tok", "moe_intermediate_size")
        moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter}
        if c.get("n_shared_experts"):
            moe["num_shared_experts"] = c.get("n_shared_experts")
        if c.get("topk_method") == "noaux_tc":  # DeepSeek-V3's e_score_correction_bias
            moe["router_bias"] = True
    dense = {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0]}
    specs = [{"mixer": mixer, "mlp": moe if moe and i >= first_dense and i % freq == 0 else dense}
             for i in range(layers)]
    notes = []
    if c.get("num_nextn_predict_layers"):
        notes.append(f"{c.get('num_nextn_predict_layers')} multi-token-prediction layer(s) in the checkpoint, "
                     "not used by plain decoding: not counted")
    return Mapped({**_common(c, False), "layer_groups": _groups(specs)}, notes)


def map_gpt_oss(c: _Cfg, model_type: str) -> Mapped:
    layers, inter, experts, k = c.need("num_hidden_layers", "intermediate_size", "num_local_experts",
                                       "num_experts_per_tok")
    heads, kv, hd = _heads(c)
    types = c.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter,
           "bias": True, "router_bias": True}
    specs = []
    for t in types:
        sliding = t == "sliding_attention"
        specs.append({"mixer": _attn("sliding" if sliding else "full", heads, kv, hd, bias="all", sinks=True,
                                     sliding_window=c.need("sliding_window")[0] if sliding else None),
                      "mlp": moe})
    return Mapped({**_common(c, False), "layer_groups": _groups(specs)})


def map_nemotron_h(c: _Cfg, model_type: str) -> Mapped:
    """NemotronH: hybrid_override_pattern, one character per layer: M Mamba2, * attention, - MLP, E MoE."""
    pattern = c.need("hybrid_override_pattern")[0]
    layers = c.get("num_hidden_layers") or len(pattern)
    if len(pattern) != layers:
        raise ConfigError(f"{c.where}: hybrid_override_pattern has {len(pattern)} layers, num_hidden_layers "
                          f"{layers}.")
    specs = []
    for ch in pattern:
        if ch == "M":
            nh, mhd, state, groups, conv = c.need("mamba_num_heads", "mamba_head_dim", "ssm_state_size",
                                                  "n_groups", "conv_kernel")
            dtype = {"float32": "fp32", "float16": "fp16"}.get(c.get("mamba_ssm_cache_dtype"), "bf16")
            specs.append({"mixer": {"kind": "ssm", "num_heads": nh, "head_dim": mhd, "state_size": state,
                                    "n_groups": groups, "conv_kernel": conv,
                                    "conv_bias": bool(c.get("use_conv_bias", True)), "state_dtype": dtype},
                          "norms": 1})
        elif ch == "*":
            heads, kv = c.need("num_attention_heads", "num_key_value_heads")
            hd = c.get("head_dim") or c.get("attention_head_dim") or c.need("hidden_size")[0] // heads
            specs.append({"mixer": _attn("full", heads, kv, hd), "norms": 1})
        elif ch == "-":
            specs.append({"mlp": {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0],
                                  "gated": False}, "norms": 1})
        elif ch == "E":
            experts, k, inter = c.need("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")
            moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter,
                   "gated": False, "router_bias": True}
            if c.get("n_shared_experts"):
                moe["num_shared_experts"] = c.get("n_shared_experts")
                moe["shared_intermediate_size"] = c.get("moe_shared_expert_intermediate_size") or inter
            specs.append({"mlp": moe, "norms": 1})
        else:
            raise ConfigError(f"{c.where}: hybrid_override_pattern has an unknown layer {ch!r}.",
                              "Known: M (Mamba2), * (attention), - (MLP), E (MoE).")
    return Mapped({**_common(c, False), "layer_groups": _groups(specs)})


def map_generic(c: _Cfg, model_type: str) -> Mapped:
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
    "mixtral": map_moe_dense_attn, "qwen3_moe": map_moe_dense_attn,
    "gemma3": map_gemma3, "gemma3_text": map_gemma3,
    "gemma4": map_gemma4, "gemma4_text": map_gemma4, "gemma4_unified": map_gemma4, "gemma4_unified_text": map_gemma4,
    "falcon": map_falcon, "deepseek_v2": map_deepseek, "deepseek_v3": map_deepseek, "gpt_oss": map_gpt_oss,
    "nemotron_h": map_nemotron_h,
}


def text_part(raw: dict) -> dict:
    """The language-model part of a (possibly multimodal) config."""
    text = raw.get("text_config")
    if isinstance(text, dict):
        merged = dict(text)
        for k in ("tie_word_embeddings", "quantization_config"):
            if k in raw and k not in merged:
                merged[k] = raw[k]
        return merged
    return raw


def map_config(raw: dict, where: str) -> Mapped:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: the top level is not a JSON object.")
    text = text_part(raw)
    model_type = str(text.get("model_type") or raw.get("model_type") or "")
    mapper = MAPPERS.get(model_type) or MAPPERS.get(str(raw.get("model_type") or "")) or map_generic
    defaults = DEFAULTS.get("gemma3_text" if model_type.startswith("gemma3") else model_type, {})
    try:
        return mapper(_Cfg(text, defaults, where), model_type)
    except BAD_VALUE as e:  # a field of the wrong type (a string for a count, a zero head count...)
        raise ConfigError(f"{where}: a field has an unexpected value ({e.__class__.__name__}: {e}).") from None


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9.\-]+", "-", text.lower()).strip("-.")
    return s or "imported-model"
