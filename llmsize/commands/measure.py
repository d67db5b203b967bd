"""`llmsize measure`: the NVFP4 decode loop on this GPU, or a running OpenAI-compatible server."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager, nullcontext

import typer

from llmsize.commands.shared import find_card, load_catalog, make_console, print_json, term_width
from llmsize.errors import InvalidValueError, not_one_of
from llmsize.options import (
    ApiKeyOpt,
    BackendOpt,
    CatalogOpt,
    CheckpointOpt,
    CompileOpt,
    ConcurrencyOpt,
    DeviceOpt,
    FallbackOpt,
    ForceOpt,
    FusedOpt,
    GemvOpt,
    GpuIndexOpt,
    GpuOpt,
    JsonOpt,
    MeasureBatchOpt,
    MeasureContextOpt,
    MeasureQuantOpt,
    PlanModelOpt,
    ProbeOpt,
    RoundsOpt,
    RuntimeOpt,
    SaveOpt,
    SeedOpt,
    ServerModelOpt,
    ServerOpt,
    ServerTimeoutOpt,
    TokensOpt,
    TpOpt,
    WarmupOpt,
)


def measure(
    ctx: typer.Context,
    quant: MeasureQuantOpt = None,
    context: MeasureContextOpt = 4096,
    tokens: TokensOpt = 256,
    batch: MeasureBatchOpt = 1,
    device: DeviceOpt = "cuda",
    checkpoint: CheckpointOpt = None,
    gpu_index: GpuIndexOpt = 0,
    warmup: WarmupOpt = 8,
    seed: SeedOpt = 0,
    probe: ProbeOpt = True,
    gemv: GemvOpt = "auto",
    compile_: CompileOpt = False,
    fused: FusedOpt = None,
    fallback: FallbackOpt = False,
    server: ServerOpt = None,
    model: ServerModelOpt = None,
    concurrency: ConcurrencyOpt = None,
    rounds: RoundsOpt = 1,
    timeout: ServerTimeoutOpt = 120.0,
    api_key: ApiKeyOpt = None,
    gpu: GpuOpt = "",
    runtime: RuntimeOpt = None,
    gpu_backend: BackendOpt = None,
    plan_model: PlanModelOpt = None,
    tp: TpOpt = 1,
    as_json: JsonOpt = False,
    save: SaveOpt = None,
    force: ForceOpt = False,
    catalog: CatalogOpt = None,
):
    """Measure a real NVFP4 Gemma 4 12B decode loop on this GPU, next to what `plan` predicts; or, with --server,
    the OpenAI-compatible server you run (vLLM, SGLang, TensorRT-LLM, llama-server, Ollama, LM Studio).

    The GPU loop needs the measure extra: pip install '.[measure]' in the llmsize checkout; --server needs the
    server extra: pip install '.[server]'.

    Examples:

    \b
      llmsize measure
      llmsize measure --quant bf16 --tokens 128
      llmsize measure --checkpoint ./gemma-4-12b-nvfp4 --json --save run.json
      llmsize measure --device cpu
      llmsize measure --server http://127.0.0.1:8000 --gpu rtx5090 --concurrency 1,4,16
      llmsize measure --server http://127.0.0.1:8080 --gpu rtx4090 --context 4096 --tokens 128 --save run.json
    """
    only_gpu = ("batch", "device", "checkpoint", "gpu_index", "warmup", "seed", "probe", "gemv", "compile_", "fused",
                "fallback")
    only_server = ("model", "concurrency", "rounds", "timeout", "api_key", "gpu", "runtime", "gpu_backend",
                   "plan_model", "tp", "catalog")
    given = _given_options(ctx, only_server if server is None else only_gpu)
    if given:
        flag = given[0]
        why = "needs --server" if server is None else "is for the GPU loop, not --server"
        raise InvalidValueError(f"{flag} {why}.",
                                f"Drop {flag}, or {'add --server URL' if server is None else 'drop --server'}.")
    if save is not None:  # a destination that cannot be written is refused before the run, not after it
        from llmsize.files import check_output

        check_output(save, "--save", force)
    if server is not None:
        result = _measure_server(server, model, quant, context, tokens, concurrency, rounds, timeout, api_key, gpu,
                                 runtime, plan_model, tp, catalog, gpu_backend)
    else:
        result = _measure_gpu(quant, context, tokens, batch, device, checkpoint, gpu_index, warmup, seed, probe, gemv,
                              compile_, fused, fallback)
    report = None
    if not as_json:  # the report is drawn before --save is written: a report that fails leaves no file
        if server is not None:
            from llmsize.render.server_report import render_server as render
        else:
            from llmsize.render.measure_report import render_measure as render
        console = make_console()
        with console.capture() as captured:
            render(result, console)
        report = captured.get()
    if save is not None:
        from llmsize.files import write_output

        write_output(save, json.dumps(result, indent=2) + "\n", "--save", force)
    if report is None:
        print_json(result)
    else:
        sys.stdout.write(report)
        if save is not None:
            make_console().print(f"Saved to {save}", style="dim")


def _given_options(ctx, names: tuple[str, ...]) -> list[str]:
    """Of these parameters, the flags the user typed (or set through their environment variable)."""
    out = []
    for p in ctx.command.params:
        source = ctx.get_parameter_source(p.name) if p.name in names else None
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            out.append(p.opts[0])
    return out


def _progress_bar():
    """A progress callback drawing bars on a terminal's stderr (a context manager), or a silent one."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True, width=term_width())
    if not err.is_terminal:  # progress bars are for a person watching; a log or a pipe gets only the result
        return nullcontext(lambda stage, done, total: None)
    bar = Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err, transient=True)
    tasks = {}

    def progress(stage, done, total):
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage, total=total)
        bar.update(tasks[stage], completed=done, total=total)

    @contextmanager
    def drawn():
        with bar:
            yield progress

    return drawn()


