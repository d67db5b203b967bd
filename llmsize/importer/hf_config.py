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

from llmsize.errors import LlmsizeError, shown

# what a field of the wrong type or value raises inside a mapper
BAD_VALUE = (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError, OverflowError, IndexError)
STANDARD = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")


class ConfigError(LlmsizeError):
    """A config.json that cannot be mapped to layer groups."""

    default_hint = ("Check the config.json against the model's repository (or give the catalog id of a model with "
                    "its shapes).")


@dataclass
class Mapped:
    """What a mapper returns: the ModelSpec fields it knows, and what the report should say."""

    fields: dict
    notes: list[str] = field(default_factory=list)
    generic: bool = False


# Counts and sizes: a positive integer each (a boolean is not one: `num_hidden_layers: true` was 1 layer), at most
# these (a 400-digit integer, or 10^9 layers to loop over, stops here in one line); the schema bounds the rest.
INT_KEYS = {
    "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size", "num_key_value_heads",
    "head_dim", "max_position_embeddings", "sliding_window", "sliding_window_pattern", "num_local_experts",
    "num_experts_per_tok", "num_experts", "moe_intermediate_size", "decoder_sparse_step", "top_k_experts",
    "num_global_key_value_heads", "global_head_dim", "num_kv_heads", "ffn_hidden_size", "kv_lora_rank",
    "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "n_routed_experts", "n_shared_experts",
    "moe_layer_freq", "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel",
    "attention_head_dim", "moe_shared_expert_intermediate_size", "max_window_layers", "first_k_dense_replace",
    "num_nextn_predict_layers", "index_n_heads", "index_head_dim", "index_topk",
    "attention_chunk_size", "intermediate_size_mlp", "interleave_moe_layer_step", "no_rope_layer_interval",
}
MAY_BE_ZERO = {"first_k_dense_replace", "num_nextn_predict_layers", "n_shared_experts", "max_window_layers"}
INT_CAP = {"num_hidden_layers": 2**16}
INT_CAP_DEFAULT = 2**40
# the fields every decoder's config.json carries (every real one in tests/data/hf-configs does): absent or null is an
# error listing them, not a class default taken in silence
CORE = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")


class _Cfg:
    """config (text part) with the class defaults behind it; `need` names the file on a missing field.

    A key present with the value null is null, as transformers reads it (`"sliding_window": null` is no window),
    never the class default; an absent key takes the class default, which `taken` records for the report,
    except the CORE fields (unless `omittable`: Gemma 3's text_config leaves vocab_size to its class)."""

    def __init__(self, raw: dict, defaults: dict, where: str, omittable: tuple[str, ...] = ()):
        self.raw, self.defaults, self.where, self.omittable = raw, defaults, where, omittable
        self.taken: dict[str, object] = {}

    def get(self, key, default=None):
        if key in self.raw:
            v = self.raw[key]
        elif key in self.defaults and (key not in CORE or key in self.omittable):
            v = self.taken[key] = self.defaults[key]
        else:
            v = default
        if v is not None and key in INT_KEYS:
            low = 0 if key in MAY_BE_ZERO else 1
            if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= INT_CAP.get(key, INT_CAP_DEFAULT):
                raise ConfigError(f"{self.where}: {key} is {str(v)[:40]!r}; expected an integer from {low} to "
                                  f"{INT_CAP.get(key, INT_CAP_DEFAULT):,}.", "Fix the config.json.")
        return v

    def need(self, *keys):
        missing = [k for k in keys if self.get(k) is None]
        if missing:
            nulls = [k for k in missing if k in self.raw]
            what = ", ".join(f"{k}{' (null)' if k in nulls else ''}" for k in missing)
            raise ConfigError(f"{self.where}: missing {what} (model_type {self.raw.get('model_type')!r}).",
                              "A config.json with these fields is needed to size the model.")
        return [self.get(k) for k in keys]

    def layer_types(self, layers: int, known: tuple[str, ...]) -> list[str] | None:
        """`layer_types` when present: a list of known strings, one per layer."""
        types = self.get("layer_types")
        if types is None:
            return None
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise ConfigError(f"{self.where}: layer_types is not a list of strings.", "Fix the config.json.")
        if len(types) != layers:
            raise ConfigError(f"{self.where}: layer_types has {len(types)} entries for {layers} layers "
                              "(num_hidden_layers).", "Fix the config.json: one entry per layer.")
        odd = sorted(set(types) - set(known))
        if odd:
            raise ConfigError(f"{self.where}: layer_types has an unknown kind {odd[0]!r}.",
                              f"Known here: {', '.join(known)}.")
        return types


