"""A plan's memory budget as llama.cpp allocates it, for a plan its runtime is llama.cpp's (a GGUF format or file,
an Apple card, --runtime/--engine llamacpp or ollama): so that `plan`, `plan --engine llamacpp` and `fit` give one
longest context.

    left for the cache = the card's memory as its allocator sees it (card_bytes)
                         - the model buffer with every layer on the card (the token embedding stays in host memory)
                         - the compute buffer at the context - --fit's margin (1,024 MiB, its --fit-target)

The longest context is the largest -c whose ledger fits (in llama.cpp's steps of 256 cells), the compute buffer
growing with it; the sequences are the slots whose ledger fits. The generic budget (VRAM x utilization - weights -
overhead) stays where --gpu-util or --overhead-gib is given, for a split over cards, and for a format llama.cpp does
not load (a cache type it does not store is refused: plan.make_plan)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.estimate.capacity import WHOLE_CARD_GPU_UTIL, ContextLimit, EngineShare, MemoryBudget
from llmsize.estimate.llamacpp_fit import fit_room, fit_target_bytes, fits, longest_ctx
from llmsize.estimate.llamacpp_memory import LlamaCppSettings, cache_runs, llamacpp_ledger
from llmsize.estimate.quant import LLAMACPP_KV_TYPES

PLAN_CACHE_TYPES = {"fp16": "f16", "bf16": "bf16", "fp32": "f32"}  # the plan's dtypes llama.cpp stores as such


def cache_types(kv_dtype: str) -> tuple[str, str] | None:
    """llama.cpp's -ctk/-ctv for a plan's cache dtype (a `K/V` pair: quant.llamacpp_kv_dtype), None where llama.cpp
    stores no such cache (fp8, int8, nvfp4)."""
    key = kv_dtype.lower()
    if "/" in key:
        k, _, v = key.partition("/")
        return (k, v) if k in LLAMACPP_KV_TYPES and v in LLAMACPP_KV_TYPES else None
    t = PLAN_CACHE_TYPES.get(key, key if key in LLAMACPP_KV_TYPES else None)
    return (t, t) if t else None


LLAMA_MAX_SEQ = 256  # llama.cpp's most sequences (slots) a context holds (llama-context.cpp: n_seq_max <= 256)


@dataclass(frozen=True)
class LedgerBudget:
    budget: MemoryBudget
    longest: ContextLimit | None  # None: not searched (`search=False`)
    sequences: int  # slots of the plan's context the ledger holds (at most LLAMA_MAX_SEQ); 0 or 1 unsearched
    swa_cells: int | None = None  # a slot's sliding-window cells (PAD(window + ubatch, 256)); None: no such layer
    swa_window: int | None = None  # the window those cells hold (llamacpp_memory.cache_runs' n_swa)


def ledger_budget(model: ModelSpec, gpu: GpuSpec, tensors: list[tuple[str, int]], s: LlamaCppSettings,
                  card: int, card_basis: str, context_tokens: int, engine: str = "llamacpp",
                  search: bool = True) -> LedgerBudget:
    """The budget of llama.cpp's ledger with settings `s` and every layer on the card (the plan's placement; an
    offload is the ledger's own, beside it); `card`: what the card offers its allocator (llamacpp_plan.card_bytes).
    The sequences are the most slots of `context_tokens` each (non-unified: a stream a slot, its sliding cache
    window + ubatch cells) whose ledger fits; without `search`, only whether one does (a lever's quick look)."""
    whole = replace(s, gpu_layers=None, n_cpu_moe=0)
    led = llamacpp_ledger(model, gpu, tensors, whole, engine)
    dev = led.gpu
    cpu = next(d for d in led.devices if d.name == "CPU")
    target = fit_target_bytes(model, whole, engine)
    share = EngineShare(engine, dev.compute_bytes, target, cpu.model_bytes, card_basis, dev.projector_bytes,
                        led.projector_holds)
    budget = MemoryBudget(card, WHOLE_CARD_GPU_UTIL, dev.model_bytes, dev.compute_bytes + dev.projector_bytes + target,
                          engine=share)
    room, ram = fit_room(gpu, card, target_bytes=target)
    one = replace(whole, parallel=1, kv_unified=False)
    swa = (llamacpp_ledger(model, gpu, tensors, replace(one, ctx_size=context_tokens), engine).cells_swa,
           cache_runs(model).n_swa)

    def holds(slots: int) -> bool:
        return fits(llamacpp_ledger(model, gpu, tensors, replace(one, parallel=slots,
                                                                  ctx_size=slots * context_tokens), engine), room, ram)

    if not search:
        return LedgerBudget(budget, None, int(holds(1)), *swa)
    lo, hi = 0, LLAMA_MAX_SEQ + 1  # holds(lo), not holds(hi)
    if holds(LLAMA_MAX_SEQ):
        lo = LLAMA_MAX_SEQ
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if holds(mid) else (lo, mid)
    limit = model.max_position_embeddings
    if fits(llamacpp_ledger(model, gpu, tensors, replace(one, ctx_size=limit), engine), room, ram):
        return LedgerBudget(budget, ContextLimit(limit, "model"), lo, *swa)
    n = longest_ctx(model, gpu, tensors, one, room, ram)
    return LedgerBudget(budget, ContextLimit(n or 0, "memory"), lo, *swa)


def plan_ledger_budget(model: ModelSpec, gpu: GpuSpec, inputs, runtime: str, fmt_id: str, exact=None,
                       search: bool = True, scope: str | None = None) -> LedgerBudget | None:
    """The ledger budget of a one-card plan whose runtime is llama.cpp's (or Ollama's, LM Studio's); None where the
    generic budget stays: another runtime, a cache llama.cpp does not store, a format it does not load. `scope`: the
    plan's, which an NVFP4 checkpoint's file follows."""
    from llmsize.errors import InvalidValueError
    from llmsize.estimate.capacity import LLAMACPP_RUNTIMES
    from llmsize.estimate.llamacpp_memory import gguf_file_tensors
    from llmsize.estimate.llamacpp_options import LlamaCppOptions, card_memory, settings
    from llmsize.estimate.runtimes import gguf_exact

    types = cache_types(inputs.kv_dtype)
    if runtime not in LLAMACPP_RUNTIMES or types is None:
        return None
    try:
        # read, not changed
        tensors = exact.tensors if gguf_exact(exact) else gguf_file_tensors(model, fmt_id, scope)
    except InvalidValueError:
        return None  # not a file llama.cpp loads (--runtime llamacpp with nvfp4 weights): the generic budget
    engine = "ollama" if runtime == "ollama" else "llamacpp"
    o = inputs.llamacpp or LlamaCppOptions(inputs.context_tokens, cache_type_k=types[0], cache_type_v=types[1],
                                           flash_attn=None if inputs.flash_attn else "off")
    card, basis = card_memory(gpu, inputs.wired_limit_bytes)
    return ledger_budget(model, gpu, tensors, settings(engine, o, model.num_layers, gpu, inputs.backend), card, basis,
                         inputs.context_tokens, engine, search)
