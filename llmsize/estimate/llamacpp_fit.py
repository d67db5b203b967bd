"""Fitting a GGUF model on one card the way llama.cpp's `--fit` does: keep a margin of free memory (its
`--fit-target`, 1024 MiB by default), and when the model does not fit, move weights to the host: the routed
experts of the first layers for a MoE model (`--n-cpu-moe N`: attention and the dense parts stay on the GPU),
else whole layers (`-ngl`, the last layers stay on the GPU); then the largest context that still fits.

The card's free memory is taken as its total (what CUDA reports where the catalog has it) less `reserve_bytes`
(the backend's own context and whatever else runs on the card); llama.cpp measures it at start-up instead.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.estimate.llamacpp_memory import (
    CTX_PAD,
    OP_OFFLOAD_MIN_BATCH,
    LlamaCppLedger,
    LlamaCppSettings,
    file_layout,
    llamacpp_ledger,
)

FIT_TARGET_BYTES = 1024 * 2**20  # llama.cpp --fit-target default: 1024 MiB of margin per device


@dataclass(frozen=True)
class FitResult:
    how: str  # "as asked", "n_cpu_moe", "gpu_layers", "none"
    settings: LlamaCppSettings
    ledger: LlamaCppLedger
    budget_bytes: int
    max_context_tokens: int | None  # the largest -c (per all slots) with this placement; None if none fits
    ram_bytes: int | None = None  # a unified machine's RAM, which the GPU's and the host's buffers share
    # nothing fits only because the GPU stages host weights for a ubatch's matmuls (op offload, from 32 tokens):
    # with every layer on the host and --ubatch-size 16 it would
    staging_bound: bool = False

    @property
    def max_slot_tokens(self) -> int | None:
        """The largest context one of --parallel slots holds with this placement (Ollama's num_ctx): the largest -c
        shared by the slots."""
        if self.max_context_tokens is None:
            return None
        return self.max_context_tokens // max(1, self.settings.parallel)


def host_total_bytes(led: LlamaCppLedger) -> int:
    """What llama.cpp allocates in host memory: the CPU's model, cache, state and compute buffers, and the output."""
    cpu = next((d for d in led.devices if d.name == "CPU"), None)
    own = cpu.total_bytes if cpu else 0
    return own + led.output_buffer_bytes


def fits(led: LlamaCppLedger, budget: int, ram_bytes: int | None = None) -> bool:
    """The GPU's buffers within the budget; on a unified machine (`ram_bytes`) the host's too, within the same RAM
    beside the GPU's."""
    if ram_bytes is not None and led.gpu_total_bytes + host_total_bytes(led) > ram_bytes - FIT_TARGET_BYTES:
        return False
    return led.gpu_total_bytes <= budget


def fit_target_bytes(model: ModelSpec, s: LlamaCppSettings, engine: str = "llamacpp") -> int:
    """llama-server's --fit-target: 1,024 MiB, but under Ollama with a projector on the GPU the projector's weights
    and 1 GiB, in MiB rounded up (it sets LLAMA_ARG_FIT_TARGET so: llm/llama_server.go mmprojFitTargetMiB, ollama
    @fb307609), beside which llama-server keeps room for the projector itself (PR #21489; the ledger's
    projector_bytes)."""
    if engine != "ollama" or not s.mmproj or s.mmproj_host:
        return FIT_TARGET_BYTES
    from llmsize.estimate.mmproj import projector

    mib = 2**20
    return -(-(projector(model, s.mmproj, s.flash_attn).weight_bytes + FIT_TARGET_BYTES) // mib) * mib


def fit_room(gpu: GpuSpec, card_bytes: int, reserve_bytes: int = 0, target_bytes: int = FIT_TARGET_BYTES
             ) -> tuple[int, int | None]:
    """What llama.cpp's --fit lets a placement use: the card less its margin (`target_bytes`: fit_target_bytes)
    and `reserve_bytes`, and on a unified machine the RAM the host's buffers share with it (None on a discrete
    card)."""
    from llmsize.estimate.unified import is_unified

    return card_bytes - reserve_bytes - target_bytes, gpu.memory_bytes if is_unified(gpu) else None


def fit_split(model: ModelSpec, gpu: GpuSpec, tensors: list[tuple[str, int]], s: LlamaCppSettings,
              card_bytes: int, reserve_bytes: int = 0, moe_offload: bool = True, engine: str = "llamacpp"
              ) -> FitResult:
    """llama.cpp's --fit placement: as asked if it fits `card_bytes` less its margin (fit_target_bytes), else the
    fewest layers' routed experts on the host (`moe_offload`: Ollama has no --n-cpu-moe), else the most layers on
    the GPU. On a unified machine the host's buffers come out of the same RAM: a placement fits only if both do."""
    budget, ram = fit_room(gpu, card_bytes, reserve_bytes, fit_target_bytes(model, s, engine))
    led = llamacpp_ledger(model, gpu, tensors, s)
    how = "as asked"
    if not fits(led, budget, ram):
        n_layer = model.num_layers
        moe = moe_offload and file_layout(tensors).has_experts
        # in order, each made only if the ones before do not fit
        candidates = itertools.chain(
            ((dict(gpu_layers=None, n_cpu_moe=n), "n_cpu_moe") for n in (range(1, n_layer + 1) if moe else ())),
            ((dict(gpu_layers=n, n_cpu_moe=0), "gpu_layers") for n in range(n_layer, -1, -1)))
        how = "none"
        for change, kind in candidates:
            cand = replace(s, **change)
            trial = llamacpp_ledger(model, gpu, tensors, cand)
            if fits(trial, budget, ram):
                s, led, how = cand, trial, kind
                break
    staging_bound = how == "none" and s.ubatch_size >= OP_OFFLOAD_MIN_BATCH and fits(
        llamacpp_ledger(model, gpu, tensors, replace(s, gpu_layers=0, n_cpu_moe=0, ubatch_size=16)), budget, ram)
    return FitResult(how, s, led, budget, longest_ctx(model, gpu, tensors, s, budget, ram) if how != "none" else None,
                     ram, staging_bound)


def longest_ctx(model, gpu, tensors, s: LlamaCppSettings, budget: int, ram_bytes: int | None = None) -> int | None:
    """The largest -c, in steps of 256 per slot, whose ledger fits; capped at the model's positions per slot."""
    slots = max(1, s.parallel)
    top = model.max_position_embeddings // CTX_PAD * CTX_PAD * slots

    def ok(ctx: int) -> bool:
        return fits(llamacpp_ledger(model, gpu, tensors, replace(s, ctx_size=ctx)), budget, ram_bytes)

    step = CTX_PAD * slots
    if not ok(step):
        return None
    lo, hi = 1, top // step  # in steps
    if ok(hi * step):
        return hi * step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid * step) else (lo, mid)
    return lo * step
