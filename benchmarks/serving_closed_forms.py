"""fleet's closed forms beside the schedulers they stand for, replayed (estimate/serving_replay.py,
estimate/disaggregated_replay.py), Poisson arrivals unless said: the tables RESULTS.md quotes for them.

1. An aggregated vLLM replica, prompts riding in decode steps: first token and TPOT from replica.first_token_s
   (mixed_first_token_s) against the scheduler replayed for 600 s of arrivals.
2. A pool of prefill workers (disaggregated serving): replica.pool_first_token_s against the pool replayed,
   one-token answers, at loads of 0.3, 0.6 and 0.85 of the pool (prompts over the budget at 0.3 and 0.6).
3. A closed loop of --users with fixed lengths against Poisson arrivals at that loop's own throughput, beside
   the row's closed form (fleet --simulate's flat tail).

    python benchmarks/serving_closed_forms.py

No card: both sides come from the same step-time model (runtimes/vllm.yaml), so this checks the queueing, not
the speeds. Units: ms, %.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmsize.catalog.loader import Catalog  # noqa: E402
from llmsize.estimate.disaggregated_replay import replay_disaggregated  # noqa: E402
from llmsize.estimate.fleet import fleet_rows  # noqa: E402
from llmsize.estimate.fleet_simulation import simulate_row  # noqa: E402
from llmsize.estimate.plan import PlanInputs, make_plan  # noqa: E402
from llmsize.estimate.replica import first_token_s, pool_first_token_s, replica_engine, replica_timing  # noqa: E402
from llmsize.estimate.runtimes import constants  # noqa: E402
from llmsize.estimate.serving_replay import poisson_arrivals, replay  # noqa: E402
from llmsize.estimate.workload import Workload  # noqa: E402

BUDGET = 8192  # vLLM's prompt tokens a step on an 80 GB-class card
MIXED = [("llama-3.1-8b", "h100-sxm", 1, 1000, 1000, (1.0, 3.0, 6.0)),
         ("llama-3.1-8b", "h100-sxm", 1, 5000, 500, (0.5, 2.0)),
         ("llama-3.1-8b", "h100-sxm", 1, 20000, 500, (0.5,)),
         ("qwen3-235b-a22b", "b200", 8, 1000, 1000, (1.0, 3.0, 6.0)),
         ("qwen3-235b-a22b", "b200", 8, 1000, 200, (3.0, 10.0, 20.0))]
POOLS = [("llama-3.1-70b", "b200", 1, 3000, 1), ("llama-3.1-70b", "b200", 1, 3000, 4),
         ("llama-3.1-70b", "b200", 2, 3000, 1), ("llama-3.1-70b", "b200", 2, 3000, 3),
         ("llama-3.1-8b", "h100-sxm", 1, 1000, 1), ("llama-3.1-8b", "h100-sxm", 1, 1000, 6),
         ("qwen3-235b-a22b", "b200", 8, 2000, 2), ("llama-3.1-8b", "h100-sxm", 1, 20000, 2),
         ("llama-3.1-70b", "b200", 2, 12000, 1)]


def _replica(cat, runtimes, model_id, gpu_id, tp, isl, osl):
    p = make_plan(cat.model(model_id), cat.gpu(gpu_id), PlanInputs(context_tokens=isl + osl, prompt_tokens=isl,
                                                                  tp=tp, runtime="vllm"), search_fit=False)
    c = constants(runtimes["vllm"], "cuda")
    tpot_fn, pre, cost = replica_timing(p, "vllm", c, BUDGET)
    forward, policy = replica_engine(p, "vllm", c, BUDGET)
    return tpot_fn, pre, cost, forward, policy


def open_loop_point(tpot_fn, cost, rate: float, osl: int) -> tuple[int, float, float]:
    """(users, TPOT, TTFT) of a replica under Poisson arrivals at `rate`: users = rate x (TTFT + osl x TPOT_agg),
    TPOT_agg(b) = TPOT(b) + b x a prompt's cost / osl, to a fixed point (tests/test_serving_replay.py uses it too)."""
    b = 1
    for _ in range(40):
        tpot = tpot_fn(b) + b * cost(rate, tpot_fn(b)) / osl
        ttft = first_token_s(b, tpot_fn, cost, rate, osl)
        b = max(1, round(rate * (ttft + osl * tpot)))
    return b, tpot, ttft


