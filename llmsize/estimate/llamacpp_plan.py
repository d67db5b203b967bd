"""A plan's llama.cpp (or Ollama) side: the start-up ledger of its GGUF file, the offload speed when part of it
is in host memory, and the split llama.cpp's --fit margin allows. Ollama allocates num_ctx for each of
OLLAMA_NUM_PARALLEL slots (its llama.cpp runner gets -c num_ctx x num_parallel, one stream a slot) and runs flash
attention where the card supports it unless OLLAMA_FLASH_ATTENTION says otherwise
(llamacpp_options.ollama_flash_attn)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from llmsize.errors import InvalidValueError
from llmsize.estimate.host_memory import HostMemory
from llmsize.estimate.llamacpp_fit import (
    FIT_TARGET_BYTES,
    FitResult,
    fit_room,
    fit_split,
    fit_target_bytes,
    longest_ctx,
)
from llmsize.estimate.llamacpp_memory import (
    LlamaCppLedger,
    gathered_bytes,
    gguf_file_tensors,
    llamacpp_ledger,
)
from llmsize.estimate.llamacpp_options import LlamaCppOptions, check_options, settings
from llmsize.estimate.offload import OFFLOAD_MIN_BATCH, OffloadSpeed, gpu_part, offload_speed
from llmsize.units import GiB


@dataclass(frozen=True)
class LlamaCppPlan:
    ledger: LlamaCppLedger
    offload: OffloadSpeed | None
    fit: FitResult | None
    card_bytes: int = 0  # what the card offers llama.cpp's allocator (card_bytes)
    offloaded: bool = False  # part of the model in a discrete card's host memory (speed or not)
    # the longest -c this placement holds (its model buffer on the card, not every layer's): what an offload buys
    longest_context_tokens: int | None = None
    cpu_layers_unified: bool = False  # part of the model left to the CPU of a unified machine (same memory)
    margin_bytes: int = FIT_TARGET_BYTES  # what --fit leaves free (fit_target_bytes: Ollama's beside a projector)

    @property
    def spare_bytes(self) -> int:
        """What the card has left beside the ledger's GPU buffers (negative: it does not fit)."""
        return self.card_bytes - self.ledger.gpu_total_bytes

    @property
    def fits(self) -> bool:
        return self.spare_bytes >= 0

    @property
    def tight(self) -> bool:
        """It fits with less to spare than llama.cpp's --fit keeps (margin_bytes), which the backend's own context
        (a few hundred MiB) and the plan's 1.5 GiB overhead take from."""
        return 0 <= self.spare_bytes < self.margin_bytes


def engine_name(engine: str) -> str:
    """The engine whose ledger is planned, as the reports name it."""
    return "Ollama" if engine == "ollama" else "llama.cpp"


def placement_words(lp: LlamaCppPlan) -> str | None:
    """How the engine's placement differs from the whole model on the card (the plan's Memory budget and Decode),
    None where every layer and expert is on the card: part in a discrete card's host memory, or on a unified
    machine part on the CPU cores from the same RAM (unified_split_words says so in the diagnosis)."""
    if not (lp.offloaded or lp.cpu_layers_unified):
        return None
    led = lp.ledger
    who = engine_name(led.engine)
    where = (f"{led.gpu_layers} of {led.n_layer + 1} layers, {led.gpu_total_bytes / GiB:,.2f} GiB, in the GPU's "
             "share and the rest on the CPU cores from the same RAM" if lp.cpu_layers_unified and not lp.offloaded
             else f"{led.gpu_total_bytes / GiB:,.2f} GiB on the card and the rest in host memory")
    return f"{who}'s placement keeps {where}, and {'fits' if lp.fits else 'does not fit'}: its ledger below"


