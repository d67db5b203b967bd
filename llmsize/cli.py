"""The command line: parse -> load -> estimate -> render. No arithmetic here; torch is never imported."""

from __future__ import annotations

import json
import os
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer

from llmsize import __version__
from llmsize.errors import ExitStatus, InvalidValueError, LlmsizeError
from llmsize.units import GiB

# typer vendors click in recent releases and re-exports only some of its exceptions: find the two
# base classes through BadParameter so this works with either layout.
_UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

_APP_SETTINGS = dict(
    name="llmsize",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
_COMMANDS: list[tuple[str | None, object]] = []  # (name, function) in help order
_ROOT: list = []


def _command(name: str | None = None):
    """Record a command; build_app() registers them (all, or only the one being run: typer converts every
    registered command's options at start-up, which a one-command run need not pay for)."""
    def record(fn):
        _COMMANDS.append((name, fn))
        return fn
    return record


def build_app(only: str | None = None) -> typer.Typer:
    app = typer.Typer(**_APP_SETTINGS)
    app.callback()(_ROOT[0])
    for name, fn in _COMMANDS:
        cmd = name or fn.__name__.rstrip("_")
        if only is None or cmd == only:
            app.command(name)(fn)
    return app

CatalogOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--catalog", help="Extra catalog folder (holding hardware/ and/or models/); repeatable. "
                 "Also read from $LLMSIZE_CATALOG.", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]


def _width() -> int:
    return min(shutil.get_terminal_size((100, 24)).columns, 100)


def _console():
    from rich.console import Console

    width = min(shutil.get_terminal_size((100, 24)).columns, 100)
    return Console(width=width, highlight=False, soft_wrap=False)


def _catalog(dirs: list[Path] | None):
    from llmsize.catalog.loader import Catalog

    return Catalog(dirs)


def _print_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


def _version(value: bool):
    if value:
        typer.echo(f"llmsize {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
):
    """Size LLM inference: weights, KV cache, context, concurrency, decode ceiling, prefill, and why;
    then measure it on the card.

    Examples:

    \b
      llmsize plan gemma-4-12b --gpu rtx5060ti
      llmsize gpus --vendor nvidia --sort bandwidth
      llmsize models --mixer mla
      llmsize compare gemma-4-12b --vendor nvidia
      llmsize plan ./my-model-folder --gpu h200
      llmsize measure
      llmsize show h200
    """


_ROOT.append(_root)


