"""fleet's serving model (llmsize/estimate/serving_point.py) against published serving benchmarks (tests/data/serving/):

1. TensorRT-LLM's max-throughput tables (max_throughput_per_gpu): output tokens/s per GPU at each ISL/OSL, card,
   parallelism and precision, predicted with the TensorRT-LLM constants (runtimes/trtllm.yaml).
2. The SGLang Cookbook's bench_serving runs at a fixed max concurrency (serving_point): output tokens/s, mean
   TTFT and mean TPOT, predicted with the SGLang constants at the run's mean lengths (its printed total input and
   generated tokens over its requests: the random dataset draws lengths below the flags); and vLLM's bench serve
   runs (tests/data/serving/vllm-bench.yaml) the same way with the vLLM constants, at each run's printed weight
   format and cache dtype.
3. MLPerf Inference's llama3.1-405b Offline results on one node of 8 cards (TensorRT-LLM): the benchmark's mean
   prompt is not printed in the sources read, so each result is turned into the mean prompt at which fleet's
   max-throughput replica delivers it (implied_prompt_tokens); a model right about the cards implies one length.

    python benchmarks/serving_throughput.py

"TP n" is n-way tensor parallel; "DEP n" (attention data parallel, experts over n cards) is costed as such
(estimate/expert_parallel.py), or with --dep-as-tp as n-way tensor parallel, for comparison.

    python benchmarks/serving_throughput.py --dep-as-tp A "Total Output Throughput" of a TP group is divided by its cards to
compare per GPU. FP4 is NVFP4, except gpt-oss's MXFP4 release; FP8 is per-tensor FP8 (DeepSeek: its 128x128
blocks).
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from llmsize.catalog.loader import Catalog  # noqa: E402
from llmsize.estimate.observed import sglang_cdna3_mla_before  # noqa: E402
from llmsize.estimate.serving_point import max_throughput_per_gpu, replayed_point, serving_point  # noqa: E402
from llmsize.estimate.serving_replay import uniform_lengths  # noqa: E402

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
                dep = r["parallelism_printed"].startswith("DEP") and DEP
                pred = max_throughput_per_gpu(cat.model(r["model_id"]), cat.gpu(r["card_id"]), r["isl"], r["osl"], n,
                                              _quant(r), "trtllm", runtimes, kv_dtype=_kv_dtype(r),
                                              dp=n if dep else 1)
            except Exception as e:  # a configuration the plan refuses (tp not dividing the heads, ...)
                print(f"  skipped {r['model']} {r['card']} {r['parallelism_printed']}: {e}", file=sys.stderr)
                continue
            label = (f"{r['model_id']} {r['card_id']} {r['parallelism_printed']} {_quant(r)} {r['isl']}/{r['osl']} "
                     f"({f.stem.removeprefix('trtllm-perf-overview-')})")
            out.append((label, pred, published))
    return out


MLPERF_QUANT = {"fp8": "fp8", "fp4": "nvfp4"}  # the results' weight_data_types; the cache is FP8 in every config
MLPERF_OUTPUT_TOKENS = 685  # the rules' reference tokens_per_sample, 684.68, rounded
ISL_BRACKET = (1000, 20000)  # prompt lengths searched (the benchmark's engines cap prompts at 20,000 tokens)


def implied_prompt_tokens(per_gpu, published: float) -> int | None:
    """The mean prompt at which the predicted tok/s per GPU (per_gpu(isl), falling as prompts grow) equals the
    published one, by bisection over ISL_BRACKET; None outside it."""
    lo, hi = ISL_BRACKET
    f_lo, f_hi = per_gpu(lo), per_gpu(hi)
    if f_lo is None or f_hi is None or not f_hi <= published <= f_lo:
        return None
    while hi - lo > 10:
        mid = (lo + hi) // 2
        if per_gpu(mid) >= published:
            lo = mid
        else:
            hi = mid
    return (lo + hi) // 2


@dataclass(frozen=True)
class MlperfRow:
    label: str
    card: str
    published: float  # tok/s per GPU
    implied_isl: int | None  # the mean prompt at which fleet's replica delivers it
    at_8000: float | None  # predicted tok/s per GPU at prompts of 8,000 and 11,000 tokens
    at_11000: float | None


def mlperf_rows(cat: Catalog | None = None) -> list[MlperfRow]:
    """MLPerf's llama3.1-405b Offline results on one node of 8 cards whose round prints its weights' precision,
    each beside fleet's max-throughput replicas on those 8 cards (TensorRT-LLM, FP8 cache), split as NVIDIA's
    Offline configs split them where the data file gives it (offline_split: H200 TP 4 x PP 2, B200 TP 2 x PP 2,
    two micro-batches in flight), else TP 8. The benchmark's mean prompt is not printed in the sources read
    (tests/data/serving/mlperf-llama31-405b.yaml), so the prompt each result implies is the comparison: a model
    right about the cards implies one length."""
    cat = cat or Catalog()
    runtimes = {r.id: r for r in cat.runtimes.all()}
    model = cat.model("llama-3.1-405b")
    data = yaml.safe_load((DATA / "mlperf-llama31-405b.yaml").read_text())
    out = []
    for r in data["rows"]:
        if r["scenario"] != "Offline" or r["gpus"] != 8 or r["nodes"] not in (1, None) or r["weights"] is None:
            continue
        quant, gpu = MLPERF_QUANT[r["weights"]], cat.gpu(r["card_id"])
        tp, pp = data["rules"]["offline_split"].get(r["card_id"], (r["gpus"], 1))

        def per_gpu(isl, gpu=gpu, quant=quant, tp=tp, pp=pp):
            return max_throughput_per_gpu(model, gpu, isl, MLPERF_OUTPUT_TOKENS, tp, quant, "trtllm", runtimes,
                                          kv_dtype="fp8", pp=pp)
        published = r["tokens_per_s"] / r["gpus"]
        split = f"tp {tp}" + (f" x pp {pp}" if pp > 1 else "")
        out.append(MlperfRow(f"{r['round']} {r['submitter']} {r['card_id']} {quant} {split}", r["card_id"],
                             published, implied_prompt_tokens(per_gpu, published), per_gpu(8000), per_gpu(11000)))
    return out


def implied_by_card(rows: list[MlperfRow]) -> dict[str, float]:
    """Per card, the median of the prompt lengths its results imply (those the bracket holds)."""
    isls = defaultdict(list)
    for row in rows:
        if row.implied_isl is not None:
            isls[row.card].append(row.implied_isl)
    return {card: statistics.median(v) for card, v in isls.items()}


DEP = "--dep-as-tp" not in sys.argv  # cost "DEP n" rows as attention data parallel + experts over n (else as TP n)
RANGE_RATIO = 0.0  # bench_serving's default --random-range-ratio (python/sglang/bench_serving.py); the runs set none
SEEDS = (0, 1, 2)  # replays of each run with lengths drawn three ways, averaged
# The vLLM release a run of vllm-bench.yaml that prints none is replayed under: its newest source is dated 2026-06-03
# (vllm#43232's comment), before 0.26.0 (PR #47728's description is of 2026-07-06), so before 0.28.0's larger
# defaults on cards of >= 160 GiB (vllm_release.v1_defaults) and 0.26.0's in-flight reserve
# (vllm_release.in_flight_tokens).
UNDATED_VLLM_RUN = "0.25.1"


def run_engine_version(r: dict, runtime: str) -> str:
    """The vLLM release a benchmark run is costed under (its own where printed); SGLang's ledger has none."""
    return (r.get("engine_version") or UNDATED_VLLM_RUN) if runtime == "vllm" else "v1"


