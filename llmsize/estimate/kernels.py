"""The kernels a runtime runs a plan's matmuls and attention with: the weights' kernel class (tensor-core
native FP8/FP4, Marlin's weight-only, GGUF's dequantizing kernels), the tile rows they pad a batch to, and the
rates (FLOP/s) they multiply at on the card."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmsize.catalog.schema import AttentionBase, GpuSpec, MlaAttention
from llmsize.errors import InvalidValueError
from llmsize.estimate.flops import compute_peak
from llmsize.estimate.runtimes import RUNTIME_NAMES, backend, default_runtime
from llmsize.estimate.speed import MARLIN_CLASS, format_class
from llmsize.estimate.weights import read_shares_by_format

if TYPE_CHECKING:
    from llmsize.estimate.plan import Plan


# format classes whose weights tensor cores multiply as stored, and the card's rate that says it has the instruction
NATIVE_TENSOR_FORMATS = {"fp8": "fp8", "fp8-block128": "fp8", "nvfp4": "fp4", "mxfp4": "fp4"}


def tensor_core_native(plan: Plan, runtime: str | None, cls: str) -> bool:
    """Whether `runtime`'s matmuls take the plan's weights as stored on the tensor cores: FP8 on a card with FP8
    instructions (Ada, Hopper, Blackwell), NVFP4/MXFP4 on one with FP4 (Blackwell), and not where they go through
    Marlin (cls is its class) or through a vector-kernel runtime (llama.cpp, MLX: MATMUL_PRECISION)."""
    rate = NATIVE_TENSOR_FORMATS.get(plan.fmt.kernel_id)
    if rate is None or runtime in MATMUL_PRECISION or cls == MARLIN_CLASS:
        return False
    return bool(getattr(plan.gpu.dense_tflops, rate))


# Rows a small batch's matmul is padded to on the tensor cores. Ampere, Ada and GeForce Blackwell's mma.sync
# m16n8k16, and AMD's MFMA 16x16x16, are 16 rows deep, and Marlin (4-bit weight-only, and FP4 through it) issues
# mma.sync on every architecture (vLLM's csrc/quantization/gptq_marlin/marlin_mma.h: no wgmma). Hopper's
# wgmma.mma_async and datacenter Blackwell's tcgen05.mma are m64 (PTX ISA), but the current engines' small-batch
# GEMMs there swap A and B, the weights taking the 64 rows and the batch the instruction's narrow N: vLLM's
# csrc/quantization/cutlass_w8a8/c3x/scaled_mm_sm90_fp8_dispatch.cuh runs M in [1, 16] on a 64 x 16 tile ("enable
# swap AB for M < 64"), and SGLang 0.5.13's BF16 Qwen3-8B on an H20 (148 dense TFLOPS) decoded a step in 6.08 ms at
# batch 1 and 13.39 at 64 (measurements/sglang-vuuihc-h20-qwen3-8b-bench-one-batch.yaml), where 64 rows of compute
# alone take 7.1 ms. An older generation padded to wgmma's 64: Qwen's speed benchmark on an H20 (SGLang
# 0.4.6.post1, May 2025) ran Qwen3-32B at 48.3 ms a token in BF16 and 21.7 in FP8, the weights' read (16.4 and
# 8.2 ms) plus a 64-row tile's FLOPs (28 and 14 ms). Its rows are costed with wgmma's rows (observed.old_tiles),
# their padding at the cost of the step's own matmul FLOPs (speed.tile_time_s); plans pay the current 16 rows.
WGMMA_ROWS_BY_ARCH = {"9": 64, "10": 64}  # compute capability major: Hopper, datacenter Blackwell


TILE_ROWS = 16


def wgmma_rows(gpu) -> int:
    """Rows of `gpu`'s tensor-core instruction without swapped operands: wgmma's / tcgen05's 64 on Hopper and
    datacenter Blackwell (WGMMA_ROWS_BY_ARCH), else mma.sync's (and MFMA's) 16."""
    return WGMMA_ROWS_BY_ARCH.get((gpu.compute_capability or "").split(".")[0], TILE_ROWS)


def tile_rows(gpu, marlin: bool = False, old: bool = False) -> int:
    """Rows a small batch's matmul rounds up to on `gpu`: 16, or wgmma's 64 on Hopper and datacenter Blackwell for
    an older generation's GEMMs (`old`) that are not Marlin's (`marlin`)."""
    return wgmma_rows(gpu) if old and not marlin else TILE_ROWS


def vector_kernels(plan: Plan, runtime: str | None) -> bool:
    """Whether `runtime`'s small-batch matmuls and decode attention run on the vector units, not the tensor cores:
    llama.cpp's and MLX's (MATMUL_PRECISION: mmvq, qmv, fattn-vec, sdpa_vector), and anything on an Apple card."""
    return runtime in MATMUL_PRECISION or plan.gpu.vendor == "Apple"


# llama.cpp's CUDA flash attention at decode (ggml/src/ggml-cuda/fattn.cu, ggml_cuda_get_best_fattn_kernel, read at
# ggml-org/llama.cpp@00a2d609): on NVIDIA cards with Turing's tensor cores or later, a 16-bit cache and one query a
# sequence (batch 1) run the vector kernel (fattn-vec, at the FP32 units: the attention term's FLOPs) on Ada and later
# unless more than 4 query heads share a cached head over a cache of 8,192 tokens or more, and before Ada (Turing,
# Ampere) only where no two heads share one (MHA: its GQA optimisation needs a ratio of 2); otherwise, and for head
# sizes the vector kernel lacks (not a multiple of 64, or above 256: MLA's 576, Gemma 4's 512), the tensor-core kernel
# (fattn-mma-f16), whose tile takes a GQA group's heads as its rows, its FLOPs hidden under the cache's read. A
# quantized cache keeps the vector kernel at batch 1. The depth sweeps that show it: an A100's Qwen3-Coder-Next (8
# heads a cached head) at 117.89 tok/s at 0 and 111.12 at 32,768 tokens, where the vector term priced 0.79 -> 1.09
# of the measured speed (benchmarks/RESULTS.md, 2026-12-06).
LLAMACPP_MMA_FROM_CC = (7, 5)  # Turing
LLAMACPP_VEC_FIRST_CC = (8, 9)  # Ada Lovelace
LLAMACPP_VEC_GQA_MAX_LONG, LLAMACPP_LONG_CACHE_TOKENS = 4, 8192
QUANTIZED_CACHES = ("q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")


def llamacpp_cuda_vector_attention(gpu, mixer, batch: int, context_tokens: int, kv_dtype: str | None) -> bool:
    """Whether llama.cpp's CUDA build runs this layer's decode attention in its vector kernel (above); False for
    layers without a KV cache."""
    if isinstance(mixer, MlaAttention):
        return False  # 576-wide heads: the tensor-core kernel only
    if not isinstance(mixer, AttentionBase):
        return False
    cc = gpu.cc
    if cc is None or cc < LLAMACPP_MMA_FROM_CC:
        return True  # Volta and older: the vector or the generic tile kernel, both on the vector units
    if mixer.head_dim > 256 or mixer.head_dim % 64:
        return False
    if any(q in (kv_dtype or "").lower() for q in QUANTIZED_CACHES):
        return batch <= (2 if cc >= LLAMACPP_VEC_FIRST_CC else 1)
    if batch > 1:
        return False
    gqa = mixer.num_attention_heads // mixer.num_key_value_heads
    if cc >= LLAMACPP_VEC_FIRST_CC:
        return not (gqa > LLAMACPP_VEC_GQA_MAX_LONG and context_tokens >= LLAMACPP_LONG_CACHE_TOKENS)
    return gqa < 2


def cache_precision_rate(plan: Plan) -> float | None:
    """The dense rate (FLOP/s) decode attention's matmuls run at: the cache's precision (FP8 for an FP8 cache, else
    16-bit), whatever the weights' format; None where the catalog lacks it and only the FP32 figure would stand in.
    A prompt's attention runs at the 16-bit rate (attention_rate)."""
    return dense_rate(plan, "fp8" if (plan.inputs.kv_dtype or "").lower() in FP8_ATTENTION_CACHES else "bf16")


