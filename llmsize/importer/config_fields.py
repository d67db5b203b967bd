"""How a config.json's fields are read: the config class's defaults behind them (ConfigReader), integers
checked, a head's width and count, each layer's window, the fields every model shares, and layers grouped into a
ModelSpec's layer_groups and layer_pattern."""

from __future__ import annotations

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
    "mtp_num_hidden_layers", "num_experts_per_token", "num_shared_experts", "mamba_n_heads", "mamba_d_state",
    "mamba_n_groups", "mamba_d_conv", "mamba_expand", "shared_intermediate_size", "moe_num_experts", "moe_k",
    "moe_num_shared_experts",
    # a vision_config's (importer.extras)
    "depth", "in_channels", "patch_size", "temporal_patch_size", "spatial_merge_size", "out_hidden_size",
    "num_position_embeddings", "num_channels", "image_size", "projector_input_dim", "projector_output_dim",
    "vision_output_dim", "position_embedding_size",
}


MAY_BE_ZERO = {"first_k_dense_replace", "num_nextn_predict_layers", "n_shared_experts", "max_window_layers",
               "mtp_num_hidden_layers", "num_shared_experts", "shared_intermediate_size", "moe_num_shared_experts"}


INT_CAP = {"num_hidden_layers": 2**16, "mtp_num_hidden_layers": 2**16, "depth": 2**16}


INT_CAP_DEFAULT = 2**40


# the fields every decoder's config.json carries (every real one in tests/data/hf-configs does): absent or null is an
# error listing them, not a class default taken in silence
CORE = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")


class ConfigReader:
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
                said = f"the string {v[:40]!r}" if isinstance(v, str) else repr(str(v)[:40])
                raise ConfigError(f"{self.where}: {key} is {said}; expected an integer from {low} to "
                                  f"{INT_CAP.get(key, INT_CAP_DEFAULT):,}.", "Fix the config.json.")
        return v

    def flag(self, key: str, default: bool) -> bool:
        """A true/false field (a bias, an adjustment switch): absent or null is `default`, anything but a JSON
        boolean is refused (the string "false" would read as true)."""
        v = self.raw.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise ConfigError(f"{self.where}: {key} is {str(v)[:40]!r}; expected true or false.",
                              "Fix the config.json.")
        return v

    def count(self, key: str, low: int = 1, high: int = 2**24, default=None) -> int:
        """A whole count from `low` to `high` (a layer index from -1, a width, a number of layers): the config's value,
        else the class default (recorded in `taken`), else `default`; anything else is refused naming the value."""
        if key in self.raw:
            v = self.raw[key]
        elif key in self.defaults:
            v = self.taken[key] = self.defaults[key]
        else:
            v = default
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            raise ConfigError(f"{self.where}: {key} is {shown(repr(v), 40)}, not a whole count from {low:,} to "
                              f"{high:,}.", "Fix the config.json.")
        return v

    def need(self, *keys):
        missing = [k for k in keys if self.get(k) is None]
        if missing:
            nulls = [k for k in missing if k in self.raw]
            what = ", ".join(f"{k}{' (null)' if k in nulls else ''}" for k in missing)
            raise ConfigError(f"{self.where}: missing {what} (model_type {self.raw.get('model_type')!r}).",
                              "A config.json with these fields is needed to size the model.")
        return [self.get(k) for k in keys]

    def with_fields(self, **fields) -> ConfigReader:
        """A reader of the config with `fields` set, whose class defaults taken still reach the report (taken)."""
        out = ConfigReader({**self.raw, **fields}, self.defaults, self.where, self.omittable)
        out.taken = self.taken
        return out

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


def attention_entry(kind: str, heads: int, kv: int, hd: int, **extra) -> dict:
    d = {"kind": kind, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd}
    d.update({k: v for k, v in extra.items() if v not in (None, False, "none")})
    return d


def common_fields(c: ConfigReader, tie_default: bool) -> dict:
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


def head_width(c: ConfigReader, heads: int, *keys: str) -> int:
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


def head_counts(c: ConfigReader) -> tuple[int, int, int]:
    heads = c.need("num_attention_heads")[0]
    kv = c.get("num_key_value_heads") or heads
    return heads, kv, head_width(c, heads)


def layer_windows(c: ConfigReader, model_type: str, layers: int) -> list[int | None]:
    """The window of each layer (None: full attention). `"sliding_window": null` is no window. Where the config
    gives layer_types, as they say (OLMo 3: three sliding layers, then a full one; transformers builds its
    attention by them); else a window applies to every layer (Mistral), except that Qwen2/3 carry a window but
    apply it only with use_sliding_window, and then to layers from max_window_layers on (transformers Qwen2Config:
    layer_types = sliding if use_sliding_window and i >= max_window_layers)."""
    w = c.get("sliding_window")
    types = c.layer_types(layers, ("sliding_attention", "full_attention"))
    if types is not None:
        if "sliding_attention" in types and w is None:
            raise ConfigError(f"{c.where}: layer_types has sliding layers but sliding_window is null.",
                              "Fix the config.json.")
        return [w if t == "sliding_attention" else None for t in types]
    if not model_type.startswith("qwen"):
        return [w] * layers
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


# what a multimodal config's text part leaves out (map_config adds the vision tower's note to any wrapper)
TEXT_PART_ONLY = "not in config.json's text part: not counted without safetensors headers"


def mtp_notes(count, what: str = "layer") -> list[str]:
    """The report's line for a checkpoint's multi-token-prediction layers or modules, which plain decoding does not
    run and the count leaves out."""
    return [f"{count} multi-token-prediction {what}(s) in the checkpoint, not used by plain decoding: not counted"] \
        if count else []
