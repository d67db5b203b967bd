"""What saturates first, and which lever applies (the seeds' map: quantize, smaller KV dtype,
GQA/MLA/window, batching, more cards)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from llmsize.catalog.schema import STATE_KINDS, GpuSpec, ModelSpec
from llmsize.estimate.capacity import max_concurrent_sequences, max_context_tokens, memory_budget, overhead_of
from llmsize.estimate.kv import kv_bytes
from llmsize.estimate.memo import by_identity
from llmsize.estimate.quant import FORMATS, RUNTIME_FORMATS, RUNTIME_KV, QuantFormat, kv_dtype_flags
from llmsize.estimate.unified import usable_memory
from llmsize.estimate.weights import weight_bytes
from llmsize.units import GB

# Formats tried, largest first, when the weights do not fit: the plan's runtime's (quant.RUNTIME_FORMATS), these
# without one.
SMALLER_FORMATS = ("fp8", "nvfp4", "mxfp4", "int4-g128", "gguf-q3_k_m", "gguf-q2_k")
SMALLER_KV = ("fp8", "nvfp4")
SEGMENT_WORDS = {"desktop-soc": "machines", "consumer": "consumer cards", "workstation": "workstation cards",
                 "datacenter": "datacenter cards"}
MACOS_KEEP_BYTES = 8 * 2**30  # what a raised wired limit should still leave macOS (llmsize's margin, not Apple's)


@dataclass(frozen=True)
class Diagnosis:
    saturates: str  # "weights", "kv_cache", "bandwidth", "compute"
    summary: str
    levers: list[str] = field(default_factory=list)
    weights_fit: bool = True
    shortfall_bytes: float = 0.0  # how much the weights + overhead exceed the budget
    cards_needed: int = 1


def _fits(model: ModelSpec, gpu: GpuSpec, fmt: QuantFormat, scope: str, p: dict) -> float:
    """KV budget left on `gpu` with `fmt`, as a plan there would budget it (> one sequence at the context means it
    fits): llama.cpp's ledger where the plan's is (0 where it holds no sequence of the context: its sliding caches
    and padding are its own), else the generic budget at the share the user gave or that card's runtime default."""
    from dataclasses import replace

    inputs = p["inputs"]
    wired = inputs.wired_limit_bytes if gpu.id == p["gpu"].id else None  # the limit set on this machine only
    there = replace(inputs, quant=fmt.id, scope=scope, wired_limit_bytes=wired)
    return _kv_left(model, gpu, fmt, there, p["budget"].engine is not None, p.get("engine"), p.get("util_given", True))


@by_identity(maxsize=8192, objects=2)
def _kv_left(model: ModelSpec, gpu: GpuSpec, fmt: QuantFormat, there, ledger: bool, engine: str | None,
             util_given: bool) -> float:
    """_fits's budget with the plan's inputs `there` at the format and scope tried (a plan's search asks the same of
    each card it passes, and a catalog-wide run of plans the same of every card again)."""
    from llmsize.estimate.capacity import default_gpu_util
    from llmsize.estimate.llamacpp_budget import plan_ledger_budget

    usable = usable_memory(gpu, there.wired_limit_bytes)
    if ledger:
        led = plan_ledger_budget(model, gpu, there, engine, fmt.id, search=False, scope=there.scope)
        if led is not None:
            return led.budget.kv_budget_bytes if led.sequences else 0.0
    util = there.gpu_util if util_given else default_gpu_util(engine, usable.shares_all_ram)[0]
    w = weight_bytes(model, fmt, there.scope).bytes_total
    return memory_budget(gpu, w, util, overhead_of(there), usable.bytes).kv_budget_bytes


def _one_sequence_bytes(p: dict) -> float:
    return (p.get("kv_card") or p["kv"]).bytes_per_sequence