def layer_stack_fields(layers: list[dict]) -> dict:
    """A model's `layer_groups` (identical layers, consecutive or not, one group with a count, in order of first
    appearance) and, where the groups interleave (Gemma's local and global layers, a hybrid's linear and full
    attention), its `layer_pattern`: the shortest period of group indices the stack repeats
    (ModelSpec.layer_pattern)."""
    keys = [repr(sorted(spec.items())) for spec in layers]
    index = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    seq = [index[k] for k in keys]
    counts, first = Counter(seq), {}
    for g, spec in zip(seq, layers):
        first.setdefault(g, spec)
    out = {"layer_groups": [{"count": counts[g], **first[g]} for g in range(len(index))]}
    if seq != sorted(seq):
        out["layer_pattern"] = seq[:next(p for p in range(1, len(seq) + 1)
                                         if all(seq[i] == seq[i % p] for i in range(len(seq))))]
    return out


def _attn(kind: str, heads: int, kv: int, hd: int, **extra) -> dict:
    d = {"kind": kind, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd}
    d.update({k: v for k, v in extra.items() if v not in (None, False, "none")})
    return d


def _common(c: _Cfg, tie_default: bool) -> dict:
    vocab, hidden = c.need("vocab_size", "hidden_size")
    tie = c.get("tie_word_embeddings")
    if tie is None:
        tie = c.taken["tie_word_embeddings"] = tie_default
    if not isinstance(tie, bool):
        raise ConfigError(f"{c.where}: tie_word_embeddings is {str(tie)[:40]!r}; expected true or false.",
                          "Fix the config.json.")
    positions = c.get("max_position_embeddings")
    if positions is None:
        positions = c.taken["max_position_embeddings"] = 2048  # PretrainedConfig's historical default
    return {"vocab_size": vocab, "hidden_size": hidden, "tie_word_embeddings": tie,
            "max_position_embeddings": positions}


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
    # FalconConfig
    "falcon": {"vocab_size": 65024, "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
               "max_position_embeddings": 2048, "multi_query": True},
}


def _head_dim(c: _Cfg, heads: int, *keys: str) -> int:
    """A head's width: the config's head_dim (or the first of `keys` it has), else hidden_size / heads, which
    must divide: a width rounded down would cost a cache and projections the checkpoint does not have."""
    for key in ("head_dim",) + keys:
        if c.get(key):
            return c.get(key)
    hidden = c.need("hidden_size")[0]
    if hidden % heads:
        raise ConfigError(f"{c.where}: hidden_size {hidden:,} is not a multiple of num_attention_heads {heads:,}, "
                          "and no head_dim gives a head's width.",
                          "Add the model's head_dim to the config, or check num_attention_heads against the model's "
                          "repository.")
    return hidden // heads


def _heads(c: _Cfg) -> tuple[int, int, int]:
    heads = c.need("num_attention_heads")[0]
    kv = c.get("num_key_value_heads") or heads
    return heads, kv, _head_dim(c, heads)


def _sliding(c: _Cfg, model_type: str, layers: int) -> list[int | None]:
    """The window of each layer (None: full attention). `"sliding_window": null` is no window. Qwen2/3 carry a
    window but apply it only with use_sliding_window, and then to layers from max_window_layers on
    (transformers Qwen2Config: layer_types = sliding if use_sliding_window and i >= max_window_layers), or as
    their layer_types say."""
    w = c.get("sliding_window")
    if not model_type.startswith("qwen"):
        return [w] * layers
    types = c.layer_types(layers, ("sliding_attention", "full_attention"))
    if types is not None:
        if "sliding_attention" in types and w is None:
            raise ConfigError(f"{c.where}: layer_types has sliding layers but sliding_window is null.",
                              "Fix the config.json.")
        return [w if t == "sliding_attention" else None for t in types]
    if not c.get("use_sliding_window") or w is None:
        return [None] * layers
    first = c.get("max_window_layers")
    first = layers if first is None else first
    return [w if i >= first else None for i in range(layers)]