def dense_rate(plan: Plan, precision: str) -> float | None:
    """The card's dense rate (FLOP/s) at `precision`; None where the catalog lacks it and only the FP32 figure
    would stand in."""
    rate = compute_peak(plan.gpu, plan.fmt, precision).flop_per_s
    return None if not rate or fp32_stands_in(plan.gpu, rate) else rate


# Runtimes whose matmuls run at 16- or 32-bit rates whatever the weight format: llama.cpp multiplies quantized
# weights with INT8 dot products or dequantizes them to FP16, or FP32 where a card's FP16 is slow (ggml-cuda
# mmq.cu / cuBLAS; Pascal's FP16 runs at 1/64 of FP32; Metal simdgroup matrices in half precision), MLX in
# float16; neither uses FP8 or FP4 tensor-core math. The others run the format's own.
MATMUL_PRECISION = {"llamacpp": ("fp16", "fp32"), "mlx": ("fp16",)}


# On NVIDIA cards llama.cpp's prompt matmuls run at the card's INT8 rate or half of it, never at its catalog FP16
# figure: quantized weights go through MMQ, INT8 mma.sync on Turing and later, dp4a on Pascal (the P40's INT8
# figure, 4x its FP32); MMQ is the default since b3216 (PR #8075, 2024-06-24), and before it cuBLAS multiplied
# dequantized FP16 with FP16 accumulation (CUBLAS_COMPUTE_16F), half the INT8 rate on every tensor-core card. The
# catalog's FP16 figure is with FP32 accumulation, which GeForce cards run at half rate and workstation and
# datacenter cards at full rate (an RTX 4090: 165 TFLOPS, 661 TOPS INT8; an RTX PRO 6000: 504 and 1,008): priced
# at it, Llama 2 7B Q4_0's prompt on an RTX PRO 6000 (llm-tracker) ran at 0.48 of the prediction held out
# (`python benchmarks/fit_speed.py --sources llamacpp:cuda` at bc00ca2), and a Tesla P40
# ran its prompt above its FP32 peak (llama.cpp PR #4766: Llama 7B Q4_0 pp512 at 912.41 t/s, 2 x 6.74e9 x 912.41 =
# 12.3 TFLOPS of matmuls against 11.76). A card without an INT8 figure gets no time to first token here.
LLAMACPP_CUDA_PRECISION = "int8"