def _measure_gpu(quant, context, tokens, batch, device, checkpoint, gpu_index, warmup, seed, probe, gemv, compile_,
                 fused, fallback) -> dict:
    from llmsize.measure.run import QUANTS, MeasureOptions, validate
    from llmsize.measure.run import measure as run_measure

    quant = (quant or "nvfp4").strip().lower()
    if quant not in QUANTS:
        raise typer.BadParameter(not_one_of(quant, QUANTS), param_hint="'--quant'")
    opts = MeasureOptions(quant=quant, context=context, tokens=tokens, batch=batch, device=device,
                          checkpoint=str(checkpoint) if checkpoint else None, gpu_index=gpu_index,
                          warmup=warmup, seed=seed, probe=probe, gemv=gemv.lower(), compile=compile_,
                          fused=fused, fallback=fallback)
    validate(opts)
    with _progress_bar() as progress:
        return run_measure(opts, progress)


def _measure_server(server, model, quant, context, tokens, concurrency, rounds, timeout, api_key, gpu, runtime,
                    plan_model, tp, catalog, gpu_backend=None) -> dict:
    from llmsize.estimate.runtimes import check_backend
    from llmsize.measure.server import require_http
    from llmsize.measure.server_run import ServerOptions, measure_server, validate

    opts = ServerOptions(url=server, model=model, context=context, tokens=tokens, concurrency=concurrency or (1,),
                         rounds=rounds, timeout_s=timeout, api_key=api_key, gpu=gpu or None, runtime=runtime,
                         quant=quant, plan_model=plan_model, tp=tp, backend=gpu_backend)
    validate(opts)
    check_backend(gpu_backend, runtime)  # before any request: Vulkan under a runtime without one
    cat = load_catalog(catalog)
    g = find_card(cat, gpu) if gpu else None  # names are checked before any request
    if g is not None:  # and the backend against the card, before any request
        check_backend(gpu_backend, runtime, gpu=g)
    if plan_model is not None:
        cat.model(plan_model)
    if quant is not None:
        from llmsize.estimate.quant import FORMATS

        if "=" in quant:
            from llmsize.estimate.quant import quant_format

            quant_format(quant)  # a recipe's parts, before any request
        elif quant.strip().lower() not in FORMATS:
                raise typer.BadParameter(not_one_of(quant, list(FORMATS)), param_hint="'--quant'")
    require_http()  # the options first: each is the user's to fix whether or not the extra is installed
    with _progress_bar() as progress:
        return measure_server(opts, progress, cat, g)
