"""Sizing a deployment for a workload: how many of which card serve it within its latency targets.

Aggregated serving (every replica prefills and decodes), one replica = tp cards (tensor parallel, pipeline 1;
expert parallel over the same cards for a MoE). For each card and tp, one plan at the context a request reaches
(isl + osl); its decode model gives the step at any batch b, costed by the runtime's fitted constants
(estimate/speed.py):

    TPOT(b) = decode step time at batch b                 (s per output token, per user)
    TTFT    = prefill time of isl tokens, alone           (s; prefills queued behind each other are not modelled)
    a request lasts  TTFT + osl x TPOT(b)
    a replica serves b users at once; its output rate is b / TPOT(b), less the share of its time spent on the
    prefills of its requests: each request costs one prefill, so
        output tok/s per replica = b x osl / (osl x TPOT(b) + b x T_prefill)
    users = --users, or Little's law on --rate: users = rate x (TTFT + osl x TPOT(b))

The largest b that the cache holds (max_sequences at isl + osl), that keeps TPOT(b) within --tpot and TTFT within
--ttft, gives the fewest replicas = ceil(users / b). Cards = replicas x tp, nodes of 8. Cost per million output
tokens = cards x hourly price / (output tok/s x 3600) x 1e6. Disaggregated prefill/decode is not modelled yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.errors import InvalidValueError, LlmsizeError

TP_CHOICES = (1, 2, 4, 8)
GPUS_PER_NODE = 8
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class Workload:
    isl: int  # prompt tokens per request
    osl: int  # output tokens per request
    users: int | None = None  # concurrent users
    rate: float | None = None  # requests per second
    ttft_s: float | None = None  # target
    tpot_s: float | None = None  # target, seconds per output token per user

    def check(self) -> None:
        if (self.users is None) == (self.rate is None):
            raise InvalidValueError("Give the load as --users N or --rate R (requests per second), one of them.",
                                    "e.g. --users 400, or --rate 20.")


@dataclass(frozen=True)
class FleetRow:
    card: str
    mode: str
    tp: int
    pp: int
    ep: int
    replicas: int | None
    cards_total: int | None
    nodes: int | None
    batch_per_replica: int | None
    output_tok_s_per_gpu: float | None
    output_tok_s_total: float | None
    tok_s_per_user: float | None
    ttft_s: float | None
    tpot_s: float | None
    meets_slo: bool
    watts: float | None
    cost_per_hour: float | None
    cost_per_month: float | None
    cost_per_mtok_out: float | None
    why_not: str | None = None


def _timing(plan, runtime: str, constants):
    """(TPOT at batch b as a function, the prefill time of the prompt)."""
    from llmsize.estimate.expected import prefill_inputs, step_inputs
    from llmsize.estimate.speed import decode_step_time_s, prefill_time_s

    def tpot(b: int) -> float:
        return decode_step_time_s(step_inputs(plan, plan.decode_model.step(b), runtime), constants)

    return tpot, prefill_time_s(prefill_inputs(plan, runtime), constants)


def _replica(plan, runtime: str, constants, w: Workload) -> tuple[int | None, str | None, tuple]:
    """The largest batch one replica serves within the targets, or why none."""
    if not plan.budget.weights_fit or plan.max_sequences < 1:
        return None, "the weights and one request's cache do not fit", ()
    tpot, pre = _timing(plan, runtime, constants)
    if pre is None:
        return None, "no prefill constants for this runtime and card", ()
    if w.ttft_s is not None and pre > w.ttft_s:
        return None, f"TTFT {pre:.2f} s for {w.isl:,} tokens exceeds the {w.ttft_s:g} s target", ()
    hi = plan.max_sequences
    if w.tpot_s is not None and tpot(1) > w.tpot_s:
        return None, f"TPOT {tpot(1) * 1000:.1f} ms at batch 1 exceeds the {w.tpot_s * 1000:g} ms target", ()
    lo = 1
    if w.tpot_s is None or tpot(hi) <= w.tpot_s:
        lo = hi
    else:  # TPOT grows with the batch: the largest b within the target
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if tpot(mid) <= w.tpot_s else (lo, mid)
    return lo, None, (tpot, pre)


def fleet_rows(model: ModelSpec, gpus: list[GpuSpec], w: Workload, runtime: str, runtimes: dict,
               hourly: dict[str, float] | None = None, kv_dtype: str = "bf16") -> list[FleetRow]:
    from llmsize.estimate.expected import backend, constants
    from llmsize.estimate.plan import PlanInputs, make_plan

    w.check()
    spec = runtimes.get(runtime)
    moe = any(g.mlp is not None and g.mlp.kind == "moe" for g in model.layer_groups)
    rows = []
    for g in gpus:
        be = backend(g)
        c = constants(spec, be) if spec is not None and be else None
        price = (hourly or {}).get(g.id)
        best, reasons = None, []
        if c is None:
            reasons.append(f"no {runtime} constants for {g.vendor} cards")
        for tp in TP_CHOICES if c is not None else ():
            try:
                plan = make_plan(model, g, PlanInputs(context_tokens=w.isl + w.osl, prompt_tokens=w.isl, tp=tp,
                                                      kv_dtype=kv_dtype), search_fit=False)
            except LlmsizeError as e:
                reasons.append(f"tp {tp}: {e.message}")
                continue
            b, why, timing = _replica(plan, runtime, c, w)
            if b is None:
                reasons.append(f"tp {tp}: {why}")
                continue
            tpot_fn, pre = timing
            tpot = tpot_fn(b)
            per_replica = b * w.osl / (w.osl * tpot + b * pre)
            users = w.users if w.users is not None else math.ceil(w.rate * (pre + w.osl * tpot))
            replicas = max(1, math.ceil(users / b))
            if w.rate is not None:  # enough replicas to keep up with the arrivals too
                replicas = max(replicas, math.ceil(w.rate * w.osl / per_replica))
            cards = replicas * tp
            row = FleetRow(
                card=g.id, mode="aggregated", tp=tp, pp=1, ep=tp if moe else 1, replicas=replicas,
                cards_total=cards, nodes=math.ceil(cards / GPUS_PER_NODE), batch_per_replica=b,
                output_tok_s_per_gpu=per_replica / tp, output_tok_s_total=per_replica * replicas,
                tok_s_per_user=1 / tpot, ttft_s=pre, tpot_s=tpot, meets_slo=True,
                watts=g.tdp_w * cards if g.tdp_w else None,
                cost_per_hour=price * cards if price else None,
                cost_per_month=price * cards * HOURS_PER_MONTH if price else None,
                cost_per_mtok_out=price * cards / (per_replica * replicas * 3600) * 1e6 if price else None)
            key = (row.cost_per_hour if price else cards, tp)
            if best is None or key < best[0]:
                best = (key, row)
        if best is not None:
            rows.append(best[1])
        else:
            rows.append(FleetRow(g.id, "aggregated", 0, 1, 1, None, None, None, None, None, None, None, None, None,
                                 False, None, None, None, None, reasons[-1] if reasons else "no configuration"))
    rows.sort(key=lambda r: (not r.meets_slo, r.cost_per_hour if r.cost_per_hour is not None else math.inf,
                             r.cards_total if r.cards_total is not None else math.inf, r.card))
    return rows
