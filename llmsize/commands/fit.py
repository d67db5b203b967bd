"""`llmsize fit`: which catalog models fit a card, in which format, and how fast."""

from __future__ import annotations

import sys

from llmsize.commands.shared import (
    find_local_card,
    gb_bytes,
    gib_bytes,
    host_memory_of,
    llamacpp_constants,
    load_catalog,
    make_console,
    print_json,
    variant_note,
)
from llmsize.errors import InvalidValueError, shown
from llmsize.options import (
    DEFAULT_CONTEXT,
    CatalogOpt,
    FitContextOpt,
    FitSortOpt,
    GpuOpt,
    HostBandwidthOpt,
    HostMemoryOpt,
    HostRamOpt,
    JsonOpt,
    MemoryGbOpt,
    MinTokSOpt,
    MmprojOpt,
    OnePerModelOpt,
    RuntimeOpt,
    TopOpt,
    WiredLimitOpt,
)
from llmsize.units import GiB


def fit_cmd(
    gpu: GpuOpt = "",
    context: FitContextOpt = None,
    runtime: RuntimeOpt = None,
    host_memory: HostMemoryOpt = None,
    host_bandwidth_gb_s: HostBandwidthOpt = None,
    host_ram_gib: HostRamOpt = None,
    wired_limit_gb: WiredLimitOpt = None,
    memory_gb: MemoryGbOpt = None,
    one_per_model: OnePerModelOpt = True,
    sort: FitSortOpt = "tok_s",
    min_tok_s: MinTokSOpt = None,
    top: TopOpt = 30,
    as_json: JsonOpt = False,
    mmproj: MmprojOpt = None,
    catalog: CatalogOpt = None,
):
    """Which catalog models fit this card, in which format, and how fast: ranked by expected decode tok/s (or by
    model size).

    llama.cpp (the default on consumer and Apple cards) tries the GGUF file types and, where a model does not
    fit, the offload split its --fit would take (give --host-memory for that speed); the other runtimes try the
    release format and those of bf16, fp8, AWQ and NVFP4 with fewer bits a weight (a 4-bit release alone); under vLLM,
    SGLang or TensorRT-LLM a pair whose engine's own memory ledger holds no --context request is left out (a note
    counts them).

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
    if mmproj is not None:  # a type for every model's tower (a file is one model's: plan --mmproj FILE)
        from llmsize.importer.mmproj_file import mmproj_source

        given, mmproj = mmproj, mmproj_source(mmproj)
        if not isinstance(mmproj, str):
            raise InvalidValueError(f"--mmproj {shown(given)}: fit sizes every model, each with its own tower, and a "
                                    "file is one model's.", "Give a type (--mmproj f16), or plan that model with "
                                    "`llmsize plan MODEL --mmproj FILE`.")
    from llmsize.estimate.llamacpp_options import card_bytes
    from llmsize.estimate.model_fit import fit_models, shorter_context_note
    from llmsize.estimate.runtimes import resolve_runtime
    from llmsize.render.model_fit_report import fit_rows_to_dicts, render_fit

    if not gpu:
        raise InvalidValueError("Missing option --gpu." if gpu is None else "--gpu is empty.",
                                "Name a card: `llmsize gpus` lists them.")
    cat = load_catalog(catalog)
    g, local_ram = find_local_card(cat, gpu, memory_gb)
    from llmsize.estimate.unified import is_unified

    asked_ram = host_ram_gib
    if host_ram_gib is None and local_ram and not is_unified(g):
        # this machine's RAM bounds what it can offload (a unified machine has no separate pool to offload to)
        host_ram_gib = local_ram / GiB
        sys.stderr.write(f"--gpu local: {host_ram_gib:.1f} GiB of RAM (/proc/meminfo MemTotal) bounds the "
                         "offloaded placements; --host-ram-gib sets another figure\n")
    host = host_memory_of(host_memory, host_bandwidth_gb_s, cat)
    rid = resolve_runtime(runtime)[0] if runtime else ("vllm" if g.segment == "datacenter" else "llamacpp")
    from llmsize.estimate.runtimes import RUNTIME_NAMES, not_on

    elsewhere = not_on(rid, g) if runtime else None  # a runtime named for a card it does not run on
    if elsewhere:
        why, _, advice = elsewhere.partition("; pick ")  # its advice is the hint, said once
        raise InvalidValueError(f"--runtime {runtime} on {g.id}: {why}.",
                                f"Pick {advice}." if advice else "Pick a runtime that runs there.")
    runtimes = cat.runtimes.by_id()
    if min_tok_s is not None:  # a floor on a figure the card has none of would drop every row: say why instead
        from llmsize.estimate.fleet import runtime_refusal

        why = runtime_refusal(rid, runtimes, g)
        if why:
            raise InvalidValueError(f"--min-tok-s {min_tok_s:g}: {RUNTIME_NAMES[rid]} has no expected figure on "
                                    f"{g.id} ({why}).", "Drop --min-tok-s: the list still says what fits the card.")
    from llmsize.estimate.model_fit import unused_host

    fit_notes = []
    said = variant_note(cat, gpu, g, memory_gb)  # a name that took one of a card's memory variants
    fit_notes += [said] if said else []
    unused = unused_host(g, rid) if host is not None or asked_ram is not None else None
    if unused and host is not None:
        fit_notes.append(f"--host-memory {host.name} not used: {unused}")
        host = None
    if unused and asked_ram is not None:
        fit_notes.append(f"--host-ram-gib {asked_ram:g} not used: {unused}")
        host_ram_gib = None

    wired = gb_bytes(wired_limit_gb)
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
    if mmproj is not None and rid != "llamacpp":
        raise InvalidValueError(f"--mmproj {mmproj} sizes llama.cpp's mmproj file, and the rows are sized for "
                                f"{RUNTIME_NAMES[rid]}.", "Drop --mmproj, or give --runtime llamacpp (or ollama).")
    if mmproj is not None:
        fit_notes.append(f"--mmproj {mmproj}: a model with a vision tower carries it as an {mmproj.upper()} mmproj "
                         "on the card (its weights, and its encoder's buffer where the model's entry gives the "
                         "encoder's shape, as plan --mmproj sizes them): +mmproj beside its name")
    shorter = None if ollama_ctx else shorter_context_note(cat.models.all(), context, asked_context is not None)
    fit_notes += [shorter] if shorter else []  # (Ollama's num_ctx words already say each model at most its own)
    rows, skipped, fitting, refused = fit_models(cat.models.all(), g, rid, context, runtimes, card_bytes(g, wired),
                                                 host, llamacpp_constants(g, cat), gib_bytes(host_ram_gib),
                                                 one_per_model, wired, sort.lower(), min_tok_s, fit_engine,
                                                 cap_to_model=asked_context is None, mmproj=mmproj)
    if refused:
        fit_notes.append(f"{refused} pair(s) left out that the card's memory budget holds: {RUNTIME_NAMES[rid]}'s own "
                         f"memory ledger holds no {context:,}-token request with them, so it "
                         + ("does not start or caps a request below that" if rid == "sglang" else "does not start")
                         + f" (`plan "
                         f"MODEL --gpu {g.id} --quant FORMAT --engine {rid}` itemizes it)")
    if as_json:
        print_json({"gpu": g.id, "runtime": rid, "engine": fit_engine if rid == "llamacpp" else None,
                     "context_tokens": context,
                     "host_memory": host.name if host else None, "sort": sort.lower(), "min_tok_s": min_tok_s,
                     "fitting": fitting, "rows": fit_rows_to_dicts(rows), "skipped": skipped, "notes": fit_notes})
    else:
        render_fit(rows[:top], g, rid, context, host, skipped, len(rows), make_console(), sort.lower(), min_tok_s,
                   fitting, one_per_model, fit_notes, fit_engine, wired_limit=wired_limit_gb is not None)
