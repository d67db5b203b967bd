"""DeepSeek-V4 (schema.CompressedAttention, ModelSpec.hyper_connections): its parameter count to the parameter, its
caches as the neutral plan, the engines and llama.cpp size them, against hand arithmetic and published figures."""

from pathlib import Path

import pytest

from llmsize.catalog.schema import LayerGroup
from llmsize.estimate.flops import decode_flops_per_token
from llmsize.estimate.gguf_tensors import gguf_tensors
from llmsize.estimate.kv import kv_bytes
from llmsize.estimate.llamacpp_memory import LlamaCppSettings, gguf_file_tensors, llamacpp_ledger
from llmsize.estimate.params import hyper_connection_params, layer_pieces, params_active, params_total
from llmsize.importer.config_fields import ConfigError
from llmsize.importer.hf_config import map_config
from llmsize.importer.source import import_model

CONFIGS = Path(__file__).parent / "data" / "hf-configs"
FLASH = CONFIGS / "deepseek-ai__DeepSeek-V4-Flash.json"
PRO = CONFIGS / "deepseek-ai__DeepSeek-V4-Pro.json"
MiB = 2**20


def _model(path):
    return import_model(path, read_headers=False).spec


@pytest.mark.parametrize("path, total, active_b", [
    # counted by hand from config.json (tests/data/hf-configs/SOURCES.yaml): embedding and head 2 x 129,280 x 4,096,
    # per layer attention (below), 256 experts of 3 x 4,096 x 2,048 and one shared, a router of 4,096 x 256 (+ 256
    # bias past the 3 hash-routed layers), hyper-connections; llama.cpp prints 284.33 B for Flash's GGUF
    (FLASH, 284_332_240_471, 13.27),
    (PRO, 1_572_997_201_763, 48.85),
])
def test_config_counts_to_the_parameter(path, total, active_b):
    m = _model(path)
    assert params_total(m) == total
    assert params_active(m) / 1e9 == pytest.approx(active_b, abs=0.005)  # DeepSeek's cards: 13B, 49B activated


def test_a_compressing_layer_and_the_hyper_connections_by_hand():
    m = _model(FLASH)
    csa = next(g for g in m.layer_groups if g.mixer.compress_ratio == 4)
    attention = sum(p.params for p in layer_pieces(LayerGroup(count=1, mixer=csa.mixer), m.hidden_size))
    # wq_a 4,096 x 1,024 + wq_b 1,024 x 64 x 512 + wkv 4,096 x 512 = 39,845,888; wo_a 8 groups of 4,096 -> 1,024 and
    # wo_b 8,192 -> 4,096 = 67,108,864; 64 sinks; norms 1,024 + 512; compressor wkv and wgate 2 x 4,096 x 1,024 (its
    # overlapping windows: twice head_dim), ape 4 x 1,024, norm 512 = 8,393,216; indexer wq_b 1,024 x 64 x 128,
    # weights_proj 4,096 x 64, its compressor 2 x 4,096 x 256 + 4 x 256 + 128 = 10,749,056; + 2 layer norms
    assert attention == 39_845_888 + 67_108_864 + 64 + 1_536 + 8_393_216 + 10_749_056 + 2 * 4_096
    # 43 layers x 2 mixes x (16,384 x 24 + 24 + 3) + the head's 16,384 x 4 + 4 + 1
    assert hyper_connection_params(4, 4096, 43) == 43 * 2 * (16_384 * 24 + 27) + 65_536 + 5 == 33_884_439


def test_the_catalog_entry_is_its_config(catalog):
    m, imported = catalog.model("deepseek-v4-flash"), _model(FLASH)
    assert params_total(m) == params_total(imported)
    assert [(g.mixer, g.mlp) for g in m.layer_stack()] == [(g.mixer, g.mlp) for g in imported.layer_stack()]
    assert m.extra[0].params == imported.extra[0].params == 6_610_048_891


