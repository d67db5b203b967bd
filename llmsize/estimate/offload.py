"""Decode speed with part of the model in host memory (llama.cpp -ngl, --n-cpu-moe).

A decode step reads every tensor where llama.cpp placed it (llamacpp_memory.on_gpu) and computes it there, one
device after the other:

    t = W_gpu / (BW_gpu x eta_weights) + KV_gpu / (BW_gpu x eta_kv)       the GPU part at llama.cpp's fitted
        + gpu_layers x t_layer_s + t_step_s                              fractions and fixed costs, and its
        + the GPU part's attention at depth, unpacking and MoE layers    share of the other fitted terms
        + (W_host + KV_host) / BW_host                                   the host part at the memory's peak
        + crossings x alpha_s[pcie]                                      a hand-off per device change

Prefill: a ubatch of 32 tokens or more runs on the GPU, the host's weights copied there over PCIe for each ubatch
(ggml-cuda's offload_op: batches of at least 32 move an op on host weights to the GPU), so

    t_prefill = ceil(P / ubatch) x W_host_all / PCIe + the prompt's FLOPs at llama.cpp's prefill fraction

with W_host_all every weight left on the host (all experts of a routed tensor, not the active ones): why a larger
--ubatch-size speeds prefill up under --n-cpu-moe.

W counts what one token reads: a routed expert tensor at top-k / experts of its bytes, the token embedding not at
all (one row), everything else in full; KV the cache at the context's depth. The host part has no fitted
fraction (too few published offload runs state their memory configuration), so it is an upper bound on the host
side, and the report says so; the ceiling puts every byte at its device's peak with no fixed cost.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.estimate.host_memory import HostMemory
from llmsize.estimate.llamacpp_memory import (
    EXPERTS,
    LAYER,
    LlamaCppLedger,
    file_layout,
    layer_caches,
    on_gpu,
    row_bytes,
)


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
    prefill_s: float | None = None  # the prompt, weights crossing PCIe once per ubatch
    pcie_gb_s: float | None = None


def _expert_share(model: ModelSpec) -> list[float]:
    out = []
    for g in model.layer_groups:
        share = g.mlp.experts_per_token / g.mlp.num_experts if g.mlp is not None and g.mlp.kind == "moe" else 1.0
        out += [share] * g.count
    return out


def read_bytes(model: ModelSpec, led: LlamaCppLedger, tensors: list[tuple[str, int]],
               context_tokens: int) -> tuple[float, float]:
    """(GPU, host) bytes one decode token reads: weights, then the cache at this depth."""
    s, n_layer = led.settings, led.n_layer
    i_gpu_start, out_gpu = n_layer - min(led.gpu_layers, n_layer), led.gpu_layers > n_layer
    share = _expert_share(model)
    gpu = host = 0.0
    tied = not file_layout(tensors).has_output
    for name, nbytes in tensors:
        if name == "token_embd.weight":
            if tied:  # read in full as the output layer, where the output is
                gpu, host = (gpu + nbytes, host) if out_gpu else (gpu, host + nbytes)
            continue
        m = LAYER.match(name)
        frac = share[int(m.group(1))] if (m and EXPERTS.match(name) and int(m.group(1)) < n_layer) else 1.0
        if m and int(m.group(1)) >= n_layer:
            continue  # multi-token-prediction layers: not read by plain decoding
        if on_gpu(name, n_layer, i_gpu_start, out_gpu, s.n_cpu_moe):
            gpu += nbytes * frac
        else:
            host += nbytes * frac
    for il, c in enumerate(layer_caches(model)):
        if not c.k:
            continue
        tokens = min(context_tokens, c.sliding_window) if c.sliding_window else context_tokens
        b = tokens * (row_bytes(s.cache_type_k, c.k) + row_bytes(s.cache_type_v, c.v))
        gpu, host = (gpu + b, host) if il >= i_gpu_start else (gpu, host + b)
    return gpu, host


def crossings(led: LlamaCppLedger, model: ModelSpec) -> int:
    """Device changes in one token's pass: the input starts on the host; each --n-cpu-moe layer on the GPU hands
    its experts to the host and back; the output ends where it is placed."""
    n_layer = led.n_layer
    i_gpu_start = n_layer - min(led.gpu_layers, n_layer)
    moe = {i for i, sh in enumerate(_expert_share(model)) if sh < 1.0}
    seq = ["cpu"]
    for il in range(n_layer):
        dev = "gpu" if il >= i_gpu_start else "cpu"
        seq.append(dev)
        if dev == "gpu" and il < led.settings.n_cpu_moe and il in moe:
            seq += ["cpu", "gpu"]
    seq.append("gpu" if led.gpu_layers > n_layer else "cpu")
    return sum(a != b for a, b in zip(seq, seq[1:]))


OFFLOAD_MIN_BATCH = 32  # ggml-cuda: ops on host weights run on the GPU from this batch size


def host_weight_bytes(led: LlamaCppLedger, tensors: list[tuple[str, int]]) -> int:
    """Every weight llama.cpp left in host memory except the token embedding (looked up, never multiplied)."""
    embd = next((b for n, b in tensors if n == "token_embd.weight"), 0)
    return max(0, led.devices[-1].model_bytes - embd)


def offload_prefill_s(led: LlamaCppLedger, tensors: list[tuple[str, int]], prompt_tokens: int, pcie_gb_s: float,
                      compute_s: float) -> float | None:
    """`compute_s`: the prompt on the GPU alone (speed.prefill_time_s). None below the offload batch."""
    ub = min(led.settings.ubatch_size, prompt_tokens)
    if ub < OFFLOAD_MIN_BATCH:
        return None
    ubatches = -(-prompt_tokens // ub)
    return ubatches * host_weight_bytes(led, tensors) / (pcie_gb_s * 1e9) + compute_s


def offload_speed(model: ModelSpec, gpu: GpuSpec, led: LlamaCppLedger, tensors: list[tuple[str, int]],
                  context_tokens: int, host: HostMemory, constants=None, format_class: str = "kquant",
                  prefill=None, pcie_gb_s: float | None = None, gpu_terms_s: float = 0.0) -> OffloadSpeed:
    """`prefill`: (prompt tokens, seconds on the GPU alone) for the prefill estimate; `pcie_gb_s` the card's link
    to the host, per direction; `gpu_terms_s` the GPU part's share of the whole-GPU step's other fitted terms
    (gpu_step_terms_s)."""
    g_bytes, h_bytes = read_bytes(model, led, tensors, context_tokens)
    bw = gpu.bandwidth_gb_s * 1e9
    host_s = h_bytes / host.bandwidth_bytes_per_s
    ceiling = 1.0 / (g_bytes / bw + host_s) if (g_bytes or h_bytes) else float("inf")
    n_cross = crossings(led, model)
    if constants is None:
        return OffloadSpeed(None, ceiling, g_bytes, h_bytes, g_bytes / bw, host_s, n_cross, host)
    c = constants
    gpu_layers = min(led.gpu_layers, led.n_layer)
    # the GPU's cache bytes stream at the weights' fraction here: llama.cpp's eta_kv was fitted on whole-GPU runs
    gpu_s = g_bytes / (bw * c.eta_w(format_class))
    gpu_s += gpu_layers * c.t_layer_s + c.t_step_s if gpu_layers else 0.0
    gpu_s += gpu_terms_s
    alpha = c.alpha_s.get("pcie", max(c.alpha_s.values(), default=0.0))
    t = gpu_s + host_s + n_cross * alpha
    pre = None
    if prefill is not None and prefill[1] is not None and pcie_gb_s:
        pre = offload_prefill_s(led, tensors, prefill[0], pcie_gb_s, prefill[1])
    return OffloadSpeed(1.0 / t, ceiling, g_bytes, h_bytes, gpu_s, host_s, n_cross, host, pre, pcie_gb_s)


def gpu_step_terms_s(plan, led: LlamaCppLedger, constants, format_class: str) -> float:
    """The terms of llama.cpp's fitted decode step beyond bytes and fixed costs (estimate/speed.py: attention over
    the cache at the vector units, unpacking quantized weights, the cost per MoE layer), for the part of the model
    on the GPU: attention for the layers whose cache is there, unpacking for the weight bytes there, the MoE cost
    for the layers whose experts are there. 0 without constants."""
    from llmsize.estimate.expected import step_inputs
    from llmsize.estimate.speed import attention_time_s, dequant_time_s

    if constants is None or plan.decode_1 is None:
        return 0.0
    x = step_inputs(plan, plan.decode_1, "llamacpp")
    n_layer = led.n_layer
    i_gpu_start = n_layer - min(led.gpu_layers, n_layer)
    caches = [il for il, c in enumerate(layer_caches(plan.model)) if c.k]
    on_card = sum(1 for il in caches if il >= i_gpu_start) / len(caches) if caches else 0.0
    moe = [i for i, sh in enumerate(_expert_share(plan.model)) if sh < 1.0]
    moe_on_card = sum(1 for i in moe if i >= max(i_gpu_start, led.settings.n_cpu_moe))
    total = sum(d.model_bytes for d in led.devices)
    weights_on_card = led.gpu.model_bytes / total if led.gpu is not None and total else 0.0
    return (attention_time_s(replace(x, format_class=format_class), constants) * on_card
            + dequant_time_s(replace(x, format_class=format_class), constants) * weights_on_card
            + moe_on_card * constants.t_moe_layer_s)
