"""Expected speed of a plan under a runtime: speed.py's step-time model over the plan's step and prompt inputs
(step_inputs.py) with the runtime's constants for the card (runtimes.py), the notes that say where published runs
stray from it, speculative decoding, and a user's own run as a calibration."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import replace as _replace

from llmsize.catalog.schema import ModelSpec, RuntimeSpec
from llmsize.errors import InvalidValueError, LlmsizeError
from llmsize.estimate.kernels import MATMUL_PRECISION, asked_marlin, fp32_stands_in, kernel_class
from llmsize.estimate.kv import mla_mixers
from llmsize.estimate.llamacpp_options import ollama_flash_attn
from llmsize.estimate.plan import Plan
from llmsize.estimate.quant import LLAMACPP_CONVERTED, NEAREST_GGUF
from llmsize.estimate.runtimes import (
    BACKEND_NAMES,
    CDNA3_TARGETS,
    CDNA4_TARGETS,
    INTEL_VULKAN_REASON,
    RUNTIME_NAMES,
    VULKAN_RUNTIMES,
    backend,
    backend_refusal,
    constants,
    default_runtime,
    gguf_exact,
    intel_vulkan,
    not_on,
    resolve_runtime,
)
from llmsize.estimate.speed import (
    RUNTIMES,
    TERNARY_RUNS,
    Calibration,
    Constants,
    Expected,
    PrefillInputs,
    at_file_bytes,
    expected_speed,
    flop_time_at_peak_s,
    format_class,
    is_ternary,
    pipeline_factor,
    prefill_fraction,
    prefill_missing,
    prefill_parts_s,
    score_time_s,
    vector_terms_apply,
)
from llmsize.estimate.step_inputs import (
    LLAMACPP_UBATCH_TOKENS,
    NOT_FIT_NOTE,
    has_mla,
    has_recurrent_layers,
    layer_count,
    no_buffer_releases,
    prefill_inputs,
    release_words,
    step_inputs,
)

OLD_SGLANG_HYBRID_NOTE = (
    "SGLang {first} to {last} ran this hybrid's recurrent layers with the radix cache's no_buffer strategy, which "
    "turns its overlap scheduler off: each decode step waited about {wait_ms:.1f} ms more for the CPU (fitted with "
    "vLLM V0's rows); from 0.5.14 the default extra_buffer strategy keeps it on, as this figure assumes")
# A llama.cpp group fitted without any hybrid's decode rows (its hybrid_rows_decode 0): a recurrent layer costs its
# bytes and a block's fixed cost, with nothing to say whether more; a group whose hybrids' rows fitted the cost at 0
# (CUDA's since 2026-12-06, when a shared expert's cost took what it had carried) says nothing
LLAMACPP_RECURRENT_DECODE_NOTE = (
    "a recurrent (SSM, linear-attention) layer is costed here as any block and its state's bytes: no published llama.cpp "
    "decode rows of hybrids on {backend} cards pin a cost of its own (elsewhere, a layer: {fitted})")

# runtimes that load no GGUF file (vLLM and SGLang read some, experimentally: their figures stand, with GGUF_NOTE)
NO_GGUF = ("trtllm", "gpt-fast", "mlx")
GGUF_NOTE = ("a GGUF file under a serving engine: vLLM and SGLang load some GGUF types experimentally (vLLM's "
             "docs: \"highly experimental and under-optimized\"); the figure is of their own kernels at these bytes, "
             "no published run of theirs on a GGUF file is in the fit, and fleet sizes none")


# SGLang runs an MLA model whose head dims are not DeepSeek's (qk_nope_head_dim 128) on datacenter Blackwell with its
# Triton attention backend (sglang PR #17247; the SGLang Cookbook's GLM-4.7-Flash line on a B200); its rows of a
# release before 0.5.12, left out of the fit (estimate/observed.py, SGLANG_TRITON_MLA_SPLITS), priced with the shipped
# constants (tests/test_speed.py holds the range to them)
SGLANG_TRITON_MLA_NOTE = (
    "SGLang decodes this MLA model on datacenter Blackwell with its Triton attention backend (its head dims are not "
    "DeepSeek's; sglang PR #17247): the SGLang Cookbook's GLM-4.7-Flash runs on a B200 (a release before 0.5.12, whose "
    "Triton MLA decode took at most 8 KV splits), outside the fit, decoded at 0.32-0.46 of such a figure")
DEEPSEEK_QK_NOPE_DIM = 128

# llama.cpp's Vulkan build decodes a step's routed experts with its mat-vec kernels only for F32, F16 and quantized
# weights: ggml_vk_use_mul_mat_vec_id (ggml/src/ggml-vulkan/ggml-vulkan.cpp, read at 000651caa; the same type test
# before and after PR #18918 of January 2026) admits `GGML_TYPE_F32 || GGML_TYPE_F16 || ggml_is_quantized(type)`, and
# BF16 is not a quantized type (ggml.c's type traits), so BF16 experts go through the tiled matmul
# (ggml_vk_mul_mat_id_q_f16) even at batch 1, while a dense BF16 matmul takes the mat-vec path (its test lists
# GGML_TYPE_BF16). kyuz0's Strix Halo logs show it: BF16 MoE GGUFs decode at 0.4-0.5 of the ROCm toolbox's rate
# there (Qwen3.6-35B-A3B 10.68 against 26.01 t/s), their Q8_0 files and dense BF16 ones as fast as under ROCm; Gemma 4
# 26B-A4B's BF16 file is the exception (18.6 against 24.64 t/s, and near the plan's figure), for no cause found.
VULKAN_BF16_EXPERTS_NOTE = (
    "llama.cpp's Vulkan build decodes BF16 routed experts with its tiled matmul, not its mat-vec kernels "
    "(ggml_vk_use_mul_mat_vec_id admits F32, F16 and quantized weights): published Vulkan runs of BF16 MoE GGUFs on "
    "a Strix Halo, outside the fit, decoded at 0.28-0.45 of such a figure (Qwen3.6-35B-A3B, GLM-4.7-Flash), Gemma 4 "
    "26B-A4B's at 0.76-0.81 (its experts' share of the bytes no smaller: a difference not explained); a quantized "
    "GGUF (Q8_0) takes the mat-vec path")


def vulkan_bf16_experts(model: ModelSpec, fmt_id: str, be: str | None) -> bool:
    """Whether llama.cpp on Vulkan decodes the model's routed experts in BF16 (VULKAN_BF16_EXPERTS_NOTE)."""
    return be == "vulkan" and fmt_id == "bf16" and any(
        g.mlp is not None and g.mlp.kind == "moe" for g in model.layer_groups)