def test_neutral_cache_window_rows_and_indexer_keys(catalog):
    m = catalog.model("deepseek-v4-flash")
    kv = kv_bytes(m, 131_072, "bf16")
    # every layer a window of 128 tokens of one 512-value row (K = V): 43 x 128 x 1,024 B
    assert kv.bytes_by_kind["sliding"] == 43 * 128 * 1024 and kv.layers_by_kind["sliding"] == 43
    # 21 layers of ratio 4: 32,768 rows of 1,024 B and as many 132-B indexer keys; 20 of ratio 128: 1,024 rows
    assert kv.bytes_by_kind["compressed"] == 21 * 32_768 * (1024 + 132) + 20 * 1024 * 1024
    assert kv.bytes_per_token == pytest.approx(21 * (1024 + 132) / 4 + 20 * 1024 / 128)
    # a decode step reads the windows, every indexer key, the top 512 rows of a ratio-4 layer, every ratio-128 row
    assert kv.read_bytes == 43 * 128 * 1024 + 21 * (32_768 * 132 + 512 * 1024) + 20 * 1024 * 1024
    assert kv.topk == 512
    # an FP8 cache: the engines' 584-B row (448 FP8 values, 64 BF16 RoPE values, 8 B of scales)
    assert kv_bytes(m, 131_072, "fp8").bytes_by_kind["sliding"] == 43 * 128 * 584


def test_llamacpp_caches_as_its_log_prints_them(catalog):
    """ggml-org/llama.cpp#25468: DeepSeek-V4-Flash at -c 131072, f16: SWA 32.25 MiB (768 cells: PAD(128 + 512, 256)),
    CSA 672, HCA 20 and lightning-indexer 168 MiB, all K-only."""
    m = catalog.model("deepseek-v4-flash")
    led = llamacpp_ledger(m, catalog.gpu("h200"), gguf_file_tensors(m, "gguf-q4_k_m"),
                          LlamaCppSettings(ctx_size=131_072))
    assert led.cells_swa == 768 and led.kv_swa_bytes == 32.25 * MiB
    assert led.kv_full_bytes == (672 + 20 + 168) * MiB
    # the compressors' f32 kv and score states a slot: 21 x (2 x 8 x 1,024 + 2 x 8 x 256) x 4 B + 20 x 2 x 128 x
    # 512 x 4 B (src/llama-kv-cache-dsv4.cpp llama_dsv4_comp_state)
    assert led.recurrent_bytes == 21 * 2 * 8 * (1024 + 256) * 4 + 20 * 2 * 128 * 512 * 4


def test_gguf_tensors_hold_every_parameter(catalog):
    m = catalog.model("deepseek-v4-flash")
    names = {t.name for t in gguf_tensors(m)}
    assert {"blk.2.indexer.attn_q_b.weight", "blk.3.attn_compressor_kv.weight", "blk.0.hc_attn_fn.weight"} <= names
    assert "blk.0.attn_compressor_kv.weight" not in names and "blk.3.indexer.proj.weight" not in names
    assert sum(t.elements for t in gguf_tensors(m)) == params_total(m)


def test_decode_attention_reads_the_window_and_the_picked_rows(catalog):
    m = catalog.model("deepseek-v4-flash")
    # one token more of context at 1M tokens: a ratio-4 layer's attention stays at 128 + 512 rows, its indexer
    # scores one more key every 4 tokens (64 heads x 128 x 2 FLOPs), a ratio-128 layer one more row every 128
    far = decode_flops_per_token(m, 1_048_576 + 128) - decode_flops_per_token(m, 1_048_576)
    assert far == pytest.approx(21 * 32 * 2 * 64 * 128 + 20 * 4 * 64 * 512)


def _raw(path, **changes):
    import json

    return {**json.loads(path.read_text()), **changes}


@pytest.mark.parametrize("changes, says", [
    ({"num_key_value_heads": 2}, "num_key_value_heads 2"),
    ({"compress_ratios": [0, 4]}, "compress_ratios is not one ratio"),
    ({"compress_ratios": [4] * 43 + [1]}, "compress_ratios is not one ratio"),
    ({"o_groups": 3}, "o_groups"),
    ({"expert_dtype": "fp8"}, "expert_dtype 'fp8'"),
    ({"hc_mult": 1}, "hc_mult"),
])
def test_bad_configs_are_refused_naming_the_field(changes, says):
    raw = _raw(FLASH, **changes)
    with pytest.raises(ConfigError) as e:
        fields = map_config(raw, "config.json").fields
        from llmsize.catalog.schema import ModelSpec
        from llmsize.importer.quant_config import release_from

        release_from(raw, None, fields, "config.json")
        ModelSpec(id="x", name="x", family="deepseek_v4", sources=["t"], params_official=1,
                  params_official_source="t", params_official_includes="t",
                  release={"quant": "bf16"}, **fields)
    assert says in e.value.message


