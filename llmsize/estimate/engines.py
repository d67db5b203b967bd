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

SGLang: the static pool is total x mem_fraction_static - weights, all of it KV (server arguments docs).
TensorRT-LLM: kv_cache_free_gpu_mem_fraction x the memory free after the engine and its runtime buffers
(TensorRT-LLM#224: a fraction of *free* memory); the runtime buffers are an input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.errors import InvalidValueError
from llmsize.estimate.kv import kv_bytes
from llmsize.units import GiB

ENGINES = ("vllm", "sglang", "trtllm")
ACT_BYTES = 2
DEFAULT_NON_TORCH_BYTES = int(0.3 * GiB)  # logs: 0.03 GiB (vllm#13882), 0.35 GiB (vllm#10517)
DEFAULT_BLOCK_SIZE = 16  # vLLM and TensorRT-LLM tokens per block
DEFAULT_MAX_NUM_SEQS = 256  # vLLM V0 default
DEFAULT_TRTLLM_FREE_FRACTION = 0.9  # TensorRT-LLM kv_cache_free_gpu_mem_fraction default


@dataclass(frozen=True)
class EngineInputs:
    engine: str = "vllm"
    gpu_util: float = 0.90  # vLLM gpu_memory_utilization / SGLang mem_fraction_static / TRT-LLM free fraction
    max_model_len: int | None = None  # default: the model's max_position_embeddings
    max_num_batched_tokens: int | None = None  # vLLM V0 default: max(max_model_len, 2048)
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    block_size: int = DEFAULT_BLOCK_SIZE
    kv_dtype: str = "bf16"
    non_torch_bytes: int = DEFAULT_NON_TORCH_BYTES
    runtime_bytes: int | None = None  # TensorRT-LLM: engine runtime buffers; default: the vLLM activation peak


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

    @property
    def max_concurrency(self) -> float:
        return self.kv_cache_tokens / self.max_model_len


def cuda_total_bytes(gpu: GpuSpec) -> tuple[int, str]:
    if gpu.memory_cuda_bytes:
        return gpu.memory_cuda_bytes, "CUDA-reported total (catalog memory_cuda_bytes)"
    return gpu.memory_bytes, "NVML/nominal total (no CUDA-reported total in the catalog: a little high)"


def token_bytes_charged(model: ModelSpec, kv_dtype: str) -> float:
    """Bytes one token occupies in the engine's paged cache: every attention layer charged per token."""
    per_kind = kv_bytes(model, 1, kv_dtype).bytes_per_token_by_kind
    return sum(per_kind.get(k, 0.0) for k in ("full", "sliding", "mla"))


def activation_peak_bytes(model: ModelSpec, tokens: int, seqs: int) -> float:
    widest = 0
    for g in model.layer_groups:
        m = g.mlp
        if m is None:
            continue
        if m.kind == "dense":
            widest = max(widest, m.intermediate_size)
        else:  # routed tokens x top-k through expert MLPs, plus a shared expert
            widest = max(widest, m.experts_per_token * m.moe_intermediate_size
                         + m.num_shared_experts * (m.shared_intermediate_size or m.moe_intermediate_size))
    return tokens * (3 * widest + 2 * model.hidden_size) * ACT_BYTES + seqs * model.vocab_size * (ACT_BYTES + 4)


def engine_ledger(model: ModelSpec, gpu: GpuSpec, weights_bytes: float, e: EngineInputs) -> EngineLedger:
    if e.engine not in ENGINES:
        raise InvalidValueError(f"--engine `{e.engine}` is not modelled.", f"Use one of: {', '.join(ENGINES)}.")
    if not 0 < e.gpu_util <= 1:
        raise InvalidValueError(f"Utilization `{e.gpu_util}` must be in (0, 1].", "Try 0.9.")
    if e.block_size < 1:
        raise InvalidValueError(f"--block-size `{e.block_size}` must be at least 1.", "vLLM's default is 16.")
    max_len = e.max_model_len or model.max_position_embeddings
    if max_len < 1:
        raise InvalidValueError(f"--max-model-len `{max_len}` must be at least 1.", "Pass 1 or more.")
    total, src = cuda_total_bytes(gpu)
    per_token = token_bytes_charged(model, e.kv_dtype)
    block = per_token * e.block_size
    notes = [f"Total: {total / GiB:.2f} GiB, {src}.",
             f"Weights as loaded: {weights_bytes / GiB:.2f} GiB (the estimate; engines log it as 'GB' but mean GiB)."]
    batched = None
    if e.engine == "vllm":
        batched = e.max_num_batched_tokens or max(max_len, 2048)
        act = activation_peak_bytes(model, batched, e.max_num_seqs)
        budget = total * e.gpu_util
        kv_cache = budget - weights_bytes - e.non_torch_bytes - act
        version = "V0 worker ledger (vLLM 0.6.x 'Memory profiling results')"
        notes += [f"Profiling forward over max_num_batched_tokens {batched:,}"
                  f"{'' if e.max_num_batched_tokens else ' (V0 default max(max_model_len, 2048))'} and "
                  f"max_num_seqs {e.max_num_seqs}: activation peak {act / GiB:.2f} GiB (modelled).",
                  f"non_torch memory {e.non_torch_bytes / GiB:.2f} GiB (assumed; logs show 0.03-0.35 GiB).",
                  "Every attention layer is charged per token, sliding-window ones included (V0 allocator); "
                  "CUDA graphs are captured after the KV allocation, outside the ledger."]
        non_torch = e.non_torch_bytes
    elif e.engine == "sglang":
        act, non_torch = 0.0, 0.0
        budget = total * e.gpu_util
        kv_cache = budget - weights_bytes
        version = "mem_fraction_static ledger (static pool = total x fraction - weights)"
        notes.append("SGLang keeps activations and CUDA graphs in the 1 - mem_fraction_static left over.")
    else:
        runtime = e.runtime_bytes if e.runtime_bytes is not None else activation_peak_bytes(
            model, e.max_num_batched_tokens or max(max_len, 2048), e.max_num_seqs)
        act, non_torch = runtime, e.non_torch_bytes
        free = total - weights_bytes - runtime - non_torch
        budget = free
        kv_cache = free * e.gpu_util
        version = "kv_cache_free_gpu_mem_fraction of the free memory after engine and runtime buffers"
        how = "given" if e.runtime_bytes is not None else "modelled as vLLM's activation peak"
        notes.append(f"Runtime buffers {runtime / GiB:.2f} GiB ({how}); TensorRT-LLM's exact formula is not "
                     "verified here.")
    blocks = max(0, int(kv_cache // block)) if block > 0 else 0
    return EngineLedger(e.engine, version, total, src, budget, weights_bytes, non_torch, act, kv_cache, block,
                        blocks, blocks * e.block_size, max_len, batched, notes)
