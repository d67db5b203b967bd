"""Turn `llmsize measure --save` JSON files into a Markdown block for benchmarks/RESULTS.md.

    python benchmarks/measure_summary.py out/measure-bf16.json out/measure-nvfp4.json
"""

from __future__ import annotations

import json
import sys


def pct(x):
    return "n/a" if x is None else f"{100 * x:.1f}%"


def main(paths):
    runs = [json.load(open(p)) for p in paths]
    probes = [r["gpu"].get("probed_read_bandwidth_gb_s") for r in runs]
    probe = next((p for p in probes if p), None)
    for r in runs:  # runs made with --no-probe take the probe of the run that made one (same card, same session)
        a = r["achieved"]
        if probe and not r["gpu"].get("probed_read_bandwidth_gb_s") and a.get("bandwidth_gb_s"):
            r["gpu"]["probed_read_bandwidth_gb_s"] = probe
            a["fraction_of_probe"] = a["bandwidth_gb_s"] / probe
    r0 = next((r for r in runs if r["gpu"].get("probed_read_bandwidth_gb_s")), runs[0])
    g = r0["gpu"]
    print(f"## `llmsize measure` on {g['name']}\n")
    print(f"- Card: {g['name']} (catalog `{g.get('catalog_id')}`), driver {g.get('driver')}, "
          f"theoretical {g.get('theoretical_bandwidth_gb_s') or 0:.0f} GB/s (NVML), probe "
          f"{g.get('probed_read_bandwidth_gb_s') or 0:.0f} GB/s, power limit {g.get('power_limit_w')} W")
    print(f"- Date: {r0['date']}; commit {r0['git_commit']}; torch {r0['versions']['torch']}, "
          f"triton {r0['versions']['triton']}")
    print("- Command: `bash benchmarks/measure_gpu.sh` (`llmsize measure --quant Q --json --save F`)\n")
    print("| quant | step | context | batch | bytes/step GB | TTFT ms | ms/token median (p10-p90) | tok/s | "
          "achieved GB/s | of theoretical | of probe | of datasheet | plan ceiling tok/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        d, a, run, p = r["decode"], r["achieved"], r["run"], r["predicted"] or {}
        ceil = p.get("ceiling_tok_s")
        step = run["gemv"] + (", fused" if run.get("fused") else "") + (", compiled" if run.get("compiled") else "") \
            + (f", PDL {run.get('pdl_mode', 'on')}" if run.get("pdl") else "") \
            + (f", L2 prefetch {run['l2_prefetch_kb']} KiB" if run.get("l2_prefetch_kb") else "") \
            + (f", lm_head {run['lm_head']['kernel']}" if run.get("lm_head") else "")
        print(f"| {run['quant']} | {step} | {run['context_tokens']} | {run['batch']} | "
              f"{r['bytes_per_step'] / 1e9:.3f} | "
              f"{r['prefill']['ttft_s'] * 1e3:.0f} | {d['ms_per_token_median']:.3f} ({d['ms_per_token_p10']:.3f}-"
              f"{d['ms_per_token_p90']:.3f}) | {d['tok_s']:.1f} | {a['bandwidth_gb_s']:.0f} | "
              f"{pct(a['fraction_of_theoretical'])} | {pct(a['fraction_of_probe'])} | "
              f"{pct(a['fraction_of_datasheet'])} | {'n/a' if ceil is None else f'{ceil:.1f}'} |")
    for r in runs:  # what the defaults rest on: a failed check means a slower path ran
        run = r["run"]
        checks = ", ".join(f"{k}: {'ok' if v else 'FAILED'}" for k, v in (run.get("self_checks") or {}).items())
        kernels = ("; GEMV tiles " + ", ".join(f"{shape} {kind}" for shape, kind in run["batch_kernels"].items())
                   if run.get("batch_kernels") else "")
        if checks or kernels:
            print(f"\n- {run['quant']}: self-checks {checks or 'none'}{kernels}")


if __name__ == "__main__":
    main(sys.argv[1:])