def test_release_recipe_from_the_fp8_config():
    from llmsize.importer.quant_config import release_from

    raw = _raw(FLASH)
    r = release_from(raw, None, map_config(raw, "c").fields, "c")
    assert r.quant == "experts=mxfp4,shared_experts=fp8-block128,attention=fp8-block128"
    raw.pop("expert_dtype")  # the Hub's copy may not say it: the release's FP4 experts all the same
    assert release_from(raw, None, map_config(raw, "c").fields, "c").quant == r.quant


def test_cli_plans_it_and_refuses_a_split_its_output_groups_do_not_allow(run_cli):
    code, out, err = run_cli("plan", "deepseek-v4-flash", "--gpu", "h200", "--tp", "2", "--kv-dtype", "fp8")
    text = " ".join(out.split())
    assert code == 0 and "Traceback" not in err
    assert "compressed rows 41 3,850 B" in text and "sliding 43 25,112 B (to window)" in text
    code, out, err = run_cli("plan", "deepseek-v4-flash", "--gpu", "h200", "--tp", "16")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--tp 16 does not divide the 8 attention output groups" in err


def test_under_llamacpp_the_indexer_keys_are_in_the_k_caches_type(catalog):
    """llama.cpp keeps DeepSeek-V4's indexer keys in its K cache (type_k: f16, 128 values = 256 B a row), where vLLM
    and SGLang keep FP8 keys with a scale a 128 (132 B): the plan under llama.cpp sizes them so, as its ledger does."""
    m = catalog.model("deepseek-v4-flash")
    neutral, llama = kv_bytes(m, 131_072, "fp16"), kv_bytes(m, 131_072, "fp16", "llamacpp")
    assert llama.bytes_by_kind["compressed"] - neutral.bytes_by_kind["compressed"] == 21 * 32_768 * (256 - 132)
    assert llama.states == "llamacpp" and llama.indexer_bytes_per_token == 21 * 256 / 4


@pytest.mark.parametrize("changes, says", [
    ({"n_shared_experts": None}, "n_shared_experts"),  # had been dropped in silence (13.27 -> 12.19 B active)
    ({"num_hash_layers": None}, "num_hash_layers"),
    ({"compress_ratios": [0] * 45}, "compress_ratios is not one ratio"),  # one more than 43 layers + the MTP layer
    ({"o_groups": 0}, "o_groups is 0"),
    ({"o_lora_rank": -1}, "o_lora_rank is -1"),
    ({"sliding_window": 2**40}, "sliding_window is 1099511627776"),
    ({"head_dim": 32}, "qk_rope_head_dim 64 is wider than head_dim 32"),
    ({"num_experts_per_tok": 300}, "num_experts_per_tok 300 is more than n_routed_experts 256"),
])
def test_a_field_it_cannot_do_without_or_out_of_range_is_named(changes, says):
    raw = {k: v for k, v in _raw(FLASH, **changes).items() if v is not None}
    with pytest.raises(ConfigError) as e:
        map_config(raw, "config.json")
    assert says in e.value.message


def test_pipeline_stages_hold_their_own_layers(catalog):
    """A stage holds its share of the stack, the groups as they fall in it: --pp 43 is one layer a card, where taking
    each of the 4 groups' ceil(count / pp) had given 4 (DeepSeek-V4-Flash's 2 + 1 + 20 + 20)."""
    from llmsize.estimate.parallel import shard_model, stage_group_counts

    m = catalog.model("deepseek-v4-flash")
    # 43 layers in 8 stages: 5 of 5, then 3 of 6 (the remainder to the last); in 4: 10, 11, 11, 11; in 2: 21, 22
    assert sum(stage_group_counts(m, 43)) == 1 and sum(stage_group_counts(m, 8)) == 6
    assert sum(stage_group_counts(m, 2)) == 22 and shard_model(m, 1, 4).num_layers == 11
    llama = catalog.model("llama-3.1-8b")
    assert stage_group_counts(llama, 4) == [8]


