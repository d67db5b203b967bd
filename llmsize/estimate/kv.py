"""KV cache and recurrent state per sequence, by layer kind.

Per layer, at context L (DESIGN.md "Describing a model"):
  full     2 * kv_heads * head_dim * L * bytes(kv_dtype)             (MHA / GQA / MQA by kv_heads)
  sliding  2 * kv_heads * head_dim * min(L, W) * bytes(kv_dtype)
  mla      (kv_lora_rank + qk_rope_head_dim) * L * bytes(kv_dtype)   (DeepSeek-V2 paper, sec. 2.1); min(L, W)
           under a KV policy's cap (estimate/kv_policy.py); with DeepSeek Sparse Attention's indexer (V3.2), plus
           its key, (index_head_dim + index_head_dim / 128 x 4) B a token whatever the cache dtype: 128 FP8 values
           and one FP32 scale per 128 = 132 B (vLLM deepseek_v2.py, DeepseekV32IndexerCache: head_dim =
           index_head_dim + index_head_dim // quant_block_size * 4, uint8; SGLang NSATokenToKVPool: page_size x
           (index_head_dim + index_head_dim // 128 x 4))
  ssm      conv state (k-1) * conv_dim * 2 B + heads * head_dim * d_state * bytes(state), independent of L
  linear   conv state (k-1) * conv_dim * 2 B + v_heads * d_k * d_v * bytes(state), independent of L
  conv     conv state (k-1) * conv_dim * 2 B (LFM2's short convolution), independent of L
  compressed  (DeepSeek-V4) one row of head_dim values a token of its window, min(L, W) rows (K = V: one row, not
           two), counted with the sliding layers; and a compressing layer's ceil(L / r) compressed rows, plus as many
           indexer keys (132 B each, as V3.2's) where it has an indexer: those grow with L, counted as `compressed`.
           A row is head_dim x bytes(kv_dtype), or under an FP8 cache the engines' 584 B
           (quant.COMPRESSED_FP8_ROW_BYTES). The compressors' running state (a few tokens' worth a layer) is left out.
The factor 2 is K and V. Gemma 4's full layers have K = V at the projection, but K is normed and
rotated and V is only normed, so both are cached: k_eq_v saves weights, not cache (an assumption).

A layer that shares an earlier layer's cache (Gemma 4 E2B/E4B's last num_kv_shared_layers, `kv_shared`) caches
nothing, but its attention reads that layer's cache again at every step: it adds to what a step reads, not to what a
sequence holds (transformers modeling_gemma4.py: a shared layer takes past_key_values.shared_layers[
kv_shared_layer_index], the last earlier non-shared layer of its attention type, and updates no cache).

What a decode step reads of the cache is what it holds, except in a sparse-attention layer: its indexer reads every
cached key (L x 132 B) and its attention the latents of the topk tokens it picked, min(L, topk) x the latent bytes
(DeepSeek-V3.2-Exp report: "DSA reduces the core attention complexity of the main model from O(L^2) to O(Lk)"); a
DeepSeek-V4 layer with an indexer reads its window, every indexer key and the topk compressed rows it picked.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import (
    STATE_KINDS,
    CompressedAttention,
    FullAttention,
    LinearAttention,
    Mamba2Mixer,
    MlaAttention,
    ModelSpec,
    ShortConvMixer,
    SlidingAttention,
)
from llmsize.errors import InvalidValueError
from llmsize.estimate.memo import by_identity
from llmsize.estimate.quant import (
    COMPRESSED_FP8_ROW_BYTES,
    MLA_DS_FP8_BYTES_PER_TOKEN,
    STATE_DTYPE_BYTES,
    kv_dtype_bytes,
)

KINDS = ("full", "sliding", "mla", "compressed", "ssm", "linear", "conv")
GROWING_KINDS = ("full", "mla", "compressed")  # kinds whose cache grows with every token (sliding windows fill up)
CONV_STATE_BYTES = 2  # conv states are kept in the activation dtype (bf16)


INDEXER_SCALE_BLOCK = 128  # one FP32 scale per 128 FP8 values of an indexer key (vLLM quant_block_size)


def mixers_of(model: ModelSpec, kinds: tuple[str, ...]) -> list:
    """The model's mixers of `kinds` (schema Mixer kinds; STATE_KINDS for Mamba-like layers), one per layer group
    that has one."""
    return [g.mixer for g in model.layer_groups if g.mixer is not None and g.mixer.kind in kinds]


def mla_mixers(model: ModelSpec) -> list:
    """The model's multi-head latent attention mixers (DeepSeek V2/V3's, Kimi K2's, GLM-4.7-Flash's), one per layer
    group that has one."""
    return mixers_of(model, ("mla",))


def indexer_bytes_per_token(mixer) -> float:
    """A sparse-attention layer's indexer key, per cached token (0 for any other layer, and for a layer that reuses
    another's top-k: vLLM builds no Indexer, hence no DeepseekV32IndexerCache, where it skips the top-k)."""
    ix = getattr(mixer, "indexer", None)
    return float(ix.head_dim + ix.head_dim // INDEXER_SCALE_BLOCK * 4) if ix is not None and not ix.shared else 0.0


def latent_bytes_per_token(mixer, kv_bytes: float, kv_dtype: str = "") -> float:
    """What attention itself caches a token in one layer (an MLA layer's latent; K and V elsewhere)."""
    if isinstance(mixer, (FullAttention, SlidingAttention)):
        return 2 * mixer.num_key_value_heads * mixer.head_dim * kv_bytes
    if isinstance(mixer, CompressedAttention):
        return float(COMPRESSED_FP8_ROW_BYTES) if kv_dtype.lower().startswith("fp8") else mixer.head_dim * kv_bytes
    if isinstance(mixer, MlaAttention):
        # vLLM stores a sparse-attention model's FP8 cache as fp8_ds_mla whatever FP8 was asked for
        # (DeepseekV32ForCausalLM.verify_and_update_config: cache_dtype.startswith("fp8") -> "fp8_ds_mla")
        if kv_dtype.lower() == "fp8_ds_mla" or (mixer.indexer is not None and kv_dtype.lower() == "fp8"):
            return float(MLA_DS_FP8_BYTES_PER_TOKEN)
        return (mixer.kv_lora_rank + mixer.qk_rope_head_dim) * kv_bytes
    return 0.0


def cached_tokens(mixer, context_tokens: int) -> int:
    """Tokens one layer caches at `context_tokens`: its window where it has one (a sliding layer's, or a KV policy's
    cap on an MLA layer), else all of them."""
    window = getattr(mixer, "sliding_window", None)
    return min(context_tokens, window) if window else context_tokens


def has_compressed_layers(model: ModelSpec) -> bool:
    """Whether the model has DeepSeek-V4's compressed-attention layers (schema.CompressedAttention)."""
    return any(isinstance(g.mixer, CompressedAttention) for g in model.layer_groups)


def compressed_entries(mixer, context_tokens: int) -> int:
    """A DeepSeek-V4 layer's compressed rows at `context_tokens`: one every compress_ratio tokens, the last one
    partial (0 for a layer of the window alone, or any other kind)."""
    r = getattr(mixer, "compress_ratio", None)
    return -(-context_tokens // r) if r else 0


def compressed_read_entries(mixer, context_tokens: int) -> int:
    """The compressed rows a decode query of a DeepSeek-V4 layer attends to: the topk its indexer picks, else all."""
    n = compressed_entries(mixer, context_tokens)
    return min(n, mixer.indexer.topk) if getattr(mixer, "indexer", None) is not None and n else n


def per_token_per_layer(mixer, kv_bytes: float, kv_dtype: str = "") -> float:
    """Bytes one layer caches a token: attention's, and a sparse-attention indexer's key."""
    return latent_bytes_per_token(mixer, kv_bytes, kv_dtype) + indexer_bytes_per_token(mixer)


def state_values(mixer) -> tuple[int, int]:
    """One sequence's constant state in one recurrent layer, in values: (conv state, recurrent state). Mamba-2:
    (conv_kernel - 1) x (d_inner + 2 groups x state) and heads x head_dim x state; a delta-rule layer: (conv_kernel -
    1) x (2 key dims + value dims) and value heads x d_k x d_v; a short conv: (conv_kernel - 1) x conv_dim and none.
    (0, 0) for attention."""
    if isinstance(mixer, Mamba2Mixer):
        d_inner = mixer.num_heads * mixer.head_dim
        return ((mixer.conv_kernel - 1) * (d_inner + 2 * mixer.n_groups * mixer.state_size),
                d_inner * mixer.state_size)
    if isinstance(mixer, ShortConvMixer):
        return (mixer.conv_kernel - 1) * mixer.conv_dim, 0
    if isinstance(mixer, LinearAttention):
        key_dim = mixer.num_key_heads * mixer.key_head_dim
        return ((mixer.conv_kernel - 1) * (2 * key_dim + mixer.num_value_heads * mixer.value_head_dim),
                mixer.num_value_heads * mixer.key_head_dim * mixer.value_head_dim)
    return 0, 0


def state_bytes_per_layer(mixer) -> float:
    """Constant per-sequence state of an SSM / linear-attention / short-conv layer: the conv state in the
    activations' 16 bits, the recurrent one in the layer's state dtype."""
    conv, rec = state_values(mixer)
    return float(conv * CONV_STATE_BYTES + (rec * STATE_DTYPE_BYTES[mixer.state_dtype] if rec else 0))


F32 = 4


def llamacpp_state_bytes(mixer) -> float:
    """One sequence's state in one recurrent layer as llama.cpp keeps it: its conv state (n_embd_r) and recurrent
    state (n_embd_s) both in F32 (src/llama-model.cpp create_memory: recurrent_type_k / _v GGML_TYPE_F32;
    src/llama-hparams.cpp @01b77b57: n_embd_r = (d_conv - 1) x conv channels, n_embd_s = d_state x d_inner, LFM2's
    n_embd_r = n_embd x (L_cache - 1))."""
    return float(F32 * sum(state_values(mixer)))


# how a runtime keeps a recurrent layer's state: "neutral", the conv state in the activations' 16 bits and the
# recurrent one in the model's state dtype (vLLM's, SGLang's), or "llamacpp", both in F32
STATE_BYTES = {"neutral": state_bytes_per_layer, "llamacpp": llamacpp_state_bytes}


@dataclass(frozen=True)
class KvBytes:
    """Cache of one sequence at `context_tokens`, by layer kind, under `kv_dtype`."""

    kv_dtype: str
    context_tokens: int
    bytes_by_kind: dict[str, float]
    layers_by_kind: dict[str, int]
    bytes_per_token_by_kind: dict[str, float]  # per cached token, all layers of that kind
    read_bytes: float  # what a decode step reads of it: all of it, but only the picked tokens of a sparse layer
    indexer_bytes_per_token: float = 0.0  # of bytes_per_token, the sparse-attention indexers' keys (all layers)
    topk: int | None = None  # tokens a sparse layer's attention reads (index_topk), None without sparse layers
    shared_layers: int = 0  # layers that read an earlier layer's cache and hold none (not in layers_by_kind)
    states: str = "neutral"  # how the runtime lays out states and DeepSeek-V4's indexer keys (kv_bytes)

    @property
    def bytes_per_sequence(self) -> float:
        return sum(self.bytes_by_kind.values())

    @property
    def bytes_per_token(self) -> float:
        """Bytes each further token adds once every sliding window is full: full, MLA and compressed layers (a
        compressed row every r tokens: a share of one a token)."""
        return sum(self.bytes_per_token_by_kind[k] for k in GROWING_KINDS)

    @property
    def fixed_bytes_per_sequence(self) -> float:
        """What a sequence holds that does not grow with it: its sliding windows (once full) and recurrent state."""
        return sum(b for kind, b in self.bytes_by_kind.items() if kind not in GROWING_KINDS)


def check_context(context_tokens: int) -> int:
    if context_tokens < 0:
        raise InvalidValueError(f"Context `{context_tokens}` is negative.", "Give a context of 0 tokens or more.")
    return context_tokens


@by_identity(maxsize=4096)
def kv_bytes(model: ModelSpec, context_tokens: int, kv_dtype: str, states: str = "neutral") -> KvBytes:
    """KV cache + recurrent state of one sequence holding `context_tokens` tokens (cached by the model's identity:
    fleet asks for the same model and length thousands of times across its configurations); `states`: how the
    runtime keeps a recurrent layer's state (STATE_BYTES) and, "llamacpp", a DeepSeek-V4 layer's indexer keys: in its
    K cache's type, head_dim values a row (src/llama-kv-cache-dsv4.cpp: kv_lid of type_k), not the engines' FP8
    keys with their scales."""
    state_bytes = STATE_BYTES[states]
    check_context(context_tokens)
    b = float(kv_dtype_bytes(kv_dtype))
    by_kind = dict.fromkeys(KINDS, 0.0)
    per_tok = dict.fromkeys(KINDS, 0.0)
    layers = dict.fromkeys(KINDS, 0)
    read, indexer, topk, shared = 0.0, 0.0, None, 0
    for g in model.layer_groups:
        m = g.mixer
        if m is None:
            continue
        kind = m.kind
        if getattr(m, "kv_shared", False):  # reads its source layer's cache, holds none
            shared += g.count
            read += g.count * per_token_per_layer(m, b, kv_dtype) * cached_tokens(m, context_tokens)
            continue
        if isinstance(m, CompressedAttention):
            row = latent_bytes_per_token(m, b, kv_dtype)
            window = cached_tokens(m, context_tokens)
            layers["sliding"] += g.count
            per_tok["sliding"] += g.count * row
            by_kind["sliding"] += g.count * row * window
            read += g.count * row * window
            if m.compress_ratio is None:
                continue
            ix = indexer_bytes_per_token(m)
            if ix and states == "llamacpp":
                ix = m.indexer.head_dim * b
            layers[kind] += g.count
            per_tok[kind] += g.count * (row + ix) / m.compress_ratio
            entries = compressed_entries(m, context_tokens)
            by_kind[kind] += g.count * (row + ix) * entries
            read += g.count * (ix * entries + row * compressed_read_entries(m, context_tokens))
            if m.indexer is not None:
                indexer += g.count * ix / m.compress_ratio
                topk = m.indexer.topk
            continue
        layers[kind] += g.count
        if kind in STATE_KINDS:
            by_kind[kind] += g.count * state_bytes(m)
            read += g.count * state_bytes(m)
            continue
        t = g.count * per_token_per_layer(m, b, kv_dtype)
        per_tok[kind] += t
        cached = cached_tokens(m, context_tokens)
        by_kind[kind] += t * cached
        ix = getattr(m, "indexer", None)
        if ix is None:
            read += t * cached
        else:  # every indexer key, the picked tokens' latents
            read += g.count * (indexer_bytes_per_token(m) * cached
                               + latent_bytes_per_token(m, b, kv_dtype) * min(cached, ix.topk))
            indexer += g.count * indexer_bytes_per_token(m)
            topk = ix.topk
    return KvBytes(kv_dtype, context_tokens, by_kind, layers, per_tok, read, indexer, topk, shared, states)
