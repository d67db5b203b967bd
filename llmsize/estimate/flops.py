"""FLOPs of a decoded token and of a prefill, and the peak a card offers for them.

Matmuls: 2 FLOPs per multiply-add, per parameter used (Kaplan et al. 2020, "Scaling Laws", table 1:
forward ~ 2N). Attention: QK^T and PV each 2 * heads * head_dim FLOPs per attended token.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import (
    PRECISIONS,
    AttentionBase,
    CompressedAttention,
    GpuSpec,
    LinearAttention,
    Mamba2Mixer,
    MlaAttention,
    ModelSpec,
)
from llmsize.errors import InvalidValueError
from llmsize.estimate.kv import cached_tokens, compressed_entries, compressed_read_entries
from llmsize.estimate.memo import by_identity
from llmsize.estimate.quant import QuantFormat
from llmsize.estimate.weights import matmul_params_per_token

FALLBACK = ("bf16", "fp16", "fp32")
HALF = ("bf16", "fp16")


@dataclass(frozen=True)
class ComputePeak:
    precision: str | None
    flop_per_s: float | None
    requested: str
    note: str | None  # set when the requested precision had no figure


def compute_peak(gpu: GpuSpec, fmt: QuantFormat, override: str | None = None) -> ComputePeak:
    """Dense peak at the precision the math runs in.

    Default precision: the format's native one (fp4 for NVFP4/MXFP4, fp8 for FP8) where the card has
    tensor cores for it, else bf16 (weight-only kernels dequantize to bf16). A card without a figure
    for that precision falls back to bf16, fp16, then fp32 - a real, lower rate the card has,
    never a figure scaled from another precision; a 16-bit rate below the card's FP32 one is passed over for
    FP32 unless asked for (`override`).
    """
    if override is not None and override not in PRECISIONS:
        raise InvalidValueError(f"Unknown compute precision `{override}`.", f"Choose one of: {', '.join(PRECISIONS)}.")
    requested = override or fmt.native_compute
    fp32 = gpu.dense_tflops.get("fp32")
    for p in (requested, *FALLBACK):
        v = gpu.dense_tflops.get(p)
        if not v:
            continue
        if override is None and p in HALF and fp32 and v < fp32:
            # a card whose 16-bit math runs slower than its FP32 (Pascal's GP102: FP16 at 1/64 of FP32, no tensor
            # cores): engines compute in FP32 there, so that is the rate a step's math gets
            return ComputePeak("fp32", fp32 * 1e12, requested,
                               f"{gpu.id}'s {p} rate ({v:g} TFLOPS) is below its FP32 rate: compute costed at FP32 "
                               f"({fp32:g} TFLOPS), the precision engines run there")
        note = None if p == requested else (
            f"no dense {requested} figure for {gpu.id}; compute costed at its {p} peak ({v:g} TFLOPS)")
        return ComputePeak(p, v * 1e12, requested, note)
    note = f"no dense TFLOPS figure for {gpu.id} in the catalog: compute-bound figures are unknown"
    return ComputePeak(None, None, requested, note)


def _attn_flops_per_attended_token(mixer, rows: int = 1) -> float:
    """QK and PV FLOPs of one query token over one cached token; `rows`: the query heads that read one cached head
    (a GQA group; every head for absorbed MLA, whose latent they all share) rounded up to a tensor-core tile of that
    many rows, a padding row costing what a real one does (1: no padding)."""
    if isinstance(mixer, AttentionBase):
        group = mixer.num_attention_heads // mixer.num_key_value_heads
        return 4.0 * mixer.num_key_value_heads * -(-group // rows) * rows * mixer.head_dim
    if isinstance(mixer, MlaAttention):
        # absorbed MLA at decode: scores over latent + rope dims, values over the latent
        return 2.0 * -(-mixer.num_attention_heads // rows) * rows * (2 * mixer.kv_lora_rank + mixer.qk_rope_head_dim)
    if isinstance(mixer, CompressedAttention):  # DeepSeek-V4: every head reads the one row, scores and values over it
        return 4.0 * -(-mixer.num_attention_heads // rows) * rows * mixer.head_dim
    return 0.0


def _recurrent_flops_per_token(mixer) -> float:
    # state update h = a*h + B x and readout y = C h: ~3 multiply-adds per state element
    if isinstance(mixer, Mamba2Mixer):
        return 6.0 * mixer.num_heads * mixer.head_dim * mixer.state_size
    if isinstance(mixer, LinearAttention):
        return 6.0 * mixer.num_value_heads * mixer.key_head_dim * mixer.value_head_dim
    return 0.0


def _indexer_flops_per_scored_token(mixer) -> float:
    """A sparse-attention indexer scores each cached token with n_heads dot products of head_dim (DeepSeek-V3.2-Exp
    report: I_ts = sum_j w_tj ReLU(q_tj . k_s)); 0 without an indexer, or where the layer reuses another's top-k."""
    ix = getattr(mixer, "indexer", None)
    return 2.0 * ix.n_heads * ix.head_dim if ix is not None and not ix.shared else 0.0


def _attention_cap(mixer) -> int | None:
    """Tokens a query's attention reads at most: its window (a sliding layer's, a KV policy's cap), a sparse layer's
    topk, the smaller; None: all of them (and for a DeepSeek-V4 layer, whose window and compressed rows add up:
    _attended)."""
    if isinstance(mixer, CompressedAttention):
        return None
    caps = [c for c in (getattr(mixer, "sliding_window", None), getattr(getattr(mixer, "indexer", None), "topk", None))
            if c]
    return min(caps) if caps else None


