"""`llmsize fleet`: the fewest cards that serve a workload within its targets, per card."""

from __future__ import annotations

import math
import sys
from dataclasses import replace

from llmsize.commands.shared import (
    NODE_LINK_GB_S,
    WIDE_WIDTH,
    filtered_cards,
    fleet_prices,
    load_catalog,
    make_console,
    named_model,
    one_format,
    print_json,
    refuse_cache,
    term_width,
)
from llmsize.errors import InvalidValueError
from llmsize.options import (
    CatalogOpt,
    ChartOutOpt,
    EstimateOnlyOpt,
    FleetEmitOpt,
    FleetFormatOpt,
    FleetUsersOpt,
    GpuListOpt,
    IslOpt,
    JsonOpt,
    KvDtypeOpt,
    LanguageModelOnlyOpt,
    ModelArg,
    ModeOpt,
    NodeLinkOpt,
    OslOpt,
    ParetoOpt,
    PricesOpt,
    QuantOpt,
    RateOpt,
    RuntimeOpt,
    SegmentOpt,
    SharedPrefixOpt,
    SimulateOpt,
    SpecOpt,
    TokSPerUserOpt,
    TpotOpt,
    TtftOpt,
    VendorOpt,
)


def _no_card_serves(rows, w, mode: str | None = None, what: str = "") -> InvalidValueError:
    """The one line for a workload no card serves (within its targets, in --mode's mode): the card that comes closest
    (the smallest got / target of its closest miss, estimate/fleet.Miss; the first card where none is a miss of a
    target) and its why_not."""
    missed = [r for r in rows if r.why_not]
    closest = min(missed, key=lambda r: getattr(r.why_not, "ratio", math.inf), default=None)
    why = f" ({closest.card}: {closest.why_not})" if closest else ""
    targets = w.ttft_s is not None or w.tpot_s is not None
    return InvalidValueError(f"No card serves the workload{' ' + mode if mode else ''}{what}{why}.",
                             ("Loosen --ttft / --tpot, widen --gpus" if targets else "Widen --gpus")
                             + (", or drop --mode." if mode else ", lower the load, or drop --spec." if w.spec
                                else ", or lower the load."))


def fleet(
    model: ModelArg = None,
    isl: IslOpt = "3000",
    osl: OslOpt = "500",
    users: FleetUsersOpt = None,
    rate: RateOpt = None,
    ttft: TtftOpt = None,
    tpot: TpotOpt = None,
    tok_s_per_user: TokSPerUserOpt = None,
    shared_prefix: SharedPrefixOpt = 0.0,
    spec: SpecOpt = None,
    gpus_: GpuListOpt = None,
    vendor: VendorOpt = None,
    segment: SegmentOpt = None,
    prices: PricesOpt = None,
    runtime: RuntimeOpt = None,
    quant: QuantOpt = None,
    kv_dtype: KvDtypeOpt = None,
    language_model_only: LanguageModelOnlyOpt = False,
    node_link_gb_s: NodeLinkOpt = NODE_LINK_GB_S,
    emit: FleetEmitOpt = None,
    mode: ModeOpt = None,
    pareto: ParetoOpt = False,
    simulate: SimulateOpt = False,
    output: ChartOutOpt = None,
    fmt: FleetFormatOpt = "table",
    as_json: JsonOpt = False,
    estimate_only: EstimateOnlyOpt = False,
    catalog: CatalogOpt = None,
):
    """Size a deployment: per card, the fewest cards (replicas x tensor parallel) that serve the workload within
    its targets, with throughput, latency, watts and cost: aggregated serving, or disaggregated prefill and decode
    workers (xPyD) where that needs fewer cards or costs less.

    Examples:

    \b
      llmsize fleet llama-3.1-70b --isl 3000 --osl 500 --users 400 --ttft 2s --tok-s-per-user 30
      llmsize fleet qwen3-30b-a3b --rate 20 --tpot 33ms --gpus h100,h200,b200,rtx5090 --prices prices.yaml --json
      llmsize fleet llama-3.1-70b --users 400 --tok-s-per-user 30 --gpus b200 --emit sglang
      llmsize fleet llama-3.1-70b --users 400 --ttft 2s --tpot 33ms --format html > fleet.html
      llmsize fleet llama-3.1-70b --users 400 --tok-s-per-user 30 --quant fp8 --gpus h100,h200,b200
      llmsize fleet qwen3-30b-a3b --users 200 --isl 3000:p95=12000 --osl 500 --gpus h100-sxm --simulate
    """
    from llmsize.estimate.fleet import fleet_rows
    from llmsize.estimate.workload import workload_from_options

    # the options alone, before any file is read
    if tpot is not None and tok_s_per_user is not None:
        raise InvalidValueError("--tpot and --tok-s-per-user say the same thing.", "Give one of them.")
    if output is not None:
        from llmsize.render.charts import check_image_path

        check_image_path(output)
    fmt = one_format(as_json, fmt)
    _refuse_view_pairs(fmt, output, pareto, simulate, mode, emit)
    # the model, the cache, the cards and their prices, the workload
    cat = load_catalog(catalog)
    if not model:
        raise InvalidValueError("Missing the model.", "e.g. `llmsize fleet llama-3.1-70b --users 100`.")
    m = named_model(cat, model, estimate_only=estimate_only)
    from llmsize.estimate.quant import kv_dtype_bytes

    if kv_dtype is not None:
        kv_dtype_bytes(kv_dtype)  # an unknown KV dtype is refused before any work
        kv_dtype = kv_dtype.lower()
    cards = filtered_cards(cat, gpus_, vendor, segment)
    currency, hourly, bought = fleet_prices(prices, cat, cards) if prices is not None else (None, None, None)
    w = replace(workload_from_options(isl, osl, users, rate, ttft, tpot, tok_s_per_user, shared_prefix, spec, cat,
                                      node_link_gb_s), language_model_only=language_model_only)
    # the runtime, the weights it loads, the rows
    rid, w, kv_shown = _fleet_runtime(runtime, emit, cards, m, quant, kv_dtype, w, cat)
    if w.spec is not None:  # a runtime (or a GGUF's weights) that cannot draft with the MTP module, refused
        from llmsize.estimate.quant import quant_format
        from llmsize.estimate.runtimes import is_gguf
        from llmsize.estimate.speculative import check_mtp_runtime

        check_mtp_runtime(w.spec, rid, m, is_gguf(quant_format(w.quant)))
    runtimes = cat.runtimes.by_id()
    rows = fleet_rows(m, cards, w, rid, runtimes, hourly, kv_dtype, bought)
    if emit is not None:
        sys.stdout.write(_launch_line(rows, m, w, emit, mode, kv_shown) + "\n")
        return
    served = any(r.meets_slo for r in rows)
    if not served and fmt not in ("json", "csv"):
        # nothing to tabulate: the report would be empty (JSON and CSV keep each card's why_not for scripts)
        raise _no_card_serves(rows, w)
    sims = None
    if simulate:
        from llmsize.estimate.fleet_simulation import simulate_rows

        sims = simulate_rows(m, cards, rows, w, rid, runtimes, kv_dtype)
    _print_fleet(fmt, m, w, rid, currency, rows, sims, kv_shown, cards, runtimes)
    if not served:  # JSON and CSV printed each card's why_not; the exit code and line are the table's
        raise _no_card_serves(rows, w)
    if pareto or output is not None:
        _pareto(m, w, rid, rows, cards, runtimes, kv_dtype, output, pareto and fmt == "table")


