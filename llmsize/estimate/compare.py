"""One model across many cards: a row per card, on one card or on the fewest cards that hold it.

Each row is a plan (plan.py) with the same inputs; where the model does not fit one card, the row is the
smallest tp x pp that does (parallel.py), and its figures are for that many cards. Per-watt figures use the
catalog's TDP times the cards; per-currency figures need prices the user supplies (none are shipped).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.errors import InvalidValueError
from llmsize.estimate.capacity import LLAMACPP_RUNTIMES
from llmsize.estimate.engines import plan_shortfall
from llmsize.estimate.expected import expect
from llmsize.estimate.plan import Plan, PlanInputs, make_plan, smallest_fit

# column key -> (header, unit, higher is better)
COLUMNS = {
    "gpu": ("card", "", False),
    "bandwidth_gb_s": ("bandwidth", "GB/s", True),
    "memory_gib": ("VRAM", "GiB", True),
    "cards": ("cards", "", False),
    "fits": ("fits one card", "", True),  # the model on one card; `serves` (rows_to_dicts): on `cards` of them
    "max_context_tokens": ("longest context", "tokens", True),
    "max_sequences": ("sequences", "at --context", True),
    "ceiling_tok_s": ("batch-1 ceiling", "tok/s", True),
    "expected_tok_s": ("expected", "tok/s, batch 1", True),
    "aggregate_tok_s": ("aggregate", "tok/s at --users", True),
    "ttft_s": ("TTFT", "s", False),
    "expected_ttft_s": ("expected TTFT", "s, in the runtime", False),
    "tok_s_per_w": ("per watt", "tok/s/W", True),
    "price": ("price", "per card", False),
    "cost": ("cost", "cards x price", False),
    "tok_s_per_kcurrency": ("per 1,000", "tok/s", True),
}
SORT_KEYS = tuple(k for k in COLUMNS if k != "gpu") + ("gpu",)


@dataclass(frozen=True)
class Row:
    gpu: GpuSpec
    plan: Plan | None  # None: no configuration of up to 256 cards holds the model
    tp: int
    pp: int
    users_served: int  # --users, or fewer when the cache holds fewer
    price: float | None
    expected: object | None = None  # expected.ExpectedResult under the runtime asked for (or the default)
    why_not: str | None = None  # a row without a plan: why no configuration holds the model
    tensor_cards: int | None = None  # a row on pipeline stages: the fewest cards of a tensor split alone (pp 1)
    # within a node, where one holds the model
    ledger_short: str | None = None  # the serving engine's own ledger where it holds far less (engines.plan_shortfall)

    @property
    def cards(self) -> int:
        return self.tp * self.pp

    def values(self) -> dict:
        p = self.plan
        e = self.expected.expected if self.expected else None  # speed.Expected, or None with its reason
        agg = p.decode_b.tok_s if p and self.users_served else None
        tdp = self.gpu.tdp_w * self.cards if self.gpu.tdp_w else None
        return {
            "gpu": self.gpu.id,
            "bandwidth_gb_s": self.gpu.bandwidth_gb_s,
            "memory_gib": self.gpu.memory_bytes / 2**30,
            "cards": self.cards if p else None,
            "fits": bool(p) and self.cards == 1,
            "max_context_tokens": p.max_context.tokens if p else None,
            "max_sequences": p.max_sequences if p else None,
            "ceiling_tok_s": p.decode_ceiling_tok_s if p else None,
            "expected_tok_s": e.tok_s if e else None,
            "aggregate_tok_s": agg,
            "ttft_s": p.prefill.ttft_s if p else None,
            "expected_ttft_s": e.ttft_s if e else None,
            "tok_s_per_w": agg / tdp if agg and tdp else None,
            "price": self.price,
            "cost": self.price * self.cards if self.price is not None and p else None,
            "tok_s_per_kcurrency": agg / (self.price * self.cards / 1000) if agg and self.price else None,
        }


def compare(model: ModelSpec, gpus: list[GpuSpec], inputs: PlanInputs, users: int,
            prices: dict[str, float] | None = None, fixed: bool = False, runtimes: dict | None = None,
            runtime: str | None = None) -> list[Row]:
    """fixed: every row uses inputs.tp x inputs.pp (a card without a link, or a split the model's heads do
    not allow, gets an empty row); else each row uses one card or the fewest that hold the model."""
    if users < 1:
        raise InvalidValueError(f"--users `{users}` must be at least 1.", "Pass --users 1 or more.")
    prices = prices or {}
    rows, refused = [], []
    for g in gpus:
        tp, pp = inputs.tp, inputs.pp
        try:
            p = make_plan(model, g, replace(inputs, batch=1), search_fit=not fixed)
        except InvalidValueError as e:  # this card's runtime refuses the inputs (a cache type llama.cpp lacks), or
            # the split does not fit the model's heads: a row that says so, unless every card is refused
            refused.append(e)
            rows.append(Row(g, None, tp, pp, 0, prices.get(g.id), why_not=e.message))
            continue
        if fixed and (not p.budget.weights_fit or p.max_sequences < 1):
            rows.append(Row(g, None, tp, pp, 0, prices.get(g.id), why_not=(
                f"does not hold the model and one sequence's cache on {tp * pp} card(s) (--tp {tp} --pp {pp})")))
            continue
        if not p.budget.weights_fit or p.max_sequences < 1:
            fit = p.fit or smallest_fit(model, g, replace(inputs, batch=1))
            if fit is None:
                rows.append(Row(g, None, 1, 1, 0, prices.get(g.id), why_not=(
                    "one card does not hold the model and one sequence's cache, and no split over up to 256 does "
                    "(cards without a link between them in the catalog are not split)")))
                continue
            tp, pp = fit.tp, fit.pp
            p = make_plan(model, g, replace(inputs, batch=1, tp=tp, pp=pp))
        served = min(users, p.max_sequences)
        if served >= 1:
            p = make_plan(model, g, replace(inputs, batch=served, tp=tp, pp=pp))
        exp = expect(p, runtimes, runtime) if runtimes is not None else None
        tensor = None
        rid = exp.runtime if exp is not None else runtime
        if pp > 1 and not fixed and rid not in LLAMACPP_RUNTIMES:  # a token crosses the stages in turn: the
            # fewest cards of a split without them within a node (llama.cpp's own default split is its layers', and
            # past a node stages are how engines span nodes: none offered)
            tensor = smallest_fit(model, g, replace(inputs, batch=1), pp_choices=(1,))
            tensor = tensor if tensor is not None and tensor.tp <= inputs.gpus_per_node else None
        short = plan_shortfall(p, model, g, rid)  # None but for a serving engine's ledger that holds far less
        rows.append(Row(g, p, tp, pp, served, prices.get(g.id), exp, tensor_cards=tensor and tensor.tp,
                        ledger_short=short))
    if refused and len(refused) == len(gpus):
        raise refused[0]  # the split is the model's problem (its heads), not a card's: say so, not a table of dashes
    return rows


def sort_rows(rows: list[Row], key: str, descending: bool | None = None) -> list[Row]:
    """Stable: ties keep the card-id order; rows without the figure go last."""
    if key not in COLUMNS:
        raise InvalidValueError(f"Unknown sort key `{key}`.", f"Choose one of: {', '.join(SORT_KEYS)}.")
    best_high = COLUMNS[key][2] if descending is None else descending
    base = sorted(rows, key=lambda r: r.gpu.id)
    have = [r for r in base if r.values()[key] is not None]
    missing = [r for r in base if r.values()[key] is None]
    have.sort(key=lambda r: r.values()[key], reverse=best_high)
    return have + missing
