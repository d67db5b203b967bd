"""One plan: a model on a card under formats and knobs, every estimator composed, with its assumptions.
This is the one thing the CLI calls for `llmsize plan`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from llmsize.catalog.recipe import RECIPE_PARTS
from llmsize.catalog.schema import STATE_KINDS, GpuSpec, ModelSpec
from llmsize.errors import InvalidValueError, LlmsizeError
from llmsize.estimate.capacity import (
    DEFAULT_GPU_UTIL,
    LLAMACPP_RUNTIMES,
    NO_SEQUENCE,
    NO_WEIGHTS,
    ContextLimit,
    MemoryBudget,
    default_gpu_util,
    kv_pool_tokens,
    max_concurrent_sequences,
    max_context_tokens,
    memory_budget,
    overhead_of,
)
from llmsize.estimate.decode import DecodeModel, DecodeStep, check_batch
from llmsize.estimate.diagnosis import Diagnosis, diagnose
from llmsize.estimate.flops import ComputePeak, compute_peak
from llmsize.estimate.kv import KvBytes, check_context, kv_bytes, mla_mixers
from llmsize.estimate.kv_policy import KvPolicy, capped_model
from llmsize.estimate.llamacpp_budget import LLAMA_MAX_SEQ, cache_types, plan_ledger_budget
from llmsize.estimate.llamacpp_memory import host_tables
from llmsize.estimate.parallel import (
    DEFAULT_GPUS_PER_NODE,
    DEFAULT_NODE_LINK_GB_S,
    Comm,
    card_link,
    make_comm,
    shard_model,
)
from llmsize.estimate.params import (
    COMPONENTS,
    model_pieces,
    params_active,
    params_active_with_embedding,
    params_total,
)
from llmsize.estimate.prefill import Prefill, prefill_time, unfused_scores_bytes
from llmsize.estimate.quant import FORMATS, LLAMACPP_KV_TYPES, QuantFormat, kv_dtype_bytes, quant_format
from llmsize.estimate.runtime_model import departure, held_model, kv_read_factor, run_model, towers_left_out
from llmsize.estimate.speculative import (
    Spec,
    SpecDecode,
    check_mtp_runtime,
    check_spec,
    spec_pipeline_note,
    speculate,
)
from llmsize.estimate.speed import is_ternary
from llmsize.estimate.unified import usable_memory
from llmsize.estimate.weights import WeightBytes, check_scope, weight_bytes, weight_bytes_read
from llmsize.units import GB, GiB


@dataclass(frozen=True)
class PlanInputs:
    quant: str | None = None  # None: the model's release format
    scope: str | None = None  # None: the release scope for the release format, else the format's default
    kv_dtype: str | None = "bf16"  # None: the runtime's own (expected.runtime_kv_dtype)
    context_tokens: int = 4096
    batch: int = 1
    prompt_tokens: int | None = None  # None: the context
    gpu_util: float | None = None  # None: the runtime's own default (capacity.default_gpu_util)
    overhead_bytes: float | None = None  # None: the runtime's own: llama.cpp's ledger where the plan follows it
    # (llamacpp_budget.py), else capacity.DEFAULT_OVERHEAD_BYTES (1.5 GiB)
    compute_precision: str | None = None
    tp: int = 1  # tensor-parallel cards
    pp: int = 1  # pipeline stages
    nodes: int | None = None  # the user's node count (one stage per node); None: tp x pp packed into nodes
    node_link_gb_s: float = DEFAULT_NODE_LINK_GB_S
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE
    wired_limit_bytes: float | None = None  # a unified machine's GPU limit (Metal's working set), if known
    memory_gb: float | None = None  # the memory the user gave the card or machine (--memory-gb), GB
    kv_policy: KvPolicy | None = None  # a what-if cap on the tokens each layer caches (estimate/kv_policy.py)
    spec: Spec | None = None  # speculative decoding (estimate/speculative.py)
    flash_attn: bool = True  # False: the prompt's attention scores are held and moved in memory (prefill.py)
    language_model_only: bool = False  # the text served alone: no tower loaded (runtime_model.towers_left_out)
    runtime: str | None = None  # the runtime or engine the user named (its default share of the card); None: the
    # format's and card's default runtime (expected.default_runtime)
    llamacpp: object | None = None  # llamacpp_plan.LlamaCppOptions given with --engine llamacpp/ollama; None: its
    # defaults at the context (the budget of a plan llama.cpp runs follows its ledger with them)
    backend: str | None = None  # the backend the runtime runs on where the user named one (vulkan: llama.cpp's
    # Vulkan backend); None: the card's own (expected.backend)
    fp4_kernel: str | None = None  # "marlin": FP4 weights multiplied in 16 bits by the weight-only Marlin kernel
    # (vLLM's --linear-backend marlin); "native": on the FP4 tensor cores; None: the runtime's choice for the card
    # (expected.kernel_class)


def default_context(model: ModelSpec, usual: int) -> tuple[int, str | None]:
    """The context a plan sizes when none is asked for: `usual`, or the model's own where it is shorter (engines
    refuse a longer one), with a note saying so."""
    if model.max_position_embeddings >= usual:
        return usual, None
    return model.max_position_embeddings, (f"--context defaults to the model's {model.max_position_embeddings:,} "
                                           f"tokens (its max_position_embeddings), under the usual {usual:,}")


def beyond_positions_note(model: ModelSpec, context_tokens: int) -> str | None:
    """The words for a context past the model's positions (engines refuse it), or None within them."""
    if context_tokens <= model.max_position_embeddings:
        return None
    return (f"--context {context_tokens:,} is beyond the model's max_position_embeddings "
            f"{model.max_position_embeddings:,}: engines refuse it; the figures extrapolate")


