"""`llmsize plan`: one model on one card, its memory, context, speed and diagnosis, an engine's ledger, the
expected figure in a runtime, the levers, or a launch line."""

from __future__ import annotations

import sys

from llmsize.commands.shared import (
    MAX_WIDTH,
    NODE_LINK_GB_S,
    catalog_model,
    find_card,
    gb_bytes,
    gib_bytes,
    host_memory_of,
    import_source,
    llamacpp_constants,
    load_catalog,
    make_console,
    model_default_context,
    one_format,
    pipeline_stages,
    print_json,
    refuse_cache,
    term_width,
    variant_note,
)
from llmsize.errors import InvalidValueError
from llmsize.options import (
    BackendOpt,
    BatchOpt,
    BlockSizeOpt,
    CacheTypeKOpt,
    CacheTypeVOpt,
    CalibrateOpt,
    CatalogOpt,
    ComputeOpt,
    CpuMoeOpt,
    CudagraphOpt,
    EmitOpt,
    EngineOpt,
    EngineVersionOpt,
    EstimateOnlyOpt,
    FlashAttnOpt,
    Fp4KernelOpt,
    GpuLayersOpt,
    GpuOpt,
    GpuUtilOpt,
    HostBandwidthOpt,
    HostMemoryOpt,
    HubFileOpt,
    HubOpt,
    JsonOpt,
    KvDtypeOpt,
    KvPolicyOpt,
    KvUnifiedOpt,
    LanguageModelOnlyOpt,
    LeversOpt,
    LlamaFitOpt,
    MaxBatchedTokensOpt,
    MaxModelLenOpt,
    MemoryGbOpt,
    MmprojOpt,
    ModelArg,
    NCpuMoeOpt,
    NodeLinkOpt,
    NodesOpt,
    NoFlashAttnOpt,
    NonTorchOpt,
    OverheadOpt,
    ParallelOpt,
    PlanContextOpt,
    PlanFormatOpt,
    PpOpt,
    PromptOpt,
    QuantOpt,
    RuntimeOpt,
    ScopeOpt,
    SpecOpt,
    SwaFullOpt,
    TpOpt,
    UbatchOpt,
    WiredLimitOpt,
)
from llmsize.units import GB, GiB


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
    node_link_gb_s: NodeLinkOpt = NODE_LINK_GB_S,
    wired_limit_gb: WiredLimitOpt = None,
    memory_gb: MemoryGbOpt = None,
    emit: EmitOpt = None,
    engine: EngineOpt = None,
    max_model_len: MaxModelLenOpt = None,
    max_num_batched_tokens: MaxBatchedTokensOpt = None,
    engine_version: EngineVersionOpt = "v1",
    block_size: BlockSizeOpt = None,
    non_torch_gib: NonTorchOpt = None,
    cudagraph_gib: CudagraphOpt = None,
    parallel: ParallelOpt = 1,
    kv_unified: KvUnifiedOpt = False,
    cache_type_k: CacheTypeKOpt = "f16",
    cache_type_v: CacheTypeVOpt = "f16",
    flash_attn: FlashAttnOpt = None,
    no_flash_attn: NoFlashAttnOpt = False,
    language_model_only: LanguageModelOnlyOpt = False,
    ubatch_size: UbatchOpt = 512,
    swa_full: SwaFullOpt = False,
    mmproj: MmprojOpt = None,
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
    from llmsize.estimate.kernels import check_fp4_kernel
    from llmsize.estimate.kv_policy import parse_kv_policy
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.runtimes import check_backend
    from llmsize.estimate.speculative import parse_spec
    from llmsize.importer.mmproj_file import mmproj_source

    # the options alone, before any file is read
    if not gpu:
        raise InvalidValueError("Missing option --gpu." if gpu is None else "--gpu is empty.",
                                "Name a card: `llmsize gpus` lists them.")
    fmt = one_format(as_json, fmt)
    check_backend(gpu_backend, runtime or engine)  # Vulkan under a runtime without one
    policy = parse_kv_policy(kv_policy)
    mmproj = mmproj_source(mmproj)
    _refuse_option_pairs(emit, fmt, fp4_kernel, levers, kv_policy, no_flash_attn, flash_attn, prompt, context)
    flash_attn = "off" if no_flash_attn else flash_attn
    # the card, a calibrating run, the model
    cat = load_catalog(catalog)
    g = find_card(cat, gpu, memory_gb)
    run = None
    if calibrate is not None:  # read before any work: a bad file is refused first
        from llmsize.importer.calibration import read_run

        run = read_run(calibrate)
    exact, notes, warnings = None, [], []
    im = import_source(model, hub, estimate_only, hub_file)
    if im is not None:
        m, exact, notes, warnings = im.spec, im.exact, im.notes, im.warnings
    else:
        m = catalog_model(cat, model)
    said = variant_note(cat, gpu, g, memory_gb)  # a name that took one of a card's memory variants
    notes += [said] if said else []
    # the engine whose ledger is planned, the context, the runtime the plan is sized for
    llama_given = _llama_options_given(gpu_layers, n_cpu_moe, cpu_moe, fit, parallel, kv_unified, cache_type_k,
                                       cache_type_v, ubatch_size, swa_full, mmproj)
    serving_given = _serving_options_given(engine_version, block_size, non_torch_gib, cudagraph_gib,
                                           max_num_batched_tokens, max_model_len, emit)
    engine, note, engine_flag = _ledger_engine(emit, engine, tp * (pp or 1) * (nodes or 1) > 1, llama_given,
                                               serving_given, runtime)
    notes += [note] if note else []
    wired = gb_bytes(wired_limit_gb)  # --wired-limit-gb is in GB (10^9 B)
    # Ollama's num_ctx (its default by the card, at most the model's) whether its ledger is planned or only its speed
    ollama = engine == "ollama" or (engine is None and (runtime or "").strip().lower() == "ollama")
    if context is not None and max_model_len is not None and context > max_model_len:
        raise InvalidValueError(f"--context {context:,} is longer than --max-model-len {max_model_len:,}: the engine "
                                "refuses a request past its max_model_len, so it cannot serve the sequences this plan "
                                "sizes.", "Lower --context, or raise --max-model-len.")
    if context is None:
        from llmsize.estimate.llamacpp_options import ollama_default_context

        context, why = (ollama_default_context(g, m, wired) if ollama else model_default_context(m))
        if max_model_len is not None and context > max_model_len:  # the engine's longest request bounds it
            context, why = max_model_len, f"--context {max_model_len:,}: --max-model-len's (the longest request)"
        notes += [why] if why else []
        if prompt is not None and prompt > context:
            raise InvalidValueError(f"--prompt {prompt:,} is longer than --context {context:,} (its default): the "
                                    "context holds the prompt and the answer.", "Give --context as well, at least the "
                                    "prompt.")
    if ollama:  # Ollama lowers num_ctx to the model's own
        from llmsize.estimate.llamacpp_options import ollama_context

        context, lowered = ollama_context(context, m)
        notes += [lowered] if lowered else []
        if prompt is not None and prompt > context:
            raise InvalidValueError(f"--prompt {prompt:,} is longer than the {context:,} tokens Ollama's num_ctx "
                                    "takes for this model.", "Give a shorter --prompt.")
    if engine == "ollama" and gpu_layers is None and not fit:
        fit = True  # Ollama sets num_gpu itself: as many layers as its memory estimate puts on the card
        notes.append("Ollama places the layers itself (num_gpu unset): the plan takes the split that fits, as "
                     "llama.cpp's --fit does (--gpu-layers N sets one)")
    # the runtime the plan is for (its share of the card, the expected speed): --runtime, else the engine whose
    # ledger is planned, else the serving engine whose launch line is emitted
    plan_runtime = (runtime.lower() if runtime else None) or engine or (emit if emit in ("vllm", "sglang") else None)
    _refuse_runtime_mismatch(runtime, engine, engine_flag, emit, plan_runtime)
    if quant is None and exact is None:  # a catalog model under Ollama or LM Studio: the GGUF their library pulls
        from llmsize.estimate.plan import library_quant

        quant, pulled = library_quant(plan_runtime, m)
        notes += [pulled] if pulled else []
    kv_dtype = _ledger_cache(quant, model, exact, engine, kv_dtype, cache_type_k, cache_type_v)
    from llmsize.estimate.llamacpp_options import LlamaCppOptions, check_options, flash_attn_on, slot_context

    # flash attention as the plan's engine runs it: --no-flash-attn or --flash-attn off; Ollama's default by the card
    attention_fused = flash_attn_on(engine, flash_attn, g, gpu_backend)
    llama_options = None
    if engine in ("llamacpp", "ollama"):  # the ledger planned, and the plan's budget (llamacpp_budget.py)
        llama_options = LlamaCppOptions(context, parallel, kv_unified, cache_type_k, cache_type_v, flash_attn,
                                        ubatch_size, swa_full, gpu_layers, n_cpu_moe, cpu_moe, mmproj=mmproj)
        check_options(engine, llama_options)
        context, slot_note = slot_context(engine, llama_options, prompt)  # -c shared by the slots: one holds less
        notes += [slot_note] if slot_note else []
        if batch > parallel:  # the ledger holds --parallel slots; a batch of more sequences needs as many
            slots = "OLLAMA_NUM_PARALLEL" if engine == "ollama" else "-np"
            notes.append(f"--batch {batch:,}: the ledger holds --parallel {parallel} slot(s) ({slots}); serving "
                         f"{batch:,} sequences at once needs --parallel {batch:,}")
    # the plan, and what the engine could not give refused
    inputs = PlanInputs(quant=quant, scope=scope, kv_dtype=kv_dtype.lower() if kv_dtype else None,
                        context_tokens=context, batch=batch,
                        prompt_tokens=prompt, gpu_util=gpu_util, overhead_bytes=gib_bytes(overhead_gib),
                        compute_precision=compute, tp=tp, pp=pipeline_stages(pp, nodes, node_link_gb_s), nodes=nodes,
                        node_link_gb_s=node_link_gb_s,
                        wired_limit_bytes=wired, memory_gb=memory_gb, kv_policy=policy,
                        spec=parse_spec(spec, cat), flash_attn=attention_fused,
                        runtime=plan_runtime, llamacpp=llama_options, backend=gpu_backend,
                        fp4_kernel=fp4_kernel, language_model_only=language_model_only)
    p = make_plan(m, g, inputs, exact=exact, notes=notes, warnings=warnings)
    check_backend(gpu_backend, plan_runtime, p)  # the plan's runtime on this card
    check_fp4_kernel(p, plan_runtime)
    _refuse_served_elsewhere(engine, emit, g)
    _check_engine_takes(p, g, engine, emit, runtime, plan_runtime, kv_dtype)
    if not p.budget.weights_fit:  # name a bigger card: only now is the whole hardware catalog parsed
        p = make_plan(m, g, inputs, candidates=cat.hardware.all(), exact=exact, notes=notes, warnings=warnings)
    # the engine's ledger, the expected figure, the levers
    ledger = llama = None
    host = host_memory_of(host_memory, host_bandwidth_gb_s, cat)
    offload = _offload_lever(p, exact, host, cat) if not p.budget.weights_fit else None
    if offload is not None:
        p.diagnosis.levers.append(offload.sentence)
    if llama_options is not None:
        llama = _llamacpp(p, exact, engine, llama_options, host, cat, fit)
        from llmsize.estimate.llamacpp_plan import unified_split_words

        split = unified_split_words(llama, p.budget.weights_fit)
        if split:  # a unified machine: the engine's own split runs where the whole model does not fit the GPU
            p.diagnosis.levers.insert(0, split)
    elif engine is not None:
        ledger = _serving_ledger(p, m, g, engine, max_model_len, max_num_batched_tokens, block_size, tp,
                                 non_torch_gib, cudagraph_gib, engine_version)
        from llmsize.estimate.engines import beside_budget

        ledger.assumptions.append(beside_budget(ledger, p.budget))
    from llmsize.estimate.expected import expect_for_cli

    expected = expect_for_cli(p, cat, plan_runtime if run is None else (runtime.lower() if runtime else None) or engine,
                              run,
                              None if calibrate is None else str(calibrate), flash_attn,
                              None if engine_flag == "--runtime ollama" else engine, ubatch_size)
    if ledger is None and llama is None:
        from llmsize.estimate.engines import plan_shortfall

        said = plan_shortfall(p, m, g, expected.runtime)  # a serving engine's own ledger, where it holds far less
        if said:
            p.warnings.append(f"{said}; `--engine {expected.runtime}` itemizes it")
    if host is not None and offload is None and not (llama is not None and llama.offloaded):
        p.notes.append("--host-memory/--host-bandwidth-gb-s: unused here, no part of the model is placed in host "
                       "memory (they price a llama.cpp offload's host side: --gpu-layers, --cpu-moe, or a GGUF file "
                       "larger than the card)")
    if llama is not None:
        from dataclasses import replace

        from llmsize.estimate.llamacpp_plan import ledger_words, placed_diagnosis, with_ledger

        placed = placed_diagnosis(p.diagnosis, llama, engine)
        p = replace(p, diagnose_plan=lambda: placed)  # its summary as the engine's placement has it
        expected = with_ledger(expected, llama)
        p.warnings[:], extra = ledger_words(p.warnings, llama, engine, p.inputs.context_tokens)
        p.notes.extend(extra)
    table = None
    if levers:
        source = [model] if model else ["--hub", hub] + (["--file", hub_file] if hub_file else [])
        host_args = (["--host-memory", host_memory] if host_memory else []) + (
            ["--host-bandwidth-gb-s", f"{host_bandwidth_gb_s:g}"] if host_bandwidth_gb_s is not None else [])
        table = _lever_table(p, m, g, exact, [m.id] if im is None else source, cat, expected.runtime, host,
                             tuple(host_args))
    # a launch line, or the report
    if emit is not None:
        sys.stdout.write(_launch_line(emit, p, llama, g, model if im is not None else None, max_model_len) + "\n")
    else:
        _print_report(fmt, p, ledger, llama, g, expected, table)


