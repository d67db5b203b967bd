"""Kernel launches of an eager prefill forward (llmsize/estimate/launches.py), counted by hand from the engines'
model code, and where prefill_inputs uses them."""

from __future__ import annotations

import pytest

from llmsize.estimate.launches import LLAMA_LAYER_LAUNCHES, eager_launches, launch_layers
from llmsize.estimate.plan import PlanInputs, make_plan
from llmsize.estimate.step_inputs import prefill_inputs


def test_a_llama_layer_is_the_unit(catalog):
    # fused add + RMSNorm, QKV GEMM, RoPE, attention, O GEMM; RMSNorm, gate/up GEMM, SiLU x up, down GEMM: 9
    m = catalog.model("llama-3.1-8b")
    assert LLAMA_LAYER_LAUNCHES == 9
    assert eager_launches(m, False) == 32 * 9 and launch_layers(m, False) == 32
    # FP8 GEMMs take FP8 activations: QKV, O, gate/up and down each quantize theirs first, 13 a layer
    assert eager_launches(m, True) == 32 * 13


def test_deepseek_v3_counts_its_latent_attention_experts_and_fp8_activations(catalog):
    m = catalog.model("deepseek-v3")
    # MLA with q_lora_rank: norm, q_a, q_a norm, q_b, kv_a, kv_a norm, kv_b, RoPE, attention, O = 10 (5 GEMMs)
    # 3 dense layers: 10 + the dense MLP's 4 = 14; 58 MoE layers: 10 + norm, router, top-k, align, GEMM 1,
    # activation, GEMM 2, combine (8) + the shared expert's gate/up, activation, down (3) = 21
    assert eager_launches(m, False) == 3 * 14 + 58 * 21 == 1260
    # FP8: a quantization before each token GEMM: 5 + 2 = 7 in a dense layer, 5 + 2 experts' + 2 shared = 9 in a MoE one
    assert eager_launches(m, True) == 3 * (14 + 7) + 58 * (21 + 9) == 1803
    assert launch_layers(m, True) == pytest.approx(1803 / 9)  # ~3.3 Llama layers a DeepSeek layer


def test_gemma_4_e2b_counts_its_qk_norms_sandwich_norms_and_per_layer_inputs(catalog):
    m = catalog.model("gemma-4-e2b")
    # attention 5 + q and k norms 2; dense MLP 4; 4 norms a layer, 2 past the usual; the per-layer input's gate
    # GEMM, activation product, projection GEMM, norm and add: 5
    assert eager_launches(m, False) == 35 * (5 + 2 + 4 + 2 + 5) == 630


def test_prefill_inputs_count_launches_for_the_eager_engines_only(catalog):
    h100 = catalog.gpu("h100-sxm")
    fp8 = make_plan(catalog.model("llama-3.1-8b"), h100, PlanInputs(quant="fp8", prompt_tokens=512), search_fit=False)
    bf16 = make_plan(catalog.model("llama-3.1-8b"), h100, PlanInputs(quant="bf16", prompt_tokens=512),
                     search_fit=False)
    assert prefill_inputs(bf16, "vllm").launch_layers == pytest.approx(32)
    assert prefill_inputs(fp8, "sglang").launch_layers == pytest.approx(32 * 13 / 9)  # FP8 native on Hopper
    # TensorRT-LLM's built engine: its layers, whatever the format
    assert prefill_inputs(fp8, "trtllm").launch_layers == prefill_inputs(fp8, "trtllm").layers == 32
    # an A100 has no FP8 instructions: its FP8 weights go through weight-only kernels, no activation quantization
    a100 = make_plan(catalog.model("llama-3.1-8b"), catalog.gpu("a100-80gb-sxm"), PlanInputs(quant="fp8"),
                     search_fit=False)
    assert prefill_inputs(a100, "vllm").launch_layers == pytest.approx(32)
