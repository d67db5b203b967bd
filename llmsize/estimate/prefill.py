"""Prefill: time to first token = max(FLOPs / dense peak, bytes / bandwidth) for the prompt.

Bytes: the weights (all routed experts a prompt of P tokens touches) + the KV cache written.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.estimate.flops import prefill_flops
from llmsize.estimate.kv import kv_bytes
from llmsize.estimate.quant import QuantFormat
from llmsize.estimate.weights import bytes_read_by_batch


@dataclass(frozen=True)
class Prefill:
    prompt_tokens: int
    flops: float
    bytes: float
    compute_time_s: float | None
    memory_time_s: float

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
                 prompt_tokens: int, peak_flop_per_s: float | None, weights_read=None, comm=None) -> Prefill:
    """weights_read: exact weight bytes by batch (checkpoint headers) instead of the format's estimate."""
    flops = prefill_flops(model, prompt_tokens)
    read = weights_read or bytes_read_by_batch(model, fmt, scope)
    nbytes = read(max(prompt_tokens, 1))
    nbytes += kv_bytes(model, prompt_tokens, kv_dtype).bytes_per_sequence
    compute = flops / peak_flop_per_s if peak_flop_per_s else None
    comm_s = comm.time_s(1, model.hidden_size, tokens=prompt_tokens) if comm is not None else 0.0
    if compute is not None:
        compute += comm_s  # tensor-parallel all-reduces of the prompt's activations
    return Prefill(prompt_tokens, flops, nbytes, compute, nbytes / gpu.bandwidth_bytes_per_s + comm_s)