def _refuse_option_pairs(emit, fmt, fp4_kernel, levers, kv_policy, no_flash_attn, flash_attn, prompt, context) -> None:
    """Options that contradict each other, refused before any work."""
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


def _llama_options_given(gpu_layers, n_cpu_moe, cpu_moe, fit, parallel, kv_unified, cache_type_k, cache_type_v,
                         ubatch_size, swa_full, mmproj=None) -> list[str]:
    """The llama.cpp options given other than their defaults, as typed."""
    return [name for name, given in (
        ("--gpu-layers", gpu_layers is not None), ("--n-cpu-moe", bool(n_cpu_moe)), ("--cpu-moe", cpu_moe),
        ("--fit", fit), ("--parallel", parallel != 1), ("--kv-unified", kv_unified),
        ("--cache-type-k", cache_type_k.lower() != "f16"), ("--cache-type-v", cache_type_v.lower() != "f16"),
        ("--ubatch-size", ubatch_size != 512), ("--swa-full", swa_full), ("--mmproj", mmproj is not None)) if given]


def _serving_options_given(engine_version, block_size, non_torch_gib, cudagraph_gib, max_num_batched_tokens,
                           max_model_len, emit) -> list[str]:
    """The serving engines' ledger options given other than their defaults, as typed (--max-model-len is also the
    launch line's)."""
    return [name for name, given in (
        ("--engine-version", engine_version.strip().lower() != "v1"), ("--block-size", block_size is not None),
        ("--non-torch-gib", non_torch_gib is not None), ("--cudagraph-gib", cudagraph_gib is not None),
        ("--max-num-batched-tokens", max_num_batched_tokens is not None),
        ("--max-model-len", max_model_len is not None and emit not in ("vllm", "sglang"))) if given]