# Qwen3's attention normalizes its queries and keys (q_norm, k_norm); Qwen3-VL's text model is Qwen3's ("the base
# language model with QK-norm and RoPE": pytorch/torchtitan torchtitan/experiments/qwen3_vl/README.md; transformers
# Qwen3VLTextAttention, Qwen3VLMoeTextAttention)
QK_NORM_DENSE = ("qwen3", "qwen3_vl_text")
QK_NORM_MOE = ("qwen3_moe", "qwen3_vl_moe_text")


def map_dense(c: _Cfg, model_type: str) -> Mapped:
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = _heads(c)
    bias = "qkv" if model_type == "qwen2" else ("all" if c.get("attention_bias") else "none")
    mlp = {"kind": "dense", "intermediate_size": inter}
    if c.get("mlp_bias"):
        mlp["bias"] = True
    windows = _sliding(c, model_type, layers)
    # BitNet (transformers BitNetDecoderLayer): an attn_sub_norm (hidden) before o_proj and an ffn_sub_norm
    # (intermediate) before down_proj, beside the two layer norms
    # (and 1bitLLM's BitnetForCausalLM, model_type llama: inner_attn_ln and ffn_layernorm, the same two)
    bitnet = model_type == "bitnet" or "BitnetForCausalLM" in (c.get("architectures") or [])
    sub_norms = {"norms": 3, "extra_params": inter} if bitnet else {}
    specs = [{"mixer": _attn("sliding" if w else "full", heads, kv, hd, bias=bias,
                             qk_norm=model_type in QK_NORM_DENSE, sliding_window=w), "mlp": mlp, **sub_norms}
             for w in windows]
    notes = []
    if model_type == "phi3" and windows[0]:
        notes.append(f"config.json sets sliding_window {windows[0]} on every layer; taken as given")
    return Mapped({**_common(c, False), **layer_stack_fields(specs)}, notes)


def map_moe_dense_attn(c: _Cfg, model_type: str) -> Mapped:
    """Mixtral, MiniMax-M2 and Qwen3-MoE: every layer (bar Qwen's mlp_only_layers) routes to experts, no shared one."""
    layers = c.need("num_hidden_layers")[0]
    heads, kv, hd = _heads(c)
    windows = _sliding(c, model_type, layers)
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
        mixer = _attn("sliding" if window else "full", heads, kv, hd,
                      qk_norm=model_type in QK_NORM_MOE or (model_type == "minimax_m2" and bool(c.get("use_qk_norm"))),
                      bias="all" if c.get("attention_bias") else "none", sliding_window=window)
        mlp = {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0]} if i in dense_layers else moe
        specs.append({"mixer": mixer, "mlp": mlp})
    return Mapped({**_common(c, False), **layer_stack_fields(specs)},
                  _mtp_notes(c.get("use_mtp") and c.get("num_mtp_modules"), "module"))


# what a multimodal config's text part leaves out (map_config adds the vision tower's note to any wrapper)
TEXT_PART_ONLY = "not in config.json's text part: not counted without safetensors headers"


def map_gemma3(c: _Cfg, model_type: str) -> Mapped:
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = _heads(c)
    window = c.get("sliding_window")
    types = c.layer_types(layers, ("sliding_attention", "full_attention"))
    if types is None:
        pattern = c.get("sliding_window_pattern") or 6
        types = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)]
    if "sliding_attention" in types and window is None:
        raise ConfigError(f"{c.where}: sliding layers but sliding_window is null.", "Fix the config.json.")
    specs = []
    for t in types:
        mixer = _attn("sliding" if t == "sliding_attention" else "full", heads, kv, hd, qk_norm=True,
                      sliding_window=window if t == "sliding_attention" else None)
        specs.append({"mixer": mixer, "mlp": {"kind": "dense", "intermediate_size": inter}, "norms": 4})
    return Mapped({**_common(c, True), **layer_stack_fields(specs)},
                  [f"vision tower {TEXT_PART_ONLY}"])