def test_a_pipeline_hands_on_every_hyper_connection_stream(catalog):
    from llmsize.estimate.parallel import make_comm

    m = catalog.model("deepseek-v4-flash")
    comm = make_comm(m, catalog.gpu("h200"), 1, 2)
    assert comm.bytes_per_card(1, m.hidden_size) == 4 * 4096 * 2  # 4 streams of 4,096 values in 16 bits


def test_serving_engines_default_to_the_recipes_fp8_cache_and_blocks(run_cli):
    code, out, err = run_cli("plan", "deepseek-v4-flash", "--gpu", "h200", "--tp", "2", "--emit", "vllm")
    line = out.strip().splitlines()[-1]
    assert code == 0 and "--kv-cache-dtype fp8" in line and "--block-size 256" in line and "--trust-remote-code" in line
    code, out, err = run_cli("plan", "deepseek-v4-flash", "--gpu", "h200", "--tp", "2")
    assert "KV cache (fp8)" in out
    code, out, err = run_cli("plan", "deepseek-v4-flash", "--gpu", "m3-ultra", "--runtime", "llamacpp", "--quant",
                             "gguf-q2_k")
    assert "KV cache (fp16)" in out  # llama.cpp's own default


def test_a_kv_policy_is_refused_not_ignored(run_cli):
    code, out, err = run_cli("plan", "deepseek-v4-flash", "--gpu", "h200", "--tp", "2", "--kv-policy", "budget:2048")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "already keep a window and a compressed row" in err


def test_the_mtp_layer_is_priced_in_the_release_recipe_and_caches_a_window(catalog):
    """DeepSeek-V4's MTP layer is stored as the rest of the checkpoint (FP4 experts, FP8 layers: 148.66 GiB with it),
    not in BF16; its layer keeps the window alone (compress_ratios' last entry, 0)."""
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.speculative import Spec, draft_memory

    m = catalog.model("deepseek-v4-flash")
    p = make_plan(m, catalog.gpu("h200"), PlanInputs(tp=2, kv_dtype="fp8"))
    weights, cache = draft_memory(p, Spec(k=1, accept=0.85), None)
    assert weights == pytest.approx(6_610_048_891 * p.fmt.bits_per_weight / 8 / 2)
    assert cache == 128 * 584  # one window layer's rows, at 4,096 tokens


def test_a_llamacpp_plan_of_a_model_that_fits_has_its_speed(run_cli):
    """output_hc_* (the head's hyper-connection) load with the output layer: a DeepSeek-V4 GGUF whose every layer is
    on the card had been read as partly in host memory, and its speed left out."""
    code, out, err = run_cli("plan", "deepseek-v4-flash", "--gpu", "b200", "--engine", "llamacpp", "--quant",
                             "gguf-q2_k", "--context", "131072")
    assert code == 0 and "host memory (" not in out and "decode, batch 1" in out
    assert "32,768 rows at ratio 4, 1,024 rows at ratio 128" in " ".join(out.split())


