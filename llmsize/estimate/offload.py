"""Decode speed with part of the model in host memory (llama.cpp -ngl, --n-cpu-moe).

A decode step reads every tensor where llama.cpp placed it (llamacpp_memory.on_gpu) and computes it there, one
device after the other:

    t = decode_step_time_s(the GPU part)                                 llama.cpp's whole-GPU step (speed.py),
                                                                         every term, for the bytes, layers,
                                                                         cache and experts on the card
        + (W_host + KV_host) / (BW_host x eta_host)                      the host part at the share of the
                                                                         memory's peak CPU decodes reach
        + crossings x alpha_s[pcie]                                      a hand-off per device change

The GPU part is the whole-GPU step's inputs restricted to the card (gpu_part): so the same model, file and
context never decode faster with part of them on a slower device than whole on the card.

Prefill: a ubatch of 32 tokens or more runs on the GPU, the host's weights copied there over PCIe for each ubatch
(ggml-cuda's offload_op: batches of at least 32 move an op on host weights to the GPU), so

    t_prefill = sum over the ubatches u of (W_host_dense + W_host_experts x (1 - (1 - k/E)^u)) / PCIe
                + the prompt's FLOPs at llama.cpp's prefill fraction

with W_host_dense every other weight left on the host, copied whole, and W_host_experts the routed expert matrices
there, of which only the experts the ubatch's tokens chose cross (ggml-backend.cpp, compute_splits: a host weight
feeding a MUL_MAT_ID is copied expert by expert from the ids, llama.cpp PR #15346 of August 2025; the experts'
biases, ADD_ID, whole): uniform routing makes that all of them by ~100 tokens at 8 of 128 experts, so a larger
--ubatch-size still speeds prefill up under --n-cpu-moe, by fewer crossings.

W counts what one token reads: a routed expert tensor at top-k / experts of its bytes, the token embedding not at
all (one row), everything else in full; KV the cache at the context's depth. eta_host is fitted on published
CPU-only llama.cpp runs whose memory is stated (benchmarks/fit_host.py, runtimes/llamacpp.yaml `host`); the
ceiling puts every byte at its device's peak with no fixed cost.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import accumulate

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.estimate.host_memory import HostMemory
from llmsize.estimate.llamacpp_memory import (
    GATHERED_TENSORS,
    OUTPUT_TENSORS,
    LlamaCppLedger,
    cache_runs,
    file_layout,
    gathered_bytes,
    layer_caches,
    on_gpu,
    row_bytes,
    tensor_block,
)
from llmsize.estimate.memo import by_identity
from llmsize.estimate.params import shared_cache_layers, touched_share, unused_kv_weight


@dataclass(frozen=True)
class OffloadSpeed:
    decode_tok_s: float | None  # None where llama.cpp has no fitted constants on this backend
    ceiling_tok_s: float
    gpu_read_bytes: float  # per token
    host_read_bytes: float
    gpu_time_s: float
    host_time_s: float
    crossings: int  # device changes per token
    host: HostMemory
    prefill_s: float | None = None  # the prompt: prefill_copy_s + its compute on the card alone
    pcie_gb_s: float | None = None
    host_costing: str = ""  # how the host part is costed (the fitted fraction of its memory's peak)
    decode_tok_s_low: float | None = None  # the band: each part at its own fit's held-out p5 / p95 at once
    decode_tok_s_high: float | None = None
    handoff_time_s: float = 0.0  # crossings x the fitted latency of a hand-off over PCIe
    prefill_copy_s: float | None = None  # the part of prefill_s spent copying the host's weights over PCIe


def _expert_share(model: ModelSpec) -> list[float]:
    return [g.mlp.experts_per_token / g.mlp.num_experts if g.mlp is not None and g.mlp.kind == "moe" else 1.0
            for g in model.layer_stack()]


@dataclass(frozen=True)
class Reads:
    """What one decode token reads on each device (bytes)."""

    gpu_weight: float
    gpu_kv: float
    host_weight: float
    host_kv: float
    gpu_expert: float  # the part of gpu_weight in routed experts

    @property
    def gpu(self) -> float:
        return self.gpu_weight + self.gpu_kv

    @property
    def host(self) -> float:
        return self.host_weight + self.host_kv


@dataclass(frozen=True)
class ReadLayout:
    """What one token reads of a file's weights, by where llama.cpp may place it (read_layout)."""

    routed_upto: tuple[float, ...]  # the routed experts' read bytes of blocks 0..i-1 (top-k / experts of them)
    rest_upto: tuple[float, ...]  # the blocks' other tensors', in full
    output_bytes: float  # the output layer's tensors (on the GPU with it), and a tied embedding read as the output
    host_bytes: float  # tensors outside the blocks that stay with the host