@dataclass(frozen=True)
class Fit:
    """The smallest tp x pp that holds a model which does not fit one card, and what it decodes at."""

    tp: int
    pp: int
    ceiling_tok_s: float
    weights_per_card_bytes: float

    @property
    def cards(self) -> int:
        return self.tp * self.pp


@dataclass(frozen=True)
class Plan:
    model: ModelSpec
    gpu: GpuSpec
    inputs: PlanInputs
    fmt: QuantFormat
    scope: str
    prompt_tokens: int
    params_total: int
    params_active: int  # the input embedding excluded (params.ACTIVE_DEFINITION)
    params_active_with_embedding: int
    weights: WeightBytes
    kv: KvBytes
    budget: MemoryBudget
    max_context: ContextLimit
    max_sequences: int
    kv_pool_tokens: int | None
    peak: ComputePeak
    decode_1: DecodeStep
    decode_b: DecodeStep
    decode_ceiling_tok_s: float
    ridge_batch: int | None
    decode_best: DecodeStep | None  # the largest useful batch: memory-limited or at the ridge
    prefill: Prefill
    diagnose_plan: Callable[[], Diagnosis] = field(repr=False, compare=False)  # `diagnosis`, worked out when read
    assumptions: list[str] = field(default_factory=list)
    weights_estimate: WeightBytes | None = None  # the analytic figure, when `weights` is exact (headers)
    exact: object | None = None  # llmsize.importer.exact.ExactWeights behind `weights`
    notes: list[str] = field(default_factory=list)  # what an import noticed (generic mapping, exclusions)
    gpu_util_given: bool = True  # False: inputs.gpu_util is the runtime's default, not the user's
    kv_dtype_given: bool = True  # False: inputs.kv_dtype is the runtime's default for the model, not the user's
    warnings: list[str] = field(default_factory=list)  # printed first: the plan is not what the files hold
    card_model: ModelSpec | None = None  # what one card holds when tp x pp > 1
    weights_card: WeightBytes | None = None  # weights one card holds (stage, tp shard)
    kv_card: KvBytes | None = None  # KV of one sequence on one card
    kv_states: str = "neutral"  # how the runtime keeps a recurrent layer's state (kv.STATE_BYTES)
    comm: Comm | None = None
    decode_model: DecodeModel | None = None  # the step at any batch (fleet sizing), same inputs as decode_b
    fit: Fit | None = None  # when one card is not enough: the smallest tp x pp that is
    speculative: SpecDecode | None = None  # with --spec: batch-1 ceiling and memory with the draft

    @functools.cached_property
    def diagnosis(self) -> Diagnosis:
        """What saturates first and the levers: worked out when first read (a fleet or compare search makes hundreds
        of plans whose diagnosis nobody reads; a lever tries other formats, GGUF mixes among them)."""
        return self.diagnose_plan()

    @property
    def weights_vs_estimate(self) -> dict[str, float | None]:
        """(exact - estimate) / estimate by component and for the total; None where either side is zero."""
        if self.weights_estimate is None:
            return {}
        pairs = {c: (self.weights.stored_bytes[c], self.weights_estimate.stored_bytes[c]) for c in COMPONENTS}
        pairs["total"] = (self.weights.bytes_total, self.weights_estimate.bytes_total)
        return {c: (a - b) / b if a and b else None for c, (a, b) in pairs.items()}

    @property
    def ridge_point_flop_per_byte(self) -> float | None:
        if not self.peak.flop_per_s:
            return None
        return self.peak.flop_per_s / self.gpu.bandwidth_bytes_per_s


def resolve_format(model: ModelSpec, quant: str | None, scope: str | None) -> tuple[QuantFormat, str]:
    if quant is not None and not quant.strip():
        raise InvalidValueError("--quant is empty.", "Name a format (see `llmsize formats`), or drop --quant for the "
                                "model's release format.")
    fmt = quant_format(quant or model.release.quant)
    if scope is None:
        return fmt, check_scope(model.release.scope if fmt.id == model.release.quant else fmt.default_scope)
    if fmt.recipe and check_scope(scope) != "all":
        raise InvalidValueError(f"--scope {scope}: the recipe {fmt.id} names each component's format, so a scope has "
                                "nothing to choose.", "Drop --scope, or name the components in the recipe.")
    if check_scope(scope) == "experts" and not model.is_moe:
        raise InvalidValueError(f"--scope experts: {model.id} has no routed experts, so {fmt.id} would quantize "
                                "nothing.", "Use --scope linear or mlp for a dense model.")
    return fmt, check_scope(scope)


def check_kv_dtype(model: ModelSpec, kv_dtype: str) -> None:
    """A cache layout the model's layers cannot have: vLLM's fp8_ds_mla is the cache of its sparse MLA kernels
    (DeepSeek-V3.2's indexed layers, flashmla_sparse); its dense MLA backends (FlashMLA, FlashInfer MLA, Triton MLA)
    take an FP8 cache as fp8 or fp8_e4m3 (vllm/v1/attention/backends/mla/flashmla.py supported_kv_cache_dtypes,
    01b1d34), and a model without MLA has no latent to store so."""
    if kv_dtype.lower() != "fp8_ds_mla":
        return
    mla = mla_mixers(model)
    if not mla:
        raise InvalidValueError(f"--kv-dtype fp8_ds_mla is vLLM's FlashMLA cache of MLA layers, and {model.name} "
                                "has none.", "Use --kv-dtype fp8.")
    if not any(m.indexer is not None for m in mla):
        raise InvalidValueError(f"--kv-dtype fp8_ds_mla is the cache of vLLM's sparse MLA kernels (DeepSeek-V3.2's "
                                f"indexed layers); {model.name}'s MLA layers are dense, and vLLM's dense MLA kernels "
                                "take an FP8 cache as fp8.", "Use --kv-dtype fp8.")