# llama.cpp's Vulkan build on an NVIDIA card with tensor cores (Turing and later: VK_NV_cooperative_matrix2, else
# VK_KHR_cooperative_matrix) dequantizes the weights and multiplies in FP16 with FP16 accumulation at the default
# precision (ggml_vk_get_mul_mat_mat_pipeline: `prec == GGML_PREC_DEFAULT ? ... .f16acc`, ggml-vulkan.cpp, ggml-org/ggml
# @d99724f2): the FP16-accumulate tensor rate, half the INT8 rate on every tensor-core card, which on GeForce cards is
# twice the catalog's FP16 figure (FP32 accumulation). Priced at that figure, an RTX 3090's Llama 3 8B Q4_0 pp512 on
# Vulkan (4,753 t/s, llama.cpp PR #21024) would be 2 x 8.03e9 x 4,753 = 76 TFLOPS against 71: above the peak.
VULKAN_NVIDIA_TENSOR_CC = 7.5


def kernel_class(plan: Plan, runtime: str | None, marlin: bool = False) -> str:
    """The format class of the kernels `runtime` decodes the plan's weights with: the format's (speed.FORMAT_CLASS),
    except FP4 weights multiplied in 16 bits by a weight-only kernel (Marlin on NVIDIA cards): where the run says so
    (`marlin`), or under a tensor-core runtime on a card without FP4 instructions (no dense fp4 figure: Ampere, Ada,
    Hopper, MI300X); and an i-quant file type whose file is mostly other blocks (iquant_file_class)."""
    cls = format_class(plan.fmt.id)
    if cls == "iquant" and plan.fmt.mix:  # a file type's file (a pure ggml-iq* format is its block throughout)
        cls = iquant_file_class(plan.card_model or plan.model, plan.fmt.mix)
    return through_marlin(cls, plan, runtime, marlin)


