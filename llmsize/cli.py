"""The command line: parse -> load -> estimate -> render. No arithmetic here; torch is never imported."""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated, Optional

import typer

from llmsize import __version__
from llmsize.errors import ExitStatus, InvalidValueError, LlmsizeError, printable, shown
from llmsize.options import (
    DEFAULT_CONTEXT,
    ApiKeyOpt,
    BackendOpt,
    BatchOpt,
    BlockSizeOpt,
    CacheTypeKOpt,
    CacheTypeVOpt,
    CalibrateOpt,
    CatalogOpt,
    ChartOutOpt,
    CheckpointOpt,
    CompareFormatOpt,
    CompareSortOpt,
    CompileOpt,
    ComputeOpt,
    ConcurrencyOpt,
    ContextOpt,
    CpuMoeOpt,
    CudagraphOpt,
    DeviceOpt,
    EmitOpt,
    EngineOpt,
    EngineVersionOpt,
    EstimateOnlyOpt,
    FallbackOpt,
    FamilyOpt,
    FitContextOpt,
    FitSortOpt,
    FlashAttnOpt,
    FleetEmitOpt,
    FleetFormatOpt,
    FleetUsersOpt,
    ForceOpt,
    Fp4KernelOpt,
    FusedOpt,
    GemvOpt,
    GpuIndexOpt,
    GpuLayersOpt,
    GpuListOpt,
    GpuOpt,
    GpusOpt,
    GpuSortOpt,
    GpuUtilOpt,
    HostBandwidthOpt,
    HostMemoryOpt,
    HostRamOpt,
    HubFileOpt,
    HubOpt,
    IdOpt,
    ImportOutOpt,
    IslOpt,
    JsonOpt,
    KvDtypeOpt,
    KvPolicyOpt,
    KvUnifiedOpt,
    KvUsersOpt,
    LeversOpt,
    LlamaFitOpt,
    MaxBatchedTokensOpt,
    MaxBatchOpt,
    MaxContextOpt,
    MaxModelLenOpt,
    MeasureBatchOpt,
    MeasureContextOpt,
    MeasureQuantOpt,
    MinMemoryOpt,
    MinTokSOpt,
    MixerOpt,
    ModelArg,
    ModeOpt,
    MoeOpt,
    NCpuMoeOpt,
    NodeLinkOpt,
    NodesOpt,
    NoFlashAttnOpt,
    NonTorchOpt,
    OnePerModelOpt,
    OslOpt,
    OverheadOpt,
    ParallelOpt,
    ParetoOpt,
    PlanContextOpt,
    PlanFormatOpt,
    PlanModelOpt,
    PpOpt,
    PricesOpt,
    ProbeOpt,
    PromptOpt,
    QuantOpt,
    RateOpt,
    RoundsOpt,
    RuntimeOpt,
    SaveOpt,
    ScopeOpt,
    SeedOpt,
    SegmentOpt,
    ServerModelOpt,
    ServerOpt,
    ServerTimeoutOpt,
    SharedPrefixOpt,
    SimulateOpt,
    SpecOpt,
    SwaFullOpt,
    TokensOpt,
    TokSPerUserOpt,
    TopOpt,
    TpAutoOpt,
    TpOpt,
    TpotOpt,
    TtftOpt,
    UbatchOpt,
    UsersOpt,
    VendorOpt,
    WarmupOpt,
    WiredLimitOpt,
    not_one_of,
)
from llmsize.units import GB, GiB

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
    for (name, fn), cmd in zip(_COMMANDS, command_names()):
        if only is None or cmd == only:
            app.command(name)(fn)
    return app


def command_names() -> list[str]:
    """Each command's name as typed, in help order."""
    return [name or fn.__name__.rstrip("_") for name, fn in _COMMANDS]


@functools.lru_cache(maxsize=None)
def click_command(only: str | None = None):
    """build_app's command as click runs it (what typer's app() builds on every call), built once per process:
    a process that runs several commands, or forks after building them, converts the options once."""
    return typer.main.get_command(build_app(only))


MIN_WIDTH, MAX_WIDTH = 60, 100  # reports are laid out for 60 to 100 columns, whatever the terminal says
WIDE_WIDTH = 160  # a table of many columns (compare with prices, fleet) takes a wider terminal's columns


def _width(cap: int = MAX_WIDTH) -> int:
    return max(MIN_WIDTH, min(shutil.get_terminal_size((MAX_WIDTH, 24)).columns, cap))