def _refuse_view_pairs(fmt: str, output, pareto: bool, simulate: bool, mode, emit) -> None:
    """Views that do not combine (a chart outside the table, --simulate beside a launch line, --mode without
    one), refused before any work."""
    if pareto and output is None and fmt != "table":  # with -o the chart goes to its file
        raise InvalidValueError("--pareto draws its chart in the table view.", "Drop --json / --format, or write "
                                "the chart to a file with -o pareto.svg.")
    if simulate and (emit is not None or fmt not in ("table", "json")):
        raise InvalidValueError("--simulate adds to the table and the JSON views.", "Drop --emit / --format csv|"
                                "markdown|html, or run --simulate in a second command.")
    if mode is not None and emit is None:
        raise InvalidValueError(f"--mode {mode} chooses the launch lines --emit prints.", "Add --emit vllm or sglang.")
    if emit is not None and (output is not None or pareto or fmt != "table"):
        raise InvalidValueError("--emit prints launch lines: it does not combine with --format, --json, --pareto "
                                "or -o.", "Run --emit on its own, and the report in a second command.")


def _fleet_runtime(runtime, emit, cards: list, m, quant, kv_dtype: str | None, w, cat):
    """(the runtime the rows are sized for, the workload with the weights' format it loads, the cache's dtype the
    report names: --kv-dtype, else the runtime's own, fp16 under llama.cpp, where a row says when its card keeps
    another): --runtime, else the cards' default; refused where
    --emit names another, where it does not load the weights or store the cache, and where no card sized runs
    it."""
    from llmsize.estimate.fleet import default_runtime, runtime_refusal
    from llmsize.estimate.plan import check_kv_dtype, check_recipe_parts, resolve_format
    from llmsize.estimate.quant import RUNTIME_FORMATS, runtime_load_refusal
    from llmsize.estimate.runtimes import resolve_runtime, runtime_kv_dtype

    fmt = resolve_format(m, quant, None)[0]
    check_recipe_parts(m, fmt)  # once, not as every card's reason for no row
    weights = fmt.id
    rid = resolve_runtime(runtime)[0] if runtime else default_runtime(emit, cards, weights)
    if emit is not None and rid != emit:
        raise InvalidValueError(f"--emit {emit} prints {emit}'s launch lines, and the rows are sized for {rid}.",
                                f"Give --runtime {emit} (NVIDIA and AMD cards), or drop --emit.")
    refusal = runtime_load_refusal(rid, weights)
    if refusal is not None:  # the format given, or the model's release where none was
        said = f"--quant {weights}" if quant else f"{m.id}'s release format, {weights} (no --quant given)"
        chosen = f"--runtime {rid}" if runtime else f"{rid} (the runtime these cards run by default)"
        raise InvalidValueError(f"{said}, under {chosen}: {refusal}.", f"Give --quant in a format {rid} serves (e.g. "
                                f"{', '.join(RUNTIME_FORMATS.get(rid, ()))}), or another --runtime.")
    shown = kv_dtype or runtime_kv_dtype(rid, m, fmt.id)
    check_kv_dtype(m, shown)  # the model's layers, once, not as every card's reason for no row
    # rows sized with a cache the engine cannot be launched with
    refuse_cache(rid, f"--runtime {rid}" + ("" if runtime else " (the default)"), shown, "another --runtime")
    by_runtime = cat.runtimes.by_id()
    refusals = [(g.id, runtime_refusal(rid, by_runtime, g)) for g in cards]
    if all(why for _, why in refusals):  # no load or target would change it: the runtime, or the cards
        other = any(runtime_refusal(r, by_runtime, g) is None for r in by_runtime if r != rid for g in cards)
        raise InvalidValueError(f"--runtime {rid}{'' if runtime else ' (the default)'}: no card sized runs it "
                                f"({refusals[0][0]}: {refusals[0][1]}).",
                                "Give another --runtime, or --gpus it runs on." if other else
                                "No runtime here is fitted on these cards: give --gpus of NVIDIA, AMD or Apple "
                                "cards.")
    return rid, replace(w, quant=weights), shown


