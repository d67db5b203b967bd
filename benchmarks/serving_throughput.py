"""fleet's throughput model (llmsize/estimate/fleet.py, max_throughput_per_gpu) against TensorRT-LLM's published
max-throughput tables (tests/data/serving/): output tokens/s per GPU at each ISL/OSL, card, parallelism and
precision, predicted with the TensorRT-LLM constants (runtimes/trtllm.yaml).

    python benchmarks/serving_throughput.py

"TP n" is n-way tensor parallel; "DEP n" (attention data parallel, experts over n cards) is costed as n-way tensor
parallel, an approximation the table names. A "Total Output Throughput" of a TP group is divided by its cards to
compare per GPU. FP4 is NVFP4, except gpt-oss's MXFP4 release; FP8 is per-tensor FP8 (DeepSeek: its 128x128
blocks).
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from llmsize.catalog.loader import Catalog  # noqa: E402
from llmsize.estimate.fleet import max_throughput_per_gpu  # noqa: E402

DATA = ROOT / "tests" / "data" / "serving"


def _quant(row: dict) -> str:
    p = row["precision"].upper()
    if p == "FP4":
        return "mxfp4" if row["model_id"].startswith("gpt-oss") else "nvfp4"
    if p == "FP8":
        return "fp8-block128" if row["model_id"] == "deepseek-v3" else ("mxfp4" if row["model_id"].startswith(
            "gpt-oss") else "fp8")
    return "bf16"


def _kv_dtype(row: dict) -> str:
    """NVIDIA's ModelOpt FP8 and FP4 checkpoints the tables ran declare kv_cache_quant_algo FP8 in their
    hf_quant_config.json, and TensorRT-LLM stores the cache as they declare; gpt-oss runs OpenAI's own MXFP4
    release, which declares no cache quantization."""
    if row["model_id"].startswith("gpt-oss"):
        return "bf16"
    return "fp8" if row["precision"].upper() in ("FP8", "FP4") else "bf16"


def _cards(par: str) -> int:
    m = re.match(r"(?:TP|DEP)(\d+)", par)
    return int(m.group(1)) if m else 1


def rows(cat: Catalog | None = None) -> list[tuple[str, float | None, float]]:
    """(label, predicted tok/s per GPU, published tok/s per GPU) per published figure."""
    cat = cat or Catalog()
    runtimes = {r.id: r for r in cat.runtimes.all()}
    out = []
    for f in sorted(DATA.glob("trtllm-*.yaml")):
        for r in yaml.safe_load(f.read_text())["rows"]:
            n = _cards(r["parallelism_printed"])
            (name, fig), = r["figures"].items()
            published = fig["value_num"] / (1 if "per GPU" in name else n)
            try:
                pred = max_throughput_per_gpu(cat.model(r["model_id"]), cat.gpu(r["card_id"]), r["isl"], r["osl"], n,
                                              _quant(r), "trtllm", runtimes, kv_dtype=_kv_dtype(r))
            except Exception as e:  # a configuration the plan refuses (tp not dividing the heads, ...)
                print(f"  skipped {r['model']} {r['card']} {r['parallelism_printed']}: {e}", file=sys.stderr)
                continue
            label = (f"{r['model_id']} {r['card_id']} {r['parallelism_printed']} {_quant(r)} {r['isl']}/{r['osl']} "
                     f"({f.stem.removeprefix('trtllm-perf-overview-')})")
            out.append((label, pred, published))
    return out


def main() -> int:
    data = rows()
    print(f"{'case':70} {'predicted':>10} {'published':>10} {'error':>8}")
    errs = []
    for label, pred, got in data:
        if pred is None:
            print(f"{label:70} {'-':>10} {got:10,.0f}")
            continue
        e = (pred - got) / got
        errs.append(abs(e))
        print(f"{label:70} {pred:10,.0f} {got:10,.0f} {e * 100:+7.1f}%")
    if errs:
        s = sorted(errs)
        print(f"\n{len(errs)} figures: median |error| {statistics.median(s) * 100:.1f}%, "
              f"p90 {s[int(0.9 * (len(s) - 1))] * 100:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