def _ledger_engine(emit, engine, split: bool, llama_given: list[str], serving_given: list[str], runtime=None
                   ) -> tuple[str | None, str | None, str | None]:
    """The engine whose memory ledger the plan takes (--engine, else llama.cpp's where --emit llama-server/ollama or
    llama.cpp's own options say so: Ollama's under --runtime ollama), the note that says why, and the option that
    chose it as a message names it; options of another engine's refused."""
    flag = f"--engine {engine}" if engine else None
    if emit in ("llama-server", "ollama"):
        if engine not in (None, "llamacpp", "ollama"):
            raise InvalidValueError(f"--emit {emit} is llama.cpp's command, and --engine {engine} is not llama.cpp.",
                                    "Drop --engine, or use --engine llamacpp (or ollama).")
        if split:
            raise InvalidValueError(f"--emit {emit}: llama.cpp's plan is one GPU; --tp/--pp/--nodes split across "
                                    "cards is not modelled for it.", "Drop --tp/--pp/--nodes, or use --emit vllm for "
                                    "a split.")
        flag = flag or f"--emit {emit}"
        # --runtime ollama or llamacpp plans its own ledger (--context its num_ctx, or -c shared by the slots), which
        # the launch line translates; else the emitted engine's
        own = (runtime or "").strip().lower()
        engine = engine or (own if own in ("llamacpp", "ollama") else None) or \
            ("ollama" if emit == "ollama" else "llamacpp")
    if llama_given and engine not in (None, "llamacpp", "ollama"):
        raise InvalidValueError(f"{llama_given[0]} is a llama.cpp option, and --engine {engine} is not llama.cpp.",
                                f"Drop {llama_given[0]}, or use --engine llamacpp (or ollama).")
    if llama_given and emit in ("vllm", "sglang"):
        raise InvalidValueError(f"{llama_given[0]} is a llama.cpp option, and --emit {emit} prints {emit}'s launch "
                                "line.", f"Drop {llama_given[0]}, or use --emit llama-server.")
    if serving_given and emit is not None:  # a launch line is made from the plan, not from the ledger's options
        raise InvalidValueError(f"{serving_given[0]} sizes a serving engine's memory ledger, and --emit {emit} prints "
                                "a launch line without it.", f"Drop {serving_given[0]}, or drop --emit for --engine's "
                                "ledger.")
    if serving_given and engine not in ("vllm", "sglang", "trtllm"):  # they size a serving engine's ledger only
        raise InvalidValueError(f"{serving_given[0]} sizes a serving engine's memory ledger, and this plan prints "
                                f"none{f' (--engine {engine} is llama.cpp)' if engine else ''}.",
                                f"Add --engine vllm (or sglang, trtllm), or drop {serving_given[0]}.")
    if engine in ("sglang", "trtllm") and "--engine-version" in serving_given:
        raise InvalidValueError(f"--engine-version is vLLM's release, and --engine {engine} is not vLLM.",
                                "Drop --engine-version, or use --engine vllm.")
    if engine in ("sglang", "trtllm") and "--cudagraph-gib" in serving_given:  # their ledgers charge no such reserve
        raise InvalidValueError(f"--cudagraph-gib is vLLM V1's CUDA-graph reserve, and --engine {engine} is not "
                                "vLLM.", "Drop --cudagraph-gib, or use --engine vllm.")
    # llama.cpp's own options say which engine's ledger to plan (its cache types alone still apply to a split, whose
    # ledger llama.cpp's one-GPU ledger is not)
    ledger_only = [o for o in llama_given if o not in ("--cache-type-k", "--cache-type-v")]
    if split and ledger_only:
        raise InvalidValueError(f"{ledger_only[0]} is a llama.cpp option, and llama.cpp's plan is one GPU: --tp/--pp/"
                                "--nodes split across cards is not modelled for it.",
                                f"Drop --tp/--pp/--nodes, or drop {ledger_only[0]}.")
    if llama_given and engine is None and not split:
        own = "ollama" if (runtime or "").strip().lower() == "ollama" else "llamacpp"
        whose = "Ollama's" if own == "ollama" else "its"
        return own, (f"{', '.join(llama_given)}: llama.cpp's options, so {whose} ledger is planned (--engine "
                     f"{own})"), llama_given[0]
    if engine is None and not split and (runtime or "").strip().lower() == "ollama":
        # Ollama places what the card holds and leaves the rest in host memory: its figures are that placement's
        return "ollama", None, "--runtime ollama"
    return engine, None, flag