@_command()
def plan(
    model: Annotated[Optional[str], typer.Argument(
        help="Model id or alias (see `llmsize models`), or a model folder (config.json + *.safetensors) or "
             "config.json path.", show_default=False)] = None,
    gpu: Annotated[str, typer.Option("--gpu", "-g", help="Card id or alias (see `llmsize gpus`).")] = "",
    hub: Annotated[Optional[str], typer.Option(help="Read ORG/NAME[@REVISION] from the Hugging Face Hub instead: "
                                               "config.json and the safetensors headers only (network, opt-in).",
                                               show_default=False)] = None,
    quant: Annotated[Optional[str], typer.Option(
        help="Weight format (see `llmsize formats`); default: the model's release format.")] = None,
    scope: Annotated[Optional[str], typer.Option(
        help="What the format quantizes: linear, experts or all; default: the release's or the format's.")] = None,
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="KV cache dtype: bf16, fp16, fp8, nvfp4, int8, fp32.")]
    = "bf16",
    context: Annotated[int, typer.Option(help="Tokens per sequence (prompt + output) for the KV cache and decode.")]
    = 4096,
    batch: Annotated[int, typer.Option(help="Sequences decoded together.")] = 1,
    prompt: Annotated[Optional[int], typer.Option(help="Prompt tokens for time to first token; default: --context.")]
    = None,
    gpu_util: Annotated[float, typer.Option("--gpu-util", help="Share of VRAM the engine may use, in (0, 1].")]
    = 0.90,
    overhead_gib: Annotated[float, typer.Option("--overhead-gib", help="Runtime overhead (activations, CUDA "
                                                "graphs, allocator), GiB.")] = 1.5,
    compute: Annotated[Optional[str], typer.Option(help="Compute precision for FLOP time: fp32, tf32, bf16, fp16, "
                                                   "fp8, int8, fp4; default: the format's native one if the card "
                                                   "has it, else bf16.")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel cards (splits heads, MLPs and the KV cache).")] = 1,
    pp: Annotated[Optional[int], typer.Option(help="Pipeline stages (splits the layers); default 1, or --nodes.",
                                              show_default=False)] = None,
    nodes: Annotated[Optional[int], typer.Option(help="Nodes: one pipeline stage per node, --tp within each "
                                                 "(sets --pp).", show_default=False)] = None,
    node_link_gb_s: Annotated[float, typer.Option("--node-link-gb-s", help="Bandwidth between nodes per GPU and "
                                                  "direction, GB/s (400 Gb/s NIC = 50).")] = 50.0,
    emit: Annotated[Optional[str], typer.Option(help="Print the serving command this plan corresponds to: vllm "
                                                "or sglang.", show_default=False)] = None,
    engine: Annotated[Optional[str], typer.Option(help="Predict this engine's own memory ledger and KV capacity: "
                                                  "vllm, sglang or trtllm (--gpu-util is its fraction).",
                                                  show_default=False)] = None,
    max_model_len: Annotated[Optional[int], typer.Option("--max-model-len", help="Engine max model length; "
                                                         "default: the model's.", show_default=False)] = None,
    max_num_batched_tokens: Annotated[Optional[int], typer.Option(
        "--max-num-batched-tokens", help="vLLM profiling batch; default: vLLM's for the version and card.",
        show_default=False)] = None,
    engine_version: Annotated[str, typer.Option("--engine-version", help="vLLM release you run (e.g. 0.20.0), "
                                                "or v1 (>= 0.21), v1-0.20, v0 (< 0.8).")] = "v1",
    block_size: Annotated[int, typer.Option("--block-size", help="Engine KV block, tokens.")] = 16,
    non_torch_gib: Annotated[float, typer.Option("--non-torch-gib", help="vLLM non-torch memory (CUDA context, "
                                                 "NCCL), GiB.")] = 0.3,
    cudagraph_gib: Annotated[Optional[float], typer.Option("--cudagraph-gib", help="vLLM V1's CUDA-graph "
                                                           "reserve, GiB; default 0.3.", show_default=False)]
    = None,
    calibrate: Annotated[Optional[Path], typer.Option(help="A `llmsize measure --save` file: its measured "
                                                      "efficiency gives the expected tok/s.", show_default=False)]
    = None,
    as_json: JsonOpt = False,
    catalog: CatalogOpt = None,
):
    """Plan one model on one card: memory, context, concurrency, decode ceiling, prefill, diagnosis.

    Examples:

    \b
      llmsize plan gemma-4-12b --gpu rtx5060ti
      llmsize plan llama-3.1-8b --gpu h100 --quant fp8 --context 32768 --batch 16
      llmsize plan deepseek-v3 --gpu h200 --kv-dtype fp8 --json
      llmsize plan ./my-model-folder --gpu h200-sxm
      llmsize plan --hub Qwen/Qwen3-8B --gpu rtx5090
      llmsize plan llama-3.1-70b --gpu h100 --tp 2 --emit vllm
    """
    from llmsize.estimate.plan import PlanInputs, make_plan
    if not gpu:
        raise InvalidValueError("Missing option --gpu.", "Name a card: `llmsize gpus` lists them.")
    cat = _catalog(catalog)
    g = cat.gpu(gpu)
    exact, notes = None, []
    im = _import_source(model, hub)
    if im is not None:
        m, exact, notes = im.spec, im.exact, im.notes
    else:
        m = cat.model(model)
    inputs = PlanInputs(quant=quant, scope=scope, kv_dtype=kv_dtype.lower(), context_tokens=context, batch=batch,
                        prompt_tokens=prompt, gpu_util=gpu_util, overhead_bytes=overhead_gib * GiB,
                        compute_precision=compute, tp=tp, pp=_stages(pp, nodes), node_link_gb_s=node_link_gb_s)
    if emit is not None and emit.lower() not in ("vllm", "sglang"):
        raise InvalidValueError(f"--emit `{emit}` is not a known engine.", "Use vllm or sglang.")
    p = make_plan(m, g, inputs, exact=exact, notes=notes)
    if not p.budget.weights_fit:  # name a bigger card: only now is the whole hardware catalog parsed
        p = make_plan(m, g, inputs, candidates=cat.hardware.all(), exact=exact, notes=notes)
    ledger = None
    if engine is not None:
        from llmsize.estimate.engines import EngineInputs, engine_ledger

        e = EngineInputs(engine=engine.lower(), gpu_util=gpu_util, max_model_len=max_model_len,
                         max_num_batched_tokens=max_num_batched_tokens, block_size=block_size,
                         kv_dtype=kv_dtype.lower(), non_torch_bytes=int(non_torch_gib * GiB),
                         version=engine_version.lower(),
                         cudagraph_bytes=None if cudagraph_gib is None else int(cudagraph_gib * GiB))
        ledger = engine_ledger(p.card_model or m, g, (p.weights_card or p.weights).bytes_total, e)
    expected = None
    if engine is not None or calibrate is not None:
        from llmsize.estimate.efficiency import calibrated_efficiency, expected_tok_s, table_efficiency

        eff = calibrated_efficiency(calibrate) if calibrate is not None else table_efficiency(
            engine.lower(), g.segment, p.params_total)
        expected = (eff, expected_tok_s(p.decode_ceiling_tok_s, eff))
    if emit is not None:
        from llmsize.render.emit import serve_command

        sys.stdout.write(serve_command(p, emit.lower(), model if im is not None else None) + "\n")
        return
    if as_json:
        from llmsize.render.plan_json import plan_to_dict

        d = plan_to_dict(p)
        if ledger is not None:
            from llmsize.render.engine_report import ledger_to_dict

            d["engine"] = ledger_to_dict(ledger)
        if expected is not None:
            eff, rate = expected
            target = d["engine"] if ledger is not None else d["decode"]
            target.update({"expected_tok_s": rate, "efficiency": eff.value if eff else None,
                           "efficiency_source": eff.source if eff else "no documented efficiency for this engine "
                                                                      "and card class: use --calibrate"})
        _print_json(d)
    else:
        from llmsize.render.plan_report import render_plan
        from llmsize.render.text import color_enabled

        sys.stdout.write(render_plan(p, _width(), color_enabled()))
        if ledger is not None:
            from llmsize.render.engine_report import render_ledger

            render_ledger(ledger, _console())
        if expected is not None:
            eff, rate = expected
            c = _console()
            if eff:
                c.print(f"Expected decode: {rate:,.1f} tok/s at batch 1 = ceiling {p.decode_ceiling_tok_s:,.1f} x "
                        f"efficiency {eff.value:.2f} ({eff.source}).")
            else:
                c.print("Expected decode: no documented efficiency for this engine and card class; pass "
                        "--calibrate FILE from `llmsize measure --save`.")


