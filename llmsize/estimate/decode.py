"""Decode: the bandwidth-bound ceiling, the roofline step at batch B, and where decode turns compute-bound.

A step of B sequences at context L reads W(B) weight bytes + B * KV(L) cache bytes and does B * F(L)
FLOPs. It lasts max(bytes / bandwidth, FLOPs / peak) and yields B tokens (roofline model: Williams,
Waterman, Patterson, CACM 2009). At batch 1 it is the seed's division: tok/s = bandwidth / bytes per token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.errors import InvalidValueError
from llmsize.estimate.flops import decode_flops_per_token
from llmsize.estimate.kv import kv_bytes
from llmsize.estimate.quant import QuantFormat
from llmsize.estimate.weights import bytes_read_by_batch

MAX_BATCH_SEARCHED = 1 << 20


@dataclass(frozen=True)
class DecodeStep:
    batch: int
    context_tokens: int
    weight_bytes: float
    kv_bytes: float  # all B sequences
    flops: float
    memory_time_s: float
    compute_time_s: float | None  # None when the card's peak is unknown
    comm_time_s: float = 0.0  # tensor/pipeline-parallel traffic between cards (parallel.py)

    @property
    def bytes_total(self) -> float:
        return self.weight_bytes + self.kv_bytes

    @property
    def step_time_s(self) -> float:
        return max(self.memory_time_s, self.compute_time_s or 0.0) + self.comm_time_s

    @property
    def tok_s(self) -> float:
        """Aggregate tokens per second over the batch."""
        return self.batch / self.step_time_s

    @property
    def bound(self) -> str:
        if self.compute_time_s is not None and self.compute_time_s > self.memory_time_s:
            return "compute"
        return "memory"

    @property
    def intensity_flop_per_byte(self) -> float:
        return self.flops / self.bytes_total


def check_batch(batch: int) -> int:
    if batch < 1:
        raise InvalidValueError(f"Batch `{batch}` must be at least 1.", "Pass --batch 1 or more.")
    return batch


@dataclass(frozen=True)
class DecodeModel:
    """Everything a step needs, fixed once: model, card, formats, context, peak."""

    model: ModelSpec
    gpu: GpuSpec
    fmt: QuantFormat
    scope: str
    kv_dtype: str
    context_tokens: int
    peak_flop_per_s: float | None
    weights_read: Callable[[int], float] | None = None  # exact bytes by batch (checkpoint headers)
    comm: object | None = None  # parallel.Comm for tp/pp > 1: bytes and time between cards
    kv_read_factor: float = 1.0  # bytes read of the cache per byte cached (runtime_model.kv_read_factor)

    def __post_init__(self):  # the format's bytes by batch, its per-tensor work done once (a GGUF file's types);
        # a sequence's cache read and a token's FLOPs, the same at every batch
        object.__setattr__(self, "_read", self.weights_read or bytes_read_by_batch(self.model, self.fmt, self.scope))
        object.__setattr__(self, "_kv_read", kv_bytes(self.model, self.context_tokens, self.kv_dtype).read_bytes
                           * self.kv_read_factor)
        object.__setattr__(self, "_flops", decode_flops_per_token(self.model, self.context_tokens))

    def step(self, batch: int) -> DecodeStep:
        check_batch(batch)
        w = self._read(batch)
        kv = batch * self._kv_read
        flops = batch * self._flops
        bw = self.gpu.bandwidth_bytes_per_s
        compute = flops / self.peak_flop_per_s if self.peak_flop_per_s else None
        comm = self.comm.time_s(batch, self.model.hidden_size) if self.comm is not None else 0.0
        return DecodeStep(batch, self.context_tokens, w, kv, flops, (w + kv) / bw, compute, comm)

    def ceiling_tok_s(self) -> float:
        """bandwidth / bytes read per decoded token, batch 1."""
        return self.gpu.bandwidth_bytes_per_s / self.step(1).bytes_total

    def ridge_batch(self) -> int | None:
        """Smallest batch whose step is compute-bound; None if none is (unknown peak, or KV reads
        grow as fast as the FLOPs so decode never leaves the memory roof)."""
        if not self.peak_flop_per_s:
            return None
        lo, hi = 1, 1
        while self.step(hi).bound == "memory":
            lo, hi = hi, hi * 2
            if hi > MAX_BATCH_SEARCHED:
                return None
        if hi == 1:
            return 1
        while hi - lo > 1:  # bound is monotone in B: bytes grow sub-linearly or linearly, FLOPs linearly
            mid = (lo + hi) // 2
            if self.step(mid).bound == "memory":
                lo = mid
            else:
                hi = mid
        return hi
