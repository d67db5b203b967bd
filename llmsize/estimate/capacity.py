"""Memory budget: what is left for the KV cache, the longest context, how many sequences fit.

usable for KV = VRAM * utilization - weights - runtime overhead   (DESIGN.md; vLLM's ledger is the same
shape: total * gpu_memory_utilization - weights - non-torch memory - activation peak).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.errors import InvalidValueError
from llmsize.estimate.kv import kv_bytes
from llmsize.units import GiB

# vLLM ledgers in shared/reference/engine-logs.yaml: non-torch + activation peak = 0.03 + 1.42 GiB
# (Qwen2.5-7B, 4,096 batched tokens, vllm#13882) and 0.35 + 2.07 GiB (Llama-3.1-8B, 20,000, vllm#10517).
DEFAULT_OVERHEAD_BYTES = int(1.5 * GiB)
DEFAULT_GPU_UTIL = 0.90  # vLLM's gpu_memory_utilization default (SGLang's mem_fraction_static is close)
# llama.cpp (and Ollama, LM Studio) reserve no share of the card: they allocate their buffers and leave the rest
# (its --fit aims to leave 1,024 MiB free, --fit-target; the overhead above holds that and its compute buffers)
WHOLE_CARD_GPU_UTIL = 1.0
# a unified machine whose GPU may use all its RAM (DGX Spark, Jetson): the share NVIDIA's DGX Spark playbooks give
# vLLM (--gpu-memory-utilization 0.8; SGLang --mem-fraction-static 0.75), the OS and its page cache using the rest
SHARED_RAM_GPU_UTIL = 0.80
LLAMACPP_RUNTIMES = ("llamacpp", "ollama", "lmstudio")
NO_SEQUENCE = "Not one sequence's cache fits"  # the plan's warning's start (an engine's placement may hold it)
NO_WEIGHTS = "The weights do not fit"  # likewise, where the weights and the overhead exceed the budget
WHOLE_CARD_RUNTIMES = (*LLAMACPP_RUNTIMES, "mlx")  # MLX too allocates what it needs within Metal's working set


def default_gpu_util(runtime: str | None, shares_all_ram: bool = False) -> tuple[float, str | None]:
    """The share of VRAM a runtime's plan budgets when --gpu-util is not given, and the note that says why where it
    is not vLLM's 0.9. `shares_all_ram`: a unified machine whose GPU budget is its whole RAM (a DGX Spark, a
    Jetson), where the OS needs its share whatever the runtime."""
    if shares_all_ram:
        return SHARED_RAM_GPU_UTIL, (f"Budget: {SHARED_RAM_GPU_UTIL:g} of the memory the GPU shares with the OS and "
                                     "its page cache, as NVIDIA's DGX Spark playbooks run vLLM (--gpu-memory-"
                                     "utilization 0.8; --gpu-util sets another)")
    if runtime in WHOLE_CARD_RUNTIMES:
        return WHOLE_CARD_GPU_UTIL, ("Budget: all the memory the GPU may use (a card's VRAM, a Mac's Metal working "
                                     "set), as llama.cpp and MLX reserve no share of it "
                                     f"(vLLM's default is {DEFAULT_GPU_UTIL:g}; --gpu-util sets one)")
    return DEFAULT_GPU_UTIL, None


@dataclass(frozen=True)
class EngineShare:
    """Where a budget is an engine's own ledger (llama.cpp's: estimate/llamacpp_budget.py): what its overhead holds,
    and the weights it keeps in host memory with every layer on the card."""

    engine: str
    compute_bytes: int  # the card's compute buffer at the plan's context
    margin_bytes: int  # what the engine leaves free (llama.cpp's --fit-target)
    host_weights_bytes: int  # weights in host memory with every layer on the card (llama.cpp: the token embedding)
    card_basis: str  # what the card's memory is read as (the CUDA total, the reported total, Metal's working set)
    projector_bytes: int = 0  # an mmproj on the card, its weights and encoder's buffer (estimate/mmproj.py)
    projector_holds: str = ""  # what projector_bytes holds, in words (mmproj.projector_holds)


@dataclass(frozen=True)
class MemoryBudget:
    vram_bytes: int
    gpu_util: float
    weights_bytes: float
    overhead_bytes: float
    scores_bytes: float = 0.0  # attention scores held during a prefill without flash attention (--no-flash-attn)
    engine: EngineShare | None = None  # None: the generic budget (VRAM x utilization - weights - overhead)

    @property
    def budget_bytes(self) -> float:
        return self.vram_bytes * self.gpu_util

    @property
    def kv_budget_bytes(self) -> float:
        """What is left for the KV cache; negative when the weights (or the scores of an unfused prefill) do not
        fit."""
        return self.budget_bytes - self.weights_bytes - self.overhead_bytes - self.scores_bytes

    @property
    def weights_fit(self) -> bool:
        return self.budget_bytes - self.weights_bytes - self.overhead_bytes > 0


def overhead_of(inputs) -> float:
    """A plan's runtime overhead: the one given (--overhead-gib), else the default."""
    return DEFAULT_OVERHEAD_BYTES if inputs.overhead_bytes is None else inputs.overhead_bytes


