"""Kernel launches of an eager prefill forward. vLLM and SGLang run a prompt's forward as PyTorch issues it, one
kernel launch at a time from the host, and at a prompt of a few hundred tokens the host's time to issue them is
most of the forward's: the SGLang Cookbook's one-request runs take 0.10-0.16 s for DeepSeek-R1's and MiniMax-M2.5's
610-token prompts on 8 x B200 (measurements/sglang-cookbook-*.yaml), where the GPU's work is ~10 ms. A serving
engine's cost a layer (speed.Constants.t_prefill_layer_s) is therefore a cost per launch, counted here in layers of
a Llama decoder layer's nine launches, so that a DeepSeek layer (MLA's three projections and two norms, a router,
a fused MoE and a shared expert, each FP8 GEMM's activations quantized first) weighs 3.3 Llama layers and a dense
16-bit layer one. TensorRT-LLM runs a built engine whose kernels are fused and captured: its layers stay the
unit (step_inputs.prefill_inputs).

The counts follow the engines' model code for a prompt (vllm/model_executor/models/{llama,qwen3_moe,deepseek_v2,
gemma3n}.py, sglang/srt/models/ of the same names), one launch per call of a fused kernel:
    attention        fused residual add + RMSNorm, QKV GEMM, RoPE, attention, O GEMM           5
                     + q and k RMSNorm (Qwen3, Gemma 3/4)                                     + 2
                     + the output gate's sigmoid product (Qwen3-Next)                         + 1
    MLA              norm, q_a GEMM, q_a norm, q_b GEMM, kv_a GEMM, kv_a norm, kv_b GEMM,
                     RoPE, attention, O GEMM (without q_lora_rank: one q GEMM, 8)            10
                     + DSA's indexer: wq_b and wk GEMMs, k norm, RoPE, scores and top-k       + 5
    recurrent        norm, in-projection GEMM, causal conv, scan, gated norm, out GEMM          6
    dense MLP        norm, gate/up GEMM, activation, down GEMM                                  4
    MoE              norm, router GEMM, top-k, align/sort, expert GEMM 1, activation,
                     expert GEMM 2, combine                                                     8
                     + shared experts: gate/up GEMM, activation, down GEMM (+1 a gate)       + 3
                     + latent projections in and out (LatentMoE)                             + 2
    norms past two a layer (Gemma's sandwich norms)                                       + 1 each
    per-layer input (Gemma 3n/4 E models): gate GEMM, activation product, projection
                     GEMM, norm, add                                                          + 5
    AltUp (Gemma 3n): predict (norm, router GEMM, tanh, coefficients) and correct (3)         + 7
    LAuReL (Gemma 3n): two GEMMs and a norm                                                   + 3
and, where the weights' format is native to the card's tensor cores (FP8, NVFP4, MXFP4 GEMMs: kernels.
tensor_core_native), one quantization of the activations before each of the layer's token GEMMs (the router's
stays 16-bit). The tensor-parallel all-reduces are not counted: their latency is the collectives' own term."""

from __future__ import annotations

from llmsize.catalog.schema import LayerGroup, ModelSpec

LLAMA_LAYER_LAUNCHES = 9  # a Llama decoder layer's: attention's 5 and the dense MLP's 4


def _mixer(mixer) -> tuple[int, int]:
    """(launches, token GEMMs) of a layer's mixer."""
    if mixer is None:
        return 0, 0
    if mixer.kind == "mla":
        launches, gemms = (10, 5) if mixer.q_lora_rank else (8, 4)
        if mixer.output_gate:  # Kimi K3's g_proj and its sigmoid product
            launches, gemms = launches + 2, gemms + 1
        if mixer.indexer is not None and not mixer.indexer.shared:
            launches, gemms = launches + 5, gemms + 2
        return launches, gemms
    if mixer.kind in ("full", "sliding"):
        return 5 + (2 if mixer.qk_norm else 0) + (1 if mixer.output_gate else 0), 2
    if mixer.kind == "compressed":  # DeepSeek-V4, its forward's steps counted from its tensors (no row pins them):
        # q_a, its norm, q_b, the head norm, kv and its norm, RoPE, attention, the grouped wo_a and wo_b; a
        # compressor's kv and gate GEMMs, its pooling, norm and RoPE; an indexer's q_b, weights_proj, its own
        # compressor and the top-k
        launches, gemms = 10, 5
        if mixer.compress_ratio:
            launches, gemms = launches + 5, gemms + 2
        if mixer.indexer is not None and not mixer.indexer.shared:
            launches, gemms = launches + 9, gemms + 4
        return launches, gemms
    return 6, 2  # Mamba-2, Gated DeltaNet


def _mlp(mlp) -> tuple[int, int]:
    """(launches, token GEMMs) of a layer's MLP."""
    if mlp is None:
        return 0, 0
    if mlp.kind == "dense":
        return 4, 2
    launches, gemms = 8, 2
    if mlp.num_shared_experts:
        launches, gemms = launches + 3 + (1 if mlp.shared_expert_gate else 0), gemms + 2
    if mlp.latent_size:
        launches, gemms = launches + 2 + (1 if mlp.latent_norm else 0), gemms + 2
    return launches, gemms


def group_launches(group: LayerGroup, quantized_activations: bool) -> int:
    """One layer of the group: its kernel launches in an eager forward."""
    (mix, mix_gemms), (mlp, mlp_gemms) = _mixer(group.mixer), _mlp(group.mlp)
    extra_norms = max(0, group.norms - 2)
    return mix + mlp + extra_norms + ((mix_gemms + mlp_gemms) if quantized_activations else 0)


def eager_launches(model: ModelSpec, quantized_activations: bool) -> int:
    """The decoder layers' kernel launches in one eager forward (`quantized_activations`: the format's GEMMs take
    FP8 or FP4 activations, each quantized by its own kernel)."""
    total = sum(g.count * group_launches(g, quantized_activations) for g in model.layer_groups)
    per_layer = (5 if model.per_layer_input else 0) + (7 if model.altup else 0) + (3 if model.laurel_rank else 0)
    return total + per_layer * model.num_layers


def launch_layers(model: ModelSpec, quantized_activations: bool) -> float:
    """eager_launches in layers of a Llama decoder layer's nine launches (LLAMA_LAYER_LAUNCHES)."""
    return eager_launches(model, quantized_activations) / LLAMA_LAYER_LAUNCHES