def _refuse_runtime_mismatch(runtime, engine, engine_flag, emit, plan_runtime) -> None:
    """--runtime, and the engine whose ledger is planned (`engine_flag`: the option that chose it), or --emit,
    naming two runtimes for one plan, refused."""
    from llmsize.estimate.runtimes import resolve_runtime

    if runtime and engine and resolve_runtime(runtime)[0] != resolve_runtime(engine)[0]:
        raise InvalidValueError(f"--runtime {runtime} asks for {runtime}'s expected speed, and {engine_flag} plans "
                                f"{engine}'s memory ledger: one plan is sized for one runtime.",
                                f"Drop --runtime ({engine_flag} sets it), or give both the same runtime.")
    if emit in ("vllm", "sglang") and plan_runtime != emit:
        from llmsize.options import EMIT_ENGINES

        own = {"llamacpp": "llama-server", "lmstudio": "llama-server"}.get(plan_runtime, plan_runtime)
        raise InvalidValueError(f"--emit {emit} prints {emit}'s launch line, and this plan is sized for "
                                f"{plan_runtime} (its share of the card, its ledger).",
                                "Drop --engine / --runtime" + (f", or use --emit {own}." if own in EMIT_ENGINES
                                                               else f" (--emit prints none for {plan_runtime})."))