def decode_attention_tile_flops(model: ModelSpec, context_tokens: int, rows: int, keep=None) -> float:
    """Decode attention's FLOPs for one sequence's token as a tensor-core kernel computes them: the query heads that
    read one cached head (a GQA group; every head for absorbed MLA, whose latent they all share) are the rows of
    its tile, rounded up to `rows` (1: the FLOPs themselves); a padding row costs what a real one does. Attention
    layers only (no indexer, no recurrent state); `keep(mixer)`: only the layer groups it selects."""
    return sum(flops * (_attended(mixer, context_tokens) if isinstance(mixer, CompressedAttention)
                        else _capped(context_tokens, cap))
               for mixer, flops, cap in _tile_groups(model, rows) if keep is None or keep(mixer))


@by_identity(maxsize=512)
def _tile_groups(model: ModelSpec, rows: int) -> tuple[tuple[object, float, int | None], ...]:
    """Per layer group with a mixer: (mixer, its layers' tile FLOPs per attended token, its cap: _attention_cap),
    worked out once a model (a fleet search asks for thousands of batches)."""
    return tuple((g.mixer, g.count * _attn_flops_per_attended_token(g.mixer, rows), _attention_cap(g.mixer))
                 for g in model.layer_groups if g.mixer is not None)


def _attended(mixer, context_tokens: int) -> int:
    """Cached tokens one decode query attends to: the context, up to the layer's cap (_attention_cap); a DeepSeek-V4
    layer's window and the compressed rows it reads (kv.compressed_read_entries)."""
    if isinstance(mixer, CompressedAttention):
        return min(context_tokens, mixer.sliding_window) + compressed_read_entries(mixer, context_tokens)
    return _capped(context_tokens, _attention_cap(mixer))


def _scored(mixer, context_tokens: int) -> int:
    """Keys a decode query's indexer scores: every cached token, or a DeepSeek-V4 layer's every compressed row."""
    if isinstance(mixer, CompressedAttention):
        return compressed_entries(mixer, context_tokens)
    return cached_tokens(mixer, context_tokens)


def _capped(context_tokens: int, cap: int | None) -> int:
    return min(context_tokens, cap) if cap else context_tokens


def decode_flops_per_token(model: ModelSpec, context_tokens: int) -> float:
    """FLOPs to decode one token with `context_tokens` already cached."""
    flops = 2.0 * matmul_params_per_token(model)
    for g in model.layer_groups:
        m = g.mixer
        if m is None:
            continue
        scored = _scored(m, context_tokens)
        flops += g.count * (_attn_flops_per_attended_token(m) * _attended(m, context_tokens)
                            + _indexer_flops_per_scored_token(m) * scored + _recurrent_flops_per_token(m))
    return flops


def _causal_pairs(prompt_tokens: int, window: int | None) -> float:
    """Sum over positions i = 1..P of the tokens attended, min(i, W)."""
    p = prompt_tokens
    if window is None or p <= window:
        return p * (p + 1) / 2
    return window * (window + 1) / 2 + (p - window) * window


def prefill_flops(model: ModelSpec, prompt_tokens: int) -> float:
    """FLOPs to prefill `prompt_tokens`: matmuls for every token (logits for the last one only),
    causal attention over the prompt (prefill_attention_flops), the recurrent layers' state updates."""
    lm_head = model.vocab_size * model.hidden_size
    body = matmul_params_per_token(model) - lm_head
    flops = 2.0 * (prompt_tokens * body + (lm_head if prompt_tokens else 0))
    flops += sum(g.count * _recurrent_flops_per_token(g.mixer) * prompt_tokens for g in model.layer_groups
                 if g.mixer is not None)
    return flops + prefill_attention_flops(model, prompt_tokens)


def prefill_attention_flops(model: ModelSpec, prompt_tokens: int) -> float:
    """The part of prefill_flops in attention's own matmuls (scores and values over the prompt, a sparse layer's
    indexer), which run at the cache's precision rather than the weights' (expected.prefill_inputs)."""
    flops = 0.0
    for g in model.layer_groups:
        m = g.mixer
        if m is None:
            continue
        if isinstance(m, MlaAttention):
            # prefill runs MLA un-absorbed: scores over nope+rope, values over v_head_dim
            per_pair = 2.0 * m.num_attention_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
        else:
            per_pair = _attn_flops_per_attended_token(m)
        if isinstance(m, CompressedAttention):
            flops += g.count * _compressed_prefill_flops(m, prompt_tokens, per_pair)
            continue
        window = getattr(m, "sliding_window", None)
        # a sparse layer's query i attends to min(i, topk) tokens (the windowed sum) and its indexer scores all i
        flops += g.count * (per_pair * _causal_pairs(prompt_tokens, _attention_cap(m))
                            + _indexer_flops_per_scored_token(m) * _causal_pairs(prompt_tokens, window))
    return flops


def _compressed_prefill_flops(m: CompressedAttention, prompt_tokens: int, per_pair: float) -> float:
    """A DeepSeek-V4 layer's attention over a prompt: query i reads min(i, window) tokens and about i / r compressed
    rows (at most topk where an indexer picks them: sum over i of min(i / r, topk) = _causal_pairs(P, r x topk) / r),
    and its indexer scores about i / r rows."""
    flops = per_pair * _causal_pairs(prompt_tokens, m.sliding_window)
    r = m.compress_ratio
    if r is None:
        return flops
    cap = r * m.indexer.topk if m.indexer is not None else None
    return flops + (per_pair * _causal_pairs(prompt_tokens, cap)
                    + _indexer_flops_per_scored_token(m) * _causal_pairs(prompt_tokens, None)) / r