def map_gemma2(c: _Cfg, model_type: str) -> Mapped:
    """transformers Gemma2: every other layer slides (the first does: Gemma2Config's layer_types, `sliding_attention`
    where (i + 1) % 2, when config.json has none), 4 norms a layer (pre and post attention and MLP), no q/k norms;
    the embedding tied unless config.json says otherwise (Gemma2Config's tie_word_embeddings defaults to true)."""
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = _heads(c)
    window = c.get("sliding_window")
    types = c.layer_types(layers, ("sliding_attention", "full_attention"))
    if types is None:
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
    if "sliding_attention" in types and window is None:
        raise ConfigError(f"{c.where}: sliding layers but sliding_window is null.", "Fix the config.json.")
    specs = [{"mixer": _attn("sliding" if t == "sliding_attention" else "full", heads, kv, hd,
                             sliding_window=window if t == "sliding_attention" else None),
              "mlp": {"kind": "dense", "intermediate_size": inter}, "norms": 4} for t in types]
    return Mapped({**_common(c, True), **layer_stack_fields(specs)})


def map_gemma4(c: _Cfg, model_type: str) -> Mapped:
    """transformers gemma4 / gemma4_unified (gemma-architecture.md): sliding layers GQA with head_dim,
    full layers num_global_key_value_heads x global_head_dim with K = V; 4 norms and a layer_scalar.
    The E2B/E4B models (modeling_gemma4.py): the last num_kv_shared_layers layers read the cache of the last earlier
    layer of their attention type (is_kv_shared_layer), their MLP twice intermediate_size wide where
    use_double_wide_mlp (`config.use_double_wide_mlp and is_kv_shared_layer`: E2B's 15-34 at 12,288, the rest
    6,144 in its safetensors header); per-layer embeddings of hidden_size_per_layer_input a layer."""
    layers, inter = c.need("num_hidden_layers", "intermediate_size")
    heads, kv, hd = _heads(c)
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
            mixer = _attn("sliding", heads, kv, hd, qk_norm=True, sliding_window=c.need("sliding_window")[0])
        else:
            mixer = _attn("full", heads, c.get("num_global_key_value_heads") or kv, c.get("global_head_dim") or hd,
                          qk_norm=True, k_eq_v=bool(c.get("attention_k_eq_v")))
        if i >= first_shared:
            mixer["kv_shared"] = True
        specs.append({"mixer": mixer, "mlp": mlp, "norms": 4, "extra_params": 1})
    return Mapped({**_common(c, True), **layer_stack_fields(specs), **_per_layer_input(c)},
                  [f"vision/audio embedders {TEXT_PART_ONLY}"])


def _first_shared_layer(c: _Cfg, layers: int, types: list[str], shared) -> int:
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


def _per_layer_input(c: _Cfg) -> dict:
    """Per-layer embeddings (hidden_size_per_layer_input a layer, vocab_size_per_layer_input rows), where the
    config has them."""
    width = c.get("hidden_size_per_layer_input")
    if not width:
        return {}
    return {"per_layer_input": {"hidden_size": width, "vocab_size": c.need("vocab_size_per_layer_input")[0]}}