def _stages(pp: int | None, nodes: int | None) -> int:
    """--pp, or one stage per node with --nodes; both must agree."""
    if nodes is not None and nodes < 1:
        raise InvalidValueError(f"--nodes `{nodes}` must be at least 1.", "Pass 1 or more.")
    if pp is not None and nodes is not None and pp != nodes:
        raise InvalidValueError(f"--pp {pp} and --nodes {nodes} disagree: --nodes puts one pipeline stage on "
                                "each node.", "Give one of them.")
    return pp if pp is not None else (nodes or 1)


def _import_source(model: str | None, hub: str | None):
    """An Imported for a path or --hub, None for a catalog name."""
    if (model is None) == (hub is None):
        raise InvalidValueError("Give a model (catalog id or path) or --hub ORG/NAME, not both or neither.",
                                "e.g. `llmsize plan gemma-4-12b --gpu h200` or `--hub google/gemma-3-27b-it`.")
    if hub is not None:
        from llmsize.importer.source import import_hub

        return import_hub(hub)
    if _is_path(model):
        from llmsize.importer.source import import_model

        return import_model(model)
    return None


def _is_path(name: str) -> bool:
    """A model argument naming something on disk (or shaped like a path) is imported, not looked up."""
    return os.path.exists(name) or name.endswith(".json") or name.startswith((".", "/", "~"))