def _bits_words(model: ModelSpec, fmt: QuantFormat) -> str:
    """A format's bits as the plan's weights table gives them: a GGUF mix's or a recipe's average over the model's
    quantized weights (3.84 for Q3_K_M on a Llama, not Q3_K's 3.4375), else the format's own."""
    if fmt.mix or fmt.recipe:
        return f"{weight_bytes(model, fmt, fmt.default_scope).bits_per_weight:.2f} bits on average"
    return f"{float(fmt.bits_per_weight):g} bits"


def _weights_levers(p: dict, candidates: list[GpuSpec]) -> tuple[list[str], int]:
    model, gpu, fmt = p["model"], p["gpu"], p["fmt"]
    need = _one_sequence_bytes(p)
    levers = []
    current_bits = float(fmt.bits_per_weight)
    own = RUNTIME_FORMATS.get(p.get("runtime"), SMALLER_FORMATS)
    # the runtime's own formats first; where none fits, a smaller one another runtime loads, named with it
    for fid in (*own, *(f for f in SMALLER_FORMATS if f not in own)):
        f = FORMATS[fid]
        if float(f.bits_per_weight) >= current_bits or (fid == "nvfp4" and gpu.vendor != "NVIDIA"):
            continue  # NVFP4 kernels (FP4 tensor cores, Marlin) are NVIDIA's
        left = _fits(model, gpu, f, f.default_scope, p)
        if left > need:
            from llmsize.estimate.runtimes import RUNTIME_NAMES, not_on

            name = lambda rt: RUNTIME_NAMES.get(rt, rt)  # noqa: E731
            if fid not in own:
                rt = next((rt for rt, fs in RUNTIME_FORMATS.items() if fid in fs and not_on(rt, gpu) is None), None)
                if rt is None:
                    continue  # no runtime that loads it runs on this card
            elsewhere = "" if fid in own else f" (under {name(rt)}: not a format {name(p.get('runtime'))} loads)"
            levers.append(f"Quantize: in {fid} ({_bits_words(model, f)}){elsewhere} the weights fit, "
                          f"leaving {left / GB:.1f} GB for the KV cache.")
            break
    levers += _wired_limit_lever(p, need)
    from llmsize.estimate.runtimes import not_on

    # a card the plan's runtime runs on (llama.cpp's GGUF file on a Gaudi would be no answer)
    runs = (lambda c: True) if p.get("runtime") is None else (lambda c: not_on(p["runtime"], c) is None)
    # the smallest that holds it, and the smallest of the same kind (a Mac for a Mac, a unified machine for one),
    # where that is another: each card's budget is priced only when the search reaches it, smallest first (and
    # kept: _kv_left)
    larger = sorted((c for c in candidates if c.memory_bytes > gpu.memory_bytes and runs(c)),
                    key=lambda c: (c.memory_bytes, -c.bandwidth_gb_s))
    holds_it = lambda c: _fits(model, c, fmt, p["scope"], p) > need  # noqa: E731
    c = next((c for c in larger if holds_it(c)), None)
    if c is not None:
        kin = next((k for k in larger if k.vendor == gpu.vendor and k.segment == gpu.segment and holds_it(k)), None)
        kind = SEGMENT_WORDS.get(gpu.segment, f"{gpu.segment} cards")
        same = (f"; of {gpu.vendor}'s {kind}, {kin.id} ({kin.memory_size:g} {kin.memory_vendor_unit}, "
                f"{kin.bandwidth_gb_s:,.0f} GB/s)") if kin is not None and kin.id != c.id else ""
        levers.append(f"Bigger card: the smallest catalog card that holds it in {fmt.id} is {c.id} "
                      f"({c.memory_size:g} {c.memory_vendor_unit}, {c.bandwidth_gb_s:,.0f} GB/s){same}.")
    fit = p.get("fit")
    cards = 1
    if fit is not None:
        cards = fit.cards
        link = p.get("fit_link") or "the card link"
        per_node = p["inputs"].gpus_per_node
        nodes = -(-fit.cards // per_node)
        where = f" on {nodes} nodes of {per_node}" if nodes > 1 else ""
        if nodes > 1:
            link += f" and {p['inputs'].node_link_gb_s:g} GB/s per GPU between nodes"
        moved = ("the all-reduces" if fit.pp == 1 else "the stage hand-offs" if fit.tp == 1
                 else "the all-reduces and stage hand-offs")
        levers.append(f"More cards: {fit.cards} x {gpu.id}{where} (--tp {fit.tp} --pp {fit.pp}) hold it, "
                      f"{fit.weights_per_card_bytes / GB:.1f} GB of weights per card, a batch-1 decode ceiling of "
                      f"{fit.ceiling_tok_s:,.1f} tok/s with {moved} over {link} costed.")
    elif p.get("card_model") is None:
        levers.append(f"More cards: no split of up to 256 x {gpu.id} holds it." if p.get("fit_link") else
                      f"More cards: {gpu.id} has no card-to-card link (the catalog's interconnect): no split.")
    return levers, cards


def _wired_limit_lever(p: dict, one_sequence_bytes: float) -> list[str]:
    """On a Mac, a model above Metal's working set but within the RAM loads and pages every token: it does not
    fit as is, but raising the GPU's limit makes it fit."""
    gpu, inputs = p["gpu"], p["inputs"]
    amd_soc = gpu.vendor == "AMD" and gpu.segment == "desktop-soc"
    if not (gpu.vendor == "Apple" or amd_soc) or inputs.wired_limit_bytes is not None:
        return []
    b = p["budget"]  # the plan's own: the generic one, or llama.cpp's ledger
    need = (b.weights_bytes + b.overhead_bytes + one_sequence_bytes) / b.gpu_util
    ram = gpu.memory_bytes
    if need > ram - MACOS_KEEP_BYTES:  # the limit that holds it would starve the OS
        if need > ram:
            return []
        who = "macOS" if gpu.vendor == "Apple" else "the OS"
        share = "Metal's working set" if gpu.vendor == "Apple" else "the GPU's default share (GTT)"
        return [f"Above {share}, within the RAM: as is it loads and pages every token, and the GPU limit that would "
                f"hold it ({need / GB:.1f} GB) leaves {who} under {MACOS_KEEP_BYTES / 2**30:.0f} GiB of the "
                f"{ram / 2**30:.0f} GiB (the margin llmsize keeps for it): a machine with more memory, or a smaller "
                "format."]
    mib = int(-(-need // 2**20))
    if amd_soc:
        gib = -(-mib // 1024)
        gb = math.floor(gib * 2**30 / GB * 100) / 100  # --wired-limit-gb is in GB: at most the GiB it names
        return [f"Above the GPU's default share (GTT), within the RAM. Raise it: the BIOS UMA Frame Buffer Size, or "
                f"on Linux the kernel parameters `ttm.pages_limit={gib * 262144} ttm.page_pool_size={gib * 262144}` "
                f"({gib} GiB), and plan with --wired-limit-gb {gb:.2f}: {(ram - gib * 2**30) / GB:.1f} GB stay with "
                "the OS."]
    gb = math.ceil(need / GB * 10) / 10  # up to a tenth of a GB, so the plan it names holds the sequence
    wired_mib = math.ceil(gb * GB / 2**20)  # the sysctl's MiB, at least those GB
    return [f"Above Metal's working set, within the RAM: as is it loads and pages every token. Raise the GPU's "
            f"limit, `sudo sysctl iogpu.wired_limit_mb={wired_mib}` (until reboot), and plan with "
            f"--wired-limit-gb {gb:.1f}: {(ram - wired_mib * 2**20) / GB:.1f} GB stay with macOS."]


def _kv_flags(p: dict, dt: str) -> str:
    """How a plan's runtime is told to keep its cache in `dt`: the plan's options, and under Ollama, which takes
    one type for K and V from its environment, that variable (its flash attention, which a quantized V cache needs,
    on where the card supports it: OLLAMA_FLASH_ATTENTION)."""
    flags = " ".join(kv_dtype_flags(dt))
    if p.get("engine") == "ollama" and "/" in dt:
        return f"OLLAMA_KV_CACHE_TYPE={dt.split('/')[0]} with OLLAMA_FLASH_ATTENTION=1 (plan: {flags})"
    return flags


def _kv_levers(p: dict) -> list[str]:
    model, inputs = p.get("card_model") or p["model"], p["inputs"]
    levers = []
    kinds = {g.mixer.kind for g in model.layer_groups if g.mixer}
    for dt in RUNTIME_KV.get(p.get("runtime"), SMALLER_KV):  # the caches the plan's runtime stores
        if dt == "nvfp4" and not p["gpu"].dense_tflops.get("fp4"):
            continue  # an FP4 cache where the card has FP4 tensor cores (Blackwell)
        kv_now = p.get("kv_card") or p["kv"]
        states = p.get("kv_states", "neutral")  # llama.cpp's F32 states, where its ledger sized the slots
        if kv_bytes(model, 1, dt, states).bytes_per_token >= kv_now.bytes_per_token and kv_now.bytes_per_token:
            continue
        n = max_concurrent_sequences(model, dt, inputs.context_tokens, p["budget"].kv_budget_bytes, states)
        if n == 0:  # not even one sequence of the asked context: what one can hold with it
            longest = max_context_tokens(model, dt, p["budget"].kv_budget_bytes, states=states).tokens
            if longest > p["max_context"].tokens:
                levers.append(f"Smaller KV dtype: {_kv_flags(p, dt)} holds one sequence of "
                              f"{longest:,} tokens (not {inputs.context_tokens:,}).")
            break
        beyond = inputs.context_tokens > model.max_position_embeddings  # engines refuse it: the plan's note says so
        levers.append(f"Smaller KV dtype: {_kv_flags(p, dt)} holds {n:,} sequence{'s' * (n != 1)} of "
                      f"{inputs.context_tokens:,} tokens" + (f" in memory, beyond the model's own limit of "
                                                             f"{model.max_position_embeddings:,}." if beyond else "."))
        break
    have = []
    if "mla" in kinds:
        have.append("MLA")
    if "sliding" in kinds:
        have.append("sliding windows")
    if "compressed" in kinds:
        have.append("compressed attention (a row every few tokens)")
    if kinds & set(STATE_KINDS):
        have.append("constant-state layers")
    gqa = [g.mixer for g in model.layer_groups if g.mixer is not None and g.mixer.kind in ("full", "sliding")
           and g.mixer.num_key_value_heads < g.mixer.num_attention_heads]
    if gqa:
        have.append("GQA")
    if "compressed" in kinds:
        levers.append(f"Architecture: this model already uses {', '.join(have)}: a DeepSeek-V4 token costs a share "
                      "of a row in most layers, less than any MLA or GQA model's.")
    elif have:
        levers.append(f"Architecture: this model already uses {', '.join(have)}; a model that caches less per "
                      "token (fewer KV heads, MLA, more sliding-window or constant-state layers) holds more.")
    else:
        levers.append("Architecture: this model uses plain multi-head attention; a model with GQA, MLA or sliding "
                      "windows caches less per token.")
    whole = kinds & {"mla", "compressed"}
    levers.append("Shorter contexts or fewer concurrent sequences; more cards split the cache" + (
        " by layers (--pp): tensor parallelism keeps a whole copy of each layer's "
        + ("latent" if "mla" in whole else "rows") + " on every card." if whole else "."))
    return levers


def diagnose(p: dict, candidates: list[GpuSpec]) -> Diagnosis:
    budget, inputs = p["budget"], p["inputs"]
    if not budget.weights_fit:
        short = -budget.kv_budget_bytes
        levers, cards = _weights_levers(p, candidates)
        return Diagnosis(
            "weights",
            f"The weights ({(p.get('weights_card') or p['weights']).bytes_total / GB:.1f} GB in {p['fmt'].id}"
            f"{' per card' if p.get('weights_card') else ''}) plus runtime overhead "
            f"exceed the {budget.budget_bytes / GB:.1f} GB budget by {short / GB:.{2 if short < 0.05 * GB else 1}f} "
            "GB: it does not fit.",
            levers, weights_fit=False, shortfall_bytes=short, cards_needed=cards,
        )
    step = p["decode_b"]
    # the memory's limit, not the model's (a --context beyond max_position_embeddings: the plan's note says so)
    memory_caps = p["max_context"].tokens < inputs.context_tokens and p["max_context"].limited_by != "model"
    if p["max_sequences"] < inputs.batch or memory_caps:
        scores = ""
        levers = _kv_levers(p)
        if budget.scores_bytes:
            scores = (f" Without FlashAttention one layer's attention scores for the {p['prompt_tokens']:,}-token "
                      f"prompt take {budget.scores_bytes / GB:.1f} GB of it.")
            levers.insert(0, "FlashAttention: fused attention keeps the scores in on-chip tiles (drop "
                             "--no-flash-attn); an unfused engine splits the prompt (llama.cpp's -ub 512 holds a "
                             "512-row slice of the scores).")
        return Diagnosis(
            "kv_cache",
            f"The KV cache saturates first: {p['max_sequences']:,} sequence{'s' * (p['max_sequences'] != 1)} of "
            f"{inputs.context_tokens:,} tokens fit, {inputs.batch:,} asked; one sequence can hold "
            f"{p['max_context'].tokens:,} tokens."
            + scores,
            levers,
        )
    kv_share = step.kv_bytes / step.bytes_total
    if step.bound == "memory":
        levers = []
        bits = float(p["fmt"].bits_per_weight)
        if bits > 5:  # against a 4-bit format's ~4.5 bits with its scales
            levers.append(f"Quantize the weights: 4-bit formats read up to {bits / 4.5:.1f}x fewer weight bytes per "
                          f"token than {p['fmt'].id}.")
        if kv_share > 0.3:
            levers.append(f"The KV cache is {kv_share:.0%} of the bytes read per step: a smaller KV dtype, "
                          "or GQA/MLA/sliding windows, cut it.")
        best = p["decode_best"]
        if best is not None and best.batch > inputs.batch:
            ridge = p["ridge_batch"]
            why = (f"memory holds {p['max_sequences']:,} sequence{'s' * (p['max_sequences'] != 1)} of "
                   f"{inputs.context_tokens:,} tokens"
                   if best.batch == p["max_sequences"] else f"decode turns compute-bound at batch {ridge:,}")
            levers.append(f"Batching: {why}; batch {best.batch:,} would give {best.tok_s:,.0f} tok/s in aggregate "
                          f"({best.tok_s / best.batch:,.1f} per sequence) against {step.tok_s:,.0f} now.")
        if inputs.spec is None:  # given, its section prices it
            levers.append("Speculative decoding: several tokens per pass over the weights.")
        return Diagnosis(
            "bandwidth",
            f"Decode is memory-bound at batch {inputs.batch:,}: each step reads {step.bytes_total / GB:.2f} GB "
            f"({kv_share:.0%} of it KV cache); compute would take "
            + (f"{step.compute_time_s / step.memory_time_s:.1%} of the memory time."
               if step.compute_time_s is not None else "an unknown time (no TFLOPS figure)."),
            levers,
        )
    return Diagnosis(
        "compute",
        f"Decode is compute-bound at batch {inputs.batch:,}: the FLOPs take "
        f"{step.compute_time_s / step.memory_time_s:.1f}x the memory time.",
        ["Lower-precision compute (FP8/FP4 tensor cores) raises the roof.",
         "More cards split the FLOPs; a smaller batch lowers latency per token."],
    )