def _bench_quant(r: dict, cat: Catalog) -> str | None:
    """A bench row's weight format: the release's where none is printed or the printed one is the release's class
    (DeepSeek's FP8 is its 128x128 blocks), else FP8 / MXFP4 / NVFP4 as printed."""
    p = (r.get("precision_printed") or "").upper()
    release = cat.model(r["model_id"]).release.quant
    if not p or (p == "FP8" and release.startswith("fp8")):
        return None
    return {"FP8": "fp8", "MXFP4": "mxfp4", "NVFP4": "nvfp4", "BF16": "bf16"}.get(p)


def _replayed(cat: Catalog, r: dict, runtimes: dict, runtime: str = "sglang") -> tuple[float, float, float] | None:
    """The run replayed request by request (serving_replay): its requests' lengths drawn as the random dataset draws
    them from its flags, scaled to the printed mean; (output tok/s, mean TTFT, mean TPOT) over SEEDS."""
    p = r["printed"]
    n = int(p["Successful requests"])
    got = []
    for seed in SEEDS:
        prompts = uniform_lengths(n, r["random_input_len"], RANGE_RATIO, int(p["Total input tokens"]) / n, seed)
        outputs = uniform_lengths(n, r["random_output_len"], RANGE_RATIO, int(p["Total generated tokens"]) / n,
                                  seed + 1000, floor=1)
        pt = replayed_point(cat.model(r["model_id"]), cat.gpu(r["card_id"]), prompts, outputs, r["tp"],
                            r["max_concurrency"], _bench_quant(r, cat), runtime, runtimes,
                            r.get("kv_cache_dtype") or "bf16", run_engine_version(r, runtime))
        if pt is None:
            return None
        got.append((pt.output_tok_s_total, pt.ttft_s, pt.tpot_s))
    return tuple(statistics.fmean(x) for x in zip(*got))


