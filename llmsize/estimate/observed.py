"""A published measurement as the plan of its run: the same bytes, FLOPs and links `plan` would compute for it,
so the fit (benchmarks/fit_speed.py), the tests and `--calibrate` weigh a row exactly as `plan` weighs a user's
configuration. A row whose card, model or format the catalog does not hold is skipped, with the reason."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property

from llmsize.catalog.measurement import Row, format_id, printed_bytes
from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.errors import LlmsizeError
from llmsize.estimate.expected import vulkan_bf16_experts
from llmsize.estimate.kernels import MATMUL_PRECISION, fp32_stands_in
from llmsize.estimate.plan import Plan, PlanInputs, make_plan
from llmsize.estimate.quant import KV_DTYPE_ALIASES, KV_DTYPE_BYTES, quant_format
from llmsize.estimate.runtime_model import held_model
from llmsize.estimate.runtimes import (
    CDNA3_TARGETS,
    backend,
    intel_vulkan,
    printed_backend,
    runtime_kv_dtype,
    stream_family,
)
from llmsize.estimate.speed import PrefillInputs, StepInputs, at_file_bytes, ceiling_step_s, format_class
from llmsize.estimate.step_inputs import (
    LLAMACPP_UBATCH_TOKENS,
    has_delta_net_layers,
    has_mla,
    has_recurrent_layers,
    prefill_inputs,
    sglang_release,
    step_inputs,
    without_overlap,
)


@dataclass(frozen=True)
class Observed:
    row: Row
    runtime: str
    source_key: str  # the unit a held-out fit leaves out: the row's source, or its own post where it links one
    plan: Plan
    step: StepInputs | None  # decode rows
    prefill: PrefillInputs | None  # prefill rows
    measured_s: float  # seconds per decode step, or per prompt
    ceiling_tok_s: float | None  # the plan's bandwidth ceiling per sequence at the row's batch (decode rows)

    # read once (the fit asks each row's backend millions of times); cached_property writes the instance's
    # __dict__, which a frozen dataclass allows, and replace() makes a new instance that reads its own
    @cached_property
    def backend(self) -> str | None:
        """The backend the row ran on: Vulkan where it says so, else its card's own."""
        return row_backend(self.row, self.plan.gpu)

    @cached_property
    def family(self) -> str | None:
        """Its backend, or on AMD cards under ROCm the GPU family whose bytes a pooled fit streams apart (RDNA)."""
        return stream_family(self.plan.gpu, self.backend)


def asked_backend(row: Row) -> str | None:
    """"vulkan" where the row's backend column says Vulkan (llama.cpp's ggml-vulkan); None: the card's own."""
    return printed_backend(row.backend)[0]


def row_backend(row: Row, gpu: GpuSpec) -> str | None:
    return backend(gpu, asked_backend(row))


# A decode rate over the whole request counts the prompt's prefill too. Up to this prompt length that is well
# under 1% of the request; beyond it the row is not a decode figure. Even a 6,144-token prompt is too long: for a
# 7B in BF16 on an A100 its prefill (~0.3-0.6 s in a ~25 s request) adds 1-2% to every token, as much as the
# cache read at that depth, so a fit would read it as a slow cache.
INCLUDED_PREFILL_MAX_TOKENS = 1024
# vLLM's V0 engine (before 0.8) replays CUDA graphs for contexts up to max_seq_len_to_capture, 8,192 by default, and
# decodes longer ones eagerly ("When a sequence has context length larger than this, we fall back to eager mode",
# vllm/engine/arg_utils.py; `max_seq_len_to_capture: int = 8192` in vllm 0.7.2's LLM): such a row times an eager
# step, which the model, like --enforce-eager's, does not cost
V0_GRAPH_CONTEXT_MAX = 8192
BANDWIDTH_SPREAD_MAX = 0.06  # card_any_of: the most the candidates' bandwidths may differ, as a fraction


def card_of(row: Row, cat) -> GpuSpec | str:
    """The row's card, or why it cannot be used. A card the source leaves ambiguous (`card_any_of`: one chip sold
    with several GPU core counts, or an A100 80GB without its form factor) is used for decode only where every
    candidate is on the same backend and their bandwidths differ by at most BANDWIDTH_SPREAD_MAX, since a
    batch-1 step is bandwidth-bound. The fastest candidate stands for them, so the ceiling stays an upper bound
    whichever card it was (its compute floor is far below a batch-1 step's memory time). Prefill needs the
    compute rate, which the candidates do not share."""
    if row.card_id:
        return cat.gpu(row.card_id)
    cards = [cat.gpu(c) for c in row.card_any_of]
    bandwidths = [g.bandwidth_gb_s for g in cards]
    if len({g.vendor for g in cards}) > 1 or max(bandwidths) > min(bandwidths) * (1 + BANDWIDTH_SPREAD_MAX):
        return "card variant not stated, and its variants differ in bandwidth"
    if row.kind == "prefill":
        return "card variant not stated, and prefill depends on its compute rate"
    return max(cards, key=lambda g: (g.bandwidth_gb_s, g.dense_tflops.fp16 or 0.0))


