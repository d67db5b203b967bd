"""`llmsize fleet` rows (estimate/fleet.py) as a table and as JSON (the keys scripts rely on)."""

from __future__ import annotations

from dataclasses import asdict

from llmsize.estimate.fleet import HOURS_PER_MONTH
from llmsize.estimate.step_inputs import has_recurrent_layers
from llmsize.render.columns import print_rich, print_table

ASSUMPTIONS = [
    "aggregated: a user's TPOT = TPOT(b) + b x a prompt's prefill share / osl (the replica's prefills stall every "
    "user; prompts are prefilled the engine's default chunk at a time, sharing one read of the weights; under "
    "SGLang a prefill forward holds only the prompts that arrived while the last ran); TTFT = one prompt's prefill "
    "+ its wait for the prefills ahead (M/D/1 a replica: Poisson arrivals, fixed service; under SGLang also the "
    "decode step in progress)",
    "dep n (a MoE): attention data parallel over n cards, each with its own requests and cache, the routed experts "
    "split among them; a step is one card's step at its share of the batch plus two all-to-alls a MoE layer "
    "(routing taken as uniform)",
    "disaggregated: x prefill workers, the fewest that keep TTFT (prefill + M/D/x wait, Allen-Cunneen) within the "
    "target (without one, the wait within one prefill); y = ceil(users / b) decode workers; TTFT adds the cache's "
    "move over the node link (--node-link-gb-s, 50 GB/s per GPU by default)",
    "a running request holds isl + osl / 2 tokens of cache on average (vLLM, SGLang), isl + osl in TensorRT-LLM "
    "(which reserves the whole answer), in the cache memory the engine's own ledger leaves (vLLM, SGLang, "
    "TensorRT-LLM); the batch stays within the engine's default cap",
    "speeds from the expected-speed model's constants for the runtime, at each worker's batch",
    "length distributions (--isl 3000:p95=12000 or a CSV): throughput and the targets at the mean request; a "
    "replica holds b requests when b E[cache] + 1.645 sqrt(b) sd[cache] fits the pool and a p99 request fits alone; "
    "the prefill queue is M/G/c with the prompts' spread; ttft_p95_s is a p95 prompt's",
    "each row is the better mode; `other` is the other one",
]


def _lengths(d) -> dict:
    return {"described": d.described, "mean": d.mean, "p95": d.p95, "p99": d.p99, "points": list(d.points)}


def _simulated(sim) -> dict:
    """A replayed replica's figures (estimate/fleet_simulation.py), or why it was not replayed."""
    if isinstance(sim, str):
        return {"why_not": sim}
    tpot = sim.tpot_s or (None, None, None)  # None: one-token answers
    return {"requests": sim.requests, "measured": sim.measured, "ttft_mean_s": sim.ttft_mean_s,
            "ttft_p50_s": sim.ttft_s[0], "ttft_p95_s": sim.ttft_s[1], "ttft_p99_s": sim.ttft_s[2],
            "tpot_mean_s": sim.tpot_mean_s, "tpot_p50_s": tpot[0], "tpot_p95_s": tpot[1], "tpot_p99_s": tpot[2]}


def _spec_words(w) -> str | None:
    """The workload's speculative decoding in words (None without it)."""
    return None if w.spec is None else f"{w.spec.label} ({w.spec.tokens_per_pass():.2f} tokens a target pass)"


def _kv_words(kv_dtype: str, rows=()) -> str:
    """The cache dtype the report names, and the cards whose rows keep another (the runtime's own there)."""
    other: dict[str, list[str]] = {}
    for r in rows:
        if r.kv_dtype and r.kv_dtype != kv_dtype:
            other.setdefault(r.kv_dtype, []).append(r.card)
    return kv_dtype + "".join(f" ({dt} on {', '.join(cards)}: the runtime's own there)" for dt, cards in other.items())


def _setup(w, kv_dtype: str, rows=()) -> str:
    """What the rows were sized with beyond the lengths and the load: the weights' format, the cache dtype (and
    where a card's row keeps another), the shared prefix and speculative decoding."""
    return ((f"weights {w.quant}, " if w.quant else "") + f"KV cache {_kv_words(kv_dtype, rows)}"
            + (f", {w.shared_prefix:.0%} of prompt tokens from the prefix cache" if w.shared_prefix else "")
            + (f", speculative {_spec_words(w)}" if w.spec is not None else ""))