def iquant_file_class(model, ftype: str) -> str:
    """The kernel class of an i-quant file type's file for `model`: the i-quants' where their blocks hold most of its
    bytes, else that of the block type that does (gpt-oss's files keep their MXFP4 experts, FP4; a model whose rows
    are no multiple of 256, Falcon's, falls back to IQ4_NL throughout, the legacy 4-bit class)."""
    from llmsize.estimate.gguf_mix import file_mix, types_by_bytes
    from llmsize.estimate.quant import block_format

    by_type = types_by_bytes(list(file_mix(model, ftype)))
    classes = {t: format_class(block_format(t)) for t in by_type}
    if 2 * sum(b for t, b in by_type.items() if classes[t] == "iquant") >= sum(by_type.values()):
        return "iquant"
    return classes[next(iter(by_type))]  # the block type holding most bytes


def through_marlin(cls: str, plan: Plan, runtime: str | None, marlin: bool) -> str:
    if cls == "fp4" and (asked_marlin(plan, marlin) or (runtime not in MATMUL_PRECISION
                                                        and not plan.gpu.dense_tflops.fp4)):
        return MARLIN_CLASS
    return cls


def check_fp4_kernel(plan: Plan, runtime: str | None) -> None:
    """Refuse --fp4-kernel (PlanInputs.fp4_kernel) where it chooses nothing: weights with no FP4 part, a card or
    runtime that has neither kernel (Marlin and FP4 tensor cores are NVIDIA's; llama.cpp and MLX run their own), or
    native FP4 on a card without FP4 tensor cores."""
    asked = plan.inputs.fp4_kernel
    if asked is None:
        return
    rid = runtime or default_runtime(plan.fmt.id, plan.gpu)[0]
    fp4 = format_class(plan.fmt.id) == "fp4" or any(
        fid is not None and format_class(fid) == "fp4"
        for fid in read_shares_by_format(plan.card_model or plan.model, plan.fmt, plan.scope, 1))
    if not fp4:
        raise InvalidValueError(f"--fp4-kernel {asked}: {plan.fmt.id} weights have no FP4 part (nvfp4, mxfp4).",
                                "Drop --fp4-kernel, or plan FP4 weights (--quant nvfp4).")
    if plan.gpu.vendor != "NVIDIA" or rid in MATMUL_PRECISION:
        who = plan.gpu.name if plan.gpu.vendor != "NVIDIA" else RUNTIME_NAMES[rid]
        raise InvalidValueError(f"--fp4-kernel {asked}: it chooses between NVIDIA's FP4 tensor cores and the Marlin "
                                f"kernel under vLLM or SGLang; {who} runs neither.", "Drop --fp4-kernel.")
    if asked == "native" and not plan.gpu.dense_tflops.fp4:
        raise InvalidValueError(f"--fp4-kernel native: {plan.gpu.name} has no FP4 tensor cores; {RUNTIME_NAMES[rid]} "
                                "runs FP4 weights through Marlin there (the plan's default).", "Drop --fp4-kernel.")


def asked_marlin(plan: Plan, marlin: bool = False) -> bool:
    """Whether the plan's FP4 weights go through Marlin because a run says so (`marlin`) or the plan asks for it
    (--fp4-kernel marlin, PlanInputs.fp4_kernel)."""
    return marlin or plan.inputs.fp4_kernel == "marlin"


def fp32_stands_in(gpu, peak_flop_per_s: float | None) -> bool:
    """Whether a prompt's matmul rate is the card's FP32 figure standing in for a matrix-unit rate the catalog
    lacks (compute_peak's fallback; an NVIDIA or AMD card's tensor or matrix cores run 16-bit math faster than its
    FP32 units). Apple's GPUs run 16-bit matmuls at about their FP32 rate: not a stand-in there."""
    return bool(peak_flop_per_s) and gpu.vendor != "Apple" and peak_flop_per_s == (gpu.dense_tflops.fp32 or 0) * 1e12


def vulkan_fp16_accumulate(gpu: GpuSpec) -> bool:
    """Whether llama.cpp's Vulkan build multiplies on `gpu`'s tensor cores with FP16 accumulation
    (VULKAN_NVIDIA_TENSOR_CC), priced at half its INT8 rate and at least its FP16 figure: an NVIDIA card of Turing
    or later whose INT8 rate the catalog has."""
    return (gpu.vendor == "NVIDIA" and bool(gpu.dense_tflops.int8) and gpu.compute_capability is not None
            and float(gpu.compute_capability) >= VULKAN_NVIDIA_TENSOR_CC)


