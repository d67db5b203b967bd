"""What a vLLM release does with its memory: which ledger it follows (V0, V1 before 0.21, V1), its default share of
the card (gpu_memory_utilization, 0.34's extensible KV cache), its batch defaults, block size and CUDA-graph charge, and
the tokens in flight its sliding-window groups reserve. Read from vLLM's released sources; engines.py's ledger uses
them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmsize.catalog.schema import STATE_KINDS, GpuSpec, ModelSpec
from llmsize.errors import InvalidValueError, shown
from llmsize.estimate.kv import mixers_of, mla_mixers
from llmsize.units import GiB

DEFAULT_BLOCK_SIZE = 16  # vLLM and TensorRT-LLM tokens per block


# vLLM's gpu_memory_utilization when not given (vllm/config/cache.py): 0.9, 0.92 from 0.20.0; from 0.34.0 the
# extensible KV cache on CUDA and ROCm (EXTENSIBLE_FROM)
VLLM_UTIL_BEFORE_0_20, VLLM_UTIL = 0.90, 0.92
# vLLM 0.34.0's extensible KV cache (vllm/config/cache.py enable_extensible_kv_cache, on by default on CUDA and ROCm;
# v1/worker/extensible_kv_cache.py measure_kv_cache_bytes): sized after warmup and CUDA-graph capture from the
# memory then free, utilization 1.0 unless given, less a margin of max(1 GiB, 3 GiB on ROCm; 0.75 x the activation
# peak) and the activation peak itself:
#     kv = min(total x util - weights - graphs, total - non-torch - weights - graphs - margin) - activation peak
# the memory held before vLLM's first snapshot (CUDA context, communicators) now off the cache. Derived from the
# source, not yet checked against a log of 0.34.
EXTENSIBLE_FROM = (0, 34, 0)
EXTENSIBLE_MARGIN_FRACTION = 0.75
EXTENSIBLE_MARGIN_FLOOR = {False: 1 * GiB, True: 3 * GiB}  # by whether the card is AMD's (ROCm)


@dataclass(frozen=True)
class VllmProfile:
    """Which vLLM ledger a release follows. V1 is the default engine since 0.8.0 and the only one since 0.11.
    CUDA-graph memory is profiled before the cache is sized from 0.20 (vllm_charges_graphs; its log says "default
    since v0.21.0"), and from 0.21 "GPU KV cache size" is
    int(max_concurrency x max_model_len) (v1/core/kv_cache_utils.py _report_kv_cache_config, quoted in
    vllm-project/vllm#51041) where earlier releases logged num_blocks // groups x block_size: for Gemma 4 31B on
    an A100 80GB the same ~50 GB pool read ~55k tokens in 0.20.0 and ~525k in 0.21.0 (vllm-project/vllm#43308)."""

    key: str  # v0, v1-0.20 or v1
    label: str
    tokens_from_concurrency: bool = False  # CUDA graphs are charged by release (vllm_charges_graphs)

    @property
    def v1(self) -> bool:
        return self.key != "v0"


VLLM_V0 = VllmProfile("v0", "V0 worker ledger (vLLM < 0.8; 'Memory profiling results' / '# GPU blocks')")
VLLM_V1_OLD = VllmProfile("v1-0.20", "V1 before 0.21 (hybrid KV-cache manager; CUDA graphs charged from 0.20; 'GPU "
                          "KV cache size' = num_blocks // groups x block_size)")
VLLM_V1 = VllmProfile("v1", "V1 >= 0.21 (hybrid KV-cache manager; CUDA graphs profiled; 'GPU KV cache size' = "
                      "max concurrency x max_model_len)", tokens_from_concurrency=True)


def vllm_profile(version: str) -> VllmProfile:
    """`v0`, `v1` (the current ledger), `v1-0.20`, or the release a user runs (`0.6.4`, `0.20.0`, `0.21`)."""
    v = version.strip().lower().removeprefix("vllm").strip("=- ")
    named = {p.key: p for p in (VLLM_V0, VLLM_V1_OLD, VLLM_V1)} | {"latest": VLLM_V1}
    if v in named:
        return named[v]
    # a release: major.minor, then a patch or a build's suffix (0.20.0, 0.6.3.post1, 0.10.1+cu128); a bare number
    # (`v2`, `1`) is neither a ledger name nor a release
    m = re.fullmatch(r"v?([0-9]{1,6})\.([0-9]{1,6})(?:[.+\-a-z][0-9a-z.+\-]*)?", v)
    if m is None:
        raise InvalidValueError(f"--engine-version `{shown(version)}` is not a vLLM version.",
                                "Use v1, v0, or the release you run, e.g. 0.20.0.")
    major, minor = int(m[1]), int(m[2])
    if (major, minor) < (0, 8):
        return VLLM_V0
    return VLLM_V1_OLD if (major, minor) < (0, 21) else VLLM_V1


def vllm_release(version: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a release number such as `0.6.4`, None for a ledger name (v0, v1, v1-0.20)."""
    v = version.strip().lower().removeprefix("vllm").strip("=- ").removeprefix("v")
    # major.minor[.patch], then a build's or pre-release's suffix (0.26.0+cu128, 0.33.0rc2, 0.6.3.post1: read as the
    # release it names); ASCII digits, a few (str.isdigit takes superscripts, which int() refuses)
    m = re.fullmatch(r"([0-9]{1,6})\.([0-9]{1,6})(?:\.([0-9]{1,6}))?(?:[.+\-a-z][0-9a-z.+\-]*)?", v)
    if m is None:
        return None
    return int(m[1]), int(m[2]), int(m[3] or 0)


# The newest vLLM release whose sources the ledger follows; `--engine-version v1` (the default) is read as it.
VLLM_LATEST_READ = (0, 34, 0)
# releases that ledger names stand for, where a rule depends on the release
_NAMED_RELEASE = {"v1": VLLM_LATEST_READ, "v1-0.20": (0, 20, 0), "v0": (0, 7, 3)}


def vllm_block_size(model: ModelSpec, gpu: GpuSpec, release: tuple[int, int, int]) -> tuple[int, str]:
    """vLLM's block when --block-size is not given, and why: CacheConfig.DEFAULT_BLOCK_SIZE (16; 64 from 0.34.0) as
    the attention backend takes it (platforms/interface.py update_block_size_for_backend): ROCm's default
    ROCM_ATTN keeps 16 for attention other than MLA; FlashInfer-MLA, the MLA default on data-centre Blackwell
    (compute capability 10.x), takes 32 or 64, so 32 where the default was 16."""
    mla = mla_mixers(model)
    if release >= (0, 34, 0):
        if gpu.vendor == "AMD" and not mla:
            return 16, "ROCm's ROCM_ATTN backend's block (vLLM >= 0.34 defaults others to 64)"
        return 64, "vLLM >= 0.34's default block"
    if mla and gpu.vendor == "NVIDIA" and any(m.indexer is not None for m in mla):
        return 64, "the sparse MLA backends' block (FlashMLA-sparse, FlashAttention-MLA-sparse: [64]; vLLM < 0.34)"
    if mla and gpu.vendor == "NVIDIA" and (gpu.compute_capability or "").startswith("10."):
        return 32, "FlashInfer-MLA's smallest block (the MLA backend on Blackwell; vLLM < 0.34)"
    return DEFAULT_BLOCK_SIZE, "vLLM's default block (before 0.34)"


def vllm_charges_graphs(release: tuple[int, int, int], gpu: GpuSpec) -> bool:
    """vLLM profiles CUDA-graph memory before sizing the cache (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, on by
    default from 0.20.0, though the log says 0.21; on ROCm from 0.26.0, is_cuda_alike); from 0.34 the extensible
    cache measures the capture instead, charged the same way here."""
    return release >= (0, 20, 0) and (gpu.vendor != "AMD" or release >= (0, 26, 0))


def effective_release(version: str) -> tuple[int, int, int]:
    """The release a --engine-version stands for: itself, or for a ledger name the release it is read as (v1: the
    newest read, VLLM_LATEST_READ)."""
    release = vllm_release(version)
    return release if release is not None else _NAMED_RELEASE[vllm_profile(version).key]


# vLLM 0.22.0 on (engine/arg_utils.py, "Raising max_num_batched_tokens from %d to %d to accommodate '%s' input for
# prefix-LM model"): a multimodal model whose text model attends to an item's tokens both ways (is_mm_prefix_lm)
# cannot split an item over forwards, so a default batch below its largest item is raised to it. Gemma 4's largest
# is a video of 32 frames x (70 soft tokens + boi + eoi + 6 timestamp tokens) = 2,496 (models/gemma4_mm.py and
# gemma4_unified.py get_mm_max_tokens_per_item, _VIDEO_MAX_FRAMES, _VIDEO_MAX_SOFT_TOKENS; an image is 280; the
# same in 0.25.0 and 0.34.0): it applies on the small tier's 2,048 (A100, L40S, RTX cards) with `vllm serve`.
PREFIX_LM_FLOOR_FROM = (0, 22, 0)
GEMMA4_VIDEO_ITEM_TOKENS = 32 * (70 + 2 + 6)


def prefix_lm_floor(model: ModelSpec | None, release: tuple[int, int, int]) -> int | None:
    """The batch a default max_num_batched_tokens is raised to for `model` (its largest multimodal item), or None."""
    if model is None or not model.vision_prefix_lm or release < PREFIX_LM_FLOOR_FROM:
        return None
    return GEMMA4_VIDEO_ITEM_TOKENS


def v1_defaults(gpu: GpuSpec, total_bytes: int, offline: bool,
                release: tuple[int, int, int] = VLLM_LATEST_READ, model: ModelSpec | None = None) -> tuple[int, int]:
    """V1's max_num_batched_tokens and max_num_seqs when not given (EngineArgs.get_batch_defaults, pinned by
    vLLM's tests/engine/test_arg_utils.py test_defaults_with_usage_context): from 0.28.0 a card of >= 160 GiB
    (B200, B300, MI325X, MI355X) gets 16384 tokens for both the LLM class and `vllm serve`; other cards of >= 70 GiB
    but the A100 get 16384 tokens for the LLM class and 8192 for `vllm serve`, and 1024 sequences; the rest, A100
    80GB included, and from 0.33 the DGX Spark's GB10 (compute capability 12.1), get 8192 / 2048 tokens and 256
    sequences; `model`, a prefix-LM one's tokens at least its largest item (prefix_lm_floor)."""
    if total_bytes >= 160 * GiB and release >= (0, 28, 0):
        return 16384, 1024
    gb10 = gpu.compute_capability == "12.1" and release >= (0, 33, 0)  # DGX Spark: the small tier from 0.33
    big = total_bytes >= 70 * GiB and "a100" not in gpu.name.lower() and not gb10
    tokens, seqs = ((16384 if offline else 8192), 1024) if big else ((8192 if offline else 2048), 256)
    return max(tokens, prefix_lm_floor(model, release) or 0), seqs


# vLLM's in-flight reserve (vllm/config/vllm.py, 0.26.0 on: VllmConfig.max_in_flight_tokens =
# max_concurrent_batches x max_num_batched_tokens, PR #47728): a sliding-window group's request takes blocks for
# min(window - 1 + in-flight tokens, max_model_len) tokens (SlidingWindowSpec.max_admission_blocks_per_request), since
# out-of-window blocks are freed only once a batch is processed; before 0.26 the spec read max_num_batched_tokens.
# Async scheduling (the default since 0.14.0, PR #27614) keeps two batches in flight, pipeline stages one each and,
# with async scheduling, one more on the V2 model runner (max_concurrent_batches; 0.34 drops the runner test): the
# V2 runner is every model's default from 0.29, in 0.26-0.28 a dense model's without Mamba-like layers (and a few
# MoE architectures': DeepseekV2, Qwen2Moe, GraniteMoe, not told apart here), else the V1 runner's pp stages.
# Full-attention and state layers reserve nothing for it. vllm-project/vllm#49878 (Gemma 4 from 0.25.1 to 0.26.0:
# 45.79 GiB a request became 70.79 GiB) is this reserve.
ASYNC_RESERVE_FROM = (0, 26, 0)


def v1_runner_model(model: ModelSpec) -> bool:
    """A model vLLM 0.26-0.28 runs on its V1 model runner by default: a MoE or one with Mamba-like state layers."""
    return any((g.mlp is not None and g.mlp.kind == "moe") or (g.mixer is not None and g.mixer.kind in STATE_KINDS)
               for g in model.layer_groups)


def in_flight_tokens(batched: int, release: tuple[int, int, int], pp: int = 1, draft_model: bool = False,
                     v1_runner_before_0_29: bool = False) -> tuple[int, str]:
    """The tokens vLLM's sliding-window groups reserve a request beyond its window for, and the words that say why
    (`v1_runner_before_0_29`: a MoE or Mamba-hybrid model, which 0.26-0.28 run on the V1 model runner)."""
    if release < ASYNC_RESERVE_FROM:
        return batched, f"max_num_batched_tokens {batched:,}: one batch, vLLM before 0.26"
    async_on = not (draft_model and release < (0, 28, 0))
    v2_runner = release >= (0, 29, 0) or not v1_runner_before_0_29
    batches = pp + 1 if async_on and (pp == 1 or v2_runner) else pp
    if not async_on:
        why = (f"{pp} pipeline stages' batches" if pp > 1 else "one batch") + \
            ": a draft model turns async scheduling off before 0.28"
    elif pp == 1:
        why = "async scheduling's two batches"
    elif batches > pp:
        why = f"{pp} pipeline stages' batches and async scheduling's one more"
    else:
        why = f"{pp} pipeline stages' batches: the V1 model runner adds none for async scheduling"
    return batches * batched, f"{batches} x max_num_batched_tokens {batched:,}: {why}, vLLM >= 0.26"


# What one request reserves in a Mamba-like group (MambaSpec.max_memory_usage_bytes over its page, counted by the
# logged concurrency), read release by release from vLLM's wheels (v1/kv_cache_interface.py, engine/arg_utils.py,
# model_executor/models/config.py MambaModelConfig): one state page before 0.15.0, and with speculative decoding one
# more for each drafted token from 0.15.0 (num_speculative_blocks = num_speculative_tokens). Prefix caching is off by
# default for hybrids before 0.28.0 ("none": 1 + S); from 0.28.0 it is on, in mamba_cache_mode "align": 2 + S (the
# running state and the last computed block's). From 0.32.0 a Mamba2 mixer keeps a prefill checkpoint page too
# (layers/mamba/mamba_mixer2.py: num_prefill_checkpoint_blocks=1), and from 0.33.0 so does a Gated DeltaNet layer whose
# prefill runs FlashInfer's kernel (layers/mamba/gdn/qwen_gdn_linear_attn.py: "auto" picks it on Hopper, and on
# Blackwell with 128-wide keys under CUDA 13, the runtime of the 0.33 and 0.34 wheels): 3 + S. Kimi Linear's KDA
# keeps one only on FlashKDA's prefill (0.34 models/kimi_k3/nvidia/kda.py: a bounded gate, gate_lower_bound, which
# Kimi-Linear-48B-A3B's config does not set): 2 + S.
MAMBA_ALIGN_FROM = (0, 28, 0)
MAMBA_SPEC_BLOCKS_FROM = (0, 15, 0)


def _gdn_flashinfer(model: ModelSpec, gpu: GpuSpec) -> bool:
    """A Gated DeltaNet model's prefill on FlashInfer's kernel (vLLM >= 0.33 _resolve_gdn_prefill_backend, "auto"):
    CUDA, compute capability 9.0, or 10.x / 12.x with 128-wide keys."""
    if gpu.vendor != "NVIDIA" or not gpu.compute_capability:
        return False
    gdn = [m for m in mixers_of(model, ("linear",)) if m.variant == "gated_deltanet"]
    major = gpu.compute_capability.split(".")[0]
    return bool(gdn) and (gpu.compute_capability == "9.0"
                          or (major in ("10", "12") and all(m.key_head_dim == 128 for m in gdn)))


# FlashInfer's Gated DeltaNet prefill checkpoints every 64 tokens (v1/attention/backends/gdn_attn.py
# FLASHINFER_GDN_CHECKPOINT_ALIGNMENT, 0.33 on); align mode's attention block is a multiple of it (the kernel's
# alignment lcm'ed with the checkpoint grid): 64-token steps where 0.33's default block is 16.
FLASHINFER_GDN_CHECKPOINT_TOKENS = 64


def mamba_checkpoint_align(model: ModelSpec, gpu: GpuSpec, release: tuple[int, int, int] | None) -> int:
    """The tokens a hybrid's attention block aligns to for its mamba prefill checkpoints (1: none)."""
    if release is None or release < (0, 33, 0) or not _gdn_flashinfer(model, gpu):
        return 1
    return FLASHINFER_GDN_CHECKPOINT_TOKENS


def mamba_state_blocks(model: ModelSpec, gpu: GpuSpec, release: tuple[int, int, int], spec_tokens: int = 0
                       ) -> tuple[int, str]:
    """State pages one request reserves in each Mamba-like group under `release`'s defaults, and why."""
    s = spec_tokens if release >= MAMBA_SPEC_BLOCKS_FROM else 0
    spec = f" and {s} for the drafted tokens" if s else ""
    if release < MAMBA_ALIGN_FROM:
        return 1 + s, f"{1 + s} (its state{spec}; prefix caching is off for hybrids by default before 0.28)"
    if release >= (0, 32, 0) and mixers_of(model, ("ssm",)):
        return 3 + s, (f"{3 + s} (prefix caching's align mode, on by default from 0.28: the state, the last block's, "
                       f"and from 0.32 a Mamba2 mixer's prefill checkpoint{spec})")
    if release >= (0, 33, 0) and _gdn_flashinfer(model, gpu):
        return 3 + s, (f"{3 + s} (prefix caching's align mode, on by default from 0.28: the state, the last block's, "
                       f"and from 0.33 a prefill checkpoint for FlashInfer's Gated DeltaNet kernel{spec})")
    return 2 + s, (f"{2 + s} (prefix caching's align mode, on by default from 0.28: the state and the last "
                   f"block's{spec})")