def ledger_warning(lp: LlamaCppPlan, engine: str) -> str | None:
    """The warning a placement whose buffers do not fit the card gets (the plan's own budget may say otherwise:
    the engine's buffers, its compute buffer without flash attention and its slots are the ledger's)."""
    if lp.fits:
        return None
    led, who = lp.ledger, engine_name(engine)
    placed = (f"all {led.n_layer} layers and the output" if led.gpu_layers > led.n_layer else
              f"{led.gpu_layers} of {led.n_layer + 1} layers (the output counted)")
    smaller = "a shorter --context, fewer --parallel slots or a smaller --quant"
    none = lp.fit is not None and lp.fit.how == "none"
    fix = ("no split fits while the GPU stages host weights for a ubatch's matmuls (op offload, from 32 tokens): "
           "--ubatch-size 16, or llama.cpp's --no-op-offload" if none and lp.fit.staging_bound else
           f"no split fits, even with every layer on the host: {smaller}" if none
           else "--fit finds the split that does (or fewer --gpu-layers, "
           + ("" if engine == "ollama" else "--n-cpu-moe N, ") + f"{smaller})")
    return (f"{who}'s buffers with {placed} on the GPU need {led.gpu_total_bytes / GiB:,.2f} GiB of the card's "
            f"{lp.card_bytes / GiB:,.2f} GiB: it would not load so; {fix}")


def placement_note(lp: LlamaCppPlan, engine: str, context_tokens: int) -> str | None:
    """Where the engine's placement, part of the model in host memory, fits the card: the note that says its
    expected figures are that placement's (the plan's whole-card budget holding no sequence of the context is then
    no warning); None otherwise."""
    if not (lp.offloaded and lp.fits):
        return None
    return (f"{'Ollama' if engine == 'ollama' else 'llama.cpp'}'s placement, part of the model in host memory, holds "
            f"{context_tokens:,} tokens, which every layer on the card would not: the expected figures are that "
            "placement's (its ledger below)")


NOT_FIT = " it does not fit."  # how diagnosis.diagnose's summary of weights that exceed the budget ends


def placed_diagnosis(d, lp: LlamaCppPlan, engine: str):
    """A plan's Diagnosis (diagnosis.Diagnosis) once the engine's ledger is known: where the whole model exceeds the
    card but the engine's placement, part of it in host memory, fits, the summary says so (it had said "it does not
    fit" above a ledger that fits: `--n-cpu-moe 40` on an 8 GB card); else as it was."""
    from dataclasses import replace

    if d.weights_fit or not (lp.offloaded and lp.fits) or not d.summary.endswith(NOT_FIT):
        return d
    who = "Ollama" if engine == "ollama" else "llama.cpp"
    return replace(d, summary=d.summary[:-len(NOT_FIT)] + f" the whole model does not fit the card; {who}'s "
                   "placement, part of it in host memory, does (its ledger below).")


def ledger_words(warnings: list[str], lp: LlamaCppPlan, engine: str, context_tokens: int) -> tuple[list[str],
                                                                                                  list[str]]:
    """The plan's warnings and the notes to add, once the engine's ledger is known: its warning where its buffers do
    not fit (ledger_warning); else, where its placement (part on the host) holds the context, the placement's note in
    place of the plan's warning that no sequence fits (the card whole would hold none; the placement does)."""
    from llmsize.estimate.capacity import NO_SEQUENCE, NO_WEIGHTS

    if (warning := ledger_warning(lp, engine)) is not None:
        return [*warnings, warning], []
    if (note := placement_note(lp, engine, context_tokens)) is None:
        return list(warnings), []
    kept = [w for w in warnings if not w.startswith((NO_SEQUENCE, NO_WEIGHTS))]
    return kept, [note] if len(kept) < len(warnings) else []


def file_tensors(plan, exact) -> list[tuple[str, int]]:
    """The GGUF file's own tensors, or those of the file llama-quantize would write for the plan's format."""
    if exact is not None and exact.tensors:
        return exact.tensors  # built once with the file's import, read and never changed (memo.by_identity)
    return gguf_file_tensors(plan.card_model or plan.model, plan.fmt.id, plan.scope)


