"""DeepSeek Sparse Attention (DeepSeek-V3.2): the indexer's cache, what decode reads, prefill FLOPs, parameters.

Sizes from the model's config.json (tests/data/hf-configs/deepseek-ai__DeepSeek-V3.2.json: index_n_heads 64,
index_head_dim 128, index_topk 2048) and the engines' caches: the indexer keeps one FP8 key of 128 values and one
FP32 scale a token and layer, 132 B (vLLM deepseek_v2.py DeepseekV32IndexerCache: head_dim = index_head_dim +
index_head_dim // quant_block_size * 4, uint8; SGLang NSATokenToKVPool: 64-token pages of 64 x 128 + 64 x 4 B); the
latent is 512 + 64 values (1,152 B in BF16; 656 B in vLLM's fp8_ds_mla: 512 FP8, 4 FP32 scales, 64 BF16 RoPE).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsize.estimate.flops import decode_flops_per_token, prefill_flops
from llmsize.estimate.kv import kv_bytes
from llmsize.estimate.params import params_total

LAYERS = 61
INDEXER_B = 128 + 128 // 128 * 4  # 132
CONFIG = Path(__file__).parent / "data" / "hf-configs" / "deepseek-ai__DeepSeek-V3.2.json"


def test_cache_per_token_holds_the_indexer_keys(catalog):
    """(1,152 + 132) x 61 = 78,324 B a token in BF16, (656 + 132) x 61 = 48,068 B in fp8_ds_mla; DeepSeek-V3 (no
    indexer) 1,152 x 61 = 70,272 B."""
    v32, v3 = catalog.model("deepseek-v3.2"), catalog.model("deepseek-v3")
    assert kv_bytes(v32, 1, "bf16").bytes_per_token == (1152 + INDEXER_B) * LAYERS == 78_324
    assert kv_bytes(v32, 1, "fp8_ds_mla").bytes_per_token == (656 + INDEXER_B) * LAYERS == 48_068
    assert kv_bytes(v3, 1, "bf16").bytes_per_token == 1152 * LAYERS == 70_272
    # the indexer key is FP8 whatever --kv-dtype; and vLLM stores this model's FP8 cache as fp8_ds_mla
    # (DeepseekV32ForCausalLM.verify_and_update_config), so --kv-dtype fp8 is 656 + 132 B a layer, not 576 + 132
    assert kv_bytes(v32, 1, "fp8").bytes_per_token == (656 + INDEXER_B) * LAYERS
    assert kv_bytes(v3, 1, "fp8").bytes_per_token == 576 * LAYERS  # V3's FP8 cache stays plain FP8


@pytest.mark.parametrize("context", [1, 2048, 4096, 131_072])
def test_decode_reads_every_indexer_key_and_topk_latents(catalog, context):
    """A decode step at context L reads L indexer keys and min(L, 2,048) latents a layer: up to 2,048 tokens all the
    cache, then far less (at 131,072 tokens 61 x (132 x 131,072 + 1,152 x 2,048) = 1.199 GB against 10.27 GB
    held)."""
    kv = kv_bytes(catalog.model("deepseek-v3.2"), context, "bf16")
    assert kv.bytes_per_sequence == (1152 + INDEXER_B) * LAYERS * context
    assert kv.read_bytes == LAYERS * (INDEXER_B * context + 1152 * min(context, 2048))
    if context <= 2048:
        assert kv.read_bytes == kv.bytes_per_sequence
    plain = kv_bytes(catalog.model("deepseek-v3"), context, "bf16")
    assert plain.read_bytes == plain.bytes_per_sequence


def test_attention_flops_stop_growing_past_topk_but_the_indexer_does_not(catalog):
    """Per layer and decoded token: absorbed MLA 2 x 128 x (2 x 512 + 64) FLOPs a token attended (2,048 at most),
    the indexer 2 x 64 x 128 a token scored (all L). Prefill of P tokens: un-absorbed MLA 2 x 128 x (128 + 64 + 128)
    FLOPs a pair over sum min(i, 2,048) pairs, the indexer over all P(P + 1) / 2."""
    v32, v3 = catalog.model("deepseek-v3.2"), catalog.model("deepseek-v3")
    attn, index = 2 * 128 * (2 * 512 + 64), 2 * 64 * 128
    extra_params = params_total(v32) - params_total(v3)  # indexer matmuls add 2 FLOPs a parameter
    for L in (1000, 100_000):
        d = decode_flops_per_token(v32, L) - decode_flops_per_token(v3, L)
        assert d == pytest.approx(LAYERS * (attn * (min(L, 2048) - L) + index * L) + 2 * (extra_params - LAYERS * 256))
    P, k = 100_000, 2048
    pairs_full, pairs_sparse = P * (P + 1) / 2, k * (k + 1) / 2 + (P - k) * k
    per_pair = 2 * 128 * (128 + 64 + 128)
    d = prefill_flops(v32, P) - prefill_flops(v3, P)
    assert d == pytest.approx(LAYERS * (per_pair * (pairs_sparse - pairs_full) + index * pairs_full)
                              + 2 * P * (extra_params - LAYERS * 256))
    # at 100K tokens: V3 = matmuls ~7.1e15 + attention 61 x 81,920 x 5.0e9 pairs = 2.50e16, 3.21e16 in all; V3.2 =
    # the same matmuls + attention 61 x 81,920 x 2.03e8 = 1.0e15 + its indexer 61 x 16,384 x 5.0e9 = 5.0e15 = 1.33e16
    assert prefill_flops(v32, P) == pytest.approx(1.33e16, rel=0.01) and prefill_flops(v3, P) == pytest.approx(
        3.21e16, rel=0.01)


def test_indexer_parameters_are_the_checkpoints_tensors(catalog):
    """The V3.2 checkpoint's indexer tensors a layer: wq_b [8192, 1536], wk [128, 7168], weights_proj [64, 7168],
    k_norm weight and bias [128] each = 13,959,424 parameters; 61 layers add 851,524,864 to DeepSeek-V3's."""
    per_layer = 8192 * 1536 + 128 * 7168 + 64 * 7168 + 2 * 128
    assert per_layer == 13_959_424
    assert params_total(catalog.model("deepseek-v3.2")) - params_total(catalog.model("deepseek-v3")) == 61 * per_layer


