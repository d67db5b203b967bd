"""Engine ledgers against what the engines do by release: V0's chunked prefill above 32K tokens, non-torch
memory that grows with tensor parallelism, the layouts engines load that differ from the checkpoint."""

import pytest

from llmsize.estimate.engines import (
    EngineInputs,
    engine_ledger,
    loaded_layout_extra,
    non_torch_default,
    v0_batched_tokens,
    vllm_release,
)
from llmsize.estimate.plan import PlanInputs, make_plan
from llmsize.estimate.quant import quant_format
from llmsize.estimate.weights import weight_bytes
from llmsize.units import GiB


@pytest.mark.parametrize("version, want", [("0.2.5", (0, 2, 5)), ("0.6", (0, 6, 0)), ("vllm==0.7.3", (0, 7, 3)),
                                           ("v0", None), ("v1", None), ("v1-0.20", None)])
def test_release_numbers(version, want):
    assert vllm_release(version) == want


@pytest.mark.parametrize("model_id, max_len, release, tokens", [
    ("llama-3.1-8b", 131072, (0, 6, 4), 512),     # chunked prefill by itself from 0.5.3, 512 tokens to 0.6.4
    ("llama-3.1-8b", 131072, (0, 7, 3), 2048),    # 2048 from 0.6.5
    ("llama-3.1-8b", 131072, None, 2048),         # bare `v0`: the last V0 releases
    ("llama-3.1-8b", 131072, (0, 5, 2), 131072),  # before 0.5.3: the whole max_model_len
    ("llama-3.1-8b", 32768, (0, 6, 4), 32768),    # not above 32K: max(max_model_len, 2048)
    ("gemma-3-27b", 131072, (0, 6, 4), 131072),   # a sliding window keeps it off
])
def test_v0_profiles_what_vllm_batches(catalog, model_id, max_len, release, tokens):
    got, why = v0_batched_tokens(catalog.model(model_id), catalog.gpu("rtx4090"), max_len, release)
    assert got == tokens, why


def test_v0_long_context_ledger_is_not_charged_the_whole_context(catalog):
    """A 131K-token V0 ledger profiled max_model_len tokens: gigabytes of activations where vLLM logs a fraction
    of one (the issue's R1-Distill-Qwen-14B on 2 x RTX 4090: 7.67 GiB predicted, 0.19 logged)."""
    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("rtx4090")
    w = make_plan(m, g, PlanInputs(quant="bf16")).weights.bytes_total
    led = engine_ledger(m, g, w, EngineInputs(version="0.6.4", max_model_len=131072))
    assert led.max_num_batched_tokens == 512 and led.activation_peak_bytes / GiB < 0.5
    old = engine_ledger(m, g, w, EngineInputs(version="0.5.2", max_model_len=131072))
    assert old.activation_peak_bytes / GiB > 5


def test_non_torch_grows_with_tensor_parallelism(catalog):
    m = catalog.model("llama-3-8b")
    one, _ = non_torch_default(m, 1, None, 8192)
    two, _ = non_torch_default(m, 2, None, 8192)
    assert two == 2 * one  # vllm#10511: 1.79 GiB at tp 1, 3.58 GiB at tp 2


def test_llama2_70b_tp4_on_a100_against_pr_2031(catalog):
    """vllm-project/vllm#2031 (v0.2.5, 'Fix peak memory profiling'): Llama-2-70B, tp 4, 4 x A100-80GB, util 0.9:
    '# GPU blocks: 20865' after the fix (31615 before). One 0.3 GiB non-torch figure predicted ~32,000 (+54%);
    with the communicators' memory per rank and the all-reduce outputs that release's profiling kept (vllm#2150),
    +11% from the 80 GiB nominal, +8.8% from the total CUDA reports (deviceQuery's 81,158 MiB)."""
    m, g = catalog.model("llama-2-70b"), catalog.gpu("a100-80gb-sxm")
    p = make_plan(m, g, PlanInputs(quant="fp16", tp=4))
    led = engine_ledger(p.card_model, g, p.weights_card.bytes_total,
                        EngineInputs(version="0.2.5", max_model_len=4096, tp=4))
    assert led.block_bytes == 16 * 80 * 2 * 2 * 128 * 2  # 2 KV heads per rank
    assert led.kv_blocks / 20865 - 1 == pytest.approx(0.088, abs=0.01)
    flat = engine_ledger(p.card_model, g, p.weights_card.bytes_total,
                         EngineInputs(version="0.2.5", max_model_len=4096, tp=4, non_torch_bytes=int(0.3 * GiB)))
    assert flat.kv_blocks / 20865 - 1 > 0.5