# What a llama.cpp row says of flash attention: -fa 1 / fa=1 / "flash attention on", or the opposite.
_FA_ON = re.compile(r"(?:-fa|--flash-attn|\bfa)\s*[=: ]?\s*(?:1|on|true)\b|flash[- ]attention (?:on|enabled)"
                    r"|with flash attention", re.I)
_FA_OFF = re.compile(r"(?:-fa|--flash-attn|\bfa)\s*[=: ]?\s*(?:0|off|false)\b|without flash attention"
                     r"|flash[- ]attention off", re.I)
# llama.cpp turned flash attention on by default (auto) at build b6327, 2025-08-31 (PR #15434, flash_attn_type
# auto|on|off); before it llama-bench, llama-cli and llama-server ran without unless -fa was given (and before
# PR #5021, 2024-04-30, there was no flash attention at all).
FA_DEFAULT_BUILD, FA_DEFAULT_DATE = 6327, "2025-08-31"
_BUILD = re.compile(r"\((\d{3,5})\)|\bb(\d{4,5})\b")
_MONTHS = {m: i + 1 for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                           "september", "october", "november", "december"))}
_MONTH_YEAR = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s+(20\d\d)\b", re.I)


def llamacpp_flash_attn(row: Row, published: str | None = None) -> bool | None:
    """Whether a llama.cpp row ran with flash attention: as the row says, else the default of its build
    (`hash (NNNN)` or `bNNNN` in its version), else of its source's date or a month the row names ("snapshots in
    May 2024"); None where nothing tells."""
    text = _row_text(row)
    if _FA_ON.search(text):
        return True
    if _FA_OFF.search(text):
        return False
    b = _BUILD.search(row.runtime_version or "")
    if b:
        return int(b.group(1) or b.group(2)) >= FA_DEFAULT_BUILD
    date = published
    if date is None:
        my = _MONTH_YEAR.search(row.where or "")
        if my:
            date = f"{my.group(2)}-{_MONTHS[my.group(1).lower()]:02d}-01"
    return None if date is None else date >= FA_DEFAULT_DATE


def llamacpp_before(row: Row, published: str | None = None, build: int = FA_DEFAULT_BUILD,
                    date: str = FA_DEFAULT_DATE) -> bool | None:
    """Whether a llama.cpp row ran a build before `build` (its version's build number, else its source's date);
    None where nothing tells. Its decode rows before b6327 (2025-08-31, flash attention by default) are an older
    generation (engine_v0), a fitted cost a step for whatever changed between (among it the compute graph reused
    from token to token, PR #14482 of July 2025, and fused kernels): on Metal, 2026 sources ran 1.03-1.41x a
    prediction fitted on all rows and the 2023-24 ones 0.76-0.93x (benchmarks/RESULTS.md, 2026-12-03)."""
    b = _BUILD.search(row.runtime_version or "")
    if b:
        return int(b.group(1) or b.group(2)) < build
    return None if published is None else str(published) < date


# llama.cpp's Gated DeltaNet layers (Qwen3-Next, Qwen3.5/3.6) were first a graph of many small ops (PR #16095,
# 2025-11); PR #19375 (2026-02-05) rewrote that graph without its copies, 1.33x the decode of Qwen3-Next Q4_0 on an
# M2 Ultra against b7946, and the fused GATED_DELTA_NET op followed (PR #19504 and the backends' kernels). A decode
# row of a build up to b7946 (else of a source dated before the PR) ran a program plans do not predict: on Metal the
# PR's own M2 Ultra rows held out at 0.53 of a fit on later builds, and with them the fit that left out an M4 Max's
# 2026 rows priced a recurrent layer at 375 us and that M4 Max at 0.6x its speed (benchmarks/RESULTS.md, 2026-12-06).
GDN_GRAPH_BUILD, GDN_GRAPH_DATE = 7946, "2026-02-05"


def llamacpp_early_delta_net(row: Row, runtime: str, model: ModelSpec, published: str | None) -> bool:
    """Whether the row is llama.cpp's decode of a Gated DeltaNet hybrid from before PR #19375's graph."""
    if runtime != "llamacpp" or row.kind != "decode":
        return False
    if not has_delta_net_layers(model):
        return False
    return llamacpp_before(row, published, GDN_GRAPH_BUILD + 1, GDN_GRAPH_DATE) is True


_UBATCH = re.compile(r"(?:(?<![\w-])-ub|--ubatch-size|n_ubatch)['\"]?\s*[:=]?\s*(\d{1,9})(?!\d)")
_NBATCH = re.compile(r"(?:(?<![\w-])-b|--batch-size|n_batch)['\"]?\s*[:=]?\s*(\d{1,9})(?!\d)")