def _console(cap: int = MAX_WIDTH):
    from rich.console import Console

    width = _width(cap)
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
    model: ModelArg = None,
    gpu: GpuOpt = "",
    hub: HubOpt = None,
    hub_file: HubFileOpt = None,
    quant: QuantOpt = None,
    scope: ScopeOpt = None,
    kv_dtype: KvDtypeOpt = None,
    kv_policy: KvPolicyOpt = None,
    spec: SpecOpt = None,
    context: PlanContextOpt = None,
    batch: BatchOpt = 1,
    prompt: PromptOpt = None,
    gpu_util: GpuUtilOpt = None,
    overhead_gib: OverheadOpt = None,
    compute: ComputeOpt = None,
    tp: TpOpt = 1,
    pp: PpOpt = None,
    nodes: NodesOpt = None,
    node_link_gb_s: NodeLinkOpt = 50.0,
    wired_limit_gb: WiredLimitOpt = None,
    emit: EmitOpt = None,
    engine: EngineOpt = None,
    max_model_len: MaxModelLenOpt = None,
    max_num_batched_tokens: MaxBatchedTokensOpt = None,
    engine_version: EngineVersionOpt = "v1",
    block_size: BlockSizeOpt = 16,
    non_torch_gib: NonTorchOpt = None,
    cudagraph_gib: CudagraphOpt = None,
    parallel: ParallelOpt = 1,
    kv_unified: KvUnifiedOpt = False,
    cache_type_k: CacheTypeKOpt = "f16",
    cache_type_v: CacheTypeVOpt = "f16",
    flash_attn: FlashAttnOpt = None,
    no_flash_attn: NoFlashAttnOpt = False,
    ubatch_size: UbatchOpt = 512,
    swa_full: SwaFullOpt = False,
    gpu_layers: GpuLayersOpt = None,
    n_cpu_moe: NCpuMoeOpt = 0,
    cpu_moe: CpuMoeOpt = False,
    host_memory: HostMemoryOpt = None,
    host_bandwidth_gb_s: HostBandwidthOpt = None,
    fit: LlamaFitOpt = False,
    runtime: RuntimeOpt = None,
    gpu_backend: BackendOpt = None,
    fp4_kernel: Fp4KernelOpt = None,
    calibrate: CalibrateOpt = None,
    estimate_only: EstimateOnlyOpt = False,
    levers: LeversOpt = False,
    as_json: JsonOpt = False,
    fmt: PlanFormatOpt = "table",
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
      llmsize plan llama-3.1-8b --gpu rtx4090 --spec draft=llama-3.2-1b,k=4,accept=0.7
      llmsize plan gemma-4-12b --gpu rtx5060ti --levers
      llmsize plan gemma-4-12b --gpu rtx5060ti --format html > plan.html
    """
    from llmsize.estimate.kv_policy import parse_kv_policy
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.speculative import parse_spec
    if not gpu:
        raise InvalidValueError("Missing option --gpu.", "Name a card: `llmsize gpus` lists them.")
    fmt = _one_format(as_json, fmt)
    from llmsize.estimate.kernels import check_fp4_kernel
    from llmsize.estimate.runtimes import check_backend

    check_backend(gpu_backend, runtime or engine)  # before any work: Vulkan under a runtime without one
    policy = parse_kv_policy(kv_policy)
    if no_flash_attn and flash_attn not in (None, "off"):
        raise InvalidValueError(f"--no-flash-attn and --flash-attn {flash_attn} disagree.", "Give one of them.")
    if prompt is not None and context is not None and prompt > context:
        raise InvalidValueError(f"--prompt {prompt:,} is longer than --context {context:,}: the context holds the "
                                "prompt and the answer.", "Give a --prompt within --context.")
    if emit is not None and fmt != "table":
        raise InvalidValueError(f"--emit {emit} prints launch lines: it does not combine with --format or --json.",
                                "Run --emit on its own, and the report in a second command.")
    if emit == "sglang" and fp4_kernel == "marlin":
        raise InvalidValueError("--fp4-kernel marlin with --emit sglang: no SGLang launch flag for it is known here "
                                "(vLLM's is --linear-backend marlin).", "Use --emit vllm, or drop --fp4-kernel.")
    if emit is not None and levers:
        raise InvalidValueError(f"--emit {emit} prints launch lines, --levers a report: one at a time.",
                                "Run --levers on its own, and --emit in a second command.")
    if emit is not None and kv_policy is not None:
        raise InvalidValueError(f"--kv-policy {kv_policy} is a what-if no engine runs: --emit has no launch line "
                                "for it.", "Drop --kv-policy to print the launch lines.")
    flash_attn = "off" if no_flash_attn else flash_attn
    cat = _catalog(catalog)
    g = _gpu(cat, gpu)
    run = None
    if calibrate is not None:  # read before any work: a bad file is refused first
        from llmsize.importer.calibration import read_run

        run = read_run(calibrate)
    exact, notes, warnings = None, [], []
    im = _import_source(model, hub, estimate_only, hub_file)
    if im is not None:
        m, exact, notes, warnings = im.spec, im.exact, im.notes, im.warnings
    else:
        m = cat.model(model)
    if emit in ("llama-server", "ollama"):
        if engine not in (None, "llamacpp", "ollama"):
            raise InvalidValueError(f"--emit {emit} is llama.cpp's command, and --engine {engine} is not llama.cpp.",
                                    "Drop --engine, or use --engine llamacpp (or ollama).")
        if tp * (pp or 1) * (nodes or 1) > 1:
            raise InvalidValueError(f"--emit {emit}: llama.cpp's plan is one GPU; --tp/--pp/--nodes split across "
                                    "cards is not modelled for it.", "Drop --tp/--pp/--nodes, or use --emit vllm for "
                                    "a split.")
        engine = engine or ("ollama" if emit == "ollama" else "llamacpp")
    llama_opts = [name for name, given in (
        ("--gpu-layers", gpu_layers is not None), ("--n-cpu-moe", bool(n_cpu_moe)), ("--cpu-moe", cpu_moe),
        ("--fit", fit), ("--parallel", parallel != 1), ("--kv-unified", kv_unified),
        ("--cache-type-k", cache_type_k.lower() != "f16"), ("--cache-type-v", cache_type_v.lower() != "f16"),
        ("--ubatch-size", ubatch_size != 512), ("--swa-full", swa_full)) if given]
    if llama_opts and engine not in (None, "llamacpp", "ollama"):
        raise InvalidValueError(f"{llama_opts[0]} is a llama.cpp option, and --engine {engine} is not llama.cpp.",
                                f"Drop {llama_opts[0]}, or use --engine llamacpp (or ollama).")
    if llama_opts and emit in ("vllm", "sglang"):
        raise InvalidValueError(f"{llama_opts[0]} is a llama.cpp option, and --emit {emit} prints {emit}'s launch "
                                "line.", f"Drop {llama_opts[0]}, or use --emit llama-server.")
    serving_opts = [name for name, given in (
        ("--engine-version", engine_version.strip().lower() != "v1"), ("--block-size", block_size != 16),
        ("--non-torch-gib", non_torch_gib is not None), ("--cudagraph-gib", cudagraph_gib is not None),
        ("--max-num-batched-tokens", max_num_batched_tokens is not None),
        ("--max-model-len", max_model_len is not None and emit not in ("vllm", "sglang"))) if given]
    if serving_opts and emit is not None:  # a launch line is made from the plan, not from the ledger's options
        raise InvalidValueError(f"{serving_opts[0]} sizes a serving engine's memory ledger, and --emit {emit} prints a "
                                "launch line without it.", f"Drop {serving_opts[0]}, or drop --emit for --engine's "
                                "ledger.")
    if serving_opts and engine not in ("vllm", "sglang", "trtllm"):  # they size a serving engine's ledger only
        raise InvalidValueError(f"{serving_opts[0]} sizes a serving engine's memory ledger, and this plan prints "
                                f"none{f' (--engine {engine} is llama.cpp)' if engine else ''}.",
                                f"Add --engine vllm (or sglang, trtllm), or drop {serving_opts[0]}.")
    if engine in ("sglang", "trtllm") and "--engine-version" in serving_opts:
        raise InvalidValueError(f"--engine-version is vLLM's release, and --engine {engine} is not vLLM.",
                                "Drop --engine-version, or use --engine vllm.")
    split = tp * (pp or 1) * (nodes or 1) > 1  # llama.cpp's ledger is one GPU's; its cache types alone still apply
    if llama_opts and engine is None and not (split and set(llama_opts) <= {"--cache-type-k", "--cache-type-v"}):
        # llama.cpp's own options say which engine's ledger to plan
        engine = "llamacpp"
        notes.append(f"{', '.join(llama_opts)}: llama.cpp's options, so its ledger is planned (--engine llamacpp)")
    from llmsize.estimate.llamacpp_options import ollama_default_context

    wired = _gb_bytes(wired_limit_gb)  # --wired-limit-gb is in GB (10^9 B)
    if context is None:
        context, why = (ollama_default_context(g, m, wired) if engine == "ollama" else _default_context(m))
        notes += [why] if why else []
        if prompt is not None and prompt > context:
            raise InvalidValueError(f"--prompt {prompt:,} is longer than --context {context:,} (its default): the "
                                    "context holds the prompt and the answer.", "Give --context as well, at least the "
                                    "prompt.")
    if engine == "ollama" and gpu_layers is None and not fit:
        fit = True  # Ollama sets num_gpu itself: as many layers as its memory estimate puts on the card
        notes.append("Ollama places the layers itself (num_gpu unset): the plan takes the split that fits, as "
                     "llama.cpp's --fit does (--gpu-layers N sets one)")
    # the runtime the plan is for (its share of the card, the expected speed): --runtime, else the engine whose
    # ledger is planned, else the serving engine whose launch line is emitted
    plan_runtime = (runtime.lower() if runtime else None) or engine or (emit if emit in ("vllm", "sglang") else None)
    from llmsize.estimate.runtimes import resolve_runtime

    if runtime and engine and resolve_runtime(runtime)[0] != resolve_runtime(engine)[0]:
        raise InvalidValueError(f"--runtime {runtime} asks for {runtime}'s expected speed, and --engine {engine} plans "
                                f"{engine}'s memory ledger: one plan is sized for one runtime.",
                                "Drop --runtime (--engine sets it), or give both the same runtime.")
    if emit in ("vllm", "sglang") and plan_runtime != emit:
        raise InvalidValueError(f"--emit {emit} prints {emit}'s launch line, and this plan is sized for "
                                f"{plan_runtime} (its share of the card, its ledger).",
                                f"Drop --engine / --runtime, or use --emit "
                                f"{'llama-server' if plan_runtime in ('llamacpp', 'ollama') else plan_runtime}.")
    from llmsize.estimate.runtimes import gguf_exact

    if quant is not None and exact is not None and gguf_exact(exact) and engine in ("llamacpp", "ollama"):
        raise InvalidValueError(f"--quant {quant}: {model} is a GGUF file, and llama.cpp loads that file's own "
                                "tensors (its ledger and launch line are the file's).",
                                "Drop --quant, or plan the model's catalog id or Hugging Face folder with --quant.")
    typed = (cache_type_k.lower(), cache_type_v.lower()) != ("f16", "f16")
    if engine in ("llamacpp", "ollama") and kv_dtype and (kv_dtype.lower() not in ("bf16", "fp16") or typed):
        raise InvalidValueError(f"--kv-dtype {kv_dtype} is the serving engines' cache option; llama.cpp's ledger "
                                "takes its own types.", "Use --cache-type-k q8_0 --cache-type-v q8_0 (and --flash-attn "
                                "on), or drop --kv-dtype.")
    if engine in ("llamacpp", "ollama", None) and not kv_dtype and typed:
        from llmsize.estimate.quant import llamacpp_kv_dtype

        kv_dtype = llamacpp_kv_dtype(cache_type_k, cache_type_v)  # the plan's cache, capacity and reads as the ledger's
    from llmsize.estimate.llamacpp_options import LlamaCppOptions, check_options, flash_attn_on, slot_context

    # flash attention as the plan's engine runs it: --no-flash-attn or --flash-attn off; Ollama's default is off
    attention_fused = flash_attn_on(engine, flash_attn)
    llama_options = None
    if engine in ("llamacpp", "ollama"):  # the ledger planned, and the plan's budget (llamacpp_budget.py)

        llama_options = LlamaCppOptions(context, parallel, kv_unified, cache_type_k, cache_type_v, flash_attn,
                                        ubatch_size, swa_full, gpu_layers, n_cpu_moe, cpu_moe)
        check_options(engine, llama_options)
        context, slot_note = slot_context(engine, llama_options, prompt)  # -c shared by the slots: one holds less
        notes += [slot_note] if slot_note else []
    inputs = PlanInputs(quant=quant, scope=scope, kv_dtype=kv_dtype.lower() if kv_dtype else None,
                        context_tokens=context, batch=batch,
                        prompt_tokens=prompt, gpu_util=gpu_util, overhead_bytes=_gib_bytes(overhead_gib),
                        compute_precision=compute, tp=tp, pp=_stages(pp, nodes), nodes=nodes,
                        node_link_gb_s=node_link_gb_s,
                        wired_limit_bytes=wired, kv_policy=policy,
                        spec=parse_spec(spec, cat), flash_attn=attention_fused,
                        runtime=plan_runtime, llamacpp=llama_options, backend=gpu_backend,
                        fp4_kernel=fp4_kernel)
    p = make_plan(m, g, inputs, exact=exact, notes=notes, warnings=warnings)
    check_backend(gpu_backend, plan_runtime, p)  # the plan's runtime on this card
    check_fp4_kernel(p, plan_runtime)
    served = engine if engine in ("vllm", "sglang", "trtllm") else emit if emit in ("vllm", "sglang") else None
    if served:  # a serving engine's ledger or launch line for a card it does not run on (Apple, Intel Arc)
        from llmsize.estimate.runtimes import not_on

        elsewhere = not_on(served, g)
        if elsewhere:
            flag = f"--engine {engine}" if engine == served else f"--emit {emit}"
            raise InvalidValueError(f"{flag} on {g.id}: {elsewhere}.",
                                    "Pick a card it runs on." if not_on("llamacpp", g) else
                                    "Plan that card with --engine llamacpp (or ollama), or pick a card it runs on.")
    _check_engine_takes(p, g, engine, emit, runtime, plan_runtime, kv_dtype)
    if not p.budget.weights_fit:  # name a bigger card: only now is the whole hardware catalog parsed
        p = make_plan(m, g, inputs, candidates=cat.hardware.all(), exact=exact, notes=notes, warnings=warnings)
    ledger = llama = None
    host = _host_memory(host_memory, host_bandwidth_gb_s, cat)
    offload = _offload_lever(p, exact, host, cat) if not p.budget.weights_fit else None
    if offload is not None:
        p.diagnosis.levers.append(offload.sentence)
    if llama_options is not None:
        llama = _llamacpp(p, exact, engine, llama_options, host, cat, fit)
    elif engine is not None:
        from llmsize.estimate.engines import EngineInputs, engine_ledger

        e = EngineInputs(engine=engine, gpu_util=p.inputs.gpu_util, max_model_len=max_model_len,
                         max_num_batched_tokens=max_num_batched_tokens, block_size=block_size,
                         kv_dtype=p.inputs.kv_dtype, tp=tp, weight_format=p.fmt.id,
                         non_torch_bytes=None if non_torch_gib is None else int(non_torch_gib * GiB),
                         version=engine_version.lower(),
                         cudagraph_bytes=None if cudagraph_gib is None else int(cudagraph_gib * GiB))
        ledger = engine_ledger(p.card_model or m, g, (p.weights_card or p.weights).bytes_total, e)
    from llmsize.estimate.expected import expect_for_cli

    expected = expect_for_cli(p, cat, plan_runtime if run is None else (runtime.lower() if runtime else None) or engine,
                              run,
                              None if calibrate is None else str(calibrate), flash_attn, engine, ubatch_size)
    if llama is not None:
        from llmsize.estimate.llamacpp_plan import ledger_words, with_ledger

        expected = with_ledger(expected, llama)
        p.warnings[:], extra = ledger_words(p.warnings, llama, engine, p.inputs.context_tokens)
        p.notes.extend(extra)
    table = None
    if levers:
        from llmsize.estimate.levers import lever_table

        source = [model] if model else ["--hub", hub] + (["--file", hub_file] if hub_file else [])
        host_args = (["--host-memory", host_memory] if host_memory else []) + (
            ["--host-bandwidth-gb-s", f"{host_bandwidth_gb_s:g}"] if host_bandwidth_gb_s is not None else [])
        table = lever_table(p, [m.id] if im is None else source,
                            lambda i: make_plan(m, g, i, exact=exact, search_fit=False), cat.models.all(),
                            lambda other, i: make_plan(other, g, i, search_fit=False), expected.runtime,
                            lambda i: _offload_lever(make_plan(m, g, i, exact=exact, search_fit=False), exact, host,
                                                     cat),
                            tuple(host_args), {r.id: r for r in cat.runtimes.all()})
    if emit in ("llama-server", "ollama"):
        from llmsize.render.emit_llamacpp import llama_server_command, ollama_modelfile

        if emit == "ollama" and llama.ledger.settings.n_cpu_moe:
            raise InvalidValueError(
                f"--emit ollama: this plan keeps the routed experts of {llama.ledger.settings.n_cpu_moe} layers on "
                "the host (--n-cpu-moe), and Ollama has no such setting (its num_gpu moves whole layers).",
                "Use --engine ollama --fit for Ollama's placement, or --emit llama-server.")
        led = llama.ledger
        if not llama.fits:  # the command would fail to load, or spill to the host
            who = "llama-server" if emit == "llama-server" else "Ollama"
            raise InvalidValueError(
                f"--emit {emit}: with {led.gpu_layers} layers on the GPU the plan needs "
                f"{led.gpu_total_bytes / GiB:.2f} GiB of {g.name}'s {llama.card_bytes / GiB:.2f} GiB: {who} would "
                "not load it with these settings.",
                "Add --fit for the split that fits, or give --gpu-layers N"
                + (" / --n-cpu-moe N" if emit == "llama-server" else "")
                + ", a shorter --context or a smaller --quant.")
        make = llama_server_command if emit == "llama-server" else ollama_modelfile
        sys.stdout.write(make(p, led, model if im is not None else None) + "\n")
        return
    if emit is not None:
        from llmsize.render.emit import serve_command

        if not p.budget.weights_fit:  # the engine would not start: a launch line for it misleads
            from llmsize.estimate.runtimes import RUNTIME_NAMES

            w = (p.weights_card or p.weights).bytes_total
            split = f"--tp {p.fit.tp}" + (f" --pp {p.fit.pp}" if p.fit.pp > 1 else "") if p.fit else None
            raise InvalidValueError(
                f"--emit {emit}: {p.model.name}'s weights ({w / GB:.1f} GB in {p.fmt.id}"
                f"{' per card' if p.weights_card else ''}) and the runtime's overhead exceed {g.name}'s "
                f"{p.budget.budget_bytes / GB:.1f} GB budget: {RUNTIME_NAMES[emit]} would not start.",
                f"Use {split} (the fewest cards that hold it), or give a smaller --quant." if split else
                "Split it over more cards (a larger --tp or --pp), or give a smaller --quant.")
        sys.stdout.write(serve_command(p, emit, model if im is not None else None, max_model_len) + "\n")
        return
    if fmt == "json":
        _print_json(_plan_dict(p, ledger, llama, g, expected, table))
    elif fmt == "html":
        import io

        from rich.console import Console

        from llmsize.estimate.charts import plan_charts
        from llmsize.render.plan_html import render_plan_html

        buf = io.StringIO()
        _plan_text(p, ledger, llama, g, expected, Console(file=buf, width=MAX_WIDTH, color_system=None,
                                                          highlight=False, soft_wrap=False), MAX_WIDTH, False, table)
        roofs, curves = plan_charts(p)
        sys.stdout.write(render_plan_html(p, _plan_dict(p, ledger, llama, g, expected, table), buf.getvalue(), roofs,
                                          curves))
    else:
        from llmsize.render.text import color_enabled

        _plan_text(p, ledger, llama, g, expected, _console(), _width(), color_enabled(), table)


def _plan_dict(p, ledger, llama, g, expected, levers=None) -> dict:
    from llmsize.render.expected_report import expected_to_dict
    from llmsize.render.plan_json import plan_to_dict

    d = plan_to_dict(p)
    if ledger is not None:
        from llmsize.render.engine_report import ledger_to_dict

        d["engine"] = ledger_to_dict(ledger)
    if llama is not None:
        from llmsize.render.llamacpp_report import llamacpp_to_dict

        d["engine"] = llamacpp_to_dict(llama, g)
        d["offload"] = d["engine"]["offload"]  # the per-device split at the top level too, as `offload.devices[]`
    d["expected"] = expected_to_dict(expected)
    if levers is not None:
        from llmsize.estimate.levers import lever_dict

        d["levers"] = [lever_dict(lv) for lv in levers]
    return d


def _plan_text(p, ledger, llama, g, expected, console, width: int, color: bool, levers=None) -> None:
    """plan's report: the plan, the engine's ledger, the expected speed, on `console` (its file)."""
    from llmsize.estimate.llamacpp_plan import placement_words
    from llmsize.render.expected_report import render_expected
    from llmsize.render.plan_report import render_plan

    console.file.write(render_plan(p, width, color, placement_words(llama) if llama is not None else None))
    if ledger is not None:
        from llmsize.render.engine_report import render_ledger

        render_ledger(ledger, console)
    if llama is not None:
        from llmsize.render.llamacpp_report import render_llamacpp

        render_llamacpp(llama, g, console)
    render_expected(expected, p, console)
    if levers is not None:
        from llmsize.estimate.runtimes import RUNTIME_NAMES
        from llmsize.render.levers_report import render_levers

        render_levers(levers, console, width, RUNTIME_NAMES.get(expected.runtime))

def _llamacpp_constants(p, cat):
    from llmsize.estimate.runtimes import backend, constants

    spec = next((r for r in cat.runtimes.all() if r.id == "llamacpp"), None)
    return constants(spec, backend(p.gpu), p.gpu) if spec is not None and backend(p.gpu) else None


def _gpu(cat, name: str):
    """A catalog card, or with `local` this machine's, detected offline and said on stderr."""
    return _local_gpu(cat, name)[0]