def triton_mla_on_blackwell(plan: Plan) -> bool:
    """Whether the plan's model is MLA with head dims other than DeepSeek's, on a datacenter Blackwell card (compute
    capability 10.x), where SGLang runs it with its Triton attention backend (SGLANG_TRITON_MLA_NOTE)."""
    if not (plan.gpu.compute_capability or "").startswith("10."):
        return False
    return any(m.qk_nope_head_dim != DEEPSEEK_QK_NOPE_DIM for m in mla_mixers(plan.model))


# SGLang up to 0.5.9 on CDNA3 cards copied DeepSeek's absorbed MLA projections' FP8 weights to BF16 at every decode
# step (estimate/observed.py, SGLANG_CDNA3_MLA); those releases' published rows, left out of the fit, priced with the
# shipped constants (tests/test_speed.py holds the range to them)
OLD_SGLANG_CDNA3_MLA_NOTE = (
    "SGLang 0.5.10 or later assumed: up to 0.5.9 a CDNA3 card copied this MLA model's FP8 projection weights to BF16 at "
    "every decode step (sglang PR #18624), and published DeepSeek runs of those releases on 8 x MI300X and MI325X, "
    "outside the fit, decoded at 0.43-0.67 of this figure")
CDNA4_NOTE = ("an MI350-series card (CDNA4): the AMD costs here are fitted on CDNA3 cards (MI300X, MI325X); published "
              "SGLang runs of DeepSeek-R1 on 8 x MI355X, outside the fit, decoded 1.0-1.4x faster than predicted")
# A hybrid's published prompts, skipped by the fit and priced as if not: their time to first token as multiples of
# the plan's figure, (shortest, longest), by who ran them; tests/test_speed.py holds each to its rows. The serving
# engines': Qwen3.6 under vLLM on an RTX PRO 6000 Max-Q and 2 x RTX 5090, Qwen3-Next under SGLang on 8 x B200;
# llama.cpp's: Qwen3.6 and Nemotron-3 Nano on a Strix Halo and an R9700, Qwen3.5 and Qwen3.6 on an RTX 4090 (its
# Vulkan build's: Qwen3-Next too).
RECURRENT_PREFILL_RANGE = {"serving": (0.6, 2.7), "llamacpp": (0.8, 1.9), "llamacpp-vulkan": (1.0, 5.1)}
_RECURRENT_PREFILL = ("time to first token of a model with recurrent (SSM, linear-attention) layers: their chunked "
                      "prompt kernels are costed as their FLOPs only; ")
RECURRENT_PREFILL_NOTE = (_RECURRENT_PREFILL + "published serving runs of such hybrids (sch0tten/nvfp4-benchmark, "
                          "club-3090#858, the SGLang Cookbook's Qwen3-Next), outside the fit, took {0:.1f}-{1:.1f}x "
                          "this figure, and its band spans that".format(*RECURRENT_PREFILL_RANGE["serving"]))
LLAMACPP_RECURRENT_PREFILL_NOTE = (
    _RECURRENT_PREFILL + "llama.cpp's published prompts of such hybrids (Qwen3.6, Nemotron-3 Nano on AMD cards; "
    "Qwen3.5 and Qwen3.6 on an RTX 4090), outside the fit, took {0:.1f}-{1:.1f}x this figure, and its band spans "
    "that".format(*RECURRENT_PREFILL_RANGE["llamacpp"]))
LLAMACPP_VULKAN_RECURRENT_PREFILL_NOTE = (
    _RECURRENT_PREFILL + "llama.cpp's published Vulkan prompts of such hybrids (Qwen3.6, Qwen3-Next, Nemotron-3 Nano "
    "on AMD cards), outside the fit, took {0:.1f}-{1:.1f}x this figure, and its band spans that".format(
        *RECURRENT_PREFILL_RANGE["llamacpp-vulkan"]))


# Published decode runs of i-quant files (IQ1-IQ3), skipped by the fit (fit_speed.SEPARATE_CLASSES: too few for a
# fraction of their own) and priced as if not, as multiples of the plan's figure (lowest, highest), by llama.cpp build;
# tests/test_speed.py holds each to its rows. Its CUDA and ROCm builds: Llama 3.1 405B IQ2_XXS on an H200
# (llm-tracker.info), IQ1_S, IQ2_XXS, IQ2_XS and IQ2_S files of Llama 2 7B and Qwen3 14B on a gfx1201 card (PR
# #22821); its Vulkan build: IQ1_S and IQ2_M files of Llama 3 8B on an RTX 3090 (PR #16056).
IQUANT_DECODE_RANGE = {"llamacpp": (0.63, 1.02), "llamacpp-vulkan": (0.38, 0.59)}
_IQUANT_WHERE = {"llamacpp": "on CUDA and ROCm (an H200, a gfx1201 card)",
                 "llamacpp-vulkan": "under Vulkan (an RTX 3090)"}