def _ledger_cache(quant, model, exact, engine, kv_dtype, cache_type_k, cache_type_v) -> str | None:
    """The plan's KV cache dtype: --kv-dtype, or under llama.cpp its --cache-type-k/-v as the ledger stores them;
    --quant on a GGUF file llama.cpp loads as it is, and --kv-dtype beside llama.cpp's own types, refused."""
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

        return llamacpp_kv_dtype(cache_type_k, cache_type_v)  # the plan's cache, capacity and reads as the ledger's
    return kv_dtype


def _refuse_served_elsewhere(engine, emit, g) -> None:
    """A serving engine's ledger or launch line for a card it does not run on (Apple, Intel Arc), refused."""
    from llmsize.estimate.runtimes import not_on

    served = engine if engine in ("vllm", "sglang", "trtllm") else emit if emit in ("vllm", "sglang") else None
    elsewhere = not_on(served, g) if served else None
    if elsewhere:
        flag = f"--engine {engine}" if engine == served else f"--emit {emit}"
        raise InvalidValueError(f"{flag} on {g.id}: {elsewhere}.",
                                "Pick a card it runs on." if not_on("llamacpp", g) else
                                "Plan that card with --engine llamacpp (or ollama), or pick a card it runs on.")


def _serving_ledger(p, m, g, engine, max_model_len, max_num_batched_tokens, block_size, tp, non_torch_gib,
                    cudagraph_gib, engine_version):
    """vLLM's, SGLang's or TensorRT-LLM's memory ledger of the plan (engines.py)."""
    from llmsize.estimate.engines import (
        EngineInputs,
        drafts_with_model,
        engine_ledger,
        ledger_model,
        loaded_weight_bytes,
        mtp_layers_of,
        share_inputs,
        spec_tokens_of,
    )

    e = EngineInputs(engine=engine, **share_inputs(p), max_model_len=max_model_len,
                     max_num_batched_tokens=max_num_batched_tokens, block_size=block_size,
                     kv_dtype=p.inputs.kv_dtype, tp=tp, weight_format=p.fmt.id, mtp_layers=mtp_layers_of(p),
                     spec_tokens=spec_tokens_of(p),
                     pp=p.inputs.pp, draft_model=drafts_with_model(p),
                     non_torch_bytes=None if non_torch_gib is None else int(gib_bytes(non_torch_gib)),
                     version=engine_version.lower(),
                     cudagraph_bytes=None if cudagraph_gib is None else int(gib_bytes(cudagraph_gib)))
    return engine_ledger(ledger_model(p, m), g, loaded_weight_bytes(p), e)