def _io_words(w) -> str:
    """The lengths as the title gives them: isl in / osl out, each a mean with its p95 where it is spread."""
    def one(n: int, d) -> str:
        return f"{n:,}" if d is None or d.fixed else f"{n:,} (mean; p95 {d.p95:,})"
    return f"{one(w.isl, w.isl_lengths)} in / {one(w.osl, w.osl_lengths)} out"


def fleet_to_dict(model, w, runtime, currency, rows, sims: dict | None = None, kv_dtype: str = "bf16") -> dict:
    """sims (--simulate): card id -> its row's replay (or why not), under that row's `simulated`."""
    out_rows = []
    for r in rows:
        d = asdict(r)
        for row, out in ((r, d), (r.other, d.get("other"))):  # the row, and the other mode's beside it
            if row is not None and out is not None:
                band = row.tok_s_per_user_band
                out["tok_s_per_user_low"], out["tok_s_per_user_high"] = band if band else (None, None)
        if sims is not None and r.card in sims:
            d["simulated"] = _simulated(sims[r.card])
        out_rows.append(d)
    return {"model": model.id, "runtime": runtime, "currency": currency,
            "workload": {"isl": w.isl, "osl": w.osl, "users": w.users, "rate": w.rate, "ttft_s": w.ttft_s,
                         "quant": w.quant,
                         "tpot_s": w.tpot_s, "tok_s_per_user": w.tok_s_per_user,
                         "shared_prefix": w.shared_prefix, "kv_dtype": kv_dtype,
                         "isl_lengths": _lengths(w.lengths()[0]), "osl_lengths": _lengths(w.lengths()[1]),
                         "longest_tokens": w.longest_tokens(), "node_link_gb_s": w.node_link_gb_s,
                         "spec": None if w.spec is None else {
                             "label": w.spec.label, "k": w.spec.k, "accept": w.spec.accept,
                             "draft": w.spec.draft.id if w.spec.draft else None,
                             "tokens_per_pass": w.spec.tokens_per_pass()}},
            "rows": out_rows,
            "assumptions": ASSUMPTIONS}


def render_simulated(sims: dict, console) -> None:
    """--simulate: each served row replayed, its TTFT and TPOT spread."""
    from rich import box
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left", collapse_padding=True,
              title="Simulated: each row's replica, or its prefill and decode workers, replayed "
                    "(estimate/fleet_simulation.py)")
    for col in ("card", "measured", "TTFT s mean", "p50", "p95", "p99", "TPOT ms mean", "p50", "p95", "p99"):
        t.add_column(col, justify="left" if col == "card" else "right", no_wrap=True)
    notes = []
    for label, sim in sims.items():
        if isinstance(sim, str):
            notes.append(f"  {label}: not replayed: {sim}")
            continue
        tpot = (["-"] * 4 if sim.tpot_s is None else  # one-token answers
                [f"{sim.tpot_mean_s * 1000:.1f}", *(f"{x * 1000:.1f}" for x in sim.tpot_s)])
        t.add_row(label, f"{sim.measured:,}", f"{sim.ttft_mean_s:.2f}", *(f"{x:.2f}" for x in sim.ttft_s), *tpot)
    if t.row_count:
        print_rich(console, t)
    else:
        console.print(t.title)
    for line in notes:
        console.print(line)
    console.print("Each aggregated replica at its share of the load, a disaggregated row's prefill and decode "
                  "workers together under all of it (--users: a closed loop, its users' starts "
                  "staggered; --rate: Poisson arrivals); measured: the requests replayed less the ramp-up and the "
                  "drain; lengths drawn from the workload's distributions. A closed loop of fixed lengths sends "
                  "its prompts almost evenly spaced, so its "
                  "TTFT spreads less, and can average less, than the main table's, which takes arrivals as "
                  "Poisson.", style="dim")


def _par(r) -> str:
    """tp, tp x pp when a replica spans nodes, or dep n (attention data parallel, experts over n cards)."""
    if (r.dp or 1) > 1:
        return f"dep {r.dp}"
    return f"{r.tp}x{r.pp}" if r.pp > 1 else str(r.tp)


def _banded(x: float, band: tuple[float | None, float | None] | None, digits: int) -> str:
    """`x (low-high)`, the band of the expected-speed model's held-out error; x alone without one."""
    if not band or band[0] is None or band[1] is None:
        return f"{x:,.{digits}f}"
    return f"{x:,.{digits}f} ({band[0]:,.{digits}f}-{band[1]:,.{digits}f})"