def mixed(cat, runtimes) -> list[float]:
    print("1. vLLM replica, first token and TPOT: closed form against the scheduler replayed (600 s of arrivals)")
    print(f"{'replica':40} {'in/out':>12} {'rate':>5} {'TTFT':>8} {'replay':>8} {'err':>7} {'TPOT':>7} {'replay':>7}")
    errors = []
    for model_id, gpu_id, tp, isl, osl, rates in MIXED:
        tpot_fn, _, cost, forward, policy = _replica(cat, runtimes, model_id, gpu_id, tp, isl, osl)
        for rate in rates:
            _, tpot, ttft = open_loop_point(tpot_fn, cost, rate, osl)
            n = int(rate * 600)
            r = replay([isl] * n, [osl] * n, 1, forward, BUDGET, max_running=10**6, policy=policy,
                       arrivals_s=poisson_arrivals(n, rate, seed=1), skip=n // 10)
            errors.append(ttft / r.ttft_mean_s - 1)
            print(f"{model_id + ' ' + gpu_id + f' tp{tp}':40} {f'{isl}/{osl}':>12} {rate:>5g} {ttft * 1e3:8.1f} "
                  f"{r.ttft_mean_s * 1e3:8.1f} {errors[-1]:+7.1%} {tpot * 1e3:7.2f} {r.tpot_mean_s * 1e3:7.2f}")
    return errors


def pools(cat, runtimes) -> list[float]:
    print("\n2. Prefill pool, first token: replica.pool_first_token_s against the pool replayed")
    print(f"{'pool':40} {'isl':>6} {'load':>5} {'closed':>8} {'replay':>8} {'err':>7}")
    errors = []
    for model_id, gpu_id, tp, isl, workers in POOLS:
        tpot_fn, pre, cost, forward, _ = _replica(cat, runtimes, model_id, gpu_id, tp, isl, 10)
        pool = cost.prefill_only()
        for load in (0.3, 0.6) if isl > BUDGET else (0.3, 0.6, 0.85):
            rate = load * workers / pre
            for _ in range(60):  # the rate at which the pool's load is `load`
                rate = load * workers / pool(rate / workers)
            n = int(min(20000, rate * 600))
            r = replay_disaggregated([isl] * n, [1] * n, forward, workers, BUDGET, tpot_fn, 1, 10**6, lambda _: 0.0,
                                     arrivals_s=poisson_arrivals(n, rate, seed=3), skip=n // 10)
            closed = pool_first_token_s(pool, rate, workers)
            errors.append(closed / r.ttft_mean_s - 1)
            print(f"{f'{model_id} {gpu_id} tp{tp} x{workers}':40} {isl:>6} {load:>5g} {closed * 1e3:8.1f} "
                  f"{r.ttft_mean_s * 1e3:8.1f} {errors[-1]:+7.1%}")
    return errors


def closed_loop(cat, runtimes) -> None:
    print("\n3. A closed loop of fixed lengths against Poisson arrivals at its throughput (fleet --simulate)")
    m, g = cat.model("llama-3.1-8b"), cat.gpu("h100-sxm")
    w = Workload(1000, 200, users=64)
    (row,) = fleet_rows(m, [g], w, "vllm", runtimes)
    loop = simulate_row(m, g, row, w, "vllm", runtimes)
    rate = 64 / (loop.ttft_mean_s + 200 * loop.tpot_mean_s)
    poisson = simulate_row(m, g, replace(row, max_batch=256), Workload(1000, 200, rate=rate), "vllm", runtimes)
    print(f"Llama 3.1 8B, H100 SXM, 64 users, 1,000 in / 200 out: closed form {row.ttft_s * 1e3:.1f} ms; closed loop "
          f"replayed {loop.ttft_mean_s * 1e3:.1f} ms (p99 {loop.ttft_s[2] * 1e3:.1f}); Poisson at its {rate:.2f} "
          f"req/s {poisson.ttft_mean_s * 1e3:.1f} ms (p99 {poisson.ttft_s[2] * 1e3:.1f})")


def main() -> None:
    cat = Catalog()
    runtimes = {r.id: r for r in cat.runtimes.all()}
    for name, table in (("vLLM first token", mixed), ("prefill pool", pools)):
        a = sorted(abs(e) for e in table(cat, runtimes))
        print(f"{name}: {len(a)} cases, median |error| {statistics.median(a):.1%}, max {a[-1]:.1%}")
    closed_loop(cat, runtimes)


if __name__ == "__main__":
    main()