def _lever_table(p, m, g, exact, source: list[str], cat, runtime: str, host, host_args: tuple[str, ...]):
    """--levers: each lever's plan beside this one (levers.py), the commands that give them."""
    from llmsize.estimate.levers import lever_table
    from llmsize.estimate.plan import make_plan

    return lever_table(p, source, lambda i: make_plan(m, g, i, exact=exact, search_fit=False), cat.models.all(),
                       lambda other, i: make_plan(other, g, i, search_fit=False), runtime,
                       lambda i: _offload_lever(make_plan(m, g, i, exact=exact, search_fit=False), exact, host, cat),
                       host_args, cat.runtimes.by_id())


def _launch_line(emit: str, p, llama, g, model_path: str | None, max_model_len) -> str:
    """--emit's launch line (llama-server's command, Ollama's Modelfile, vLLM's or SGLang's serve line), refused where
    the engine would not load the plan as it stands."""
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
        return make(p, led, model_path)
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
    return serve_command(p, emit, model_path, max_model_len)


def _print_report(fmt: str, p, ledger, llama, g, expected, table) -> None:
    """The report on the standard output: JSON, an HTML page, or the text tables."""
    if fmt == "json":
        print_json(_plan_dict(p, ledger, llama, g, expected, table))
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

        _plan_text(p, ledger, llama, g, expected, make_console(), term_width(), color_enabled(), table)


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
    if ledger is not None or llama is not None:  # the engine's block, a line apart from the assumptions
        console.file.write("\n")
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