def _latency_cells(r) -> list[str]:
    """tok/s per user, TTFT (s) and TPOT (ms) of a served row, each with its band."""
    ms = (r.tpot_s_low * 1000, r.tpot_s_high * 1000) if r.tpot_s_low and r.tpot_s_high else None
    return [_banded(r.tok_s_per_user, r.tok_s_per_user_band, 1), _banded(r.ttft_s, (r.ttft_s_low, r.ttft_s_high), 2),
            _banded(r.tpot_s * 1000, ms, 1)]


# a model with recurrent layers: its prompts are left out of the fit, and its TTFT band is widened to what published
# hybrid prompts took (expected.RECURRENT_PREFILL_RANGE; fleet._with_bands)
HYBRID_BAND_WORDS = ("; a hybrid's TTFT band, its recurrent layers' prompts left out of the fit, at least as wide as "
                     "published hybrid prompts took: `llmsize plan MODEL --gpu CARD` says how wide")


def render_fleet(model, w, runtime, currency, rows, console, kv_dtype: str = "bf16") -> None:
    load = _load(w)
    missing, cells = [], []
    for r in rows:
        if r.replicas is None:
            missing.append(f"{r.card}: {r.why_not}")
            continue
        mode = (f"{r.prefill_workers:,}P{r.decode_workers:,}D" if r.mode == "disaggregated"
                else f"{r.replicas:,} x agg")
        cells.append([r.card, mode, _par(r), f"{r.cards_total:,}", f"{r.batch_per_replica:,}",
                      f"{r.output_tok_s_per_gpu:,.0f}", f"{r.tok_s_per_user:,.1f}", *_latency_cells(r)[1:],
                      f"{r.cost_per_mtok_out:,.3f}" if r.cost_per_mtok_out is not None else "-"])
    heads = ["card", "mode", "tp", "cards", "batch", "tok/s per GPU", "tok/s per user", "TTFT s", "TPOT ms",
             f"{currency or 'cost'}/Mtok"]
    if all(c[9] == "-" for c in cells):  # no prices: no cost column
        heads.pop(9)
        cells = [c[:9] for c in cells]
    print_table(console, f"fleet: {model.name}, {_io_words(w)}, {load}, {_targets(w)} ({runtime}; "
                f"{_setup(w, kv_dtype, rows)})", heads, cells)
    for line in missing:
        console.print(f"  no configuration: {line}", markup=False, highlight=False)
    notes = _caveat_lines(rows)
    for line in notes:
        console.print(f"  note: {line}", markup=False, highlight=False)
    if missing or notes:
        console.print()
    _footprint(rows, currency, console)
    console.print("Cheapest an hour first with hourly prices (the footprint's cost: the main table's cost per "
                  "million tokens also counts how fast each row serves), else cheapest to buy with a card's prices "
                  "(`prices:`), else fewest cards; each row the better of "
                  "aggregated (N x agg) and disaggregated (xPyD: x prefill, y decode workers of tp cards) serving, "
                  "aggregated where they cost the same (the simpler to run; the other mode's row, below, may serve "
                  "faster); "
                  "tp: a worker's tensor-parallel cards, `4x2` with pipeline stages (tp 4 x pp 2); "
                  "dep n: attention data parallel, the experts split over n cards. Speeds from the expected-speed "
                  "model at each worker's batch, in parentheses its held-out band (p5-p95; a user's tok/s is 1 / "
                  "TPOT" + (HYBRID_BAND_WORDS if has_recurrent_layers(model) else "") + "); TTFT is the mean prompt's "
                  "prefill and its queue (SGLang's replicas: M/D/1; where prompts ride in decode steps, vLLM's and "
                  "TensorRT-LLM's, the rest of the step in progress and the step that carries it; prefill workers: "
                  "a wait for a free one, Erlang C, then its forward with the prompts that arrived meanwhile), and "
                  "under --rate an aggregated replica's wait for one of its slots (M/G/c over its --max-num-seqs, "
                  "which sits above its mean batch). Rows are sized at the expected speed, the targets met there: "
                  "at the band's slow end TPOT and TTFT are longer (the band shows how much), so give tighter "
                  "targets for a margin."
                  + ("" if w.ttft_s is not None else " Without --ttft, a disaggregated row's prefill workers keep a "
                     "prompt's wait within one prefill: --ttft sizes them to a target instead (fewer, where it is "
                     "loose)."), style="dim")