def _local_gpu(cat, name: str):
    """(card, this machine's RAM in bytes or None): the RAM only with `local`, where it was read."""
    if name.strip().lower() != "local":
        return cat.gpu(name), None
    from llmsize.importer.local_machine import detect

    found = detect(cat.hardware.all())
    sys.stderr.write(f"--gpu local: {found.found} -> {found.gpu.id}\n")
    return found.gpu, found.host_ram_bytes


def _host_memory(spec, bandwidth_gb_s, cat):
    from llmsize.estimate.host_memory import host_memory, platforms

    return host_memory(spec, bandwidth_gb_s, platforms(cat.hosts.all()) if spec else None)


def _offload_lever(p, exact, host, cat):
    from llmsize.estimate.llamacpp_options import card_bytes
    from llmsize.estimate.llamacpp_plan import offload_lever
    from llmsize.estimate.speed import format_class

    return offload_lever(p, exact, card_bytes(p.gpu, p.inputs.wired_limit_bytes), host, _llamacpp_constants(p, cat),
                         format_class(p.fmt.id))


def _llamacpp(p, exact, engine, options, host, cat, fit):
    from llmsize.estimate.llamacpp_options import card_bytes
    from llmsize.estimate.llamacpp_plan import llamacpp_plan
    from llmsize.estimate.speed import format_class

    return llamacpp_plan(p, exact, engine, options, host, _llamacpp_constants(p, cat),
                         card_bytes(p.gpu, p.inputs.wired_limit_bytes), fit,
                         format_class(p.fmt.id))