@by_identity(maxsize=1024, objects=2)
def read_layout(model: ModelSpec, tensors: list[tuple[str, int]]) -> ReadLayout:
    """The file's reads a token, per block, worked out once per file: a placement (read_bytes) only sums ranges of
    blocks. A token reads a routed expert tensor at top-k / experts of its bytes, the token embedding not at all
    (one row) unless it is the output too (tied), a per-layer embedding (looked up) and a shared-cache layer's k/v
    (loaded, never read) not at all, and no multi-token-prediction layer."""
    n_layer = cache_runs(model).n_layer
    share = _expert_share(model)
    tied = not file_layout(tensors).has_output
    shared = shared_cache_layers(model)
    routed, rest = [0.0] * n_layer, [0.0] * n_layer
    output = host = 0.0
    for name, nbytes in tensors:
        if name == "token_embd.weight":
            output += nbytes if tied else 0  # read in full as the output layer, where the output is
            continue
        if name in GATHERED_TENSORS or unused_kv_weight(name, shared):
            continue
        il, is_expert = tensor_block(name)
        if il >= n_layer:
            continue
        if il < 0:
            output, host = (output + nbytes, host) if name.startswith(OUTPUT_TENSORS) else (output, host + nbytes)
        elif is_expert:
            routed[il] += nbytes * share[il]
        else:
            rest[il] += nbytes
    return ReadLayout(tuple(accumulate(routed, initial=0.0)), tuple(accumulate(rest, initial=0.0)), output, host)


def read_bytes(model: ModelSpec, led: LlamaCppLedger, tensors: list[tuple[str, int]], context_tokens: int) -> Reads:
    """What one decode token reads where llama.cpp placed it (llamacpp_memory.on_gpu: the blocks from i_gpu_start
    on the GPU but for the routed experts of the first n_cpu_moe, the output layer where it is, every other tensor
    outside the blocks on the host): weights, then the cache at this depth."""
    s, n_layer = led.settings, led.n_layer
    i_gpu_start, out_gpu = led.i_gpu_start, led.output_on_gpu
    f = read_layout(model, tensors)
    expert = f.routed_upto[n_layer] - f.routed_upto[min(n_layer, max(i_gpu_start, s.n_cpu_moe))]
    gpu = f.rest_upto[n_layer] - f.rest_upto[min(n_layer, i_gpu_start)] + expert
    host = f.rest_upto[n_layer] + f.routed_upto[n_layer] + f.host_bytes - gpu
    gpu, host = (gpu + f.output_bytes, host) if out_gpu else (gpu, host + f.output_bytes)
    kv_gpu = kv_host = 0.0
    for il, c in enumerate(layer_caches(model)):
        if not c.k:
            continue
        tokens = min(context_tokens, c.sliding_window) if c.sliding_window else context_tokens
        b = tokens * (row_bytes(s.cache_type_k, c.k) + row_bytes(s.cache_type_v, c.v))
        kv_gpu, kv_host = (kv_gpu + b, kv_host) if il >= i_gpu_start else (kv_gpu, kv_host + b)
    return Reads(gpu, kv_gpu, host, kv_host, expert)