IQUANT_DECODE_NOTES = {
    key: "i-quant weights (IQ1-IQ3: each group of 8 an index into a codebook, looked up before the dot product): too "
         "few published runs for a fraction of their own, so streamed at the group's default ({eta:.2f} of the "
         f"bandwidth); llama.cpp's published i-quant decodes {_IQUANT_WHERE[key]}, outside the fit, ran at "
         f"{lo:.2f}-{hi:.2f}x such a figure, and its band spans that"
    for key, (lo, hi) in IQUANT_DECODE_RANGE.items()}


LLAMACPP_NVFP4_NOTE = (
    "nvfp4 under llama.cpp: a GGUF converted from an NVFP4 checkpoint (convert_hf_to_gguf.py repacks it into ggml's "
    "NVFP4 blocks, PR #19769; llama-quantize does not make them), its matrices in NVFP4 as the checkpoint's, the rest "
    "16-bit; CUDA kernels from PRs #20644 (dp4a) and #21074 (MMQ), costed as llama.cpp's FP4 class")


def iquant_key(be: str | None) -> str:
    """Which published i-quant decodes speak for a plan on backend `be`: IQUANT_DECODE_RANGE's key (a serving
    engine's GGUF kernels take llama.cpp's CUDA and ROCm builds')."""
    return "llamacpp-vulkan" if be == "vulkan" else "llamacpp"


def iquant_decode_floor(plan: Plan, rid: str, c, be: str | None) -> float | None:
    """The short end, as a multiple of the figure, that published i-quant decodes put a decode band at on backend
    `be` (IQUANT_DECODE_RANGE's), where the plan's weights stream through i-quant kernels (kernels.kernel_class: a
    file mostly of i-quant blocks) and the runtime's constants `c` have no fraction of theirs; None elsewhere."""
    if kernel_class(plan, rid) != "iquant" or "iquant" in c.fitted_classes:
        return None
    return IQUANT_DECODE_RANGE[iquant_key(be)][0]


def with_iquant_decode_band(e: Expected, lo: float) -> Expected:
    """`e` with its decode bands reaching down to `lo` x its figures (iquant_decode_floor; the range's long end lies
    within every llama.cpp band, tests/test_speed.py)."""
    out = _replace(e, tok_s_low=min(e.tok_s_low, e.tok_s * lo), decode_floor=lo)
    if e.aggregate_tok_s is None:
        return out
    return _replace(out, aggregate_tok_s_low=min(e.aggregate_tok_s_low, e.aggregate_tok_s * lo))


RECURRENT_PREFILL_NOTES = {"serving": RECURRENT_PREFILL_NOTE, "llamacpp": LLAMACPP_RECURRENT_PREFILL_NOTE,
                           "llamacpp-vulkan": LLAMACPP_VULKAN_RECURRENT_PREFILL_NOTE}


def recurrent_prefill_key(rid: str, be: str | None) -> str:
    """Which published hybrid prompts speak for this runtime's: RECURRENT_PREFILL_RANGE's key."""
    if rid != "llamacpp":
        return "serving"
    return "llamacpp-vulkan" if be == "vulkan" else "llamacpp"


def with_recurrent_prefill_band(e: Expected, rid: str, be: str | None, pre: PrefillInputs) -> Expected:
    """`e` with a hybrid's time-to-first-token band at least as wide as its kind's published hybrid prompts ran
    (RECURRENT_PREFILL_RANGE): the fit's prompt band is held out on models without recurrent layers. Its short end
    stays at or above the prompt's FLOPs at the rated peak, as every band's does."""
    from dataclasses import replace

    if not e.ttft_s:
        return e
    lo, hi = RECURRENT_PREFILL_RANGE[recurrent_prefill_key(rid, be)]
    floor = flop_time_at_peak_s(pre) * pipeline_factor(pre)
    return replace(e, ttft_s_low=max(floor, min(e.ttft_s_low, e.ttft_s * lo)),
                   ttft_s_high=max(e.ttft_s_high, e.ttft_s * hi))


def from_gguf(plan: Plan) -> bool:
    """Whether the plan's weights are a GGUF file's."""
    return gguf_exact(plan.exact)


@dataclass(frozen=True)
class ExpectedResult:
    """An expected figure, or the one-line reason there is none."""

    runtime: str
    runtime_why: str
    expected: Expected | None
    reason: str | None = None
    backend: str | None = None  # the backend the figure is (or would be) for: the one asked for, else the card's own