@_command("import")
def import_(
    path: Annotated[Optional[Path], typer.Argument(help="Model folder (config.json [+ hf_quant_config.json] "
                                                   "[+ *.safetensors]) or a config.json file.",
                                                   show_default=False)] = None,
    hub: Annotated[Optional[str], typer.Option(help="Read ORG/NAME[@REVISION] from the Hugging Face Hub instead "
                                               "(config.json and safetensors headers only).",
                                               show_default=False)] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the catalog entry here "
                                                   "(e.g. mycat/models/NAME.yaml); default: print it.",
                                                   show_default=False)] = None,
    model_id: Annotated[Optional[str], typer.Option("--id", help="Catalog id; default: from the file name of "
                                                    "-o, else from the model's name.")] = None,
):
    """Turn a local checkpoint or config.json into a catalog entry, with its sources.

    Examples:

    \b
      llmsize import ./Llama-3.1-8B-Instruct -o mycat/models/my-llama.yaml
      llmsize import ./config.json
      llmsize import --hub Qwen/Qwen3-8B -o mycat/models/qwen3-8b.yaml
    """
    from llmsize.importer.catalog_entry import entry_yaml

    if path is not None and not _is_path(str(path)):
        raise InvalidValueError(f"`{path}` is not a file or folder.", "Give a model folder or a config.json.")
    im = _import_source(None if path is None else str(path), hub)
    if output is not None:
        if output.suffix not in (".yaml", ".yml"):
            raise InvalidValueError(f"-o `{output}` must end in .yaml.", "Catalog files are YAML.")
        if not output.parent.is_dir():
            raise InvalidValueError(f"-o `{output}`: folder {output.parent} does not exist.", "Create it first.")
        model_id = model_id or output.stem
    text = entry_yaml(im, model_id)
    if output is None:
        sys.stdout.write(text)
        return
    tmp = output.with_name(output.name + ".partial")
    tmp.write_text(text)
    tmp.replace(output)
    sys.stderr.write(f"Wrote {output} (id {model_id}); plan it with `llmsize plan {model_id} --gpu CARD "
                     f"--catalog {output.parent.parent}`.\n")


@_command()
def compare(
    model: Annotated[Optional[str], typer.Argument(help="Model id, alias or path (as for plan).",
                                                   show_default=False)] = None,
    gpus_: Annotated[Optional[str], typer.Option("--gpus", help="Comma-separated card ids; default: every card.",
                                                 show_default=False)] = None,
    vendor: Annotated[Optional[str], typer.Option(help="Only this vendor: nvidia, amd, apple, intel.")] = None,
    segment: Annotated[Optional[str], typer.Option(help="Only this segment: consumer, workstation, datacenter, "
                                                   "edge, desktop-soc.")] = None,
    quant: Annotated[Optional[str], typer.Option(help="Weight format; default: the model's release format.")]
    = None,
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="KV cache dtype.")] = "bf16",
    context: Annotated[int, typer.Option(help="Tokens per sequence.")] = 4096,
    users: Annotated[int, typer.Option(help="Concurrent sequences for the aggregate tok/s (capped by what the "
                                       "cache holds).")] = 1,
    gpu_util: Annotated[float, typer.Option("--gpu-util", help="Share of VRAM the engine may use.")] = 0.90,
    overhead_gib: Annotated[float, typer.Option("--overhead-gib", help="Runtime overhead per card, GiB.")] = 1.5,
    tp: Annotated[Optional[int], typer.Option(help="Tensor-parallel cards for every row; default: 1, or the "
                                              "fewest cards that hold the model.", show_default=False)] = None,
    pp: Annotated[Optional[int], typer.Option(help="Pipeline stages for every row.", show_default=False)] = None,
    nodes: Annotated[Optional[int], typer.Option(help="One pipeline stage per node (sets --pp).",
                                                 show_default=False)] = None,
    prices: Annotated[Optional[Path], typer.Option(help="YAML of card prices (currency: + prices: id -> price); "
                                                   "none are shipped.", show_default=False)] = None,
    sort: Annotated[str, typer.Option(help="Column to rank by: " + ", ".join(
        ("ceiling_tok_s", "aggregate_tok_s", "bandwidth_gb_s", "tok_s_per_w", "tok_s_per_kcurrency", "fits",
         "cards", "memory_gib", "max_context_tokens", "max_sequences", "ttft_s", "price", "gpu")) + ".")]
    = "aggregate_tok_s",
    fmt: Annotated[str, typer.Option("--format", help="table, json, csv or markdown.")] = "table",
    hub: Annotated[Optional[str], typer.Option(help="Read the model from the Hub (ORG/NAME[@REV]).",
                                               show_default=False)] = None,
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
    from llmsize.estimate.compare import compare as run_compare
    from llmsize.estimate.compare import sort_rows
    from llmsize.estimate.plan import PlanInputs

    if fmt not in ("table", "json", "csv", "markdown"):
        raise InvalidValueError(f"--format `{fmt}` is not one of table, json, csv, markdown.", "Pick one of them.")
    cat = _catalog(catalog)
    im = _import_source(model, hub)
    m = im.spec if im is not None else cat.model(model)
    if gpus_:
        cards = [cat.gpu(x.strip()) for x in gpus_.split(",") if x.strip()]
    else:
        cards = cat.hardware.all()
    if vendor:
        cards = [g for g in cards if g.vendor.lower() == vendor.lower()]
    if segment:
        cards = [g for g in cards if g.segment == segment.lower()]
    if not cards:
        raise InvalidValueError("No card matches these filters.", "Loosen --vendor / --segment / --gpus.")
    currency, price_map = None, {}
    if prices is not None:
        from llmsize.catalog.prices import load_prices

        currency, price_map = load_prices(prices, cat)
    stages = _stages(pp, nodes)
    inputs = PlanInputs(quant=quant, kv_dtype=kv_dtype.lower(), context_tokens=context, gpu_util=gpu_util,
                        overhead_bytes=overhead_gib * GiB, tp=tp or 1, pp=stages)
    fixed = tp is not None or stages > 1
    rows = sort_rows(run_compare(m, cards, inputs, users, price_map, fixed=fixed), sort)
    title = (f"llmsize compare: {m.name}, {rows[0].plan.fmt.id if rows[0].plan else quant or m.release.quant}, "
             f"{context:,} tokens, {users} user(s)")
    notes = ["Units: GB = 10^9 B, GiB = 2^30 B. A card that cannot hold the model alone is costed on `cards` "
             "of it (tensor/pipeline parallel); TTFT is for a --context-token prompt; tok/s/W uses the catalog "
             "TDP x cards."]
    served = {r.users_served for r in rows if r.plan}
    if any(s < users for s in served):
        notes.append(f"Rows whose cache holds fewer than {users} sequences are aggregated at what it holds.")
    if fmt == "json":
        from llmsize.render.compare_table import rows_to_dicts

        _print_json({"model": m.id, "inputs": {"quant": quant, "kv_dtype": kv_dtype, "context_tokens": context,
                                               "users": users, "gpu_util": gpu_util, "sort": sort,
                                               "currency": currency},
                     "rows": rows_to_dicts(rows)})
    elif fmt == "csv":
        from llmsize.render.compare_table import render_csv

        sys.stdout.write(render_csv(rows, currency))
    elif fmt == "markdown":
        from llmsize.render.compare_table import render_markdown

        sys.stdout.write(render_markdown(rows, currency, title))
    else:
        from llmsize.render.compare_table import render_table

        render_table(rows, currency, title, notes, _console())