def _caveat_lines(rows) -> list[str]:
    """Each served card's caveats (what the catalog lacks that its figures lean on), one line each."""
    return [f"{r.card}: {c}" for r in rows if r.replicas is not None for c in r.caveats]


def _footprint(rows, currency, console) -> None:
    """What each served row takes: cards, nodes (fleet.cards_per_node: 8 linked cards, or one SoC machine each),
    board power (kW, the cards' TDP; "-" where the catalog has none, said under the table), and with hourly prices
    its cost an hour and a month (a million output tokens' is in the main table)."""
    served = [r for r in rows if r.replicas is not None]
    if not served:
        return
    priced = any(r.cost_per_hour is not None for r in served)
    bought = any(r.cards_cost is not None for r in served)
    cur = currency or "cost"
    heads = ["card", "cards", "nodes", "kW"] + ([f"{cur}/hour", f"{cur}/month"] if priced else []) + (
        [f"{cur} to buy"] if bought else []) + ["other mode (cards)"]
    cells = []
    for r in served:
        c = [r.card, f"{r.cards_total:,}", f"{r.nodes:,}", f"{r.watts / 1000:,.1f}" if r.watts else "-"]
        if priced:
            c.append(f"{r.cost_per_hour:,.2f}" if r.cost_per_hour is not None else "-")
            c.append(f"{r.cost_per_month:,.0f}" if r.cost_per_month is not None else "-")
        if bought:
            c.append(f"{r.cards_cost:,.0f}" if r.cards_cost is not None else "-")
        c.append(f"{'aggregated' if r.other.mode == 'aggregated' else 'P/D'} ({r.other.cards_total:,})"
                 if r.other else "-")
        cells.append(c)
    costs = ([f"cost (a month of {HOURS_PER_MONTH} hours)"] if priced else []) + (
        ["price to buy (cards x one card's)"] if bought else [])
    print_table(console, "Footprint" + (f" and {' and '.join(costs)}" if costs else "")
                + " of each row, and the other serving mode's cards", heads, cells)
    no_tdp = [r.card for r in served if not r.watts]
    if no_tdp:
        console.print(f" kW -: the catalog has no published TDP for {', '.join(no_tdp)}.", style="dim")


FLAT = ("card", "mode", "tp", "pp", "ep", "dp", "replicas", "prefill_workers", "decode_workers", "cards_total", "nodes",
        "batch_per_replica", "output_tok_s_per_gpu", "output_tok_s_total", "tok_s_per_user", "ttft_s", "tpot_s",
        "meets_slo", "ttft_wait_s", "ttft_p95_s", "tpot_s_low", "tpot_s_high", "ttft_s_low", "ttft_s_high", "watts",
        "cost_per_hour", "cost_per_month", "cost_per_mtok_out", "cards_cost", "why_not", "max_batch", "prefill_load",
        "gpu_util", "caveats")


def flat_rows(rows) -> list[dict]:
    out = []
    for r in rows:
        d = {k: getattr(r, k) for k in FLAT}
        d["caveats"] = "; ".join(r.caveats) or None  # one cell: what the catalog lacks that the row leans on
        d["other_mode"] = r.other.mode if r.other else None
        d["other_cards_total"] = r.other.cards_total if r.other else None
        out.append(d)
    return out


def render_fleet_csv(rows, currency: str | None = None) -> str:
    """One line a card; the cost columns' currency (the prices file's label, empty without prices) on each."""
    import csv
    import io

    buf = io.StringIO()
    data = flat_rows(rows)
    w = csv.DictWriter(buf, fieldnames=list(FLAT) + ["other_mode", "other_cards_total", "currency"],
                       lineterminator="\n")
    w.writeheader()
    for d in data:
        w.writerow({k: ("" if v is None else v) for k, v in {**d, "currency": currency}.items()})
    return buf.getvalue()


def _load(w) -> str:
    """The workload's load as the title says it: users (one user) or requests a second."""
    return f"{w.users:,} user{'s' if w.users != 1 else ''}" if w.users is not None else f"{w.rate:,g} requests/s"


def _targets(w) -> str:
    return ", ".join(x for x in (f"TTFT <= {w.ttft_s:g} s" if w.ttft_s else "",
                                 f"TPOT <= {w.tpot_s * 1000:.3g} ms" if w.tpot_s else "") if x) or "no targets"


