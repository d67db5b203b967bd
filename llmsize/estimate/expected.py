"""Expected speed of a plan under a runtime: the plan's bytes, FLOPs and links turned into speed.py's step
inputs, the runtime's constants for the card's backend picked from runtimes/*.yaml, and the report's basis."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from dataclasses import replace as _replace

from llmsize.catalog.schema import GpuSpec, ModelSpec, RuntimeSpec, SpeedGroup
from llmsize.errors import InvalidValueError, LlmsizeError
from llmsize.estimate.flops import compute_peak
from llmsize.estimate.kv import mla_mixers
from llmsize.estimate.memo import by_identity
from llmsize.estimate.plan import Plan
from llmsize.estimate.prefill import UNFUSED_SCORE_TRAFFIC
from llmsize.estimate.runtime_model import departure, run_model
from llmsize.estimate.speed import (
    ALIAS_NOTE,
    BACKEND_OF_VENDOR,
    MARLIN_CLASS,
    RUNTIME_ALIASES,
    RUNTIMES,
    SERVING_RUNTIMES,
    TERNARY_RUNS,
    Calibration,
    Constants,
    Expected,
    PrefillInputs,
    StepInputs,
    at_file_bytes,
    expected_speed,
    flop_time_at_peak_s,
    format_class,
    is_ternary,
    link_kind,
    pipeline_factor,
    prefill_fraction,
    prefill_missing,
    prefill_parts_s,
    score_time_s,
)
from llmsize.estimate.weights import expert_params_per_token, expert_read_fraction, read_shares_by_format

RUNTIME_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "llamacpp": "llama.cpp",
                 "mlx": "MLX", "gpt-fast": "gpt-fast"}
BACKEND_NAMES = {"cuda": "CUDA (NVIDIA)", "rocm": "ROCm (AMD)", "metal": "Metal (Apple)", "vulkan": "Vulkan"}
# llama.cpp's Vulkan backend (ggml/src/ggml-vulkan) runs on NVIDIA and AMD cards beside their own backends; Ollama and
# LM Studio ship Vulkan builds of it. No other runtime here has one.
VULKAN_RUNTIMES = ("llamacpp",)


def resolve_runtime(name: str) -> tuple[str, str | None]:
    """A runtime id and, for an alias such as ollama, the note that says what runs underneath."""
    key = name.strip().lower()
    if key in RUNTIMES:
        return key, None
    if key in RUNTIME_ALIASES:
        return RUNTIME_ALIASES[key], ALIAS_NOTE.get(key)
    from llmsize.options import not_one_of

    raise InvalidValueError(f"--runtime {not_one_of(name, list(RUNTIMES) + ['ollama', 'lmstudio'])}.",
                            "Ollama and LM Studio run llama.cpp: --runtime llamacpp.")


# the KV cache dtype each runtime keeps by default (others: bf16): llama.cpp's f16 (common/common.h, cache_type_k and
# cache_type_v GGML_TYPE_F16); mlx-lm's cache in the dtype of the keys, float16 as mlx_lm.convert writes weights
RUNTIME_KV_DTYPE = {"llamacpp": "fp16", "ollama": "fp16", "lmstudio": "fp16", "mlx": "fp16"}


def runtime_kv_dtype(runtime: str) -> str:
    """The KV cache dtype `runtime` keeps unless told otherwise."""
    return RUNTIME_KV_DTYPE.get(runtime, "bf16")


def default_runtime(fmt_id: str, gpu: GpuSpec, gguf_file: bool = False) -> tuple[str, str]:
    """llama.cpp for GGUF formats and files (an F16 GGUF is a GGUF) and Apple cards, MLX for MLX formats, vLLM
    otherwise; and why."""
    if fmt_id.startswith("mlx-"):
        return "mlx", f"the default for {fmt_id} weights"
    if fmt_id.startswith(("gguf-", "ggml-")):
        return "llamacpp", f"the default for {fmt_id} (GGUF) weights"
    if gguf_file:
        return "llamacpp", "the default for a GGUF file"
    if gpu.vendor == "Apple":
        return "llamacpp", "the default on Apple silicon"
    if backend(gpu) == "vulkan":
        return "llamacpp", f"the default on {gpu.vendor} Arc cards (llama.cpp's Vulkan build)"
    if gpu.vendor not in ("NVIDIA", "AMD"):  # a card none of the runtimes here runs on (Gaudi): the plan says why
        return "vllm", "the default for safetensors formats"
    return "vllm", "the default for safetensors formats on NVIDIA and AMD cards"


def backend_refusal(rid: str, gpu: GpuSpec, asked: str | None) -> str | None:
    """Why runtime `rid` does not run on `gpu` through the backend `asked` for (None: the card's own), or None."""
    native = backend(gpu)
    if asked is None or asked == native:
        return None
    if native is None:
        return f"{gpu.name} runs none of these runtimes"
    if asked != "vulkan":
        return f"{gpu.name}'s own backend is {BACKEND_NAMES[native]}, not {BACKEND_NAMES[asked]}"
    if rid not in VULKAN_RUNTIMES:
        return f"{RUNTIME_NAMES[rid]} has no Vulkan backend (llama.cpp's, Ollama's and LM Studio's: --runtime llamacpp)"
    if native == "metal":
        return "llama.cpp runs on Metal on Apple silicon (its Vulkan backend there goes through MoltenVK: no measurements)"
    if native == "rocm" and (gpu.llvm_target or "").startswith(CDNA_TARGETS):
        return (f"{gpu.name} is an Instinct (CDNA) card, which AMD's Vulkan drivers do not run: Mesa's RADV refuses "
                "CDNA (radv_is_gpu_supported), AMDVLK lists no Instinct card; llama.cpp runs there on ROCm")
    return None


def check_backend(asked: str | None, runtime: str | None, plan: Plan | None = None, fmt_id: str | None = None,
                  gpu: GpuSpec | None = None) -> None:
    """Refuse --backend `asked` under --runtime `runtime` (None: the default) where it cannot run: Vulkan under a
    runtime without one, or under the default runtime of `fmt_id` weights on NVIDIA and AMD cards (vLLM for
    safetensors formats); with `plan` (one card), any backend the plan's runtime does not run there; with `gpu` alone
    (a server's card, its runtime unknown), any backend llama.cpp, Vulkan's runtime, does not run there."""
    if asked is None:
        return
    rid = resolve_runtime(runtime)[0] if runtime else None
    if asked == "vulkan" and rid is not None and rid not in VULKAN_RUNTIMES:
        raise InvalidValueError(f"--backend vulkan: {RUNTIME_NAMES[rid]} has no Vulkan backend.",
                                "Use --runtime llamacpp (Ollama and LM Studio run it too), or drop --backend.")
    if asked == "vulkan" and rid is None and fmt_id and not fmt_id.startswith(("gguf-", "ggml-")):
        raise InvalidValueError(f"--backend vulkan: the default runtime for {fmt_id} weights on NVIDIA and AMD cards "
                                "is vLLM, which has no Vulkan backend.",
                                "Add --runtime llamacpp, or give a GGUF --quant (llama.cpp's default).")
    if plan is None and gpu is None:
        return
    if plan is not None:
        gpu, rid = plan.gpu, rid or default_runtime(plan.fmt.id, plan.gpu, from_gguf(plan))[0]
    refused = backend_refusal(rid or "llamacpp", gpu, asked)
    if refused:
        raise InvalidValueError(f"--backend {asked}: {refused}.",
                                "Drop --backend for the card's own; Vulkan is llama.cpp's (--runtime llamacpp) on "
                                "NVIDIA and AMD cards.")


def not_on(rid: str, gpu: GpuSpec, asked_backend: str | None = None) -> str | None:
    """Why runtime `rid` does not run on `gpu` (through `asked_backend`, None: the card's own), or None where it
    does."""
    refused = backend_refusal(rid, gpu, asked_backend)
    if refused:
        return refused
    be = backend(gpu)
    if be is None:
        return f"{RUNTIME_NAMES[rid]} does not run on {gpu.name} in this model (no backend of its own here)"
    if rid == "mlx" and be != "metal":
        return "MLX runs on Apple silicon only; pick --runtime " + ("llamacpp" if be == "vulkan" else "vllm or llamacpp")
    if rid == "trtllm" and be != "cuda":
        return "TensorRT-LLM runs on NVIDIA cards only"
    if rid in ("vllm", "sglang", "trtllm", "gpt-fast") and be == "metal":
        return f"{RUNTIME_NAMES[rid]} has no Metal backend; pick --runtime llamacpp or mlx"
    if be == "vulkan" and rid not in VULKAN_RUNTIMES:  # an Intel Arc card
        return (f"{RUNTIME_NAMES[rid]} on {gpu.vendor} cards is not modeled here (no measurements of its "
                f"{gpu.vendor} backend); pick --runtime llamacpp (its Vulkan build)")
    from llmsize.estimate.runtime_support import architecture_refusal

    return architecture_refusal(rid, gpu)


def gguf_exact(exact) -> bool:
    """Whether a checkpoint's exact bytes are a GGUF file's (its tensor infos gave them)."""
    return getattr(exact, "source", "") == "GGUF tensor infos"


def from_gguf(plan: Plan) -> bool:
    """Whether the plan's weights are a GGUF file's."""
    return gguf_exact(plan.exact)


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# llama.cpp backends with no group of constants here: a published row or a calibrating run on one is left out
UNMODELED_BACKENDS = ("SYCL", "OpenCL", "CANN", "MUSA", "CPU")


def printed_backend(text) -> tuple[str | None, str | None]:
    """A backend as a row or llama-bench prints it ("Vulkan", "RPC,Vulkan", "CUDA 12.4", "SYCL"): ("vulkan", None)
    where it names Vulkan; (None, the name) where it names a backend without a group; (None, None) otherwise (the
    card's own)."""
    names = [n.strip() for n in str(text or "").replace(" ", ",").split(",") if n.strip()]
    if any(n.lower() == "vulkan" or n.lower().startswith("vulkan") for n in names):
        return "vulkan", None
    return None, next((n for n in names for u in UNMODELED_BACKENDS if n.lower() == u.lower()), None)


# vendors whose cards this model runs through llama.cpp's Vulkan build by default: Intel's Arc GPUs (llama.cpp's SYCL
# build is another backend, without measurements here); Intel's datacenter parts (Gaudi) run none of these runtimes
VULKAN_VENDORS = ("Intel",)


def backend(gpu: GpuSpec, asked: str | None = None) -> str | None:
    """The backend a runtime runs on `gpu`: the one `asked` for (Vulkan), else the card's own (its vendor's; Vulkan on
    an Intel Arc card)."""
    if asked:
        return asked
    if gpu.vendor in VULKAN_VENDORS and gpu.segment != "datacenter":
        return "vulkan"
    return BACKEND_OF_VENDOR.get(gpu.vendor)


# AMD's RDNA cards (gfx11, gfx12: Radeon, Radeon PRO, Strix Halo), whose kernels the serving engines write apart from
# CDNA's (gfx9: Instinct): vLLM's skinny GEMMs run wave32 with their own reductions and tuning there (PR #34709)
RDNA_TARGETS = ("gfx11", "gfx12")


def stream_family(gpu: GpuSpec, asked: str | None = None) -> str | None:
    """The card's backend (`asked`, else its own), or on AMD cards under ROCm its GPU family's: `rdna` for an RDNA
    card, whose bytes a pooled fit (vLLM, SGLang, gpt-fast on AMD cards) streams at a further cost of their own
    (SpeedGroup.rdna)."""
    be = backend(gpu, asked)
    return "rdna" if be == "rocm" and (gpu.llvm_target or "").startswith(RDNA_TARGETS) else be


def constants(spec: RuntimeSpec, backend_id: str, gpu: GpuSpec | None = None,
              unfitted_card: bool = False) -> Constants | None:
    """The runtime's constants on a backend; on an RDNA card (`gpu`), with the streaming fractions fitted on RDNA
    rows where the runtime's fit has them (SpeedGroup.rdna); None on an Intel card through Vulkan, which no group
    fits (INTEL_VULKAN_REASON), unless `unfitted_card` asks for them there all the same (a user's run calibrating
    the level, a published row priced as if counted)."""
    g: SpeedGroup | None = spec.backends.get(backend_id)
    if g is None or (gpu is not None and intel_vulkan(gpu, backend_id) and not unfitted_card):
        return None
    rdna = g.rdna if gpu is not None and stream_family(gpu, backend_id) == "rdna" else None
    if rdna is not None:
        g = g.model_copy(update={"eta_weights": rdna.eta_weights, "eta_weights_default": rdna.eta_weights_default,
                                 "eta_kv": rdna.eta_kv})
    names = [RUNTIME_NAMES[r] for r in g.runtimes] or [RUNTIME_NAMES[spec.id]]
    cards = f"{len(g.cards)} {_and([BACKEND_NAMES[b] for b in g.row_backends or [backend_id]])} card(s)"
    basis = (f"fitted on {g.rows_decode} published decode and {g.rows_prefill} prefill measurements of "
             f"{_and(names)} on {cards}")
    own = g.own_decode_held_out
    if own and own.rows:
        basis += (f"; held-out median error {own.median_abs_error:.0%} on the {own.rows} of "
                  f"{RUNTIME_NAMES[spec.id]}'s own")
    elif g.decode_held_out:
        basis += f"; held-out median error {g.decode_held_out.median_abs_error:.0%}"
    if g.prefill_held_out and g.prefill_held_out.rows:
        p = g.prefill_held_out
        basis += f"; prompts held out {p.median_abs_error:.0%} median, {p.p90_abs_error:.0%} p90"
    if g.borrowed:
        basis = f"{g.borrowed}; " + basis
    if rdna is not None:
        basis += (f"; on RDNA cards its bytes stream at fractions of their own, fitted on {rdna.rows_decode} rows "
                  f"from {rdna.sources} sources ({_and(rdna.cards)})")
    return Constants(
        runtime=spec.id, backend=backend_id, eta_weights=dict(g.eta_weights), eta_weights_default=g.eta_weights_default,
        eta_kv=g.eta_kv, t_layer_s=g.t_layer_s, t_step_s=g.t_step_s, t_moe_layer_s=g.t_moe_layer_s,
        alpha_s=dict(g.alpha_s), eta_prefill=dict(g.eta_prefill), eta_prefill_default=g.eta_prefill_default,
        band_low=g.band[0], band_high=g.band[1], rows_decode=g.rows_decode, rows_prefill=g.rows_prefill,
        cards=len(g.cards), basis=basis, fitted_classes=tuple(g.eta_weights),
        prefill_band_low=g.prefill_band[0] if g.prefill_band else None,
        prefill_band_high=g.prefill_band[1] if g.prefill_band else None, cards_seen=tuple(g.cards),
        alu_ops_per_weight=g.alu_ops_per_weight, attn_cost=g.attn_cost, tile_cost=g.tile_cost,
        mm_cost=g.mm_cost,
        t_step_v0_s=g.t_step_v0_s, t_expert_launch_s=g.t_expert_launch_s, t_prefill_layer_s=g.t_prefill_layer_s,
        prefill_consumer_factor=g.prefill_consumer_factor,
        moe_matmul_cost=g.moe_matmul_cost,
        prefill_expert_read_cost=g.prefill_expert_read_cost, t_seq_s=g.t_seq_s,
        expert_read_cost=g.expert_read_cost, t_layer_floor_s=g.t_layer_floor_s,
        t_act_quant_layer_s=g.t_act_quant_layer_s, t_recurrent_layer_s=g.t_recurrent_layer_s,
        moe_basis=g.own_moe or "",
        eta_host=spec.host.eta_bandwidth if spec.host else 1.0,
        host_band_low=spec.host.band[0] if spec.host else 1.0, host_band_high=spec.host.band[1] if spec.host else 1.0,
        host_basis=(f"{spec.host.eta_bandwidth:.2f} of the host memory's peak, fitted on {spec.host.rows} published "
                    f"CPU-only llama.cpp runs ({len(spec.host.sources)} sources) whose memory is stated; held-out "
                    f"median error {spec.host.held_out.median_abs_error:.0%}") if spec.host else "")


def _layers(plan: Plan) -> tuple[float, int]:
    """The blocks a decode step's fixed costs a layer count (a mixer and an MLP each half of one), and its MoE
    layers. A transformer layer is one block; a layer that is a mixer or an MLP alone, as Nemotron-H's Mamba-2,
    MoE and attention layers are, half a block: it launches about half a transformer layer's kernels (norm,
    projections and its mixer's kernels, or norm, router and experts)."""
    m = plan.model
    moe = sum(g.count for g in m.layer_groups if g.mlp is not None and g.mlp.kind == "moe")
    blocks = sum(g.count * ((g.mixer is not None) + (g.mlp is not None)) for g in m.layer_groups) / 2
    return blocks, moe


def geforce(gpu) -> bool:
    """A consumer NVIDIA card, whose prompts run at prefill_consumer_factor x the fitted fraction (speed.py): the
    factor is fitted on GeForce rows; no serving engine's prompt on a Radeon card is in the data, so none is
    assumed there."""
    return gpu.segment == "consumer" and gpu.vendor == "NVIDIA"


def _link(plan: Plan) -> tuple[int, str | None]:
    c = plan.comm
    if c is None:
        return 0, None
    collectives = (c.allreduces if c.tp > 1 else 0) + (c.pp - 1)
    crosses = (c.tp > c.gpus_per_node) or (c.pp > 1 and c.stages_cross_nodes)
    return collectives, link_kind(c.link.kind if c.link else None, crosses)


def step_inputs(plan: Plan, batch_step, runtime: str | None = None, marlin: bool = False,
                old_tiles: bool = False, be: str | None = None) -> StepInputs:
    """The plan's decode step at batch_step as the step-time model costs it under `runtime` (on backend `be`, None:
    the card's own); `marlin`: a run that says its FP4 weights went through Marlin (kernel_class), whose matmuls run
    at the 16-bit peak."""
    layers, moe = _layers(plan)
    collectives, link = _link(plan)
    marlin = asked_marlin(plan, marlin)
    cls = kernel_class(plan, runtime, marlin)
    side = side_bytes(plan, batch_step.weight_bytes, batch_step.batch, runtime, marlin)
    w16 = sum(b for c, b in side if c == "f16")
    return StepInputs(
        batch=batch_step.batch, weight_bytes=batch_step.weight_bytes, kv_bytes=batch_step.kv_bytes,
        bandwidth_bytes_per_s=plan.gpu.bandwidth_bytes_per_s, layers=layers, moe_layers=moe,
        collectives=collectives, link=link, comm_time_s=batch_step.comm_time_s, flops=batch_step.flops,
        peak_flop_per_s=matmul_rate(plan, runtime, marlin, be)[0], format_class=cls, side_bytes=side,
        weight_elements=(batch_step.weight_bytes - w16) * 8 / plan.weights.bits_per_weight
        if plan.weights.bits_per_weight else 0.0, vector_flop_per_s=(plan.gpu.dense_tflops.fp32 or 0) * 1e12 or None,
        attention_flops=_attention_flops(plan, batch_step),
        tile_matmul_flops=_tile_matmul_flops(plan, batch_step, runtime,
                                             marlin or cls != format_class(plan.fmt.id), old_tiles),
        attention_tile_flops=_attention_tile_flops(plan, batch_step, runtime),
        attention_flop_per_s=cache_precision_rate(plan),
        expert_flops=2.0 * batch_step.batch * expert_params_per_token(plan.card_model or plan.model),
        expert_weight_bytes=batch_step.weight_bytes * expert_read_fraction(
            plan.card_model or plan.model, plan.fmt, plan.scope, batch_step.batch),
        tensor_core_native=tensor_core_native(plan, runtime, cls), old_tiles=old_tiles,
        recurrent_layers=recurrent_layers(plan.model))


def recurrent_layers(model) -> int:
    """The model's layers whose mixer is recurrent (SSM, linear attention): Qwen3.5/3.6's 3 Gated DeltaNet layers in
    every 4, Nemotron-H's Mamba-2 layers."""
    return sum(g.count for g in model.layer_groups if g.mixer is not None and g.mixer.kind in RECURRENT_MIXERS)


# SGLang releases whose radix cache ran a hybrid's recurrent (linear-attention or Mamba) layers with the no_buffer
# strategy, which turns the overlap scheduler off (server_args.py of the released wheels): Qwen3-Next from 0.5.5.post2
# (PR #13057, "disable overlap schedule if mamba radix cache open"), every hybrid from 0.5.7 (PR #14792:
# --mamba-scheduler-strategy, `auto` hard-coded to no_buffer; Nemotron-H, Falcon-H1 alike) to 0.5.13.post1. From
# 0.5.14 `auto` resolves to extra_buffer and keeps the scheduler on for Qwen3-Next, Qwen3.5/3.6 and Nemotron-H
# (issue #27418; 0.5.23's arg_groups/overrides.py alike); --disable-radix-cache kept it on in every release.
SGLANG_NO_BUFFER = ((0, 5, 7, 0), (0, 5, 13, 1))  # first and last release, (major, minor, patch, post)
SGLANG_QWEN3_NEXT_NO_BUFFER_FROM = (0, 5, 5, 2)
_SGLANG_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?")


def sglang_release(version: str | None) -> tuple[int, int, int, int] | None:
    """(major, minor, patch, post) of the first SGLang release number in a version string (`v0.5.8.post1`,
    `sglang 0.5.6`), None where it names none."""
    m = _SGLANG_RELEASE.search(version or "")
    return tuple(int(g or 0) for g in m.groups()) if m else None


def release_words(r: tuple[int, int, int, int]) -> str:
    """A release tuple as its number: (0, 5, 13, 1) -> `0.5.13.post1`."""
    return ".".join(map(str, r[:3])) + (f".post{r[3]}" if r[3] else "")


def no_buffer_releases(model) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """The first and last SGLang release that ran this hybrid without its overlap scheduler (SGLANG_NO_BUFFER)."""
    first = SGLANG_QWEN3_NEXT_NO_BUFFER_FROM if model.family == "qwen3_next" else SGLANG_NO_BUFFER[0]
    return first, SGLANG_NO_BUFFER[1]


def without_overlap(plan: Plan, runtime: str | None, version: str | None = None) -> bool:
    """Whether SGLang `version` decodes the plan's model with each step waiting for the CPU's scheduling: a hybrid
    with recurrent layers under a release whose radix cache fell back to the no_buffer strategy and turned the
    overlap scheduler off (SGLANG_NO_BUFFER; a run's log shows disable_overlap_schedule=True, not passed:
    vuuihc/sglang study-notes/profiling-study/07, section 6.2, SGLang 0.5.13.post1, Qwen3.6-35B-A3B on an H20). Such
    a row's step pays the fitted cost a step of scheduling between steps (t_step_v0_s, with vLLM V0's rows). Held
    out, the three sources of such rows go from 0.62-0.87 of the prediction without it to 0.88-1.13 (Qwen3.6-35B-A3B
    on an H20, 0.5.13.post1), 0.68 to 1.05 (the Cookbook's Qwen3-Next on 8 x B200, 0.5.6) and 0.62 to 1.05
    (Nemotron-3 Nano on a B200, 0.5.8.post1): `python benchmarks/fit_speed.py --sources sglang:cuda`, with and
    without benchmarks/experiments/sglang_hybrids_with_overlap.patch, RESULTS.md 2026-12-05. A plan (version None)
    is for the current release, which keeps the scheduler on, and pays none; its note says what the older releases
    cost."""
    if runtime != "sglang" or not has_recurrent_layers(plan.model):
        return False
    r = sglang_release(version)
    if r is None:
        return False
    first, last = no_buffer_releases(plan.model)
    return first <= r <= last


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


def _vector_kernels(plan: Plan, runtime: str | None) -> bool:
    """Whether `runtime`'s small-batch matmuls and decode attention run on the vector units, not the tensor cores:
    llama.cpp's and MLX's (MATMUL_PRECISION: mmvq, qmv, fattn-vec, sdpa_vector), and anything on an Apple card."""
    return runtime in MATMUL_PRECISION or plan.gpu.vendor == "Apple"


def _tile_matmul_flops(plan: Plan, batch_step, runtime: str | None, marlin: bool = False, old: bool = False) -> float:
    """The step's matmul FLOPs with the batch rounded up to whole tensor-core tiles; zero for runtimes whose
    small-batch matmuls are vector kernels (llama.cpp's mmvq, MLX's qmv) and on cards without tensor cores.
    `marlin`: the matmuls run through Marlin (the run says so, or the runtime runs the plan's FP4 through it)."""
    if _vector_kernels(plan, runtime):
        return 0.0
    rows = tile_rows(plan.gpu, marlin, old)
    padded = -(-batch_step.batch // rows) * rows
    return (batch_step.flops - _attention_flops(plan, batch_step)) * padded / batch_step.batch


# Rows a decode attention kernel's query tile holds on the tensor cores: the query heads that share a cached head,
# padded. Hopper's and datacenter Blackwell's kernels issue wgmma / tcgen05.mma, m64 (PTX ISA): FlashAttention-3's
# query block is 64 rows for one warpgroup and 128-192 otherwise (hopper/tile_size.h, tile_size_fwd_sm90), FlashMLA's
# decode kernel 64 (Flash_fwd_kernel_traits_mla<576, 64, 64, ...>: its 64-row block holds the heads); elsewhere
# mma.sync's 16 (FlashInfer's smallest query tile). Unlike the matmuls' GEMMs, no engine swaps attention's operands.
# Padding shows only where the tile's FLOPs a byte exceed the card's ridge (speed.attention_excess_s): of the
# catalog's cards with tensor cores, only the H20 (37) is below 64. The rows are wgmma_rows.
def _attention_tile_flops(plan: Plan, batch_step, runtime: str | None) -> float:
    """The step's decode attention as tensor-core kernels compute it, every query group padded to the tile
    (flops.decode_attention_tile_flops), all sequences, one card's heads; zero for runtimes whose batch-1
    attention runs on the vector units (llama.cpp, MLX: their attention term) and on Apple cards."""
    if _vector_kernels(plan, runtime):
        return 0.0
    from llmsize.estimate.flops import decode_attention_tile_flops
    from llmsize.estimate.parallel import shard_model

    shard = shard_model(plan.model, plan.inputs.tp, 1)
    return batch_step.batch * decode_attention_tile_flops(shard, batch_step.context_tokens,
                                                          wgmma_rows(plan.gpu))


def cache_precision_rate(plan: Plan) -> float | None:
    """The dense rate (FLOP/s) decode attention's matmuls run at: the cache's precision (FP8 for an FP8 cache, else
    16-bit), whatever the weights' format; None where the catalog lacks it and only the FP32 figure would stand in.
    A prompt's attention runs at the 16-bit rate (attention_rate)."""
    return _dense_rate(plan, "fp8" if (plan.inputs.kv_dtype or "").lower() in FP8_ATTENTION_CACHES else "bf16")


def _dense_rate(plan: Plan, precision: str) -> float | None:
    """The card's dense rate (FLOP/s) at `precision`; None where the catalog lacks it and only the FP32 figure
    would stand in."""
    rate = compute_peak(plan.gpu, plan.fmt, precision).flop_per_s
    return None if not rate or fp32_stands_in(plan.gpu, rate) else rate


def _attention_flops(plan: Plan, batch_step) -> float:
    """The step's FLOPs beyond its matmuls: attention over the cache (and SSM state updates), one card's share."""
    return max(0.0, batch_step.flops - batch_step.batch * 2.0 * _card_matmul_params(plan))


@by_identity(maxsize=512)
def _card_matmul_params(plan: Plan) -> float:
    """Matmul parameters a token multiplies on one card of the plan (its tensor-parallel share, all stages)."""
    from llmsize.estimate.parallel import shard_model
    from llmsize.estimate.weights import matmul_params_per_token

    return matmul_params_per_token(shard_model(plan.model, plan.inputs.tp, 1))


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


OLD_SGLANG_HYBRID_NOTE = (
    "SGLang {first} to {last} ran this hybrid's recurrent layers with the radix cache's no_buffer strategy, which "
    "turns its overlap scheduler off: each decode step waited about {wait_ms:.1f} ms more for the CPU (fitted with "
    "vLLM V0's rows); from 0.5.14 the default extra_buffer strategy keeps it on, as this figure assumes")
NOT_FIT_NOTE = "as if the weights fit the budget: they do not (the Diagnosis says what does)"
# llama.cpp off AMD cards: no hybrid's decode rows pin a recurrent layer's cost (fit_speed asks 6 from 2 sources), so a
# recurrent layer costs its bytes and a block's fixed cost; the rows there, priced with the shipped constants
# (tests/test_speed.py holds the figures to them)
LLAMACPP_RECURRENT_DECODE_NOTE = (
    "a recurrent (SSM, linear-attention) layer is costed here as any block and its state's bytes: no published llama.cpp "
    "decode rows of hybrids on {backend} cards pin a cost of its own (on AMD cards, {rocm_us:.0f} us a layer); "
    "Qwen3.5-9B BF16 on an RTX 5090 (May 2026) decoded at 0.94 of such a figure, Qwen3.5-9B Q4_K_M on an M4 Pro "
    "(August 2026, llmfit's rate of a whole request) at 0.97, Qwen3-Next 80B-A3B on an M2 Ultra (a February 2026 "
    "build, before llama.cpp PR #19375 optimized its graph) at 0.41-0.45")

# runtimes that load no GGUF file (vLLM and SGLang read some, experimentally: their figures stand, with GGUF_NOTE)
NO_GGUF = ("trtllm", "gpt-fast", "mlx")
GGUF_NOTE = ("a GGUF file under a serving engine: vLLM and SGLang load some GGUF types experimentally (vLLM's "
             "docs: \"highly experimental and under-optimized\"); the figure is of their own kernels at these bytes, "
             "no published run of theirs on a GGUF file is in the fit, and fleet sizes none")


def kernel_class(plan: Plan, runtime: str | None, marlin: bool = False) -> str:
    """The format class of the kernels `runtime` decodes the plan's weights with: the format's (speed.FORMAT_CLASS),
    except FP4 weights multiplied in 16 bits by a weight-only kernel (Marlin on NVIDIA cards): where the run says so
    (`marlin`), or under a tensor-core runtime on a card without FP4 instructions (no dense fp4 figure: Ampere, Ada,
    Hopper, MI300X)."""
    return _through_marlin(format_class(plan.fmt.id), plan, runtime, marlin)


def _through_marlin(cls: str, plan: Plan, runtime: str | None, marlin: bool) -> str:
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


def side_bytes(plan: Plan, weight_bytes: float, batch: int, runtime: str | None,
               marlin: bool = False) -> tuple[tuple[str, float], ...]:
    """The parts of a step's `weight_bytes` that other kernels than the format's stream (speed.StepInputs.side_bytes),
    by class: what the scope leaves in 16 bits, and a recipe's formats beside its primary one, each at its own
    kernel class (FP4 through Marlin where the primary would be). A side part of the primary's class streams at
    the same fraction: it is kept apart only to count what is left in 16 bits."""
    out: dict[str, float] = {}
    for fid, share in read_shares_by_format(plan.card_model or plan.model, plan.fmt, plan.scope, batch).items():
        if fid == plan.fmt.kernel_id:
            continue
        cls = "f16" if fid is None else _through_marlin(format_class(fid), plan, runtime, marlin)
        if share:
            out[cls] = out.get(cls, 0.0) + weight_bytes * share
    return tuple(sorted(out.items()))


# What the step-time model does not cost in a hybrid's prompt: its recurrent layers' chunked kernels (Mamba-2's
# SSD, Gated DeltaNet's chunked delta rule) are counted as their FLOPs. Published serving runs of such hybrids took
# 3-5x the predicted time to first token when the first were added: Qwen3.6-35B-A3B NVFP4 on 2 x RTX 5090 under
# vLLM 0.25.1, 9,997 and 89,999-token prompts in 0.70 and 5.9 s (noonghunna/club-3090#858; `plan --tp 2 --prompt N`
# said 0.14 and 1.31 s then), and Qwen3-Next-80B-A3B on 8 B200s in the SGLang Cookbook (338 tokens, 128 ms; 0.037 s);
# Qwen3.6 27B and 35B-A3B under vLLM 0.22.1 on an RTX PRO 6000 Max-Q (sch0tten/nvfp4-benchmark, 128 to 32,768
# tokens, BF16, FP8 and NVFP4) took 0.6-2.6x it, and RECURRENT_PREFILL_NOTE says the range of all of them.
# Their prefill rows are left out of the fit (estimate/observed.py).
# AMD's CDNA4 cards (gfx950: MI350X, MI355X) have no decode row in the fit: their AMD costs are CDNA3's (MI300X,
# MI325X), and the InferenceX fixture's SGLang DeepSeek-R1 FP8 runs on 8 x MI355X, held back from it
# (benchmarks/experiments/mi355x_sglang_rows.patch), decoded at 1.21-1.69x the speed predicted (1.43-1.94x while
# SGLang's CDNA3 DeepSeek rows from before 0.5.10 were in the fit): `git apply` the patch, then
# `python benchmarks/predict_rows.py measurements/sglang-inferencex-app-fixture-dsr1-conc4-8.yaml`
# (tests/test_speed.py holds the note to it)
CDNA4_TARGETS = ("gfx950",)
CDNA3_TARGETS = ("gfx942",)
# AMD's compute-only GFX9 chips (CDNA: MI100 gfx908, MI200 gfx90a, MI300/MI325 gfx942, MI350/MI355 gfx950), which
# have no graphics engine: Mesa's RADV refuses them ("AMD CDNA isn't supported": radv_is_gpu_supported,
# src/amd/vulkan/radv_physical_device.c, mesa @001fa1cf), AMDVLK's README lists no Instinct card, so llama.cpp's
# Vulkan build has no device there. Vega 20 (gfx906: MI50, MI60, Radeon VII) has graphics and RADV runs it.
CDNA_TARGETS = ("gfx908", "gfx90a", *CDNA3_TARGETS, *CDNA4_TARGETS)
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
# 26B-A4B's BF16 file is the exception (18.6 against 24.64 t/s, and at the plan's figure), for no cause found.
VULKAN_BF16_EXPERTS_NOTE = (
    "llama.cpp's Vulkan build decodes BF16 routed experts with its tiled matmul, not its mat-vec kernels "
    "(ggml_vk_use_mul_mat_vec_id admits F32, F16 and quantized weights): published Vulkan runs of BF16 MoE GGUFs on "
    "a Strix Halo, outside the fit, decoded at 0.33-0.55 of such a figure (Qwen3.6-35B-A3B, GLM-4.7-Flash), Gemma 4 "
    "26B-A4B's at 0.91-0.98 (its experts' share of the bytes no smaller: a difference not explained); a quantized "
    "GGUF (Q8_0) takes the mat-vec path")


# llama.cpp's Vulkan group is fitted on NVIDIA and AMD cards; Intel's Arc cards run the same build through Intel's own
# drivers, and the dataset's runs there (A770s and a B580, builds of 2024-2026) decoded from far below to at what the
# group predicts, by driver: llama.cpp PR #14001 ran one build on Windows and on Mesa (A770 96.8 against 39.0 t/s,
# B580 127-130 against 42)
INTEL_VULKAN_WHY = (
    "llama.cpp's Vulkan group is fitted on NVIDIA and AMD cards; published Vulkan runs on Intel Arc A770s and a B580 "
    "(builds of 2024-2026), outside the fit, decoded at 0.28-1.08 of its figure, and Intel's Windows driver ran one "
    "build 2.5-3x faster than Mesa's on Linux: too few runs to fit Intel's own")
INTEL_VULKAN_REASON = INTEL_VULKAN_WHY + "; pass --calibrate FILE from your own llama-bench run"


def intel_vulkan(gpu: GpuSpec, be: str | None) -> bool:
    """Whether llama.cpp runs on an Intel card through Vulkan (INTEL_VULKAN_REASON)."""
    return be == "vulkan" and gpu.vendor in VULKAN_VENDORS


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
    "outside the fit, decoded at 0.50-0.74 of this figure")
CDNA4_NOTE = ("an MI350-series card (CDNA4): the AMD costs here are fitted on CDNA3 cards (MI300X, MI325X); published "
              "SGLang runs of DeepSeek-R1 on 8 x MI355X, outside the fit, decoded 1.2-1.7x faster than predicted")
# A hybrid's published prompts, skipped by the fit and priced as if not: their time to first token as multiples of
# the plan's figure, (shortest, longest), by who ran them; tests/test_speed.py holds each to its rows. The serving
# engines': Qwen3.6 under vLLM on an RTX PRO 6000 Max-Q and 2 x RTX 5090, Qwen3-Next under SGLang on 8 x B200;
# llama.cpp's: Qwen3.6 and Nemotron-3 Nano on a Strix Halo and an R9700 (its Vulkan build's: Qwen3-Next too).
RECURRENT_PREFILL_RANGE = {"serving": (0.6, 3.7), "llamacpp": (1.0, 1.9), "llamacpp-vulkan": (0.9, 4.5)}
_RECURRENT_PREFILL = ("time to first token of a model with recurrent (SSM, linear-attention) layers: their chunked "
                      "prompt kernels are costed as their FLOPs only; ")
RECURRENT_PREFILL_NOTE = (_RECURRENT_PREFILL + "published serving runs of such hybrids (sch0tten/nvfp4-benchmark, "
                          "club-3090#858, the SGLang Cookbook's Qwen3-Next), outside the fit, took {0:.1f}-{1:.1f}x "
                          "this figure, and its band spans that".format(*RECURRENT_PREFILL_RANGE["serving"]))
LLAMACPP_RECURRENT_PREFILL_NOTE = (
    _RECURRENT_PREFILL + "llama.cpp's published prompts of such hybrids (Qwen3.6, Nemotron-3 Nano on AMD cards), "
    "outside the fit, took {0:.1f}-{1:.1f}x this figure, and its band spans that".format(
        *RECURRENT_PREFILL_RANGE["llamacpp"]))
LLAMACPP_VULKAN_RECURRENT_PREFILL_NOTE = (
    _RECURRENT_PREFILL + "llama.cpp's published Vulkan prompts of such hybrids (Qwen3.6, Qwen3-Next, Nemotron-3 Nano "
    "on AMD cards), outside the fit, took {0:.1f}-{1:.1f}x this figure, and its band spans that".format(
        *RECURRENT_PREFILL_RANGE["llamacpp-vulkan"]))


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


RECURRENT_MIXERS = ("ssm", "linear")


def has_mla(model) -> bool:
    """Whether the model's attention is multi-head latent attention (DeepSeek V2/V3's, Kimi K2's)."""
    return bool(mla_mixers(model))


def has_recurrent_layers(model) -> bool:
    """Whether the model has SSM or linear-attention layers (a hybrid such as Qwen3-Next, Qwen3.5/3.6, Nemotron-H)."""
    return recurrent_layers(model) > 0


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
    (vulkan_fp16_accumulate); else the faster of the runtime's own precisions (MATMUL_PRECISION), or the plan's peak for
    the format's own."""
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
    return plan.peak.flop_per_s, (plan.peak.precision or plan.peak.requested or "matmul").upper()


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
    rate = _dense_rate(plan, "bf16")
    return rate if rate and rate < matmul_flop_per_s else None


def prompt_expert_bytes(plan: Plan, tokens_per_forward: int) -> float:
    """The routed experts' bytes a prompt streams, one card's share: each forward of `tokens_per_forward` tokens
    reads the experts they touch (weights.expert_read_fraction), ceil(prompt / tokens_per_forward) forwards."""
    prompt = max(plan.prefill.prompt_tokens, 1)
    per = max(1, min(tokens_per_forward, prompt))
    w = plan.weights_card or plan.weights
    share = expert_read_fraction(plan.card_model or plan.model, plan.fmt, plan.scope, per)
    return -(-prompt // per) * w.bytes_total * share


# llama.cpp's defaults for a prompt: llama_decode calls of n_batch 2,048 tokens, each cut into ubatches of
# n_ubatch 512 (common/common.h; llama-bench's defaults are the same, and it feeds a prompt n_batch at a time).
# The same 512 as the ledger's LlamaCppSettings (not imported here: plan's start-up stays without the ledger;
# tests/test_speed.py holds the two equal).
LLAMACPP_BATCH_TOKENS, LLAMACPP_UBATCH_TOKENS = 2048, 512
# the backends whose llama.cpp pipelines ubatches over layer-split cards (async compute and events: CUDA, and
# ROCm through the same HIP backend; src/llama-context.cpp, the pipeline_parallel condition). Not Vulkan: its
# graph_compute became async in PR #17158 (2025-11), but no source here shows its events, nor a pipelined prompt
PIPELINED_BACKENDS = ("cuda", "rocm")


# llama.cpp's attention without flash attention moves prefill.UNFUSED_SCORE_TRAFFIC bytes a score (src/llama-graph.cpp,
# build_attn_mha: the breakdown is in estimate/prefill.py). The cache cells in view are padded to 32 without flash
# attention (256 with it).
UNFUSED_KV_PAD = 32


def score_matrix_bytes(plan: Plan, ubatch_tokens: int = LLAMACPP_UBATCH_TOKENS, model: ModelSpec | None = None,
                       pad: int = UNFUSED_KV_PAD, traffic: int = UNFUSED_SCORE_TRAFFIC) -> float:
    """Bytes llama.cpp's unfused attention moves for the plan's prompt: per attention layer, heads x the sum over
    ubatches of its tokens x the cells in view (the tokens so far, padded; a sliding window's layers see at most
    the window plus the ubatch) x UNFUSED_SCORE_TRAFFIC; a tensor-parallel card holds its share of the heads. By hand:
    LLaMA 3 8B (32 layers x 32 heads), 4,096 tokens in ubatches of 512: 512 x 512 x (1 + ... + 8) = 9,437,184
    scores a head and layer, x 1,024 x 20 B = 193 GB. Another runtime's unfused attention: the `model` it runs, its
    chunks, the cells' padding and the bytes moved a score (runtime_model.Departure)."""
    m, prompt = model or plan.model, plan.prefill.prompt_tokens
    tp = plan.comm.tp if plan.comm else 1
    total = 0.0
    for g in m.layer_groups:
        mix = g.mixer
        heads = getattr(mix, "num_attention_heads", None) if mix is not None else None
        if not heads:
            continue
        window = getattr(mix, "sliding_window", None)
        scores, done = 0, 0
        while done < prompt:
            u = min(ubatch_tokens, prompt - done)
            seen = done + u if window is None else min(done + u, window + u)
            scores += u * -(-seen // pad) * pad
            done += u
        total += g.count * max(1, heads // tp) * scores
    return total * traffic


def prompt_score_bytes(plan: Plan, runtime: str | None, flash_attn: bool, ubatch_tokens: int) -> float:
    """The score traffic of the plan's prompt where its attention is unfused: llama.cpp without flash attention, or
    a runtime that runs the model unfused (runtime_model.Departure); 0 where attention is fused."""
    if runtime == "llamacpp":
        return 0.0 if flash_attn else score_matrix_bytes(plan, ubatch_tokens)
    d = departure(runtime, plan.model) if runtime else None
    if d is None or not d.score_traffic_bytes:
        return 0.0
    return score_matrix_bytes(plan, d.prompt_chunk_tokens, run_model(plan.model, d), 1, d.score_traffic_bytes)


def prefill_inputs(plan: Plan, runtime: str | None = None, flash_attn: bool = True,
                   ubatch_tokens: int = LLAMACPP_UBATCH_TOKENS, marlin: bool = False,
                   be: str | None = None) -> PrefillInputs:
    """The plan's prompt as the step-time model costs it under `runtime`; `flash_attn` False: llama.cpp's
    unfused attention (score_matrix_bytes); `ubatch_tokens`: llama.cpp's -ub (at most its n_batch); `marlin` and
    `be` as in step_inputs."""
    ub = max(1, min(ubatch_tokens, LLAMACPP_BATCH_TOKENS))
    marlin = asked_marlin(plan, marlin)
    layers, _ = _layers(plan)
    collectives, link = _link(plan)
    pre = plan.prefill
    comm_s = plan.comm.time_s(1, plan.model.hidden_size, tokens=pre.prompt_tokens) if plan.comm else 0.0
    peak, peak_name = matmul_rate(plan, runtime, marlin, be)
    stages = plan.comm.pp if plan.comm else 1
    piped = runtime == "llamacpp" and stages > 1 and backend(plan.gpu, be) in PIPELINED_BACKENDS
    return PrefillInputs(
        prompt_tokens=pre.prompt_tokens, flops=pre.flops, weight_bytes=pre.bytes,
        side_bytes=side_bytes(plan, pre.bytes, pre.prompt_tokens, runtime, marlin),
        bandwidth_bytes_per_s=plan.gpu.bandwidth_bytes_per_s, peak_flop_per_s=peak, layers=layers,
        collectives=collectives, link=link, comm_time_s=comm_s, format_class=kernel_class(plan, runtime, marlin),
        expert_flops=2.0 * pre.prompt_tokens * expert_params_per_token(plan.card_model or plan.model),
        # each ubatch a forward (a -ub above n_batch's default comes with -b raised: llama.cpp clamps ub to b)
        expert_read_bytes=prompt_expert_bytes(plan, ubatch_tokens if runtime == "llamacpp" else pre.prompt_tokens),
        stages=stages, batch_tokens=LLAMACPP_BATCH_TOKENS if piped else 0,
        ubatch_tokens=ub if piped else 0,
        score_bytes=prompt_score_bytes(plan, runtime, flash_attn, ub),
        serving=runtime in SERVING_RUNTIMES, consumer=geforce(plan.gpu), peak_name=peak_name,
        attention_flops=pre.attention_flops, attention_flop_per_s=attention_rate(plan, runtime, peak))


@dataclass(frozen=True)
class ExpectedResult:
    """An expected figure, or the one-line reason there is none."""

    runtime: str
    runtime_why: str
    expected: Expected | None
    reason: str | None = None
    backend: str | None = None  # the backend the figure is (or would be) for: the one asked for, else the card's own


def expect(plan: Plan, runtimes: dict[str, RuntimeSpec], runtime: str | None = None,
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
    spec = runtimes.get(rid)
    elsewhere = not_on(rid, plan.gpu, be)
    if elsewhere:
        return ExpectedResult(rid, why, None, elsewhere, be if be != "vulkan" or rid in VULKAN_RUNTIMES else None)
    if plan.fmt.id.startswith(("gguf-", "ggml-")) and rid in NO_GGUF:
        return ExpectedResult(rid, why, None, f"{RUNTIME_NAMES[rid]} does not load GGUF files ({plan.fmt.id}); "
                                              "pick --runtime llamacpp (or a safetensors format: --quant)", be)
    if rid in ("llamacpp", "mlx") and not is_ternary(plan.fmt.id):  # a format its files cannot hold (fp8, nvfp4)
        from llmsize.estimate.quant import runtime_load_refusal

        refused = runtime_load_refusal(rid, plan.fmt.id)
        if refused:
            return ExpectedResult(rid, why, None, f"{refused}; pick a {'GGUF' if rid == 'llamacpp' else 'MLX'} "
                                                  "--quant, or another --runtime", be)
    if is_ternary(plan.fmt.id) and not (rid == "llamacpp" and plan.fmt.mix):
        return ExpectedResult(rid, why, None, f"{RUNTIME_NAMES[rid]} does not run {plan.fmt.id} weights; "
                                              f"{TERNARY_RUNS}", be)
    if rid == "llamacpp" and intel_vulkan(plan.gpu, be) and calibration is None:
        return ExpectedResult(rid, why, None, INTEL_VULKAN_REASON, be)
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
    if cls not in c.fitted_classes:
        notes += (f"no {RUNTIME_NAMES[rid]} measurement of {plan.fmt.id}-class weights on this backend: its "
                  f"weight-streaming fraction is the group's default, that of 16-bit weights where measured "
                  f"({c.eta_weights_default:.2f})",)
    ollama = "ollama" in ((runtime or "").lower(), engine)
    unfused = rid == "llamacpp" and (flash_attn == "off" or (flash_attn is None and ollama))
    pre = prefill_inputs(plan, rid, flash_attn=not unfused, ubatch_tokens=ubatch_tokens, be=gpu_backend)
    pre, note = calibrated_prompt(pre, plan, c, calibration)
    notes += (note,) if note else ()
    if pre.consumer and c.prefill_consumer_factor != 1.0 and not prefill_missing(pre, c):
        notes += (f"a GeForce card: its prompt's matmuls at {c.prefill_consumer_factor:g}x {RUNTIME_NAMES[rid]}'s "
                  f"fraction of the peak on datacenter and workstation cards, {prefill_fraction(pre, c):.2f} of "
                  f"its rated {pre.peak_name} peak (GeForce cards run above the boost clock it is rated at)",)
    if pre.score_bytes:
        cause = (f"flash attention off ({'asked for' if flash_attn == 'off' else 'Ollama default'})" if unfused
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
    if c.moe_basis and _layers(plan)[1]:
        notes += (c.moe_basis,)
    if rid == "sglang" and has_recurrent_layers(plan.model) and c.t_step_v0_s:
        first, last = map(release_words, no_buffer_releases(plan.model))
        notes += (OLD_SGLANG_HYBRID_NOTE.format(first=first, last=last, wait_ms=c.t_step_v0_s * 1e3),)
    if rid == "llamacpp" and has_recurrent_layers(plan.model) and not c.t_recurrent_layer_s and "rocm" in spec.backends:
        notes += (LLAMACPP_RECURRENT_DECODE_NOTE.format(
            backend=BACKEND_NAMES.get(be, be), rocm_us=spec.backends["rocm"].t_recurrent_layer_s * 1e6),)
    if not plan.budget.weights_fit:
        notes += (NOT_FIT_NOTE,)
    e = expected_speed(step_inputs(plan, plan.decode_1, rid, be=gpu_backend),
                       step_inputs(plan, plan.decode_b, rid, be=gpu_backend),
                       pre, c, plan.decode_ceiling_tok_s, calibration, notes, plan.decode_b.tok_s)
    if has_recurrent_layers(plan.model):
        e = with_recurrent_prefill_band(e, rid, be, pre)
    if plan.speculative is not None:
        e = with_speculation(e, plan, rid, c, calibration.factor if calibration else 1.0)
    return ExpectedResult(rid, why, e, None, be)


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
    runtimes = {r.id: r for r in cat.runtimes.all()}
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