@_command()
def roofline(
    model: Annotated[Optional[str], typer.Argument(help="Model id, alias or path.", show_default=False)] = None,
    gpu: Annotated[Optional[list[str]], typer.Option("--gpu", "-g", help="Card id; repeat for several.",
                                                     show_default=False)] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write a .png or .svg (needs the "
                                                   "charts extra); default: a terminal chart.",
                                                   show_default=False)] = None,
    quant: Annotated[Optional[str], typer.Option(help="Weight format; default: the release format.")] = None,
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="KV cache dtype.")] = "bf16",
    context: Annotated[int, typer.Option(help="Tokens per sequence.")] = 4096,
    max_batch: Annotated[int, typer.Option("--max-batch", help="Decode points at batch 1, 2, 4 ... up to this.")]
    = 1024,
    hub: Annotated[Optional[str], typer.Option(help="Read the model from the Hub.", show_default=False)] = None,
    catalog: CatalogOpt = None,
):
    """Roofline of one or more cards with the model's decode points (batch 1...N) and its prefill point.

    Examples:

    \b
      llmsize roofline gemma-4-12b --gpu rtx5060ti --gpu h200
      llmsize roofline llama-3.1-8b --gpu h100 -o roofline.svg
    """
    from llmsize.estimate.charts import roofline as roof_data
    from llmsize.estimate.plan import PlanInputs
    from llmsize.render import charts

    if not gpu:
        raise InvalidValueError("Missing option --gpu.", "Name one or more cards: --gpu h100 --gpu h200.")
    if max_batch < 1:
        raise InvalidValueError(f"--max-batch `{max_batch}` must be at least 1.", "Pass 1 or more.")
    cat = _catalog(catalog)
    im = _import_source(model, hub)
    m = im.spec if im is not None else cat.model(model)
    inputs = PlanInputs(quant=quant, kv_dtype=kv_dtype.lower(), context_tokens=context)
    roofs = [roof_data(m, cat.gpu(g), inputs, max_batch) for g in gpu]
    if output is None:
        sys.stdout.write(charts.roofline_text(m.name, roofs, width=_console().width) + "\n")
    else:
        charts.roofline_image(m.name, roofs, output)
        sys.stderr.write(f"Wrote {output}\n")