def llamacpp_plan(plan, exact, engine: str, o: LlamaCppOptions, host: HostMemory | None, constants,
                  card_bytes: int, fit: bool = False, format_class: str = "kquant") -> LlamaCppPlan:
    if plan.inputs.tp * plan.inputs.pp > 1:
        raise InvalidValueError(f"--engine {engine} plans one GPU; --tp/--pp split across cards is not modelled "
                                "for it.", "Drop --tp/--pp, or use --engine vllm for a split.")
    model, gpu = plan.model, plan.gpu
    check_options(engine, o)
    tensors = file_tensors(plan, exact)
    s = settings(engine, o, model.num_layers, gpu, plan.inputs.backend)
    found = (fit_split(model, gpu, tensors, s, card_bytes, moe_offload=engine != "ollama", engine=engine)
             if fit else None)
    if found is not None and found.how != "none":
        s = found.settings  # run as the fit placed it
    led = llamacpp_ledger(model, gpu, tensors, s, engine)
    margin = fit_target_bytes(model, led.settings, engine)
    if led.devices[-1].model_bytes <= gathered_bytes(tensors):  # only the embeddings on the host: nothing offloaded
        return LlamaCppPlan(led, None, found, card_bytes, margin_bytes=margin)
    # the longest -c of this placement (its layers and experts where it puts them), with --fit's margin
    longest = longest_ctx(model, gpu, tensors, led.settings, *fit_room(gpu, card_bytes, target_bytes=margin))
    from llmsize.estimate.unified import is_unified

    if is_unified(gpu):
        led.notes.append(f"{gpu.id} shares one memory between CPU and GPU: layers left to the CPU read the same "
                         "memory and count against the same RAM, the CPU cores at less of its bandwidth than the GPU"
                         + (f" (--host-memory {host.name} not used: there is no other memory)" if host else ""))
        return LlamaCppPlan(led, None, found, card_bytes, cpu_layers_unified=True, longest_context_tokens=longest,
                            margin_bytes=margin)
    if host is None:
        led.notes.append("part of the model is in host memory: give --host-memory (e.g. DDR5-6000x2) or "
                         "--host-bandwidth-gb-s for its decode speed")
        return LlamaCppPlan(led, None, found, card_bytes, offloaded=True, longest_context_tokens=longest,
                            margin_bytes=margin)
    from llmsize.estimate.parallel import host_link
    from llmsize.estimate.speed import prefill_time_s
    from llmsize.estimate.step_inputs import prefill_inputs

    link = host_link(gpu)
    # the GPU's share of the prompt with the attention the engine runs (unfused: its scores written and read in
    # memory) and its ubatch
    pre = prefill_inputs(plan, "llamacpp", flash_attn=led.settings.flash_attn,
                         ubatch_tokens=led.settings.ubatch_size)
    gpu_alone = prefill_time_s(pre, constants) if constants else None
    if link is None:
        led.notes.append(f"{gpu.id}'s PCIe link is not in the catalog: no prefill estimate under offload")
    off = offload_speed(model, gpu, led, tensors, o.context, host, constants,
                        (plan.prefill.prompt_tokens, gpu_alone), link.gb_s if link else None,
                        gpu_part(plan, led, tensors, format_class))
    return LlamaCppPlan(led, off, found, card_bytes, offloaded=True, longest_context_tokens=longest,
                        margin_bytes=margin)


@dataclass(frozen=True)
class OffloadLever:
    """The diagnosis's lever for a GGUF model that does not fit the card: the split llama.cpp's --fit margin
    allows (`split_args`, its llama.cpp options), and with the host memory known its speed."""

    sentence: str
    split_args: tuple[str, ...] = ()  # () when not even the output and the cache fit
    gpu_bytes: float = 0.0
    speed: OffloadSpeed | None = None