def check_budget_inputs(gpu_util: float, overhead_bytes: float) -> None:
    if not 0 < gpu_util <= 1:
        raise InvalidValueError(f"GPU utilization `{gpu_util}` must be in (0, 1].", "Try --gpu-util 0.9.")
    if overhead_bytes < 0:
        raise InvalidValueError(f"Runtime overhead `{overhead_bytes / GiB:g}` GiB is negative.",
                                "Pass --overhead-gib 0 or more.")


def memory_budget(gpu: GpuSpec, weights_bytes: float, gpu_util: float = DEFAULT_GPU_UTIL,
                  overhead_bytes: float = DEFAULT_OVERHEAD_BYTES, usable_bytes: int | None = None,
                  scores_bytes: float = 0.0) -> MemoryBudget:
    """`usable_bytes`: what the GPU may use where that is not its memory (a unified machine's share,
    estimate/unified.py); default the card's memory. `scores_bytes`: an unfused prefill's attention scores
    (estimate/prefill.py unfused_scores_bytes), held beside the cache."""
    check_budget_inputs(gpu_util, overhead_bytes)
    return MemoryBudget(usable_bytes or gpu.memory_bytes, gpu_util, weights_bytes, overhead_bytes, scores_bytes)


@dataclass(frozen=True)
class ContextLimit:
    tokens: int
    limited_by: str  # "memory" or "model" (max_position_embeddings)


def max_context_tokens(model: ModelSpec, kv_dtype: str, kv_budget_bytes: float,
                       extra_bytes=None, states: str = "neutral") -> ContextLimit:
    """Longest context one sequence can hold: the largest L with kv_bytes(L) (+ extra_bytes(L): an unfused
    prefill's scores for a prompt of L tokens) <= budget, capped at the model's max_position_embeddings. Both are
    non-decreasing in L, so bisect."""
    def need(tokens: int) -> float:
        return kv_bytes(model, tokens, kv_dtype, states).bytes_per_sequence + \
            (extra_bytes(tokens) if extra_bytes else 0.0)

    limit = model.max_position_embeddings
    if need(limit) <= kv_budget_bytes:
        return ContextLimit(limit, "model")
    if need(0) > kv_budget_bytes:
        return ContextLimit(0, "memory")
    lo, hi = 0, limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if need(mid) <= kv_budget_bytes:
            lo = mid
        else:
            hi = mid
    return ContextLimit(lo, "memory")


def max_concurrent_sequences(model: ModelSpec, kv_dtype: str, context_tokens: int,
                             kv_budget_bytes: float, states: str = "neutral") -> int:
    """Sequences of `context_tokens` each whose caches fit the budget together."""
    per_seq = kv_bytes(model, context_tokens, kv_dtype, states).bytes_per_sequence
    if kv_budget_bytes <= 0:
        return 0
    if per_seq == 0:
        raise InvalidValueError("This model caches nothing at context 0.", "Pass --context 1 or more.")
    return int(kv_budget_bytes // per_seq)


def kv_pool_tokens(bytes_per_token: float, kv_budget_bytes: float) -> int | None:
    """Tokens of growing cache (full + MLA layers) the budget holds, shared among sequences; the
    engines' 'KV cache size in tokens'. None when no layer grows (pure SSM / sliding models)."""
    if bytes_per_token <= 0:
        return None
    return max(0, int(kv_budget_bytes // bytes_per_token))
