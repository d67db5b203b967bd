"""`llmsize roofline` and `llmsize kv`: a model's roofline on cards, and its KV cache against context."""

from __future__ import annotations

import sys

from llmsize.commands.shared import load_catalog, make_console, model_default_context, named_model, print_json
from llmsize.errors import InvalidValueError
from llmsize.options import (
    CatalogOpt,
    ChartOutOpt,
    ContextOpt,
    EstimateOnlyOpt,
    GpusOpt,
    HubFileOpt,
    HubOpt,
    JsonOpt,
    KvDtypeOpt,
    KvUsersOpt,
    MaxBatchOpt,
    MaxContextOpt,
    ModelArg,
    QuantNoRuntimeOpt,
)


def roofline(
    model: ModelArg = None,
    gpu: GpusOpt = None,
    output: ChartOutOpt = None,
    quant: QuantNoRuntimeOpt = None,
    kv_dtype: KvDtypeOpt = "bf16",
    context: ContextOpt = None,
    max_batch: MaxBatchOpt = 1024,
    as_json: JsonOpt = False,
    hub: HubOpt = None,
    hub_file: HubFileOpt = None,
    estimate_only: EstimateOnlyOpt = False,
    catalog: CatalogOpt = None,
):
    """Roofline of one or more cards with the model's decode points (batch 1...N) and its prefill point.

    Examples:

    \b
      llmsize roofline gemma-4-12b --gpu rtx5060ti --gpu h200
      llmsize roofline llama-3.1-8b --gpu h100 -o roofline.svg
    """
    from llmsize.estimate.charts import roofline as roof_data
    from llmsize.estimate.plan import PlanInputs, beyond_positions_note
    from llmsize.render import charts

    if not gpu:
        raise InvalidValueError("Missing option --gpu.", "Name one or more cards: --gpu h100 --gpu h200.")
    _one_output(as_json, output)
    if output is not None:
        charts.check_image_path(output)
    cat = load_catalog(catalog)
    m = named_model(cat, model, hub, estimate_only, hub_file, command="roofline")
    context, why = model_default_context(m) if context is None else (context, beyond_positions_note(m, context))
    inputs = PlanInputs(quant=quant, kv_dtype=kv_dtype.lower(), context_tokens=context)
    names = [n.strip() for g in gpu for n in g.split(",")]
    if not all(names):
        raise InvalidValueError(f"--gpu `{','.join(gpu)}` names an empty card.",
                                "Give card ids, e.g. --gpus h100,h200.")
    cards = list({c.id: c for c in (cat.gpu(n) for n in names)}.values())  # a card named twice (or by an alias) once
    roofs = [roof_data(m, c, inputs, max_batch) for c in cards]
    if as_json:
        print_json({**charts.roofline_json(m.id, inputs, roofs), "notes": [why] if why else []})
    elif output is None:
        sys.stdout.write(charts.roofline_text(m.name, roofs, width=make_console().width) + "\n"
                         + (f"Note: {why}\n" if why else ""))
    else:
        charts.roofline_image(m.name, roofs, output)
        sys.stderr.write((f"Note: {why}\n" if why else "") + f"Wrote {output}\n")


def kv(
    model: ModelArg = None,
    output: ChartOutOpt = None,
    quant: QuantNoRuntimeOpt = None,
    users: KvUsersOpt = 1,
    max_context: MaxContextOpt = None,
    as_json: JsonOpt = False,
    hub: HubOpt = None,
    hub_file: HubFileOpt = None,
    estimate_only: EstimateOnlyOpt = False,
    catalog: CatalogOpt = None,
):
    """KV cache against context for each KV dtype, with the weights as a line: where the cache overtakes
    the weights.

    Examples:

    \b
      llmsize kv llama-3.1-8b
      llmsize kv llama-3-8b --users 32 --max-context 32768
      llmsize kv gemma-4-12b -o kv.png
    """
    from llmsize.estimate.charts import KV_DTYPES, contexts_up_to, crossover_tokens, kv_curves
    from llmsize.estimate.plan import resolve_format
    from llmsize.estimate.weights import weight_bytes
    from llmsize.render import charts

    _one_output(as_json, output)
    if output is not None:
        charts.check_image_path(output)
    cat = load_catalog(catalog)
    m = named_model(cat, model, hub, estimate_only, hub_file, command="kv")
    limit = max_context or m.max_position_embeddings
    if limit < 2:
        raise InvalidValueError(f"The model's max_position_embeddings ({limit}) leaves no context axis.",
                                "Pass --max-context 2 or more.")
    fmt, scope = resolve_format(m, quant, None)
    w = weight_bytes(m, fmt, scope).bytes_total
    curves = kv_curves(m, contexts_up_to(limit, start=min(256, limit // 2)), users=users)
    cross = {dt: crossover_tokens(m, dt, w, users, limit) for dt in KV_DTYPES}
    beyond = (f"--max-context {limit:,} runs past {m.name}'s {m.max_position_embeddings:,} positions: the cache is "
              "priced there, the model was not trained so far" if limit > m.max_position_embeddings else None)
    if as_json:
        print_json(charts.kv_json(m.id, fmt.id, w, users, curves, cross) | {
            "max_position_embeddings": m.max_position_embeddings, "beyond_positions": beyond})
    elif output is None:
        import textwrap

        width = make_console().width
        sys.stdout.write(charts.kv_text(m.name, curves, w, fmt.id, cross, width=width, users=users) + "\n"
                         + (textwrap.fill(f"note: {beyond}", max(width, 20)) + "\n" if beyond else ""))
    else:
        charts.kv_image(m.name, curves, w, fmt.id, output, users=users)
        sys.stderr.write(f"Wrote {output}\n")


def _one_output(as_json: bool, output) -> None:
    """--json prints the data, -o writes the image: one output a command."""
    if as_json and output is not None:
        raise InvalidValueError("--json and -o ask for two outputs.", "Give one of them.")
