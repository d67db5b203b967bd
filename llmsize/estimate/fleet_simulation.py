"""A fleet row's replica replayed under its share of the workload (estimate/serving_replay.py): the spread of TTFT
and TPOT (p50, p95, p99) that the closed form's means (estimate/fleet.py) do not give.

One aggregated replica of the row's tp, its engine's scheduler (SGLang prefills first; vLLM and TensorRT-LLM mix
prompts into decode steps), its steps and prefills costed as fleet costs them. The load is the replica's share:
--users as a closed loop of ceil(users / replicas) users, each sending its next request when the last ends, their
starts staggered over one request's life at the row's figures (started all at once with one length they would
stay in step, every prompt of a wave arriving together: an artefact no deployment has; staggered, with fixed lengths,
each user still sends a prompt every request's life, so prompts come almost evenly spaced and queue less than the
closed form's Poisson arrivals: Llama 3.1 8B on an H100 under vLLM, 64 users, 1,000 in / 200 out: the replay's mean
TTFT 0.052 s against the closed form's 0.058 s, and a Poisson replay at the same throughput 0.058 s,
benchmarks/serving_closed_forms.py); --rate as
Poisson arrivals at rate / replicas. Requests draw their prompt and answer lengths independently from the
workload's distributions (their equally likely points; a fixed length when none was given), the shared prefix
taken off each prompt. REQUESTS_PER_USER requests for each request in flight (the users; under --rate, what the
rate keeps in flight), at least MIN_REQUESTS, within MAX_TOKENS answer tokens and MAX_STEPS decode steps (a few
seconds of replay) and never under MIN_WAVES waves: a load that needs more is not replayed and says so. The first
and last wave of requests are left out of the figures (the ramp-up and the drain), two of a whole deployment.

A disaggregated row is replayed whole (estimate/disaggregated_replay.py): its x prefill workers taking the prompts
from one queue, each prompt's cache moved over the node link, its y decode workers admitting up to the row's cap,
under all of --users or --rate. DEP, pipeline and speculative rows are not replayed (the replay has neither the
all-to-alls, the stages nor a draft), and say so.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.estimate.workload import Workload

REQUESTS_PER_USER = 12
MIN_REQUESTS = 2000
MIN_WAVES = 4  # a ramp-up, two measured, a drain
MAX_TOKENS = 30_000_000  # answer tokens a replay emits at most
MAX_STEPS = 2_000_000  # decode steps a replay runs at most (a step costs it about 20 tokens' time)
MAX_SPAN_S = 1e11  # the longest run a replay's clock follows (its float then resolves 2e-5 s, far below a step)
SEED = 20261201


@dataclass(frozen=True)
class Simulated:
    requests: int  # replayed
    measured: int  # in the figures (the first and last wave left out)
    ttft_s: tuple[float, float, float]  # p50, p95, p99
    tpot_s: tuple[float, float, float] | None  # None: one-token answers
    ttft_mean_s: float
    tpot_mean_s: float | None


def simulate_row(model: ModelSpec, gpu: GpuSpec, row, w: Workload, runtime: str, runtimes: dict,
                 kv_dtype: str | None = "bf16") -> Simulated | str:
    """The row's replica replayed (a disaggregated row: its prefill and decode workers together), or the one-line
    reason it is not."""
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.replica import replica_engine
    from llmsize.estimate.runtimes import backend, constants
    from llmsize.estimate.serving_defaults import held_context_tokens, serving_defaults
    from llmsize.estimate.serving_replay import poisson_arrivals, replay

    if row.replicas is None:
        return "no configuration serves the workload"
    if (row.dp or 1) > 1 or row.pp > 1:
        return "DEP and pipeline rows are not replayed"
    if w.spec is not None:
        return "speculative decoding is not replayed"
    spec, be = runtimes.get(runtime), backend(gpu)
    c = constants(spec, be, gpu) if spec is not None and be else None
    if c is None:
        return f"no {runtime} constants for this card"
    plan = make_plan(model, gpu, PlanInputs(context_tokens=held_context_tokens(runtime, w.isl, w.osl),
                                            prompt_tokens=w.isl, tp=row.tp, kv_dtype=row.kv_dtype or kv_dtype,
                                            runtime=runtime, language_model_only=w.language_model_only),
                     search_fit=False)
    limits = serving_defaults(runtime, gpu, row.batch_per_replica, w.isl, w.osl, model=model)
    engine = replica_engine(plan, runtime, c, limits.prefill_tokens)
    if engine is None:
        return f"no {runtime} prefill constants for this card"
    forward, policy = engine
    apart = row.mode != "aggregated"  # the whole deployment, its prefill and decode workers
    share = 1 if apart else row.replicas
    users = math.ceil(w.users / share) if w.users is not None else None
    life_s = row.ttft_s + w.osl * row.tpot_s  # a request's, at the row's figures
    # the requests in flight (a wave): the users, or under --rate the replica's batch, or all the deployment holds
    in_flight = users or (math.ceil(w.rate * life_s) if apart else row.batch_per_replica)
    # waves left out at each end: a whole deployment's first users finish early (small decode batches), and their
    # next requests meet the staggered starts still arriving, a second wave of ramp-up
    ramp = 2 if apart else 1
    waves = MIN_WAVES + 2 * (ramp - 1)
    batch = max(1, row.batch_per_replica)
    n = min(max(MIN_REQUESTS, REQUESTS_PER_USER * in_flight), MAX_TOKENS // max(1, w.osl),
            MAX_STEPS * batch // max(1, w.osl))
    if n < waves * in_flight:
        return (f"{in_flight:,} requests in flight are more than a replay follows ({waves} x {in_flight:,} requests "
                f"of {w.osl:,} tokens at a batch of {batch:,}, past {MAX_TOKENS // 1_000_000}M tokens or "
                f"{MAX_STEPS // 1_000_000}M steps)")
    if users is None and n / (w.rate / share) > MAX_SPAN_S:  # the clock's float would lose a step's resolution
        return (f"{w.rate:g} requests/s is too slow a rate to replay ({n:,} requests would span "
                f"{n / (w.rate / share) / 3.156e7:,.0f} years)")
    rng = random.Random(SEED)
    isl_d, osl_d = w.lengths()
    keep = 1.0 - w.shared_prefix
    drawn = [rng.choice(isl_d.points) for _ in range(n)]
    prompts = [max(1, round(p * keep)) for p in drawn]
    outputs = [max(1, rng.choice(osl_d.points)) for _ in range(n)]
    skip = min(ramp * in_flight, (n - 1) // 2)  # at each end
    if apart:
        from llmsize.estimate.disaggregated_replay import replay_disaggregated

        per_token_s = (plan.kv_card or plan.kv).bytes_per_token / (w.node_link_gb_s * 1e9)
        r = replay_disaggregated(
            prompts, outputs, forward, row.prefill_workers, limits.prefill_tokens, forward.decode_step_s,
            row.decode_workers, row.running_cap, lambda p: p / keep * per_token_s, users=users,
            arrivals_s=None if users is not None else poisson_arrivals(n, w.rate, SEED), stagger_s=life_s, skip=skip)
    elif users is not None:
        r = replay(prompts, outputs, users, forward, limits.prefill_tokens, row.batch_per_replica, policy,
                   skip=skip, stagger_s=life_s)
    else:
        r = replay(prompts, outputs, 1, forward, limits.prefill_tokens, row.running_cap, policy,
                   arrivals_s=poisson_arrivals(n, w.rate / row.replicas, SEED), skip=skip)
    answers = any(o > 1 for o in outputs)  # one-token answers have no time per output token
    return Simulated(r.requests, r.requests - 2 * skip, r.ttft_s_quantiles, r.tpot_s_quantiles if answers else None,
                     r.ttft_mean_s, r.tpot_mean_s if answers else None)


def simulate_rows(model: ModelSpec, gpus: list[GpuSpec], rows: list, w: Workload, runtime: str, runtimes: dict,
                  kv_dtype: str | None = "bf16") -> dict:
    """card id -> the row's Simulated, or why it is not replayed, for each row that meets its targets."""
    by_id = {g.id: g for g in gpus}
    return {r.card: simulate_row(model, by_id[r.card], r, w, runtime, runtimes, kv_dtype)
            for r in rows if r.meets_slo and r.card in by_id}