@_command()
def kv(
    model: Annotated[Optional[str], typer.Argument(help="Model id, alias or path.", show_default=False)] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write a .png or .svg (needs the "
                                                   "charts extra); default: a terminal chart.",
                                                   show_default=False)] = None,
    quant: Annotated[Optional[str], typer.Option(help="Weight format for the weights line; default: release.")]
    = None,
    users: Annotated[int, typer.Option(help="Sequences whose caches add up (the seeds' 'many users').")] = 1,
    max_context: Annotated[Optional[int], typer.Option("--max-context", help="Right end of the context axis; "
                                                       "default: the model's max_position_embeddings.",
                                                       show_default=False)] = None,
    hub: Annotated[Optional[str], typer.Option(help="Read the model from the Hub.", show_default=False)] = None,
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

    cat = _catalog(catalog)
    im = _import_source(model, hub)
    m = im.spec if im is not None else cat.model(model)
    if users < 1:
        raise InvalidValueError(f"--users `{users}` must be at least 1.", "Pass 1 or more.")
    limit = max_context or m.max_position_embeddings
    if limit < 2:
        raise InvalidValueError(f"--max-context `{limit}` must be at least 2.", "Pass a longer context.")
    fmt, scope = resolve_format(m, quant, None)
    w = weight_bytes(m, fmt, scope).bytes_total
    curves = kv_curves(m, contexts_up_to(limit, start=min(256, limit // 2)), users=users)
    cross = {dt: crossover_tokens(m, dt, w, users, limit) for dt in KV_DTYPES}
    if output is None:
        sys.stdout.write(charts.kv_text(m.name, curves, w, fmt.id, cross, width=_console().width, users=users)
                         + "\n")
    else:
        charts.kv_image(m.name, curves, w, fmt.id, output, users=users)
        sys.stderr.write(f"Wrote {output}\n")


@_command()
def gpus(
    vendor: Annotated[Optional[str], typer.Option(help="Only this vendor: nvidia, amd, apple, intel.")] = None,
    segment: Annotated[Optional[str], typer.Option(
        help="Only this segment: consumer, workstation, datacenter, edge, desktop-soc.")] = None,
    min_memory_gib: Annotated[Optional[float], typer.Option("--min-memory-gib", help="At least this much VRAM.")]
    = None,
    sort: Annotated[str, typer.Option(help="Sort by: bandwidth, memory, year, id.")] = "bandwidth",
    as_json: JsonOpt = False,
    catalog: CatalogOpt = None,
):
    """List accelerators.

    Examples:

    \b
      llmsize gpus
      llmsize gpus --vendor nvidia --segment consumer
      llmsize gpus --min-memory-gib 80 --sort memory --json
    """
    from llmsize.render.listing import gpu_row, render_gpus

    items = _catalog(catalog).hardware.all()
    if vendor:
        items = [g for g in items if g.vendor.lower() == vendor.lower()]
    if segment:
        items = [g for g in items if g.segment == segment.lower()]
    if min_memory_gib is not None:
        items = [g for g in items if g.memory_bytes >= min_memory_gib * GiB]
    keys = {"bandwidth": lambda g: -g.bandwidth_gb_s, "memory": lambda g: -g.memory_bytes,
            "year": lambda g: -g.year, "id": lambda g: g.id}
    if sort not in keys:
        raise InvalidValueError(f"Unknown sort key `{sort}`.", f"Choose one of: {', '.join(keys)}.")
    items.sort(key=keys[sort])
    if as_json:
        _print_json([gpu_row(g) for g in items])
    else:
        render_gpus(items, _console())


@_command()
def models(
    family: Annotated[Optional[str], typer.Option(help="Only this family (llama, gemma4, qwen3_moe...).")] = None,
    mixer: Annotated[Optional[str], typer.Option(help="Only models with this layer kind: full, sliding, mla, ssm, "
                                                 "linear.")] = None,
    moe: Annotated[Optional[bool], typer.Option("--moe/--dense", help="Only mixture-of-experts / only dense.",
                                                show_default=False)] = None,
    as_json: JsonOpt = False,
    catalog: CatalogOpt = None,
):
    """List models.

    Examples:

    \b
      llmsize models
      llmsize models --moe
      llmsize models --mixer sliding --json
    """
    from llmsize.render.listing import model_row, render_models

    items = _catalog(catalog).models.all()
    if family:
        items = [m for m in items if m.family == family.lower()]
    if mixer:
        items = [m for m in items if any(g.mixer is not None and g.mixer.kind == mixer for g in m.layer_groups)]
    if moe is not None:
        items = [m for m in items if any(g.mlp is not None and g.mlp.kind == "moe" for g in m.layer_groups) == moe]
    items.sort(key=lambda m: m.id)
    if as_json:
        _print_json([model_row(m) for m in items])
    else:
        render_models(items, _console())


@_command()
def show(
    name: Annotated[str, typer.Argument(help="A card or model id (or alias).")],
    as_json: JsonOpt = False,
    catalog: CatalogOpt = None,
):
    """Show one catalog entry with its sources.

    Examples:

    \b
      llmsize show rtx5060ti
      llmsize show gemma-4-12b --json
    """
    from llmsize.errors import UnknownNameError
    from llmsize.render.listing import render_entry

    cat = _catalog(catalog)
    try:
        entry = cat.gpu(name)
    except UnknownNameError:
        try:
            entry = cat.model(name)
        except UnknownNameError as e:
            raise UnknownNameError(f"`{name}` is neither a card nor a model in the catalog.",
                                   "Run `llmsize gpus` or `llmsize models` to see them.") from e
    if as_json:
        _print_json(entry.model_dump(mode="json"))
    else:
        render_entry(entry, _console())


@_command()
def formats(as_json: JsonOpt = False):
    """List weight formats with their exact bits per weight.

    Examples:

    \b
      llmsize formats
      llmsize formats --json
    """
    from llmsize.estimate.quant import FORMATS, KV_DTYPE_BYTES

    rows = [{"id": f.id, "bits_per_weight": float(f.bits_per_weight), "per_tensor_bytes": f.per_tensor_bytes,
             "default_scope": f.default_scope, "description": f.description, "source": f.source}
            for f in FORMATS.values()]
    if as_json:
        _print_json({"weight_formats": rows, "kv_dtype_bytes": {k: float(v) for k, v in KV_DTYPE_BYTES.items()}})
        return
    from rich import box
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="Weight formats", title_justify="left")
    for col in ("id", "bits/weight", "scope", "what"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r["id"], f"{r['bits_per_weight']:g}", r["default_scope"], r["description"])
    c = _console()
    c.print(t)
    c.print("KV dtypes (bytes per value): " + ", ".join(f"{k} {float(v):g}" for k, v in KV_DTYPE_BYTES.items()),
            style="dim")


@_command()
def measure(
    quant: Annotated[str, typer.Option(help="nvfp4 (Triton dequantizing GEMV, weights packed) or bf16 "
                                       "(cuBLAS baseline).")] = "nvfp4",
    context: Annotated[int, typer.Option(help="Prompt tokens prefilled before decoding.")] = 4096,
    tokens: Annotated[int, typer.Option(help="Decode steps timed.")] = 256,
    batch: Annotated[int, typer.Option(
        help="Sequences decoded together (1-256; above 16, NVFP4 needs --gemv auto or words).")] = 1,
    device: Annotated[str, typer.Option(help="cuda, or cpu for a small Gemma-4-shaped model anyone can run.")]
    = "cuda",
    checkpoint: Annotated[Optional[Path], typer.Option(
        help="Local Gemma 4 checkpoint folder: NVFP4 (compressed-tensors or ModelOpt) or bf16 (quantized while "
             "loading); default: random weights of the exact shapes.", show_default=False)] = None,
    gpu_index: Annotated[int, typer.Option("--gpu-index", help="Which GPU (NVML/CUDA index).")] = 0,
    warmup: Annotated[int, typer.Option(help="Untimed decode steps first (compile, autotune).")] = 8,
    seed: Annotated[int, typer.Option(help="Seed for random weights and the prompt.")] = 0,
    probe: Annotated[bool, typer.Option("--probe/--no-probe", help="Time a read-bandwidth probe first.")] = True,
    gemv: Annotated[str, typer.Option(help="NVFP4 kernel: auto (words if it checks out on the card, else "
                                      "triton), words (fp16x2, two codes per instruction), triton (byte-wise), dot "
                                      "or pairs (tensor-core).")] = "auto",
    compile_: Annotated[bool, typer.Option("--compile/--no-compile", help="torch.compile the decode step before "
                                           "capturing it (fewer, fused kernels between the GEMVs).")] = False,
    fused: Annotated[Optional[bool], typer.Option("--fused/--no-fused", help="The work between the GEMVs in "
                                                  "two to five Triton kernels per layer; default: on a GPU, once "
                                                  "they reproduce the eager step there.", show_default=False)] = None,
    as_json: JsonOpt = False,
    save: Annotated[Optional[Path], typer.Option(help="Also write the full result as JSON to this file.",
                                                 show_default=False)] = None,
):
    """Measure a real NVFP4 Gemma 4 12B decode loop on this GPU, next to what `plan` predicts.

    Needs the measure extra: pip install 'llmsize[measure]'.

    Examples:

    \b
      llmsize measure
      llmsize measure --quant bf16 --tokens 128
      llmsize measure --checkpoint ./gemma-4-12b-nvfp4 --json --save run.json
      llmsize measure --device cpu
    """
    from llmsize.measure.run import MeasureOptions, validate
    from llmsize.measure.run import measure as run_measure

    opts = MeasureOptions(quant=quant.lower(), context=context, tokens=tokens, batch=batch, device=device.lower(),
                          checkpoint=str(checkpoint) if checkpoint else None, gpu_index=gpu_index,
                          warmup=warmup, seed=seed, probe=probe, gemv=gemv.lower(), compile=compile_,
                          fused=fused)
    validate(opts)
    if save is not None and not save.parent.is_dir():
        raise InvalidValueError(f"--save `{save}`: folder {save.parent} does not exist.", "Create it first.")
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True, width=min(shutil.get_terminal_size((100, 24)).columns, 100))
    with Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as bar:
        tasks = {}

        def progress(stage, done, total):
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        result = run_measure(opts, progress)
    if save is not None:
        tmp = save.with_name(save.name + ".partial")
        tmp.write_text(json.dumps(result, indent=2) + "\n")
        tmp.replace(save)
    if as_json:
        _print_json(result)
    else:
        from llmsize.render.measure_report import render_measure

        render_measure(result, _console())
        if save is not None:
            _console().print(f"Saved to {save}", style="dim")


@contextmanager
def _errors():
    try:
        yield
    except LlmsizeError as e:
        sys.stderr.write(f"Error: {e.one_line()}\n")
        sys.exit(int(e.exit_status))


def _given_value(err, argv: list[str] | None) -> str:
    """The value the user typed for the option a usage error is about, so the message can name it."""
    args = sys.argv[1:] if argv is None else argv
    for opt in getattr(getattr(err, "param", None), "opts", None) or []:
        for i, tok in enumerate(args):
            if tok == opt and i + 1 < len(args):
                return f" (got `{args[i + 1]}`)"
            if tok.startswith(opt + "="):
                return f" (got `{tok.split('=', 1)[1]}`)"
    return ""


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every expected failure becomes one line on stderr and a non-zero exit."""
    os.environ.setdefault("TYPER_STANDARD_TRACEBACK", "1")
    with _errors():
        try:
            args = sys.argv[1:] if argv is None else list(argv)
            names = {(n or fn.__name__.rstrip("_")) for n, fn in _COMMANDS}
            first = args[0] if args else None
            app = build_app(first if first in names else None)
            rv = app(args=args, prog_name="llmsize", standalone_mode=False)
        except (typer.Abort, KeyboardInterrupt):
            sys.stderr.write("Aborted.\n")
            sys.exit(int(ExitStatus.ERROR))
        except _UsageError as e:
            where = e.ctx.command_path if e.ctx else "llmsize"
            msg = e.format_message().replace("\n", " ").rstrip(".") + _given_value(e, argv)
            end = "" if msg.endswith(("?", "!")) else "."
            sys.stderr.write(f"Error: {msg}{end} Run `{where} --help` for usage.\n")
            sys.exit(int(ExitStatus.USAGE))
        except _ClickException as e:
            sys.stderr.write(f"Error: {e.format_message()}\n")
            sys.exit(e.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