def row_ubatch_tokens(row: Row) -> int:
    """The tokens of a llama.cpp prompt's forward (its ubatch) in the row's run: -ub / n_ubatch as the row prints it
    (its `printed` columns first, then its text), at most its -b / n_batch where printed; else llama.cpp's default
    (step_inputs.LLAMACPP_UBATCH_TOKENS). Each forward streams the routed experts again
    (step_inputs.prompt_expert_bytes): pp2048 with -ub 2048 reads them once, with the default 512 four times."""
    printed = {k.lower(): v for k, v in (row.printed or {}).items()}

    def said(key: str, pattern: re.Pattern) -> int | None:
        if isinstance(printed.get(key), int):
            return printed[key]
        m = pattern.search(_row_text(row))
        return int(m.group(1)) if m else None

    ub = said("n_ubatch", _UBATCH) or LLAMACPP_UBATCH_TOKENS
    b = said("n_batch", _NBATCH)
    return max(1, min(ub, b) if b else ub)


def row_kv_dtype(row: Row, runtime: str, model=None, fmt_id: str | None = None, gpu=None) -> str | None:
    """The llmsize KV dtype of the cache a row's run kept: the runtime's default unless the row prints one (`auto` is
    the default; vLLM's fp8_e4m3 and fp8_e5m2, printed fp8/e4m3 too, are fp8 bytes); None where the printed one has
    no llmsize id (TQ3, int8_per_token_head)."""
    said = (row.kv_dtype or "auto").strip().lower().replace("/", "_")
    if said == "auto":
        return runtime_kv_dtype(runtime, model, fmt_id, gpu)
    said = KV_DTYPE_ALIASES.get(said, said)
    return said if said in KV_DTYPE_BYTES else None


SPECULATIVE = re.compile(r"specul", re.I)  # speculative decoding / sampling / speculation: not one token per step
EAGER = re.compile(r"--enforce-eager\b|enforce_eager\s*=\s*True", re.I)  # vLLM without CUDA graphs
_NEGATION = re.compile(r"\b(?:no|not|without|off|disabled)\b", re.I)


def says(text: str, mention: re.Pattern) -> bool:
    """Whether `text` says its run used what `mention` matches: a clause (between commas and semicolons) naming it
    and not negating it ("no speculative decoding", "speculative decoding not enabled", "rows with speculative
    decoding ... not recorded" negate; a parenthesis that does not name it is about something else: "EAGLE3 (NST not
    stated)" does not)."""
    for clause in re.split(r"[;,]", text):
        if not mention.search(clause):
            continue
        kept = re.sub(r"\([^()]*\)", lambda m: m.group(0) if mention.search(m.group(0)) else " ", clause)
        if not _NEGATION.search(kept):
            return True
    return False


def ran_marlin(row: Row) -> bool:
    """Whether the row says its weights went through Marlin (`--moe-backend marlin`, `GPTQ-Marlin`, ...)."""
    return "marlin" in _row_text(row).lower()


def _row_text(row: Row) -> str:
    """All a row says of its run: its test, where it was found, its excerpt and the figure as printed."""
    return " ".join([row.test or "", row.where or "", " | ".join(row.verbatim) if isinstance(row.verbatim, list)
                     else row.verbatim or "", str(row.printed or "")])


def old_tiles(row: Row, runtime: str) -> bool:
    """Whether the row ran an older generation's small-batch GEMMs, which padded the batch to wgmma's 64 rows on
    Hopper and datacenter Blackwell (expected.tile_rows): SGLang before 0.5. The dataset tells only 0.4.6.post1
    (Qwen's speed benchmark, May 2025) from 0.5.13.post1 (2026) on the same card, an H20, where the padding shows;
    the line is put at 0.5.0, the next minor release after 0.4.6: the data cannot place it more precisely."""
    if runtime != "sglang":
        return False
    r = sglang_release(row.runtime_version)
    return r is not None and r[:2] < (0, 5)


# vLLM PR #34709 (merged 2026-03-20; first in v0.19.0, 2026-04-03) enabled its skinny GEMMs for decode matmuls on
# RDNA (gfx11, gfx12): wvSplitK for 16-bit weights, wvSplitKQ for FP8; before, RDNA fell through to torch's linear
# (hipBLASLt) and generic torch._scaled_mm. On a Strix Halo the kernel took Qwen3-4B BF16 from 50.03 to 40.18 ms a
# token (PR #34177, the same kernel for gfx11, unmerged).
VLLM_RDNA_SKINNY = ((0, 19, 0), "2026-04-03")  # the first release with it, and its date


def vllm_rdna_before_skinny(row: Row, runtime: str, gpu: GpuSpec, fid: str, published: str | None) -> bool:
    """Whether the row ran vLLM's 16-bit or FP8 decode matmuls on an RDNA card before the skinny GEMMs
    (VLLM_RDNA_SKINNY): by its release, else by a build that names wvSplitK (a PR build), else by its source's date
    against the release's (a user's build of that date ran an earlier release)."""
    skinny = format_class(fid) == "f16" or fid.startswith("fp8")
    if runtime != "vllm" or not skinny or stream_family(gpu) != "rdna":
        return False
    version = row.runtime_version or ""
    return "wvsplitk" not in version.lower() and vllm_before(version, published, *VLLM_RDNA_SKINNY)


