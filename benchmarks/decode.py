"""bf16 baseline and NVFP4 loop on the same card, in one run: tok/s, GB/s, % of theoretical and of the probe;
then the NVFP4 loop at batch 1, 4 and 16 (continuous-batching regime) next to plan's roofline.

    python benchmarks/decode.py [--context 4096] [--tokens 256] [--batches 1,4,16] [--no-baseline] [--append]

At 4,096 tokens plan's roofline never turns compute-bound (the KV cache grows as fast as the FLOPs); where
the loop leaves the memory roof, against plan's ridge, shows at a short context and large batches, e.g.
`--context 128 --tokens 64 --batches 1,16,32,64,128,256 --no-baseline` (plan's ridge there: ~140).

--append adds the table to benchmarks/RESULTS.md with the card, date, commit and command. Needs a CUDA GPU
and the measure extra; every run is `llmsize.measure.run.measure`, the code behind `llmsize measure`.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path

from llmsize.measure import GEMV_KERNELS
from llmsize.measure.run import MeasureOptions, git_commit, measure


def row(r: dict) -> str:
    d, a, run = r["decode"], r["achieved"], r["run"]
    p = r.get("predicted") or {}  # plan's figures for the run (llmsize.measure.run.predicted, plan_roofline)
    pred = p.get("ceiling_tok_s_theoretical")
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    roof = (p["roofline_tok_s"], p["roofline_bound"]) if p.get("roofline_tok_s") else None
    return (f"| {run['quant']} | {run['batch']} | {r['bytes_per_step'] / 1e9:.3f} | {d['ms_per_token_median']:.3f} | "
            f"{d['tok_s']:,.1f} | {a['bandwidth_gb_s']:,.0f} | {pct(a['fraction_of_theoretical'])} | "
            f"{pct(a['fraction_of_probe'])} | {'n/a' if pred is None else f'{pred:,.1f}'} | "
            f"{'n/a' if roof is None else f'{roof[0]:,.0f} ({roof[1]})'} |")


MEMORY_BOUND_SHARE = 0.8  # a batch counts as memory-bound while its bandwidth stays >= 80% of batch 1's


def memory_bound_verdict(nvfp4_rows: list[tuple[int, float]], ridge_batch: int | None, card: bool = True) -> str:
    """nvfp4_rows: (batch, achieved fraction of theoretical) in increasing batch. The loop is memory-bound at
    a batch while its step still moves the bytes at >= MEMORY_BOUND_SHARE of batch 1's rate (more sequences
    then cost almost no time: aggregate tok/s grows ~linearly); the first batch below that is where it stops.
    Beside it, plan's roofline: the smallest compute-bound batch (ridge_batch) or none (card: whether the card is
    in the catalog at all)."""
    rows = sorted(nvfp4_rows)
    if not rows or rows[0][0] != 1:
        return "no batch-1 NVFP4 row: no verdict"
    base = rows[0][1]
    if not base:
        return "no theoretical bandwidth (no card NVML reads): no verdict"
    below = [b for b, f in rows if f < MEMORY_BOUND_SHARE * base]
    bound = [b for b, f in rows if f >= MEMORY_BOUND_SHARE * base]
    measured = (f"the NVFP4 loop stays memory-bound up to batch {max(bound)} and stops by batch {min(below)} "
                f"(below {MEMORY_BOUND_SHARE:.0%} of batch 1's bandwidth)" if below else
                f"the NVFP4 loop stays memory-bound at every batch measured (up to {rows[-1][0]})")
    plan = ("no catalog card, so no plan roofline" if not card else
            f"plan's roofline turns compute-bound at batch {ridge_batch}" if ridge_batch else
            "plan's roofline stays memory-bound at every batch (at this context the KV cache grows as fast as "
            "the FLOPs)")
    return f"Measured: {measured}; {plan}."


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--save-dir", type=Path, default=None)
    ap.add_argument("--gemv", default="auto", choices=["auto", *GEMV_KERNELS])
    ap.add_argument("--fused", action="store_true", help="the fused kernels between the GEMVs (nvfp4 rows)")
    ap.add_argument("--no-baseline", action="store_true", help="no bf16 row (a batch sweep alone)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: `llmsize measure --device cpu`'s small model, to try the script without a GPU")
    return ap


def main() -> None:
    ap = parser()
    args = ap.parse_args()
    try:
        batches = [int(b) for b in args.batches.split(",")]
    except ValueError:
        ap.error(f"--batches {args.batches}: give batch sizes separated by commas, e.g. 1,4,16")
    runs = ([] if args.no_baseline else [("bf16", 1)]) + [("nvfp4", b) for b in batches]
    results = []
    for i, (quant, batch) in enumerate(runs):
        r = measure(MeasureOptions(quant=quant, batch=batch, context=args.context, tokens=args.tokens,
                                   probe=(i == 0) and args.device == "cuda", gemv=args.gemv,
                                   fused=args.fused and quant == "nvfp4", device=args.device))
        if i and results:  # the probe ran once; carry it to the other rows
            g0 = results[0]["gpu"]
            probe = g0["probed_read_bandwidth_gb_s"]
            r["gpu"]["probed_read_bandwidth_gb_s"] = probe
            r["achieved"]["fraction_of_probe"] = r["achieved"]["bandwidth_gb_s"] / probe if probe else None
        results.append(r)
        if args.save_dir:
            args.save_dir.mkdir(parents=True, exist_ok=True)
            (args.save_dir / f"decode-{quant}-b{batch}-c{args.context}.json").write_text(json.dumps(r, indent=2))
        print(f"{quant} batch {batch}: {r['decode']['tok_s']:,.1f} tok/s, "
              f"{r['achieved']['bandwidth_gb_s']:,.0f} GB/s", file=sys.stderr)
    g = results[0]["gpu"]
    lines = [f"## decode.py on {g['name']}", "",
             f"- Card: {g['name']} (catalog `{g.get('catalog_id')}`), driver {g.get('driver')}, NVML theoretical "
             f"{g.get('theoretical_bandwidth_gb_s') or 0:,.0f} GB/s, probe "
             f"{g.get('probed_read_bandwidth_gb_s') or 0:,.0f} GB/s",
             f"- Date: {date.today().isoformat()}; commit {git_commit()}; torch "
             f"{results[0]['versions']['torch']}, triton {results[0]['versions']['triton']}",
             f"- Command: `python benchmarks/decode.py --context {args.context} --tokens {args.tokens} "
             f"--batches {args.batches} --gemv {args.gemv}{' --fused' if args.fused else ''}"
             f"{' --no-baseline' if args.no_baseline else ''}{' --device cpu' if args.device == 'cpu' else ''}`", "",
             "| quant | batch | bytes/step GB | ms/step median | tok/s | GB/s | of theoretical | of probe | "
             "plan ceiling tok/s (NVML bw) | plan roofline tok/s (datasheet) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [row(r) for r in results]
    nvfp4 = [(r["run"]["batch"], r["achieved"]["fraction_of_theoretical"] or 0.0) for r in results
             if r["run"]["quant"] == "nvfp4"]
    # plan's ridge at the attended length the first NVFP4 row decoded at (each run's JSON has plan's figures)
    first = next((r for r in results if r["run"]["quant"] == "nvfp4"), None)
    ridge = ((first or {}).get("predicted") or {}).get("ridge_batch")
    verdict = memory_bound_verdict(nvfp4, ridge, card=bool(g.get("catalog_id")))
    if g.get("catalog_id") and first and verdict.startswith("Measured"):
        verdict += f" (plan at {first['run']['mean_attended_positions']:,.0f} attended positions, the runs' mean.)"
    lines += ["", verdict]
    lines += [f"- batch {r['run']['batch']} GEMVs: " + ", ".join(f"{shape} {kind}" for shape, kind in
                                                              r["run"]["batch_kernels"].items())
              for r in results if r["run"].get("batch_kernels")]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.append:
        with open(Path(__file__).with_name("RESULTS.md"), "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    from llmsize.errors import LlmsizeError

    try:
        main()
    except LlmsizeError as e:
        sys.exit(f"Error: {e.one_line()}")