def _one_format(as_json: bool, fmt: str) -> str:
    """The output --json or --format asks for ("json" with --json), refused where they ask for two."""
    if as_json and fmt not in ("table", "json"):
        raise InvalidValueError(f"--json and --format {fmt} ask for two outputs.", "Give one of them.")
    return "json" if as_json else fmt


def _default_context(m) -> tuple[int, str | None]:
    """The context a plan sizes when --context is not given (plan.default_context of DEFAULT_CONTEXT), and why."""
    from llmsize.estimate.plan import default_context

    return default_context(m, DEFAULT_CONTEXT)


def _gib_bytes(gib: float | None) -> float | None:
    """An option given in GiB, in bytes; None where it was not given."""
    return None if gib is None else gib * GiB


def _gb_bytes(gb: float | None) -> float | None:
    """An option given in GB (10^9 B), in bytes; None where it was not given."""
    return None if gb is None else gb * GB


def _stages(pp: int | None, nodes: int | None) -> int:
    """--pp, or one stage per node with --nodes; both must agree."""
    if pp is not None and nodes is not None and pp != nodes:
        raise InvalidValueError(f"--pp {pp} and --nodes {nodes} disagree: --nodes puts one pipeline stage on "
                                "each node.", "Give one of them.")
    return pp if pp is not None else (nodes or 1)


# what each command that takes a model or --hub shows as an example when given neither (or both)
_MODEL_EXAMPLES = {"plan": "llmsize plan gemma-4-12b --gpu h200",
                   "compare": "llmsize compare gemma-4-12b --vendor nvidia",
                   "roofline": "llmsize roofline gemma-4-12b --gpu h200", "kv": "llmsize kv llama-3.1-8b",
                   "import": "llmsize import ./my-model -o my-model.yaml"}


def _import_source(model: str | None, hub: str | None, estimate_only: bool = False, hub_file: str | None = None,
                   command: str = "plan"):
    """An Imported for a path or --hub, None for a catalog name."""
    if (model is None) == (hub is None):
        what = "a checkpoint (a folder, config.json or .gguf file)" if command == "import" else \
            "a model (catalog id or path)"
        raise InvalidValueError(f"Give {what} or --hub ORG/NAME, not both or neither.",
                                f"e.g. `{_MODEL_EXAMPLES[command]}` or `--hub google/gemma-3-27b-it`.")
    if hub_file is not None and hub is None:
        raise InvalidValueError(f"--file `{hub_file}` needs --hub ORG/NAME.",
                                "For a local file, pass its path as the model: `llmsize plan ./model.gguf ...`.")
    if hub is not None and hub_file is not None:
        from llmsize.importer.source import import_hub_gguf

        return import_hub_gguf(hub, hub_file)
    if hub is not None:
        from llmsize.importer.source import import_hub

        return import_hub(hub, estimate_only)
    if _is_path(model):
        from llmsize.importer.source import import_model

        return import_model(model, estimate_only=estimate_only)
    return None


def _warn(im) -> None:
    """An import's warnings (the plan is not what the files hold), before anything else is printed."""
    for w in (im.warnings if im is not None else []):
        sys.stderr.write(f"Warning: {w}\n")


def _is_path(name: str) -> bool:
    """A model argument naming something on disk (or shaped like a path) is imported, not looked up."""
    return os.path.exists(name) or name.endswith((".json", ".gguf")) or name.startswith((".", "/", "~"))


@_command("import")
def import_(
    path: Annotated[Optional[str], typer.Argument(help="Model folder (config.json [+ hf_quant_config.json] "
                                                   "[+ *.safetensors]), a config.json file, or a .gguf file "
                                                   "(the first of its splits).",
                                                   show_default=False)] = None,
    hub: HubOpt = None,
    hub_file: HubFileOpt = None,
    output: ImportOutOpt = None,
    model_id: IdOpt = None,
    force: ForceOpt = False,
    estimate_only: EstimateOnlyOpt = False,
):
    """Turn a local checkpoint, config.json or GGUF file into a catalog entry, with its sources.

    Examples:

    \b
      llmsize import ./Llama-3.1-8B-Instruct -o mycat/models/my-llama.yaml
      llmsize import ./config.json
      llmsize import ./Qwen3-8B-Q4_K_M.gguf -o mycat/models/qwen3-8b-q4.yaml
      llmsize import --hub Qwen/Qwen3-8B -o mycat/models/qwen3-8b.yaml
    """
    from llmsize.files import check_output, write_output
    from llmsize.importer.catalog_entry import check_id, entry_yaml, recipe_warning

    if path is not None and not path.strip():  # (a Path of '' would read as the current folder)
        raise InvalidValueError("The checkpoint path is empty.", "Give a model folder, a config.json or a .gguf file.")
    if path is not None and not _is_path(path):
        raise InvalidValueError(f"`{path}` is not a file or folder.", "Give a model folder or a config.json.")
    if model_id is not None:  # the id given, before a file name is made of it
        check_id(model_id, "--id")
    if output is not None:  # the destination and the id it gives are checked before anything is read
        if not output.name or str(output) == ".":  # `-o ''` (a Path of it reads as the current folder)
            raise InvalidValueError("-o names no file.",
                                    "Give the catalog file to write, e.g. -o mycat/models/ID.yaml.")
        if output.suffix != ".yaml":
            raise InvalidValueError(f"-o `{output}` must end in .yaml.", "Catalog files are `ID.yaml`.")
        check_output(output, "-o", force)
        model_id = model_id or output.stem
        if output.stem != model_id:
            raise InvalidValueError(f"-o `{output}` and --id `{model_id}` differ: a catalog file is named after its "
                                    "id.", f"Write it to {output.with_name(model_id + '.yaml')}, or drop --id.")
        check_id(model_id, "-o")
    im = _import_source(path, hub, estimate_only, hub_file, command="import")
    _warn(im)
    if (recipe := recipe_warning(im)) is not None:
        sys.stderr.write(f"Warning: {recipe}\n")
    text = entry_yaml(im, model_id)
    if output is None:
        sys.stdout.write(text)
        return
    write_output(output, text, "-o", force)
    if output.parent.name == "models":  # a catalog folder's models/ shelf
        hint = f"plan it with `llmsize plan {model_id} --gpu CARD --catalog {output.parent.parent}`"
    else:
        hint = (f"to plan it by id, put it in a catalog folder's models/ (say mycat/models/{output.name}) and "
                f"pass `--catalog mycat`")
    sys.stderr.write(f"Wrote {output} (id {model_id}); {hint}.\n")