def bench_rows(file: str = "sglang-cookbook.yaml", runtime: str = "sglang",
               cat: Catalog | None = None) -> list[tuple[str, str, float | None, float | None, float]]:
    """(label, metric, steady-state prediction, replayed prediction, published) per benchmark run of `file`
    (tests/data/serving: the SGLang Cookbook's bench_serving runs, vLLM's bench serve runs) and metric printed:
    output tok/s, TTFT s, TPOT s; predicted with `runtime`'s constants, the run's format and cache dtype."""
    cat = cat or Catalog()
    runtimes = {r.id: r for r in cat.runtimes.all()}
    out = []
    for r in yaml.safe_load((DATA / file).read_text())["rows"]:
        if sglang_cdna3_mla_before(r.get("engine_version"), runtime, cat.gpu(r["card_id"]), cat.model(r["model_id"]),
                                   None):
            print(f"  skipped {r['model_id']} {r['card_id']} SGLang {r['engine_version']}: before 0.5.10's MLA path on "
                  "CDNA3 (observed.SGLANG_CDNA3_MLA), as the fit skips it", file=sys.stderr)
            continue
        p = r["printed"]
        n = int(p["Successful requests"])
        isl, osl = round(int(p["Total input tokens"]) / n), round(int(p["Total generated tokens"]) / n)
        pt = serving_point(cat.model(r["model_id"]), cat.gpu(r["card_id"]), isl, osl, r["tp"], r["max_concurrency"],
                           _bench_quant(r, cat), runtime, runtimes, r.get("kv_cache_dtype") or "bf16",
                           run_engine_version(r, runtime))
        rp = _replayed(cat, r, runtimes, runtime)
        fmt = f" {r['precision_printed']}" if r.get("precision_printed") else ""
        label = (f"{r['model_id']} {r['card_id']} x{r['gpus']}{fmt} {r['random_input_len']}/{r['random_output_len']} "
                 f"c={r['max_concurrency']}")
        for i, (metric, key, scale, pred) in enumerate((
                ("output tok/s", "Output token throughput (tok/s)", 1, pt and pt.output_tok_s_total),
                ("TTFT s", "Mean TTFT (ms)", 1000, pt and pt.ttft_s), ("TPOT s", "Mean TPOT (ms)", 1000, pt and pt.tpot_s))):
            if key in p:
                out.append((label, metric, pred, rp and rp[i], float(p[key]) / scale))
    return out