# llama.cpp's quantized prompt matmuls on an AMD card whose matrix cores its MMQ kernels did not use yet: the
# weights were dequantized to FP16 and multiplied by rocBLAS (hipBLASLt under ROCBLAS_USE_HIPBLASLT=1), "since we
# dont have any kernels that can make use of wmma or mfma" (llama.cpp issue #13565, 2025-05), so a prompt ran at the
# BLAS library's rate for the card: rocBLAS reached 6-10 of a Strix Halo's 59 TFLOPS (ROCm issue #4748), and
# "performs very poorly on CDNA3" (mmq.cu). MMQ on the matrix cores came with PR #14624 for CDNA3 (reviewed
# 2025-07-21), PR #17156 for RDNA4 (opened 2025-11-10) and PR #17576 for RDNA3 and 3.5 (opened 2025-11-28). A row is
# before them where its source is dated no later than the day the PR opened, or its build is no later than one a
# source printed before that day: b5616 (ROCm issue #4868, 2025-06-09), b6431 (lemonade issue 11, 2025-09-14).
# Builds between those and the merges are not told apart (none in the data).
LLAMACPP_AMD_MMQ = {  # LLVM target prefix -> (a build known to predate the PR, the day the PR opened or earlier)
    "gfx942": (5616, "2025-07-01"),
    "gfx11": (6431, "2025-11-28"),
    "gfx12": (6431, "2025-11-10"),
}


# vLLM turned chunked prefill on by itself for a model of more than 32K tokens of context (PR #6666, merged
# 2024-07-23: "enables chunked prefill by default for long context (>32K) models", 512 tokens a chunk; from 0.5.4, the
# first release tagged after it), unless the run set --max-model-len to 32K or less or turned it off. On ROCm a chunked
# prompt's attention ran Triton's prefix-prefill kernel (context_attention_fwd), not flash attention: "chunked prefill
# is showing poor performance due to a suboptimal triton kernel", and asked whether ROCm flash attention ran, "It's
# not getting called when chunked prefill is enabled" (PR #11146, merged 2024-12-12, first in 0.6.5, which stopped
# turning it on on ROCm). dstack's Llama 3.1 405B on 8 x MI300X (vLLM 0.6.3.dev116, `vllm serve` with no
# --max-model-len, October 2024) took 15-20x the predicted time to first token at 80 to 128,000 tokens, and 2.5-10.9x
# TGI's on the same machine (dstackai/benchmarks amd/tgi_vs_vllm).
VLLM_AUTO_CHUNKED = ((0, 5, 4), "2024-07-23")  # its first release, and the day the PR merged
VLLM_ROCM_UNCHUNKED = ((0, 6, 5), "2024-12-12")  # the first release that no longer turned it on on ROCm, and the merge
AUTO_CHUNKED_CONTEXT_TOKENS = 32 * 1024
_CHUNKED_OFF = re.compile(r"enable[-_]chunked[-_]prefill['\"]?\s*[=: ]\s*false|no[-_]enable[-_]chunked[-_]prefill", re.I)
_MAX_MODEL_LEN = re.compile(r"max[-_]model[-_]len['\"]?\s*[=: ]\s*(\d{1,9})(?!\d)", re.I)


def vllm_rocm_auto_chunked_prompt(row: Row, runtime: str, gpu: GpuSpec, model: ModelSpec,
                                  published: str | None) -> bool:
    """Whether the row is a vLLM prompt on ROCm that chunked prefill, turned on by itself for a long-context model,
    sent through Triton's prefix-prefill attention (VLLM_AUTO_CHUNKED to VLLM_ROCM_UNCHUNKED): by its release, else
    its source's date; not where the row turned chunked prefill off or capped the context at 32K tokens."""
    if runtime != "vllm" or row.kind != "prefill" or backend(gpu) != "rocm":
        return False
    version, text = row.runtime_version or "", _row_text(row)
    if _CHUNKED_OFF.search(text):
        return False
    m = _MAX_MODEL_LEN.search(text)
    context = int(m.group(1)) if m else model.max_position_embeddings
    if context <= AUTO_CHUNKED_CONTEXT_TOKENS:
        return False
    return not vllm_before(version, published, *VLLM_AUTO_CHUNKED) and vllm_before(version, published,
                                                                                   *VLLM_ROCM_UNCHUNKED)


def llamacpp_amd_prompt_by_blas(row: Row, runtime: str, gpu: GpuSpec, fid: str, published: str | None) -> bool:
    """Whether the row is a llama.cpp prompt of quantized weights on an AMD card, run before MMQ used the card's
    matrix cores (LLAMACPP_AMD_MMQ): by its build, else by its source's date."""
    if runtime != "llamacpp" or row.kind != "prefill" or format_class(fid) == "f16" or asked_backend(row):
        return False  # (Vulkan's own matmul shaders are not HIP's rocBLAS path)
    target = gpu.llvm_target or ""
    for prefix, (build, date) in LLAMACPP_AMD_MMQ.items():
        if target.startswith(prefix):
            b = _BUILD.search(row.runtime_version or "")
            if b and int(b.group(1) or b.group(2)) <= build:
                return True
            return published is not None and str(published) <= date
    return False


