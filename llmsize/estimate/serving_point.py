"""fleet's model at one operating point, for comparisons with published serving benchmarks
(benchmarks/serving_throughput.py, benchmarks/aiconfigurator_side_by_side.py): a max-throughput run at an
unbounded request rate, and a run at a fixed max concurrency, in steady state (serving_point) or replayed request by
request as the benchmark runs it (replayed_point, estimate/serving_replay.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.estimate.replica import first_token_s, kv_pool_bytes, replica_engine, replica_timing, users_held
from llmsize.estimate.serving_defaults import held_context_tokens, serving_defaults
from llmsize.estimate.workload import Workload


def max_throughput_per_gpu(model: ModelSpec, gpu: GpuSpec, isl: int, osl: int, tp: int, quant: str | None,
                           runtime: str, runtimes: dict, kv_dtype: str = "bf16", dp: int = 1,
                           pp: int = 1) -> float | None:
    """Output tok/s per GPU of one aggregated replica of tp x pp cards (pp pipeline stages within a node, pp
    micro-batches in flight: estimate/replica.replica_timing; or, dp > 1, a DEP replica of dp cards:
    estimate/expert_parallel.py) at the largest batch its cache holds (what a "max throughput" benchmark at an
    unbounded request rate measures), within the engine's defaults (estimate/serving_defaults.py, a card's under
    DEP): b / TPOT_agg(b) / cards, every prompt queued from the start (each forward takes a full chunk of them)."""
    from llmsize.estimate.expert_parallel import expert_shard
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.runtimes import backend, constants

    spec, be = runtimes.get(runtime), backend(gpu)
    c = constants(spec, be, gpu) if spec is not None and be else None
    if c is None:
        return None
    plan = make_plan(expert_shard(model, dp) if dp > 1 else model, gpu,
                     PlanInputs(quant=quant, context_tokens=held_context_tokens(runtime, isl, osl), prompt_tokens=isl,
                                tp=1 if dp > 1 else tp, pp=pp, kv_dtype=kv_dtype, runtime=runtime),
                     search_fit=False)
    w = Workload(isl, osl, users=1)
    b = users_held(plan, w, runtime, None, kv_pool_bytes(plan, runtime, isl + osl)[0]) if plan.budget.weights_fit else 0
    if b < 1:
        return None
    limits = serving_defaults(runtime, gpu, b, isl, osl, pp, model=plan.model)
    b = min(b, limits.max_batch or b) * dp
    tpot_fn, pre, cost = replica_timing(plan, runtime, c, limits.prefill_tokens, dp=dp)
    if cost is None:
        return None
    return b / (tpot_fn(b) + b * cost(math.inf) / osl) / (dp if dp > 1 else tp * pp)


@dataclass(frozen=True)
class ServingPoint:
    output_tok_s_total: float  # all users, output tokens/s of the replica
    ttft_s: float  # mean: the prompt's prefill and its wait (M/D/1)
    tpot_s: float  # mean time per output token after the first, prefill stalls included
    batch: int  # requests running at once


def serving_point(model: ModelSpec, gpu: GpuSpec, isl: int, osl: int, tp: int, users: int, quant: str | None,
                  runtime: str, runtimes: dict, kv_dtype: str = "bf16", engine_version: str = "v1"
                  ) -> ServingPoint | None:
    """One aggregated replica of tp cards serving `users` closed-loop users (a benchmark at a fixed max
    concurrency): the batch is the users, within what the cache holds and the engine's cap; a user sees
    TPOT_agg(b) = TPOT(b) + (b - 1) x C_prefill / osl (the other users' prompts) and a first token after
    T_prefill + Wq (estimate/replica.first_token_s), plus, for users
    past b, the wait for a running request to end; the replica gives b / (TTFT + osl x TPOT_agg) requests/s of osl
    tokens (`engine_version`: the vLLM release whose defaults and ledger apply, v1 the newest read). None without
    constants or when nothing fits."""
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.runtimes import backend, constants

    spec, be = runtimes.get(runtime), backend(gpu)
    c = constants(spec, be, gpu) if spec is not None and be else None
    if c is None:
        return None
    plan = make_plan(model, gpu, PlanInputs(quant=quant, context_tokens=held_context_tokens(runtime, isl, osl),
                                            prompt_tokens=isl, tp=tp, kv_dtype=kv_dtype, runtime=runtime),
                     search_fit=False)
    w = Workload(isl, osl, users=users)
    held = users_held(plan, w, runtime, None, kv_pool_bytes(plan, runtime, isl + osl, engine_version)[0]) \
        if plan.budget.weights_fit else 0
    if held < 1:
        return None
    limits = serving_defaults(runtime, gpu, held, isl, osl, engine_version=engine_version, model=plan.model)
    b = min(users, held, limits.max_batch or held)
    tpot_fn, pre, cost = replica_timing(plan, runtime, c, limits.prefill_tokens)
    if pre is None or cost is None:
        return None
    rate = b / (pre + osl * tpot_fn(b))
    tpot = tpot_fn(b) + (b - 1) * cost(rate, tpot_fn(b)) / osl  # the other users' prompts stall a user's answer
    ttft = first_token_s(b, tpot_fn, cost, rate, osl)
    life = ttft + osl * tpot
    # users past what the replica runs wait for a running request to end: b slots serve b / life requests/s, so
    # by Little's law the users - b waiting wait (users - b) / b x life each, in their time to first token
    queued = max(0, users - b) / b * life
    return ServingPoint(b * osl / life, ttft + queued, tpot, b)


def replayed_point(model: ModelSpec, gpu: GpuSpec, prompts: list[int], outputs: list[int], tp: int,
                   max_concurrency: int, quant: str | None, runtime: str, runtimes: dict,
                   kv_dtype: str = "bf16", engine_version: str = "v1") -> ServingPoint | None:
    """One aggregated replica of tp cards running a benchmark of len(prompts) requests at max_concurrency
    (estimate/serving_replay.py): SGLang's scheduler prefills first, the others mix prefill into decode steps. The
    plan, its decode steps and the prefill's compute per token are costed at the run's mean lengths; the engine runs
    at most what the cache holds and its cap (`engine_version` as serving_point's). None without constants or when
    nothing fits."""
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.runtimes import backend, constants
    from llmsize.estimate.serving_replay import replay

    spec, be = runtimes.get(runtime), backend(gpu)
    c = constants(spec, be, gpu) if spec is not None and be else None
    if c is None:
        return None
    isl, osl = round(sum(prompts) / len(prompts)), round(sum(outputs) / len(outputs))
    plan = make_plan(model, gpu, PlanInputs(quant=quant, context_tokens=held_context_tokens(runtime, isl, osl),
                                            prompt_tokens=isl, tp=tp, kv_dtype=kv_dtype, runtime=runtime),
                     search_fit=False)
    w = Workload(isl, osl, users=max_concurrency)
    held = users_held(plan, w, runtime, None,
                      kv_pool_bytes(plan, runtime, max(prompts) + max(outputs), engine_version)[0]) \
        if plan.budget.weights_fit else 0
    if held < 1:
        return None
    limits = serving_defaults(runtime, gpu, held, isl, osl, engine_version=engine_version, model=plan.model)
    engine = replica_engine(plan, runtime, c, limits.prefill_tokens)
    if engine is None:
        return None
    forward, policy = engine
    r = replay(prompts, outputs, max_concurrency, forward, limits.prefill_tokens, min(held, limits.max_batch or held),
               policy)
    return ServingPoint(r.output_tok_s, r.ttft_mean_s, r.tpot_mean_s, min(max_concurrency, held))