@_command()
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
    node_link_gb_s: NodeLinkOpt = 50.0,
    prices: PricesOpt = None,
    runtime: RuntimeOpt = None,
    gpu_backend: BackendOpt = None,
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
    fmt = _one_format(as_json, fmt)
    if sort in ("price", "tok_s_per_kcurrency") and prices is None:
        raise InvalidValueError(f"--sort {sort} ranks by the prices --prices reads, and none were given (none are "
                                "shipped).", "Add --prices prices.yaml (`prices:` card id -> price), or sort by "
                                "another column.")
    from llmsize.estimate.runtimes import check_backend

    check_backend(gpu_backend, runtime)  # before any work: Vulkan under a runtime without one
    from llmsize.estimate.compare import compare as run_compare
    from llmsize.estimate.compare import sort_rows
    from llmsize.estimate.plan import PlanInputs

    cat = _catalog(catalog)
    im = _import_source(model, hub, estimate_only, hub_file, command="compare")
    _warn(im)
    m = im.spec if im is not None else cat.model(model)
    context = _default_context(m)[0] if context is None else context
    check_backend(gpu_backend, runtime, fmt_id=quant or m.release.quant)
    if runtime:  # one runtime for every row: a cache it cannot store sizes nothing it runs
        from llmsize.estimate.runtimes import resolve_runtime

        _refuse_cache(resolve_runtime(runtime)[0], f"--runtime {runtime}", kv_dtype)
    cards = _card_list(cat, gpus_)
    if vendor:
        cards = [g for g in cards if g.vendor.lower() == vendor]
    if segment:
        cards = [g for g in cards if g.segment == segment]
    if not cards:
        raise InvalidValueError("No card matches these filters.", "Loosen --vendor / --segment / --gpus.")
    currency, price_map = None, {}
    if prices is not None:
        from llmsize.catalog.prices import load_prices

        currency, price_map = load_prices(prices, cat)
        if not any(g.id in price_map for g in cards):
            raise InvalidValueError(f"--prices `{prices}` has no price for the cards compared "
                                    f"({', '.join(g.id for g in cards[:6])}{', ...' if len(cards) > 6 else ''}).",
                                    "Add their `prices:`, or drop --prices.")
    stages = _stages(pp, nodes)
    inputs = PlanInputs(quant=quant, kv_dtype=kv_dtype.lower(), context_tokens=context, gpu_util=gpu_util,
                        overhead_bytes=_gib_bytes(overhead_gib), tp=tp or 1, pp=stages, nodes=nodes,
                        node_link_gb_s=node_link_gb_s, runtime=runtime.lower() if runtime else None,
                        backend=gpu_backend)
    fixed = tp is not None or stages > 1
    runtimes = {r.id: r for r in cat.runtimes.all()}
    rows = sort_rows(run_compare(m, cards, inputs, users, price_map, fixed=fixed, runtimes=runtimes,
                                 runtime=runtime), sort)
    title = (f"llmsize compare: {m.name}, {rows[0].plan.fmt.id if rows[0].plan else quant or m.release.quant}, "
             f"{context:,} tokens, {users} user(s)")
    notes = ["Units: GB = 10^9 B, GiB = 2^30 B. GiB: every card's vendor capacity read the same way (a \"24 GB\" "
             "card holds 24 GiB of DRAM; drivers report up to 6.3% less, ECC's share on an A10, L4, L40S or T4). "
             "A card that cannot hold the model alone is "
             "costed on `cards` of it (tensor/pipeline parallel); TTFT is for a --context-token prompt; tok/s/W "
             "uses the catalog TDP x cards."]
    utils = sorted({r.plan.budget.gpu_util for r in rows if r.plan})
    if inputs.gpu_util is None and len(utils) > 1:
        notes.append("Budgets: VRAM x 0.9 under the serving engines, the whole VRAM under llama.cpp (GGUF formats, "
                     "Apple cards), as each card's runtime reserves it.")
    if gpu_backend:
        notes.append(f"Expected speeds on --backend {gpu_backend}" + (
            ": llama.cpp's Vulkan build, on NVIDIA and AMD cards (- on Apple cards, where it runs on Metal, on AMD "
            "Instinct cards, which AMD's Vulkan drivers do not run, and on Intel Arc cards, not fitted yet)."
            if gpu_backend == "vulkan" else ": - on cards whose own backend it is not."))
    beyond = next((n for r in rows if r.plan for n in r.plan.notes if n.startswith("--context ")), None)
    if beyond:  # the plan's own note: the figures are for a context the model's engines refuse
        notes.append(beyond + ".")
    served = {r.users_served for r in rows if r.plan}
    if any(s < users for s in served):
        notes.append(f"Rows whose cache holds fewer than {users} sequences are aggregated at what it holds.")
    if fmt == "json":
        from llmsize.render.compare_table import rows_to_dicts

        _print_json({"model": m.id, "inputs": {"quant": quant, "kv_dtype": kv_dtype, "context_tokens": context,
                                               "users": users, "gpu_util": gpu_util, "sort": sort,
                                               "currency": currency, "runtime": runtime, "backend": gpu_backend},
                     "rows": rows_to_dicts(rows), "notes": notes})
    elif fmt == "csv":
        from llmsize.render.compare_table import render_csv

        sys.stdout.write(render_csv(rows, currency))
    elif fmt == "markdown":
        from llmsize.render.compare_table import render_markdown

        sys.stdout.write(render_markdown(rows, currency, title))
    elif fmt == "html":
        from dataclasses import replace as _replace

        from llmsize.estimate.charts import rooflines
        from llmsize.render.compare_table import render_html

        roofs = rooflines(m, [(r.gpu, _replace(inputs, tp=r.tp, pp=r.pp)) for r in rows if r.plan][:4])
        sys.stdout.write(render_html(rows, currency, title, notes, roofs))
    else:
        from llmsize.render.compare_table import render_table

        render_table(rows, currency, title, notes, _console(WIDE_WIDTH))