# SGLang 0.5.10 (its wheel built 2026-04-05) changed DeepSeek's MLA decode on CDNA3 (gfx942): up to 0.5.9 the absorbed
# projections (q_nope x w_kc, the output x w_vc) copied their FP8 weights to BF16 with the scale applied at every step
# and multiplied in BF16 (models/deepseek_v2.py, "self.w_kc.to(torch.bfloat16) * self.w_scale"); from 0.5.10 the FP8
# Triton batched GEMM runs them inside the CUDA graph ("cudagraph-only on gfx942", sglang PR #18624), beside tuned
# aiter GEMM configs for DeepSeek's shapes (ROCm/aiter PR #2024; InferenceX PR #811 lists both). InferenceX's
# dsr1-fp8-mi325x-sglang recipe, its launch flags unchanged, decoded 1k/1k at concurrency 4 about 1.9x as fast on the
# v0.5.12 image (2026-05-18) as on v0.5.9's (issue #890, 2026-03-08).
SGLANG_CDNA3_MLA = ((0, 5, 10, 0), "2026-04-05")  # the first release with it, and its wheel's date


def sglang_before(version: str | None, published: str | None, first: tuple[tuple[int, int, int, int], str]) -> bool:
    """Whether a run was of an SGLang release before `first` (its release tuple and its wheel's date): by the
    release `version` names, else by its source's date."""
    r = sglang_release(version)
    if r is not None:
        return r < first[0]
    return published is not None and str(published) < first[1]


def sglang_cdna3_mla_before(version: str | None, runtime: str, gpu: GpuSpec, model: ModelSpec,
                            published: str | None, fmt_id: str | None = None) -> bool:
    """Whether a run of an MLA model (DeepSeek's architecture) under SGLang on a CDNA3 card was before 0.5.10
    (SGLANG_CDNA3_MLA): by its release (`version` as printed), else by its source's date. Where the row's format is
    known (`fmt_id`), only FP8 weights: a BF16 checkpoint has no FP8 projection to copy (Kimi Linear's BF16 release
    on 4 x MI300X)."""
    if runtime != "sglang" or (gpu.llvm_target or "") not in CDNA3_TARGETS or not has_mla(model):
        return False
    if fmt_id is not None and not fmt_id.startswith("fp8"):
        return False
    return sglang_before(version, published, SGLANG_CDNA3_MLA)


# SGLang before 0.4.6 (sdist of 2025-04-27) decoded MLA models with its Triton attention backend unless a flag asked
# for FlashInfer's or FlashMLA's ("MLA optimization is turned on. Use triton backend.", model_runner.py, 0.4.4.post1);
# 0.4.6 made FA3 the default on Hopper. DeepGEMM was opt-in until 0.4.5 (SGL_ENABLE_JIT_DEEPGEMM), and 0.4.4.post1's
# fused MoE had no FP8 config for DeepSeek's experts over 8 H20s (E=256, N=256: an int8_w8a8 file only). That
# generation's published single-request DeepSeek-R1 figures on H20s: about 35 tok/s on one 8-card server (sglang
# #5513, 0.4.5) and 37 tok/s on two once its block-FP8 and MoE kernels were tuned (#3956), where the fit's 2026 rows
# decode DeepSeek-R1 on 8 x H200 in about 11 ms a token (InferenceX #870). tanjunchen's 8 x H20 run (image of
# 2025-03, 42 ms a token at batch 1, about as slow at batch 4) is of that generation.
SGLANG_MLA_FA3 = ((0, 4, 6, 0), "2025-04-27")
_MLA_BACKEND_FLAG = re.compile(r"enable[-_]flashinfer[-_]mla|enable[-_]flashmla|attention[-_]backend[= ]+(?:fa3|flashmla"
                               r"|flashinfer)", re.I)


def sglang_triton_mla_era(row: Row, runtime: str, model: ModelSpec, published: str | None) -> bool:
    """Whether an SGLang run of an MLA model was of a release before 0.4.6 (SGLANG_MLA_FA3), which decoded it with
    the Triton attention backend, unless the row names another MLA backend's flag."""
    if runtime != "sglang" or not has_mla(model) or _MLA_BACKEND_FLAG.search(_row_text(row)):
        return False
    return sglang_before(row.runtime_version, published, SGLANG_MLA_FA3)