def _launch_line(rows, m, w, emit: str, mode, kv_dtype: str) -> str:
    """--emit's launch lines for the best card's row, or with --mode its configuration of that mode (the row or the
    other beside it); refused where no card serves."""
    from llmsize.render.emit_fleet import fleet_command

    top = next((r for r in rows if r.meets_slo), None)
    if top is not None and mode is not None and top.mode != mode:
        top = top.other if top.other is not None and top.other.meets_slo and top.other.mode == mode else None
    if top is None:
        raise _no_card_serves(rows, w, mode, ": nothing to launch")
    return fleet_command(m, top, emit, w.longest_tokens(), top.kv_dtype or kv_dtype, w.spec, w.quant,
                         w.language_model_only)


def _print_fleet(fmt: str, m, w, rid: str, currency, rows, sims, kv_dtype: str, cards: list, runtimes) -> None:
    """The rows on the standard output: JSON, an HTML page, CSV, Markdown, or the table (and --simulate's)."""
    from llmsize.render.fleet_report import fleet_to_dict, render_fleet

    if fmt == "json":
        print_json(fleet_to_dict(m, w, rid, currency, rows, sims, kv_dtype))
    elif fmt == "html":
        from llmsize.estimate.fleet import fleet_charts
        from llmsize.render.fleet_report import render_fleet_html

        curves, roofs = fleet_charts(m, cards, rows, w, rid, runtimes, kv_dtype)
        sys.stdout.write(render_fleet_html(m, w, rid, currency, rows, curves, roofs, kv_dtype))
    elif fmt == "csv":
        from llmsize.render.fleet_report import render_fleet_csv

        sys.stdout.write(render_fleet_csv(rows, currency))
    elif fmt == "markdown":
        from llmsize.render.fleet_report import render_fleet_markdown

        sys.stdout.write(render_fleet_markdown(m, w, rid, currency, rows, kv_dtype))
    else:
        render_fleet(m, w, rid, currency, rows, make_console(WIDE_WIDTH), kv_dtype)
        if sims:
            from llmsize.render.fleet_report import render_simulated

            render_simulated(sims, make_console())


def _pareto(m, w, rid: str, rows, cards: list, runtimes, kv_dtype: str, output, in_table: bool) -> None:
    """The Pareto front of the cards that serve: an image at -o `output`, and with `in_table` as text."""
    from llmsize.estimate.fleet import charted_cards, pareto_curves
    from llmsize.render.fleet_report import chart_note, pareto_image, pareto_text

    charted, n_served = charted_cards(rows, cards)
    curves = pareto_curves(m, charted, w, rid, runtimes, kv_dtype)
    if not curves:
        sys.stderr.write("no card serves this workload within its targets: no Pareto front to draw"
                         + (f" ({output} not written)" if output is not None else "") + "\n")
        return
    note = chart_note(len(charted), n_served)
    if output is not None:
        pareto_image(m, curves, w.tpot_s, output, w.spec, rows)
        sys.stderr.write(f"Wrote {output}" + (f" ({note})" if note else "") + "\n")
    if in_table:
        sys.stdout.write(pareto_text(m, curves, w.tpot_s, term_width(), w.spec, rows) + "\n"
                         + (f"{note}\n" if note else ""))