def offload_lever(plan, exact, card_bytes: int, host: HostMemory | None, constants,
                  format_class: str = "kquant") -> OffloadLever | None:
    """The offload lever of `plan` (None where llama.cpp's offload does not apply: not a GGUF format, nor a
    checkpoint llama.cpp runs converted where the plan's runtime is llama.cpp's, a unified machine, a split over
    cards)."""
    from llmsize.estimate.capacity import LLAMACPP_RUNTIMES
    from llmsize.estimate.quant import LLAMACPP_CONVERTED

    converted = plan.fmt.id in LLAMACPP_CONVERTED and plan.inputs.runtime in LLAMACPP_RUNTIMES
    if not (plan.fmt.id.startswith("gguf-") or converted or (exact is not None and exact.tensors)):
        return None
    from llmsize.estimate.unified import is_unified

    if is_unified(plan.gpu):
        return None  # the host's RAM is the GPU's: nothing to offload to
    if plan.inputs.tp * plan.inputs.pp > 1:
        return None
    model, gpu = plan.model, plan.gpu
    tensors = file_tensors(plan, exact)
    # the plan's own llama.cpp options (an mmproj, slots) and engine (Ollama places whole layers), the split left to
    # the fit
    engine = "ollama" if plan.inputs.runtime == "ollama" else "llamacpp"
    given = plan.inputs.llamacpp
    o = (replace(given, gpu_layers=None, n_cpu_moe=0, cpu_moe=False) if given is not None
         else LlamaCppOptions(plan.inputs.context_tokens))
    found = fit_split(model, gpu, tensors, settings(engine, o, model.num_layers, gpu, plan.inputs.backend),
                      card_bytes, moe_offload=engine != "ollama", engine=engine)
    who = engine_name(engine)
    flags = f"`--engine {engine}`" if engine == "ollama" else "`--engine llamacpp --fit`"
    if found.how == "none":
        return OffloadLever(f"Offload with {who}: not even the output and the cache fit beside its --fit margin.")
    gpu_bytes = found.ledger.gpu_total_bytes
    if found.how == "as asked" or (found.how == "gpu_layers" and found.ledger.gpu_layers > model.num_layers):
        return OffloadLever(f"{who} holds it whole on the card ({gpu_bytes / 2**30:.1f} GiB within its --fit "
                            f"margin): nothing to offload (`--engine {engine}`).")
    split = (("--n-cpu-moe", str(found.settings.n_cpu_moe)) if found.how == "n_cpu_moe"
             else ("--gpu-layers", str(found.ledger.gpu_layers)))
    words = f"Offload with {who}: {' '.join(split)} keeps {gpu_bytes / 2**30:.1f} GiB on the card ({flags})"
    if host is None:
        return OffloadLever(words + "; its speed depends on the host memory (give --host-memory, e.g. DDR5-6000x2).",
                            split,
                            gpu_bytes)
    off = offload_speed(model, gpu, found.ledger, tensors, plan.inputs.context_tokens, host, constants,
                        gpu_step=gpu_part(plan, found.ledger, tensors, format_class))
    speed = f"{off.decode_tok_s:.1f}" if off.decode_tok_s else f"at most {off.ceiling_tok_s:.1f}"
    return OffloadLever(words + f", expected to decode at {speed} tok/s with {host.name}.", split, gpu_bytes, off)


LEDGER_NOT_FIT_NOTE = "as if this placement loaded: its buffers do not fit the card (the warning above)"
UNIFIED_CPU_NOTE = ("the layers left to the CPU are costed as the GPU's: on a unified machine they read the same "
                    "memory, but the CPU cores reach less of its bandwidth (not modelled), so this is an upper bound")


def unified_split_words(lp: LlamaCppPlan, weights_fit: bool) -> str | None:
    """The diagnosis's word on a unified machine's split, where the whole model does not fit the GPU's share but the
    engine's placement runs: its layers on the GPU, the rest on the CPU cores from the same RAM (None otherwise)."""
    if weights_fit or not lp.cpu_layers_unified or not lp.fits:
        return None
    led = lp.ledger
    who = engine_name(led.engine)
    return (f"As {who} places it: {led.gpu_layers} of {led.n_layer + 1} layers on the GPU (the output layer counts "
            "as one), the rest on the CPU cores from the same RAM; it runs, slower than the GPU's share alone "
            "(the CPU's part is not costed as such: the expected figures are an upper bound).")


def with_ledger(result, lp: LlamaCppPlan):
    """The expected figures of the placement llama.cpp gets (with_offload), said to be as-if where its buffers do
    not fit the card."""
    from dataclasses import replace

    result = with_offload(result, lp)
    if result.expected is None:
        return result
    from llmsize.estimate.step_inputs import NOT_FIT_NOTE

    kept = result.expected.notes
    if lp.cpu_layers_unified and lp.fits:  # the GPU's share alone does not hold the weights, its placement loads
        kept = tuple(n for n in kept if n != NOT_FIT_NOTE)
    as_if = lp.fits or NOT_FIT_NOTE in kept  # one as-if note is enough
    notes = ((UNIFIED_CPU_NOTE,) if lp.cpu_layers_unified else ()) + (() if as_if else (LEDGER_NOT_FIT_NOTE,))
    return replace(result, expected=replace(result.expected, notes=(*kept, *notes))) if notes else result


