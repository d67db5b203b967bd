"""The runtime and backend a plan runs under: runtime names and aliases resolved, the card's backend (CUDA, ROCm,
Metal, Vulkan), which engines run on which cards (their own documentation's lists), the refusals that follow, and
the runtime's fitted constants picked from runtimes/*.yaml for the card's backend."""

from __future__ import annotations

from llmsize.catalog.schema import GpuSpec, RuntimeSpec, SpeedGroup
from llmsize.errors import InvalidValueError
from llmsize.estimate.kv import mla_mixers
from llmsize.estimate.speed import ALIAS_NOTE, BACKEND_OF_VENDOR, RUNTIME_ALIASES, RUNTIMES, Constants

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
    from llmsize.errors import not_one_of

    raise InvalidValueError(f"--runtime {not_one_of(name, list(RUNTIMES) + ['ollama', 'lmstudio'])}.",
                            "Ollama and LM Studio run llama.cpp: --runtime llamacpp.")


# the KV cache dtype each runtime keeps by default (others: bf16): llama.cpp's f16 (common/common.h, cache_type_k and
# cache_type_v GGML_TYPE_F16); mlx-lm's cache in the dtype of the keys, float16 as mlx_lm.convert writes weights
RUNTIME_KV_DTYPE = {"llamacpp": "fp16", "ollama": "fp16", "lmstudio": "fp16", "mlx": "fp16"}


# families whose checkpoints the serving engines run with an FP8 cache by default: DeepSeek-V4 (vLLM's recipe's
# base_args --kv-cache-dtype fp8, vllm-project/recipes models/deepseek-ai/DeepSeek-V4-Flash.yaml @8959cf64; SGLang's
# DeepSeek-V4 pools store FP8 rows of 584 B, sgl-project/sglang#37138)
FP8_CACHE_FAMILIES = {"deepseek_v4": ("vllm", "sglang")}


def runtime_kv_dtype(runtime: str, model=None, fmt_id: str | None = None, gpu: GpuSpec | None = None) -> str:
    """The KV cache dtype `runtime` keeps unless told otherwise (for `model`'s family, or its checkpoint, where it
    differs). A checkpoint that declares an FP8 KV cache (release.kv_cache) gets one by default from SGLang
    (mem_cache/kv_cache_dtype.py configure_kv_cache_dtype: 'auto' takes quant_config.kv_cache_quant_algo, a
    ModelOpt kv_cache_scheme read as it) and, for a ModelOpt checkpoint, from vLLM (0.14 on:
    utils/torch_utils.py resolve_kv_cache_dtype_string, 'auto' resolved from the ModelOpt config); `fmt_id`: the
    weights planned, where another format than the release's is another checkpoint, without that scheme. SGLang
    keeps a DeepSeek sparse-attention (DSA) model's cache in FP8 on a card of compute capability 10 or more
    (arg_groups/overrides.py _dsa_kv_cache_dtype_default: 'auto' is fp8_e4m3 there, bfloat16 below), `gpu`."""
    if model is not None and runtime in FP8_CACHE_FAMILIES.get(model.family, ()):
        return "fp8"
    if runtime == "sglang" and model is not None and gpu is not None and gpu.vendor == "NVIDIA" \
            and int((gpu.compute_capability or "0.0").split(".")[0]) >= 10 and any(
                m.indexer is not None for m in mla_mixers(model)):
        return "fp8"
    rel = model.release if model is not None else None
    if rel is not None and rel.kv_cache == "fp8" and fmt_id in (None, rel.quant) and (
            runtime == "sglang" or (runtime == "vllm" and rel.kv_cache_from == "modelopt")):
        return "fp8"
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


def check_backend(asked: str | None, runtime: str | None, plan=None, fmt_id: str | None = None,
                  gpu: GpuSpec | None = None) -> None:
    """Refuse --backend `asked` under --runtime `runtime` (None: the default) where it cannot run: Vulkan under a
    runtime without one, or under the default runtime of `fmt_id` weights on NVIDIA and AMD cards (vLLM for
    safetensors formats); with `plan` (an estimate.plan.Plan: one card), any backend the plan's runtime does not
    run there; with `gpu` alone (a server's card, its runtime unknown), any backend llama.cpp, Vulkan's runtime,
    does not run there."""
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
        gpu, rid = plan.gpu, rid or default_runtime(plan.fmt.id, plan.gpu, gguf_exact(plan.exact))[0]
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
    return architecture_refusal(rid, gpu)


def gguf_exact(exact) -> bool:
    """Whether a checkpoint's exact bytes are a GGUF file's (its tensor infos gave them)."""
    return getattr(exact, "source", "") == "GGUF tensor infos"


def is_gguf(fmt, exact=None) -> bool:
    """Whether a plan's weights are a GGUF file's: a GGUF file type (gguf-*, its mix of types) or a .gguf read."""
    return fmt.id.startswith("gguf-") or bool(fmt.mix) or gguf_exact(exact)


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
        t_shared_expert_layer_s=g.t_shared_expert_layer_s,
        moe_basis=g.own_moe or "",
        eta_host=spec.host.eta_bandwidth if spec.host else 1.0,
        host_band_low=spec.host.band[0] if spec.host else 1.0, host_band_high=spec.host.band[1] if spec.host else 1.0,
        host_basis=(f"{spec.host.eta_bandwidth:.2f} of the host memory's peak, fitted on {spec.host.rows} published "
                    f"CPU-only llama.cpp runs ({len(spec.host.sources)} sources) whose memory is stated; held-out "
                    f"median error {spec.host.held_out.median_abs_error:.0%}") if spec.host else "")


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