def check_recipe_parts(model: ModelSpec, fmt: QuantFormat) -> None:
    """A recipe of which the model has no part would price it all in 16 bits under a quantized name: refused."""
    if recipe_prices_nothing(model, fmt):
        have = [c for c in RECIPE_PARTS if c in _recipe_parts_of(model)]
        raise InvalidValueError(f"--quant {fmt.id}: {model.id} has no "
                                f"{' or '.join(f'`{c}`' for c, _ in fmt.recipe)} weights, so the recipe would quantize "
                                "nothing.",
                                f"Name components it has: {', '.join(have)}.")


def _recipe_parts_of(model: ModelSpec) -> set[str]:
    """The recipe parts (catalog/recipe.py) a model has matrices of: its components', and the parts named apart."""
    return {name for p in model_pieces(model) if p.matrix and p.params for name in (p.component, p.part) if name}


def recipe_parts_missing(model: ModelSpec, fmt: QuantFormat) -> list[str]:
    """The components a recipe names that the model has no weights of (`experts` of a dense model)."""
    have = _recipe_parts_of(model)
    return [c for c, _ in fmt.recipe if c not in have]


def recipe_prices_nothing(model: ModelSpec, fmt: QuantFormat) -> bool:
    """Whether `fmt` is a recipe the model has no part of."""
    return bool(fmt.recipe) and len(recipe_parts_missing(model, fmt)) == len(fmt.recipe)


def scope_for(model: ModelSpec, scope: str | None) -> str | None:
    """The scope another model (a draft, a lever's other model) takes from the plan's: an experts-only scope is its
    format's own on a model without routed experts (resolve_format refuses it there)."""
    return None if scope == "experts" and not model.is_moe else scope


def quant_for(model: ModelSpec, quant: str | None) -> str | None:
    """The format a draft takes from the plan's: a recipe of which it has no part leaves it at its release format
    (make_plan refuses such a recipe for the model asked)."""
    return None if quant and recipe_prices_nothing(model, quant_format(quant)) else quant


def exact_weight_bytes(exact, estimate: WeightBytes) -> WeightBytes:
    """WeightBytes from a checkpoint's headers (duck-typed: bytes_by_component, read_by_component(batch)), less the
    multi-token-prediction layers' bytes engines leave in the files (draft_only_bytes, where the headers tell)."""
    read = exact.read_by_component(1)
    bits = getattr(exact, "quantized_bits", None)  # a GGUF file's own average over its quantized tensors
    stored = {c: float(exact.bytes_by_component.get(c, 0)) for c in COMPONENTS}
    stored["extra"] -= getattr(exact, "draft_only_bytes", 0)  # MTP layers: in the files, not in memory
    return WeightBytes(
        format_id=estimate.format_id, scope=estimate.scope, bits_per_weight=bits or estimate.bits_per_weight,
        stored_bytes=stored,
        read_bytes_per_token={c: float(read.get(c, 0.0)) for c in COMPONENTS},
        quantized_params=estimate.quantized_params, unquantized_params=estimate.unquantized_params)


class _Scaled:
    """Exact bytes by component for one card: the estimate's per-card bytes x (exact / estimate) overall."""

    def __init__(self, exact, card: WeightBytes, scale: float):
        self.bytes_by_component = {c: b * scale for c, b in card.stored_bytes.items()}
        self._read = {c: b * scale for c, b in card.read_bytes_per_token.items()}

    def read_by_component(self, batch: int = 1) -> dict[str, float]:
        return self._read


def batch_1_ceiling(step1: DecodeStep) -> float:
    """tok/s at batch 1: bandwidth / bytes per token on one card, plus the links' time when split."""
    return 1.0 / (step1.memory_time_s + step1.comm_time_s)


TP_CHOICES = (1, 2, 4, 8, 16, 32)
PP_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16)


def with_runtime_share(inputs: PlanInputs, fmt: QuantFormat, gpu: GpuSpec, exact=None, model=None
                       ) -> tuple[PlanInputs, str, str | None]:
    """`inputs` with the share of the card its runtime budgets where --gpu-util was not given (the whole card under
    llama.cpp and MLX, unless that card is a machine's whole RAM; vLLM's 0.9 otherwise) and the runtime's cache
    dtype where none was given (the model's family's, `model`, where it differs), the runtime (the one named, else
    the format's and card's default), and the note saying so (None where nothing was resolved or the share is
    vLLM's)."""
    from llmsize.estimate.runtimes import default_runtime, gguf_exact, runtime_kv_dtype

    runtime = inputs.runtime or default_runtime(fmt.id, gpu, gguf_exact(exact))[0]
    if inputs.kv_dtype is None:
        inputs = replace(inputs, kv_dtype=runtime_kv_dtype(runtime, model, fmt.id, gpu))
    if inputs.gpu_util is not None:
        return inputs, runtime, None
    usable = usable_memory(gpu, inputs.wired_limit_bytes)
    util, why = default_gpu_util(runtime, usable.shares_all_ram)
    return replace(inputs, gpu_util=util), runtime, why