def sglang_rows(cat: Catalog | None = None) -> list[tuple[str, str, float | None, float | None, float]]:
    return bench_rows("sglang-cookbook.yaml", "sglang", cat)


def error_cells(predictions, published: float, metric: str, errors: dict, width: int = 9) -> list[str]:
    """One "value error%" cell per (name, predicted or None), each |error| filed under errors[(name, metric)]."""
    cells = []
    for name, x in predictions:
        if x is None:
            cells.append(f"{'-':>{width}} {'':8}")
            continue
        e = (x - published) / published
        errors.setdefault((name, metric), []).append(abs(e))
        cells.append(f"{x:{width},.3f} {e * 100:+7.1f}%")
    return cells


def _summary(errs: list[float]) -> str:
    s = sorted(errs)
    return f"median |error| {statistics.median(s) * 100:.1f}%, p90 {s[int(0.9 * (len(s) - 1))] * 100:.1f}%"


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
        print(f"\n{len(errs)} figures: {_summary(errs)}")
    trt = list(errs)
    print(f"\nSGLang Cookbook, bench_serving at a fixed max concurrency (steady state; replayed run)\n{'case':46} "
          f"{'metric':13} {'steady':>9} {'error':>8} {'replayed':>9} {'error':>8} {'published':>10}")
    by: dict[tuple[str, str], list[float]] = {}
    every: dict[str, list[float]] = {"steady": list(trt), "replayed": list(trt)}  # output tok/s, every source
    for label, metric, pred, rep, got in sglang_rows():
        cells = error_cells((("steady", pred), ("replayed", rep)), got, metric, by)
        print(f"{label:46} {metric:13} {' '.join(cells)} {got:10,.3f}")
    for (kind, metric), errs in by.items():
        print(f"{kind:8} {metric}: {len(errs)} figures, {_summary(errs)}")
        if metric == "output tok/s":
            every[kind] += errs
    print(f"\nvLLM bench serve runs at a fixed max concurrency (steady state; replayed run)\n{'case':46} "
          f"{'metric':13} {'steady':>9} {'error':>8} {'replayed':>9} {'error':>8} {'published':>10}")
    by = {}
    for label, metric, pred, rep, got in bench_rows("vllm-bench.yaml", "vllm"):
        cells = error_cells((("steady", pred), ("replayed", rep)), got, metric, by)
        print(f"{label:46} {metric:13} {' '.join(cells)} {got:10,.3f}")
    for (kind, metric), errs in by.items():
        print(f"{kind:8} {metric}: {len(errs)} figures, {_summary(errs)}")
        if metric == "output tok/s":
            every[kind] += errs
    print("\nOutput throughput, every figure above (TensorRT-LLM's tables in both; the SGLang and vLLM runs "
          "steady-state as fleet sizes them, and replayed)")
    for kind, errs in every.items():
        print(f"{kind:8} output tok/s: {len(errs)} figures, {_summary(errs)}")
    print(f"\nMLPerf Inference llama3.1-405b, Offline, 8 cards (tok/s per GPU; the prompt length each result implies)\n"
          f"{'result':52} {'published':>10} {'implied prompt':>15} {'pred @8000':>11} {'pred @11000':>12}")
    mlperf = mlperf_rows()
    for row in mlperf:
        cells = [f"{x:{w},.1f}" if x is not None else f"{'-':>{w}}" for x, w in ((row.at_8000, 11), (row.at_11000, 12))]
        print(f"{row.label:52} {row.published:10,.1f} {row.implied_isl or '-':>15} {' '.join(cells)}")
    for card, isl in implied_by_card(mlperf).items():
        print(f"{card}: implied mean prompt {isl:,.0f} tokens (median of its results)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