def expect(plan: Plan, runtimes: Mapping[str, RuntimeSpec], runtime: str | None = None,
           calibration: Calibration | None = None, flash_attn: str | None = None,
           engine: str | None = None, ubatch_tokens: int = LLAMACPP_UBATCH_TOKENS,
           gpu_backend: str | None = None) -> ExpectedResult:
    """The plan's expected speed under `runtime` (None: the default for its format and card) on `gpu_backend`
    (None: the plan's --backend, else the card's own; "vulkan": llama.cpp's Vulkan backend). `flash_attn` (on | off |
    auto | None: the engine's default, off for Ollama, named by `runtime` or `engine`) matters to llama.cpp's prefill
    only."""
    gpu_backend = gpu_backend or plan.inputs.backend
    notes: tuple[str, ...] = ()
    if runtime is None:
        rid, why = default_runtime(plan.fmt.id, plan.gpu, from_gguf(plan))
    else:
        rid, alias_note = resolve_runtime(runtime)
        why = ("asked for" if engine is None or resolve_runtime(engine)[0] != rid
               else f"the engine whose ledger is planned, --engine {engine}")
        why += f"; {alias_note}" if alias_note else ""
    be = backend(plan.gpu, gpu_backend)
    if (runtime or "").strip().lower() in ("lmstudio", "lm-studio") and be == "rocm" and gpu_backend is None \
            and backend_refusal(rid, plan.gpu, "vulkan") is None:
        notes += ("LM Studio ships llama.cpp built for ROCm and for Vulkan, the one it runs chosen in its runtime "
                  "settings: this figure is the ROCm build's, --backend vulkan prices the Vulkan one",)
    spec = runtimes.get(rid)
    elsewhere = not_on(rid, plan.gpu, be)
    mlx_weights = plan.fmt.id.startswith("mlx-")
    if elsewhere and rid == "mlx" and mlx_weights:  # no other runtime loads them: the other runtimes do not help
        elsewhere = (f"MLX runs on Apple silicon only, and only MLX loads {plan.fmt.id} weights; pick an Apple card, "
                     "or a --quant the other runtimes load (bf16, fp8, a GGUF type)")
    if elsewhere:
        return ExpectedResult(rid, why, None, elsewhere, be if be != "vulkan" or rid in VULKAN_RUNTIMES else None)
    if plan.fmt.id.startswith(("gguf-", "ggml-")) and rid in NO_GGUF:
        return ExpectedResult(rid, why, None, f"{RUNTIME_NAMES[rid]} does not load GGUF files ({plan.fmt.id}); "
                                              "pick --runtime llamacpp (or a safetensors format: --quant)", be)
    # a format the runtime's files cannot hold (llama.cpp and MLX: fp8, nvfp4 ...; the others: MLX's own formats)
    if (rid in ("llamacpp", "mlx") or mlx_weights) and not is_ternary(plan.fmt.id):
        from llmsize.estimate.quant import runtime_load_refusal

        refused = runtime_load_refusal(rid, plan.fmt.id)
        if refused:
            near = NEAREST_GGUF.get(plan.fmt.id) if rid == "llamacpp" else None
            hint = (f"pick --quant {near} (the GGUF file type nearest it), or another --runtime" if near else
                    f"pick a {'GGUF' if rid == 'llamacpp' else 'MLX'} --quant, or another --runtime"
                    if rid in ("llamacpp", "mlx") else
                    f"pick --runtime mlx (on an Apple card), or a --quant {RUNTIME_NAMES[rid]} loads")
            return ExpectedResult(rid, why, None, f"{refused}; {hint}", be)
    if is_ternary(plan.fmt.id) and not (rid == "llamacpp" and plan.fmt.mix):
        return ExpectedResult(rid, why, None, f"{RUNTIME_NAMES[rid]} does not run {plan.fmt.id} weights; "
                                              f"{TERNARY_RUNS}", be)
    if rid == "llamacpp" and intel_vulkan(plan.gpu, be) and calibration is None:
        return ExpectedResult(rid, why, None, INTEL_VULKAN_REASON, be)
    if rid == "llamacpp" and plan.fmt.id in LLAMACPP_CONVERTED:
        if be != "cuda" and calibration is None:
            return ExpectedResult(rid, why, None, f"llama.cpp's {plan.fmt.id} kernels in the dataset's runs are "
                                                  f"CUDA's (PRs #20644, #21074): none on {BACKEND_NAMES[be]}; pick a "
                                                  "GGUF --quant, or --calibrate FILE from your own run", be)
        notes += (LLAMACPP_NVFP4_NOTE,)
    c = constants(spec, be, plan.gpu, unfitted_card=calibration is not None) if spec is not None else None
    if c is None:
        on = "its Vulkan backend" if be == "vulkan" else f"{BACKEND_NAMES[be]} cards"
        return ExpectedResult(rid, why, None, f"no published measurements of {RUNTIME_NAMES[rid]} on {on} in the "
                                              "dataset; pass --calibrate FILE from your own run", be)
    cls = kernel_class(plan, rid)
    if cls != format_class(plan.fmt.id) and asked_marlin(plan):
        notes += (f"--fp4-kernel marlin: {plan.fmt.id} weights through the Marlin kernel (weight-only, 16-bit math; "
                  f"vLLM's --linear-backend marlin), costed as the 4-bit weight-only class",)
    elif cls != format_class(plan.fmt.id):
        kernel = "the Marlin kernel (weight-only, " if be == "cuda" else "a weight-only kernel ("
        notes += (f"{RUNTIME_NAMES[rid]} runs {plan.fmt.id} weights on this card through {kernel}16-bit math: "
                  "no FP4 tensor cores), costed as the 4-bit weight-only class",)
    elif plan.fmt.kernel_id == "nvfp4-w4a16" and be == "cuda" and rid in ("vllm", "sglang"):
        notes += (f"{RUNTIME_NAMES[rid]} runs weight-only NVFP4 (W4A16) through the Marlin kernel, 16-bit math on "
                  "any card (vLLM PR #42566, SGLang PR #33543): costed as the 4-bit weight-only class",)
    floor = iquant_decode_floor(plan, rid, c, be) if calibration is None else None
    if floor is not None:
        notes += (IQUANT_DECODE_NOTES[iquant_key(be)].format(eta=c.eta_weights_default),)
    elif cls not in c.fitted_classes:
        notes += (f"no {RUNTIME_NAMES[rid]} measurement of {plan.fmt.id}-class weights on this backend: its "
                  f"weight-streaming fraction is the group's default, that of 16-bit weights where measured "
                  f"({c.eta_weights_default:.2f})",)
    ollama = "ollama" in ((runtime or "").lower(), engine)
    unfused = rid == "llamacpp" and (flash_attn == "off" or (flash_attn is None and ollama
                                                             and not ollama_flash_attn(plan.gpu, gpu_backend)))
    pre = prefill_inputs(plan, rid, flash_attn=not unfused, ubatch_tokens=ubatch_tokens, be=gpu_backend)
    pre, note = calibrated_prompt(pre, plan, c, calibration)
    notes += (note,) if note else ()
    if plan.inputs.compute_precision and plan.peak.flop_per_s != pre.peak_flop_per_s:
        notes += (f"--compute {plan.inputs.compute_precision} prices the roofline and the plan's ceilings: "
                  f"{RUNTIME_NAMES[rid]} multiplies {plan.fmt.id} weights at its {pre.peak_name} rate, this figure's",)
    if pre.consumer and c.prefill_consumer_factor != 1.0 and not prefill_missing(pre, c):
        notes += (f"a GeForce card: its prompt's matmuls at {c.prefill_consumer_factor:g}x {RUNTIME_NAMES[rid]}'s "
                  f"fraction of the peak on datacenter and workstation cards, {prefill_fraction(pre, c):.2f} of "
                  f"its rated {pre.peak_name} peak (GeForce cards run above the boost clock it is rated at)",)
    if pre.score_bytes:
        cause = (f"flash attention off ({'asked for' if flash_attn == 'off' else 'Ollama, on this card'})" if unfused
                 else f"{RUNTIME_NAMES[rid]}'s unfused attention for this model")
        notes += (f"{cause}: the prompt's attention scores, {pre.score_bytes / 1e9:,.1f} GB, are written and read in "
                  f"memory, {score_time_s(pre, c):,.2f} s of its time to first token",)
    if flash_attn == "off" and rid != "llamacpp":
        notes += (f"{RUNTIME_NAMES[rid]} runs fused attention kernels only: --no-flash-attn changes the plan's "
                  "memory and roofline above, not this figure",)
    if rid == "llamacpp" and plan.comm is not None and plan.comm.tp > 1:
        notes += ("llama.cpp splits tensors with -sm row, which copies each matmul's activations between the cards: "
                  "its prompts are slower than this time to first token says (ggml-org/llama.cpp PR #19378, Llama "
                  "70B Q4_K_M on 4 x RTX 4090: 334 t/s at pp512 and 335 at pp2048 with -sm row, 1,435 and 1,716 "
                  "with the layer split); --pp is llama.cpp's faster split for prompts",)
    if fp32_stands_in(plan.gpu, pre.peak_flop_per_s):
        notes += (f"time to first token costed at {plan.gpu.id}'s FP32 rate: its matrix units' rate for this "
                  "precision is not in the catalog (none found in a citable source), so " + (
                      "it rests on published prompts on this card rather than on its peak" if rid in MATMUL_PRECISION
                      else f"it is an upper bound: {RUNTIME_NAMES[rid]}'s tensor-core prompts run faster than FP32"),)
    if has_recurrent_layers(plan.model):
        notes += (RECURRENT_PREFILL_NOTES[recurrent_prefill_key(rid, be)],)
    if rid in ("vllm", "sglang") and plan.gpu.llvm_target in CDNA4_TARGETS:
        notes += (CDNA4_NOTE,)
    if rid == "sglang" and triton_mla_on_blackwell(plan):
        notes += (SGLANG_TRITON_MLA_NOTE,)
    if rid == "llamacpp" and vulkan_bf16_experts(plan.model, plan.fmt.id, be):
        notes += (VULKAN_BF16_EXPERTS_NOTE,)
    if rid in ("vllm", "sglang") and plan.fmt.id.startswith(("gguf-", "ggml-")):
        notes += (GGUF_NOTE,)
    if rid == "sglang" and plan.gpu.llvm_target in CDNA3_TARGETS and has_mla(plan.model) \
            and plan.fmt.id.startswith("fp8"):
        notes += (OLD_SGLANG_CDNA3_MLA_NOTE,)
    if c.moe_basis and layer_count(plan)[1]:
        notes += (c.moe_basis,)
    if rid == "sglang" and has_recurrent_layers(plan.model) and c.t_step_v0_s:
        first, last = map(release_words, no_buffer_releases(plan.model))
        notes += (OLD_SGLANG_HYBRID_NOTE.format(first=first, last=last, wait_ms=c.t_step_v0_s * 1e3),)
    if rid == "llamacpp" and has_recurrent_layers(plan.model) and not c.t_recurrent_layer_s \
            and not getattr(spec.backends.get(be), "hybrid_rows_decode", 0):
        fitted = [f"{BACKEND_NAMES.get(b, b)} {g.t_recurrent_layer_s * 1e6:.0f} us"
                  for b, g in sorted(spec.backends.items()) if g.t_recurrent_layer_s]
        if fitted:
            notes += (LLAMACPP_RECURRENT_DECODE_NOTE.format(backend=BACKEND_NAMES.get(be, be),
                                                            fitted=", ".join(fitted)),)
    if not plan.budget.weights_fit:
        notes += (NOT_FIT_NOTE,)
    x1 = step_inputs(plan, plan.decode_1, rid, be=gpu_backend)
    if x1.vector_flop_per_s is None and vector_terms_apply(x1, c) and calibration is None:
        notes += (f"{plan.gpu.id}'s FP32 rate is not in the catalog (none found in a citable source): the decode "
                  f"figure leaves out the time {RUNTIME_NAMES[rid]} spends on the vector units unpacking "
                  f"{plan.fmt.id} weights and attending over the cache, so it may run high (a binned chip can rank "
                  "above its full one, whose rate is known); --calibrate FILE from your own run corrects it",)
    e = expected_speed(x1, step_inputs(plan, plan.decode_b, rid, be=gpu_backend),
                       pre, c, plan.decode_ceiling_tok_s, calibration, notes, plan.decode_b.tok_s)
    if has_recurrent_layers(plan.model):
        e = with_recurrent_prefill_band(e, rid, be, pre)
    if floor is not None:
        e = with_iquant_decode_band(e, floor)
    if plan.speculative is not None:
        e = with_speculation(e, plan, rid, c, calibration.factor if calibration else 1.0)
    below = faster_prompt_note(plan, rid, pre, e.ttft_s)
    if below:
        e = _replace(e, notes=e.notes + (below,))
    return ExpectedResult(rid, why, e, None, be)


