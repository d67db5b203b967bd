"""`llmsize compare`: the cards ranked for one model."""

from __future__ import annotations

import sys

from llmsize.commands.shared import (
    NODE_LINK_GB_S,
    WIDE_WIDTH,
    card_prices,
    filtered_cards,
    gib_bytes,
    load_catalog,
    make_console,
    model_default_context,
    named_model,
    one_format,
    pipeline_stages,
    print_json,
    refuse_cache,
)
from llmsize.errors import InvalidValueError
from llmsize.options import (
    BackendOpt,
    CatalogOpt,
    CompareFormatOpt,
    CompareSortOpt,
    ContextOpt,
    EstimateOnlyOpt,
    GpuListOpt,
    GpuUtilOpt,
    HubFileOpt,
    HubOpt,
    JsonOpt,
    KvDtypeOpt,
    LanguageModelOnlyOpt,
    ModelArg,
    NodeLinkOpt,
    NodesOpt,
    OverheadOpt,
    PpOpt,
    PricesOpt,
    QuantOpt,
    RuntimeOpt,
    SegmentOpt,
    TpAutoOpt,
    UsersOpt,
    VendorOpt,
)


def compare(
    model: ModelArg = None,
    gpus_: GpuListOpt = None,
    vendor: VendorOpt = None,
    segment: SegmentOpt = None,
    quant: QuantOpt = None,
    kv_dtype: KvDtypeOpt = "bf16",
    context: ContextOpt = None,
    users: UsersOpt = 1,
    gpu_util: GpuUtilOpt = None,
    overhead_gib: OverheadOpt = None,
    tp: TpAutoOpt = None,
    pp: PpOpt = None,
    nodes: NodesOpt = None,
    node_link_gb_s: NodeLinkOpt = NODE_LINK_GB_S,
    prices: PricesOpt = None,
    runtime: RuntimeOpt = None,
    gpu_backend: BackendOpt = None,
    language_model_only: LanguageModelOnlyOpt = False,
    sort: CompareSortOpt = "aggregate_tok_s",
    fmt: CompareFormatOpt = "table",
    as_json: JsonOpt = False,
    hub: HubOpt = None,
    hub_file: HubFileOpt = None,
    estimate_only: EstimateOnlyOpt = False,
    catalog: CatalogOpt = None,
):
    """Rank cards for one model by what matters for decode: fit, bandwidth, speed, watts, cost.

    A card that cannot hold the model alone is costed on the fewest cards that can (tensor/pipeline
    parallel), and the row says how many.

    Examples:

    \b
      llmsize compare gemma-4-12b --vendor nvidia --segment consumer
      llmsize compare llama-3.1-70b --gpus h100,h200,b200,mi300x --users 32 --sort tok_s_per_w
      llmsize compare qwen3-30b-a3b --prices prices.yaml --sort tok_s_per_kcurrency --format csv
    """
    fmt = one_format(as_json, fmt)
    if sort in ("price", "cost", "tok_s_per_kcurrency") and prices is None:
        raise InvalidValueError(f"--sort {sort} ranks by the prices --prices reads, and none were given (none are "
                                "shipped).", "Add --prices prices.yaml (`prices:` card id -> price), or sort by "
                                "another column.")
    from llmsize.estimate.runtimes import check_backend

    check_backend(gpu_backend, runtime)  # before any work: Vulkan under a runtime without one
    from llmsize.estimate.compare import compare as run_compare
    from llmsize.estimate.compare import sort_rows
    from llmsize.estimate.plan import PlanInputs

    cat = load_catalog(catalog)
    m = named_model(cat, model, hub, estimate_only, hub_file, command="compare")
    context_given = context is not None
    context = model_default_context(m)[0] if context is None else context
    pulled = None
    if quant is None and not hub:  # a catalog model under Ollama or LM Studio: the GGUF their library pulls
        from llmsize.estimate.plan import library_quant

        quant, pulled = library_quant(runtime, m)
    check_backend(gpu_backend, runtime, fmt_id=quant or m.release.quant)
    from llmsize.estimate.runtimes import not_on, resolve_runtime

    rid = resolve_runtime(runtime)[0] if runtime else None
    if rid:  # one runtime for every row: a cache it cannot store sizes nothing it runs
        refuse_cache(rid, f"--runtime {runtime}", kv_dtype)
    cards = filtered_cards(cat, gpus_, vendor, segment)
    if rid:  # every row's expected figure would be missing: the runtime, or the cards
        refusals = [(g.id, not_on(rid, g)) for g in cards]
        if all(why for _, why in refusals):
            raise InvalidValueError(f"--runtime {runtime}: no card compared runs it ({refusals[0][0]}: "
                                    f"{refusals[0][1]}).", "Give another --runtime, or --gpus it runs on.")
    currency, price_map = card_prices(prices, cat, cards) if prices is not None else (None, {})
    stages = pipeline_stages(pp, nodes, node_link_gb_s)
    inputs = PlanInputs(quant=quant, kv_dtype=kv_dtype.lower(), context_tokens=context, gpu_util=gpu_util,
                        overhead_bytes=gib_bytes(overhead_gib), tp=tp or 1, pp=stages, nodes=nodes,
                        node_link_gb_s=node_link_gb_s, runtime=runtime.lower() if runtime else None,
                        backend=gpu_backend, language_model_only=language_model_only)
    fixed = tp is not None or stages > 1
    runtimes = cat.runtimes.by_id()
    rows = sort_rows(run_compare(m, cards, inputs, users, price_map, fixed=fixed, runtimes=runtimes,
                                 runtime=runtime), sort)
    title = (f"llmsize compare: {m.name}, {rows[0].plan.fmt.id if rows[0].plan else quant or m.release.quant}, "
             f"{context:,} tokens, {users:,} user{'s' if users != 1 else ''}")
    notes = ["Units: GB = 10^9 B, GiB = 2^30 B. GiB: every card's vendor capacity read the same way (a \"24 GB\" "
             "card holds 24 GiB of DRAM; drivers report up to 6.3% less, ECC's share on an A10, L4, L40S or T4). "
             "A card that cannot hold the model alone is "
             "costed on `cards` of it (tensor/pipeline parallel); TTFT is for a --context-token prompt; tok/s/W "
             "uses the catalog TDP x cards."]
    notes += [pulled + "."] if pulled else []
    utils = sorted({r.plan.budget.gpu_util for r in rows if r.plan})
    if inputs.gpu_util is None and len(utils) > 1:
        notes.append("Budgets: VRAM x 0.9 under the serving engines (their own ledgers take each engine's default), "
                     "the whole VRAM under llama.cpp (GGUF formats, Apple cards), as each card's runtime reserves it.")
    if gpu_backend:
        notes.append(f"Expected speeds on --backend {gpu_backend}" + (
            ": llama.cpp's Vulkan build, on NVIDIA and AMD cards (- on Apple cards, where it runs on Metal, on AMD "
            "Instinct cards, which AMD's Vulkan drivers do not run, and on Intel Arc cards, not fitted yet)."
            if gpu_backend == "vulkan" else ": - on cards whose own backend it is not."))
    beyond = next((n for r in rows if r.plan for n in r.plan.notes if n.startswith("--context ")), None)
    if beyond:  # the plan's own note: the figures are for a context the model's engines refuse
        notes.append(beyond + ".")
    # one workload for every row, where Ollama's own num_ctx is each card's
    if (runtime or "").strip().lower() == "ollama" and not context_given:
        from llmsize.estimate.llamacpp_options import OLLAMA_NUM_CTX_RULE

        notes.append(f"Context: {context:,} tokens on every card; Ollama's own num_ctx when none is set depends on the "
                     f"card ({OLLAMA_NUM_CTX_RULE}; `plan --runtime ollama` sizes the card's): --context sets one "
                     "for all.")
    served = {r.users_served for r in rows if r.plan}
    if any(s < users for s in served):
        notes.append(f"Rows whose cache holds fewer than {users} sequences are aggregated at what it holds: each row "
                     "is the fewest cards that hold the weights, and its per-watt and per-price figures are those "
                     "cards'; `--tp N` prices more cards of each, `fleet --users` the cards the users need.")
    staged = [r for r in rows if r.tensor_cards]  # the fewest cards, on stages a serving engine's token crosses
    if staged:
        named = "; ".join(f"{r.gpu.id} {r.cards} cards as tp {r.tp} x pp {r.pp}, a tensor split {r.tensor_cards} "
                          f"(--tp {r.tensor_cards} --pp 1)" for r in staged[:4])
        notes.append("Pipeline stages decode one after another: a batch-1 token reads each stage's weights in turn, "
                     "one card's bandwidth over the whole model, so the batch-1 figures of a row on stages are below "
                     f"a tensor split's: {named}" + (f"; {len(staged) - 4} more (tensor_cards in --json)"
                                                      if len(staged) > 4 else "") + ".")
    short = [r for r in rows if r.ledger_short]
    if short:  # the rows' max ctx and seqs are the generic budget's; the engine's own ledger holds far less
        notes.append("max ctx and seqs are the plan's budget; " + "; ".join(f"on {r.gpu.id}, {r.ledger_short}"
                                                                             for r in short[:3])
                     + (f"; {len(short) - 3} more (ledger_short in --json)" if len(short) > 3 else "")
                     + " (`plan MODEL --gpu CARD --engine ENGINE` itemizes it).")
    if fmt == "json":
        from llmsize.render.compare_table import rows_to_dicts

        print_json({"model": m.id, "inputs": {"quant": quant, "kv_dtype": kv_dtype, "context_tokens": context,
                                               "users": users, "gpu_util": gpu_util, "sort": sort,
                                               "currency": currency, "runtime": runtime, "backend": gpu_backend},
                     "rows": rows_to_dicts(rows), "notes": notes})
    elif fmt == "csv":
        from llmsize.render.compare_table import render_csv

        sys.stdout.write(render_csv(rows, currency))
    elif fmt == "markdown":
        from llmsize.render.compare_table import render_markdown

        sys.stdout.write(render_markdown(rows, currency, title, notes))
    elif fmt == "html":
        from dataclasses import replace as _replace

        from llmsize.estimate.charts import rooflines
        from llmsize.render.compare_table import render_html

        roofs = rooflines(m, [(r.gpu, _replace(inputs, tp=r.tp, pp=r.pp)) for r in rows if r.plan][:4])
        sys.stdout.write(render_html(rows, currency, title, notes, roofs))
    else:
        from llmsize.render.compare_table import render_table

        render_table(rows, currency, title, notes, make_console(WIDE_WIDTH))