@_command()
def roofline(
    model: ModelArg = None,
    gpu: GpusOpt = None,
    output: ChartOutOpt = None,
    quant: QuantOpt = None,
    kv_dtype: KvDtypeOpt = "bf16",
    context: ContextOpt = None,
    max_batch: MaxBatchOpt = 1024,
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
    context = DEFAULT_CONTEXT if context is None else context
    from llmsize.estimate.charts import roofline as roof_data
    from llmsize.estimate.plan import PlanInputs
    from llmsize.render import charts

    if not gpu:
        raise InvalidValueError("Missing option --gpu.", "Name one or more cards: --gpu h100 --gpu h200.")
    if output is not None:
        charts.check_image_path(output)
    cat = _catalog(catalog)
    im = _import_source(model, hub, estimate_only, hub_file, command="roofline")
    _warn(im)
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
    model: ModelArg = None,
    output: ChartOutOpt = None,
    quant: QuantOpt = None,
    users: KvUsersOpt = 1,
    max_context: MaxContextOpt = None,
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

    if output is not None:
        charts.check_image_path(output)
    cat = _catalog(catalog)
    im = _import_source(model, hub, estimate_only, hub_file, command="kv")
    _warn(im)
    m = im.spec if im is not None else cat.model(model)
    limit = max_context or m.max_position_embeddings
    if limit < 2:
        raise InvalidValueError(f"The model's max_position_embeddings ({limit}) leaves no context axis.",
                                "Pass --max-context 2 or more.")
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
    vendor: VendorOpt = None,
    segment: SegmentOpt = None,
    min_memory_gib: MinMemoryOpt = None,
    sort: GpuSortOpt = "bandwidth",
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
        items = [g for g in items if g.vendor.lower() == vendor]
    if segment:
        items = [g for g in items if g.segment == segment]
    if min_memory_gib is not None:
        items = [g for g in items if g.memory_bytes >= min_memory_gib * GiB]
    keys = {"bandwidth": lambda g: -g.bandwidth_gb_s, "memory": lambda g: -g.memory_bytes,
            "year": lambda g: -g.year, "id": lambda g: g.id}
    items.sort(key=keys[sort])
    if as_json:
        _print_json([gpu_row(g) for g in items])
    else:
        render_gpus(items, _console())


@_command("fit")
def fit_cmd(
    gpu: GpuOpt = "",
    context: FitContextOpt = None,
    runtime: RuntimeOpt = None,
    host_memory: HostMemoryOpt = None,
    host_bandwidth_gb_s: HostBandwidthOpt = None,
    host_ram_gib: HostRamOpt = None,
    wired_limit_gb: WiredLimitOpt = None,
    one_per_model: OnePerModelOpt = True,
    sort: FitSortOpt = "tok_s",
    min_tok_s: MinTokSOpt = None,
    top: TopOpt = 30,
    as_json: JsonOpt = False,
    catalog: CatalogOpt = None,
):
    """Which catalog models fit this card, in which format, and how fast: ranked by expected decode tok/s (or by
    model size).

    llama.cpp (the default on consumer and Apple cards) tries the GGUF file types and, where a model does not
    fit, the offload split its --fit would take (give --host-memory for that speed); the other runtimes try the
    release format, fp8, AWQ and NVFP4.

    Examples:

    \b
      llmsize fit --gpu rtx5060ti
      llmsize fit --gpu rtx5060ti --all-formats
      llmsize fit --gpu rtx3090 --context 32768 --host-memory ryzen-9000
      llmsize fit --gpu rtx4060ti16 --sort size --min-tok-s 20
      llmsize fit --gpu h100 --runtime vllm --json
    """
    asked_context = context
    context = DEFAULT_CONTEXT if context is None else context
    from llmsize.estimate.llamacpp_options import card_bytes
    from llmsize.estimate.model_fit import fit_models
    from llmsize.estimate.runtimes import resolve_runtime
    from llmsize.render.model_fit_report import fit_rows_to_dicts, render_fit

    if not gpu:
        raise InvalidValueError("Missing option --gpu.", "Name a card: `llmsize gpus` lists them.")
    cat = _catalog(catalog)
    g, local_ram = _local_gpu(cat, gpu)
    from llmsize.estimate.unified import is_unified

    if host_ram_gib is None and local_ram and not is_unified(g):
        # this machine's RAM bounds what it can offload (a unified machine has no separate pool to offload to)
        host_ram_gib = local_ram / GiB
        sys.stderr.write(f"--gpu local: {host_ram_gib:.1f} GiB of RAM (/proc/meminfo MemTotal) bounds the "
                         "offloaded placements; --host-ram-gib sets another figure\n")
    host = _host_memory(host_memory, host_bandwidth_gb_s, cat)
    rid = resolve_runtime(runtime)[0] if runtime else ("vllm" if g.segment == "datacenter" else "llamacpp")
    from llmsize.estimate.runtimes import RUNTIME_NAMES, not_on

    elsewhere = not_on(rid, g) if runtime else None  # a runtime named for a card it does not run on
    if elsewhere:
        why, _, advice = elsewhere.partition("; pick ")  # its advice is the hint, said once
        raise InvalidValueError(f"--runtime {runtime} on {g.id}: {why}.",
                                f"Pick {advice}." if advice else "Pick a runtime that runs there.")
    runtimes = {r.id: r for r in cat.runtimes.all()}
    if min_tok_s is not None:  # a floor on a figure the card has none of would drop every row: say why instead
        from llmsize.estimate.fleet import runtime_refusal

        why = runtime_refusal(rid, runtimes, g)
        if why:
            raise InvalidValueError(f"--min-tok-s {min_tok_s:g}: {RUNTIME_NAMES[rid]} has no expected figure on "
                                    f"{g.id} ({why}).", "Drop --min-tok-s: the list still says what fits the card.")
    from llmsize.estimate.model_fit import unused_host

    fit_notes = []
    unused = unused_host(g, rid) if host is not None else None
    if unused:
        fit_notes.append(f"--host-memory {host.name} not used: {unused}")
        host = None

    class _P:  # the llama.cpp constants' lookup needs only the card
        pass

    probe = _P()
    probe.gpu = g
    wired = _gb_bytes(wired_limit_gb)
    fit_engine = "ollama" if (runtime or "").lower() == "ollama" else "llamacpp"
    ollama_ctx = fit_engine == "ollama" and asked_context is None
    if ollama_ctx:  # Ollama's own num_ctx by the card's memory, each model at most its own context
        from llmsize.estimate.llamacpp_options import ollama_context_words, ollama_num_ctx

        context = ollama_num_ctx(g, wired)
        fit_notes.append(ollama_context_words(context, g, wired, each_model=True))
    longest = max(cat.models.all(), key=lambda x: x.max_position_embeddings)
    if asked_context is not None and asked_context > longest.max_position_embeddings:
        raise InvalidValueError(f"--context {asked_context:,}: no catalog model takes that many tokens (the longest "
                                f"is {longest.id}'s {longest.max_position_embeddings:,}).",
                                f"Give --context {longest.max_position_embeddings} or less.")
    rows, skipped, fitting = fit_models(cat.models.all(), g, rid, context, runtimes, card_bytes(g, wired), host,
                               _llamacpp_constants(probe, cat),
                               None if host_ram_gib is None else host_ram_gib * GiB, one_per_model, wired,
                               sort.lower(), min_tok_s, fit_engine, cap_to_model=ollama_ctx)
    if as_json:
        _print_json({"gpu": g.id, "runtime": rid, "engine": fit_engine if rid == "llamacpp" else None,
                     "context_tokens": context,
                     "host_memory": host.name if host else None, "sort": sort.lower(), "min_tok_s": min_tok_s,
                     "fitting": fitting, "rows": fit_rows_to_dicts(rows), "skipped": skipped, "notes": fit_notes})
    else:
        render_fit(rows[:top], g, rid, context, host, skipped, len(rows), _console(), sort.lower(), min_tok_s,
                   fitting, one_per_model, fit_notes, fit_engine, wired_limit=wired_limit_gb is not None)


def _no_card_serves(rows, w, mode: str | None = None, what: str = "") -> InvalidValueError:
    """The one line for a workload no card serves (within its targets, in --mode's mode): a card and its why_not."""
    why = next((f" ({r.card}: {r.why_not})" for r in rows if r.why_not), "")
    targets = w.ttft_s is not None or w.tpot_s is not None
    return InvalidValueError(f"No card serves the workload{' ' + mode if mode else ''}{what}{why}.",
                             ("Loosen --ttft / --tpot, widen --gpus" if targets else "Widen --gpus")
                             + (", or drop --mode." if mode else ", or lower the load."))


@_command()
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
    kv_dtype: KvDtypeOpt = "bf16",
    node_link_gb_s: NodeLinkOpt = 50.0,
    emit: FleetEmitOpt = None,
    mode: ModeOpt = None,
    pareto: ParetoOpt = False,
    simulate: SimulateOpt = False,
    output: ChartOutOpt = None,
    fmt: FleetFormatOpt = "table",
    as_json: JsonOpt = False,
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
    from llmsize.render.fleet_report import fleet_to_dict, render_fleet

    if tpot is not None and tok_s_per_user is not None:
        raise InvalidValueError("--tpot and --tok-s-per-user say the same thing.", "Give one of them.")
    if output is not None:
        from llmsize.render.charts import check_image_path

        check_image_path(output)  # before any work
    fmt = _one_format(as_json, fmt)
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
    cat = _catalog(catalog)
    if not model:
        raise InvalidValueError("Missing the model.", "e.g. `llmsize fleet llama-3.1-70b --users 100`.")
    im = _import_source(model, None)
    _warn(im)
    m = im.spec if im is not None else cat.model(model)
    from llmsize.estimate.quant import kv_dtype_bytes

    kv_dtype_bytes(kv_dtype)  # an unknown KV dtype is refused before any work
    kv_dtype = kv_dtype.lower()
    cards = _card_list(cat, gpus_)
    cards = list({g.id: g for g in cards}.values())  # a card named twice (or by an alias) is sized once
    if vendor:
        cards = [g for g in cards if g.vendor.lower() == vendor]
    if segment:
        cards = [g for g in cards if g.segment == segment]
    if not cards:
        raise InvalidValueError("No card matches these filters.", "Loosen --vendor / --segment / --gpus.")
    currency, hourly = (None, None)
    if prices is not None:
        from llmsize.catalog.prices import load_prices

        currency, hourly = load_prices(prices, cat, "hourly")
        if not any(g.id in hourly for g in cards):
            raise InvalidValueError(f"--prices `{prices}` has no hourly price for the cards sized "
                                    f"({', '.join(g.id for g in cards[:6])}{', ...' if len(cards) > 6 else ''}).",
                                    "Add their `hourly:` prices, or drop --prices.")
    from llmsize.estimate.workload import workload_from_options

    w = workload_from_options(isl, osl, users, rate, ttft, tpot, tok_s_per_user, shared_prefix, spec, cat,
                              node_link_gb_s)
    from llmsize.estimate.fleet import default_runtime
    from llmsize.estimate.runtimes import resolve_runtime

    rid = resolve_runtime(runtime)[0] if runtime else default_runtime(emit, cards)
    if emit is not None and rid != emit:
        raise InvalidValueError(f"--emit {emit} prints {emit}'s launch lines, and the rows are sized for {rid}.",
                                f"Give --runtime {emit} (NVIDIA and AMD cards), or drop --emit.")
    from dataclasses import replace as _replace

    from llmsize.estimate.plan import resolve_format
    from llmsize.estimate.quant import RUNTIME_FORMATS, runtime_load_refusal

    weights = resolve_format(m, quant, None)[0].id
    refusal = runtime_load_refusal(rid, weights)
    if refusal is not None:
        raise InvalidValueError(f"--quant {weights}: {refusal}.", f"Give a format {rid} serves (e.g. "
                                f"{', '.join(RUNTIME_FORMATS.get(rid, ()))}), or another --runtime.")
    # rows sized with a cache the engine cannot be launched with
    _refuse_cache(rid, f"--runtime {rid}" + ("" if runtime else " (the default)"), kv_dtype, "another --runtime")
    w = _replace(w, quant=weights)
    from llmsize.estimate.fleet import runtime_refusal

    by_runtime = {r.id: r for r in cat.runtimes.all()}
    refusals = [(g.id, runtime_refusal(rid, by_runtime, g)) for g in cards]
    if all(why for _, why in refusals):  # no load or target would change it: the runtime, or the cards
        other = any(runtime_refusal(r, by_runtime, g) is None for r in by_runtime if r != rid for g in cards)
        raise InvalidValueError(f"--runtime {rid}{'' if runtime else ' (the default)'}: no card sized runs it "
                                f"({refusals[0][0]}: {refusals[0][1]}).",
                                "Give another --runtime, or --gpus it runs on." if other else
                                "No runtime here is fitted on these cards: give --gpus of NVIDIA, AMD or Apple "
                                "cards.")
    rows = fleet_rows(m, cards, w, rid, by_runtime, hourly, kv_dtype)
    if emit is not None:
        from llmsize.render.emit_fleet import fleet_command

        # the best card's row, or with --mode its configuration of that mode (the row or the other beside it)
        top = next((r for r in rows if r.meets_slo), None)
        if top is not None and mode is not None and top.mode != mode:
            top = top.other if top.other is not None and top.other.meets_slo and top.other.mode == mode else None
        if top is None:
            raise _no_card_serves(rows, w, mode, ": nothing to launch")
        sys.stdout.write(fleet_command(m, top, emit, w.longest_tokens(), kv_dtype, w.spec, w.quant) + "\n")
        return
    served = any(r.meets_slo for r in rows)
    if not served and fmt not in ("json", "csv"):
        # nothing to tabulate: the report would be empty (JSON and CSV keep each card's why_not for scripts)
        raise _no_card_serves(rows, w)
    runtimes = {r.id: r for r in cat.runtimes.all()}
    sims = None
    if simulate:
        from llmsize.estimate.fleet_simulation import simulate_rows

        sims = simulate_rows(m, cards, rows, w, rid, runtimes, kv_dtype)
    if fmt == "json":
        _print_json(fleet_to_dict(m, w, rid, currency, rows, sims, kv_dtype))
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
        render_fleet(m, w, rid, currency, rows, _console(WIDE_WIDTH), kv_dtype)
        if sims:
            from llmsize.render.fleet_report import render_simulated

            render_simulated(sims, _console())
    if not served:  # JSON and CSV printed each card's why_not; the exit code and line are the table's
        raise _no_card_serves(rows, w)
    if pareto or output is not None:
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
            sys.stderr.write(f"wrote {output}" + (f" ({note})" if note else "") + "\n")
        if pareto and fmt == "table":
            sys.stdout.write(pareto_text(m, curves, w.tpot_s, _width(), w.spec, rows) + "\n"
                             + (f"{note}\n" if note else ""))


def _card_list(cat, text: str | None) -> list:
    """--gpus: every card of the catalog when not given; else the named ones, none empty ("" or "a,,b" is refused:
    an empty list read as every card would size hundreds of cards nobody named)."""
    if text is None:
        return cat.hardware.all()
    items = [x.strip() for x in text.split(",")]
    if not any(items):
        raise InvalidValueError("--gpus is empty.", "Name cards (see `llmsize gpus`), or drop --gpus for every card.")
    if not all(items):
        raise InvalidValueError(f"--gpus {text!r} has an empty item.", "Separate card ids with single commas.")
    cards = {}  # a card named twice (an id and its alias) is one row
    for x in items:
        g = cat.gpu(x)
        cards.setdefault(g.id, g)
    return list(cards.values())


@_command()
def hosts(as_json: JsonOpt = False, catalog: CatalogOpt = None):
    """List host memory platforms (for --host-memory): channels, data rate, peak bandwidth.

    Examples:

    \b
      llmsize hosts
      llmsize plan gpt-oss-120b --gpu rtx3090 --quant gguf-mxfp4_moe --engine llamacpp --cpu-moe \\
          --host-memory epyc-9004
    """
    from llmsize.render.listing import host_row, render_hosts

    items = sorted(_catalog(catalog).hosts.all(), key=lambda h: -h.bandwidth_gb_s)
    if as_json:
        _print_json([host_row(h) for h in items])
    else:
        render_hosts(items, _console())


@_command()
def models(
    family: FamilyOpt = None,
    mixer: MixerOpt = None,
    moe: MoeOpt = None,
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
    if family is not None:
        families = sorted({m.family for m in items})  # the catalog's own: a closed set, known once loaded
        if family.lower() not in families:
            raise InvalidValueError(f"--family {not_one_of(family, families)}.", "See `llmsize models`.")
        items = [m for m in items if m.family == family.lower()]
    if mixer:
        items = [m for m in items if any(g.mixer is not None and g.mixer.kind == mixer for g in m.layer_groups)]
    if moe is not None:
        items = [m for m in items if m.is_moe == moe]
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
    except UnknownNameError as not_card:
        try:
            entry = cat.model(name)
        except UnknownNameError as e:  # the near names either shelf suggests
            import re

            near = [m.group(1) for m in (re.search(r"Did you mean (.+)\?", x.message) for x in (not_card, e)) if m]
            raise UnknownNameError(f"`{shown(name)}` is neither a card nor a model in the catalog."
                                   + (f" Did you mean {', '.join(near)}?" if near else ""),
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
    from llmsize.estimate.quant import FORMATS, KV_DTYPE_BYTES, RECIPE_PARTS

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
    for r, f in zip(rows, FORMATS.values()):  # a GGUF mix's bits depend on the model: its base type's shown
        bits = f"{r['bits_per_weight']:g}" + ("*" if f.mix else "")
        t.add_row(r["id"], bits, r["default_scope"], r["description"])
    from llmsize.render.columns import print_rich

    c = _console()
    print_rich(c, t)
    c.print("* a GGUF file type: its base type's bits; the file mixes types per tensor by llama-quantize's rules, so "
            "its average depends on the model (`llmsize plan MODEL --quant gguf-q4_k_m` prints it).", style="dim")
    c.print("A recipe gives a format per component, as ModelOpt's MIXED_PRECISION checkpoints do: --quant "
            "experts=nvfp4-w4a16,shared_experts=nvfp4-w4a16,attention=fp8,ssm=fp8,lm_head=nvfp4-w4a16 (components: "
            f"{', '.join(RECIPE_PARTS)}; what it does not name stays 16-bit).", style="dim")
    c.print("KV dtypes (bytes per value): " + ", ".join(f"{k} {float(v):g}" for k, v in KV_DTYPE_BYTES.items()),
            style="dim")


@_command()
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
        raise InvalidValueError(f"{flag} {'needs --server' if server is None else 'is for the GPU loop, not --server'}.",
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
        console = _console()
        with console.capture() as captured:
            render(result, console)
        report = captured.get()
    if save is not None:
        from llmsize.files import write_output

        write_output(save, json.dumps(result, indent=2) + "\n", "--save", force)
    if report is None:
        _print_json(result)
    else:
        sys.stdout.write(report)
        if save is not None:
            _console().print(f"Saved to {save}", style="dim")


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

    err = Console(stderr=True, width=_width())
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


def _refuse_cache(rid: str | None, flag: str, kv_dtype: str | None, instead: str | None = None) -> None:
    """A serving engine named by `flag` cannot store its cache in `kv_dtype`: refused (a what-if needs no engine;
    `instead`: what else the hint offers, by default dropping `flag` for the what-if)."""
    from llmsize.estimate.quant import runtime_kv_refusal
    from llmsize.estimate.runtimes import RUNTIME_NAMES

    if rid in ("vllm", "sglang", "trtllm") and kv_dtype and (refused := runtime_kv_refusal(rid, kv_dtype)):
        raise InvalidValueError(f"--kv-dtype {kv_dtype} with {flag}: {RUNTIME_NAMES[rid]} does not store its cache "
                                f"in {kv_dtype.lower()}.", f"Give --kv-dtype {', '.join(refused[1])}, or "
                                f"{instead or f'drop {flag} for the format' + chr(39) + 's what-if'}.")


def _check_engine_takes(p, g, engine, emit, runtime, plan_runtime, kv_dtype) -> None:
    """Refuse a ledger, a launch line or an asked-for runtime's figure the engine could not give: llama.cpp's on a
    card it does not run on, a serving engine's with a cache dtype it does not store, a launch line for weights it
    does not load."""
    from llmsize.estimate.quant import runtime_load_refusal
    from llmsize.estimate.runtimes import not_on, resolve_runtime

    flag = f"--emit {emit}" if emit else f"--engine {engine}" if engine else f"--runtime {runtime}"
    if engine in ("llamacpp", "ollama") or emit in ("llama-server", "ollama"):
        elsewhere = not_on("llamacpp", g)
        if elsewhere:
            raise InvalidValueError(f"{flag} on {g.id}: {elsewhere}.", "Pick a card llama.cpp runs on.")
    named = engine or (emit if emit in ("vllm", "sglang") else None) or (runtime and plan_runtime)
    rid = resolve_runtime(named)[0] if named else None
    if rid not in ("vllm", "sglang", "trtllm"):
        return
    _refuse_cache(rid, flag, kv_dtype)
    gguf = p.fmt.id.startswith(("gguf-", "ggml-"))  # loaded experimentally: the line says so (render/emit.py)
    if emit in ("vllm", "sglang") and not gguf and (refused := runtime_load_refusal(rid, p.fmt.id)):
        raise InvalidValueError(f"--emit {emit}: {refused}.", "Give a --quant it serves (fp8, int4-g128, nvfp4 ...), "
                                "or --emit llama-server for a GGUF file.")


def _measure_gpu(quant, context, tokens, batch, device, checkpoint, gpu_index, warmup, seed, probe, gemv, compile_,
                 fused, fallback) -> dict:
    from llmsize.measure.run import QUANTS, MeasureOptions, validate
    from llmsize.measure.run import measure as run_measure

    quant = (quant or "nvfp4").strip().lower()
    if quant not in QUANTS:
        from llmsize.options import not_one_of

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
    cat = _catalog(catalog)
    g = _gpu(cat, gpu) if gpu else None  # names are checked before any request
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
            from llmsize.options import not_one_of

            raise typer.BadParameter(not_one_of(quant, list(FORMATS)), param_hint="'--quant'")
    require_http()  # the options first: each is the user's to fix whether or not the extra is installed
    with _progress_bar() as progress:
        return measure_server(opts, progress, cat, g)


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
    opts = getattr(getattr(err, "param", None), "opts", None) or []
    for i in range(len(args) - 1, -1, -1):  # the last occurrence: the one a repeated option keeps
        tok = args[i]
        for opt in opts:
            if tok == opt and i + 1 < len(args):
                return f" (got `{shown(args[i + 1])}`)"
            if tok.startswith(opt + "="):
                return f" (got `{shown(tok.split('=', 1)[1])}`)"
    return ""


def _conflicting_repeat(command, args: list[str]) -> str | None:
    """A single-valued option given twice with different values (`--gpu h100 --gpu h200`, `-g h100 -gh200`), or
    both sides of a flag pair (`--one-per-model --all-formats`): the parser keeps the last silently, so the run
    would answer a question the user did not ask. The message, or None (an option's value missing at the end of
    the line is left for the parser to name)."""
    sub = getattr(command, "commands", {}).get(args[0]) if args else None
    if sub is None:
        return None
    tokens = args[1:args.index("--")] if "--" in args else args[1:]
    for param in sub.params:
        if getattr(param, "param_type_name", "") != "option" or param.multiple or getattr(param, "count", False):
            continue
        given = []  # (name as typed, value) in order
        for i, tok in enumerate(tokens):
            for name in param.opts + param.secondary_opts:
                if tok == name:
                    if param.is_flag:
                        given.append((name, name in param.opts))
                    elif i + 1 < len(tokens):
                        given.append((name, tokens[i + 1]))
                elif name.startswith("--") and tok.startswith(name + "="):
                    given.append((name, tok.split("=", 1)[1]))
                elif not name.startswith("--") and len(name) == 2 and tok.startswith(name) and len(tok) > 2 \
                        and not param.is_flag:  # -gh200
                    given.append((name, tok[2:]))
        if len({v for _, v in given}) > 1:
            names = sorted({n for n, _ in given}, key=[n for n, _ in given].index)
            if param.is_flag:
                return f"{' and '.join(names)} contradict each other. Give one of them."
            name = max(param.opts, key=len)
            values = ", then ".join(f"`{shown(v)}`" for _, v in given)
            times = "twice" if len(given) == 2 else f"{len(given)} times"
            listed = ", as one comma list" if "comma" in (param.help or "").lower() else ""
            return f"{name} is given {times} ({values}): {sub.name} takes one. Give {name} once{listed}."
    return None


def _drop_stdout() -> None:
    """Point the standard output at /dev/null, so the interpreter's flush at exit does not fail a second time."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every expected failure becomes one line on stderr and a non-zero exit."""
    os.environ.setdefault("TYPER_STANDARD_TRACEBACK", "1")
    if sys.stdout is None:  # started with its standard output closed (`llmsize gpus >&-`): nowhere to print
        if sys.stderr is not None:
            sys.stderr.write("Error: the standard output is closed. Run llmsize with its output going to a "
                             "terminal, a file or a pipe.\n")
        sys.exit(int(ExitStatus.USAGE))
    for stream in (sys.stdout, sys.stderr):  # a name from a file (a lone surrogate) prints escaped, never raises
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    with _errors():
        args = sys.argv[1:] if argv is None else list(argv)
        first = args[0] if args else None
        try:
            command = click_command(first if first in command_names() else None)
            repeated = _conflicting_repeat(command, args)
            if repeated:
                sys.stderr.write(f"Error: {repeated}\n")
                sys.exit(int(ExitStatus.USAGE))
            rv = command(args=args, prog_name="llmsize", standalone_mode=False)
            sys.stdout.flush()  # a full disk or a closed pipe shows here, not at the interpreter's exit
        except BrokenPipeError:  # the reader went away (`| head`): nothing left to say
            _drop_stdout()
            sys.exit(int(ExitStatus.ERROR))
        except OSError as e:
            if e.filename is not None:
                raise
            _drop_stdout()  # the standard output failed (a full disk, /dev/full): one line, not a traceback
            sys.stderr.write(f"Error: could not write the output: {e.strerror or e}. Free the space, or write "
                             "to a file elsewhere (-o FILE where the command has it).\n")
            sys.exit(int(ExitStatus.USAGE))
        except (typer.Abort, KeyboardInterrupt):
            sys.stderr.write("Aborted.\n")
            sys.exit(int(ExitStatus.ERROR))
        except _UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError" and e.ctx is not None:  # a bare `llmsize`: its help
                sys.stdout.write(e.ctx.get_help() + "\n")
                sys.exit(0)
            where = e.ctx.command_path if e.ctx else "llmsize"
            if where == "llmsize" and first in command_names():  # refused before the command's own context
                where = f"llmsize {first}"
            msg = printable(e.format_message().replace("\n", " ")).rstrip(".")
            given = _given_value(e, argv)
            if given and given[len(" (got "):-1] not in msg:
                msg += given
            end = "" if msg.endswith(("?", "!")) else "."
            sys.stderr.write(f"Error: {msg}{end} Run `{where} --help` for usage.\n")
            sys.exit(int(ExitStatus.USAGE))
        except _ClickException as e:
            sys.stderr.write(f"Error: {printable(e.format_message())}\n")
            sys.exit(e.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