def faster_prompt_note(plan: Plan, rid: str, pre, ttft_s: float | None) -> str | None:
    """Why the expected time to first token is shorter than the plan's Prefill figure (one card, the format's
    dense peak), where it is: the runtime's matmuls at a faster precision's rate (llama.cpp's INT8 MMQ on CUDA), or
    its layers over several cards pipelining the prompt (pipeline_factor); its own floor is those FLOPs at that
    rate, through that pipeline (expected_speed never goes below it). None where it is not shorter."""
    limit = plan.prefill.ttft_s
    if ttft_s is None or limit is None or ttft_s >= limit or not pre.peak_flop_per_s:
        return None
    pf = pipeline_factor(pre)
    unit = "TOPS" if "INT" in pre.peak_name.upper() else "TFLOPS"
    why = [f"its matmuls at the card's dense {pre.peak_name} rate ({pre.peak_flop_per_s / 1e12:,.1f} {unit})"]
    if pf < 1.0:
        why.append(f"its layers over {pre.stages} cards pipelining the prompt's ubatches ({pf:.2f} of the time "
                   "through them one after the other)")
    peak = plan.peak.precision or plan.peak.requested or "matmul"
    return (f"time to first token shorter than the Prefill section's {limit * 1e3:,.0f} ms (one card at its "
            f"{peak} peak): {RUNTIME_NAMES[rid]} runs " + " and ".join(why) + "; its floor here, the prompt's FLOPs "
            f"at that rate{' through that pipeline' if pf < 1.0 else ''}, is "
            f"{flop_time_at_peak_s(pre) * pf * 1e3:,.0f} ms")