def map_gemma3n(c: _Cfg, model_type: str) -> Mapped:
    """transformers Gemma3nTextConfig / modeling_gemma3n.py: Gemma 4 E's layers before it (sliding and full
    attention with q/k norms, per-layer embeddings, the last num_kv_shared_layers layers reading an earlier layer's
    cache, 4 norms a layer) plus AltUp (altup_num_inputs streams) and LAuReL (laurel_rank) in every layer;
    intermediate_size one width or one a layer; layer_types, where the config has none, a full layer after every
    four sliding ones (Gemma3nTextConfig.__post_init__: full where (i + 1) % 5 == 0). Activation sparsity (the
    first layers' MLP gate, activation_sparsity_pattern) changes no weight a step reads."""
    layers, window = c.need("num_hidden_layers", "sliding_window")
    heads, kv, hd = _heads(c)
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
        mixer = _attn("sliding" if t == "sliding_attention" else "full", heads, kv, hd, qk_norm=True,
                      sliding_window=window if t == "sliding_attention" else None)
        if i >= first_shared:
            mixer["kv_shared"] = True
        specs.append({"mixer": mixer, "mlp": {"kind": "dense", "intermediate_size": widths[i]}, "norms": 4})
    streams, rank = c.need("altup_num_inputs", "laurel_rank")
    return Mapped({**_common(c, True), **layer_stack_fields(specs), **_per_layer_input(c),
                   "altup": {"num_inputs": streams}, "laurel_rank": rank},
                  [f"vision/audio towers {TEXT_PART_ONLY}"])


def map_gptj(c: _Cfg, model_type: str) -> Mapped:
    """transformers GPTJConfig / modeling_gptj.py (its attribute_map names n_embd, n_layer, n_head and n_positions
    as the usual fields: ATTRIBUTE_MAPS): attention and MLP side by side on one LayerNorm (weight and bias) a layer,
    q/k/v/out_proj without biases, fc_in / fc_out with them (n_inner, or 4 x n_embd when null), ln_f with a bias;
    rotary on the first rotary_dim of each head, no weights. Its lm_head has a bias (vocab_size values, not counted:
    0.001% of GPT-J 6B)."""
    layers, hidden = c.need("num_hidden_layers", "hidden_size")
    heads = c.need("num_attention_heads")[0]
    inter = c.get("intermediate_size") or 4 * hidden
    layer = {"count": layers, "mixer": _attn("full", heads, heads, _head_dim(c, heads)),
             "mlp": {"kind": "dense", "intermediate_size": inter, "gated": False, "bias": True}, "norms": 2}
    return Mapped({**_common(c, False), "final_norms": 2, "layer_groups": [layer]},
                  ["lm_head bias (vocab_size values) not counted"])


# transformers' attribute_map of config classes whose config.json names the usual fields otherwise
ATTRIBUTE_MAPS = {"gptj": {"n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
                           "n_positions": "max_position_embeddings", "n_inner": "intermediate_size"}}


def map_falcon(c: _Cfg, model_type: str) -> Mapped:
    """FalconConfig: multi_query -> one KV head; new_decoder_architecture -> num_kv_heads groups and two
    LayerNorms per layer; MLP 4 x hidden, not gated; LayerNorms carry weight and bias."""
    layers, hidden, heads = c.need("num_hidden_layers", "hidden_size", "num_attention_heads")
    new = bool(c.get("new_decoder_architecture"))
    kv = (c.get("num_kv_heads") or heads) if new else (1 if c.get("multi_query", True) else heads)
    bias = "all" if c.get("bias") else "none"
    mixer = _attn("full", heads, kv, _head_dim(c, heads), bias=bias)
    mlp = {"kind": "dense", "intermediate_size": c.get("ffn_hidden_size") or 4 * hidden, "gated": False}
    if c.get("bias"):
        mlp["bias"] = True
    norms = 4 if new or not c.get("parallel_attn", True) else 2
    fields = {**_common(c, True), "final_norms": 2,
              "layer_groups": [{"count": layers, "mixer": mixer, "mlp": mlp, "norms": norms}]}
    return Mapped(fields)


# model types whose every MLA layer carries DeepSeek Sparse Attention's indexer: DeepSeek-V3.2, and GLM-5's
# glm_moe_dsa, DeepSeek-V3.2's layers at other widths (vLLM's GlmMoeDsaForCausalLM subclasses its DeepseekV2 model;
# mlx-lm's glm_moe_dsa.py: `class Model(DSV32Model)`)
SPARSE_ATTENTION = ("deepseek_v32", "glm_moe_dsa")


def _indexer_reuse(c: _Cfg, layers: int) -> list[bool]:
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


