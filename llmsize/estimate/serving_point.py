"""fleet's model at one operating point, for comparisons with published serving benchmarks
(benchmarks/serving_throughput.py, benchmarks/aiconfigurator_side_by_side.py): a max-throughput run at an
unbounded request rate, and a run at a fixed max concurrency."""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.estimate.queueing import wait_mgc_s
from llmsize.estimate.replica import kv_pool_bytes, replica_timing, users_held
from llmsize.estimate.serving_defaults import held_context_tokens, serving_defaults
from llmsize.estimate.workload import Workload


def max_throughput_per_gpu(model: ModelSpec, gpu: GpuSpec, isl: int, osl: int, tp: int, quant: str | None,
                           runtime: str, runtimes: dict, kv_dtype: str = "bf16") -> float | None:
    """Output tok/s per GPU of one aggregated replica of tp cards at the largest batch its cache holds (what a
    "max throughput" benchmark at an unbounded request rate measures), within the engine's defaults
    (estimate/serving_defaults.py): b / TPOT_agg(b) / tp."""
    from llmsize.estimate.expected import backend, constants
    from llmsize.estimate.plan import PlanInputs, make_plan

    spec, be = runtimes.get(runtime), backend(gpu)
    c = constants(spec, be) if spec is not None and be else None
    if c is None:
        return None
    plan = make_plan(model, gpu, PlanInputs(quant=quant, context_tokens=held_context_tokens(runtime, isl, osl), prompt_tokens=isl, tp=tp,
                                            kv_dtype=kv_dtype), search_fit=False)
    w = Workload(isl, osl, users=1)
    b = users_held(plan, w, runtime, None, kv_pool_bytes(plan, runtime, isl + osl)[0]) if plan.budget.weights_fit else 0
    if b < 1:
        return None
    limits = serving_defaults(runtime, gpu, b, isl, osl)
    b = min(b, limits.max_batch or b)
    tpot_fn, pre, cost = replica_timing(plan, runtime, c, limits.prefill_tokens)
    if cost is None:
        return None
    return b / (tpot_fn(b) + b * cost / osl) / tp


@dataclass(frozen=True)
class ServingPoint:
    output_tok_s_total: float  # all users, output tokens/s of the replica
    ttft_s: float  # mean: the prompt's prefill and its wait (M/D/1)
    tpot_s: float  # mean time per output token after the first, prefill stalls included
    batch: int  # requests running at once


def serving_point(model: ModelSpec, gpu: GpuSpec, isl: int, osl: int, tp: int, users: int, quant: str | None,
                  runtime: str, runtimes: dict, kv_dtype: str = "bf16") -> ServingPoint | None:
    """One aggregated replica of tp cards serving `users` closed-loop users (a benchmark at a fixed max
    concurrency): the batch is the users, within what the cache holds and the engine's cap; a user sees
    TPOT_agg(b) = TPOT(b) + b x C_prefill / osl and a first token after T_prefill + Wq (M/D/1); the replica gives
    b / (TTFT + osl x TPOT_agg) requests/s of osl tokens. None without constants or when nothing fits."""
    from llmsize.estimate.expected import backend, constants
    from llmsize.estimate.plan import PlanInputs, make_plan

    spec, be = runtimes.get(runtime), backend(gpu)
    c = constants(spec, be) if spec is not None and be else None
    if c is None:
        return None
    plan = make_plan(model, gpu, PlanInputs(quant=quant, context_tokens=held_context_tokens(runtime, isl, osl),
                                            prompt_tokens=isl, tp=tp, kv_dtype=kv_dtype), search_fit=False)
    w = Workload(isl, osl, users=users)
    held = users_held(plan, w, runtime, None, kv_pool_bytes(plan, runtime, isl + osl)[0]) \
        if plan.budget.weights_fit else 0
    if held < 1:
        return None
    limits = serving_defaults(runtime, gpu, held, isl, osl)
    b = min(users, held, limits.max_batch or held)
    tpot_fn, pre, cost = replica_timing(plan, runtime, c, limits.prefill_tokens)
    if pre is None or cost is None:
        return None
    tpot = tpot_fn(b) + b * cost / osl
    ttft = pre + wait_mgc_s(b / (pre + osl * tpot), cost, 1)
    return ServingPoint(b * osl / (ttft + osl * tpot), ttft, tpot, b)