def with_speculation(e: Expected, plan: Plan, rid: str, c: Constants, factor: float = 1.0) -> Expected:
    """`e` with the batch-1 speed under the plan's speculative decoding: fleet's per-user TPOT at one user
    (estimate/replica.py: the verify pass and the draft's steps through the step-time model), scaled like e's
    batch-1 figure (a calibration's factor) and banded alike, never above the speculative ceiling."""
    from dataclasses import replace

    from llmsize.estimate.replica import replica_timing

    sd = plan.speculative
    tpot, _, _ = replica_timing(plan, rid, c, plan.prompt_tokens, sd.spec, sd.draft_plan)
    tok = factor / tpot(1)
    lo, hi = e.tok_s_low / e.tok_s, e.tok_s_high / e.tok_s  # the batch-1 band, as ratios
    return replace(e, spec_tok_s=min(tok, sd.ceiling_tok_s), spec_tok_s_low=min(tok * lo, sd.ceiling_tok_s),
                   spec_tok_s_high=min(tok * hi, sd.ceiling_tok_s))


def _run_format(run, fallback: str) -> str:
    from llmsize.catalog.measurement import format_id

    if run.quant:
        return run.quant
    if run.model:  # llama-bench model_type "qwen2 7B Q4_K - Medium": the format follows arch and size
        parts = run.model.split(" ", 2)
        fid = format_id(run.runtime or "", parts[2]) if len(parts) == 3 else None
        if fid:
            return fid
    return fallback


# a calibrating run may beat its plan's ceiling by this much (the catalog's bandwidth is the vendor's peak, a file's
# bytes an estimate), and must reach this fraction of it (slower, its weights were not in this card's memory)
CALIBRATION_SLACK, CALIBRATION_FLOOR = 0.05, 0.01
# a run's prompt at more than this factor either side of the fitted prediction measured something else (a unit slip)
CALIBRATION_PROMPT_SPAN = 1000.0


def calibrated_prompt(pre: PrefillInputs, plan: Plan, c: Constants, calibration: Calibration | None):
    """The prompt at the rate a calibrating run's prompt reached on this card, where the catalog has no rate for it
    (a DGX Spark under llama.cpp: no citable INT8 figure), and the note that says so; else as it was."""
    if pre.peak_flop_per_s or calibration is None or not calibration.prefill_rate_flop_s \
            or calibration.card_id != plan.gpu.id or not c.eta_p(pre.format_class):
        return pre, None
    rate = calibration.prefill_rate_flop_s
    note = (f"time to first token at the rate your run's prompt reached on this card, {rate / 1e12:,.1f} TFLOPS of "
            f"matmuls: the catalog has no dense {pre.peak_name} rate for it")
    return _replace(pre, peak_flop_per_s=rate / prefill_fraction(pre, c)), note