# runtimes that pull a GGUF from their own library when a model is named: Ollama (`ollama run qwen3:8b`) and LM
# Studio's catalogue, whose default download is Q4_K_M for most models, MXFP4 experts for gpt-oss
LIBRARY_RUNTIMES = {"ollama": "Ollama's library", "lmstudio": "LM Studio's catalogue"}


def library_quant(runtime: str | None, model) -> tuple[str | None, str | None]:
    """The GGUF a runtime that pulls from its own library gives `model` when no --quant is named (LIBRARY_RUNTIMES):
    (format id, the note that says so), or (None, None) elsewhere or where the model has no such GGUF rule (planned
    in its release format then, as before)."""
    name = LIBRARY_RUNTIMES.get((runtime or "").strip().lower())
    if name is None:
        return None, None
    mxfp4 = model.release.quant == "mxfp4"
    fid = "gguf-mxfp4_moe" if mxfp4 else "gguf-q4_k_m"
    try:
        resolve_format(model, fid, None)
    except LlmsizeError:
        return None, None
    return fid, (f"--runtime {runtime.strip().lower()} without --quant: {fid}, the GGUF {name} gives "
                 + ("gpt-oss (its MXFP4 experts)" if mxfp4 else "most models by default") + "; --quant sets another")


def smallest_fit(model: ModelSpec, gpu: GpuSpec, inputs: PlanInputs, exact=None,
                 pp_choices: tuple[int, ...] = PP_CHOICES) -> Fit | None:
    """Fewest cards (then the least pipeline depth) whose per-card weights, one sequence's cache at the
    context and the overhead fit; engines' divisibility rules respected. None if 256 cards are not enough.
    pp_choices=(1,): the fewest of a tensor split alone."""
    fmt, scope = resolve_format(model, inputs.quant, inputs.scope)
    inputs, runtime, _ = with_runtime_share(inputs, fmt, gpu, exact, model)
    layers_first = runtime in LLAMACPP_RUNTIMES  # llama.cpp's default split (-sm layer) is a pipeline of layers
    # fewest cards; then tensor parallel inside a node rather than across nodes; then the shallowest pipeline
    # (under llama.cpp: its layer split before a row split)
    options = sorted(((tp, pp) for tp in TP_CHOICES for pp in pp_choices if tp * pp > 1),
                     key=lambda c: (c[0] * c[1], c[0] > inputs.gpus_per_node, c[0] if layers_first else c[1]))
    total = weight_bytes(held_model(runtime, model, inputs.language_model_only), fmt, scope).bytes_total
    room = usable_memory(gpu, inputs.wired_limit_bytes).bytes * inputs.gpu_util - overhead_of(inputs)
    for tp, pp in options:
        if total / (tp * pp) > room:  # even a perfect split would not fit: skip the full plan
            continue
        try:
            p = make_plan(model, gpu, replace(inputs, tp=tp, pp=pp, spec=None), search_fit=False)
        except InvalidValueError:
            continue  # tp does not divide the heads, more stages than layers, no link
        one_seq = p.kv_card.bytes_per_sequence if p.kv_card else p.kv.bytes_per_sequence
        if p.budget.kv_budget_bytes > one_seq:
            return Fit(tp, pp, p.decode_ceiling_tok_s, p.weights_card.bytes_total)
    return None