# SGLang's Triton MLA decode split a sequence's cache into at most triton_attention_num_kv_splits (8) parts until
# 0.5.12 (wheel of 2026-05-16), which raised the cap for MLA models to the SM count (_mla_decode_kv_splits_cap in
# layers/attention/triton_backend.py): at batch 1 its grid was (1, ceil(heads / 16), 8), 16 thread blocks on a
# B200's 148 SMs for GLM-4.7-Flash's 20 heads (sglang PR #27786 describes the underfill). The SGLang Cookbook runs
# GLM-4.7-Flash on a B200 with --attention-backend triton (sglang PR #17247; its MLA head dims, qk_nope 192 and a
# 256-wide prefill head, are not those the FlashInfer and TRT-LLM MLA kernels of the time took). Those rows took
# 2.1-3.0x the predicted step: the growth with context, about 1.1 ms a 1,000 tokens, is the split cap's; the rest
# (about 8 ms a token at short context, twice the prediction) has no documented cause (the fused MoE had no tuned config
# for its 64 experts and a shared one on a B200 then).
SGLANG_TRITON_MLA_SPLITS = ((0, 5, 12, 0), "2026-05-16")
_TRITON_BACKEND = re.compile(r"attention[-_]backend[= ]+triton\b", re.I)


def sglang_triton_mla_capped(row: Row, runtime: str, model: ModelSpec, published: str | None) -> bool:
    """Whether an SGLang run of an MLA model named the Triton attention backend and was of a release before 0.5.12
    (SGLANG_TRITON_MLA_SPLITS), whose MLA decode took at most 8 KV splits."""
    if runtime != "sglang" or not has_mla(model) or not _TRITON_BACKEND.search(_row_text(row)):
        return False
    return sglang_before(row.runtime_version, published, SGLANG_TRITON_MLA_SPLITS)


_MARLIN_MOE = re.compile(r"marlin[- _]?moe|marlin_gemm_moe", re.I)
MARLIN_MOE_MAX_EXPERTS = 32  # vLLM 0.7.3-0.8.4 sent GPTQ/AWQ MoE layers with more experts to moe_wna16 instead


def expert_launches(row: Row, runtime: str, fid: str, model: ModelSpec) -> int:
    """Kernel launches a decode step makes where the row's engine ran GPTQ/AWQ experts through Marlin one kernel per
    expert (0 elsewhere). vLLM up to 0.8.4 (csrc/moe/marlin_moe_ops.cu, fused_marlin_moe.py calling marlin_gemm_moe
    twice a layer, once per expert each: "a single `marlin_gemm_moe` would launching `num_experts` CUDA kernels at
    least", vLLM PR #12185) for GPTQ and AWQ MoE layers, except, from 0.7.3 (PR #13236), layers of more than 32
    experts, which went to moe_wna16; 0.8.5 fused the experts into one kernel. SGLang up to 0.4.6 called vLLM's
    GPTQMarlinMoEMethod for every GPTQ MoE layer (its 0.4.6.post1 wheel, quantization/__init__.py) and vLLM's
    Marlin MoE for AWQ (Qwen's speed benchmark of 0.4.6.post1 names vLLM 0.7.2 as required for AWQ); 0.4.7-0.4.9
    called vLLM's fused_marlin_moe op, per expert or not by the vLLM installed beside it (not told: by the row's
    text); from 0.4.10 sgl_kernel's moe_wna16_marlin_gemm, one kernel a GEMM (the wheels). A row of another build
    counts where it names the Marlin MoE kernel. Each card of a tensor split launches every expert.
    Not modelled: before 0.6.3 vLLM ran a GPTQ/AWQ Mixtral as QuantMixtralForCausalLM, each expert a separate
    quantized layer over every token (three launches an expert, and every expert's bytes read); no row of the data
    ran it, and one would be counted as if through the per-expert Marlin kernel."""
    groups = [g for g in model.layer_groups if g.mlp is not None and g.mlp.kind == "moe"]
    if not groups or not fid.startswith(("gptq-", "awq-")):
        return 0
    per_layer = max(g.mlp.num_experts for g in groups)
    version = row.runtime_version or ""
    if runtime == "vllm":
        from llmsize.estimate.vllm_release import vllm_release

        r = vllm_release(version.split("+")[0])
        on = (r <= (0, 7, 2) or (r <= (0, 8, 4) and per_layer <= MARLIN_MOE_MAX_EXPERTS)) if r else None
    elif runtime == "sglang":
        r = sglang_release(version)
        on = None if r is None or (0, 4, 7) <= r < (0, 4, 10) else r < (0, 4, 7)
    else:
        return 0
    if on is None:
        on = bool(_MARLIN_MOE.search(_row_text(row)))
    return 2 * sum(g.count * g.mlp.num_experts for g in groups) if on else 0


VLLM_V1_DATE = "2025-03-18"  # vLLM 0.8.0, whose V1 engine replaced V0 by default (PyPI upload date)


def vllm_before(version: str, published: str | None, release: tuple[int, int, int], date: str) -> bool:
    """Whether a row's vLLM predates `release`: by its release number, else (a pull request's branch, main of some
    month) by its source's date against the release's `date`."""
    from llmsize.estimate.vllm_release import vllm_release

    r = vllm_release(version.split("+")[0])
    if r is None:
        return published is not None and str(published) < date
    return r < release