def prompt_rate_flop_s(pre: PrefillInputs, c: Constants, measured_s: float) -> float | None:
    """The rate (peak x fraction, FLOP/s) a measured prompt's matmuls ran at, its weights' read and the fixed
    terms taken out (speed.prefill_parts_s at an unbounded peak); None where they leave no time for the FLOPs."""
    _, weights, fixed = prefill_parts_s(_replace(pre, peak_flop_per_s=math.inf), c)
    left = measured_s - fixed - score_time_s(pre, c)
    if left <= weights:  # memory-bound (or faster than its fixed terms): the FLOPs' rate is not seen
        return None
    return (pre.flops + (c.moe_matmul_cost - 1) * pre.expert_flops) / left


def _named(find, path: str):
    """A catalog entry a calibration file names by id; an unknown one is the file's error, named so."""
    try:
        return find()
    except LlmsizeError as e:
        raise InvalidValueError(f"--calibrate `{path}`: {e.message}", e.hint) from None


def _catalog_model(cat, name: str):
    """The catalog model a run's file names (its id, an alias or its Hugging Face repo), or None."""
    try:
        return cat.model(name)
    except LlmsizeError:
        return None


def calibration_from_run(run, plan: Plan, rid: str, spec: RuntimeSpec | None, cat, path: str,
                         plan_backend: str | None = None) -> Calibration:
    """The user's run through the model: factor = its measured tok/s / what the constants predict for that run
    (its model, card, format, batch and context); the report says how far the plan is from it. A run on Vulkan
    calibrates only a Vulkan figure (`plan_backend`, the plan's resolved backend), and a run on another backend only
    a figure that is not Vulkan's: the two groups' constants differ."""
    from llmsize.catalog.match import match_gpu
    from llmsize.estimate.plan import PlanInputs, make_plan

    said = []
    model = plan.model
    if run.model_id:
        model = _named(lambda: cat.model(run.model_id), path)
    elif run.model and (named := _catalog_model(cat, run.model)) is not None:
        model = named  # a Hugging Face repo id (vLLM's model_id) or a catalog id or alias
    elif run.model:
        said.append(f"its model `{run.model}` is taken as this plan's {plan.model.name}, "
                    + ("resized to the file's bytes" if run.weight_bytes else "same bytes"))
    gpu = None
    if run.card_id:
        gpu = _named(lambda: cat.gpu(run.card_id), path)
    elif run.card:
        gpu = match_gpu(run.card, None, cat.hardware.all())
    stand_in = gpu is None  # the file names no catalog card: this plan's stands in
    if stand_in:
        gpu = plan.gpu
        said.append(f"its card {'`' + run.card + '` is not in the catalog: ' if run.card else 'is not named: '}taken "
                    f"as this plan's {plan.gpu.name}")
    fmt = _run_format(run, plan.fmt.id)
    native = getattr(run, "native_backend", None)  # llama-bench's `backends` naming CUDA, ROCm or Metal
    if native and backend(gpu) != native:
        card = (f"a card this plan's {gpu.name} stands in for (`{run.card or ''}` names no one catalog card)"
                if stand_in else f"{gpu.name} as its card")
        raise InvalidValueError(f"--calibrate `{path}` names {BACKEND_NAMES[native]} as its backend and {card}, whose "
                                f"backend is {BACKEND_NAMES.get(backend(gpu), 'none of these')}.",
                                "Check the file's gpu_info and backends, or calibrate with a run on this plan's card.")
    for card, whose in ((gpu, "the run's card"), (plan.gpu, "this plan's card")):
        refused = backend_refusal(rid, card, getattr(run, "backend", None))
        if refused:
            raise InvalidValueError(f"--calibrate `{path}` is a run on Vulkan, and {whose} does not take it: {refused}.",
                                    "Calibrate with a run on the card's own backend.")
    be = backend(gpu, getattr(run, "backend", None))  # the run's own backend (a llama-bench file's Vulkan)
    plan_backend = plan_backend or backend(plan.gpu)
    if be is not None and plan_backend is not None and (be == "vulkan") != (plan_backend == "vulkan"):
        raise InvalidValueError(f"--calibrate `{path}` is a run on {BACKEND_NAMES[be]}; it cannot calibrate a figure "
                                f"on {BACKEND_NAMES[plan_backend]}.",
                                "Calibrate with a run on the backend planned (--backend), or drop --calibrate.")
    c = constants(spec, be, gpu, unfitted_card=True) if spec is not None and be else None
    if c is None:
        raise InvalidValueError(f"--calibrate `{path}`: no {RUNTIME_NAMES[rid]} constants for the run's card "
                                f"{gpu.name} to compare it with.", "Calibrate with a run on a supported card.")
    try:
        rp = make_plan(model, gpu, PlanInputs(quant=fmt, context_tokens=run.context_tokens, batch=run.batch,
                                              prompt_tokens=run.prompt_tokens, gpu_util=0.99, overhead_bytes=0.0),
                       search_fit=False)
    except InvalidValueError as e:
        raise InvalidValueError(f"--calibrate `{path}`: its run cannot be planned ({e.message})", e.hint) from None
    scale = run.weight_bytes / rp.weights.bytes_total if run.weight_bytes else 1.0
    run_be = getattr(run, "backend", None)
    s1 = step_inputs(rp, rp.decode_b, rid, be=run_be)
    s1 = at_file_bytes(s1, scale)
    from llmsize.estimate.speed import ceiling_step_s, decode_step_time_s, prefill_time_s

    predicted = 1 / decode_step_time_s(s1, c)
    # the run against its own plan's bandwidth ceiling (its bytes at the card's peak): a run beyond it, or absurdly
    # far below it, measured another card, model or format than it says
    ceiling = 1 / ceiling_step_s(s1)
    if not math.isfinite(run.decode_tok_s) or run.decode_tok_s > ceiling * (1 + CALIBRATION_SLACK):
        raise InvalidValueError(
            f"--calibrate `{path}`: its {run.decode_tok_s:,.4g} tok/s per sequence beats the bandwidth ceiling of the "
            f"run it describes ({ceiling:,.1f} tok/s: {model.name}, {fmt}, on {gpu.name}).",
            "Check that the file is of this model, format and card (or name them in it); a faster run measured "
            "something else.")
    if run.decode_tok_s < ceiling * CALIBRATION_FLOOR:
        raise InvalidValueError(
            f"--calibrate `{path}`: its {run.decode_tok_s:,.4g} tok/s per sequence is under "
            f"{CALIBRATION_FLOOR:.0%} of the run's bandwidth ceiling ({ceiling:,.1f} tok/s).",
            "Check the file: a run that slow did not stream its weights from this card's memory.")
    factor = run.decode_tok_s / predicted
    pre = at_file_bytes(prefill_inputs(rp, rid, flash_attn=run.flash_attn is not False, be=run_be), scale)  # its attention
    measured_pre_s = (run.prompt_tokens / run.prefill_tok_s if run.prefill_tok_s and run.prompt_tokens
                      else run.ttft_s)
    t_pre = prefill_time_s(pre, c)
    pf = t_pre / measured_pre_s if t_pre and measured_pre_s else None
    if pf is not None and not 1 / CALIBRATION_PROMPT_SPAN <= pf <= CALIBRATION_PROMPT_SPAN:
        raise InvalidValueError(
            f"--calibrate `{path}`: its prompt ({measured_pre_s:,.4g} s for {run.prompt_tokens or 0:,} tokens) is "
            f"{max(pf, 1 / pf):,.3g} times {'faster' if pf > 1 else 'slower'} than the fitted model says for the run "
            f"it describes ({t_pre:,.4g} s).",
            "Check the file's prompt figures (a TTFT in seconds, a prefill rate in tok/s) and that the file is of "
            "this model and card.")
    rate = None
    if measured_pre_s and not pre.peak_flop_per_s and c.eta_p(pre.format_class):  # no rate: t_pre is None
        rate = prompt_rate_flop_s(pre, c, measured_pre_s)
    run_bytes = s1.weight_bytes + s1.kv_bytes
    here = plan.decode_1.bytes_total
    where = (f"calibrated by your run {path} ({run.tool}: {run.decode_tok_s:,.1f} tok/s per sequence at batch "
             f"{run.batch}, {run.context_tokens:,} tokens, on {gpu.name}; the fitted model said {predicted:,.1f}, "
             f"x{factor:.2f})")
    ext = (f"Calibration extrapolates: this plan reads {here / 1e9:,.2f} GB per token on {plan.gpu.name} "
           f"({plan.gpu.bandwidth_gb_s:,.0f} GB/s), the run"
           + (f" ({model.name}, named `{run.model}` in the file)" if model.id != plan.model.id and run.model else "")
           + f" {run_bytes / 1e9:,.2f} GB on {gpu.name} "
           f"({gpu.bandwidth_gb_s:,.0f} GB/s)" + (f"; {'; '.join(said)}" if said else ""))
    same = gpu.id == plan.gpu.id and model.id == plan.model.id and abs(run_bytes / here - 1) < 0.05 and not said
    return Calibration(factor=factor, source=where, extrapolation="" if same else ext + ".", prefill_factor=pf,
                       prefill_rate_flop_s=rate, card_id=gpu.id)