@pytest.mark.parametrize("blocks, max_len, in_flight, tokens, concurrency", [
    # vllm-project/vllm#51041 (vLLM 0.26.0, 2 x H20, --tensor-parallel-size 2, --kv-cache-dtype fp8, --block-size 256,
    # MTP drafting): DeepSeek-V4-Flash's "KV pool 7.01 GiB", "GPU KV cache size 1,009,661 tokens", 1.11x at
    # 912,128 tokens; the same issue's 0731 re-release (the same shapes): 7.71 GiB, 150,992 tokens, 1.24x at 121,344.
    # The pools are 7,236 and 7,965 blocks of 1,039,680 B (7.0065 and 7.7123 GiB, the logs' figures rounded); the
    # first run reproduces with 8,192 tokens in flight, the second with 16,384 (async scheduling's two batches of
    # 8,192), which is what the "8x more KV a token" was.
    (7_236, 912_128, 8_192, 1_009_661, 1.11),
    (7_965, 121_344, 16_384, 150_992, 1.24),
])
def test_vllm_sizes_deepseek_v4_as_its_logs_print(catalog, blocks, max_len, in_flight, tokens, concurrency):
    from llmsize.estimate.vllm_dsv4 import dsv4_layout

    layout = dsv4_layout(catalog.model("deepseek-v4-flash"), 256, mtp_layers=1)
    # a block: 22 pages of 37,440 B (64 rows of 584 B, padded to 576), 21 of 8,640 (64 indexer keys of 132 B) and 20
    # of 1,728 (2 rows of a ratio-128 layer), the most of each size any of its 5 groups holds
    assert layout.bytes_per_block == 22 * 37_440 + 21 * 8_640 + 20 * 1_728 == 1_039_680
    assert [len(g) for g in layout.groups] == [62, 22, 22, 42, 20]
    need = layout.blocks_per_request(max_len, in_flight)
    assert int(blocks / need * max_len) == tokens and round(blocks / need, 2) == concurrency
    assert dsv4_layout(catalog.model("deepseek-v4-flash"), 256).blocks_per_request(912_128, 8_192) == 6_532  # no MTP


def test_the_vllm_ledger_of_deepseek_v4_is_its_layout(run_cli):
    code, out, err = run_cli("plan", "deepseek-v4-flash", "--gpu", "h200", "--tp", "2", "--engine", "vllm")
    text = " ".join(out.split())
    assert code == 0 and "over 5 KV-cache groups" in text and "1,039,680 B a block of 256-token blocks" in text


@pytest.mark.parametrize("name, comp", [
    # DeepSeek-V4's checkpoint names (DeepSeek's own), read by exact.py: the embedding and head had been "other",
    # the hyper-connections' mixes MLP or other by chance of their letters, the hash layers' token table MLP
    ("embed.weight", "embedding"), ("head.weight", "lm_head"), ("layers.3.hc_attn_fn", "other"),
    ("layers.3.hc_ffn_base", "other"), ("hc_head_scale", "other"), ("layers.0.ffn.gate.tid2eid", "router"),
    ("layers.2.ffn.gate.bias", "router"), ("layers.2.attn.compressor.wkv.weight", "attention"),
    ("layers.2.attn.indexer.wq_b.weight", "attention"), ("layers.2.attn.attn_sink", "attention"),
    ("layers.2.ffn.experts.3.w1.weight", "experts"), ("layers.2.ffn.shared_experts.w2.weight", "shared_experts"),
    ("mtp.0.e_proj.weight", "extra"), ("model.embed_tokens.weight", "embedding"),
])
def test_checkpoint_names_fall_in_their_components(name, comp):
    from llmsize.importer.exact import component

    assert component(name, 43) == comp