def _vllm_v0(version: str, published: str | None = None) -> bool:
    """A vLLM release before 0.8, whose V0 engine scheduled and sampled on the CPU between steps."""
    return vllm_before(version, published, (0, 8, 0), VLLM_V1_DATE)


def observe(row: Row, runtime: str, source_key: str, model: ModelSpec, gpu: GpuSpec,
            published: str | None = None, hybrid_prompts: bool = False) -> Observed | str:
    """The row as a plan, or why it cannot be one (`published`: its source's date, for a llama.cpp default;
    `hybrid_prompts`: a hybrid's prompt priced all the same, as the plan's notes on hybrids quote them)."""
    said = f"{row.test}; {row.where or ''}"
    if says(said, SPECULATIVE):
        return "speculative decoding (not one token per step)"
    if says(said, EAGER):
        return "vLLM with --enforce-eager (no CUDA graphs): the model costs the engine's default decode"
    fid = quant_format(row.recipe).id if row.recipe else format_id(runtime, row.format)
    if fid is None and row.format == "not stated" and row.model_id and runtime not in ("llamacpp", "mlx"):
        fid = model.release.quant  # a named checkpoint, run as released (llama.cpp and MLX run a conversion)
    if fid is None:
        return f"format `{row.format}` has no llmsize format id"
    kv_dtype = row_kv_dtype(row, runtime, model, fid, gpu)
    if kv_dtype is None:
        return f"KV cache dtype `{row.kv_dtype}` has no llmsize id"
    if printed_backend(row.backend)[1]:
        return f"backend `{row.backend}` (no group of its own: llama.cpp's CUDA, ROCm, Metal and Vulkan builds are)"
    if asked_backend(row) and (runtime != "llamacpp" or backend(gpu) == "metal"):
        return "Vulkan on a card or runtime without a Vulkan group (llama.cpp on NVIDIA and AMD cards only)"
    if runtime == "llamacpp" and intel_vulkan(gpu, row_backend(row, gpu)):
        return "Intel Arc on Vulkan: no group fits Intel's cards (the plan says what these rows decoded at)"
    if row.kind == "decode" and runtime == "llamacpp" and vulkan_bf16_experts(model, fid, asked_backend(row)):
        return ("BF16 routed experts on llama.cpp's Vulkan build: its tiled matmul at decode, not its mat-vec "
                "kernels (ggml_vk_use_mul_mat_vec_id), a kernel path plans do not predict")
    if row.kind == "decode" and vllm_rdna_before_skinny(row, runtime, gpu, fid, published):
        return ("vLLM before its skinny GEMMs on RDNA (v0.19.0, PR #34709): 16-bit and FP8 decode matmuls through "
                "hipBLASLt, a kernel path plans do not predict")
    if row.kind == "decode" and sglang_triton_mla_capped(row, runtime, model, published):
        return ("SGLang's Triton MLA decode before 0.5.12: at most 8 KV splits, 16 thread blocks at batch 1 (sglang PR "
                "#27786), a kernel path plans do not predict")
    if row.kind == "decode" and sglang_triton_mla_era(row, runtime, model, published):
        return ("SGLang before 0.4.6, an MLA model: Triton MLA decode by default, DeepGEMM off and untuned FP8 MoE "
                "configs, a generation whose single-request DeepSeek-R1 runs took about 27-29 ms a token on 8 or 16 H20s")
    if row.kind == "decode" and sglang_cdna3_mla_before(row.runtime_version, runtime, gpu, model, published, fid):
        return ("SGLang before 0.5.10 on a CDNA3 card, an MLA model: its absorbed projections copied their FP8 weights "
                "to BF16 every step (sglang PR #18624), a kernel path plans do not predict")
    if llamacpp_early_delta_net(row, runtime, model, published):
        return ("llama.cpp's Gated DeltaNet hybrid before PR #19375 (b7946 or older): the delta rule as a graph of "
                "small ops with copies between them, rewritten since")
    if llamacpp_amd_prompt_by_blas(row, runtime, gpu, fid, published):
        return ("llama.cpp's prompt before its MMQ kernels used an AMD card's matrix cores (PR #14624, #17156, "
                "#17576): quantized weights dequantized for rocBLAS, the library's rate, not the build plans predict")
    if vllm_rocm_auto_chunked_prompt(row, runtime, gpu, model, published):
        return ("vLLM from 0.5.4 to before 0.6.5 on ROCm, a model of more than 32K tokens: chunked prefill on by itself, "
                "its prompts' attention through Triton's prefix-prefill kernel, not flash attention (vllm PR #11146), a "
                "kernel path plans do not predict")
    if row.kind == "prefill" and row.depth_tokens:
        return "prefill after a filled cache (the plan's prefill starts from an empty one)"
    if row.rate_includes_prefill and row.kind == "decode" and (row.prompt_tokens or 0) > INCLUDED_PREFILL_MAX_TOKENS:
        return f"its rate includes the prefill of a {row.prompt_tokens}-token prompt"
    t = row.step_time_s
    if t is None:
        if row.kind == "prefill":
            return "prefill without its prompt length (tok/s cannot be a time)"
        return "tok/s at batch > 1 without saying per sequence or aggregate"
    tp = row.gpus if row.split in ("tensor", "row") else 1
    pp = row.gpus if row.split in ("pipeline", "layer") else 1
    if row.gpus > 1 and tp * pp == 1:
        if row.split == "expert":
            return f"expert parallel over {row.gpus} GPUs (a row is costed as a tensor or pipeline split)"
        return f"{row.gpus} GPUs without the split"
    scope = "all" if fid.startswith(("gguf-", "ggml-", "mlx-")) or fid in ("fp16", "bf16", "fp32") else None
    if fid == model.release.quant:
        scope = model.release.scope  # the release recipe (gpt-oss: MXFP4 experts only, as its GGUF keeps it)
    scope = "all" if row.recipe else row.scope or scope  # a checkpoint whose own recipe is cited (nvidia's
    # experts-only NVFP4; a format per component)
    inputs = PlanInputs(quant=fid, scope=scope, kv_dtype=kv_dtype,
                        context_tokens=row.context_tokens, batch=row.batch,
                        prompt_tokens=row.prompt_length if row.kind == "prefill" else None, tp=tp, pp=pp,
                        gpu_util=0.99, overhead_bytes=0.0)
    model = held_model(runtime, model)  # a GGUF's or mlx-lm's text model (runtime_model.TEXT_ONLY)
    try:
        plan = make_plan(model, gpu, inputs, search_fit=False)
    except LlmsizeError as e:
        return f"no plan: {e.message}"
    size = printed_bytes(row.model_size)
    factor = size / plan.weights.bytes_total if size else 1.0  # the file's real bytes (a GGUF mix, say)
    if row.kind == "decode":
        step = at_file_bytes(step_inputs(plan, plan.decode_b, runtime, marlin=ran_marlin(row),
                                         old_tiles=old_tiles(row, runtime), be=asked_backend(row)), factor)
        if runtime == "vllm" and _vllm_v0(row.runtime_version or "", published):
            if max(row.context_tokens, (row.prompt_length or 0) + (row.gen_tokens or 0)) > V0_GRAPH_CONTEXT_MAX:
                # any step past it is eager (the row's last context, not its mean, decides)
                return (f"vLLM V0 decoding a context above max_seq_len_to_capture ({V0_GRAPH_CONTEXT_MAX:,}): an "
                        "eager step, without CUDA graphs")
            step = replace(step, engine_v0=True)
        if runtime == "llamacpp" and llamacpp_before(row, published) is True:
            step = replace(step, engine_v0=True)
        if without_overlap(plan, runtime, row.runtime_version):  # SGLang 0.5.7-0.5.13 on a hybrid
            step = replace(step, engine_v0=True)
        launches = expert_launches(row, runtime, fid, model)
        if launches:
            step = replace(step, expert_launches=float(launches))
        ceiling = 1.0 / ceiling_step_s(step)
        return Observed(row, runtime, source_key, plan, step, None, t, ceiling)
    if runtime == "llamacpp" and tp > 1:
        # the plan says so beside such a time to first token (expected.py: -sm row copies every matmul's
        # activations between the cards); a prompt it does not claim to predict does not fit its constants
        return "prefill of llama.cpp's row or tensor split (each matmul's activations copied between the cards)"
    if has_recurrent_layers(model) and not hybrid_prompts:
        return ("prefill of a model with recurrent (SSM, linear-attention) layers: their chunked prompt kernels are "
                "costed as their FLOPs only (the plan's note says what published runs took)")
    fa = llamacpp_flash_attn(row, published) if runtime == "llamacpp" else True
    ub = row_ubatch_tokens(row) if runtime == "llamacpp" else LLAMACPP_UBATCH_TOKENS
    pre = at_file_bytes(prefill_inputs(plan, runtime, flash_attn=fa is not False, ubatch_tokens=ub,
                                       marlin=ran_marlin(row), be=asked_backend(row)), factor)
    if not pre.peak_flop_per_s:
        return f"prefill without the card's dense {pre.peak_name} rate, which the prompt's matmuls run at (none cited)"
    if runtime not in MATMUL_PRECISION and fp32_stands_in(gpu, pre.peak_flop_per_s):
        # a serving engine's (or gpt-fast's) prompt runs tensor-core GEMMs: a card whose catalog entry has no rate
        # for them (a DGX Spark: NVIDIA publishes only FP4) would be costed at its FP32 rate, which vLLM's 16-bit
        # prompts there outrun (Qwen3.6-27B BF16, 1,024 tokens in 1.07 s: ~51 TFLOPS against 31), pulling the
        # runtime's prefill fraction for every card to its bound. llama.cpp and MLX name their own matmul
        # precisions (FP32 among llama.cpp's): their rows stay.
        return (f"prefill: {gpu.id}'s 16-bit tensor rate is not in the catalog (its FP32 rate would stand for it, "
                "below the rate the prompt's matmuls run at)")
    return Observed(row, runtime, source_key, plan, None, pre, t, None)