def _mtp_notes(count, what: str = "layer") -> list[str]:
    """The report's line for a checkpoint's multi-token-prediction layers or modules, which plain decoding does not
    run and the count leaves out."""
    return [f"{count} multi-token-prediction {what}(s) in the checkpoint, not used by plain decoding: not counted"] \
        if count else []


def _dense_then_moe(c: _Cfg, layers: int, router_bias: bool) -> list[dict]:
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


def map_deepseek(c: _Cfg, model_type: str) -> Mapped:
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
    return Mapped({**_common(c, False), **layer_stack_fields(specs)},
                  notes + _mtp_notes(c.get("num_nextn_predict_layers")))


def map_llama4(c: _Cfg, model_type: str) -> Mapped:
    """Llama 4 (llama4_text, transformers Llama4TextConfig and its defaults): RoPE layers attend within chunks of
    attention_chunk_size, every no_rope_layer_interval-th layer (no_rope_layers: 0) globally without RoPE; moe_layers
    (every interleave_moe_layer_step-th) route to num_experts_per_tok of num_local_experts experts of
    intermediate_size beside one shared expert of that size, the others run a dense MLP of intermediate_size_mlp.
    Its QK norm is an L2 norm without weights."""
    layers = c.need("num_hidden_layers")[0]
    heads, kv, hd = _heads(c)
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
    specs = [{"mixer": _attn("sliding", heads, kv, hd, sliding_window=chunk) if rope[i] and chunk
              else _attn("full", heads, kv, hd), "mlp": moe if i in routed else dense} for i in range(layers)]
    notes = []
    if chunk and any(rope[:layers]):
        notes.append(f"chunked local attention (attention_chunk_size {chunk}) on the RoPE layers costed as a window "
                     "of one chunk: their cache holds at most a chunk, as llama.cpp's chunked cache does (vLLM's and "
                     "SGLang's depend on their release and settings)")
    return Mapped({**_common(c, False), **layer_stack_fields(specs)}, notes)


def map_gpt_oss(c: _Cfg, model_type: str) -> Mapped:
    layers, inter, experts, k = c.need("num_hidden_layers", "intermediate_size", "num_local_experts",
                                       "num_experts_per_tok")
    heads, kv, hd = _heads(c)
    types = c.layer_types(layers, ("sliding_attention", "full_attention")) or [
        "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter,
           "bias": True, "router_bias": True}
    specs = []
    for t in types:
        sliding = t == "sliding_attention"
        specs.append({"mixer": _attn("sliding" if sliding else "full", heads, kv, hd, bias="all", sinks=True,
                                     sliding_window=c.need("sliding_window")[0] if sliding else None),
                      "mlp": moe})
    return Mapped({**_common(c, False), **layer_stack_fields(specs)})


def map_glm4_moe(c: _Cfg, model_type: str) -> Mapped:
    """GLM-4.5, 4.6, 4.7 and 4.5-Air (transformers Glm4MoeAttention, Glm4MoeMoE): GQA whose q/k/v carry a bias where
    attention_bias is set (o_proj none), q/k norms where use_qk_norm is; the first first_k_dense_replace layers a
    dense MLP, the rest n_routed_experts and n_shared_experts of moe_intermediate_size (the router's
    e_score_correction_bias beside its weight)."""
    layers = c.need("num_hidden_layers", "n_routed_experts")[0]
    heads, kv, hd = _heads(c)
    mixer = _attn("full", heads, kv, hd, bias="qkv" if c.get("attention_bias") else "none",
                  qk_norm=bool(c.get("use_qk_norm")))
    specs = [{"mixer": mixer, "mlp": mlp} for mlp in _dense_then_moe(c, layers, router_bias=True)]
    return Mapped({**_common(c, False), **layer_stack_fields(specs)}, _mtp_notes(c.get("num_nextn_predict_layers")))