def test_config_json_imports_as_the_catalog_entry(catalog):
    """config.json (model_type deepseek_v32) maps to the catalog's layer groups, indexer included."""
    from llmsize.catalog.schema import LayerGroup
    from llmsize.importer.hf_config import map_config

    mapped = map_config(json.loads(CONFIG.read_text()), str(CONFIG))
    entry = catalog.model("deepseek-v3.2")
    assert [LayerGroup.model_validate(g).model_dump(exclude={"note"}) for g in mapped.fields["layer_groups"]] == [
        g.model_dump(exclude={"note"}) for g in entry.layer_groups]
    assert entry.layer_groups[0].mixer.indexer.topk == 2048


def test_plan_and_the_vllm_ledger_count_the_indexer(run_cli):
    """plan's cache and vLLM's ledger (its KV spec: the MLA group and the indexer's head_size-132 uint8 group) both
    charge 78,324 B a token in BF16 on 8 x H200; the decode ceiling at 131,072 tokens is far above V3's."""
    code, out, err = run_cli("plan", "deepseek-v3.2", "--gpu", "h200", "--tp", "8", "--context", "131072",
                             "--engine", "vllm", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["kv"]["bytes_per_token"] == 78_324 and d["kv"]["indexer_bytes_per_token"] == 132 * LAYERS
    assert d["engine"]["block_bytes"] == 64 * 78_324  # vLLM's block (64 tokens from 0.34), the indexer's group in it
    assert d["kv"]["sparse_topk"] == 2048 and d["kv"]["read_bytes_per_sequence"] == LAYERS * (
        132 * 131072 + 1152 * 2048)
    code, out, err = run_cli("plan", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--context", "131072", "--json")
    assert d["decode"]["ceiling_tok_s"] > 1.8 * json.loads(out)["decode"]["ceiling_tok_s"]


def test_fp8_ds_mla_is_refused_on_dense_mla(run_cli):
    """vLLM's dense MLA kernels (FlashMLA, FlashInfer MLA, Triton MLA) take an FP8 cache as fp8 / fp8_e4m3; the
    fp8_ds_mla layout is its sparse kernels' (DeepSeek-V3.2): `--emit vllm` had printed `--kv-cache-dtype
    fp8_ds_mla` for DeepSeek-V3, a line vLLM finds no attention backend for."""
    from conftest import assert_one_line_error

    for cmd in (("plan", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--kv-dtype", "fp8_ds_mla", "--emit", "vllm"),
                ("fleet", "deepseek-v3", "--users", "10", "--kv-dtype", "fp8_ds_mla")):
        code, out, err = run_cli(*cmd)
        assert_one_line_error(code, err)
        assert "DeepSeek-V3's MLA layers are dense" in err and "Use --kv-dtype fp8." in err
    code, out, err = run_cli("plan", "deepseek-v3.2", "--gpu", "h200", "--tp", "8", "--kv-dtype", "fp8_ds_mla",
                             "--emit", "vllm")
    assert code == 0, err
    assert "--kv-cache-dtype fp8_ds_mla" in out
