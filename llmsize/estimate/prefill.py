"""Prefill: time to first token = max(FLOPs / dense peak, bytes / bandwidth) for the prompt.

Bytes: the weights (all routed experts a prompt of P tokens touches) + the KV cache written.

Attention scores. Unfused attention (PyTorch eager, llama.cpp with -fa off) writes each layer's score matrix to
memory, heads x queries x keys in view, one layer at a time: for a prompt of P tokens in one pass,
    unfused_scores_bytes = max over attention layers (heads) x P x P x 4 B (FP32 scores, as llama.cpp keeps them)
and the kernels around the softmax move UNFUSED_SCORE_TRAFFIC bytes a score (llama.cpp's build_attn_mha: written
in F32 by the QK matmul, read and written by the softmax, read and converted to F16 for the PV matmul, read again:
4 + 4 + 4 + 4 + 2 + 2 = 20 B). FlashAttention (Dao et al. 2022, "FlashAttention: Fast and Memory-Efficient Exact
Attention with IO-Awareness") computes the softmax over tiles held on chip: no score matrix in memory, memory linear
in P rather than quadratic. The plan shows the matrix; with --no-flash-attn it is held beside the cache and its
traffic is in the time to first token.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.estimate.flops import prefill_attention_flops, prefill_flops
from llmsize.estimate.kv import kv_bytes
from llmsize.estimate.quant import QuantFormat
from llmsize.estimate.weights import bytes_read_by_batch

SCORE_BYTES_HELD = 4  # FP32 scores
UNFUSED_SCORE_TRAFFIC = 20  # bytes moved a score by unfused attention's kernels (llama.cpp build_attn_mha)


def widest_heads(model: ModelSpec) -> int:
    """The most attention heads of any layer (whose score matrix is the largest; 0 without attention layers)."""
    return max((g.mixer.num_attention_heads for g in model.layer_groups
                if g.mixer is not None and hasattr(g.mixer, "num_attention_heads")), default=0)


def unfused_scores_bytes(model: ModelSpec, prompt_tokens: int) -> float:
    """The largest score matrix one layer holds when a prompt of `prompt_tokens` runs in one pass without flash
    attention: its heads x P x P x 4 B (a layer at a time; 0 for a model without attention layers)."""
    return float(widest_heads(model)) * prompt_tokens * prompt_tokens * SCORE_BYTES_HELD


def unfused_score_traffic_bytes(model: ModelSpec, prompt_tokens: int) -> float:
    """Bytes unfused attention moves for the prompt's scores, every attention layer: heads x P x P x 20 B."""
    return sum(g.count * getattr(g.mixer, "num_attention_heads", 0) for g in model.layer_groups
               if g.mixer is not None) * prompt_tokens * prompt_tokens * UNFUSED_SCORE_TRAFFIC


@dataclass(frozen=True)
class Prefill:
    prompt_tokens: int
    flops: float
    bytes: float
    compute_time_s: float | None
    memory_time_s: float
    scores_bytes: float = 0.0  # one layer's score matrix without flash attention (unfused_scores_bytes)
    flash_attn: bool = True  # False: the scores' traffic is in `bytes`
    attention_flops: float = 0.0  # the part of `flops` in attention's matmuls (flops.prefill_attention_flops)

    @property
    def ttft_s(self) -> float | None:
        """None when the card's peak is unknown and compute may dominate."""
        if self.compute_time_s is None:
            return None
        return max(self.compute_time_s, self.memory_time_s)

    @property
    def bound(self) -> str | None:
        if self.compute_time_s is None:
            return None
        return "compute" if self.compute_time_s >= self.memory_time_s else "memory"


def prefill_time(model: ModelSpec, gpu: GpuSpec, fmt: QuantFormat, scope: str, kv_dtype: str,
                 prompt_tokens: int, peak_flop_per_s: float | None, weights_read=None, comm=None,
                 flash_attn: bool = True) -> Prefill:
    """weights_read: exact weight bytes by batch (checkpoint headers) instead of the format's estimate;
    flash_attn False: the score matrices' traffic is read and written too."""
    flops = prefill_flops(model, prompt_tokens)
    read = weights_read or bytes_read_by_batch(model, fmt, scope)
    nbytes = read(max(prompt_tokens, 1))
    nbytes += kv_bytes(model, prompt_tokens, kv_dtype).bytes_per_sequence
    if not flash_attn:
        nbytes += unfused_score_traffic_bytes(model, prompt_tokens)
    compute = flops / peak_flop_per_s if peak_flop_per_s else None
    comm_s = comm.time_s(1, model.hidden_size, tokens=prompt_tokens) if comm is not None else 0.0
    if compute is not None:
        compute += comm_s  # tensor-parallel all-reduces of the prompt's activations
    return Prefill(prompt_tokens, flops, nbytes, compute, nbytes / gpu.bandwidth_bytes_per_s + comm_s,
                   unfused_scores_bytes(model, prompt_tokens), flash_attn, prefill_attention_flops(model, prompt_tokens))