# transformers' NemotronHConfig (5.x) lists layers_block_type, one word a layer, where older configs wrote
# hybrid_override_pattern, one character a layer (Nemotron 3 Ultra and 3.5 Lightning's configs carry only the list)
BLOCK_TYPES = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def _nemotron_pattern(c: _Cfg) -> str:
    pattern, blocks = c.get("hybrid_override_pattern"), c.get("layers_block_type")
    if pattern is None and blocks is not None:
        if not isinstance(blocks, list):
            raise ConfigError(f"{c.where}: layers_block_type is {shown(repr(blocks), 20)}, not a list of one word "
                              f"a layer ({', '.join(BLOCK_TYPES)}).", "Fix the config.json.")
        odd = [b for b in blocks if b not in BLOCK_TYPES]
        if odd:
            raise ConfigError(f"{c.where}: layers_block_type holds {shown(repr(odd[0]), 20)}, not one of "
                              f"{', '.join(BLOCK_TYPES)}.", "Fix the config.json.")
        return "".join(BLOCK_TYPES[b] for b in blocks)
    if pattern is None:
        raise ConfigError(f"{c.where}: neither hybrid_override_pattern nor layers_block_type says what each layer "
                          "holds (model_type 'nemotron_h').", "Fix the config.json.")
    if not isinstance(pattern, str):
        raise ConfigError(f"{c.where}: hybrid_override_pattern is not a string of layer letters.",
                          "Fix the config.json.")
    return pattern


def map_nemotron_h(c: _Cfg, model_type: str) -> Mapped:
    """NemotronH: hybrid_override_pattern, one character per layer: M Mamba2, * attention, - MLP, E MoE (or
    layers_block_type, one word a layer); routed experts in a latent of moe_latent_size where it is set (LatentMoE:
    Nemotron 3 Super and Ultra)."""
    pattern = _nemotron_pattern(c)
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
            hd = _head_dim(c, heads, "attention_head_dim")
            specs.append({"mixer": _attn("full", heads, kv, hd), "norms": 1})
        elif ch == "-":
            specs.append({"mlp": {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0],
                                  "gated": False}, "norms": 1})
        elif ch == "E":
            experts, k, inter = c.need("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")
            moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter,
                   "gated": False, "router_bias": True}
            if c.get("moe_latent_size"):
                moe["latent_size"] = c.get("moe_latent_size")
            if c.get("n_shared_experts"):
                moe["num_shared_experts"] = c.get("n_shared_experts")
                moe["shared_intermediate_size"] = c.get("moe_shared_expert_intermediate_size") or inter
            specs.append({"mlp": moe, "norms": 1})
        else:
            raise ConfigError(f"{c.where}: hybrid_override_pattern has an unknown layer {ch!r}.",
                              "Known: M (Mamba2), * (attention), - (MLP), E (MoE).")
    return Mapped({**_common(c, False), **layer_stack_fields(specs)})


def map_qwen3_hybrid(c: _Cfg, model_type: str) -> Mapped:
    """Qwen3-Next and Qwen3.5/3.6 (transformers Qwen3NextConfig, Qwen3_5TextConfig, Qwen3_5MoeTextConfig): gated
    delta-net layers (`linear_*` sizes) and, one in `full_attention_interval`, gated full attention with q/k norms,
    as `layer_types` lists them; a dense MLP, or routed experts with one gated shared expert."""
    layers, heads, kv = c.need("num_hidden_layers", "num_attention_heads", "num_key_value_heads")
    types = c.layer_types(layers, ("linear_attention", "full_attention"))
    if types is None:
        every = c.get("full_attention_interval") or 4
        types = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)]
    kh, vh, kd, vd, conv = c.need("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                                  "linear_value_head_dim", "linear_conv_kernel_dim")
    state = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}.get(c.get("mamba_ssm_dtype"), "fp32")
    linear = {"kind": "linear", "num_key_heads": kh, "num_value_heads": vh, "key_head_dim": kd, "value_head_dim": vd,
              "conv_kernel": conv, "state_dtype": state}
    hd = _head_dim(c, heads)
    full = _attn("full", heads, kv, hd, qk_norm=True, output_gate=bool(c.get("attn_output_gate", True)))
    if c.get("num_experts"):
        experts, k, inter = c.need("num_experts", "num_experts_per_tok", "moe_intermediate_size")
        mlp = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter}
        shared = c.get("shared_expert_intermediate_size")
        if shared:
            mlp.update(num_shared_experts=1, shared_expert_gate=True)
            if shared != inter:
                mlp["shared_intermediate_size"] = shared
    else:
        mlp = {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0]}
    specs = [{"mixer": linear if t == "linear_attention" else full, "mlp": mlp} for t in types]
    return Mapped({**_common(c, False), **layer_stack_fields(specs)}, _mtp_notes(c.get("mtp_num_hidden_layers")))