def make_plan(model: ModelSpec, gpu: GpuSpec, inputs: PlanInputs,
              candidates: list[GpuSpec] | None = None, exact=None, notes: list[str] | None = None,
              search_fit: bool = True, warnings: list[str] | None = None) -> Plan:
    """Compose every estimate for `model` on `gpu`. `candidates` (the catalog's cards) lets the
    diagnosis name a bigger card when the model does not fit. `exact` (a checkpoint's header bytes)
    replaces the weight estimate when the plan keeps the checkpoint's own format."""
    if inputs.memory_gb is not None:  # the card as the user has it (idempotent: a command may have applied it)
        gpu = gpu.with_memory_gb(inputs.memory_gb)
    if inputs.context_tokens < 1:
        raise InvalidValueError(f"Context `{inputs.context_tokens}` must be at least 1 token.",
                                "Pass --context 1 or more.")
    check_batch(inputs.batch)
    if inputs.kv_dtype is not None:
        kv_dtype_bytes(inputs.kv_dtype)
    if inputs.spec is not None:
        check_spec(inputs.spec, model)
    fmt, scope = resolve_format(model, inputs.quant, inputs.scope)
    check_recipe_parts(model, fmt)
    prompt = inputs.context_tokens if inputs.prompt_tokens is None else inputs.prompt_tokens
    check_context(prompt)
    util_given, kv_given = inputs.gpu_util is not None, inputs.kv_dtype is not None
    own_budget = not util_given and inputs.overhead_bytes is None  # the runtime's own (llama.cpp's ledger)
    inputs, runtime, why = with_runtime_share(inputs, fmt, gpu, exact, model)
    if runtime in LLAMACPP_RUNTIMES and cache_types(inputs.kv_dtype) is None:
        raise InvalidValueError(f"--kv-dtype {inputs.kv_dtype}: llama.cpp, which runs this plan ({runtime}), has no "
                                f"such cache type (it stores {', '.join(LLAMACPP_KV_TYPES)}).",
                                "Give --kv-dtype fp16, bf16 or fp32 (`plan --cache-type-k q8_0 --cache-type-v q8_0 "
                                "--flash-attn on` prices its quantized caches), or another runtime (--runtime vllm).")
    check_kv_dtype(model, inputs.kv_dtype)

    notes = list(notes or []) + ([why] if why else [])
    from llmsize.estimate.runtimes import is_gguf

    mtp_how = check_mtp_runtime(inputs.spec, runtime, model, is_gguf(fmt, exact))
    spec_pp = spec_pipeline_note(inputs.spec, runtime, inputs.pp)
    notes += [spec_pp] if spec_pp else []
    notes += [f"--spec {inputs.spec.label}: {mtp_how}"] if mtp_how else []
    why_out = towers_left_out(runtime, model, inputs.language_model_only)
    towers = [x for x in model.extra if x.loaded] if why_out else []
    model = held_model(runtime, model, inputs.language_model_only)  # a text-only runtime: the towers stay out
    mmproj = inputs.llamacpp.mmproj if inputs.llamacpp is not None else None
    if mmproj:  # the tower as the mmproj file llama.cpp loads beside the GGUF (its ledger holds it)
        from llmsize.estimate.llamacpp_options import mmproj_on_host
        from llmsize.estimate.mmproj import projector, projector_note, tower_names

        notes.append("not in the weights above: " + projector_note(
            projector(model, mmproj, inputs.flash_attn), tower_names(model, mmproj),
            mmproj_on_host(runtime, inputs.llamacpp, model.num_layers)))
    elif towers:
        notes.append(f"not in the weights above: {' and '.join(x.name for x in towers)}, "
                     f"{sum(x.params for x in towers) / 1e9:,.2f} B parameters ({why_out})")
    # (a GGUF mix holds the text model alone, whatever the runtime: gguf_mix)
    # every tower vLLM loads (vision and audio): --language-model-only sets every modality's limit to 0 and loads
    # none of them (vLLM's multimodal docs; vllm-project/recipes Qwen/Qwen3.5.md, "Text-Only")
    from llmsize.estimate.mmproj import towers as model_towers

    loaded = [x for x in model_towers(model) if x.loaded] if runtime == "vllm" and not fmt.mix else []
    if loaded:  # a lever the weights table does not show
        them = "them" if len(loaded) > 1 else "it"
        notes.append(f"loaded: {'; '.join(x.name for x in loaded)} ({sum(x.params for x in loaded) / 1e9:,.2f} B "
                     f"parameters, in the weights above as extra); vLLM serving text alone leaves {them} out with "
                     "--language-model-only")
    weights = estimate = weight_bytes(model, fmt, scope)
    missing = recipe_parts_missing(model, fmt)
    if missing:
        notes.append(f"{model.id} has no {' or '.join(f'`{c}`' for c in missing)} weights: the recipe's "
                     f"{', '.join(c + '=' + f for c, f in fmt.recipe if c in missing)} prices nothing")
    weights_read = None
    if exact is not None and fmt.id == model.release.quant and scope == model.release.scope:
        weights = exact_weight_bytes(exact, estimate)
        weights_read = exact.bytes_read
    elif exact is not None:
        notes.append(f"--quant {fmt.id} (scope {scope}) differs from the checkpoint's {model.release.quant} "
                     f"(scope {model.release.scope}): weights are estimated, not read from the headers")
        exact = None
    if fmt.mix and exact is None:
        from llmsize.estimate.gguf_mix import file_mix, types_by_bytes

        mix = types_by_bytes(file_mix(model, fmt.mix))
        by_type = ", ".join(f"{t.upper()} {b / 1e9:,.2f} GB" for t, b in mix.items())
        notes.append(f"GGUF {fmt.mix.upper()} as llama-quantize writes it, a type per tensor: {by_type}")
    mtp_drafts = inputs.spec is not None and inputs.spec.draft is None  # --spec mtp loads the module (speculative)
    for x in model.extra:  # in the checkpoint, out of memory: a user comparing with the files' size sees why
        if not x.loaded and not mtp_drafts and x.name not in {t.name for t in towers}:
            notes.append(f"not loaded: {x.name}, {x.params / 1e9:,.2f} B parameters the checkpoint holds beside "
                         "these, which engines leave out of memory by default (none of the bytes above)")
    if is_ternary(fmt.id) and not is_ternary(model.release.quant):
        notes.append(f"{fmt.id} stores ternary weights: a model not trained ternary (BitNet b1.58's quantization-"
                     f"aware training) loses its quality in it; llama.cpp made TQ1_0/TQ2_0 for ternary-trained "
                     "models (PR #8151)")
    beyond = beyond_positions_note(model, inputs.context_tokens)
    if beyond:
        notes.append(beyond)
    tp, pp = inputs.tp, inputs.pp
    parallel = tp * pp > 1
    # what the runtime runs: the model, or (runtime_model.py) the model as a runtime that departs from it runs it
    departs = departure(runtime, model)
    run = run_model(model, departs)
    notes += [departs.note] if departs else []
    card_model = shard_model(run, tp, pp)  # what one card stores (the largest stage)
    time_model = shard_model(run, tp, 1)  # what one token reads per card, all stages in turn
    # a KV policy caps what each layer caches: the cache, the decode and the concurrency follow the capped model;
    # the weights are the same; a budget policy prefills (and holds) the whole prompt before it evicts
    policy = inputs.kv_policy
    cached = capped_model(run, policy)
    cache_card = shard_model(cached, tp, pp) if policy else card_model
    cache_time = shard_model(cached, tp, 1) if policy else time_model
    prompt_model = time_model if policy is None or policy.full_prompt else cache_time
    comm = make_comm(model, gpu, tp, pp, inputs.node_link_gb_s, inputs.gpus_per_node, inputs.nodes) \
        if parallel else None
    weights_card = weights
    if parallel:
        weights_card = weight_bytes(card_model, fmt, scope)
        if exact is not None:  # the checkpoint's exact bytes, split in the estimate's proportions
            scale = weights.bytes_total / estimate.bytes_total
            weights_card = exact_weight_bytes(_Scaled(exact, weights_card, scale), weights_card)
            ratio = weight_bytes_read(time_model, fmt, scope, 1) / weight_bytes_read(model, fmt, scope, 1)
            exact_read = exact.bytes_read
            weights_read = lambda b: exact_read(b) * ratio  # noqa: E731
    usable = usable_memory(gpu, inputs.wired_limit_bytes)
    # without flash attention the prompt's score matrix (a card's share of the heads) is held beside the cache
    scores = 0.0 if inputs.flash_attn else unfused_scores_bytes(prompt_model, prompt)
    # llama.cpp's own buffers (its compute buffer holds an unfused prefill's scores), where the plan is one card's
    # under llama.cpp and the user set no share or overhead of the generic budget
    ledger = (plan_ledger_budget(model, gpu, inputs, runtime, fmt.id, exact, scope=scope)
              if own_budget and not parallel else None)
    # a recurrent layer's state as the planned runtime keeps it: llama.cpp's in F32 (its ledger's slots count so), on
    # one card or several, and DeepSeek-V4's indexer keys in its K cache's type
    states = "llamacpp" if runtime in LLAMACPP_RUNTIMES else "neutral"
    kv = kv_bytes(cached, inputs.context_tokens, inputs.kv_dtype, states)
    kv_card = kv_bytes(cache_card, inputs.context_tokens, inputs.kv_dtype, states) if parallel else kv
    if ledger is not None:
        budget = ledger.budget
        notes = [n for n in notes if n != why]  # the share of the card: the ledger's, in the assumptions
    else:
        budget = memory_budget(gpu, weights_card.bytes_total, inputs.gpu_util, overhead_of(inputs), usable.bytes,
                               scores)
    if ledger is not None and policy is None:  # its longest context and slots, its sliding caches' padding too
        ctx, seqs = ledger.longest, ledger.sequences
        window = ledger.swa_window
        if ledger.swa_cells and window and ledger.swa_cells > min(window, inputs.context_tokens):
            notes.append(f"sequences: llama.cpp holds each slot's sliding-window layers in {ledger.swa_cells:,} "
                         f"cells (PAD(window + ubatch, 256)), where the KV cache table counts the {window:,}-token "
                         "window: fewer slots than its per-sequence figure divides into the budget")
        if seqs >= LLAMA_MAX_SEQ:
            notes.append(f"sequences: llama.cpp holds at most {LLAMA_MAX_SEQ} in a context (its n_seq_max), "
                         "however many more the memory would")
    else:  # the longest context: one sequence's cache; under a budget policy its whole prompt's, held until
        # evicted; without flash attention, a context's prompt (the whole context unless --prompt) holds its scores
        grows = not inputs.flash_attn and inputs.prompt_tokens is None and ledger is None
        ctx = max_context_tokens(card_model if policy and policy.full_prompt else cache_card, inputs.kv_dtype,
                                 budget.kv_budget_bytes + (scores if grows else 0.0),
                                 (lambda tokens: unfused_scores_bytes(prompt_model, tokens)) if grows else None)
        seqs = max_concurrent_sequences(cache_card, inputs.kv_dtype, inputs.context_tokens, budget.kv_budget_bytes)
    pool = kv_pool_tokens(kv_card.bytes_per_token, budget.kv_budget_bytes)
    # FP4 weights through Marlin multiply in 16 bits: the roofline's peak is the 16-bit one, as a W4A16 format's
    peak = compute_peak(gpu, fmt, inputs.compute_precision or ("bf16" if inputs.fp4_kernel == "marlin" else None))
    dm = DecodeModel(cache_time, gpu, fmt, scope, inputs.kv_dtype, inputs.context_tokens, peak.flop_per_s,
                     weights_read, comm, kv_read_factor(cache_time, departs, inputs.context_tokens, inputs.kv_dtype))
    step1, stepb = dm.step(1), dm.step(inputs.batch)
    ridge = dm.ridge_batch()
    useful = min(seqs, ridge) if ridge else seqs
    best = dm.step(useful) if useful >= 1 else None
    pre = prefill_time(prompt_model, gpu, fmt, scope, inputs.kv_dtype, prompt, peak.flop_per_s, weights_read, comm,
                       inputs.flash_attn)
    fit = None
    if not budget.weights_fit and not parallel and search_fit:
        fit = smallest_fit(model, gpu, inputs, exact)
    partial = dict(
        model=model, gpu=gpu, inputs=inputs, fmt=fmt, scope=scope, prompt_tokens=prompt,
        params_total=params_total(model), params_active=params_active(model),
        params_active_with_embedding=params_active_with_embedding(model), weights=weights, kv=kv,
        budget=budget, max_context=ctx, max_sequences=seqs, kv_pool_tokens=pool, peak=peak,
        decode_1=step1, decode_b=stepb, decode_ceiling_tok_s=batch_1_ceiling(step1), ridge_batch=ridge,
        decode_best=best, prefill=pre, card_model=card_model if parallel else None,
        weights_card=weights_card if parallel else None, kv_card=kv_card if parallel else None, comm=comm, fit=fit,
        decode_model=dm, kv_states=states,
    )
    link = card_link(gpu)
    partial_link = f"{link.kind} ({link.gb_s:,.0f} GB/s per direction)" if link else None
    from llmsize.estimate.runtimes import resolve_runtime

    facts = {**partial, "fit_link": partial_link, "runtime": resolve_runtime(runtime)[0], "engine": runtime,
             "util_given": util_given}
    cards = list(candidates or [])
    out = assumptions(partial)
    if exact is not None:
        diff = (weights.bytes_total - estimate.bytes_total) / estimate.bytes_total
        out.insert(0, f"Weights: exact bytes from the {exact.source} of {len(exact.files)} file(s) "
                      f"({weights.bytes_total / 1e9:,.3f} GB; the {fmt.id} estimate says "
                      f"{estimate.bytes_total / 1e9:,.3f} GB, {diff:+.2%}); bytes read per token use the exact figure.")
    warned = list(warnings or [])
    if not budget.weights_fit:  # first: the figures below are for a placement that does not load
        on_card = weights_card if parallel else weights
        warned.append(f"{NO_WEIGHTS}: {on_card.bytes_total / 1e9:,.1f} GB in {fmt.id}"
                      f"{' a card' if parallel else ''} and the runtime's overhead exceed the "
                      f"{budget.budget_bytes / 1e9:,.1f} GB budget by {-budget.kv_budget_bytes / 1e9:,.1f} GB; the "
                      "speed figures are as if they did (the Diagnosis says what does).")
    if budget.weights_fit and seqs < 1:
        held = (f"beyond the model's own limit, {ctx.tokens:,} (max_position_embeddings: engines refuse longer)"
                if ctx.limited_by == "model" else f"the longest context this card holds is {ctx.tokens:,}")
        warned.append(f"{NO_SEQUENCE} at {inputs.context_tokens:,} tokens ({held}): the speed "
                      "figures are for a cache it does not hold.")
    elif inputs.batch > 1 and budget.weights_fit and inputs.batch > seqs:
        warned.append(f"--batch {inputs.batch:,} exceeds the {seqs:,} sequences whose cache fits at "
                      f"{inputs.context_tokens:,} tokens: the batch's figures are for a cache this card does not hold "
                      "(the KV block says what does).")
    plan = Plan(**partial, diagnose_plan=lambda: diagnose(facts, cards), assumptions=out,
                weights_estimate=estimate if exact is not None else None, exact=exact, notes=notes,
                warnings=warned, gpu_util_given=util_given, kv_dtype_given=kv_given)
    if inputs.spec is None:
        return plan
    d = inputs.spec.draft  # the draft on the same card, split and options (a dense draft: the format's own scope)
    draft = (make_plan(d, gpu, replace(inputs, spec=None, scope=scope_for(d, inputs.scope),
                                       quant=quant_for(d, inputs.quant)), search_fit=False)
             if d is not None else None)
    return replace(plan, speculative=speculate(plan, inputs.spec, draft))