def with_offload(result, lp: LlamaCppPlan):
    """The expected figures of the placement llama.cpp gets: decode and time to first token of the offload (the
    ledger's offload lines) where part of the model is on the host, with their bands; the whole-card figures stay
    in a note. Decode at a batch above 1 is not estimated with part of the model on the host."""
    from dataclasses import replace

    from llmsize.estimate.step_inputs import NOT_FIT_NOTE

    off, e = lp.offload, result.expected
    if not lp.offloaded or e is None or result.runtime != "llamacpp":
        return result
    led = lp.ledger
    parts = []
    if led.gpu_layers <= led.n_layer:
        parts.append(f"{led.gpu_layers} of {led.n_layer + 1} layers on the card")
    if led.settings.n_cpu_moe:
        parts.append(f"the routed experts of {min(led.settings.n_cpu_moe, led.n_layer)} layers on the host")
    placed = " and ".join(parts) or "tensors outside its layers"
    if off is None or off.decode_tok_s is None:  # no host memory given, or no fitted constants on this backend
        why = ("give --host-memory (e.g. DDR5-6000x2) or --host-bandwidth-gb-s for the offload's speed"
               if off is None else "no fitted llama.cpp constants on this backend for its GPU part")
        return replace(result, expected=None, reason=f"part of the model is in host memory ({placed}): {why}; "
                       f"whole on the card it would decode at {e.tok_s:,.1f} tok/s")
    notes = [f"offloaded: {placed}; the whole model on the card would decode at {e.tok_s:,.1f} tok/s (band "
             f"{e.tok_s_low:,.1f}-{e.tok_s_high:,.1f})"]
    if e.batch > 1:
        notes.append(f"decode at batch {e.batch} is not estimated with part of the model on the host (the experts "
                     "a batch routes there grow with it)")
    ttft = ttft_low = ttft_high = None
    if e.ttft_s is None:  # why the offload has no time to first token, where it has none
        ttft_reason = e.ttft_reason
    elif not off.pcie_gb_s:
        ttft_reason = "the card's PCIe link rate is not in the catalog, and the host's weights cross it once per ubatch"
    else:
        ttft_reason = (f"a prompt shorter than {OFFLOAD_MIN_BATCH} tokens runs the host's layers on the CPU, which "
                       "is not estimated")
    if off.prefill_s is not None and e.ttft_s:
        ttft = off.prefill_s
        ttft_low, ttft_high = ttft * e.ttft_s_low / e.ttft_s, ttft * e.ttft_s_high / e.ttft_s
        notes.append("time to first token with the host's weights crossing PCIe once per ubatch, of the routed "
                     "experts those the ubatch's tokens chose under uniform routing (the ledger's prefill line); slow "
                     "against published runs at small ubatches, whose tokens chose fewer experts than uniform "
                     "routing would (benchmarks/offload_speed.py)")
    if e.spec_tok_s is not None:
        notes.append("speculative decoding is not estimated with part of the model on the host")
    one = e.batch == 1
    low = off.decode_tok_s_low  # as low as the whole-card band's published floor reaches (Expected.decode_floor)
    if e.decode_floor is not None and low is not None:
        low = min(low, off.decode_tok_s * e.decode_floor)
    return replace(result, expected=replace(
        e, tok_s=off.decode_tok_s, tok_s_low=low, tok_s_high=off.decode_tok_s_high,
        aggregate_tok_s=off.decode_tok_s if one else None, aggregate_tok_s_low=low if one else None,
        aggregate_tok_s_high=off.decode_tok_s_high if one else None, ttft_s=ttft, ttft_s_low=ttft_low,
        ttft_s_high=ttft_high, ttft_reason=None if ttft else ttft_reason, spec_tok_s=None, spec_tok_s_low=None,
        spec_tok_s_high=None,
        terms_s={"GPU part": off.gpu_time_s, "host part": off.host_time_s, "hand-offs": off.handoff_time_s},
        basis=f"{e.basis} (the GPU part); {off.host_costing[0].lower() + off.host_costing[1:]}",
        ceiling_tok_s=off.ceiling_tok_s, notes=(*(n for n in e.notes if n != NOT_FIT_NOTE), *notes)))
