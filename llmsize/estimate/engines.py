"""What an engine will allocate: its own memory ledger, KV blocks and reported concurrency.

vLLM (V0 worker `determine_num_available_blocks`, the ledger its log prints as "Memory profiling results",
shared/reference/engine-logs.yaml):
    kv_cache = total x gpu_memory_utilization - weights - non_torch - activation_peak
    blocks   = floor(kv_cache / block_bytes), block_bytes = block_size x sum over layers of the bytes one
               token caches (K and V; every attention layer charged per token, sliding ones too, in V0)
    "Maximum concurrency for N tokens per request" = blocks x block_size / N
`total` is what CUDA reports (torch.cuda.mem_get_info), a little under the NVML total; the weights as loaded
(the log's "GB" is GiB). The activation peak is that of the profiling forward over max_num_batched_tokens
tokens (V0 default: max(max_model_len, 2048)) and max_num_seqs dummy sequences (vllm#8185); modelled as the
widest MLP's gate|up output and its activation, two hidden-size buffers, and the sampler's logits in the
activation dtype and fp32 for each sequence:
    peak = T x (3 I + 2 H) x 2 B + S x V x (2 + 4) B
(vllm#10517: predicted 2.09 GiB, logged 2.07). non_torch (CUDA context, NCCL, cuBLAS workspaces) is an
input; logs show 0.03 to 0.35 GiB.

SGLang: the static pool is free x mem_fraction_static - weights, all of it KV, where `free` is what CUDA
reports free once the CUDA context and the distributed groups exist (model_runner profile_max_num_token:
rest = available after loading - free at start x (1 - fraction)). Its refusal prints the smallest fraction
that would do, weights / free: 0.9113 for DeepSeek-V4-Pro FP8 at tp 8 on H200s, from 'avail mem=12.25 GB,
mem usage=125.65 GB' (SemiAnalysisAI/InferenceX#2128), which `min_fraction` reproduces. Its 125.65 GiB of weights a
card is 24.6 GiB above the plan's 101.03: SGLang up to 0.5.15 (that image's) kept, on Hopper's Marlin path for MXFP4
experts, the loader's FP32 scales, one a 32 weights (1 bit a weight, 22.52 GiB a card at tp 8), beside the repacked
ones (mxfp4_marlin_moe.py; sgl-project/sglang PR #29797 measured 11.48 GiB a card at tp 16 and freed them, in 0.5.18);
the rest (~2 GiB, 1.7%) is not accounted for. DeepSeek-V4's own pools: estimate/sglang_dsv4.py.
TensorRT-LLM: kv_cache_free_gpu_mem_fraction x the memory free after the engine and its runtime buffers
(TensorRT-LLM#224: a fraction of *free* memory); the runtime buffers are an input, by default the activation
model above at max_num_tokens (given, else TensorRT-LLM's default 8,192): TensorRT-LLM#1400, batch 1 and 4,096
tokens, +0.2% on its 132,608 tokens; #224, whose build settings are unknown, +53% (its decoder's buffers for
max_batch_size are not modelled); tests/test_engines.py prints the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from llmsize.catalog.schema import STATE_KINDS, GpuSpec, ModelSpec
from llmsize.errors import InvalidValueError, LlmsizeError
from llmsize.estimate.encoder_profile import encoder_profile, unprofiled_tower
from llmsize.estimate.kv import has_compressed_layers, kv_bytes, mixers_of, mla_mixers
from llmsize.estimate.sglang_defaults import (
    sglang_mamba_slots_per_request,
    sglang_mem_fraction,
    sglang_text_only_note,
    sglang_vision_tower,
)
from llmsize.estimate.sglang_dsv4 import MAX_RUNNING_REQUESTS as SGLANG_DSV4_RUNNING
from llmsize.estimate.sglang_dsv4 import PAGE_TOKENS as SGLANG_DSV4_PAGE
from llmsize.estimate.sglang_dsv4 import sglang_dsv4_pools
from llmsize.estimate.vllm_dsv4 import DSV4_BLOCK_SIZE, dsv4_layout, is_dsv4
from llmsize.estimate.vllm_release import (
    DEFAULT_BLOCK_SIZE,
    EXTENSIBLE_FROM,
    EXTENSIBLE_MARGIN_FLOOR,
    EXTENSIBLE_MARGIN_FRACTION,
    VLLM_LATEST_READ,
    VLLM_UTIL,
    VLLM_UTIL_BEFORE_0_20,
    effective_release,
    in_flight_tokens,
    mamba_checkpoint_align,
    mamba_state_blocks,
    prefix_lm_floor,
    v1_defaults,
    v1_runner_model,
    vllm_block_size,
    vllm_charges_graphs,
    vllm_profile,
    vllm_release,
)
from llmsize.units import GiB

ENGINES = ("vllm", "sglang", "trtllm")
# TensorRT-LLM's max_num_tokens when not given (BuildConfig and the LLM API's default, trtllm-serve's --max_num_tokens):
# the tokens one forward batches, what its runtime buffers are sized for, not the model's context
TRTLLM_MAX_NUM_TOKENS = 8192
TRTLLM_FREE_FRACTION = 0.9  # KvCacheConfig.free_gpu_memory_fraction's default (the LLM API's and trtllm-serve's)
ACT_BYTES = 2
DEFAULT_NON_TORCH_BYTES = int(0.3 * GiB)  # logs: 0.03 GiB (vllm#13882), 0.35 GiB (vllm#10517)
DEFAULT_MAX_NUM_SEQS = 256  # vLLM V0 default
# vLLM >= 0.20 profiles CUDA-graph memory before sizing the cache ("CUDA graph memory profiling is enabled
# (default since v0.21.0)", though 0.20.0 turned it on); logged estimates: 0.13 GiB (noonghunna/club-3090#104, 2 x
# RTX 3090), 0.26 GiB (vllm-project/vllm#30515 thread), 0.36 GiB (gpustack/runner#251), 0.52 GiB (LMCache#3430,
# Qwen3-8B on a 24 GB card), 2.22 GiB (vllm-project/vllm#50722, 4 ranks); a 2.4T-parameter model's 118.65 GiB
# (vllm-project/vllm#53013). One figure for all models, overridable (--cudagraph-gib).
DEFAULT_CUDAGRAPH_BYTES = int(0.3 * GiB)
LONG_CONTEXT = 32768  # vLLM V0 turns chunked prefill on above this (arg_utils.py, 0.5.3 to 0.7.3)


def v0_batched_tokens(model: ModelSpec, gpu: GpuSpec, max_len: int, release: tuple | None) -> tuple[int, str]:
    """The tokens V0's profiling forward runs when --max-num-batched-tokens is not given, and why.

    EngineArgs.create_engine_config (vLLM 0.5.3 to 0.7.3): "enable chunked prefill by default for long context
    (> 32K) models. This is to avoid OOM errors in the initial memory profiling phase", unless the model has a
    sliding window (or, by release, Mamba layers on 0.5.4-0.6.0, ROCm from 0.6.5); SchedulerConfig then batches
    512 tokens (0.4.3-0.6.4) or 2048 (0.6.5 on), else max(max_model_len, 2048). A bare `v0` is read as the last
    V0 releases (0.6.5-0.7.3)."""
    rel = release or (0, 7, 3)
    plain = max(max_len, 2048)
    if max_len <= LONG_CONTEXT or rel < (0, 5, 3):
        return plain, "V0 default max(max_model_len, 2048)"
    kinds = {g.mixer.kind for g in model.layer_groups if g.mixer is not None}
    blockers = []
    if "sliding" in kinds:
        blockers.append("a sliding window")
    if (0, 5, 4) <= rel <= (0, 6, 0) and kinds & set(STATE_KINDS):
        blockers.append("Mamba layers")
    if rel >= (0, 6, 5) and gpu.vendor == "AMD":
        blockers.append("ROCm")
    if blockers:
        return plain, (f"V0 default max(max_model_len, 2048): chunked prefill, on by itself above 32K tokens, is "
                       f"not for {' and '.join(blockers)}")
    tokens = 512 if rel < (0, 6, 5) else 2048
    which = "release " + ".".join(map(str, rel)) if release else "V0 0.6.5-0.7.3 (give --engine-version for older)"
    return tokens, (f"chunked prefill: max_model_len {max_len:,} > 32,768 turns it on by itself ({which}), "
                    f"profiling {tokens:,} batched tokens (512 before 0.6.5, 2048 from 0.6.5)")


def non_torch_default(model: ModelSpec, tp: int, release: tuple | None, batched: int | None,
                      v1: bool = False) -> tuple[int, str]:
    """vLLM's non-torch memory on one card when not given: the CUDA context and cuBLAS workspaces (logs: 0.03 to
    0.35 GiB at tp 1, DEFAULT_NON_TORCH_BYTES), and under V0 with tensor parallelism the communicators' buffers,
    which grow with it: vllm-project/vllm#10511 logs Llama-3-8B's non_torch_memory at 1.79 GiB on one card and
    3.58 GiB on two, on one build, so V0's default scales with tp. V1 takes its memory snapshot after
    init_worker_distributed_environment (v1/worker/gpu_worker.py init_device: "Initialize the distributed
    environment BEFORE taking memory snapshot"), so the communicators' buffers sit outside the
    gpu_memory_utilization budget (vllm PR #45517 describes it) and its ledger charges the flat figure at any tp:
    vLLM 0.28.0 over 2 x L4 logs 14.38 GiB for the cache: the flat figure reads 0.8% low, tp x it 2.9% low.
    The releases of PR #2031's time (before 0.3) also kept every all-reduce output of the profiling forward
    (vllm#2150: "when using TP, the activation memory for all reduce is not reused"): two per layer of
    max_num_batched_tokens x hidden x 2 B each, outside the activation model."""
    if v1:
        return DEFAULT_NON_TORCH_BYTES, (f"{DEFAULT_NON_TORCH_BYTES / GiB:.2f} GiB (logs: 0.03-0.35 GiB; V1 leaves "
                                         "the communicators' buffers outside its budget at any tp)")
    base = DEFAULT_NON_TORCH_BYTES * tp
    why = f"{DEFAULT_NON_TORCH_BYTES / GiB:.2f} GiB x tp {tp} (logs: 0.03-0.35 GiB at tp 1; x2 at tp 2, vllm#10511)"
    if tp > 1 and release is not None and release < (0, 3, 0) and batched:
        from llmsize.estimate.parallel import allreduces_per_token

        kept = allreduces_per_token(model) * batched * model.hidden_size * ACT_BYTES
        return int(base + kept), (why + f" + {kept / GiB:.2f} GiB of all-reduce outputs the profiling forward "
                                  "keeps before 0.3 (vllm#2150)")
    return int(base), why


def round_up(n: int, k: int) -> int:
    return -(-n // k) * k


MARLIN_PAD = (256, 128)  # hidden to a multiple of 256, expert intermediate to 128 (vLLM Mxfp4MoEMethod)


def loaded_layout_extra(model: ModelSpec, gpu: GpuSpec, e: "EngineInputs") -> tuple[float, str | None]:
    """Bytes an engine's layout adds to the checkpoint's on one card, with its source; (0, None) where it keeps
    the checkpoint's layout (or where ours is not known, then said in the note).

    vLLM, MXFP4 experts through Marlin (every NVIDIA card below compute capability 9.0; Hopper too before 0.11,
    whose wheels pin torch < 2.8, Mxfp4MoEMethod._should_use_marlin): create_weights pads the hidden size to a
    multiple of 256 and each expert's intermediate size to 128 ("The moe marlin kernel requires that for each
    linear n % 256 == 0 and k % 128 == 0", vllm 0.10.1.1 quantization/mxfp4.py). gpt-oss: 2880 -> 3072 and 2944,
    60.77 GiB on disk -> 65.90 GiB loaded; vllm#23278 logs 'Model loading took 65.9651 GiB' on an H100.

    TensorRT-LLM: trtllm-build shares a tied table between the embedding and the lm_head only when their shapes
    match (tensorrt_llm/models/modeling_utils.py share_embedding); with tensor parallelism and its default
    use_parallel_embedding=False the embedding stays whole on every rank while the lm_head is split by
    vocabulary, so the rank stores the table whole plus its lm_head shard (untied models: the whole embedding
    instead of a shard of it)."""
    moe = [g for g in model.layer_groups if g.mlp is not None and g.mlp.kind == "moe"]
    h = model.hidden_size
    if e.engine == "vllm" and e.weight_format == "mxfp4" and moe and gpu.vendor == "NVIDIA" \
            and gpu.compute_capability:
        from llmsize.estimate.quant import quant_format

        cc = gpu.cc
        rel = vllm_release(e.version)
        if cc >= (10, 0) or (cc >= (9, 0) and (rel is None or rel >= (0, 11, 0))):
            return 0.0, ("MXFP4 experts: this vLLM's Hopper/Blackwell MoE backends (Triton, FlashInfer) pad inside "
                         "their kernels' layouts, not sized here; vllm#33155 logs 64.38 GiB loaded for gpt-oss-120b "
                         "on an H100 (v0.14.1) against 60.8 GiB on disk")
        bits = float(quant_format("mxfp4").bits_per_weight)
        extra = 0.0
        for g in moe:
            m = g.mlp
            w = m.latent_size or h  # the experts' own width (a LatentMoE's latent)
            hp, ip = round_up(w, MARLIN_PAD[0]), round_up(m.moe_intermediate_size, MARLIN_PAD[1])
            n = 3 if m.gated else 2
            mats = n * (hp * ip - w * m.moe_intermediate_size) * bits / 8
            biases = ((n - 1) * (ip - m.moe_intermediate_size) + (hp - w)) * ACT_BYTES if m.bias else 0
            extra += g.count * m.num_experts * (mats + biases)
        hp = round_up(h, MARLIN_PAD[0])
        return extra, (f"MXFP4 experts through Marlin on compute capability {gpu.compute_capability}: hidden "
                       f"{h} -> {hp}, expert intermediate padded to a multiple of 128 (vLLM Mxfp4MoEMethod."
                       f"create_weights): +{extra / GiB:.2f} GiB over the checkpoint")
    if e.engine == "trtllm" and e.tp > 1:
        table = model.vocab_size * e.tp * h * ACT_BYTES  # the whole vocabulary: the card model holds 1/tp
        extra = table if model.tie_word_embeddings else table * (1 - 1 / e.tp)
        return extra, (f"TensorRT-LLM at tp {e.tp}: the embedding whole on every rank (use_parallel_embedding "
                       "False)" + (", the tied lm_head a separate shard (shapes differ, not shared)"
                                   if model.tie_word_embeddings else "") + f": +{extra / GiB:.2f} GiB")
    return 0.0, None


@dataclass(frozen=True)
class EngineInputs:
    engine: str = "vllm"
    # vLLM gpu_memory_utilization / SGLang mem_fraction_static / TRT-LLM free fraction; None: the engine's own default
    gpu_util: float | None = None
    max_model_len: int | None = None  # default: the model's max_position_embeddings
    max_num_batched_tokens: int | None = None  # vLLM V0 default: max(max_model_len, 2048)
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    block_size: int | None = None  # tokens a block; None: the engine's default (vllm_block_size)
    kv_dtype: str = "bf16"
    non_torch_bytes: int | None = None  # None: non_torch_default(tp)
    tp: int = 1  # tensor-parallel size the ledger is for (one card's share is what `model` describes)
    weight_format: str | None = None  # the plan's format id: engines may load it in their own layout
    runtime_bytes: int | None = None  # TensorRT-LLM: engine runtime buffers; default: the vLLM activation peak
    version: str = "v1"  # vLLM: v1 (>= 0.21), v1-0.20, v0, or a release number (vllm_profile)
    cudagraph_bytes: int | None = None  # vLLM V1 >= 0.21 charges its CUDA-graph estimate; default below
    offline: bool = False  # vLLM's LLM class (offline, lm_eval) rather than `vllm serve`: other V1 defaults
    mtp_layers: int = 0  # the model's own MTP layers loaded to draft with (--spec mtp): DeepSeek-V4's window caches
    gpu_util_said: str = "given"  # where gpu_util comes from, in words, where one is given
    pp: int = 1  # pipeline stages: vLLM keeps a batch in flight for each (in_flight_tokens)
    draft_model: bool = False  # speculative decoding with a separate draft model (vLLM 0.26-0.27: no async scheduling)
    spec_tokens: int = 0  # tokens a speculative step drafts (--spec k): vLLM's Mamba groups keep a state page for each


@dataclass(frozen=True)
class EngineLedger:
    name: str
    version: str
    total_bytes: int
    total_source: str
    budget_bytes: float
    weights_bytes: float
    non_torch_bytes: float
    activation_peak_bytes: float
    kv_cache_bytes: float
    block_bytes: float
    kv_blocks: int
    kv_cache_tokens: int
    max_model_len: int
    max_num_batched_tokens: int | None
    assumptions: list[str] = field(default_factory=list)
    concurrency: float | None = None  # blocks / blocks one max_model_len request needs (vLLM V1)
    min_fraction: float | None = None  # smallest utilization / fraction that serves one max_model_len request
    fits_one_request: bool = True  # the KV memory holds one max_model_len request
    kv_groups: int = 1
    cudagraph_bytes: float = 0.0
    # the engine's own arithmetic from its total to the KV cache, in its order: (label, bytes), each line the one
    # above it less this line ("- ...") or a new subtotal
    steps: tuple[tuple[str, float], ...] = ()
    gpu_util: float | None = None  # the share the engine ran with: of the total (vLLM), of free memory (the others)
    # vLLM V1 with sliding-window groups: max_model_len requests it runs at once past their prefill, where the
    # logged concurrency reserves each its prefill's blocks (running_concurrency_of); None: no sliding group
    running_concurrency: float | None = None
    # the engine admits requests by its own per-request reservation, not by the bytes a plan's request caches: vLLM's
    # sliding and Mamba groups (a window's in-flight reserve, a group's state pages), SGLang's hybrid pools (the
    # full layers' tokens beside a window pool at a fixed share, SGLANG_SWA_FULL_TOKENS_RATIO; the states' own pool,
    # state_pool_bytes)
    requests_bind: bool = False
    state_pool_bytes: float = 0.0  # SGLang: the recurrent states' pool beside the attention cache
    state_bytes_per_request: float = 0.0  # SGLang: one request's recurrent states (all its state layers)
    state_slots_per_request: int = 1  # SGLang: the states' slots its radix cache keeps a running request

    @property
    def max_concurrency(self) -> float:
        if self.concurrency is not None:
            return self.concurrency
        return self.kv_cache_tokens / self.max_model_len

    @property
    def state_slots(self) -> float | None:
        """SGLang: the running requests its states' pool holds (max_mamba_cache_size // the slots a request keeps:
        its cap on running requests); None without such a pool."""
        if not self.state_bytes_per_request:
            return None
        return float(int(self.state_pool_bytes / self.state_bytes_per_request) // self.state_slots_per_request)

    @property
    def requests_at_once(self) -> float:
        """The requests of max_model_len tokens the engine runs at once: running_concurrency, else
        max_concurrency, and no more than its states' pool holds."""
        conc = self.running_concurrency if self.running_concurrency is not None else self.max_concurrency
        return min(conc, self.state_slots) if self.state_slots is not None else conc

    @property
    def requests_held_by(self) -> str | None:
        """Why requests_at_once is not the logged concurrency: "window" (a running request's sliding groups keep
        only their window), "states" (the states' pool holds no more), None where it is."""
        if self.requests_at_once == self.max_concurrency:
            return None
        return "states" if self.state_slots is not None and self.requests_at_once == self.state_slots else "window"


def cuda_total_bytes(gpu: GpuSpec) -> tuple[int, str]:
    if gpu.memory_cuda_bytes:
        return gpu.memory_cuda_bytes, "CUDA-reported total (catalog memory_cuda_bytes)"
    if gpu.memory_reported_bytes:
        return gpu.memory_reported_bytes, "NVML-reported total (no CUDA-reported total in the catalog: a little high)"
    return gpu.memory_bytes, "nominal total (no driver-reported total in the catalog: a little high)"


def token_bytes_charged(model: ModelSpec, kv_dtype: str) -> float:
    """Bytes one token occupies in the engine's paged cache: every attention layer charged per token (DeepSeek-V4's
    layers: their compressed rows' share, compressed_window_bytes the rest)."""
    kv = kv_bytes(model, 1, kv_dtype)
    if has_compressed_layers(model):
        return kv.bytes_per_token
    return sum(kv.bytes_per_token_by_kind.get(k, 0.0) for k in ("full", "sliding", "mla"))


def compressed_window_bytes(model: ModelSpec, kv_dtype: str, max_len: int) -> float:
    """What one request of a DeepSeek-V4 model holds beside its compressed rows: its layers' windows (0 for any other
    model), where no engine's own layout is modelled: vLLM's under an FP8 cache (vllm_dsv4.py) and SGLang's
    (sglang_dsv4.py) are; TensorRT-LLM's and vLLM's under another cache dtype are not."""
    if not has_compressed_layers(model):
        return 0.0
    return kv_bytes(model, max_len, kv_dtype).bytes_by_kind["sliding"]


# SGLang's hybrid SWA pool (0.5.23 configs/model_config.py is_hybrid_swa_model: Llama4ForConditionalGeneration,
# GptOssForCausalLM, Gemma 4 from 0.5.11, MiMo-V2, Step-3.5, MuseGlimmerForConditionalGeneration; not Gemma
# 2/3/3n, whose sliding layers it charges per token): the sliding layers keep swa_full_tokens_ratio (default 0.8)
# of the full layers' tokens, so the pool's memory is full_tokens x (F x n_full + 0.8 x S x n_swa) and the tokens it
# logs are the full layers' (model_executor/pool_configurator.py HybridSWAPoolConfigurator). Its layers are
# config.json's layer_types, Gemma 4 E models' KV-sharing layers among them (model_runner_components/layer_setup.py):
# it charges them too.
SGLANG_HYBRID_SWA_FAMILIES = ("llama4_text", "llama4", "gpt_oss", "gemma4", "gemma4_text", "muse_glimmer_text")
SGLANG_SWA_FULL_TOKENS_RATIO = 0.8
# SGLang's share for Mamba, linear-attention and short-conv states beside the attention cache (0.5.23
# mem_cache/kv_cache_configurator.py _handle_max_mamba_cache, mamba_full_memory_ratio's default): with the radix
# cache on, the states take rest x r / (1 + r) of the pool and attention the rest
SGLANG_MAMBA_FULL_MEMORY_RATIO = 0.9


def sglang_token_bytes(model: ModelSpec, kv_dtype: str) -> tuple[float, bool]:
    """Bytes a full-layer token costs SGLang's pool (every attention layer, KV-sharing ones included), and whether
    its hybrid SWA pool sizes it."""
    if has_compressed_layers(model):
        return token_bytes_charged(model, kv_dtype), False
    from llmsize.estimate.kv import per_token_per_layer
    from llmsize.estimate.quant import kv_dtype_bytes

    b = float(kv_dtype_bytes(kv_dtype))
    per_kind: dict[str, float] = {}
    for g in model.layer_groups:
        if g.mixer is not None and g.mixer.kind in ("full", "sliding", "mla"):
            per_kind[g.mixer.kind] = per_kind.get(g.mixer.kind, 0.0) + g.count * per_token_per_layer(g.mixer, b,
                                                                                                      kv_dtype)
    swa = model.family in SGLANG_HYBRID_SWA_FAMILIES and bool(per_kind.get("sliding"))
    share = {"full": 1.0, "mla": 1.0, "sliding": SGLANG_SWA_FULL_TOKENS_RATIO if swa else 1.0}
    return sum(per_kind.get(k, 0.0) * f for k, f in share.items()), swa


def activation_peak_bytes(model: ModelSpec, tokens: int, seqs: int) -> float:
    """Values live per token at the widest MLP: a dense MLP's gate|up output and its activation (3 I); a MoE
    layer's fused_moe workspaces (vLLM fused_experts: cache13 = top-k x max(2 I, H) shared by the two GEMMs'
    outputs, cache2 = top-k x I) plus a shared expert's 3 I; then two hidden-size buffers, and the sampler's
    logits for every sequence in the activation dtype and fp32."""
    h = model.hidden_size
    widest = 0
    for g in model.layer_groups:
        m = g.mlp
        if m is None:
            continue
        if m.kind == "dense":
            widest = max(widest, 3 * m.intermediate_size)
        else:
            i, k = m.moe_intermediate_size, m.experts_per_token
            shared = m.num_shared_experts * 3 * (m.shared_intermediate_size or i)
            widest = max(widest, k * (max(2 * i, h) + i) + shared)
    return tokens * (widest + 2 * h) * ACT_BYTES + seqs * model.vocab_size * (ACT_BYTES + 4)


# vLLM rounds a mamba hybrid's attention block to a multiple of the attention kernel's block size:
# B = align x cdiv(mamba_page, align x attn_page_1_token), align = 16 on CUDA backends
# (vllm/platforms/interface.py _align_hybrid_block_size, quoted in syv-ai/qwen38-27b-rtx3090#102; vllm#24280
# gives 672 tokens for Nemotron-Nano-9B-v2, which tests/test_engines.py reproduces)
MAMBA_ALIGN_TOKENS = 16
# an MLA model's alignment there: 64 tokens (128 under the CUTLASS_MLA backend, not modelled) (vllm
# model_executor/models/config.py HybridAttentionMambaModelConfig.verify_and_update_config: "kernel_block_alignment_size
# = 128 if use_cutlass_mla else 64"; Kimi Linear's KDA + MLA stack)
MLA_ALIGN_TOKENS = 64


def vllm_state_bytes(mixer) -> float:
    """One sequence's state in one SSM / linear-attention layer as vLLM V1 allocates it: its
    --mamba-ssm-cache-dtype `auto` keeps Gated DeltaNet states in the model dtype (bf16; MambaStateDtypeCalculator
    .gated_delta_net_state_dtype), NemotronH's in the config's mamba_ssm_cache_dtype (`state_dtype`), Kimi Delta
    Attention's recurrent state in FP32 beside a conv state in the model dtype (kda_state_dtype returns (state dtype,
    torch.float32); vllm model_executor/layers/mamba/mamba_utils.py @02d71083)."""
    from llmsize.estimate.kv import state_bytes_per_layer

    if mixer.kind == "conv":  # short_conv_state_dtype: the model dtype (vllm mamba_utils.py @02d71083)
        return state_bytes_per_layer(mixer)
    if mixer.kind == "linear" and mixer.variant == "kda":
        return state_bytes_per_layer(mixer.model_copy(update={"state_dtype": "fp32"}))
    if mixer.kind == "linear":
        return state_bytes_per_layer(mixer.model_copy(update={"state_dtype": "bf16"}))
    return state_bytes_per_layer(mixer)


@dataclass(frozen=True)
class V1Layout:
    """vLLM V1's KV-cache layout (docs/design/hybrid_kv_cache_manager.md; v1/core/kv_cache_utils.py):
    layers of one attention type share KV-cache groups of `group_size` layers; every group's page (one
    block of one layer) has the same size, the block size of the types with a smaller per-token size being
    multiplied to match; memory is `group_size` buffers of num_blocks pages. In a mamba hybrid
    (HybridAttentionMambaModelConfig, without prefix caching) the attention block grows to the smallest
    multiple of 16 tokens whose page holds one layer's state, and the state page is padded to it."""

    groups: list[tuple[str, int | None, int]]  # (kind, window, block_size) per group; kind full|sliding|mamba
    group_size: int
    page_bytes: int  # one block of one layer
    padded_layers: int  # layers added to fill the last group of a type
    state_bytes: float = 0.0  # a mamba layer's state before padding (0: no mamba layers)
    state_blocks: int = 1  # state pages a request reserves in each mamba group (vllm_release.mamba_state_blocks)

    def blocks_per_request(self, max_model_len: int, batched_tokens: int) -> int:
        """SlidingWindowSpec.max_memory_usage_bytes: cdiv(min(window - 1 + batched, len), block) + 1 blocks;
        full attention: cdiv(len, block); a mamba group state_blocks (its state, and the release's extra pages)."""
        total = 0
        for kind, window, bs in self.groups:
            if kind == "sliding":
                total += -(-min(window - 1 + batched_tokens, max_model_len) // bs) + 1
            elif kind == "mamba":
                total += self.state_blocks
            else:
                total += -(-max_model_len // bs)
        return total


def running_concurrency_of(layout: V1Layout, blocks: int, max_len: int, in_flight: int) -> float | None:
    """max_model_len requests vLLM V1 runs at once in `blocks`, past their prefill, where a model has sliding-window
    groups (None without): the logged concurrency reserves every request the blocks of its prefill (a sliding
    group's window and the tokens in flight: blocks_per_request), but a sliding group frees a running request's
    blocks below its window (SlidingWindowManager.get_num_skipped_tokens, freed by remove_skipped_blocks before each
    step), so a decoding request holds its window and the token in flight; a new request is admitted while its
    prefill's blocks are free (kv_cache_manager.allocate_slots; 0.34's scheduler_reserve_full_isl), so one such
    reserve is kept aside."""
    need, held = layout.blocks_per_request(max_len, in_flight), layout.blocks_per_request(max_len, 1)
    if held >= need:
        return None
    return max(0.0, (blocks - (need - held)) / held)


def v1_layout(model: ModelSpec, kv_dtype: str, block_size: int, checkpoint_align: int = 1) -> V1Layout | None:
    """None for a model without attention layers; `checkpoint_align`: the tokens a mamba prefill checkpoint aligns
    to, which the attention block's alignment takes too (vllm_release.mamba_checkpoint_align)."""
    import math

    from llmsize.estimate.kv import per_token_per_layer
    from llmsize.estimate.quant import kv_dtype_bytes

    if has_compressed_layers(model):
        return None  # DeepSeek-V4: charged per token (token_bytes_charged) and per request (compressed_window_bytes)
    b = float(kv_dtype_bytes(kv_dtype))
    types: dict[tuple[str, int | None], list[float]] = {}
    states: list[float] = []
    for g in model.layer_groups:
        m = g.mixer
        if m is None or getattr(m, "kv_shared", False):  # no cache of its own (kv_sharing_target_layer_name)
            continue
        if m.kind in STATE_KINDS:
            states += [vllm_state_bytes(m)] * g.count
            continue
        key = ("sliding", m.sliding_window) if m.kind == "sliding" else ("full", None)
        per = per_token_per_layer(m, b, kv_dtype)
        types.setdefault(key, []).extend([per] * g.count)
    if not types:
        return None
    # every layer of a type caches the same bytes per token in the models we describe; take the widest
    per_token = {k: max(v) for k, v in types.items()}
    state = max(states, default=0.0)
    if state:
        a = MLA_ALIGN_TOKENS if mla_mixers(model) else MAMBA_ALIGN_TOKENS
        a = max(a, block_size)  # kernel_block_alignment_size = max(the kernel's smallest block, the cache's block)
        a = math.lcm(a, checkpoint_align)
        block_size = max(block_size, a * -(-int(state) // int(a * max(per_token.values()))))
    target = max(block_size * t for t in per_token.values())
    if len(types) == 1 and not state:
        (key, sizes), = types.items()
        return V1Layout([(key[0], key[1], block_size)], len(sizes), int(block_size * per_token[key]), 0)
    counts = {k: len(v) for k, v in types.items()} | ({("mamba", None): len(states)} if state else {})
    group_size = min(counts.values())
    groups, padded = [], 0
    for key, n_layers in counts.items():
        bs = block_size if key[0] == "mamba" else block_size * round(target / (block_size * per_token[key]))
        n = -(-n_layers // group_size)
        padded += n * group_size - n_layers
        groups += [(key[0], key[1], bs)] * n
    return V1Layout(groups, group_size, int(target), padded, state)


def vllm_min_fraction(total: float, weights: float, nt: float, act: float, graphs: float, one_request: float,
                      headroom_cap: float | None) -> float:
    """The smallest gpu_memory_utilization at which vLLM's cache holds one request; above 1 where none does. Under
    the extensible cache (headroom_cap: total - non-torch - margin) the utilization caps the cache only while the
    free memory does not: past that cap no utilization helps."""
    if headroom_cap is None:
        return (weights + nt + act + graphs + one_request) / total
    need = weights + graphs + act + one_request
    return need / total if need <= headroom_cap else (total - headroom_cap + need) / total


def _dsv4_ledger(model: ModelSpec, e: EngineInputs, max_len: int, flight: tuple, notes: list[str], ledger: tuple
                 ) -> EngineLedger:
    """vLLM V1's ledger of a DeepSeek-V4 model under its FP8 cache: the pool in vLLM's own layout of it
    (estimate/vllm_dsv4.py); `flight`: max_num_batched_tokens, the tokens in flight its windows reserve for
    (in_flight_tokens) and why."""
    batched, in_flight, in_flight_why = flight
    total, src, budget, weights_bytes, nt, act, kv_cache, graphs, steps, version, headroom_cap = ledger
    block = DSV4_BLOCK_SIZE if e.block_size is None else e.block_size
    ratio = max((g.mixer.compress_ratio or 1) for g in model.layer_groups)
    if block % ratio:
        raise InvalidValueError(f"--block-size {block}: DeepSeek-V4's compressed caches in vLLM take a block of whole "
                                f"rows at ratio {ratio}, a multiple of {ratio} tokens.",
                                f"Use {DSV4_BLOCK_SIZE} (its recipe's) or leave --block-size out.")
    layout = dsv4_layout(model, block, e.mtp_layers)
    unit = layout.bytes_per_block
    blocks = max(0, int(kv_cache // unit))
    need = layout.blocks_per_request(max_len, in_flight)
    conc = blocks / need
    one_request = need * unit
    min_fraction = vllm_min_fraction(total, weights_bytes, nt, act, graphs, one_request, headroom_cap)
    fits = kv_cache >= one_request
    said = f"{block}-token blocks" + (" (its recipe's --block-size 256)" if e.block_size is None else "")
    notes.append(f"DeepSeek-V4's cache in vLLM's own layout (fp8_ds_mla): {len(layout.groups)} KV-cache groups, "
                 f"{unit:,} B a block of {said} across them; a {max_len:,}-token request takes {need:,} blocks, its "
                 f"windows' and compressor states' pages reserved for {in_flight:,} tokens in flight ({in_flight_why}; "
                 "vLLM 0.26.0's layout)" + (f"; {e.mtp_layers} MTP layer(s)' windows" if e.mtp_layers else "") + ".")
    if not fits:
        notes.append(f"Not enough for one {max_len:,}-token request: the engine refuses to start below "
                     f"{min_fraction:.4f} of total memory (or lower --max-model-len)." if min_fraction <= 1 else
                     f"Not enough for one {max_len:,}-token request at any utilization (the engine refuses to "
                     "start): lower --max-model-len, quantize, or add cards.")
    return EngineLedger(e.engine, version, total, src, budget, weights_bytes, nt, act, kv_cache, unit, blocks,
                        int(conc * max_len), max_len, batched, notes, conc, min_fraction, fits, len(layout.groups),
                        graphs, steps)


# families whose SGLang model overrides pick another attention backend than aiter on ROCm (0.5.23
# arg_groups/model_overrides: gemma4.py triton, nemotron_h.py triton off SM100, falcon_h1.py and olmo2.py triton)
SGLANG_NOT_AITER_FAMILIES = ("gemma4", "gemma4_text", "nemotron_h", "falcon_h1", "olmo2")


def sglang_aiter_attention(model: ModelSpec, gpu: GpuSpec) -> bool:
    """SGLang runs the attention of `model` (one card's share) with aiter on this card (model_override_base.py
    default_attention_backend: aiter for MHA on HIP; for MLA where the heads a card holds are 16 or 128, else triton;
    DeepSeek-V4 its own)."""
    if gpu.vendor != "AMD" or has_compressed_layers(model) or model.family in SGLANG_NOT_AITER_FAMILIES:
        return False
    mla = mla_mixers(model)
    if mla:
        return max(m.num_attention_heads for m in mla) in (16, 128)
    return True


def _sglang_dsv4_ledger(model: ModelSpec, e: EngineInputs, max_len: int, notes: list[str], ledger: tuple
                        ) -> EngineLedger:
    """SGLang's ledger of a DeepSeek-V4 model: its pools in SGLang's own layout (estimate/sglang_dsv4.py) from the
    memory its mem_fraction_static leaves them."""
    total, src, budget, weights_bytes, non_torch, kv_cache, steps, version = ledger
    drafting = e.mtp_layers > 0 or e.draft_model
    pools = sglang_dsv4_pools(model, drafting)
    full = pools.full_tokens(kv_cache)
    swa = pools.swa_tokens(full)
    paged = -(-max_len // SGLANG_DSV4_PAGE) * SGLANG_DSV4_PAGE
    # one request: its tokens in the full pools, and a window pool that holds its window and a page
    # (validate_swa_pool_size refuses to start below it)
    swa_floor = -(-(pools.window_tokens + SGLANG_DSV4_PAGE + 1) // SGLANG_DSV4_PAGE) * SGLANG_DSV4_PAGE
    need = max(paged, -(-swa_floor / pools.swa_ratio // SGLANG_DSV4_PAGE) * SGLANG_DSV4_PAGE)
    one_request = pools.fixed_bytes + pools.bytes_per_full_token * need
    min_fraction = (weights_bytes + one_request) / (total - non_torch)
    fits = kv_cache >= one_request
    notes.append(f"DeepSeek-V4's pools in SGLang's own layout (0.5.23; FP8 rows of 584 B in 256-token pages "
                 f"whatever the cache dtype): {pools.bytes_per_full_token:,.2f} B a full token (its log's "
                 f"bytes_per_full_token{', the draft layer included' if drafting else ''}) and "
                 f"{pools.fixed_bytes / GiB:.2f} GiB of ratio-128 compressor states for {SGLANG_DSV4_RUNNING} "
                 f"running requests: max_total_num_tokens {full:,}, a window pool of {swa:,} tokens "
                 f"({pools.swa_ratio:g} of them, --swa-full-tokens-ratio).")
    if not fits:
        notes.append(f"Not enough for one {max_len:,}-token request: raise --gpu-util to {min_fraction:.4f} "
                     "(its --mem-fraction-static), or lower the length." if min_fraction <= 1 else
                     f"Not enough for one {max_len:,}-token request at any fraction: quantize, or add cards.")
    return EngineLedger(e.engine, version, total, src, budget, weights_bytes, non_torch, 0.0, kv_cache,
                        pools.bytes_per_full_token * SGLANG_DSV4_PAGE, full // SGLANG_DSV4_PAGE, full, max_len, None,
                        notes,
                        pools.requests(full, max_len), min_fraction, fits, steps=steps)


def beside_budget(led: EngineLedger, budget) -> str:
    """What the plan's generic budget (a capacity.MemoryBudget) and the engine's ledger each leave the cache, said
    where both are printed: the plan's capacity figures are the budget's, the cache the engine allocates the
    ledger's."""
    from llmsize.estimate.runtimes import RUNTIME_NAMES

    basis = (f"{budget.vram_bytes / 2**30:,.2f} GiB x {budget.gpu_util:g}, less the weights and "
             f"{budget.overhead_bytes / 2**30:g} GiB of overhead")
    return (f"Beside the plan's Memory budget ({basis}: {budget.kv_budget_bytes / 1e9:,.2f} GB for the cache, "
            f"behind its longest context and sequences), this ledger is what {RUNTIME_NAMES.get(led.name, led.name)} "
            "itself allocates from its "
            f"{led.total_source.split(' (')[0]}: {led.kv_cache_bytes / 1e9:,.2f} GB = "
            f"{led.kv_cache_bytes / 2**30:,.2f} GiB of cache.")


def loaded_weight_bytes(plan) -> float:
    """The weights an engine loads on a card for the plan: the model's share, and with --spec its draft's (a draft
    model's or the MTP layers'), which vLLM and SGLang load beside it."""
    w = (plan.weights_card or plan.weights).bytes_total
    return w + (plan.speculative.draft_weight_bytes if plan.speculative is not None else 0.0)


def share_inputs(plan) -> dict:
    """EngineInputs' memory share for a plan: given_util, and where it comes from."""
    said = "given" if plan.gpu_util_given else ("the share a machine whose GPU shares its RAM with the OS leaves it, "
                                                "as NVIDIA's DGX Spark playbooks pass it")
    return {"gpu_util": given_util(plan), "gpu_util_said": said}


def given_util(plan) -> float | None:
    """The share of memory an engine runs the plan with where it is not the engine's own default: the user's
    --gpu-util, or on a machine whose GPU shares all its RAM with the OS (a DGX Spark) the share the plan leaves it
    (0.8, as NVIDIA's playbooks pass vLLM); None elsewhere."""
    if plan.gpu_util_given:
        return plan.inputs.gpu_util
    from llmsize.estimate.capacity import SHARED_RAM_GPU_UTIL
    from llmsize.estimate.unified import usable_memory

    return SHARED_RAM_GPU_UTIL if usable_memory(plan.gpu, plan.inputs.wired_limit_bytes).shares_all_ram else None


def drafts_with_model(plan) -> bool:
    """The plan drafts with a separate model (--spec draft=MODEL), not the model's own MTP layers."""
    return plan.inputs.spec is not None and plan.inputs.spec.draft is not None


def spec_tokens_of(plan) -> int:
    """The tokens a plan's speculative step drafts (--spec k), 0 without one."""
    return plan.inputs.spec.k if plan.inputs.spec is not None else 0


def mtp_layers_of(plan) -> int:
    """The model's own MTP layers a plan drafts with (--spec mtp), which an engine loads and caches for; 0 otherwise."""
    from llmsize.estimate.speculative import mtp_module

    spec = plan.inputs.spec
    module = mtp_module(plan.model) if spec is not None and spec.draft is None else None
    return (module.layers or 1) if module is not None else 0


# an engine's cache below this share of the plan's generic budget is said beside the plan's figures
LEDGER_SHORT = 0.8


def ledger_shortfall(led: EngineLedger, budget, plan_sequences: float | None = None) -> str | None:
    """Where the serving engine a plan's expected figure is for allocates materially less cache than the plan's
    generic budget (a capacity.MemoryBudget; below LEDGER_SHORT of it), holds fewer requests at once than the plan's
    `plan_sequences` of the same length where its requests bind (below LEDGER_SHORT of them: SGLang charging a
    sliding layer for every token, vLLM's sliding groups' reserves, states kept apart), or none for one request at
    its length: what the engine holds beside what the plan says, and whether it starts; None where they agree. 70B
    FP8 on an H100: the budget's 3.04 GB (80 GiB x 0.9 less 1.5 GiB) beside vLLM's 0.77 GB (79.21 GiB as CUDA reports
    it x 0.9, its activation peak and CUDA graphs): 2,352 tokens, not one 4,096-token request. Gemma 3 12B on an
    H100 at 32,768 tokens: 20 sequences in the plan's window-limited bytes, 3.6 under SGLang, which charges its
    sliding layers for every token."""
    from llmsize.estimate.runtimes import RUNTIME_NAMES

    few = (plan_sequences is not None and led.requests_bind
           and led.requests_at_once < LEDGER_SHORT * plan_sequences)
    if led.fits_one_request and led.kv_cache_bytes >= LEDGER_SHORT * budget.kv_budget_bytes and not few:
        return None
    name = RUNTIME_NAMES.get(led.name, led.name)
    left = (f"{led.kv_cache_bytes / 1e9:,.2f} GB of cache ({led.kv_cache_tokens:,} tokens)" if led.kv_cache_bytes > 0
            else f"no cache after the weights ({-led.kv_cache_bytes / 1e9:,.2f} GB short)")
    said = (f"{name}'s own memory ledger leaves {left}, where the plan's budget leaves "
            f"{budget.kv_budget_bytes / 1e9:,.2f} GB")
    if led.fits_one_request:
        return said + (f": {led.requests_at_once:,.1f} requests of {led.max_model_len:,} tokens at once"
                       + (f", where the plan's budget holds {int(plan_sequences):,}" if few else ""))
    return said + ": " + no_request_words(led)


def no_request_words(led: EngineLedger) -> str:
    """What an engine whose ledger holds no request of its length does: SGLang starts and caps a request at what its
    pool holds (where the pool holds any), the others refuse to start; with the share from which one is held."""
    if led.name == "sglang" and led.kv_cache_tokens > 0:
        held = (f", from {led.min_fraction:.4f} of its free memory one whole" if led.min_fraction is not None
                and led.min_fraction <= 1 else "")
        return f"it caps a request at the {led.kv_cache_tokens:,} tokens its pool holds{held}"
    share = {"vllm": "gpu_memory_utilization", "sglang": "mem_fraction_static"}.get(led.name,
                                                                                    "kv_cache_free_gpu_mem_fraction")
    return (f"it does not start at {led.max_model_len:,} tokens a request with {share} {led.gpu_util:g}"
            f"{_starts_from(led)}")


def _starts_from(led: EngineLedger) -> str:
    """The share of the card from which an engine that does not start would (its min_fraction), where one does."""
    return f", from {led.min_fraction:.4f} it does" if led.min_fraction is not None and led.min_fraction <= 1 else ""


def plan_ledger(p, model: ModelSpec, gpu: GpuSpec, engine: str, max_model_len: int | None = None
                ) -> EngineLedger | None:
    """`engine`'s ledger of plan `p` (a plan.Plan) with the engine's defaults, its requests of `max_model_len`
    tokens (None: the plan's context); None for a runtime without one (not a serving engine, ENGINES), where the
    weights do not fit, or where the engine's ledger does not cover the plan."""
    if engine not in ENGINES or not p.budget.weights_fit:
        return None
    e = EngineInputs(engine=engine, **share_inputs(p), max_model_len=max_model_len or p.inputs.context_tokens,
                     kv_dtype=p.inputs.kv_dtype, tp=p.inputs.tp, weight_format=p.fmt.id, mtp_layers=mtp_layers_of(p),
                     spec_tokens=spec_tokens_of(p),
                     pp=p.inputs.pp, draft_model=drafts_with_model(p))
    try:
        return engine_ledger(ledger_model(p, model), gpu, loaded_weight_bytes(p), e)
    except LlmsizeError:
        return None


def ledger_model(p, model: ModelSpec) -> ModelSpec:
    """The model an engine's ledger of plan `p` sizes: what one card holds where the plan splits it, the text model
    where its text is served alone (--language-model-only: no tower built), else `model` as the catalog gives it."""
    return p.card_model or (p.model if p.inputs.language_model_only else model)


def launch_sequences(p, engine: str, max_model_len: int, seqs: int | None) -> tuple[int | None, str | None]:
    """A launch line's most running sequences beside the engine's own ledger at its --max-model-len: the plan's
    `seqs` where the engine's cache holds as many (else the whole requests it holds), and where it holds none of
    that length, the words that say so (it does not start), with the share from which it does."""
    led = plan_ledger(p, p.card_model or p.model, p.gpu, engine, max_model_len)
    if led is None:
        return seqs, None
    if not led.fits_one_request:
        return seqs, (f"its own memory ledger holds no {max_model_len:,}-token request: {no_request_words(led)} "
                      f"(plan --engine {engine} itemizes it), or lower the length")
    held = max(1, int(led.requests_at_once))
    return (min(seqs, held) if seqs is not None else None), None


def plan_shortfall(p, model: ModelSpec, gpu: GpuSpec, engine: str) -> str | None:
    """plan_ledger said beside the plan's budget where it holds far less (ledger_shortfall); None where they agree
    or no ledger covers the plan."""
    led = plan_ledger(p, model, gpu, engine)
    if led is None:
        return None
    per = (p.kv_card or p.kv).bytes_per_sequence
    return ledger_shortfall(led, p.budget, p.budget.kv_budget_bytes / per if per > 0 else None)


def engine_ledger(model: ModelSpec, gpu: GpuSpec, weights_bytes: float, e: EngineInputs) -> EngineLedger:
    """The engine's own ledger of `model` (one card's share) on `gpu` with `weights_bytes` of weights."""
    led, util = _engine_ledger(model, gpu, weights_bytes, e)
    return replace(led, gpu_util=util)


def _engine_ledger(model: ModelSpec, gpu: GpuSpec, weights_bytes: float, e: EngineInputs
                   ) -> tuple[EngineLedger, float]:
    if e.engine not in ENGINES:
        raise InvalidValueError(f"--engine `{e.engine}` is not modelled.", f"Use one of: {', '.join(ENGINES)}.")
    if e.gpu_util is not None and not 0 < e.gpu_util <= 1:
        raise InvalidValueError(f"Utilization `{e.gpu_util}` must be in (0, 1].", "Try 0.9.")
    if e.block_size is not None and e.block_size < 1:
        raise InvalidValueError(f"--block-size `{e.block_size}` must be at least 1.", "vLLM's default is 16.")
    max_len = e.max_model_len or model.max_position_embeddings
    if max_len < 1:
        raise InvalidValueError(f"--max-model-len `{max_len}` must be at least 1.", "Pass 1 or more.")
    total, src = cuda_total_bytes(gpu)
    release = vllm_release(e.version) if e.engine == "vllm" else None
    rel = effective_release(e.version) if e.engine == "vllm" else None
    block_size, why_block = ((e.block_size, "given") if e.block_size is not None else
                             vllm_block_size(model, gpu, rel) if rel is not None else
                             (DEFAULT_BLOCK_SIZE, "TensorRT-LLM's block as modelled"))
    layout_extra, layout_note = loaded_layout_extra(model, gpu, e)
    weights_bytes += layout_extra
    per_token, swa_pool = (sglang_token_bytes(model, e.kv_dtype) if e.engine == "sglang"
                           else (token_bytes_charged(model, e.kv_dtype), False))
    page_tokens = 1 if e.engine == "sglang" else block_size  # SGLang's --page-size defaults to 1
    block = per_token * page_tokens
    notes = [f"Total: {total / GiB:.2f} GiB, {src}.",
             f"Weights as loaded: {weights_bytes / GiB:.2f} GiB (the estimate; engines log it as 'GB' but mean GiB)."]
    if layout_note:
        notes.append(f"Layout: {layout_note}.")
    batched = in_flight = in_flight_why = floor = None
    state_pool = state_request = 0.0
    slots = 1
    sglang_scale, sglang_aiter = 1.0, 1.0  # SGLang: the pool a token's cache takes with the states' share; aiter's
    profile = vllm_profile(e.version) if e.engine == "vllm" else None
    v1 = profile is not None and profile.v1
    seqs = e.max_num_seqs
    graphs = 0
    if profile is not None:
        if v1:
            batched_default, seqs_default = v1_defaults(gpu, total, e.offline, rel, model)
            floor = prefix_lm_floor(model, rel)
            batched = e.max_num_batched_tokens or batched_default
            seqs = e.max_num_seqs if e.max_num_seqs != DEFAULT_MAX_NUM_SEQS else seqs_default
            if batched < seqs:  # SchedulerConfig.verify_max_model_len refuses the engine's start
                raise InvalidValueError(
                    f"--max-num-batched-tokens {batched:,} is below vLLM's max_num_seqs, {seqs} on this card: vLLM "
                    "refuses to start (max_num_batched_tokens must be >= max_num_seqs).",
                    f"Give --max-num-batched-tokens {seqs} or more.")
            if release is not None and release > VLLM_LATEST_READ:
                notes.append(f"vLLM {'.'.join(map(str, release))} is newer than the newest release read here, "
                             f"{'.'.join(map(str, VLLM_LATEST_READ))}: its rules are that release's.")
            in_flight, in_flight_why = in_flight_tokens(batched, rel, e.pp, e.draft_model, v1_runner_model(model))
        else:
            batched_default, why_batched = v0_batched_tokens(model, gpu, max_len, release)
            batched = e.max_num_batched_tokens or batched_default
        act = activation_peak_bytes(model, batched, seqs)
        encoder = encoder_profile(model, batched, e.tp) if v1 else None
        text_act = act
        if encoder is not None:
            act = encoder.peak_with(act)
        extensible = v1 and rel >= EXTENSIBLE_FROM
        util = e.gpu_util if e.gpu_util is not None else (1.0 if extensible else VLLM_UTIL if rel >= (0, 20, 0)
                                                          else VLLM_UTIL_BEFORE_0_20)
        budget = total * util
        charges = v1 and vllm_charges_graphs(rel, gpu)
        if charges:
            graphs = e.cudagraph_bytes if e.cudagraph_bytes is not None else DEFAULT_CUDAGRAPH_BYTES
        if extensible:
            nt, why_nt = (e.non_torch_bytes, "given") if e.non_torch_bytes is not None else (
                DEFAULT_NON_TORCH_BYTES * e.tp, f"{DEFAULT_NON_TORCH_BYTES / GiB:.2f} GiB x tp {e.tp}: from 0.34 the "
                "memory held before vLLM's first snapshot, the communicators' included, comes off the cache")
            margin = max(EXTENSIBLE_MARGIN_FLOOR[gpu.vendor == "AMD"], EXTENSIBLE_MARGIN_FRACTION * act)
            by_util = budget - weights_bytes - graphs
            by_free = total - nt - weights_bytes - graphs - margin
            kv_cache = min(by_util, by_free) - act
            headroom_cap = total - nt - margin
            steps = (((f"x {util:g} gpu_memory_utilization", budget), ("- weights", weights_bytes),
                      ("- CUDA graphs", graphs)) if by_util < by_free else
                     (("- non-torch memory", nt), ("- weights", weights_bytes), ("- CUDA graphs", graphs),
                      ("- margin", margin))) + (("- activation peak", act),)
        else:
            nt, why_nt = (e.non_torch_bytes, "given") if e.non_torch_bytes is not None else non_torch_default(
                model, e.tp, release, batched, v1)
            kv_cache = budget - weights_bytes - nt - act - graphs
            headroom_cap = None
            steps = ((f"x {util:g} gpu_memory_utilization", budget), ("- weights", weights_bytes),
                     ("- non-torch memory", nt), ("- activation peak", act)) + (
                (("- CUDA graphs", graphs),) if graphs else ())
        default = (f"V1 default for {'the LLM class' if e.offline else 'vllm serve'} on this card" + (
            ", raised to one video item of this prefix-LM model (vLLM >= 0.22 keeps an item in one forward)"
            if floor is not None and batched_default == floor else "") if v1 else why_batched)
        version = profile.label if not extensible else (
            "V1 >= 0.34 (extensible KV cache sized after warmup; hybrid KV-cache manager; 'GPU KV cache size' = max "
            "concurrency x max_model_len)")
        util_why = (e.gpu_util_said if e.gpu_util is not None else
                    "the extensible KV cache's, vLLM >= 0.34 on CUDA and ROCm" if extensible else
                    "vLLM's default from 0.20" if rel >= (0, 20, 0) else "vLLM's default before 0.20")
        notes += [f"gpu_memory_utilization {util:g} ({util_why}).",
                  f"Profiling forward over max_num_batched_tokens {batched:,}"
                  f"{'' if e.max_num_batched_tokens else f' ({default})'} and max_num_seqs {seqs}: activation "
                  f"peak {act / GiB:.2f} GiB (modelled).",
                  f"non_torch memory {nt / GiB:.2f} GiB ({why_nt}).",
                  (f"CUDA graphs: {graphs / GiB:.2f} GiB charged (vLLM >= 0.20 profiles them before sizing the "
                   "cache, on ROCm from 0.26; its estimates in published logs run from 0.13 to 2.22 GiB on "
                   "one node: --cudagraph-gib sets one)" if charges and not extensible else
                   f"CUDA graphs: {graphs / GiB:.2f} GiB charged (vLLM >= 0.34 measures their capture after warmup; "
                   "earlier releases' published estimates run from 0.13 to 2.22 GiB on one node: --cudagraph-gib sets "
                   "one)"
                   if charges else
                   "CUDA graphs are captured after the KV allocation, outside the ledger.")]
        if encoder is not None:
            notes.append(f"Vision encoder profiled before the cache ({encoder.items} image{'s' * (encoder.items > 1)} "
                         f"of {encoder.tokens // encoder.items:,} tokens, the processor's largest, {encoder.patches:,} "
                         f"patches): its forward peaks at {encoder.peak_bytes / GiB:.2f} GiB against the text "
                         f"model's {text_act / GiB:.2f}, and its outputs stay cached ({encoder.cache_bytes / GiB:.2f} "
                         f"GiB): {act / GiB:.2f} GiB of activation peak; --limit-mm-per-prompt "
                         "'{\"image\": 0, \"video\": 0}' or --language-model-only skips it and the tower.")
        elif v1 and unprofiled_tower(model) is not None:
            notes.append("vLLM also profiles this model's vision encoder on its largest inputs before sizing the "
                         "cache; its processor's largest input is not read here, so the activation peak leaves it out "
                         "and the cache may come out smaller (--language-model-only skips it).")
        if extensible:
            notes.append(f"Extensible KV cache (vLLM >= 0.34): sized after warmup from the memory then free, less a "
                         f"margin of {margin / GiB:.2f} GiB (max({EXTENSIBLE_MARGIN_FLOOR[gpu.vendor == 'AMD'] / GiB:g}"
                         f" GiB, 0.75 x the activation peak)) and the peak itself, within total x utilization less "
                         f"the weights and graphs" + ("" if by_free <= by_util else
                                                      f" (at {util:g} that share binds: the margin and the non-torch "
                                                      "memory stay outside it)")
                         + "; derived from vLLM's source, not checked against a log. --engine-version 0.33 gives "
                         "the estimate-based ledger.")
        if v1 and e.block_size is None:
            notes.append(f"Block: {block_size} tokens ({why_block}).")
        if not v1:
            notes.append("Every attention layer is charged per token, sliding-window ones included (V0).")
        non_torch = nt
    elif e.engine == "sglang":
        nt = e.non_torch_bytes if e.non_torch_bytes is not None else DEFAULT_NON_TORCH_BYTES * e.tp
        act, non_torch = 0.0, nt
        free = total - non_torch
        mla = bool(mla_mixers(model))
        tower = sglang_vision_tower(model)
        util, why_util = ((e.gpu_util, e.gpu_util_said) if e.gpu_util is not None else
                          sglang_mem_fraction(gpu, e.tp, e.pp, mla, tower, model.family))
        # on ROCm, SGLang's aiter attention backend takes 0.85 of the fraction, given or not, for a context over
        # 8,192 tokens (0.5.23 arg_groups/attention_hook.py)
        aiter = sglang_aiter_attention(model, gpu) and max_len > 8192
        if aiter:
            util = round(util * 0.85, 4)
            why_util += "; x 0.85: ROCm's aiter attention backend over a context above 8,192 tokens"
        budget = free * util
        kv_cache = budget - weights_bytes
        steps = (("- non-torch memory", non_torch), ("free at start", free),
                 (f"x {util:g} mem_fraction_static", budget), ("- weights", weights_bytes))
        states = bool(mixers_of(model, STATE_KINDS))
        sglang_aiter = 0.85 if aiter else 1.0
        if states:
            sglang_scale = 1 + SGLANG_MAMBA_FULL_MEMORY_RATIO
        if states and kv_cache > 0:
            state_share = state_pool = kv_cache * SGLANG_MAMBA_FULL_MEMORY_RATIO / (1 + SGLANG_MAMBA_FULL_MEMORY_RATIO)
            kv_cache -= state_share
            steps += (("- recurrent states' pool", state_share),)
            state_request = sum(b for k, b in kv_bytes(model, 1, e.kv_dtype).bytes_by_kind.items() if k in STATE_KINDS)
            slots = sglang_mamba_slots_per_request(model.family)
        version = "mem_fraction_static ledger (static pool = free at start x fraction - weights)"
        notes.append(f"mem_fraction_static {util:g} ({why_util}).")
        text_only = sglang_text_only_note(model)
        if text_only:
            notes.append(text_only)
        notes.append(f"Free at start: total - {non_torch / GiB:.2f} GiB of CUDA context and communicators "
                     "(assumed; more with tensor parallelism).")
        notes.append("SGLang keeps activations and CUDA graphs in the 1 - mem_fraction_static left over.")
        if swa_pool:
            notes.append(f"Hybrid SWA pool: the sliding-window layers keep {SGLANG_SWA_FULL_TOKENS_RATIO:g} of the "
                         "full layers' tokens (--swa-full-tokens-ratio); the tokens logged are the full layers'.")
        if states:
            notes.append(f"Mamba, linear-attention and short-conv states: their own pool takes "
                         f"{SGLANG_MAMBA_FULL_MEMORY_RATIO:g} / {1 + SGLANG_MAMBA_FULL_MEMORY_RATIO:g} of the static "
                         "pool (mamba_full_memory_ratio, with the radix cache on); the attention cache the rest"
                         + (f"; it holds {int(state_pool / state_request):,} states of {state_request / 2**20:,.1f} "
                            f"MiB (max_mamba_cache_size), {slots} a running request (its radix cache's), so "
                            f"{int(state_pool / state_request) // slots:,} running requests at most"
                            if state_request else "") + ".")
    else:
        nt = e.non_torch_bytes if e.non_torch_bytes is not None else DEFAULT_NON_TORCH_BYTES * e.tp
        runtime = e.runtime_bytes if e.runtime_bytes is not None else activation_peak_bytes(
            model, e.max_num_batched_tokens or TRTLLM_MAX_NUM_TOKENS, e.max_num_seqs)
        act, non_torch = runtime, nt
        free = total - weights_bytes - runtime - non_torch
        budget = free
        util = e.gpu_util if e.gpu_util is not None else TRTLLM_FREE_FRACTION
        kv_cache = free * util if free > 0 else free  # a shortfall stays whole: no fraction makes it fit
        steps = (("- weights", weights_bytes), ("- non-torch memory", non_torch), ("- runtime buffers", runtime),
                 ("free", free)) + (((f"x {util:g} kv_cache_free_gpu_mem_fraction", kv_cache),) if free > 0
                                    else ())
        version = "kv_cache_free_gpu_mem_fraction of the free memory after engine and runtime buffers"
        how = ("given" if e.runtime_bytes is not None else "modelled as vLLM's activation peak over "
               f"max_num_tokens {e.max_num_batched_tokens or TRTLLM_MAX_NUM_TOKENS:,}")
        notes.append(f"Runtime buffers {runtime / GiB:.2f} GiB ({how}); TensorRT-LLM's exact formula is not "
                     "verified here.")
        if mixers_of(model, STATE_KINDS):
            notes.append("Mamba, linear-attention and short-conv states: TensorRT-LLM's pool for them is not "
                         "modelled; the pool above is charged as attention KV only.")
    if v1 and e.kv_dtype.lower().startswith("fp8") and is_dsv4(model):
        return _dsv4_ledger(model, e, max_len, (batched, in_flight, in_flight_why), notes,
                            (total, src, budget, weights_bytes, nt, act, kv_cache, graphs, steps, version,
                             headroom_cap)), util
    if e.engine == "sglang" and is_dsv4(model):
        return _sglang_dsv4_ledger(model, e, max_len, notes, (total, src, budget, weights_bytes, non_torch, kv_cache,
                                                               steps, version)), util
    layout = v1_layout(model, e.kv_dtype, block_size, mamba_checkpoint_align(model, gpu, rel)) if v1 else None
    state_why = None
    if layout is not None and layout.state_bytes:
        blocks, state_why = mamba_state_blocks(model, gpu, rel, e.spec_tokens)
        layout = replace(layout, state_blocks=blocks)
    windows = compressed_window_bytes(model, e.kv_dtype, max_len)
    one_request = (layout.blocks_per_request(max_len, in_flight) * layout.group_size * layout.page_bytes
                   if layout is not None else -(-max_len // page_tokens) * block + windows)
    if profile is not None:
        min_fraction = vllm_min_fraction(total, weights_bytes, nt, act, graphs, one_request, headroom_cap)
    elif e.engine == "sglang":  # the attention's share of the pool beside the states', before aiter's 0.85
        min_fraction = (weights_bytes + one_request * sglang_scale) / (total - non_torch) / sglang_aiter
    else:
        min_fraction = None  # a fraction of what is free: no fraction helps when nothing is
    fits = kv_cache >= one_request
    if not fits:
        lead = f"Not enough for one {max_len:,}-token request"
        if min_fraction is None:  # TensorRT-LLM: its paged cache must hold one sequence to completion
            more = "raise --gpu-util (its kv_cache_free_gpu_mem_fraction), " if kv_cache > 0 else ""
            notes.append(f"{lead}: TensorRT-LLM refuses to start (its paged cache must hold one sequence to "
                         f"completion): {more}lower --max-model-len, quantize, or add cards.")
        elif e.engine == "sglang" and kv_cache > 0:  # it starts, its request length capped (tp_worker max_req_len)
            notes.append(f"{lead}: SGLang starts and caps a request at the {int(kv_cache // block):,} tokens its pool "
                         "holds (it warns)" + (f"; from {min_fraction:.4f} of free memory it holds one whole"
                                               if min_fraction <= 1 else "; no fraction holds a whole one") + ".")
        elif e.engine == "sglang":
            leaves = weights_bytes / (total - non_torch) / sglang_aiter  # the fraction from which the weights leave any
            notes.append("SGLang refuses to start: " + (
                "the weights take more than its free memory at any fraction: quantize, or add cards." if leaves >= 1
                else f"the weights leave nothing for the cache at this fraction (from {leaves:.4f} of free memory "
                f"they do; " + (f"{min_fraction:.4f} holds one {max_len:,}-token request)." if min_fraction <= 1
                                else "no fraction holds a whole request).")))
        elif min_fraction <= 1:
            notes.append(f"{lead}: the engine refuses to start below {min_fraction:.4f} of "
                         f"{'total' if profile else 'free'} memory (or lower --max-model-len).")
        else:
            notes.append(f"{lead} at any utilization (the engine refuses to start): "
                         + ("lower --max-model-len, quantize, or add cards." if kv_cache > 0 else
                            "the weights and the charges before the cache exceed the card at any length: quantize, "
                            "add cards, or check the charges given (--non-torch-gib, --cudagraph-gib)."))
    if windows:
        notes.append(f"DeepSeek-V4's cache: charged as its compressed rows and indexer keys ({per_token:,.0f} B a "
                     f"token) and each request's windows ({windows / 2**20:,.2f} MiB); the engine's own pools for it "
                     "(blocks of 256 tokens, compressor states in the same pages) are not modelled.")
    elif v1 and layout is None:
        notes.append("No attention layer: V1's mamba-only layout is not modelled; the state is charged per token "
                     "instead.")
    if layout is not None and layout.state_bytes:
        bs = layout.groups[0][2] if layout.groups[0][0] != "mamba" else layout.groups[-1][2]
        grows = "grows to" if bs > block_size else "stays at"
        notes.append(f"Hybrid with constant-state layers (vLLM's mamba layout: Mamba, linear attention, short conv): a "
                     f"layer's state is {layout.state_bytes:,.0f} B, so the attention block {grows} "
                     f"{bs:,} tokens and the state page is padded by "
                     f"{100 * (layout.page_bytes / layout.state_bytes - 1):.2f}% (vLLM logs both); a request "
                     f"reserves state pages in each mamba group: {state_why}.")
    if layout is not None:
        unit = layout.group_size * layout.page_bytes  # one block across the group_size buffers
        blocks = max(0, int(kv_cache // unit))
        need = layout.blocks_per_request(max_len, in_flight)
        conc = blocks / need
        running = running_concurrency_of(layout, blocks, max_len, in_flight)
        if running is not None:
            notes.append(f"Past their prefill, {running:,.1f} requests of {max_len:,} tokens run at once, not "
                         f"{conc:,.2f}: a sliding group frees a running request's blocks below its window, so it "
                         f"holds {layout.blocks_per_request(max_len, 1):,} blocks; the logged concurrency reserves "
                         f"each its prefill's {need:,} (one such reserve kept aside here).")
        old_tokens = blocks // len(layout.groups) * min(g[2] for g in layout.groups)
        tokens = int(conc * max_len) if profile.tokens_from_concurrency else old_tokens
        if len(layout.groups) > 1:
            kinds = ", ".join(f"{sum(1 for g in layout.groups if g[0] == k)} {k} (block {bs})"
                              for k, bs in dict((g[0], g[2]) for g in layout.groups).items())
            other = (f"Releases before 0.21 logged {old_tokens:,} tokens (num_blocks // groups x block_size) for "
                     "the same pool." if profile.tokens_from_concurrency else
                     f"From 0.21 the same pool is logged as {int(conc * max_len):,} tokens (max concurrency x "
                     "max_model_len).")
            notes.append(f"Hybrid KV-cache manager: {len(layout.groups)} groups of {layout.group_size} layers "
                         f"({kinds}), {layout.padded_layers} padding layer(s), pages of {layout.page_bytes:,} B; "
                         f"a {max_len:,}-token request takes {need:,} blocks"
                         + (f", its sliding-window groups' for the window and {in_flight:,} tokens in flight "
                            f"({in_flight_why})" if any(g[0] == "sliding" for g in layout.groups) else "")
                         + f". {other}")
        return EngineLedger(e.engine, version, total, src, budget, weights_bytes, non_torch, act, kv_cache,
                            unit, blocks, tokens, max_len, batched, notes, conc, min_fraction, fits,
                            len(layout.groups), graphs, steps, running_concurrency=running,
                            requests_bind=any(g[0] in ("sliding", "mamba") for g in layout.groups)), util
    blocks = max(0, int(kv_cache // block)) if block > 0 else 0
    return EngineLedger(e.engine, version, total, src, budget, weights_bytes, non_torch, act, kv_cache, block,
                        blocks, blocks * page_tokens, max_len, batched, notes,
                        concurrency=max(0.0, kv_cache) / one_request if windows else None, min_fraction=min_fraction,
                        fits_one_request=fits, cudagraph_bytes=graphs, steps=steps,
                        # SGLang outside its hybrid SWA pool charges a sliding layer for every token: it holds fewer
                        # requests than the plan's window-limited bytes say. TensorRT-LLM's default is one
                        # full-context pool too (no max_attention_window from the config before its PR #18767,
                        # 2026-09, which derives windows from layer_types), but its published gpt-oss tables follow
                        # the window-limited requests (benchmarks/serving_throughput.py; RESULTS.md 2026-12-07):
                        # its requests are left to its bytes until a log settles which its runs used
                        requests_bind=bool(swa_pool) or state_pool > 0 or (
                            e.engine == "sglang" and bool(mixers_of(model, ("sliding",)))),
                        state_pool_bytes=state_pool,
                        state_bytes_per_request=state_request, state_slots_per_request=slots), util