def matmul_rate(plan: Plan, runtime: str | None, marlin: bool = False, be: str | None = None
                ) -> tuple[float | None, str]:
    """The dense rate (FLOP/s; None where the catalog has none) `runtime`'s matmuls reach on the plan's card, and
    the precision it is of, as the report names it: the 16-bit peak for a run through Marlin (its matmuls are
    bf16/fp16); llama.cpp's on an NVIDIA card LLAMACPP_CUDA_PRECISION's on CUDA, its FP16-accumulate rate on Vulkan
    (vulkan_fp16_accumulate); else the faster of the runtime's own precisions (MATMUL_PRECISION), or the peak of the
    format's own precision: --compute prices the plan's roofline, not what the runtime runs the weights at (vLLM
    multiplies BF16 weights in BF16 whatever the card's INT8 rate)."""
    if marlin:
        p = compute_peak(plan.gpu, plan.fmt, "bf16")
        return p.flop_per_s, (p.precision or p.requested).upper()
    if runtime == "llamacpp" and backend(plan.gpu, be) == "cuda":
        rate = getattr(plan.gpu.dense_tflops, LLAMACPP_CUDA_PRECISION)
        return (rate * 1e12 if rate else None), LLAMACPP_CUDA_PRECISION.upper()
    if runtime == "llamacpp" and backend(plan.gpu, be) == "vulkan" and vulkan_fp16_accumulate(plan.gpu):
        # never below the FP32-accumulate figure: Blackwell Ultra cut INT8 (a GB300: 165 TOPS), not FP16
        d = plan.gpu.dense_tflops
        return max(d.int8 / 2, d.fp16 or 0.0) * 1e12, "FP16 (FP16 accumulate)"
    if runtime in MATMUL_PRECISION:
        rates = [compute_peak(plan.gpu, plan.fmt, p).flop_per_s or 0 for p in MATMUL_PRECISION[runtime]]
        return max(rates) or None, "/".join(p.upper() for p in MATMUL_PRECISION[runtime])
    own = plan.peak if plan.inputs.compute_precision is None else compute_peak(plan.gpu, plan.fmt)
    return own.flop_per_s, (own.precision or own.requested or "matmul").upper()


# The cache dtypes whose decode attention runs on 8-bit tensor cores (FlashAttention-3 / FlashInfer FP8, TensorRT-LLM's
# XQA; an NVFP4 cache is dequantized to FP8 for it); any other cache's attention runs at the 16-bit rate.
FP8_ATTENTION_CACHES = ("fp8", "fp8_ds_mla", "nvfp4")


def attention_rate(plan: Plan, runtime: str | None, matmul_flop_per_s: float | None) -> float | None:
    """The rate (FLOP/s) a prompt's attention matmuls run at where it is below the weights' matmul rate: a runtime
    that multiplies FP8 or FP4 weights at their own tensor-core rate computes the prompt's QK^T and PV at the
    16-bit rate, half of it or less, whatever its cache keeps: the prompt's keys and values are computed in 16 bits
    before they are written to the cache. TensorRT-LLM's FP8 runs of Qwen2.5-0.5B with an FP8 cache on an RTX PRO
    6000 (measurements/trtllm-masahiro-kubota-rtxpro6000-qwen25-0p5b-fp8.yaml) held out at 0.54-0.63 of the speed
    of FP8-rate attention for their 6,144-9,192-token prompts, at 0.68-0.74 of the 16-bit rate's (the same
    engine's BF16 rows on that card: 0.64-0.80); its prompts 25.1% / 59.5% against 25.5% / 47.5% (at 2a8087a,
    benchmarks/experiments/prompt_attention_at_cache_precision.patch; RESULTS.md, 2026-12-05). None: attention at
    the matmuls' rate (16-bit weights, llama.cpp and MLX, whose rates are their own: MATMUL_PRECISION; a card whose
    catalog entry lacks the 16-bit rate, where only its FP32 figure would stand in)."""
    if runtime in MATMUL_PRECISION or not matmul_flop_per_s:
        return None
    rate = dense_rate(plan, "bf16")
    return rate if rate and rate < matmul_flop_per_s else None