def test_sglang_sizes_deepseek_v4_in_its_own_pools(catalog):
    """SGLang 0.5.23's DSV4PoolConfigurator (model_executor/pool_configurator.py) on its default path. Flash: 43 layers,
    21 of ratio 4 (with an indexer), 20 of ratio 128. A window row in a 256-row page: ceil(256 x 584 / 576) x 576 /
    256 = 585 B; a ratio-4 row (64-row pages) 585 B, a ratio-128 row (2-row pages of 1,728 B) 864 B. Per window token
    585 x 43 + 8 / 256 x (4 x 512 + 4 x 128) x 4 B x 21 = 25,155 + 6,720 = 31,875 B; per full token 0.1 x 31,875 +
    (585 + 132) / 4 x 21 + 864 / 128 x 20 = 3,187.5 + 3,764.25 + 135 = 7,086.75 B. The ratio-128 states: ceil((257 x
    128 + 128 + 1) / 128) x 128 = 33,152 rows of 2 x 512 FP32 values, x 20 layers = 2,715,811,840 B (2.53 GiB)."""
    from llmsize.estimate.sglang_dsv4 import row_bytes, sglang_dsv4_pools

    assert (row_bytes(256), row_bytes(64), row_bytes(2)) == (585, 585, 864)
    pools = sglang_dsv4_pools(catalog.model("deepseek-v4-flash"))
    assert pools.bytes_per_full_token == 7_086.75 and pools.fixed_bytes == 2_715_811_840
    # 20 GiB left for the pools: (20 GiB - fixed) / 7,086.75 = 2,647,055.9 -> 10,340 pages of 256 = 2,647,040 tokens,
    # a tenth of them 264,704 -> 1,034 pages = 264,704 window tokens
    assert pools.full_tokens(20 * 2**30) == 2_647_040 and pools.swa_tokens(2_647_040) == 264_704
    assert pools.full_tokens(pools.fixed_bytes) == 0
    # drafting: rings of 16 and 256 rows, and the draft layer as (43 + 1) / 43 of the rest
    spec = sglang_dsv4_pools(catalog.model("deepseek-v4-flash"), drafting=True)
    assert spec.fixed_bytes == -(-(257 * 256 + 256 + 1) // 128) * 128 * 4096 * 20
    assert abs(spec.bytes_per_full_token - (0.1 * (25_155 + 16 / 256 * 10_240 * 21) + 3_899.25) * 44 / 43) < 1e-9


def test_sglang_sizes_deepseek_v4_pro_in_its_own_pools():
    """Pro: 61 layers, 30 of ratio 4 and 31 of ratio 128. 0.1 x (585 x 61 + 320 x 30) + 179.25 x 30 + 6.75 x 31 =
    4,528.5 + 5,377.5 + 209.25 = 10,115.25 B a full token; 33,152 x 4,096 x 31 B = 3.92 GiB of states."""
    from llmsize.estimate.sglang_dsv4 import sglang_dsv4_pools

    pools = sglang_dsv4_pools(_model(PRO))
    assert pools.bytes_per_full_token == 10_115.25 and pools.fixed_bytes == 33_152 * 4_096 * 31


def test_the_sglang_ledger_of_deepseek_v4_is_its_pools(run_cli):
    """plan --engine sglang gives SGLang's max_total_num_tokens for the model, says its per-token bytes, and where the
    fraction leaves too little for one request, the fraction from which it starts."""
    import json

    code, out, err = run_cli("plan", "deepseek-v4-flash", "--gpu", "h200", "--tp", "4", "--engine", "sglang", "--json")
    assert code == 0, err
    led = json.loads(out)["engine"]
    assert led["kv_cache_tokens"] % 256 == 0 and led["kv_cache_tokens"] > 1_000_000
    assert led["kv_cache_tokens"] == (led["kv_cache_bytes"] - 2_715_811_840) // 7_086.75 // 256 * 256
    assert any("7,086.75 B a full token" in n for n in led["assumptions"])
    code, out, err = run_cli("plan", "deepseek-v4-flash", "--gpu", "h200", "--tp", "4", "--engine", "sglang",
                             "--gpu-util", "0.3", "--json")
    led = json.loads(out)["engine"]
    assert code == 0 and not led["fits_one_request"] and 0.3 < led["min_gpu_util"] < 1


def _llamacpp_dsv4(catalog, ctx, **kw):
    m = catalog.model("deepseek-v4-flash")
    return llamacpp_ledger(m, catalog.gpu("b200"), gguf_file_tensors(m, "gguf-q4_k_m"),
                           LlamaCppSettings(ctx_size=ctx, **kw))


def test_llamacpp_reserved_every_indexer_heads_scores_before_its_fused_indexer(catalog):
    """Before GGML_OP_LIGHTNING_INDEXER (PR #24231, mid-July 2026) deepseek4.cpp's indexer scored the 262,144 rows of
    a 1,048,576-token cache with 64 heads for a ubatch of 512 tokens, f32, and copied them permuted: 2 x 262,144 x 512
    x 64 x 4 B = 64 GiB, beside its masks and the layer's activations. unslothai/unsloth PR #6940's log of the time,
    ubatch 512: 'allocating 67094.60 MiB on device 0: cudaMalloc failed' (predicted -0.6%). ggml-org/llama.cpp#25468
    (build 9924, -fa on, ubatch 512, five cards each holding ratio-4 layers): the buffers grew '+38 GiB' from -c 16384
    to 131072; each card's pair of score tensors is 7,281 MiB more, 35.6 GiB over five (-6%, of a rounded figure)."""
    old = _llamacpp_dsv4(catalog, 1_048_576, fused_indexer=False)
    assert old.devices[0].compute_bytes / 2**20 == pytest.approx(67_094.60, rel=0.01)
    grow = (_llamacpp_dsv4(catalog, 131_072, fused_indexer=False).devices[0].compute_bytes
            - _llamacpp_dsv4(catalog, 16_384, fused_indexer=False).devices[0].compute_bytes)
    assert 5 * grow / 2**30 == pytest.approx(38, rel=0.1)


def test_llamacpp_reserves_deepseek_v4s_fused_indexer_and_its_attention(catalog):
    """The current builds, -c 1048576, ubatch 512 (llama-kv-cache-dsv4.cpp reserves against whole caches: n_raw =
    PAD(128 + 512, 256) = 768 window cells, 262,144 ratio-4 rows, 8,192 ratio-128 rows). With flash attention: the
    indexer's f32 scores and its f16 masks, 262,144 x 512 x (2 + 2 + 6) = 1,342,177,280 B; the window and ratio-128
    masks (768 + 8,192) x 512 x 2 = 9,175,040; the gathered rows (768 + 262,144) x 512 x 2 = 269,221,888; the queries,
    four hyper-connection streams and the hidden state, 512 x 4 x (64 x 512 + 4 x 4,096 + 4,096) = 109,051,904: 1,649.5
    MiB (the generic rule had 260.5). Without flash attention the compressed attention's f32 scores, (768 + 262,144) x
    512 x 64 x 4 B = 32.1 GiB, are the peak: the plan says 34.5 GiB."""
    fa = _llamacpp_dsv4(catalog, 1_048_576)
    assert fa.devices[0].compute_bytes == 1_342_177_280 + 9_175_040 + 269_221_888 + 109_051_904
    no_fa = _llamacpp_dsv4(catalog, 1_048_576, flash_attn=False)
    assert 34 < no_fa.devices[0].compute_bytes / 2**30 < 35
    # the host holds the masks: window, ratio-4, ratio-128 and the indexer's, f16, and the input embedding's rows
    assert fa.devices[-1].compute_bytes == (768 + 262_144 + 8_192 + 262_144) * 512 * 2 + 512 * 4 * 2 * 4096
    # at a short context the generic terms stay the peak
    assert _llamacpp_dsv4(catalog, 4096).devices[0].compute_bytes == 512 * 4 * (129_280 + 4096)


def test_inferencex_2128s_weights_a_card_are_the_plans_and_sglangs_stale_scales(run_cli):
    """SemiAnalysisAI/InferenceX#2128 logs 'mem usage=125.65 GB' (GiB) a card for DeepSeek-V4-Pro at tp 8 on H200s
    (lmsysorg/sglang:deepseek-v4-hopper, --moe-runner-backend marlin). The plan's weights a card: 101.03 GiB. SGLang up
    to 0.5.15 kept, on Hopper's Marlin path for MXFP4 experts, the loader's FP32 scales beside the repacked ones
    (mxfp4_marlin_moe.py create_weights; freed in 0.5.18, sgl-project/sglang PR #29797): one 4-B scale a 32 weights of
    384 experts x 3 x 7,168 x 3,072 x 61 layers / 8 cards = 193,424,523,264 weights = 24,178,065,408 B = 22.52 GiB;
    101.03 + 22.52 = 123.55, 2.10 GiB (1.7%) short of the log (engines.py's docstring)."""
    import json

    code, out, err = run_cli("plan", str(PRO), "--gpu", "h200", "--tp", "8", "--runtime", "sglang", "--json")
    assert code == 0, err
    card = json.loads(out)["parallel"]["weights_bytes_per_card"]
    stale = 384 * 3 * 7168 * 3072 * 61 // 8 * 4 // 32
    assert (round(card / 2**30, 2), round(stale / 2**30, 2)) == (101.03, 22.52)
    assert 125.65 - (card + stale) / 2**30 == pytest.approx(2.10, abs=0.01)