def test_gpt_oss_mxfp4_through_marlin_loads_larger_than_its_checkpoint(catalog):
    """vllm#23278 (vLLM 0.10.1, H100, gpt-oss-120b): 'Model loading took 65.9651 GiB' for a 60.8 GiB checkpoint.
    Marlin pads hidden 2880 -> 3072 and the expert intermediate 2880 -> 2944 (vllm 0.10.1.1 mxfp4.py)."""
    m, g = catalog.model("gpt-oss-120b"), catalog.gpu("h100-sxm")
    p = make_plan(m, g, PlanInputs())
    assert p.weights.bytes_total / GiB == pytest.approx(60.77, abs=0.02)
    led = engine_ledger(m, g, p.weights.bytes_total,
                        EngineInputs(version="0.10.1", max_model_len=131072, weight_format="mxfp4"))
    assert led.weights_bytes / GiB == pytest.approx(65.9651, rel=0.002)
    # >= 0.11 on Hopper: the Triton backend's own layout, not sized: checkpoint bytes, and the note says so
    new = engine_ledger(m, g, p.weights.bytes_total, EngineInputs(max_model_len=131072, weight_format="mxfp4"))
    assert new.weights_bytes == p.weights.bytes_total and any("not sized" in a for a in new.assumptions)
    # Ampere runs Marlin in every release
    extra, note = loaded_layout_extra(m, catalog.gpu("a100-80gb-sxm"),
                                      EngineInputs(max_model_len=131072, weight_format="mxfp4"))
    assert extra / GiB == pytest.approx(65.90 - 60.77, abs=0.02) and "Marlin" in note


def test_trtllm_keeps_the_whole_embedding_on_every_rank(catalog):
    """trtllm-build shares a tied table only when the embedding and lm_head shapes match; at tp > 1 with the
    default use_parallel_embedding=False the embedding is whole on each rank and the lm_head a vocab shard."""
    m = catalog.model("gemma-4-12b")  # tied, vocab 262,144 x 3,840
    table = 262144 * 3840 * 2
    card = make_plan(m, catalog.gpu("h100-sxm"), PlanInputs(quant="bf16", tp=2)).card_model
    extra, _ = loaded_layout_extra(card, catalog.gpu("h100-sxm"), EngineInputs(engine="trtllm", tp=2))
    assert extra == table  # whole table + a half-table lm_head, where one half-table was counted
    assert loaded_layout_extra(m, catalog.gpu("h100-sxm"), EngineInputs(engine="trtllm"))[0] == 0  # tp 1: shared
    untied = make_plan(catalog.model("llama-3.1-8b"), catalog.gpu("h100-sxm"), PlanInputs(tp=4)).card_model
    extra, _ = loaded_layout_extra(untied, catalog.gpu("h100-sxm"), EngineInputs(engine="trtllm", tp=4))
    assert extra == 128256 * 4096 * 2 * 3 / 4


def test_trtllm_runtime_buffers_are_sized_at_its_max_num_tokens_not_the_context(catalog):
    """TensorRT-LLM sizes its runtime buffers for max_num_tokens (8,192 by default in its BuildConfig and LLM API),
    not the model's 131,072-token context, which had charged Llama 3.1 8B 12.7 GiB of buffers on an RTX 3090 and
    refused it. Activation model at 8,192 tokens and 256 sequences: 8,192 x (3 x 14,336 + 2 x 4,096) x 2 B
    = 838,860,800 B, plus 256 x 128,256 x (2 + 4) B = 197,001,216 B of logits: 1,035,862,016 B (0.96 GiB)."""
    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("rtx3090")
    weights = weight_bytes(m, quant_format("bf16"), "all").bytes_total
    led = engine_ledger(m, g, weights, EngineInputs(engine="trtllm"))
    assert led.activation_peak_bytes == 1_035_862_016
    assert led.kv_cache_bytes > 6 * GiB and led.kv_cache_tokens > 50_000
    given = engine_ledger(m, g, weights, EngineInputs(engine="trtllm", max_num_batched_tokens=4096))
    assert given.activation_peak_bytes == 4096 * (3 * 14336 + 2 * 4096) * 2 + 197_001_216


def test_a_trtllm_shortfall_is_not_shrunk_by_the_free_fraction(catalog):
    """Where the weights leave nothing free the fraction of free memory is no cache: the ledger keeps the whole
    shortfall (-4.36 GiB was printed as x 0.9 = -3.92 GiB) and drops the fraction's line."""
    m, g = catalog.model("llama-3.1-70b"), catalog.gpu("rtx3090")
    weights = weight_bytes(m, quant_format("bf16"), "all").bytes_total
    led = engine_ledger(m, g, weights, EngineInputs(engine="trtllm"))
    free = dict(led.steps)["free"]
    assert free < 0 and led.kv_cache_bytes == free
    assert not any(label.startswith("x ") for label, _ in led.steps)


def test_a_trtllm_pool_too_small_for_one_request_says_the_engine_refuses(catalog):
    """Llama 3.1 8B BF16 on an RTX 3090 at its 131,072-token context: 6.6 GiB of cache holds 0.41 of one request,
    and TensorRT-LLM will not start ("maxTokensInPagedKvCache must be large enough to process at least 1 sequence
    to completion", TensorRT-LLM#542): the ledger says so, as vLLM's and SGLang's do."""
    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("rtx3090")
    led = engine_ledger(m, g, weight_bytes(m, quant_format("bf16"), "all").bytes_total,
                        EngineInputs(engine="trtllm", max_model_len=131072))
    assert led.kv_cache_bytes > 0 and not led.fits_one_request
    assert any("TensorRT-LLM refuses to start" in n and "raise --gpu-util" in n for n in led.assumptions)
    short = engine_ledger(m, g, weight_bytes(m, quant_format("bf16"), "all").bytes_total,
                          EngineInputs(engine="trtllm", max_model_len=8192))
    assert short.fits_one_request and not any("refuses" in n for n in short.assumptions)

