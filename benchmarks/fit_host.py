"""The share of the host memory's peak bandwidth a CPU-only llama.cpp decode reaches, from published runs that state
their memory (measurements/host/); written by benchmarks/fit_speed.py into runtimes/llamacpp.yaml (`host`), and
used by the partial-offload model (llmsize/estimate/offload.py) for the layers and experts left on the host.

    python benchmarks/fit_host.py

A row's achieved fraction is (bytes one token reads) x (tok/s) / (the memory's peak: rate x 8 B x channels). The
bytes are the catalog model's GGUF file of that type as llama-quantize writes it, read as a decode step reads it
(routed experts at top-k / experts, the token embedding one row; weights.weight_bytes_read), or, for a model the
catalog lacks, the file size the source prints (the token embedding counted whole: a few percent high). The cache
of a short generation is left out (under 1% of the bytes for these runs). The fraction is the median of the
sources' medians (a source of many rows counts once); held out, each source's rows are predicted from the other
sources' fraction.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmsize.catalog.host_measurement import HostRow, load_host_dataset  # noqa: E402
from llmsize.catalog.measurement import format_id, printed_bytes  # noqa: E402
from llmsize.estimate.host_memory import parse_host_memory  # noqa: E402


@dataclass(frozen=True)
class HostObserved:
    source: str
    row: HostRow
    read_bytes: float  # one token's
    peak_bytes_per_s: float
    bytes_from: str  # "catalog" or "printed size"

    @property
    def fraction(self) -> float:
        return self.read_bytes * self.row.tok_s / self.peak_bytes_per_s


def read_bytes(cat, row: HostRow) -> tuple[float, str] | None:
    """Bytes one decode token reads, and where they come from; None where neither the catalog nor the row says."""
    from llmsize.estimate.plan import resolve_format
    from llmsize.estimate.weights import weight_bytes_read

    mid = row.model_id or row.shape_of
    fid = format_id("llamacpp", row.format)
    if mid is not None and fid is not None:
        model = cat.models.get(mid)
        fmt, scope = resolve_format(model, fid, None)
        return weight_bytes_read(model, fmt, scope, 1), "catalog"
    size = printed_bytes(row.model_size)
    return (size, "printed size") if size else None


def host_observations(cat) -> list[HostObserved]:
    out = []
    for stem, f in load_host_dataset().items():
        for row in f.rows:
            got = read_bytes(cat, row)
            if got is not None:
                out.append(HostObserved(stem, row, got[0], parse_host_memory(row.host_memory).bandwidth_bytes_per_s,
                                        got[1]))
    return out


def fraction_of(obs: list[HostObserved]) -> float:
    """The median of the sources' median fractions."""
    by: dict[str, list[float]] = {}
    for o in obs:
        by.setdefault(o.source, []).append(o.fraction)
    return statistics.median(statistics.median(v) for v in by.values())


def held_out(obs: list[HostObserved]) -> list[tuple[HostObserved, float]]:
    """(row, measured / predicted tok/s) with each source predicted from the others' fraction."""
    out = []
    for s in sorted({o.source for o in obs}):
        eta = fraction_of([o for o in obs if o.source != s])
        out += [(o, o.fraction / eta) for o in obs if o.source == s]
    return out


def fit_host(cat) -> dict | None:
    """runtimes/llamacpp.yaml's `host` block; None without rows from two sources."""
    obs = host_observations(cat)
    if len({o.source for o in obs}) < 2:
        return None
    ratios = sorted(r for _, r in held_out(obs))
    errors = sorted(abs(r - 1) for r in ratios)
    return {"eta_bandwidth": round(fraction_of(obs), 4), "rows": len(obs),
            "sources": sorted({o.source for o in obs}),
            "held_out": {"rows": len(errors), "median_abs_error": round(statistics.median(errors), 4),
                         "p90_abs_error": round(errors[min(len(errors) - 1, int(0.9 * len(errors)))], 4)},
            "band": [round(ratios[0], 4), round(ratios[-1], 4)]}


def main() -> int:
    from llmsize.catalog.loader import Catalog

    cat = Catalog()
    obs = host_observations(cat)
    print(f"{'source':36} {'cpu':30} {'memory':14} {'model':40} {'GB/token':>8} {'tok/s':>7} {'fraction':>8} "
          f"{'held out':>8}")
    for o, r in held_out(obs):
        print(f"{o.source[:36]:36} {o.row.cpu[:30]:30} {o.row.host_memory:14} {o.row.model[:40]:40} "
              f"{o.read_bytes / 1e9:8.2f} {o.row.tok_s:7.2f} {o.fraction:8.3f} {r:8.2f}")
    fit = fit_host(cat)
    if fit is None:
        print("fewer than two sources: no fraction")
        return 1
    print(f"\nfraction of the host memory's peak: {fit['eta_bandwidth']:.3f} ({fit['rows']} rows, "
          f"{len(fit['sources'])} sources); held out (each source from the others): median |error| "
          f"{fit['held_out']['median_abs_error']:.1%}, p90 {fit['held_out']['p90_abs_error']:.1%}; measured / "
          f"predicted {fit['band'][0]:.2f}-{fit['band'][1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
