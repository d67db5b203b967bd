"""An experiment, not the model: four forms of a serving engine's fixed cost in a time to first token, compared on
the dataset's vLLM, SGLang and TensorRT-LLM prompt rows (CUDA), each source held out in turn.

    python benchmarks/experiments/serving_prompt_fixed_cost_forms.py
    python benchmarks/experiments/accelmark_ttft_as_prompt_rows.py          # then again, with AccelMark's TTFTs
    python benchmarks/experiments/serving_prompt_fixed_cost_forms.py
    git checkout measurements/

Each row's GPU time is the shipped constants' (runtimes/*.yaml): g = s x max(compute, weights) + the forward's
fixed costs but the serving engines' per-layer prefill cost (t_layer_s a layer, collectives); the forms then add
    sum       g + layers x t_pl                      (the shipped form, speed.prefill_parts_s)
    sumreq    g + layers x t_pl + t_req              (and a cost a request)
    max       t_req + max(g, layers x t_pl)          (the host's per-layer work hidden under a long prompt's kernels)
    maxnoreq  max(g, layers x t_pl)
with s (a scale on the shipped compute time, 0.5-2), t_pl (0-1.5 ms) and t_req (0-40 ms) chosen per runtime on a
grid by least relative squared error. The fractions inside g were fitted on every row, the held-out one among them,
so these are a comparison of forms, not the fit's held-out figures (benchmarks/fit_speed.py). RESULTS.md, "A
serving prompt's fixed cost: four forms compared" (2026-12-06).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import fit_speed  # noqa: E402

from llmsize.catalog.loader import Catalog  # noqa: E402
from llmsize.estimate.runtimes import constants  # noqa: E402
from llmsize.estimate.speed import prefill_parts_s  # noqa: E402

FORMS = ("sum", "sumreq", "max", "maxnoreq")
SCALES = np.linspace(0.5, 2.0, 31)[:, None, None, None]
LAYER_COSTS_S = np.linspace(0.0, 1.5e-3, 31)[None, :, None, None]
REQUEST_COSTS_S = np.linspace(0.0, 40e-3, 41)[None, None, :, None]


def prompt_rows(cat: Catalog) -> dict[str, list[tuple[str, float, float, float, float]]]:
    """Per serving runtime, its CUDA prompt rows as (source, measured s, GPU compute-or-read s, GPU fixed s, layers)."""
    out: dict[str, list] = {}
    for o in fit_speed.observations(cat)[0]:
        if o.prefill is None or o.runtime not in ("vllm", "sglang", "trtllm") or o.backend != "cuda":
            continue
        c = constants(cat.runtimes.get(o.runtime), o.backend, o.plan.gpu, unfitted_card=True)
        parts = prefill_parts_s(o.prefill, c)
        if parts is None:
            continue
        compute, weights, fixed = parts
        layers = o.prefill.layers
        out.setdefault(o.runtime, []).append((o.source_key.split("::")[0], o.measured_s, max(compute, weights),
                                              fixed - layers * c.t_prefill_layer_s, layers))
    return out


def form_time_s(form: str, s, t_pl, t_req, work, fixed, layers):
    """A row's time under `form` (numbers, or arrays that broadcast: the grid against the rows)."""
    g = s * work + fixed
    return {"sum": g + layers * t_pl + 0 * t_req, "sumreq": g + layers * t_pl + t_req,
            "max": t_req + np.maximum(g, layers * t_pl), "maxnoreq": np.maximum(g, layers * t_pl) + 0 * t_req}[form]


def fit(form: str, rows) -> tuple[float, float, float]:
    meas, work, fixed, layers = (np.array([r[i] for r in rows]) for i in range(1, 5))
    times = form_time_s(form, SCALES, LAYER_COSTS_S, REQUEST_COSTS_S, work, fixed, layers)
    err = np.sum(((times - meas) / meas) ** 2, axis=-1)
    if form in ("sum", "maxnoreq"):
        err[:, :, 1:] = np.inf  # no cost a request in these forms
    i, j, k = np.unravel_index(np.argmin(err), err.shape)
    return float(SCALES.ravel()[i]), float(LAYER_COSTS_S.ravel()[j]), float(REQUEST_COSTS_S.ravel()[k])


def main() -> int:
    cat = Catalog()
    print(f"{'runtime':8s} {'form':9s} {'rows':>4s} {'median':>7s} {'p90':>7s}   all rows: s, t_pl, t_req")
    for runtime, rows in sorted(prompt_rows(cat).items()):
        for form in FORMS:
            errors = []
            for source in sorted({r[0] for r in rows}):
                train = [r for r in rows if r[0] != source]
                if not train:
                    continue
                params = fit(form, train)
                # the fit's error measure: |predicted rate - measured rate| / measured rate
                errors += [abs(r[1] / float(form_time_s(form, *params, *r[2:])) - 1) for r in rows if r[0] == source]
            s, t_pl, t_req = fit(form, rows)
            med, p90 = fit_speed.median(errors), fit_speed.quantile(errors, 0.9, "high")
            print(f"{runtime:8s} {form:9s} {len(errors):4d} {100 * med:6.1f}% {100 * p90:6.1f}%"
                  f"   {s:.2f}, {t_pl * 1e3:.2f} ms, {t_req * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