def crossings(led: LlamaCppLedger, model: ModelSpec) -> int:
    """Device changes in one token's pass: the input starts on the host; each --n-cpu-moe layer on the GPU hands
    its experts to the host and back; the output ends where it is placed."""
    n_layer = led.n_layer
    i_gpu_start = led.i_gpu_start
    moe = {i for i, sh in enumerate(_expert_share(model)) if sh < 1.0}
    seq = ["cpu"]
    for il in range(n_layer):
        dev = "gpu" if il >= i_gpu_start else "cpu"
        seq.append(dev)
        if dev == "gpu" and il < led.settings.n_cpu_moe and il in moe:
            seq += ["cpu", "gpu"]
    seq.append("gpu" if led.output_on_gpu else "cpu")
    return sum(a != b for a, b in zip(seq, seq[1:]))


OFFLOAD_MIN_BATCH = 32  # ggml-cuda: ops on host weights run on the GPU from this batch size


def host_weight_bytes(led: LlamaCppLedger, tensors: list[tuple[str, int]]) -> int:
    """Every weight llama.cpp left in host memory except the embeddings (looked up, never multiplied)."""
    return max(0, led.devices[-1].model_bytes - gathered_bytes(tensors))


def host_expert_bytes(model: ModelSpec, led: LlamaCppLedger, tensors: list[tuple[str, int]]) -> list[tuple[int, float]]:
    """The routed expert matrices llama.cpp left in host memory: (bytes, k / E of their layer) each."""
    n_layer = led.n_layer
    i_gpu_start, out_gpu = led.i_gpu_start, led.output_on_gpu
    share = _expert_share(model)
    out = []
    for name, nbytes in tensors:
        il, is_expert = tensor_block(name)
        if not (is_expert and name.endswith(".weight") and il < n_layer):
            continue  # the experts' biases (ADD_ID) cross whole; multi-token-prediction layers are not run
        if share[il] < 1.0 and not on_gpu(name, n_layer, i_gpu_start, out_gpu, led.settings.n_cpu_moe):
            out.append((nbytes, share[il]))
    return out


def offload_copy_s(model: ModelSpec, led: LlamaCppLedger, tensors: list[tuple[str, int]], prompt_tokens: int,
                   pcie_gb_s: float) -> float | None:
    """The prompt's time copying the host's weights to the card, ubatch by ubatch. None below the offload batch."""
    ub = min(led.settings.ubatch_size, prompt_tokens)
    if ub < OFFLOAD_MIN_BATCH:
        return None
    experts = host_expert_bytes(model, led, tensors)
    dense = host_weight_bytes(led, tensors) - sum(b for b, _ in experts)
    full, last = divmod(prompt_tokens, ub)
    copied = 0.0
    for u, n in ((ub, full), (last, 1 if last else 0)):
        copied += n * (dense + sum(b * touched_share(sh, u) for b, sh in experts))
    return copied / (pcie_gb_s * 1e9)