# fields of layers a generic decoder (attention + one gated MLP a layer) cannot stand for: routed experts, state-space
# and linear-attention mixers, per-layer head splits. An unknown type carrying one is refused, not read as dense (a
# MiniMax-M2 config read as dense was 4.8 B parameters of its 229 B; Llama 4 Scout's 11 B of 109 B).
NOT_GENERIC = ("num_local_experts", "n_routed_experts", "num_experts", "moe_intermediate_size", "num_experts_per_tok",
               "shared_expert_intermediate_size", "ssm_state_size", "mamba_num_heads", "linear_num_value_heads",
               "hybrid_override_pattern", "swa_num_attention_heads", "kv_lora_rank", "q_lora_rank")


def map_generic(c: _Cfg, model_type: str) -> Mapped:
    types = c.get("layer_types")
    odd = sorted({t for t in types if t not in ("full_attention", "sliding_attention")}) if isinstance(types, list) else []
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
    "falcon": map_falcon, "gptj": map_gptj, "deepseek_v2": map_deepseek, "deepseek_v3": map_deepseek, "gpt_oss": map_gpt_oss,
    "deepseek_v32": map_deepseek,  # DeepSeek-V3.2(-Exp): V3's layers, each MLA with a sparse-attention indexer
    "glm4_moe_lite": map_deepseek,  # transformers Glm4MoeLite: DeepSeek-V3's MLA + routed/shared experts
    "kimi_k2": map_deepseek,  # Kimi K2 / K2.5's text model: architectures DeepseekV3ForCausalLM
    "glm_moe_dsa": map_deepseek,  # GLM-5, GLM-5.1 (GlmMoeDsaForCausalLM): DeepSeek-V3.2's layers
    "glm4_moe": map_glm4_moe,
    "llama4_text": map_llama4, "llama4": map_llama4,
    "minimax_m2": map_moe_dense_attn,  # MiniMax-M2: GQA with QK norm, every layer routed (num_local_experts), no shared
    "nemotron_h": map_nemotron_h,
    "qwen3_next": map_qwen3_hybrid, "qwen3_5_text": map_qwen3_hybrid, "qwen3_5_moe_text": map_qwen3_hybrid,
    "qwen3_5": map_qwen3_hybrid, "qwen3_5_moe": map_qwen3_hybrid,
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
    c = _Cfg(text, DEFAULTS.get(key, {}), where, OMITTABLE.get(key, ()))
    try:
        if mapper is not map_generic:
            c.need(*REQUIRED.get(model_type, CORE))
        m = mapper(c, model_type)
    except BAD_VALUE as e:  # a field of the wrong type (a string for a count, a zero head count...)
        msg = str(e).splitlines()[0][:120] if str(e) else ""
        raise ConfigError(f"{where}: a field has an unexpected value ({e.__class__.__name__}: {msg}).") from None
    if isinstance(raw.get("text_config"), dict) and (raw.get("vision_config") is not None or "Conditional" in str(
            raw.get("architectures"))) and not any(TEXT_PART_ONLY in n for n in m.notes):
        m.notes.append(f"vision tower {TEXT_PART_ONLY}")  # Kimi K2.5, Llama 4: a wrapper whose text model alone is told
    if c.taken:
        m.notes.append("config.json leaves " + ", ".join(f"{k} = {v!r}" for k, v in c.taken.items())
                       + f" to the defaults (transformers' class for model_type {model_type!r})")
    return m


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9.\-]+", "-", text.lower()).strip("-.")
    return s or "imported-model"
