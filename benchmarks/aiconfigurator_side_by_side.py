"""llmsize's serving point beside NVIDIA AIConfigurator's estimate, on the published SGLang Cookbook runs both can
model (tests/data/serving/sglang-cookbook.yaml, the B200 runs: AIConfigurator has no MI300X database).

    pip install aiconfigurator            # in a separate environment; it needs no GPU and no network for these
    python benchmarks/aiconfigurator_side_by_side.py [--aic PATH/TO/aiconfigurator]

For each run: the published mean TTFT, mean TPOT and output tokens/s; llmsize's (estimate/serving_point.py, SGLang
constants, the run's mean lengths, the max concurrency as the batch); AIConfigurator's (`aiconfigurator cli
estimate --backend sglang --system b200_sxm --tp 8 --etp 8 --batch-size C` at the same lengths, its kernel-database
forward model). Not part of the test suite: it runs another tool.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from llmsize.catalog.loader import Catalog  # noqa: E402
from llmsize.estimate.serving_point import serving_point  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serving_throughput import error_cells  # noqa: E402

DATA = ROOT / "tests" / "data" / "serving" / "sglang-cookbook.yaml"
# the model configs AIConfigurator ships, for the catalog's entries (DeepSeek-R1-0528 has DeepSeek-R1's config)
AIC_MODEL = {"deepseek-v3": "deepseek-ai/DeepSeek-R1", "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B"}
AIC_SYSTEM = {"b200": "b200_sxm", "h200-sxm": "h200_sxm", "h100-sxm": "h100_sxm"}


def aic_estimate(aic: str, model: str, system: str, isl: int, osl: int, batch: int, tp: int) -> dict | None:
    """AIConfigurator's TTFT (s), TPOT (s) and tokens/s for one aggregated configuration, or None if it fails."""
    cmd = [aic, "cli", "estimate", "--model-path", model, "--system", system, "--backend", "sglang",
           "--isl", str(isl), "--osl", str(osl), "--batch-size", str(batch), "--tp", str(tp),
           "--etp", str(tp), "--no-color"]  # experts tensor-parallel: SGLang's default without --ep-size
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    text = r.stdout + r.stderr
    got = {}
    for key, pat in (("ttft_s", r"TTFT:\s+([\d.,]+) ms"), ("tpot_s", r"TPOT:\s+([\d.,]+) ms"),
                     ("tok_s", r"\n\s+tokens/s:\s+([\d.,]+)")):
        m = re.search(pat, text)
        if not m:
            return None
        v = float(m.group(1).replace(",", ""))
        got[key] = v / 1000 if key != "tok_s" else v
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aic", default=shutil.which("aiconfigurator") or "aiconfigurator")
    args = ap.parse_args()
    if shutil.which(args.aic) is None:
        print(f"error: no `{args.aic}` to run: install NVIDIA AIConfigurator (pip install aiconfigurator, in a "
              "separate environment) and pass its path with --aic.", file=sys.stderr)
        return 2
    cat = Catalog()
    runtimes = {r.id: r for r in cat.runtimes.all()}
    errs: dict[tuple[str, str], list[float]] = {}
    print(f"{'case':46} {'metric':12} {'published':>10} {'llmsize':>10} {'err':>7} {'AIC':>10} {'err':>7}")
    for r in yaml.safe_load(DATA.read_text())["rows"]:
        if r["card_id"] not in AIC_SYSTEM or r["model_id"] not in AIC_MODEL:
            continue
        p = r["printed"]
        n = int(p["Successful requests"])
        isl, osl = round(int(p["Total input tokens"]) / n), round(int(p["Total generated tokens"]) / n)
        c = r["max_concurrency"]
        ours = serving_point(cat.model(r["model_id"]), cat.gpu(r["card_id"]), isl, osl, r["tp"], c, None, "sglang",
                             runtimes)
        theirs = aic_estimate(args.aic, AIC_MODEL[r["model_id"]], AIC_SYSTEM[r["card_id"]], isl, osl, c, r["tp"])
        label = f"{r['model_id']} {r['card_id']} x{r['gpus']} {isl}/{osl} c={c}"
        for metric, pub, mine, aic in (
                ("TTFT s", float(p["Mean TTFT (ms)"]) / 1000, ours and ours.ttft_s, theirs and theirs["ttft_s"]),
                ("TPOT s", float(p["Mean TPOT (ms)"]) / 1000, ours and ours.tpot_s, theirs and theirs["tpot_s"]),
                ("output tok/s", float(p["Output token throughput (tok/s)"]), ours and ours.output_tok_s_total,
                 theirs and theirs["tok_s"])):
            cells = error_cells((("llmsize", mine), ("AIC", aic)), pub, metric, errs, width=10)
            print(f"{label:46} {metric:12} {pub:10,.3f} " + " ".join(cells))
    print()
    for (tool, metric), e in sorted(errs.items()):
        s = sorted(e)
        print(f"{tool:8} {metric:12} {len(s):3} figures: median |error| {statistics.median(s) * 100:5.1f}%, "
              f"p90 {s[int(0.9 * (len(s) - 1))] * 100:5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