def assumptions(p: dict) -> list[str]:
    from llmsize.estimate.llamacpp_fit import FIT_TARGET_BYTES

    model, gpu, fmt, scope, inputs = p["model"], p["gpu"], p["fmt"], p["scope"], p["inputs"]
    out = []
    driver = (f"the driver reports {gpu.memory_reported_bytes / GiB:.2f} GiB for this card"
              if gpu.memory_reported_bytes else "the driver reports a little less")
    if gpu.memory_cuda_bytes:  # a second total, smaller: CUDA's, which the engines' ledgers start from
        driver += f" and CUDA {gpu.memory_cuda_bytes / GiB:.2f} GiB, the total the engines' ledgers start from"
    out.append(f"VRAM: the vendor's {gpu.memory_size:g} {gpu.memory_vendor_unit} read as "
               f"{gpu.memory_size:g} {gpu.memory_counts_as} = {gpu.memory_bytes:,} B, the rule for every card "
               f"(DRAM is binary); {driver}.")
    usable = usable_memory(gpu, inputs.wired_limit_bytes)
    if usable.unified:
        out.append(f"Unified memory: the GPU may use {usable.basis}; the budget starts from that.")
    share = p["budget"].engine
    if share is not None:
        out.append(f"Budget: llama.cpp's own ledger: {share.card_basis}, minus its model buffer with every layer on "
                   f"the card (the {host_tables(p['model'])}, {share.host_weights_bytes / GB:,.2f} GB, stays in host "
                   "memory), "
                   f"minus its compute buffer at this context{' and the mmproj' if share.projector_bytes else ''} "
                   f"and the {share.margin_bytes / GiB:.3g} GiB its --fit leaves free (--fit-target"
                   f"{', as Ollama sets it beside a projector' if share.margin_bytes != FIT_TARGET_BYTES else ''}); "
                   "the longest context is the largest -c whose ledger fits. --gpu-util or --overhead-gib budget "
                   "the card the generic way instead.")
    else:
        out.append(f"Budget: VRAM x {inputs.gpu_util:g} utilization (--gpu-util; llama.cpp's plans take the whole "
                   f"card, the serving engines' {DEFAULT_GPU_UTIL:g} here, where each engine's own ledger "
                   "(--engine) takes its own default), minus weights, minus "
                   f"{overhead_of(inputs) / GiB:g} GiB runtime overhead (activations, CUDA graphs, allocator; "
                   "change with --overhead-gib).")
    pulled = LIBRARY_RUNTIMES.get((inputs.runtime or "").strip().lower())
    release = ("the model's release format" if fmt.id == model.release.quant
               else f"the GGUF {pulled} pulls" if pulled and library_quant(inputs.runtime, model)[0] == fmt.id
               else "asked for")
    keep = {"linear": "embedding, lm_head, norms, routers and biases stay 16-bit",
            "experts": "only routed experts quantized; attention, embedding, lm_head, routers stay 16-bit",
            "mlp": "MLP and experts quantized; attention, SSM, embedding, lm_head, norms stay 16-bit",
            "all": "every matrix quantized, embedding and lm_head included; vectors kept at "
                   f"{fmt.keep_bits} bits"}[scope]
    if fmt.mix:
        out.append(f"Weights: {fmt.id} ({release}): the file llama-quantize writes for {fmt.mix.upper()}, a ggml "
                   "type per tensor by its rules (llama.cpp src/llama-quant.cpp); norms, routers and other vectors "
                   "F32, nothing outside the text model.")
    elif fmt.recipe:
        out.append(f"Weights: a format per component ({release}): "
                   + ", ".join(f"{c} {fid} ({float(FORMATS[fid].bits_per_weight):g} bits)" for c, fid in fmt.recipe)
                   + "; what it does not name (embedding, norms, routers, biases) stays 16-bit.")
    else:
        out.append(f"Weights: {fmt.id} ({release}), {float(fmt.bits_per_weight):g} bits per quantized weight; "
                   f"{keep}.")
    if model.tie_word_embeddings:
        out.append("Tied embedding: stored once, but read in full as the lm_head for every decoded token.")
    out.append("Bytes per decoded token: all weights touched (lm_head included, embedding table excluded: one row"
               " is gathered) + the KV cache at the current context + recurrent state.")
    kinds = {g.mixer.kind for g in model.layer_groups if g.mixer}
    if "sliding" in kinds and p["kv"].bytes_per_token_by_kind["sliding"]:  # not where the runtime keeps no window
        out.append("Sliding-window layers cache min(context, window) tokens (ring buffer).")
    if "compressed" in kinds:
        out.append("DeepSeek-V4 layers cache their window's tokens and a compressed row every compress_ratio tokens, "
                   "one row of head_dim values for K and V alike (under an FP8 cache the engines' 584-B row: 448 FP8 "
                   "values, the 64 RoPE ones in BF16, scales), and an indexer key a row where they have an indexer; "
                   "the compressors' running state is left out.")
    if any(getattr(g.mixer, "k_eq_v", False) for g in model.layer_groups):
        out.append("K = V layers cache both K and V (K is normed and rotated, V only normed).")
    if model.per_layer_input is not None:
        out.append("Per-layer embeddings: a second table, gathered a row a token like the input embedding, stored "
                   "and never read in full (llama.cpp keeps it in host memory with the token embedding).")
    if p["kv"].shared_layers:
        out.append(f"{p['kv'].shared_layers} layers read an earlier layer's cache and keep none: they add to what a "
                   "step reads, not to what a sequence holds; their k/v projections, where the checkpoint keeps "
                   "them, are stored and never read.")
    if kinds & set(STATE_KINDS):
        out.append("SSM, linear-attention and short-conv layers hold a constant state per sequence, read once per "
                   "step.")
    if any(g.mlp is not None and g.mlp.kind == "moe" for g in model.layer_groups):
        out.append("MoE: all experts resident; a step of B tokens reads 1-(1-k/E)^B of the routed experts "
                   "(uniform routing); compute follows active parameters.")
    out.append(f"KV cache dtype {inputs.kv_dtype}: {float(kv_dtype_bytes(inputs.kv_dtype)):g} B per value, "
               + ("the mean of llama.cpp's K and V types, their block scales included." if "/" in inputs.kv_dtype
                  else "scales ignored except for nvfp4.")
               + (" The checkpoint declares an FP8 KV cache (its quantization config), which SGLang's default "
                  "cache takes, and vLLM's for a ModelOpt checkpoint; --kv-dtype bf16 plans a 16-bit one."
                  if model.release.kv_cache == "fp8" and inputs.kv_dtype == "fp8" else ""))
    if inputs.kv_policy is not None:
        pol = inputs.kv_policy
        out.append(f"KV policy {pol.label} (a what-if): {pol.describe()}. The cache, the decode and the "
                   f"concurrency count at most {pol.cap_tokens:,} tokens a layer; " + (
                       "the longest prompt is what one sequence's whole cache allows, as it is held until evicted"
                       if pol.full_prompt else "the prompt's attention stops growing past the window")
                   + f". Caveat: {pol.caveat()}.")
    peak = p["peak"]
    if peak.precision:
        out.append(f"Compute: dense {peak.precision} peak {peak.flop_per_s / 1e12:g} TFLOPS (no sparsity), "
                   "reached in full: real kernels get less.")
    if peak.note:
        out.append(f"Compute: {peak.note}.")
    out.append("Decode ceiling: theoretical; loops reach a fraction of it (seed 000: 45 tok/s measured on a "
               "448 GB/s card, ~76% of its ceiling). Bandwidth is the vendor's peak in GB/s (10^9 B/s).")
    out.append(f"Prefill: one prompt of {p['prompt_tokens']:,} tokens in one pass, causal attention, "
               "logits for the last token only.")
    if p["max_context"].limited_by == "model":
        out.append(f"Longest context capped at the model's max_position_embeddings "
                   f"({model.max_position_embeddings:,}).")
    return out
