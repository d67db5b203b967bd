"""Data behind the charts: the roofline of each card with a model's decode and prefill points, and the KV
cache against context for each KV dtype next to the weights. Pure numbers; drawing is in render/."""

from __future__ import annotations

from dataclasses import dataclass, replace

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.estimate.kv import kv_bytes
from llmsize.estimate.plan import PlanInputs, make_plan

KV_DTYPES = ("fp32", "bf16", "fp8", "nvfp4")


@dataclass(frozen=True)
class Point:
    label: str
    intensity_flop_per_byte: float
    flop_per_s: float
    bound: str
    fits: bool = True  # a decode batch whose sequences' cache the card holds at the plan's context


@dataclass(frozen=True)
class Roof:
    gpu: GpuSpec
    bandwidth_bytes_per_s: float
    peak_flop_per_s: float | None
    precision: str | None
    points: list[Point]
    max_sequences: int | None = None  # the sequences whose cache the card holds at the plan's context

    @property
    def ridge_flop_per_byte(self) -> float | None:
        return self.peak_flop_per_s / self.bandwidth_bytes_per_s if self.peak_flop_per_s else None

    def attainable_flop_per_s(self, intensity: float) -> float:
        """The roof: min(peak, bandwidth x intensity) (Williams, Waterman, Patterson 2009)."""
        return min(self.peak_flop_per_s or float("inf"), self.bandwidth_bytes_per_s * intensity)

    def curve(self, intensities: list[float]) -> list[tuple[float, float]]:
        """(intensity, attainable FLOP/s) at the given intensities and at the ridge, sorted."""
        xs = sorted(set(intensities) | ({self.ridge_flop_per_byte} if self.ridge_flop_per_byte else set()))
        return [(x, self.attainable_flop_per_s(x)) for x in xs]


def batches_up_to(n: int) -> list[int]:
    out, b = [], 1
    while b < n:
        out.append(b)
        b *= 2
    return out + [n]


def roofline(model: ModelSpec, gpu: GpuSpec, inputs: PlanInputs, max_batch: int = 1024) -> Roof:
    """Decode steps at batch 1, 2, 4, ... max_batch (FLOPs / bytes of a step, FLOPs / step time), each marked by
    whether the card holds that many sequences' cache at the plan's context, and the prefill of --prompt tokens, on
    one card."""
    base = make_plan(model, gpu, inputs)
    points = []
    for b in batches_up_to(max_batch):
        p = base if b == inputs.batch else make_plan(model, gpu, replace(inputs, batch=b), search_fit=False)
        s = p.decode_b
        points.append(Point(f"decode b={b}", s.flops / s.bytes_total, s.flops / s.step_time_s, s.bound,
                            b <= base.max_sequences))
    pre = base.prefill
    if pre.ttft_s:
        points.append(Point(f"prefill of {base.prompt_tokens:,} tokens", pre.flops / pre.bytes, pre.flops / pre.ttft_s,
                            pre.bound or "compute"))
    return Roof(gpu, gpu.bandwidth_bytes_per_s, base.peak.flop_per_s, base.peak.precision, points,
                base.max_sequences)


def rooflines(model: ModelSpec, cards: list[tuple[GpuSpec, PlanInputs]], max_batch: int = 1024) -> list[Roof]:
    """roofline() of each (card, inputs) the model can be planned on; a pair whose plan is refused is left out."""
    from llmsize.errors import LlmsizeError

    out = []
    for g, inputs in cards:
        try:
            out.append(roofline(model, g, inputs, max_batch))
        except LlmsizeError:
            continue
    return out


@dataclass(frozen=True)
class KvCurve:
    dtype: str
    contexts: list[int]
    bytes_per_sequence: list[float]


def kv_curves(model: ModelSpec, contexts: list[int], dtypes=KV_DTYPES, users: int = 1) -> list[KvCurve]:
    """KV bytes of `users` sequences of each context, per KV dtype."""
    return [KvCurve(dt, contexts, [users * kv_bytes(model, c, dt).bytes_per_sequence for c in contexts])
            for dt in dtypes]


def contexts_up_to(limit: int, start: int = 256) -> list[int]:
    out, c = [], start
    while c < limit:
        out.append(c)
        c *= 2
    return out + [limit]


def crossover_tokens(model: ModelSpec, kv_dtype: str, weights_bytes: float, users: int = 1,
                     limit: int | None = None) -> int | None:
    """Smallest context at which the cache of `users` sequences outweighs the weights (the seeds' rule of
    thumb); None if it does not within `limit` (default max_position_embeddings)."""
    limit = limit or model.max_position_embeddings
    if users * kv_bytes(model, limit, kv_dtype).bytes_per_sequence <= weights_bytes:
        return None
    lo, hi = 0, limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if users * kv_bytes(model, mid, kv_dtype).bytes_per_sequence > weights_bytes:
            hi = mid
        else:
            lo = mid
    return hi


def plan_charts(plan) -> tuple[list[Roof], list[KvCurve]]:
    """The data of plan's report charts: the card's roofline with the model's points at the plan's inputs, and the
    cache of the plan's batch of sequences against context per KV dtype, up to the model's longest context."""
    limit = max(2, plan.model.max_position_embeddings)
    roofs = rooflines(plan.model, [(plan.gpu, plan.inputs)])
    return roofs, kv_curves(plan.model, contexts_up_to(limit, start=min(256, limit // 2)), users=plan.inputs.batch)