def _offload_lever(p, exact, host, cat):
    from llmsize.estimate.llamacpp_options import card_bytes
    from llmsize.estimate.llamacpp_plan import offload_lever
    from llmsize.estimate.speed import format_class

    return offload_lever(p, exact, card_bytes(p.gpu, p.inputs.wired_limit_bytes), host, llamacpp_constants(p.gpu, cat),
                         format_class(p.fmt.id))


def _llamacpp(p, exact, engine, options, host, cat, fit):
    from llmsize.estimate.llamacpp_options import card_bytes
    from llmsize.estimate.llamacpp_plan import llamacpp_plan
    from llmsize.estimate.speed import format_class

    return llamacpp_plan(p, exact, engine, options, host, llamacpp_constants(p.gpu, cat),
                         card_bytes(p.gpu, p.inputs.wired_limit_bytes), fit,
                         format_class(p.fmt.id))


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
    refuse_cache(rid, flag, kv_dtype)
    gguf = p.fmt.id.startswith(("gguf-", "ggml-"))  # loaded experimentally: the line says so (render/emit.py)
    if emit in ("vllm", "sglang") and not gguf and (refused := runtime_load_refusal(rid, p.fmt.id)):
        raise InvalidValueError(f"--emit {emit}: {refused}.", "Give a --quant it serves (fp8, int4-g128, nvfp4 ...), "
                                "or --emit llama-server for a GGUF file.")
