"""Percentiles as measure reports them (linear interpolation between order statistics, numpy's default)."""

from __future__ import annotations


def percentile(xs: list[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of a non-empty list."""
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def spread(xs: list[float], scale: float = 1.0) -> dict | None:
    """p10, median and p90 of xs times scale; None for no sample."""
    if not xs:
        return None
    return {"p10": percentile(xs, 0.1) * scale, "median": percentile(xs, 0.5) * scale,
            "p90": percentile(xs, 0.9) * scale, "samples": len(xs)}