def expect_for_cli(plan: Plan, cat, runtime: str | None, run, path: str | None,
                   flash_attn: str | None = None, engine: str | None = None,
                   ubatch_tokens: int = LLAMACPP_UBATCH_TOKENS) -> ExpectedResult:
    """`plan`'s expected figure: the runtime (and --backend) asked for, else the calibration file's, else the
    default."""
    gpu_backend = plan.inputs.backend
    runtimes = cat.runtimes.by_id()
    if run is not None and run.runtime in RUNTIMES:
        if runtime is not None and resolve_runtime(runtime)[0] != run.runtime:
            flag = f"--engine {engine}" if engine == runtime else f"--runtime {runtime}"
            raise InvalidValueError(f"--calibrate `{path}` is a {RUNTIME_NAMES[run.runtime]} run; it cannot "
                                    f"calibrate {flag}.", f"Drop {flag.split()[0]} or pass --runtime {run.runtime}.")
        from_run = runtime is None
        runtime = runtime or run.runtime
    else:
        from_run = False
    unmodeled = getattr(run, "unmodeled_backend", None)
    if unmodeled:
        raise InvalidValueError(f"--calibrate `{path}` ran on llama.cpp's {unmodeled} backend, which has no group "
                                "here to compare it with.", "Calibrate with a run on CUDA, ROCm, Metal or Vulkan.")
    gpu_backend = gpu_backend or getattr(run, "backend", None)  # a Vulkan run calibrates the Vulkan figure
    calibration = None
    if run is not None:
        rid = resolve_runtime(runtime)[0] if runtime else default_runtime(plan.fmt.id, plan.gpu, from_gguf(plan))[0]
        calibration = calibration_from_run(run, plan, rid, runtimes.get(rid), cat, path,
                                           backend(plan.gpu, gpu_backend))
    r = expect(plan, runtimes, runtime, calibration, flash_attn, engine, ubatch_tokens, gpu_backend)
    if from_run:  # not asked for: the calibrating run's
        r = _replace(r, runtime_why=f"the runtime of the run in {path}")
    return r