# llama.cpp's Vulkan group is fitted on NVIDIA and AMD cards; Intel's Arc cards run the same build through Intel's own
# drivers, and the dataset's runs there (A770s and a B580, builds of 2024-2026) decoded from far below to at what the
# group predicts, by driver: llama.cpp PR #14001 ran one build on Windows and on Mesa (A770 96.8 against 39.0 t/s,
# B580 127-130 against 42)
INTEL_VULKAN_WHY = (
    "llama.cpp's Vulkan group is fitted on NVIDIA and AMD cards; published Vulkan runs on Intel Arc A770s and a B580 "
    "(builds of 2024-2026), outside the fit, decoded at 0.26-1.01 of its figure, and Intel's Windows driver ran one "
    "build 2.5-3x faster than Mesa's on Linux: too few runs to fit Intel's own")


INTEL_VULKAN_REASON = INTEL_VULKAN_WHY + "; pass --calibrate FILE from your own llama-bench run"


def intel_vulkan(gpu: GpuSpec, be: str | None) -> bool:
    """Whether llama.cpp runs on an Intel card through Vulkan (INTEL_VULKAN_REASON)."""
    return be == "vulkan" and gpu.vendor in VULKAN_VENDORS


# Which cards the serving engines run on, as their own documentation states it: the NVIDIA compute capability
# each needs at least, the AMD LLVM targets each builds its kernels for. An engine or vendor the tables leave out is
# not refused (nothing stated here); a card whose catalog entry lacks the figure is not refused either.
#
# vLLM: docs.vllm.ai/en/latest/getting_started/installation/gpu/, "GPU: compute capability 7.5 or higher (e.g., T4,
# RTX20xx, A100, L4, H100, B200, ...)" (7.0 up to v0.14), and on ROCm "MI200s (gfx90a), MI300 (gfx942), MI350
# (gfx950), Radeon RX 7900 series (gfx1100/1101), Radeon RX 9000 series (gfx1200/1201), Ryzen AI MAX / AI 300 Series
# (gfx1151/1150)" (docs.vllm.ai/en/v0.14.0/getting_started/installation/gpu/).
# TensorRT-LLM: its support matrix lists Ampere (SM80, SM86), Ada Lovelace (SM89) and Hopper (SM90)
# (nvidia.github.io/TensorRT-LLM/0.18.2/reference/support-matrix.html), Blackwell since ("Supported Hardware": Blackwell,
# Hopper, Ada Lovelace, Ampere; nvidia.github.io/TensorRT-LLM/supported-hardware.html): compute capability 8.0 or higher.
# gpt-fast: torch.compile's Inductor backend generates Triton kernels, and PyTorch refuses older cards: "Triton only
# supports devices of CUDA Capability >= 7.0" (torch/_dynamo/exc.py, GPUTooOldForTriton; torch/_inductor/scheduler.py).
# SGLang on AMD: "SGLang officially supports only CDNA Instinct parts (gfx942 / gfx950) plus gfx1250. RDNA3 is absent
# from the docs and is rejected outright by the kernel build" (pypi.org/project/sglang-radeon-rdna3, the AMD-AIM
# package that patches that allowlist from outside); docs.sglang.io/docs/hardware-platforms/amd_gpu names MI300X.
CUDA_MIN_COMPUTE_CAPABILITY = {"vllm": (7, 5), "trtllm": (8, 0), "gpt-fast": (7, 0)}
AMD_LLVM_TARGETS = {
    "vllm": ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1200", "gfx1201", "gfx1150", "gfx1151"),
    "sglang": ("gfx942", "gfx950", "gfx1250"),
}


def architecture_refusal(runtime: str, gpu: GpuSpec) -> str | None:
    """Why `runtime` does not run on `gpu`'s architecture (its documentation's list), None where it does or where
    nothing is stated."""
    name = RUNTIME_NAMES.get(runtime, runtime)
    need = CUDA_MIN_COMPUTE_CAPABILITY.get(runtime)
    if gpu.vendor == "NVIDIA" and need and gpu.compute_capability:
        have = tuple(int(x) for x in gpu.compute_capability.split("."))
        if have < need:
            others = [r for r in ("vllm", "llamacpp") if r != runtime and architecture_refusal(r, gpu) is None]
            return (f"{name} needs CUDA compute capability {need[0]}.{need[1]} or higher, and the {gpu.name} has "
                    f"{gpu.compute_capability}; pick --runtime {' or '.join(others)}")
    targets = AMD_LLVM_TARGETS.get(runtime)
    if gpu.vendor == "AMD" and targets and gpu.llvm_target and gpu.llvm_target not in targets:
        return (f"{name} builds its ROCm kernels for {', '.join(targets)}, and the {gpu.name} is "
                f"{gpu.llvm_target}; pick --runtime llamacpp")
    return None