def offload_speed(model: ModelSpec, gpu: GpuSpec, led: LlamaCppLedger, tensors: list[tuple[str, int]],
                  context_tokens: int, host: HostMemory, constants=None, prefill=None,
                  pcie_gb_s: float | None = None, gpu_step=None) -> OffloadSpeed:
    """`prefill`: (prompt tokens, seconds on the GPU alone) for the prefill estimate; `pcie_gb_s` the card's link
    to the host, per direction; `gpu_step` the GPU part's step inputs (gpu_part), needed with `constants`."""
    r = read_bytes(model, led, tensors, context_tokens)
    bw = gpu.bandwidth_gb_s * 1e9
    peak_host_s = r.host / host.bandwidth_bytes_per_s
    ceiling = 1.0 / (r.gpu / bw + peak_host_s) if (r.gpu or r.host) else float("inf")
    n_cross = crossings(led, model)
    if constants is None or gpu_step is None:
        return OffloadSpeed(None, ceiling, r.gpu, r.host, r.gpu / bw, peak_host_s, n_cross, host)
    from llmsize.estimate.speed import decode_step_time_s

    host_s = peak_host_s / constants.eta_host  # a CPU decode's share of the memory's peak (fit_host.py)
    gpu_s = decode_step_time_s(gpu_step, constants) if gpu_step.layers or gpu_step.weight_bytes else 0.0
    alpha = constants.alpha_s.get("pcie", max(constants.alpha_s.values(), default=0.0))
    handoff_s = n_cross * alpha
    t = gpu_s + host_s + handoff_s
    # a band as wide as both sides' held-out spreads together: each part's time over its own measured/predicted
    # extreme (the GPU part llama.cpp's whole-card band, the host part the CPU-only fit's), the hand-offs as fitted
    t_slow = gpu_s / constants.band_low + host_s / constants.host_band_low + handoff_s
    t_fast = gpu_s / constants.band_high + host_s / constants.host_band_high + handoff_s
    pre = copy = None
    if prefill is not None and prefill[1] is not None and pcie_gb_s:
        copy = offload_copy_s(model, led, tensors, prefill[0], pcie_gb_s)
        pre = None if copy is None else copy + prefill[1]
    basis = (f"The host part at {constants.host_basis}" if constants.host_basis else
             "The host part at the memory's peak (no fitted fraction): an upper bound on that side")
    return OffloadSpeed(min(1.0 / t, ceiling), ceiling, r.gpu, r.host, gpu_s, host_s, n_cross, host, pre, pcie_gb_s,
                        basis, min(1.0 / t_slow, ceiling), min(1.0 / t_fast, ceiling), handoff_s, copy)


def gpu_part(plan, led: LlamaCppLedger, tensors: list[tuple[str, int]], format_class: str):
    """The whole-GPU decode step's inputs under llama.cpp (expected.step_inputs at batch 1) restricted to what
    llama.cpp placed on the card: its weight and cache bytes (read_bytes), its layers (every layer's kernels run
    there for the GPU layers; a --n-cpu-moe layer's experts run on the host, so it is no MoE layer on the card),
    and the unpacking, attention and FLOPs in proportion to the weights and caches there. No collective: the
    hand-offs to the host are the offload's crossings. None without a batch-1 step."""
    from llmsize.estimate.speed import scaled_side
    from llmsize.estimate.step_inputs import step_inputs

    if plan.decode_1 is None:
        return None
    x = step_inputs(plan, plan.decode_1, "llamacpp")
    r = read_bytes(plan.model, led, tensors, plan.inputs.context_tokens)
    n_layer = led.n_layer
    i_gpu_start = led.i_gpu_start
    caches = [il for il, c in enumerate(layer_caches(plan.model)) if c.k]
    cache_share = sum(1 for il in caches if il >= i_gpu_start) / len(caches) if caches else 0.0
    weight_share = r.gpu_weight / (r.gpu_weight + r.host_weight) if r.gpu_weight + r.host_weight else 0.0
    moe = [i for i, sh in enumerate(_expert_share(plan.model)) if sh < 1.0]
    return replace(
        x, format_class=format_class, weight_bytes=r.gpu_weight, kv_bytes=r.gpu_kv,
        side_bytes=scaled_side(x.side_bytes, weight_share),
        layers=n_layer - i_gpu_start, moe_layers=sum(1 for i in moe if i >= max(i_gpu_start, led.settings.n_cpu_moe)),
        collectives=0, link=None, comm_time_s=0.0, flops=x.flops * weight_share,
        weight_elements=x.weight_elements * weight_share, attention_flops=x.attention_flops * cache_share,
        expert_flops=x.expert_flops * (r.gpu_expert / x.expert_weight_bytes if x.expert_weight_bytes else 0.0),
        expert_weight_bytes=r.gpu_expert, tile_matmul_flops=x.tile_matmul_flops * weight_share)