def render_fleet_markdown(model, w, runtime, currency, rows, kv_dtype: str = "bf16") -> str:
    load = _load(w)
    cur = currency or "cost"
    from llmsize.render.markdown import md

    title = f"fleet: {model.name}, {_io_words(w)}, {load}, {_targets(w)} ({runtime}; {_setup(w, kv_dtype, rows)})"
    lines = [f"**{md(title)}"
             "**", "",
             f"| card | mode | tp (x pp) | cards | nodes | batch | tok/s per GPU | tok/s per user (band) | "
             f"TTFT s (band) | "
             f"TPOT ms (band) | kW | "
             f"{cur} per Mtok | {cur} per month | {cur} to buy | why not |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if r.replicas is None:
            lines.append(f"| {md(r.card)} | | | | | | | | | | | | | | {md(r.why_not)} |")
            continue
        mode = f"{r.prefill_workers}P{r.decode_workers}D" if r.mode == "disaggregated" else f"{r.replicas} x agg"
        cost = f"{r.cost_per_mtok_out:,.3f}" if r.cost_per_mtok_out is not None else ""
        month = f"{r.cost_per_month:,.0f}" if r.cost_per_month is not None else ""
        buy = f"{r.cards_cost:,.0f}" if r.cards_cost is not None else ""
        kw = f"{r.watts / 1000:,.1f}" if r.watts is not None else ""
        lines.append(f"| {md(r.card)} | {mode} | {_par(r)} | {r.cards_total:,} | {r.nodes:,} | {r.batch_per_replica} | "
                     f"{r.output_tok_s_per_gpu:,.0f} | {' | '.join(_latency_cells(r))} | {kw} | {cost} | {month} | "
                     f"{buy} | |")
    notes = _caveat_lines(rows)
    return "\n".join(lines + ([""] + [f"- {md(n)}" for n in notes] if notes else [])) + "\n"


X_PARETO = "tokens/s per user (decode)"
Y_PARETO = "output tokens/s per GPU"


def _chosen(rows, curves) -> list[tuple[str, list[tuple[float, float]], str]]:
    """The rows the table chose, as points beside the curves they were picked from: without --spec a row sits on
    or under its card's curve (a curve's P/D points take prefill workers in fractions, rate-matched; a row's are
    whole); the curves are of plain decoding, so a row that decodes speculatively may sit above them."""
    charted = {c.card for c in curves}
    pts = [(r.tok_s_per_user, r.output_tok_s_per_gpu) for r in rows or []
           if r.meets_slo and r.card in charted and r.tok_s_per_user and r.output_tok_s_per_gpu]
    return [("the rows chosen", pts, "points")] if pts else []


def chart_note(charted: int, served: int) -> str | None:
    """What a chart of the best cards leaves out (fleet.charted_cards), None where it draws every card that serves."""
    if served <= charted:
        return None
    return f"charted: the best {charted} of {served} cards that serve (the table's order); --gpus picks others"


def pareto_text(model, curves, tpot_target_s: float | None, width: int = 100, spec=None, rows=None) -> str:
    from llmsize.render.ascii_chart import plot

    series = [(c.label, c.points, "line") for c in curves] + _chosen(rows, curves)
    if tpot_target_s and curves:
        ys = [y for c in curves for _, y in c.points]
        series.append((f"target {1 / tpot_target_s:.3g} tok/s per user", [(1 / tpot_target_s, min(ys)),
                                                                         (1 / tpot_target_s, max(ys))], "line"))
    return plot(series, f"Pareto: {model.name}, per card ({_modes(curves, spec)})", X_PARETO, Y_PARETO, width=width)


def _modes(curves, spec=None) -> str:
    """The chart's modes, and where the rows decode speculatively, that its curves do not (plain decoding)."""
    modes = ("aggregated; P/D: disaggregated, prefill workers included"
             if any(c.mode == "disaggregated" for c in curves) else "aggregated serving")
    return modes + (f"; plain decoding, the rows with speculative {spec.label}" if spec is not None else "")


def pareto_image(model, curves, tpot_target_s: float | None, path, spec=None, rows=None) -> None:
    from llmsize.render.charts import finish_log_axes, pyplot_for, save_figure

    plt = pyplot_for(path)
    fig, ax = plt.subplots(figsize=(8, 5.2))
    colours = {card: f"C{i % 10}" for i, card in enumerate(dict.fromkeys(c.card for c in curves))}
    for c in curves:
        xs, ys = zip(*c.points)
        ax.plot(xs, ys, marker="o", markersize=3, color=colours[c.card], label=c.label,
                linestyle="--" if c.mode == "disaggregated" else "-")
    for label, pts, _ in _chosen(rows, curves):
        xs, ys = zip(*pts)
        ax.plot(xs, ys, linestyle="none", marker="*", markersize=11, color="k", label=label)
    if tpot_target_s:
        ax.axvline(1 / tpot_target_s, color="k", linestyle="--", linewidth=1,
                   label=f"target {1 / tpot_target_s:.3g} tok/s per user")
    finish_log_axes(ax, X_PARETO, Y_PARETO, f"Pareto: {model.name}"
                    + (f" (plain decoding; the rows: speculative {spec.label})" if spec is not None else ""), 7)
    save_figure(fig, plt, path)


def render_fleet_html(model, w, runtime, currency, rows, curves, roofs, kv_dtype: str = "bf16") -> str:
    """The page `fleet --format html` writes: the workload, the rows, the Pareto chart of the cards that serve it
    (the target drawn), their rooflines with the model's points, the assumptions."""
    from llmsize.render.html_page import Section, page
    from llmsize.render.svg_chart import svg_plot

    load = _load(w)
    work = [["prompt tokens (isl)", w.isl], ["answer tokens (osl)", w.osl], ["load", load],
            ["TTFT target (s)", w.ttft_s], ["TPOT target (ms)", None if w.tpot_s is None else w.tpot_s * 1000],
            ["shared prefix (fraction of prompt tokens)", w.shared_prefix], ["weights", w.quant],
            ["KV cache dtype", _kv_words(kv_dtype, rows)],
            ["speculative decoding", _spec_words(w) or "none"], ["runtime", runtime]]
    cost_col = f"{currency or 'cost'} per million output tokens"
    head = ["card", "mode", "tp (x pp)", "cards", "nodes", "batch per replica", "output tok/s per GPU",
            "tok/s per user (band)", "TTFT s (band)", "TPOT ms (band)", "meets targets", "watts", cost_col,
            f"{currency or 'cost'} per month", f"{currency or 'cost'} to buy the cards", "other mode (cards)",
            "why not"]
    body = []
    for r in rows:
        if r.replicas is None:
            body.append([r.card] + [None] * 15 + [r.why_not])
            continue
        mode = f"{r.prefill_workers}P{r.decode_workers}D" if r.mode == "disaggregated" else f"{r.replicas} x aggregated"
        other = f"{r.other.mode} ({r.other.cards_total:,})" if r.other else None
        body.append([r.card, mode, _par(r), r.cards_total, r.nodes, r.batch_per_replica, r.output_tok_s_per_gpu,
                     *_latency_cells(r), r.meets_slo, r.watts, r.cost_per_mtok_out, r.cost_per_month, r.cards_cost,
                     other, r.why_not])
    target = [(f"target {1 / w.tpot_s:.3g} tok/s per user", 1 / w.tpot_s)] if w.tpot_s else []
    note = chart_note(len({c.card for c in curves}), sum(1 for r in rows if r.meets_slo))
    charted = [note] if note else []
    pareto = svg_plot([(c.label, c.points, "line") for c in curves] + _chosen(rows, curves),
                      f"Pareto: {model.name}, per card ({_modes(curves, w.spec)})", X_PARETO, Y_PARETO, vlines=target)
    sections = [Section("Workload", tables=[(["input", "value"], work)]),
                Section("Cards, best first", tables=[(head, body)],
                        notes=["Cheapest an hour first with hourly prices, else cheapest to buy with a card's prices, "
                               "else fewest cards. GB = 10^9 B. "
                               f"A month: {HOURS_PER_MONTH} hours. Bands: the "
                               "expected-speed model's held-out p5-p95 of measured / predicted."]
                        + _caveat_lines(rows)),
                Section("Throughput per GPU against speed per user", charts=[pareto], notes=charted),
                Section("Rooflines", charts=[roofline_svg(model.name, roofs)], notes=charted),
                Section("Assumptions", notes=ASSUMPTIONS)]
    return page(f"llmsize fleet: {model.name}, {_io_words(w)}, {load}", sections,
                "Made by llmsize, offline: no scripts, nothing fetched.")


def roofline_svg(model_name: str, roofs) -> str:
    from llmsize.render.charts import X_ROOF, Y_ROOF, roof_series
    from llmsize.render.svg_chart import svg_plot

    return svg_plot(roof_series(model_name, roofs), f"Roofline: {model_name} decode (batch 1, 2, 4 ...) and prefill",
                    X_ROOF, Y_ROOF, color_group=2)
