"""Engine ledgers against the real logs of shared/reference/engine-logs.yaml: a table of predicted vs
logged values with each error. Target: within 5% on the KV token count where the settings are known."""

import json
from pathlib import Path

import pytest

from llmsize.estimate.engines import EngineInputs, activation_peak_bytes, cuda_total_bytes, engine_ledger
from llmsize.estimate.quant import quant_format
from llmsize.estimate.weights import weight_bytes
from llmsize.units import GiB

# id, what, predicted, logged, error, within target?  (filled by the tests below; printed with -s)
TABLE = []


def _w(m, fmt="bf16"):
    return weight_bytes(m, quant_format(fmt), "all").bytes_total


def test_vllm_10517_llama31_8b_on_3090(catalog):
    """vllm-project/vllm#10517 (kaspersiminski, 2024-12-02): Llama-3.1-8B-Instruct, RTX 3090, util 0.90,
    max_model_len 20000, default block 16 -> 'GPU blocks: 1952', 'Maximum concurrency for 20000 tokens per
    request: 1.56x', weights 14.9888 GiB, activation peak 17.06 - 14.99 = 2.07 GiB, KV 3.81 GiB."""
    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("rtx3090")
    led = engine_ledger(m, g, _w(m), EngineInputs(version="v0", max_model_len=20000))
    # 2 MiB blocks: 16 tokens x 32 layers x (K, V) x 8 heads x 128 x 2 B
    assert led.block_bytes == 16 * 32 * 2 * 8 * 128 * 2 == 2 * 2**20
    assert led.total_bytes / GiB == pytest.approx(23.58, abs=0.005)
    rows = [("weights GiB", led.weights_bytes / GiB, 14.9888), ("activation peak GiB", led.activation_peak_bytes / GiB,
            17.06 - 14.9888), ("KV cache GiB", led.kv_cache_bytes / GiB, 3.81), ("GPU blocks", led.kv_blocks, 1952),
            ("max concurrency", led.max_concurrency, 1.56)]
    for what, pred, logged in rows:
        TABLE.append(("vllm#10517", what, pred, logged, pred / logged - 1))
    assert led.kv_blocks == pytest.approx(1952, rel=0.05)  # the target: KV tokens within 5%
    assert led.max_concurrency == pytest.approx(1.56, rel=0.05)
    assert led.activation_peak_bytes / GiB == pytest.approx(2.07, rel=0.05)


def test_vllm_13882_quantized_qwen_on_an_8gb_card(catalog):
    """vllm-project/vllm#13882 (2025-02-26): a ~4-bit Qwen2.5-7B (weights 5.2032 GiB as loaded) on an RTX 4060
    8 GB, util 0.70, max_model_len 4096: budget 5.60, non_torch 0.03, activation peak 1.42, KV -1.05 GiB, 0 blocks,
    startup fails. The card is not in the catalog and the checkpoint's format is not known: the ledger is run on
    the logged total and weights. Predicted activation peak is half the logged one (a quantized model's
    dequantization workspaces are not modelled), but the outcome is the same: no room for the cache."""
    m = catalog.model("qwen2.5-7b")
    g = catalog.gpu("rtx4060ti16").model_copy(update={"memory_cuda_bytes": 8 * 2**30})
    led = engine_ledger(m, g, 5.2032 * GiB, EngineInputs(version="v0", gpu_util=0.7, max_model_len=4096,
                                                           non_torch_bytes=int(0.03 * GiB)))
    assert led.budget_bytes / GiB == pytest.approx(5.60)
    TABLE.append(("vllm#13882", "activation peak GiB", led.activation_peak_bytes / GiB, 1.42,
                  led.activation_peak_bytes / GiB / 1.42 - 1))
    TABLE.append(("vllm#13882", "GPU blocks", led.kv_blocks, 0, 0.0))
    assert led.kv_blocks == 0 and led.kv_cache_bytes < 0


def test_trtllm_224_llama2_7b_on_a10(catalog):
    """NVIDIA/TensorRT-LLM#224 (2023-10-31): llama-2-7b fp16 on an A10, kv_cache_free_gpu_mem_fraction 0.95,
    max_batch_size 25 -> 'Using 10718 tokens in paged KV cache'. The engine's runtime buffers depend on build
    settings the issue does not give: solving the log for them gives ~3.9 GiB; our default (the vLLM-style
    activation model, 0.36 GiB) overestimates the cache. Recorded, not targeted."""
    m, g = catalog.model("llama-2-7b"), catalog.gpu("a10")
    led = engine_ledger(m, g, _w(m, "fp16"), EngineInputs(engine="trtllm", gpu_util=0.95, max_model_len=4096))
    TABLE.append(("trtllm#224", "KV tokens (runtime buffers modelled)", led.kv_cache_tokens, 10718,
                  led.kv_cache_tokens / 10718 - 1))
    per_token = 32 * 2 * 32 * 128 * 2  # 0.5 MiB
    free_needed = 10718 * per_token / 0.95
    runtime = cuda_total_bytes(g)[0] - _w(m, "fp16") - free_needed - 0.3 * GiB
    assert 3.5 < runtime / GiB < 4.5
    led2 = engine_ledger(m, g, _w(m, "fp16"), EngineInputs(engine="trtllm", gpu_util=0.95, max_model_len=4096,
                                                             runtime_bytes=int(runtime)))
    assert led2.kv_cache_tokens == pytest.approx(10718, abs=16)  # with that runtime the ledger reproduces it


def test_sglang_static_pool(catalog):
    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("h100-sxm")
    led = engine_ledger(m, g, _w(m), EngineInputs(engine="sglang", gpu_util=0.88))
    # (total - 0.3 GiB of context) x mem_fraction_static - weights, in 128 KiB tokens (32 x 2 x 8 x 128 x 2 B),
    # pages of one token (SGLang's default --page-size 1)
    want = ((g.memory_cuda_bytes - int(0.3 * GiB)) * 0.88 - _w(m)) // 131072
    assert led.kv_cache_tokens == want and led.block_bytes == 131072


def test_sglang_min_fraction_from_inferencex_2128(catalog):
    """SemiAnalysisAI/InferenceX#2128 (2026-07-09): DeepSeek-V4-Pro FP8, tp 8 on H200s, --mem-fraction-static
    0.88: 'Load weight end ... avail mem=12.25 GB, mem usage=125.65 GB' (SGLang's GB are GiB), then SGLang
    refuses and names 0.9113 as the smallest fraction. With free-at-start = 12.25 + 125.65 GiB and the logged
    weights, the ledger reproduces both the refusal and the number. DeepSeek-V3 stands in for the model: it only
    supplies the KV of one 16-token request, a few MB."""
    m, g = catalog.model("deepseek-v3"), catalog.gpu("h200-sxm")
    free = (12.25 + 125.65) * GiB
    non_torch = g.memory_cuda_bytes - free
    led = engine_ledger(m, g, 125.65 * GiB, EngineInputs(engine="sglang", gpu_util=0.88, max_model_len=16,
                                                          non_torch_bytes=int(non_torch)))
    assert led.kv_cache_bytes < 0 and led.kv_cache_tokens == 0
    assert led.min_fraction == pytest.approx(0.9113, abs=0.0005)
    assert any("SGLang refuses to start: the weights leave nothing for the cache at this fraction (from 0.9112" in a
               for a in led.assumptions)


def test_activation_peak_formula_by_hand(catalog):
    m = catalog.model("llama-3.1-8b")
    # 20,000 x (3 x 14,336 + 2 x 4,096) x 2 B + 256 x 128,256 x 6 B
    assert activation_peak_bytes(m, 20000, 256) == 20000 * (3 * 14336 + 2 * 4096) * 2 + 256 * 128256 * 6


def test_plan_engine_json(run_cli):
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx3090", "--quant", "bf16", "--engine", "vllm",
                             "--engine-version", "v0", "--max-model-len", "20000", "--json")
    assert code == 0, err
    e = json.loads(out)["engine"]
    for k in ("name", "version", "kv_cache_bytes", "kv_cache_tokens", "max_concurrency"):
        assert k in e
    assert e["name"] == "vllm" and e["kv_cache_tokens"] == e["kv_blocks"] * 16


@pytest.mark.parametrize("args, needle", [
    (["--engine", "tgi"], "'--engine': `tgi` is not one of vllm, sglang, trtllm, llamacpp, ollama"),
    (["--engine", "vllm", "--block-size", "0"], "'--block-size': `0` is not an integer from 1"),
])
def test_engine_errors(run_cli, args, needle):
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", *args)
    assert code == 2 and needle in err


def test_vllm_10517_at_29k_the_peak_grows_with_the_batch(catalog):
    """Same issue, same card and model, max_model_len 29000: peak_torch_memory 17.98 GiB (activation peak
    2.99 GiB), kv_cache_size 2.89 GiB, '# GPU blocks: 1478', 0.82x for 29000 tokens."""
    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("rtx3090")
    led = engine_ledger(m, g, _w(m), EngineInputs(version="v0", max_model_len=29000))
    TABLE.append(("vllm#10517", "activation peak GiB @29k", led.activation_peak_bytes / GiB, 17.98 - 14.9888,
                  led.activation_peak_bytes / GiB / (17.98 - 14.9888) - 1))
    TABLE.append(("vllm#10517", "GPU blocks @29k", led.kv_blocks, 1478, led.kv_blocks / 1478 - 1))
    assert led.kv_blocks == pytest.approx(1478, rel=0.05)
    assert led.max_concurrency == pytest.approx(0.82, rel=0.05)


def test_vllm_recent_4090_point_is_recorded(catalog):
    """casys-kaist/LLMServingSim#59 (2026-08-21): vLLM (version not stated, 2026: V1; its 16-token blocks say before
    0.34), Llama-3.1-8B bf16 on an RTX 4090, max_num_seqs 256, max_num_batched_tokens 2048, block 16 ->
    num_gpu_blocks 2588 (41,408 tokens). Read as 0.27.0 with its defaults (utilization 0.92, a 0.3 GiB CUDA-graph
    reserve) the ledger lands 15% above; at 0.90 (a simulator's config may pass it; not printed) 5.7%. Recorded
    with its error, not targeted."""
    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("rtx4090")
    led = engine_ledger(m, g, _w(m), EngineInputs(max_model_len=131072, max_num_batched_tokens=2048,
                                                  version="0.27.0"))
    TABLE.append(("sim#59 4090", "GPU blocks (V1 0.27, 0.3 GiB graphs)", led.kv_blocks, 2588,
                  led.kv_blocks / 2588 - 1))
    assert led.kv_blocks == pytest.approx(2588, rel=0.16)
    at_090 = engine_ledger(m, g, _w(m), EngineInputs(max_model_len=131072, max_num_batched_tokens=2048,
                                                     version="0.27.0", gpu_util=0.9))
    assert at_090.kv_blocks == pytest.approx(2588, rel=0.06)


def test_v1_hybrid_layout_of_gemma_3_27b_matches_the_design_doc(catalog):
    """vLLM docs/design/hybrid_kv_cache_manager.md, case 3: Gemma-3-27b has 52 sliding and 10 full layers;
    groups of min(52, 10) = 10 layers: 1 full group and 6 sliding groups, the last with 8 padding layers."""
    from llmsize.estimate.engines import v1_layout
    lay = v1_layout(catalog.model("gemma-3-27b"), "bf16", 16)
    assert lay.group_size == 10 and lay.padded_layers == 8
    assert sorted(k for k, _, _ in lay.groups) == ["full"] + ["sliding"] * 6
    assert lay.page_bytes == 16 * 2 * 16 * 128 * 2  # one block of one layer: 16 tokens x K,V x 16 heads x 128


def test_v1_gemma_4_unifies_page_sizes(catalog):
    """Gemma 4 12B: a sliding layer caches 2 x 8 x 256 x 2 B = 8 KiB per token, a full layer 2 x 1 x 512 x 2 B =
    2 KiB: the full layers' block grows to 64 tokens so both pages are 128 KiB; groups of min(40, 8) = 8 layers:
    5 sliding + 1 full. A 262,144-token request takes 262144 / 64 = 4,096 full blocks plus, per sliding group,
    cdiv(1023 + 2048, 16) + 1 = 193 blocks: 5,061 in all."""
    from llmsize.estimate.engines import v1_layout
    lay = v1_layout(catalog.model("gemma-4-12b"), "bf16", 16)
    assert lay.page_bytes == 131072 and lay.group_size == 8
    assert sorted(lay.groups) == [("full", None, 64)] + [("sliding", 1024, 16)] * 5
    assert lay.blocks_per_request(262144, 2048) == 4096 + 5 * 193


def test_seed_000_pool_is_recorded(catalog):
    """Seed 000: ~254K tokens of cache for Gemma 4 12B NVFP4 on an RTX 5060 Ti under vLLM (its release and settings
    are not given). With vLLM's defaults (utilization 0.92, max_model_len 262,144, 2,048 tokens a batch on a 16 GB
    card, raised from 0.22 to 2,496 for this multimodal prefix-LM model: one video item) what it logs as tokens is
    concurrency x max_model_len; from 0.26 each of the 5 sliding-window groups reserves a request 2 batches in
    flight, not 1 (async scheduling). 0.21 logs 285,038 (+12%), 0.25.1 275,047 (+8.3%), 0.26-0.33 239,177 (-5.8%,
    and no whole 262,144-token request: the engine refuses to start at that length), 0.34's extensible cache (its
    64-token blocks, a 1 GiB margin, utilization 1.0) 249,202 (-1.9%, short of one request too); text alone
    (--max-num-batched-tokens 2048) 253,039 from 0.26 and 263,428 under 0.34. Recorded, not targeted."""
    m, g = catalog.model("gemma-4-12b"), catalog.gpu("rtx5060ti")
    from llmsize.estimate.weights import weight_bytes
    w = weight_bytes(m, quant_format("nvfp4"), "linear").bytes_total
    led = engine_ledger(m, g, w, EngineInputs(version="0.33.0"))
    old = engine_ledger(m, g, w, EngineInputs(version="0.25.1"))
    new = engine_ledger(m, g, w, EngineInputs())
    before = engine_ledger(m, g, w, EngineInputs(version="0.21.0"))
    text = [engine_ledger(m, g, w, EngineInputs(version=v, max_num_batched_tokens=2048)) for v in ("0.33.0", "v1")]
    TABLE.append(("seed 000", "GPU KV cache tokens (V1 0.26-0.33, defaults)", led.kv_cache_tokens, 254000,
                  led.kv_cache_tokens / 254000 - 1))
    assert led.kv_groups == old.kv_groups == 6 and led.kv_blocks == old.kv_blocks
    assert (led.kv_cache_tokens, old.kv_cache_tokens, new.kv_cache_tokens) == (239_177, 275_047, 249_202)
    assert (before.kv_cache_tokens, before.max_num_batched_tokens, led.max_num_batched_tokens) == \
        (285_038, 2048, 2496)
    assert [x.kv_cache_tokens for x in text] == [253_039, 263_428]
    assert old.fits_one_request and not led.fits_one_request and not new.fits_one_request


def test_vllm_21348_qwen3_235b_fp8_on_4_h100_vllm_and_sglang():
    """vllm-project/vllm#21348 (2025-07-22): Qwen3-235B-A22B-FP8, tp 4 on H100s. vLLM V1 (default utilization,
    an LMCache connector attached): 'Available KV cache memory: 8.11 GiB', 'GPU KV cache size: 178,880
    tokens'. SGLang, --mem-fraction-static 0.93: '#tokens: 367404, K size: 8.23 GB, V size: 8.23 GB' (GiB, per
    367,404 x 48,128 B). Our vLLM figure is far above: the connector's buffers and V1's MoE/graph reserves are
    not modelled; SGLang's pool lands 11% above (free at start assumed total - 0.3 GiB; at tp 4 the
    communicators hold more, ~2 GiB would close it).
    Recorded, not targeted: the vLLM run is not a plain configuration."""
    from pathlib import Path

    from llmsize.estimate.parallel import shard_model
    from llmsize.importer.source import import_model
    cfg = Path(__file__).parent / "data" / "hf-configs" / "Qwen__Qwen3-235B-A22B-FP8.json"
    spec = import_model(cfg, read_headers=False).spec
    from llmsize.catalog.loader import Catalog
    g = Catalog().gpu("h100-sxm")
    card = shard_model(spec, 4)
    w = weight_bytes(card, quant_format("fp8-block128"), "linear").bytes_total
    v = engine_ledger(card, g, w, EngineInputs(max_model_len=40960, version="0.10.0"))  # July 2025's
    sg = engine_ledger(card, g, w, EngineInputs(engine="sglang", gpu_util=0.93, max_model_len=40960))
    assert v.block_bytes == 16 * 94 * 2 * 1 * 128 * 2  # 4 KV heads over 4 cards: one each
    TABLE.append(("vllm#21348", "vLLM KV GiB (LMCache attached)", v.kv_cache_bytes / GiB, 8.11,
                  v.kv_cache_bytes / GiB / 8.11 - 1))
    TABLE.append(("vllm#21348", "SGLang KV tokens", sg.kv_cache_tokens, 367404, sg.kv_cache_tokens / 367404 - 1))
    assert sg.kv_cache_tokens == pytest.approx(367404, rel=0.15)


def test_fp8_ds_mla_pages(catalog):
    """DeepSeek-V3.2 under vLLM with --kv-dtype fp8_ds_mla: 61 MLA layers x (656 B of latent and RoPE + the
    indexer's 132 B key) per token, pages of 16 tokens."""
    m, g = catalog.model("deepseek-v3.2"), catalog.gpu("h200-sxm")
    from llmsize.estimate.parallel import shard_model
    led = engine_ledger(shard_model(m, 8), g, 80e9, EngineInputs(kv_dtype="fp8_ds_mla", max_model_len=32768,
                                                                 block_size=16))
    assert led.block_bytes == 16 * 61 * (656 + 132)


def test_moe_activation_counts_the_fused_moe_workspaces(catalog):
    """Qwen3-30B-A3B (128 experts, top-8, I 768, H 2048): per token 8 x (max(2 x 768, 2048) + 768) = 22,528
    values of workspace + 2 x 2048 hidden: x 2 B x 2048 tokens, plus 256 sequences of logits (151,936 x 6 B)."""
    m = catalog.model("qwen3-30b-a3b")
    assert activation_peak_bytes(m, 2048, 256) == 2048 * (8 * (2048 + 768) + 2 * 2048) * 2 + 256 * 151936 * 6


@pytest.mark.parametrize("given, key", [
    ("v0", "v0"), ("0.6.4", "v0"), ("0.7.3", "v0"), ("vllm==0.8.0", "v1-0.20"), ("0.10.2", "v1-0.20"),
    ("0.20.0", "v1-0.20"), ("v1-0.20", "v1-0.20"), ("0.21", "v1"), ("0.24.0", "v1"), ("v1", "v1"), ("1.0", "v1"),
    ("latest", "v1"),
])
def test_engine_version_accepts_the_release_a_user_runs(given, key):
    from llmsize.estimate.vllm_release import vllm_profile
    assert vllm_profile(given).key == key


def test_v1_defaults_follow_vllms_own_test(catalog):
    """vLLM tests/engine/test_arg_utils.py test_defaults_with_usage_context: >= 70 GiB cards other than the
    A100 get 16384 (LLM class) / 8192 (serve) batched tokens and 1024 sequences; the rest 8192 / 2048 and 256. From
    0.28.0 (EngineArgs.get_batch_defaults) a card of >= 160 GiB gets 16384 for both; an H200's 139.8 GiB stays
    below it."""
    from llmsize.estimate.engines import cuda_total_bytes
    from llmsize.estimate.vllm_release import v1_defaults
    for gid, serve, offline in (("h100-sxm", (8192, 1024), (16384, 1024)), ("a100-80gb-sxm", (2048, 256), (8192, 256)),
                                ("rtx4090", (2048, 256), (8192, 256)), ("h200-sxm", (8192, 1024), (16384, 1024))):
        g = catalog.gpu(gid)
        total, _ = cuda_total_bytes(g)
        assert v1_defaults(g, total, offline=False) == serve and v1_defaults(g, total, offline=True) == offline
    for gid in ("b200", "mi300x", "mi355x"):
        g = catalog.gpu(gid)
        total, _ = cuda_total_bytes(g)
        assert total >= 160 * 2**30
        assert v1_defaults(g, total, offline=False) == (16384, 1024) == v1_defaults(g, total, offline=True)
        assert v1_defaults(g, total, offline=False, release=(0, 27, 1)) == (8192, 1024)


@pytest.mark.parametrize("release, pp, draft, v1_runner, batches", [
    ((0, 25, 1), 1, False, False, 1), ((0, 25, 1), 4, False, True, 1),  # before 0.26: max_num_batched_tokens
    ((0, 26, 0), 1, False, False, 2), ((0, 26, 0), 1, False, True, 2),  # async scheduling (default since 0.14): 2
    ((0, 26, 0), 2, False, False, 3),  # a dense model's V2 model runner: pp + 1
    ((0, 26, 0), 2, False, True, 2), ((0, 28, 0), 4, False, True, 4),  # a MoE's V1 runner: the stages, no more
    ((0, 29, 0), 4, False, True, 5), ((0, 34, 0), 2, False, True, 3),  # the V2 runner for every model from 0.29
    ((0, 27, 1), 1, True, False, 1), ((0, 27, 1), 2, True, False, 2),  # a draft model: no async before 0.28
    ((0, 28, 0), 1, True, False, 2),
])
def test_vllm_reserves_a_sliding_window_for_the_batches_in_flight(release, pp, draft, v1_runner, batches):
    """vllm/config/vllm.py (0.26.0-0.34.0): max_in_flight_tokens = max_concurrent_batches x max_num_batched_tokens;
    max_concurrent_batches is pp + 1 with async scheduling on the V2 model runner, 2 on the V1 runner at pp 1, else
    pp. The V2 runner: 0.26-0.28 a dense model's without Mamba layers (_is_default_v2_model_runner_model), from 0.29
    every model's."""
    from llmsize.estimate.vllm_release import in_flight_tokens
    assert in_flight_tokens(2048, release, pp, draft, v1_runner)[0] == batches * 2048


def test_vllm_49878_gemma_4_request_grew_by_the_second_batch_in_flight(catalog):
    """vllm-project/vllm#49878 (2026-07-26), Gemma 4 31B from 0.25.1 to 0.26.0 at max_num_batched_tokens 32768: a
    comment counts the request 45.79 GiB under 0.25.1 and 70.79 GiB, the figure 0.26.0's start-up error printed,
    under async scheduling's two batches (#47728). The layout: 5 sliding groups of 10 layers (16-token blocks,
    window 1,024) and one full group (32-token blocks) of 256 KiB pages; at the model's 262,144 tokens
    4,096 x 2 + 5 x (cdiv(1,023 + 32,768, 16) + 1) = 18,757 blocks of 10 pages (45.79 GiB), and with 65,536 tokens in
    flight 4,096 x 2 + 5 x 4,161 = 28,997 (70.79 GiB)."""
    from llmsize.estimate.engines import v1_layout
    from llmsize.estimate.vllm_release import in_flight_tokens
    lay = v1_layout(catalog.model("gemma-4-31b-nvfp4"), "bf16", 16)
    assert lay.group_size == 10 and lay.page_bytes == 256 * 1024
    need = {rel: lay.blocks_per_request(262_144, in_flight_tokens(32_768, rel)[0]) for rel in ((0, 25, 1), (0, 26, 0))}
    assert need == {(0, 25, 1): 18_757, (0, 26, 0): 28_997}
    assert [round(n * 10 * 256 * 1024 / 2**30, 2) for n in need.values()] == [45.79, 70.79]


def test_the_ledger_says_what_its_sliding_groups_reserve(run_cli):
    """The release changes the tokens a sliding group reserves, and the plan says so beside the blocks."""
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--quant", "nvfp4", "--engine", "vllm")
    text = " ".join(out.split())
    assert code == 0 and "4,992 tokens in flight (2 x max_num_batched_tokens 2,496: async scheduling's two batches" \
        in text
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--quant", "nvfp4", "--engine", "vllm",
                             "--engine-version", "0.25.1")
    text = " ".join(out.split())
    assert code == 0 and "2,496 tokens in flight (max_num_batched_tokens 2,496: one batch, vLLM before 0.26)" in text


def _qwen3_0_6b(tmp_path):
    """Qwen/Qwen3-0.6B config.json (huggingface.co/Qwen/Qwen3-0.6B): 28 layers, hidden 1024, 16 heads, 8 KV heads
    of 128, MLP 3072, vocab 151,936, tied embeddings."""
    from llmsize.importer.source import import_model
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
           "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
           "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": True, "max_position_embeddings": 40960,
           "torch_dtype": "bfloat16", "rms_norm_eps": 1e-6, "hidden_act": "silu"}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    return import_model(f, read_headers=False).spec


def test_vllm_24577_qwen3_0_6b_on_an_a100(catalog, tmp_path):
    """vllm-project/vllm#24577 (mgoin, 2025-09-10, vLLM main of that week: V1 before 0.21): Qwen3-0.6B through
    lm_eval (the LLM class), max_model_len 4096, default utilization 0.9, an A100 (80 GB: 69.66 GiB were
    left for the cache) -> 'Model loading took 1.1201 GiB', 'Available KV cache memory: 69.66 GiB', 'GPU KV cache
    size: 652,144 tokens', 'Maximum concurrency for 4,096 tokens per request: 159.21x'. Every setting is known
    but the card's CUDA total (the catalog has none for the A100 80GB: the nominal 80 GiB is used, ~0.8 GiB
    high) and the SXM/PCIe variant (same memory). 652,144 = 40,759 blocks of 16 x 114,688 B (28 x 2 x 8 x 128 x
    2 B per token)."""
    m, g = _qwen3_0_6b(tmp_path), catalog.gpu("a100-80gb-sxm")
    w = _w(m)
    assert w / GiB == pytest.approx(1.1201, rel=0.02)  # 0.596 B parameters x 2 B
    led = engine_ledger(m, g, w, EngineInputs(version="0.10.2", max_model_len=4096, offline=True))
    assert led.block_bytes == 16 * 28 * 2 * 8 * 128 * 2 and led.cudagraph_bytes == 0
    assert led.max_num_batched_tokens == 8192  # the A100 keeps the small LLM-class default
    TABLE.append(("vllm#24577", "GPU KV cache tokens (V1 0.10)", led.kv_cache_tokens, 652144,
                  led.kv_cache_tokens / 652144 - 1))
    TABLE.append(("vllm#24577", "KV cache GiB", led.kv_cache_bytes / GiB, 69.66, led.kv_cache_bytes / GiB / 69.66 - 1))
    assert led.kv_cache_tokens == pytest.approx(652144, rel=0.05)  # the target
    assert led.max_concurrency == pytest.approx(159.21, rel=0.05)


def test_vllm_0_28_qwen3_14b_bf16_and_awq_on_an_l40s(catalog):
    """jinwoong, "LLM 최적화 실전 프로젝트 — 단일 인스턴스 처리량 최대화" (blog post of 2026-09-06, slug
    deep-learning/llm-optimization-capstone): vLLM 0.28.0, one L40S (AWS g6e.2xlarge, 46,068 MiB), `vllm serve
    Qwen/Qwen3-14B` and `Qwen/Qwen3-14B-AWQ` with every default (max_model_len 40,960 from the config). Logged:
    BF16 'Model loading took 27.52 GiB', 'Available KV cache memory: 11.57 GiB', 'GPU KV cache size: 75,824 tokens',
    'Maximum concurrency for 40,960 tokens per request: 1.85x'; AWQ (the post's table) 9.44 GiB of weights, 29.63
    GiB and 194,192 tokens, 4.74x. A held-out check of the V1 >= 0.21 ledger on a release it was not built on:
    40 layers x 2 x 8 KV heads x 128 x 2 B = 163,840 B a token, 16-token blocks. At 0.28.0's default utilization,
    0.92 (vllm/config/cache.py, from 0.20.0), the ledger holds 12.40 and 30.61 GiB, 0.83 and 0.98 GiB above the
    logs (+7.1% and +3.3% tokens): what it lacks is the same in both, independent of the weights, where its CUDA-graph
    reserve is a flat 0.3 GiB and vLLM's own estimates in published logs run from 0.13 GiB (noonghunna/club-3090#104)
    to 2.22 GiB (vllm-project/vllm#50722) on one node. Its tp 2 arm below."""
    m, g = catalog.model("qwen3-14b"), catalog.gpu("l40s")
    for fmt, tokens, concurrency in (("bf16", 75824, 1.85), ("awq-int4-g128", 194192, 4.74)):
        w = weight_bytes(m, quant_format(fmt), "linear").bytes_total  # AWQ keeps the embeddings in 16 bits
        assert w / GiB == pytest.approx(27.52 if fmt == "bf16" else 9.44, rel=0.02)
        led = engine_ledger(m, g, w, EngineInputs(version="0.28.0"))
        assert led.block_bytes == 16 * 40 * 2 * 8 * 128 * 2
        TABLE.append(("jinwoong-l40s", f"GPU KV cache tokens, {fmt} (V1 0.28)", led.kv_cache_tokens, tokens,
                      led.kv_cache_tokens / tokens - 1))
        assert led.kv_cache_tokens == pytest.approx(tokens, rel=0.08)
        assert led.max_concurrency == pytest.approx(concurrency, rel=0.08)
    # the same post's tp 2 arm over 2 x L4 (AWS g6.12xlarge, PCIe), its table: 14.38 GiB, 188,512 tokens, 4.60x. V1
    # snapshots memory after the communicators' set-up (gpu_worker init_device), so one card's non-torch memory is
    # charged, not 0.3 GiB x tp (which would read +0.1% here: the log cannot tell the two apart from the graph
    # reserve's shortfall above; the source sets the rule)
    from llmsize.estimate.parallel import shard_model

    card = shard_model(m, 2)
    w = weight_bytes(card, quant_format("awq-int4-g128"), "linear").bytes_total
    led = engine_ledger(card, catalog.gpu("l4"), w, EngineInputs(version="0.28.0", tp=2))
    TABLE.append(("jinwoong-l40s", "GPU KV cache tokens, AWQ tp 2 on L4 (V1)", led.kv_cache_tokens, 188512,
                  led.kv_cache_tokens / 188512 - 1))
    assert led.kv_cache_tokens == pytest.approx(188512, rel=0.03)  # +2.2%, 0.44 GiB a card above: as on the L40S
    assert led.max_concurrency == pytest.approx(4.60, rel=0.03)


def test_sglang_0_4_3_qwq_32b_over_4_l4s_from_its_free_memory(catalog):
    """didier-durand/llms-in-clouds, docs/sglang.md: SGLang 0.4.3.post4, Qwen/QwQ-32B (Qwen2.5-32B's shapes), tp 4 on
    4 x L4, mem_fraction_static 0.85 (SGLang's own choice): 'Load weight begin. avail mem=21.63 GB', 'Load weight
    end ... avail mem=6.09 GB, mem usage=15.54 GB', 'KV Cache is allocated. #tokens: 46611, K size: 1.42 GB'
    (SGLang's GB are GiB). Given the logged free memory at start (the card's CUDA total less 21.63 GiB) and the
    logged weights, the pool is SGLang's rule exactly: (21.63 x 0.85 - 15.54) GiB / 65,536 B a token (64 layers x
    2 x 2 KV heads a rank x 128 x 2 B) = 46,6xx. With the defaults (0.3 GiB x tp of communicators and context, the
    weights estimated 0.28 GiB under the log) the ledger says 39,009, 16% low: this run's communicators held
    0.32 GiB, where InferenceX#2128's tp 8 held ~1.9 GiB a card; recorded, the default unchanged."""
    m, g = catalog.model("qwen2.5-32b"), catalog.gpu("l4")
    from llmsize.estimate.parallel import shard_model

    card = shard_model(m, 4)
    non_torch = g.memory_cuda_bytes - 21.63 * GiB
    led = engine_ledger(card, g, 15.54 * GiB, EngineInputs(engine="sglang", gpu_util=0.85, tp=4,
                                                           non_torch_bytes=int(non_torch)))
    assert led.block_bytes == 64 * 2 * 2 * 128 * 2
    assert led.kv_cache_tokens == pytest.approx(46611, rel=0.01)
    default = engine_ledger(card, g, _w(card), EngineInputs(engine="sglang", gpu_util=0.85, tp=4))
    TABLE.append(("sglang-qwq-4xl4", "KV tokens (default free memory)", default.kv_cache_tokens, 46611,
                  default.kv_cache_tokens / 46611 - 1))


def test_gemma_4_31b_pool_reads_ten_times_larger_from_0_21(catalog):
    """vllm-project/vllm#43308 (2026-05-21): Gemma 4 31B (AWQ) on an A100 80GB, utilization 0.9, same pool
    (~50 GB available) in both releases: 'GPU KV cache size' ~55k tokens in 0.20.0 and ~525k in 0.21.0. Not a
    change of capacity but of what the line counts: blocks // 6 groups x 16 before, max concurrency x
    max_model_len after. The ledger is run on a 50 GiB pool; max_model_len and max_num_batched_tokens are not
    given (the model's 262,144 and the A100's serve default 2048 assumed)."""
    from pathlib import Path

    from llmsize.estimate.engines import v1_layout
    from llmsize.estimate.vllm_release import VLLM_V1, VLLM_V1_OLD
    from llmsize.importer.source import import_model
    cfg = Path(__file__).parent / "data" / "hf-configs" / "nvidia__Gemma-4-31B-IT-NVFP4.json"
    m = import_model(cfg, read_headers=False).spec
    lay = v1_layout(m, "bf16", 16)
    # sliding: 16 KV heads x 256 x K,V x 2 B = 16 KiB per token -> 256 KiB pages of 16 tokens; full: 4 x 512 x 2 x 2
    # = 8 KiB -> 32-token blocks; groups of min(50, 10) = 10 layers: 5 sliding + 1 full
    assert lay.page_bytes == 262144 and sorted(set(lay.groups)) == [("full", None, 32), ("sliding", 1024, 16)]
    blocks = int(50 * GiB // (lay.group_size * lay.page_bytes))  # 20,480
    old = blocks // len(lay.groups) * 16
    need = lay.blocks_per_request(262144, 2048)  # 8,192 full + 5 x (cdiv(1023 + 2048, 16) + 1) = 9,157
    new = int(blocks / need * 262144)
    TABLE.append(("vllm#43308", "Gemma 4 31B tokens, 0.20 (50 GiB)", old, 55000, old / 55000 - 1))
    TABLE.append(("vllm#43308", "Gemma 4 31B tokens, 0.21 (50 GiB)", new, 525000, new / 525000 - 1))
    assert old == pytest.approx(55000, rel=0.05)
    assert new == pytest.approx(525000, rel=0.15)  # two settings assumed: recorded, loosely held
    assert not VLLM_V1_OLD.tokens_from_concurrency and VLLM_V1.tokens_from_concurrency


def test_plan_engine_version_by_release_number(run_cli):
    """0.19.0 against 0.33.0: the old 'GPU KV cache size' line, no CUDA-graph reserve (on by default from 0.20.0)
    and utilization 0.90 (0.92 from 0.20.0)."""
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--engine", "vllm", "--engine-version",
                             "0.19.0", "--json")
    assert code == 0, err
    old = json.loads(out)["engine"]
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--engine", "vllm", "--engine-version",
                             "0.33.0", "--json")
    new = json.loads(out)["engine"]
    assert "before 0.21" in old["version"] and old["cudagraph_bytes"] == 0 and new["cudagraph_bytes"] > 0
    assert old["budget_bytes"] / new["budget_bytes"] == pytest.approx(0.90 / 0.92)
    # the same layout; the old line counts blocks // 6 groups x 16
    assert old["kv_cache_tokens"] == old["kv_blocks"] // 6 * 16 and new["kv_cache_tokens"] != new["kv_blocks"] // 6 * 16
    # 15,920 logged tokens, yet one 262,144-token request fits (1.18x): the old line is not a capacity
    assert old["max_concurrency"] > 1 and not any("refuses" in a for a in old["assumptions"])
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--engine", "vllm", "--engine-version",
                             "zero.x")
    assert code == 2 and "--engine-version `zero.x` is not a vLLM version" in err and "Traceback" not in err


def test_mamba_hybrid_attention_block_of_nemotron_nano_9b_v2(tmp_path):
    """vllm-project/vllm#24280 (2025-09-04): 'hybrid mamba/attention models ... might cause large attention page
    sizes (672 tokens for nvidia/NVIDIA-Nemotron-Nano-9B-v2)'. Its config.json: 56 blocks (pattern below), Mamba2
    with 128 heads of 80, 8 groups, state 128, conv 4 (no mamba_ssm_cache_dtype: vLLM keeps the state in 16
    bits); attention 8 KV heads of 128. One layer's state: 3 x (10,240 + 2 x 8 x 128) x 2 B + 128 x 80 x 128 x
    2 B = 73,728 + 2,621,440 = 2,695,168 B; a token of one attention layer 2 x 8 x 128 x 2 = 4,096 B; the block:
    16 x cdiv(2,695,168, 16 x 4,096) = 16 x 42 = 672 tokens, pages of 2,752,512 B (state padded by 2.13%)."""
    from llmsize.estimate.engines import v1_layout
    from llmsize.importer.source import import_model
    pattern = "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"
    cfg = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 4480,
           "intermediate_size": 15680, "num_hidden_layers": 56, "hybrid_override_pattern": pattern,
           "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "mamba_num_heads": 128,
           "mamba_head_dim": 80, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4, "vocab_size": 131072,
           "max_position_embeddings": 131072, "tie_word_embeddings": False, "mlp_hidden_act": "relu2",
           "torch_dtype": "bfloat16"}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    m = import_model(f, read_headers=False).spec
    lay = v1_layout(m, "bf16", 16)
    assert lay.state_bytes == 2_695_168 and lay.page_bytes == 672 * 4096
    # 27 mamba and 4 attention layers: groups of 4, 7 mamba groups (1 padding layer) + 1 attention group
    assert pattern.count("M") == 27 and pattern.count("*") == 4
    assert lay.group_size == 4 and lay.padded_layers == 1
    assert sorted(lay.groups) == [("full", None, 672)] + [("mamba", None, 672)] * 7
    # a 131,072-token request: cdiv(131,072, 672) = 196 attention blocks + one state block per mamba group
    assert lay.blocks_per_request(131072, 2048) == 196 + 7
    # from 0.34 the cache's block is 64 and aligns the attention block: 64 x cdiv(2,695,168, 64 x 4,096) = 704
    assert v1_layout(m, "bf16", 64).page_bytes == 704 * 4096


def test_mamba_hybrid_ledger_in_the_plan(run_cli):
    """Nemotron 3 Nano (23 Mamba2 layers with fp32 state, 6 attention layers of 2 x 128): state 3 x 6,144 x 2 +
    64 x 64 x 128 x 4 = 2,134,016 B; attention token 1,024 B; before 0.34 the block is 16 x cdiv(2,134,016, 16,384)
    = 2,096 tokens; from 0.34, whose default block is 64 (kernel_block_alignment_size = max(16, 64)), 64 x
    cdiv(2,134,016, 65,536) = 2,112. A request reserves cdiv(262,144, block) attention blocks and, in each of the 4
    Mamba groups (23 layers in groups of 6), 3 state pages from 0.32 (prefix caching's align mode, on by default from
    0.28: the state, the last block's, a Mamba2 mixer's prefill checkpoint), 1 before 0.28."""
    for version, bs, pages in (("0.27.1", 2096, 1), ("0.33.0", 2096, 3), ("v1", 2112, 3)):
        code, out, err = run_cli("plan", "nemotron-3-nano-30b-a3b", "--gpu", "h100-sxm", "--engine", "vllm",
                                 "--engine-version", version, "--json")
        assert code == 0, err
        e = json.loads(out)["engine"]
        assert e["block_bytes"] == 6 * bs * 1024  # one block across the 6 buffers of a group
        assert any(f"attention block grows to {bs:,} tokens" in a for a in e["assumptions"])
        assert e["max_concurrency"] == pytest.approx(e["kv_blocks"] / (-(-262144 // bs) + 4 * pages))


def test_trtllm_1400_int8_7b_on_an_a100(catalog):
    """NVIDIA/TensorRT-LLM#1400 (2024-04-04, v0.8, C++ runtime): a 7B SmoothQuant engine on an A100, built with
    max_batch_size 1, max_num_tokens 4096, max_input_len 4096 + max_output_len 1024, default
    kv_cache_free_gpu_mem_fraction 0.9: 'GPU 6683 (MiB)' for the engine, 'Allocate 69524783104 bytes for k/v
    cache', 'Using 132608 tokens'. 69,524,783,104 / 132,608 = 524,288 B per token = 32 layers x 2 x 4,096 x 2 B:
    a Llama-2-7B-shaped model (the log does not name it); 69.5 GB only fits the 80 GB A100. The ledger, given
    the logged engine size and its default runtime buffers (the activation model at 4,096 tokens, 1 sequence),
    on the catalog's nominal 80 GiB total (no CUDA total for this card: ~0.8 GiB high)."""
    m, g = catalog.model("llama-2-7b"), catalog.gpu("a100-80gb-sxm")
    led = engine_ledger(m, g, 6683 * 2**20, EngineInputs(engine="trtllm", gpu_util=0.9, max_model_len=5120,
                                                         max_num_batched_tokens=4096, max_num_seqs=1))
    assert led.block_bytes == 16 * 524288
    TABLE.append(("trtllm#1400", "KV tokens (nominal 80 GiB total)", led.kv_cache_tokens, 132608,
                  led.kv_cache_tokens / 132608 - 1))
    TABLE.append(("trtllm#1400", "KV bytes", led.kv_cache_bytes, 69524783104, led.kv_cache_bytes / 69524783104 - 1))
    assert led.kv_cache_tokens == pytest.approx(132608, rel=0.05)


def test_the_table_covers_every_shared_log(catalog, tmp_path):
    """The table of predicted against logged values (`pytest -s` prints it) holds a row for each log of
    shared/reference/engine-logs.yaml, with a finite error. Its rows come from the tests above, run again here
    in order (pytest-xdist may have run them in another worker)."""
    import inspect

    TABLE.clear()
    given = {"catalog": catalog, "tmp_path": tmp_path}
    for test in (test_vllm_10517_llama31_8b_on_3090, test_vllm_13882_quantized_qwen_on_an_8gb_card,
                 test_trtllm_224_llama2_7b_on_a10, test_vllm_10517_at_29k_the_peak_grows_with_the_batch,
                 test_vllm_recent_4090_point_is_recorded, test_seed_000_pool_is_recorded,
                 test_vllm_21348_qwen3_235b_fp8_on_4_h100_vllm_and_sglang, test_vllm_24577_qwen3_0_6b_on_an_a100,
                 test_gemma_4_31b_pool_reads_ten_times_larger_from_0_21, test_trtllm_1400_int8_7b_on_an_a100,
                 test_vllm_0_28_qwen3_14b_bf16_and_awq_on_an_l40s, test_sglang_0_4_3_qwq_32b_over_4_l4s_from_its_free_memory):
        test(**{name: given[name] for name in inspect.signature(test).parameters})
    for row in TABLE:
        print(f"{row[0]:12s} {row[1]:38s} predicted {row[2]:>10.3f} logged {row[3]:>10.3f} error {row[4]:+.1%}")
    ids = {row[0] for row in TABLE}
    assert {"vllm#10517", "vllm#13882", "trtllm#224"} <= ids
    assert all(abs(row[4]) < 10 for row in TABLE)
    # the README quotes the KV token counts' errors
    err = {(row[0], row[1]): row[4] for row in TABLE}
    quoted = (f"vllm#10517 (V0, {err['vllm#10517', 'GPU blocks']:+.1%} and "
              f"{err['vllm#10517', 'GPU blocks @29k']:+.1%}), "
              f"vllm#24577 (V1, {err['vllm#24577', 'GPU KV cache tokens (V1 0.10)']:+.1%}), TensorRT-LLM#1400 "
              f"({err['trtllm#1400', 'KV tokens (nominal 80 GiB total)']:+.1%})")
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text().replace("\n", " ")
    assert quoted in readme, quoted


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("model,gpu,tp", [("llama-3.1-8b", "h100-sxm", 1), ("qwen3-30b-a3b", "rtx4090", 2)])
def test_the_ledgers_lines_add_up_to_its_kv_cache(run_cli, engine, model, gpu, tp):
    """Each engine's ledger, read top to bottom as printed, is its own arithmetic: vLLM takes utilization x total
    and subtracts what it profiled; SGLang subtracts the non-torch memory first (free at start), then takes
    mem_fraction_static and subtracts the weights; TensorRT-LLM subtracts everything, then keeps a fraction of
    what is free. SGLang's and TensorRT-LLM's lines did not add up before they were printed in that order (the
    non-torch line came after a budget it was already out of)."""
    import json

    code, out, err = run_cli("plan", model, "--gpu", gpu, "--tp", str(tp), "--engine", engine, "--json")
    assert code == 0, err
    e = json.loads(out)["engine"]
    value = e["total_bytes"]
    for step in e["steps"]:
        label, b = step["label"], step["bytes"]
        if label.startswith("- "):
            value -= b
        elif label.startswith("x "):
            value *= float(label.split()[1])
        else:  # a subtotal
            assert b == pytest.approx(value, abs=2), label
        assert b == pytest.approx(value, abs=2) or label.startswith("- "), label
    assert value == pytest.approx(e["kv_cache_bytes"], abs=8)
    code, out, err = run_cli("plan", model, "--gpu", gpu, "--tp", str(tp), "--engine", engine)
    start = out.index(" total (CUDA)")
    table = out[start:out.index(" KV cache  ", start)].splitlines()[1:]
    assert [ln.rsplit(" GiB", 1)[0].rsplit(None, 1)[0].strip() for ln in table] == \
        [s["label"] for s in e["steps"] if s["bytes"] or not s["label"].startswith("-")]


def test_sglangs_hybrid_swa_pool_keeps_a_share_of_the_full_layers_tokens(run_cli):
    """SGLang sizes gpt-oss and Llama 4 with its hybrid SWA pool (configs/model_config.py is_hybrid_swa_model): the
    sliding layers keep --swa-full-tokens-ratio (0.8) of the full layers' tokens, and it logs the full layers'.
    gpt-oss-120b per card: 18 full and 18 sliding layers of 8 KV heads x 64 x 2 (K, V) x 2 B = 36,864 B each kind,
    so a logged token costs 36,864 + 0.8 x 36,864 = 66,355 B (every layer per token would be 73,728). Muse Glimmer
    (MuseGlimmerForConditionalGeneration, in the set): 13 full and 39 sliding layers of 2 KV heads x 128 x 2 x 2 B,
    13,312 + 0.8 x 39,936 = 45,260.8, 45,261 B. Gemma 3, not in SGLang's set, stays charged per token on every layer."""
    import json

    def engine(model, gpu, *extra):
        code, out, err = run_cli("plan", model, "--gpu", gpu, "--engine", "sglang", "--json", *extra)
        assert code == 0, err
        return json.loads(out)["engine"]

    e = engine("gpt-oss-120b", "h100-sxm")
    assert e["block_bytes"] == int(36864 + 0.8 * 36864)
    assert e["kv_cache_tokens"] == int(e["kv_cache_bytes"] // e["block_bytes"])
    assert engine("muse-glimmer-30b", "h200-sxm")["block_bytes"] == round(13 * 1024 + 0.8 * 39 * 1024)
    g = engine("gemma-3-27b", "h100-sxm")
    # Gemma 3 27B: 62 layers x 16 KV heads x 128 x 2 x 2 B = 507,904 B a token, sliding layers included
    assert g["block_bytes"] == 62 * 16 * 128 * 2 * 2


def test_vllm_loads_qwen35s_vision_tower_split_over_its_cards(run_cli):
    """An operations log of vLLM 0.20.0 on RTX 5090s serving Qwen/Qwen3.5-9B in BF16 (`vllm bench latency`, max
    model length 4,096; read via the file index, id 55002292133): 'Resolved architecture:
    Qwen3_5ForConditionalGeneration', 'Model loading took 17.66 GiB memory' on one card, 8.91 GiB a card at tensor
    parallel 2, and 18.12 GiB with --speculative-config '{"method":"mtp","num_speculative_tokens":1}' ('Sharing
    target model embedding weights ... lm_head weights with the draft model'). The plan's weights, the vision tower
    in: (8,953,803,264 + 456,010,480) x 2 B = 17.53 GiB, 8.76 a card (the tower split as the decoder is), 17.98 with
    the MTP layer's 243,290,624 x 2 B; the text decoder alone would be 16.68 GiB, 5.5% short of the log."""
    def plan(*more):
        code, out, err = run_cli("plan", "qwen3.5-9b", "--gpu", "rtx5090", "--quant", "bf16", "--runtime", "vllm",
                                 "--context", "4096", "--json", *more)
        assert code == 0, err
        return json.loads(out)
    one = plan()
    assert one["weights"]["bytes_total"] == (8_953_803_264 + 456_010_480) * 2
    assert one["weights"]["bytes_total"] / GiB == pytest.approx(17.66, rel=0.01)
    assert 8_953_803_264 * 2 / GiB < 17.66 * 0.95  # without the tower the log is missed by more than 5%
    assert plan("--tp", "2")["parallel"]["weights_bytes_per_card"] / GiB == pytest.approx(8.91, rel=0.02)
    spec = plan("--spec", "mtp=1")
    drafted = spec["weights"]["bytes_total"] + spec["speculative"]["draft_weight_bytes"]
    assert spec["speculative"]["draft_weight_bytes"] == 243_290_624 * 2
    assert drafted / GiB == pytest.approx(18.12, rel=0.01)


def test_a_context_past_max_model_len_is_refused_and_a_default_bounded(run_cli):
    """--context longer than --max-model-len sized sequences the engine as launched refuses (the emitted vLLM line
    said --max-model-len 2048 beside a plan of 4,096-token sequences): refused, before any output; without
    --context, the plan takes --max-model-len where the default is longer, and says so."""
    for extra in (("--engine", "vllm"), ("--emit", "vllm")):
        code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--context", "4096", "--max-model-len",
                                 "2048", *extra)
        assert code == 2 and out == "" and "--context 4,096 is longer than --max-model-len 2,048" in err, err
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "2048", "--engine", "vllm",
                             "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["inputs"]["context_tokens"] == 2048 and any("--max-model-len's" in n for n in d["notes"])


def test_the_engines_ledger_says_what_the_plans_budget_is_beside_it(run_cli):
    """--engine vllm printed two capacities (the generic budget's 5.52 GB on the vendor's 24 GiB, vLLM's 5.29 GiB
    on CUDA's 23.58) without saying which the plan's figures use: the ledger's last assumption says both."""
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx3090", "--quant", "bf16", "--engine", "vllm",
                             "--max-model-len", "20000", "--json")
    assert code == 0, err
    d = json.loads(out)
    said = d["engine"]["assumptions"][-1]
    assert said.startswith("Beside the plan's Memory budget (24.00 GiB x 0.9, less the weights and 1.5 GiB")
    assert f"{d['capacity']['kv_budget_bytes'] / 1e9:,.2f} GB for the cache" in said and "vLLM itself" in said


def test_a_plan_says_where_its_serving_engines_ledger_holds_far_less(run_cli):
    """Llama 3.1 70B in FP8 on one H100 with --gpu-util 0.9: the plan's budget (80 GiB x 0.9, less the weights and
    1.5 GiB) leaves 3.04 GB for the cache, two sequences of 4,096 tokens, and its expected figure is vLLM's; vLLM's
    own ledger (0.34: 79.21 GiB as CUDA reports it x 0.9, less the weights, CUDA graphs and its activation peak)
    leaves 1.10 GB, 3,328 tokens: it refuses to start at --max-model-len 4,096. The plan warns, with the share from
    which the engine starts. With vLLM's own default (0.34's extensible cache: utilization 1.0 less a margin) the
    ledger holds more than the plan's budget: no warning. SGLang's default fraction on an H100, 0.83, leaves nothing
    after the weights: it does not start; at 0.9 its pool caps a request below 4,096 tokens, and says so."""
    import json

    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100-sxm", "--quant", "fp8", "--gpu-util", "0.9",
                             "--json")
    assert code == 0, err
    said = [w for w in json.loads(out)["warnings"] if w.startswith("vLLM's own memory ledger")]
    assert len(said) == 1
    assert "1.10 GB of cache (3,328 tokens), where the plan's budget leaves 3.04 GB" in said[0]
    assert "it does not start at 4,096 tokens a request with gpu_memory_utilization 0.9, from 0.9029 it does" in said[0]
    assert said[0].endswith("`--engine vllm` itemizes it")
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100-sxm", "--quant", "fp8", "--gpu-util", "0.9",
                             "--engine", "vllm")
    assert code == 0 and "own memory ledger leaves" not in out  # the ledger itself is printed
    for args in (("llama-3.1-8b",), ("llama-3.1-70b", "--quant", "fp8")):
        code, out, err = run_cli("plan", *args, "--gpu", "h100-sxm", "--json")
        assert not [w for w in json.loads(out)["warnings"] if "own memory ledger" in w]
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100-sxm", "--quant", "fp8", "--runtime", "sglang",
                             "--json")
    said = [w for w in json.loads(out)["warnings"] if "own memory ledger" in w]
    assert code == 0 and len(said) == 1 and "it does not start at 4,096 tokens a request with mem_fraction_static" \
        " 0.83, from 0.8734 it does" in said[0]


def test_ledger_shortfall_says_nothing_where_the_engine_holds_most_of_the_budget():
    from types import SimpleNamespace

    from llmsize.estimate.engines import LEDGER_SHORT, ledger_shortfall

    budget = SimpleNamespace(kv_budget_bytes=10e9, gpu_util=0.9)
    led = SimpleNamespace(name="vllm", kv_cache_bytes=LEDGER_SHORT * 10e9, kv_cache_tokens=30_000,
                          fits_one_request=True, requests_at_once=7.3, max_model_len=4096, min_fraction=0.5)
    assert ledger_shortfall(led, budget) is None
    led.kv_cache_bytes = 0.79 * 10e9
    assert ledger_shortfall(led, budget).endswith(": 7.3 requests of 4,096 tokens at once")


def test_an_mla_hybrids_attention_block_aligns_to_64_tokens(catalog):
    """vLLM's HybridAttentionMambaModelConfig aligns a hybrid's attention block to 16 tokens, to 64 for an MLA model
    (128 under CUTLASS MLA): Kimi Linear's KDA state of 2,170,880 B over MLA's 1,152 B a token takes 64 x
    cdiv(2,170,880, 64 x 1,152) = 1,920 tokens (16-aligned it had been 1,888), its state page padded by 1.89%."""
    from llmsize.estimate.engines import v1_layout

    layout = v1_layout(catalog.model("kimi-linear-48b-a3b"), "bf16", 16)
    assert [bs for kind, _, bs in layout.groups if kind != "mamba"] == [1920]
    assert round(100 * (layout.page_bytes / layout.state_bytes - 1), 2) == 1.89


@pytest.mark.parametrize("given, release", [
    ("0.26.0+cu128", (0, 26, 0)), ("0.33.0rc2", (0, 33, 0)), ("0.19.1+cu126", (0, 19, 1)), ("0.6.3.post1", (0, 6, 3)),
    ("v0.21", (0, 21, 0)), ("vllm==0.8.0", (0, 8, 0)), ("v1", (0, 34, 0)), ("v1-0.20", (0, 20, 0)),
])
def test_a_release_with_a_builds_suffix_is_that_release(given, release):
    """A wheel's local version (0.26.0+cu128) or a pre-release (0.33.0rc2) had been read as the newest release: the
    0.34 ledger for a 0.26 run."""
    from llmsize.estimate.vllm_release import effective_release
    assert effective_release(given) == release


def test_sglang_scales_its_fraction_only_under_aiter_attention(catalog):
    """SGLang's 0.85 on ROCm above 8,192 tokens of context (arg_groups/attention_hook.py) is aiter's: the MHA default
    on HIP, MLA's where a card holds 16 or 128 heads (DeepSeek-V3 at tp 8: 16), not Gemma 4's (triton) nor
    DeepSeek-V4's (its own backend)."""
    from llmsize.estimate.engines import sglang_aiter_attention
    from llmsize.estimate.parallel import shard_model

    mi300x, h100 = catalog.gpu("mi300x"), catalog.gpu("h100-sxm")
    assert sglang_aiter_attention(catalog.model("llama-3.1-8b"), mi300x)
    assert not sglang_aiter_attention(catalog.model("llama-3.1-8b"), h100)
    assert sglang_aiter_attention(shard_model(catalog.model("deepseek-v3"), 8), mi300x)
    assert not sglang_aiter_attention(catalog.model("gemma-4-12b"), mi300x)
    assert not sglang_aiter_attention(catalog.model("deepseek-v4-flash"), mi300x)


def test_the_dgx_spark_keeps_vllms_small_defaults_from_0_33(catalog):
    """EngineArgs.get_batch_defaults (0.33.0): is_gb10 = compute capability 12.1 stays on the small tier."""
    from llmsize.estimate.engines import cuda_total_bytes
    from llmsize.estimate.vllm_release import v1_defaults
    g = catalog.gpu("dgx-spark")
    total = cuda_total_bytes(g)[0]
    assert v1_defaults(g, total, offline=False, release=(0, 33, 0)) == (2048, 256)
    assert v1_defaults(g, total, offline=False, release=(0, 32, 0)) == (8192, 1024)


def test_hostile_engine_inputs_get_one_line(run_cli):
    """A DeepSeek-V4 block vLLM cannot cut its ratio-128 rows from had raised a traceback; SGLang's refusal had offered
    a fraction above 1."""
    code, out, err = run_cli("plan", "deepseek-v4-flash", "--gpu", "h200", "--tp", "4", "--engine", "vllm",
                             "--block-size", "16")
    assert code == 2 and "--block-size 16" in err and "a multiple of 128" in err and "Traceback" not in err
    code, out, err = run_cli("plan", "deepseek-v3.2", "--gpu", "h200", "--engine", "sglang", "--json")
    notes = json.loads(out)["engine"]["assumptions"] if code == 0 else []
    assert any("the weights take more than its free memory at any fraction" in n for n in notes), err


def test_the_ledger_says_the_share_it_ran_with(run_cli):
    """The engine object carries the share its ledger used; a DGX Spark's 0.8 is said as the machine's, not given."""
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "sglang", "--json")
    assert code == 0 and json.loads(out)["engine"]["gpu_util"] == 0.83
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "dgx-spark", "--engine", "vllm", "--json")
    led = json.loads(out)["engine"]
    assert led["gpu_util"] == 0.8 and any("gpu_memory_utilization 0.8 (the share a machine whose GPU shares its RAM"
                                          in n for n in led["assumptions"])


def test_an_engine_ledger_loads_the_draft_beside_the_model(run_cli):
    """--spec: vLLM and SGLang load the draft (a draft model, or the MTP layers) on the card beside the model, so
    their ledgers charge its weights: DeepSeek-V4-Flash's MTP layer, 0.82 GiB a card at tp 4."""
    got = {}
    for spec in ((), ("--spec", "mtp")):
        code, out, err = run_cli("plan", "deepseek-v4-flash", "--gpu", "h200", "--tp", "4", "--engine", "vllm", *spec,
                                 "--json")
        assert code == 0, err
        got[spec] = json.loads(out)
    draft = got[("--spec", "mtp")]["speculative"]["draft_weight_bytes"]
    assert got[("--spec", "mtp")]["engine"]["weights_bytes"] == pytest.approx(got[()]["engine"]["weights_bytes"]
                                                                              + draft, abs=1)


def test_vllm_blocks_a_sparse_mla_model_as_its_backend_takes_them(catalog):
    """DeepSeek-V3.2's indexer (DSA) runs on the sparse MLA backends, whose block is 64 before 0.34
    (flashmla_sparse.py, flashattn_mla_sparse.py: [64]); DeepSeek-V3's dense MLA keeps the default 16 on Hopper."""
    from llmsize.estimate.vllm_release import vllm_block_size
    h200 = catalog.gpu("h200-sxm")
    assert vllm_block_size(catalog.model("deepseek-v3.2"), h200, (0, 33, 0))[0] == 64
    assert vllm_block_size(catalog.model("deepseek-v3"), h200, (0, 33, 0))[0] == 16


def test_sglang_takes_less_for_a_multimodal_checkpoint(catalog):
    """adjust_mem_fraction_for_vlm (0.5.23 memory_hook.py): 0.95 x clamp(1 - 0.1 x (L x H^2 / (24 x 1024^2) - 1),
    0.8, 1.05), L = getattr(vision_config, "num_hidden_layers", 24), H = getattr(vision_config, "hidden_size", 1024).
    Gemma 4 26B-A4B's tower, 27 x 1,152: 27 x 1,327,104 / 25,165,824 = 1.423828 -> 0.95 x 0.957617 = 0.909736.
    Qwen3.6-27B's counts its 27 blocks as `depth`: SGLang takes 24, 1.265625 -> 0.95 x 0.973438 = 0.924766 (the
    tower's parameters, 30.3 layers, had given 0.893). Gemma 4 12B's embedder has neither attribute: 0.95 exactly.
    A multimodal architecture off the prefill-graph allowlist loses that reserve (13,440 MiB on an H100, not 13,904);
    Qwen3.5's keeps it. Gemma 3 and Llama 4 are served text-only unless --enable-multimodal (mm_disabled_models):
    no factor, the prefill graphs kept."""
    from llmsize.estimate.sglang_defaults import (
        sglang_mem_fraction,
        sglang_text_only_note,
        sglang_vision_tower,
        vlm_factor,
    )

    h100 = catalog.gpu("h100-sxm")

    def fraction(model_id):
        model = catalog.model(model_id)
        return sglang_mem_fraction(h100, 1, 1, False, sglang_vision_tower(model), model.family)

    f, why = fraction("gemma-4-26b-a4b")
    assert f == pytest.approx(0.835 * 0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1)), rel=1e-12)
    assert f == pytest.approx(0.835 * 0.909736, abs=1e-6) and "13,440 MiB" in why and "27 layers x 1,152 wide" in why
    f, why = fraction("qwen3.6-27b")
    assert f == pytest.approx(0.83 * 0.924766, abs=1e-6) and "13,904 MiB" in why
    assert "24 layers (SGLang's default: the vision_config has no num_hidden_layers)" in why
    f, why = fraction("gemma-4-12b")
    assert f == pytest.approx(0.835 * 0.95, rel=1e-12) and "13,440 MiB" in why
    # Muse Glimmer keeps its prefill graphs, captured up to 512 tokens (cuda_graph_hook.py: 30 sizes, 240 MiB),
    # and its 50 x 1,536 encoder takes the floor: 50 x 2,359,296 / 25,165,824 = 4.6875 -> max(0.8, 0.63125) x 0.95
    f, why = fraction("muse-glimmer-30b")
    assert f == pytest.approx(round((81_559 - (512 + 12_288 + 128 + 512 + 240)) / 81_559, 3) * 0.76, rel=1e-12)
    assert "13,680 MiB" in why and "50 layers x 1,536 wide" in why
    # Kimi K3 (KimiK3ForConditionalGeneration, on the prefill-graph allowlist): its KimiK3VisionConfig holds
    # vt_num_hidden_layers 27 and vt_hidden_size 1,024 as num_hidden_layers and hidden_size: 27 / 24 = 1.125 -> 0.938125
    f, why = fraction("kimi-k3")
    assert f == pytest.approx(0.83 * 0.95 * 0.9875, rel=1e-12) and "13,904 MiB" in why
    for text_only in ("gemma-3-27b", "llama-4-scout"):
        f, why = fraction(text_only)
        assert (f, "vision" in why) == (0.83, False), text_only
    # the ledger says why, and what --enable-multimodal would cost (Gemma 3's SigLIP, 27 x 1,152: x 0.910)
    assert "text-only unless --enable-multimodal" in sglang_text_only_note(catalog.model("gemma-3-27b"))
    assert "x 0.910" in sglang_text_only_note(catalog.model("gemma-3-27b"))
    assert sglang_text_only_note(catalog.model("qwen3.6-27b")) is None
    # a tower whose vision_config is not recorded (an entry imported before the field): L from its parameters,
    # 4 h^2 + 2 h I a layer: Gemma 3's 423,060,336 / 15,224,832 = 27.8 layers -> 0.906
    gemma3 = next(x for x in catalog.model("gemma-3-27b").extra if x.encoder is not None)
    factor, said = vlm_factor(gemma3.model_copy(update={"vision_config": None}))
    assert factor == pytest.approx(0.906, abs=0.001) and "from its parameters" in said


def test_sglangs_fraction_for_kimi_k25_on_eight_mi355x_is_the_published_one(catalog):
    """A published SGLang start-up (ajith-sirra-amd/Issues Kimi-K2.5-MI355X-SGLANG-ERROR.md @ffc532e0; rocm/sgl-dev
    v0.5.8.post1, `sglang serve --model-path moonshotai/Kimi-K2.5 --tp 8`, no memory flags) prints
    mem_fraction_static=0.8260405859375: (294,912 MiB - 27,136 reserved: 512 + 1.5 x 16,384 + 2 x 512 + 8 / 8 x 1,024,
    no prefill graphs on HIP) / 294,912 = 0.908, x 0.95 x (1 - 0.1 x (27 x 1152^2 / (24 x 1024^2) - 1)) = 0.909736 for
    its MoonViT tower, float for float (0.5.23's arithmetic gives that release's base on this card)."""
    from llmsize.estimate.sglang_defaults import sglang_mem_fraction, sglang_vision_tower

    kimi = catalog.model("kimi-k2.5")
    f, why = sglang_mem_fraction(catalog.gpu("mi355x"), 8, 1, True, sglang_vision_tower(kimi), kimi.family)
    assert f == 0.8260405859375 and "27,136 MiB" in why


def test_sglang_keeps_a_dsa_models_cache_in_fp8_on_blackwell(run_cli):
    """arg_groups/overrides.py _dsa_kv_cache_dtype_default (SGLang 0.5.23): a DeepSeek sparse-attention model's
    'auto' cache is fp8_e4m3 on compute capability 10 and up, bfloat16 below; vLLM keeps its own default."""
    def kv(gpu, runtime):
        code, out, err = run_cli("plan", "deepseek-v3.2", "--gpu", gpu, "--tp", "8", "--runtime", runtime, "--json")
        assert code == 0, err
        return json.loads(out)["inputs"]["kv_dtype"]

    assert (kv("b200", "sglang"), kv("h200", "sglang"), kv("b200", "vllm")) == ("fp8", "bf16", "bf16")


@pytest.mark.parametrize("gpu, tp, fraction", [
    # SGLang 0.5.23's default, as the README quotes it: (nvidia-smi MiB - reserve) / MiB, reserve = 512 + 1.5 x chunk
    # + tp / 8 x 1024 + 2 x decode graph batch + 8 a prefill graph size (CUDA only), at least 10,240 above 60 GiB.
    # H100 (81,559 MiB): max(512 + 12,288 + 128 + 512 + 464, 10,240) = 13,904 -> 0.830; RTX 4090 (24,564 MiB, chunk
    # 4,096, decode 48, 50 prefill sizes): 512 + 6,144 + 128 + 96 + 400 = 7,280 -> 0.704
    ("h100-sxm", 1, 0.830), ("h200-sxm", 1, 0.903), ("rtx4090", 1, 0.704), ("mi300x", 1, 0.867), ("h100-sxm", 8, 0.812),
])
def test_sglangs_default_fraction_by_card(catalog, gpu, tp, fraction):
    from llmsize.estimate.sglang_defaults import sglang_mem_fraction
    assert sglang_mem_fraction(catalog.gpu(gpu), tp)[0] == fraction


def test_vllms_default_block_by_card_and_release(catalog):
    """0.34's 64 (ROCm's ROCM_ATTN keeps 16 for attention other than MLA); before, 16, and FlashInfer-MLA's 32 for
    MLA on data-centre Blackwell."""
    from llmsize.estimate.vllm_release import vllm_block_size
    llama, v3 = catalog.model("llama-3.1-8b"), catalog.model("deepseek-v3")
    got = [vllm_block_size(m, catalog.gpu(g), rel)[0] for m, g, rel in (
        (llama, "h100-sxm", (0, 34, 0)), (llama, "mi300x", (0, 34, 0)), (v3, "mi300x", (0, 34, 0)),
        (llama, "h100-sxm", (0, 33, 0)), (v3, "b200", (0, 33, 0)), (v3, "h200-sxm", (0, 33, 0)))]
    assert got == [64, 16, 64, 16, 32, 16]


def test_vllm_raises_a_prefix_lm_models_default_batch_to_one_video(catalog, run_cli):
    """vLLM 0.22 on (engine/arg_utils.py): a multimodal prefix-LM model cannot split an item over forwards, so a
    default max_num_batched_tokens below its largest item is raised to it: Gemma 4's video, 32 frames x (70 soft
    tokens + 2 + 6) = 2,496 (models/gemma4_mm.py get_mm_max_tokens_per_item). The L40S's small-tier 2,048 becomes
    2,496 (a larger profiling forward and, from 0.26, a larger sliding-window reserve: fewer cache tokens); the
    H100's 8,192 stays; 0.21, Gemma 4 E4B (no bidirectional vision attention) and a given batch keep theirs."""
    from llmsize.estimate.vllm_release import prefix_lm_floor, v1_defaults

    g31, e4b, l40s, h100 = (catalog.model("gemma-4-31b-nvfp4"), catalog.model("gemma-4-e4b"), catalog.gpu("l40s"),
                            catalog.gpu("h100-sxm"))
    assert prefix_lm_floor(g31, (0, 22, 0)) == 2496 and prefix_lm_floor(g31, (0, 21, 0)) is None
    assert prefix_lm_floor(e4b, (0, 34, 0)) is None
    assert prefix_lm_floor(catalog.model("llama-3.1-8b"), (0, 34, 0)) is None
    assert [m.id for m in catalog.models.all() if m.vision_prefix_lm] == [
        "gemma-4-12b", "gemma-4-26b-a4b", "gemma-4-31b-nvfp4"]
    gib = 2**30
    assert v1_defaults(l40s, 44 * gib, False, (0, 25, 1), g31) == (2496, 256)
    assert v1_defaults(l40s, 44 * gib, False, (0, 21, 0), g31) == (2048, 256)
    assert v1_defaults(l40s, 44 * gib, True, (0, 25, 1), g31) == (8192, 256)  # the LLM class's 8,192 is above it
    assert v1_defaults(h100, 79 * gib, False, (0, 25, 1), g31) == (8192, 1024)

    def ledger(*extra):
        code, out, err = run_cli("plan", "gemma-4-31b-nvfp4", "--gpu", "l40s", "--engine", "vllm", "--max-model-len",
                                 "32768", "--engine-version", "0.25.1", *extra, "--json")
        assert code == 0, err
        return json.loads(out)["engine"]

    raised, given = ledger(), ledger("--max-num-batched-tokens", "2048")
    assert (raised["max_num_batched_tokens"], given["max_num_batched_tokens"]) == (2496, 2048)
    assert raised["kv_cache_tokens"] < given["kv_cache_tokens"]
    assert any("raised to one video item of this prefix-LM model" in n for n in raised["assumptions"])


def test_past_their_prefill_more_requests_run_than_vllm_logs(catalog, run_cli):
    """vLLM's logged concurrency reserves each request its prefill's blocks in a sliding group (window - 1 + tokens
    in flight); a running request's blocks below its window are freed (SlidingWindowManager), so it holds its window
    and the token in flight. Gemma 4 12B NVFP4 on an RTX 5060 Ti, 4,096-token requests, vLLM 0.34 (64-token blocks,
    5 sliding groups and a full one whose pages hold 256 tokens, 4,992 tokens in flight): a request's prefill takes
    5 x (cdiv(min(1,023 + 4,992, 4,096), 64) + 1) + 4,096 / 256 = 5 x 65 + 16 = 341 blocks, a running one
    5 x (1,024 / 64 + 1) + 16 = 101; 1,425 blocks log 1,425 / 341 = 4.18x and run (1,425 - 240) / 101 = 11.73 at
    once, one prefill's reserve aside. The launch line and fleet count the latter; a model without sliding groups
    has no such figure."""
    w = weight_bytes(catalog.model("gemma-4-12b"), quant_format("nvfp4"), "linear").bytes_total
    led = engine_ledger(catalog.model("gemma-4-12b"), catalog.gpu("rtx5060ti"), w, EngineInputs(max_model_len=4096))
    assert led.kv_blocks == 1425
    assert led.max_concurrency == pytest.approx(1425 / 341) and led.running_concurrency == pytest.approx(1185 / 101)
    assert led.requests_at_once == led.running_concurrency
    dense = catalog.model("llama-3.1-8b")
    dense_w = weight_bytes(dense, quant_format("bf16"), "linear").bytes_total
    plain = engine_ledger(dense, catalog.gpu("rtx4090"), dense_w, EngineInputs(max_model_len=4096))
    assert plain.running_concurrency is None and plain.requests_at_once == plain.max_concurrency
    assert (led.requests_held_by, plain.requests_held_by) == ("window", None)
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--engine", "vllm", "--max-model-len",
                             "4096", "--json")
    assert code == 0 and json.loads(out)["engine"]["running_concurrency"] == pytest.approx(1185 / 101)
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--emit", "vllm")
    assert code == 0 and "--max-model-len 4096 --max-num-seqs 11" in out


def test_fleet_admits_what_the_engines_pools_hold_for_a_sliding_window_model(catalog):
    """A card's users under vLLM are its running requests (above), under SGLang its full layers' tokens over a
    request's (its window pool beside them is a fixed share, SGLANG_SWA_FULL_TOKENS_RATIO): Gemma 4 12B NVFP4 on an
    RTX 5060 Ti, 3,000 in / 1,000 out, requests held at 3,500 tokens in a 4,000-token engine. Counted in bytes over
    the plan's window-limited cache of a request, SGLang's pool had held 10 (its full layers hold 3: 13,286 tokens at
    0.772 x 0.95, the embedder's margin, of the card)."""
    from llmsize.estimate.fleet import Workload
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.replica import kv_pool_bytes, users_held

    m, g = catalog.model("gemma-4-12b"), catalog.gpu("rtx5060ti")
    w = weight_bytes(m, quant_format("nvfp4"), "linear").bytes_total
    for runtime in ("vllm", "sglang"):
        p = make_plan(m, g, PlanInputs(context_tokens=3500, prompt_tokens=3000, runtime=runtime, kv_dtype=None),
                      search_fit=False)
        held = users_held(p, Workload(3000, 1000, users=40), runtime, None, kv_pool_bytes(p, runtime, 4000)[0])
        led = engine_ledger(m, g, w, EngineInputs(engine=runtime, max_model_len=4000))
        if runtime == "sglang":
            assert held == led.kv_cache_tokens // 3500 == 3
        else:  # the running requests of 4,000 tokens, a little more at 3,500
            assert int(led.running_concurrency) <= held <= led.running_concurrency * 1.05


def test_a_batch_below_max_num_seqs_is_refused_as_vllm_does(run_cli):
    """SchedulerConfig.verify_max_model_len: max_num_batched_tokens must be >= max_num_seqs (256 on an RTX 4090), or
    vLLM does not start; a release newer than the newest read is said to be priced as that one."""
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--engine", "vllm",
                             "--max-num-batched-tokens", "1")
    assert code == 2 and "--max-num-batched-tokens 1 is below vLLM's max_num_seqs, 256" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--engine", "vllm", "--engine-version", "9.9")
    assert code == 0 and "vLLM 9.9.0 is newer than the newest release read here, 0.34.0" in " ".join(out.split())


def test_a_negative_cache_is_not_told_to_lower_its_length(run_cli):
    """--non-torch-gib 1000 on a 32 GB card: the charges exceed the budget whatever the length, so the ledger does not
    advise lowering --max-model-len."""
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx5090", "--engine", "vllm", "--non-torch-gib", "1000")
    text = " ".join(out.split())
    assert code == 0 and "it does not start at any length" in text and "lower --max-model-len" not in text


@pytest.mark.parametrize("model, gpu, release, spec, pages", [
    ("qwen3.6-35b-a3b", "h100-sxm", (0, 14, 1), 2, 1),  # drafted tokens' pages counted from 0.15
    ("qwen3.6-35b-a3b", "h100-sxm", (0, 24, 0), 2, 3),  # prefix caching off for hybrids: 1 + S
    ("qwen3.6-35b-a3b", "h100-sxm", (0, 27, 1), 0, 1),
    ("qwen3.6-35b-a3b", "h100-sxm", (0, 28, 0), 0, 2),  # on by default, align mode: 2 + S
    ("qwen3.6-35b-a3b", "h100-sxm", (0, 32, 0), 0, 2),
    ("qwen3.6-35b-a3b", "h100-sxm", (0, 33, 0), 0, 3),  # FlashInfer's GDN prefill on Hopper: a checkpoint page
    ("qwen3.6-35b-a3b", "rtx5090", (0, 34, 0), 1, 4),  # Blackwell, 128-wide keys, CUDA 13 wheels
    ("qwen3.6-35b-a3b", "rtx4090", (0, 34, 0), 0, 2),  # Ada: Triton's kernel
    ("qwen3.6-35b-a3b", "mi300x", (0, 34, 0), 0, 2),
    ("nemotron-3-nano-30b-a3b", "rtx4090", (0, 31, 0), 0, 2),
    ("nemotron-3-nano-30b-a3b", "rtx4090", (0, 32, 0), 0, 3),  # a Mamba2 mixer's prefill checkpoint
    ("lfm2-1.2b", "h100-sxm", (0, 34, 0), 0, 2),  # a short conv: no checkpoint page
    ("kimi-linear-48b-a3b", "h100-sxm", (0, 34, 0), 0, 2),  # KDA without a bounded gate: no FlashKDA checkpoint
])
def test_a_mamba_groups_pages_a_request_follow_the_release(catalog, model, gpu, release, spec, pages):
    """MambaSpec.max_memory_usage_bytes over its page, release by release (vllm_release.mamba_state_blocks)."""
    from llmsize.estimate.vllm_release import mamba_state_blocks

    assert mamba_state_blocks(catalog.model(model), catalog.gpu(gpu), release, spec)[0] == pages


def test_qwen3_6_on_a_5090_reserves_its_gdn_pages_by_release(catalog):
    """Qwen3.6-35B-A3B NVFP4, FP8 cache, 131,072-token requests on an RTX 5090: 10 full-attention layers and 30 Gated
    DeltaNet layers in groups of 10 (1 full, 3 GDN groups); the attention block grows to hold a GDN state page (1,072
    tokens in steps of 16, vLLM < 0.34), so a request takes cdiv(131,072, 1,072) = 123 attention blocks and, per GDN
    group, 1 page under 0.27 (prefix caching off for hybrids), 2 under 0.28 (align mode): 126 and 129 blocks. Under
    0.33 FlashInfer's GDN prefill keeps a checkpoint page on Blackwell, and its checkpoints' 64-token grid makes the
    block 64 x cdiv(1,072, 64) = 1,088 tokens: cdiv(131,072, 1,088) + 3 x 3 = 121 + 9 = 130."""
    m, g = catalog.model("qwen3.6-35b-a3b"), catalog.gpu("rtx5090")
    w = weight_bytes(m, quant_format("nvfp4"), "linear").bytes_total
    led = {v: engine_ledger(m, g, w, EngineInputs(version=v, kv_dtype="fp8", max_model_len=131072, gpu_util=0.9))
           for v in ("0.27.1", "0.28.0", "0.33.0")}
    for v, need in (("0.27.1", 126), ("0.28.0", 129), ("0.33.0", 130)):
        assert led[v].max_concurrency == pytest.approx(led[v].kv_blocks / need), v
    assert any("grows to 1,088 tokens" in a for a in led["0.33.0"].assumptions)


def test_fleet_counts_a_hybrids_requests_as_its_engine_reserves_them(catalog):
    """Qwen3.6-35B-A3B FP8 on an H100, 3,000 in / 1,000 out (3,500 tokens held): SGLang's attention pool and its
    states' pool (0.9 / 1.9 of the static pool) each hold so many requests (its full layers' tokens / 3,500; the
    states a request keeps, below), the fewer binding; vLLM reserves its Gated DeltaNet groups' state pages a
    request (3 from 0.33 on Hopper). Counted as the plan's bytes a request, SGLang's attention pool alone had held
    102, and vLLM's 326, above its own 235 at 4,000 tokens."""
    from llmsize.estimate.engines import plan_ledger
    from llmsize.estimate.fleet import Workload
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.replica import kv_pool_bytes, users_held

    m, g = catalog.model("qwen3.6-35b-a3b"), catalog.gpu("h100-sxm")
    w = Workload(3000, 1000, users=4000)
    for runtime in ("sglang", "vllm"):
        p = make_plan(m, g, PlanInputs(quant="fp8", context_tokens=3500, prompt_tokens=3000, runtime=runtime,
                                       kv_dtype=None), search_fit=False)
        led = plan_ledger(p, m, g, runtime, 4000)
        held = users_held(p, w, runtime, None, kv_pool_bytes(p, runtime, 4000)[0])
        if runtime == "sglang":  # a request's states: 30 GDN layers' conv and recurrent states, 5 slots of them
            assert led.state_slots == int(led.state_pool_bytes / p.kv.fixed_bytes_per_sequence) // 5
            assert held == int(min(led.kv_cache_tokens / 3500, led.state_slots)) == led.state_slots == 41
        else:  # 234.6 requests of 4,000 tokens in the plan's bytes, over a 3,500-token request's
            assert led.max_concurrency <= held <= led.max_concurrency * 4000 / 3500 and held == 252


def test_sglangs_states_pool_caps_a_hybrids_running_requests(run_cli):
    """SGLang's states' pool (0.9 / 1.9 of the static pool) holds max_mamba_cache_size states, and a running request
    keeps 3 of them in the radix cache, 5 under the extra_buffer strategy "auto" picks for Qwen3.5/3.6 with the
    overlap schedule (kv_cache_configurator.py resolve_max_num_reqs: "max_running_requests is capped to %d by the
    mamba state cache"): Qwen3.6-35B-A3B FP8 on an H100 at 1,000 tokens, the attention pool's 730,800 tokens hold 730
    requests, its states' pool 209 states of 61.4 MiB (30 GDN layers' FP32 states), 209 // 5 = 41 running requests:
    the ledger says so and the launch line caps --max-running-requests there. LFM2 keeps no extra buffer: 3."""
    from llmsize.estimate.sglang_defaults import sglang_mamba_slots_per_request

    assert (sglang_mamba_slots_per_request("qwen3_5_moe_text"), sglang_mamba_slots_per_request("lfm2")) == (5, 3)
    # sgl-project/sglang#38846 (0.5.19, Qwopus3.6-27B-v2-FP8, Qwen3.5/3.6's architecture): "max_running_requests is
    # capped to 9 by the mamba state cache (max_mamba_cache_size=47, 5 state slots per request)"
    assert 47 // sglang_mamba_slots_per_request("qwen3_5_text") == 9
    code, out, err = run_cli("plan", "qwen3.6-35b-a3b", "--gpu", "h100-sxm", "--quant", "fp8", "--engine", "sglang",
                             "--max-model-len", "1000", "--json")
    assert code == 0, err
    e = json.loads(out)["engine"]
    assert e["max_concurrency"] > 700 and e["requests_at_once"] == e["state_slots"] == 41
    code, out, err = run_cli("plan", "qwen3.6-35b-a3b", "--gpu", "h100-sxm", "--quant", "fp8", "--engine", "sglang",
                             "--max-model-len", "1000")
    assert code == 0 and "41.00 requests of 1,000 tokens (the states' pool holds no more)" in " ".join(out.split())
    code, out, err = run_cli("plan", "qwen3.6-35b-a3b", "--gpu", "h100-sxm", "--quant", "fp8", "--context", "1000",
                             "--emit", "sglang")
    assert code == 0 and "--max-running-requests 41" in out


def test_an_engine_charging_sliding_layers_in_full_binds_by_requests(run_cli):
    """SGLang outside its hybrid SWA pool (Gemma 2/3, Phi-3, Mistral) charges a sliding layer for every token of a
    request; the plan's bytes keep its window. Gemma 3 12B on an H100 at 32,768 tokens: SGLang's
    116,846 tokens hold 3.6 requests where the plan's budget holds 20, and plan now says so (its byte pool alone,
    0.90 of the budget's, had kept it silent), as compare's ledger_short does. fleet sizes Phi-3-mini's SGLang
    replicas by the requests its 159,399 tokens hold at 4,000 (3,500 held a user: 45), not the 67 a card of the
    plan's bytes had been given, and its launch line carries that batch."""
    code, out, err = run_cli("plan", "gemma-3-12b", "--gpu", "h100-sxm", "--context", "32768", "--runtime", "sglang")
    assert code == 0 and "3.6 requests of 32,768 tokens at once, where the plan's budget holds 20" in " ".join(
        (out + err).split())
    code, out, err = run_cli("compare", "gemma-3-12b", "--gpus", "h100-sxm", "--context", "32768", "--runtime",
                             "sglang", "--json")
    assert code == 0 and "3.6 requests" in json.loads(out)["rows"][0]["ledger_short"]
    code, out, err = run_cli("fleet", "phi-3-mini", "--gpus", "h100-sxm", "--users", "200", "--isl", "3000", "--osl",
                             "1000", "--runtime", "sglang", "--json")
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    assert row["batch_per_replica"] <= 159_399 // 3_500 and row["replicas"] * row["batch_per_replica"] >= 200
    code, out, err = run_cli("fleet", "phi-3-mini", "--gpus", "h100-sxm", "--users", "200", "--isl", "3000", "--osl",
                             "1000", "--runtime", "sglang", "--emit", "sglang")
    assert code == 0 and f"--max-running-requests {row['batch_per_replica']}" in out


def test_vllm_profiles_a_qwen_vl_towers_encoder_before_sizing_the_cache(catalog, run_cli):
    """vLLM V1 runs the vision encoder on the processor's largest dummy image before sizing the cache ("Encoder cache
    will be initialized with a budget of 16384 tokens, and profiled with 1 image items of the maximum feature size"),
    frees its intermediates, keeps its outputs cached through the text model's dummy forward: the peak is the larger
    forward's, plus the cache. Qwen3.5/3.6's processor takes 16,777,216 pixels, 16,384 tokens of 2 x 2 patches of 16;
    a patch holds an MLP block's input and norm, fc1's output and its activation, and its pixels: 2 x 1,152 +
    2 x 4,304 + 3 x 2 x 16^2 = 12,448 values, 24,896 B; 65,536 patches: 1.52 GiB; the cache 16,384 x 2,048 x 2 B.
    Published: github malaiwah/qwen38-27b-exl3 receipts (vLLM 0.11.2, Qwen3.8-27B on an RTX 5090, max_num_seqs 1,
    where the encoder's forward outgrows the text model's): max_pixels 4,194,304 -> 8,388,608 (a budget of 4,096 ->
    8,192 tokens) raises "peak activation" from 1.35 to 1.78 GiB; 0.42 GiB here. A README of Qwen3.6-35B-A3B-NVFP4 on
    one RTX 5090 (vLLM nightly before 0.19.2rc0; public code index ids 51787543305, 51910320717) logs 4.88 GiB of
    cache with images allowed and 6.44 GiB with every modality's limit 0, which also leaves the 0.83 GiB tower
    unloaded (_mark_tower_model): 1.56 GiB between them, 1.96 here against a text peak of 0.45 GiB that its mm-off
    start-up shows to be higher (its FlashInfer NVFP4 workspace). A max_num_batched_tokens of 32,768 profiles 2
    images (a log of vLLM 0.19.2rc1, "a budget of 32768 tokens ... 2 image items")."""
    from llmsize.estimate.encoder_profile import encoder_profile
    from llmsize.estimate.engines import activation_peak_bytes

    q36, q38 = catalog.model("qwen3.6-35b-a3b"), catalog.model("qwen3.8-27b")
    one = encoder_profile(q36, 2048)
    assert (one.items, one.tokens, one.patches) == (1, 16_384, 65_536)
    assert (one.peak_bytes, one.cache_bytes) == (65_536 * 24_896, 16_384 * 2048 * 2)
    text = activation_peak_bytes(q38, 2048, 1)
    small, large = (encoder_profile(q38, 2048, max_pixels=p) for p in (4_194_304, 8_388_608))
    assert small.peak_bytes > text  # the encoder's forward is the larger: its step is the sweep's
    assert (large.peak_with(text) - small.peak_with(text)) / GiB == pytest.approx(1.78 - 1.35, rel=0.05)
    tower = next(x for x in q36.extra if x.encoder is not None).params * 2
    text36 = activation_peak_bytes(q36, 2048, 256)
    between = (tower + one.peak_with(text36) - text36) / GiB
    assert 1.56 < between < 1.56 * 1.3
    assert encoder_profile(q36, 32_768).items == 2 and encoder_profile(q36, 20_000).items == 1
    assert encoder_profile(q36, 2048, tp=2).peak_bytes < one.peak_bytes  # the MLP's fc1 split over the cards
    assert encoder_profile(catalog.model("qwen3-30b-a3b"), 2048) is None  # no tower

    def ledger(model, *more):
        code, out, err = run_cli("plan", model, "--gpu", "rtx5090", "--quant", "nvfp4", "--engine", "vllm",
                                 "--engine-version", "0.19.1", "--max-model-len", "131072", "--gpu-util", "0.92",
                                 *more)
        assert code == 0, err
        return out
    out = ledger("qwen3.6-35b-a3b")
    assert "Vision encoder profiled before the cache (1 image of 16,384 tokens" in out and "peaks at 1.52 GiB" in out
    # a tower whose processor is not read here: said, not sized
    assert "profiles this model's vision encoder on its largest inputs" in ledger("gemma-4-26b-a4b")


def test_the_text_served_alone_loads_no_tower_and_profiles_no_encoder(run_cli):
    """--language-model-only (vLLM >= 0.18, SGLang): the towers are never built, so their weights, vLLM's encoder
    profile and SGLang's multimodal margin all go; the launch lines carry the flag. Qwen3.6-35B-A3B NVFP4 on an RTX
    5090 under vLLM 0.19 at 131,072 tokens: 6.59 GiB of cache with the tower, 8.55 without (0.83 GiB of tower, the
    profile's 1.58 GiB peak over the text model's 0.45); a text-only model is as it was."""
    def plan(model, *more):
        code, out, err = run_cli("plan", model, "--gpu", "rtx5090", "--quant", "nvfp4", "--max-model-len", "131072",
                                 "--engine-version", "0.19.1", "--gpu-util", "0.92", "--json", *more)
        assert code == 0, err
        return json.loads(out)
    on = plan("qwen3.6-35b-a3b", "--engine", "vllm")
    off = plan("qwen3.6-35b-a3b", "--engine", "vllm", "--language-model-only")
    tower = 446_571_248 * 2  # the tower and merger, BF16, in the NVFP4 plan's weights
    assert on["weights"]["bytes_total"] - off["weights"]["bytes_total"] == pytest.approx(tower, rel=0.05)
    gained = (off["engine"]["kv_cache_bytes"] - on["engine"]["kv_cache_bytes"]) / GiB
    assert gained == pytest.approx(0.83 + 1.58 - 0.45, abs=0.03)
    assert not any("Vision encoder profiled" in n for n in off["engine"]["assumptions"])
    assert any("Vision encoder profiled" in n for n in on["engine"]["assumptions"])
    code, out, err = run_cli("plan", "qwen3.6-35b-a3b", "--gpu", "rtx5090", "--quant", "nvfp4",
                             "--language-model-only", "--emit", "vllm")
    assert code == 0 and out.rstrip().endswith("--language-model-only"), (out, err)
    code, out, err = run_cli("plan", "qwen3.6-27b", "--gpu", "h100", "--engine", "sglang", "--language-model-only",
                             "--json")
    assert code == 0 and json.loads(out)["engine"]["gpu_util"] == 0.83  # no vision margin
    text_only = [plan("qwen3-30b-a3b", "--engine", "vllm", *flag)["engine"]["kv_cache_bytes"]
                 for flag in ((), ("--language-model-only",))]
    assert text_only[0] == text_only[1]
    # a lever where the plan's runtime is a serving engine and the tower is loaded, its command reproducing it
    code, out, err = run_cli("plan", "qwen3.6-35b-a3b", "--gpu", "rtx5090", "--quant", "nvfp4", "--levers", "--json")
    row = next(r for r in json.loads(out)["levers"] if r["name"].startswith("text served alone"))
    assert row["command"].endswith("--language-model-only") and row["after"] > row["before"]
    code, out, err = run_cli("plan", "qwen3-30b-a3b", "--gpu", "rtx5090", "--quant", "nvfp4", "--levers", "--json")
    assert not any(r["name"].startswith("text served alone") for r in json.loads(out)["levers"])


def test_fleet_serves_the_text_alone_where_told(catalog, run_cli):
    """fleet --language-model-only sizes each replica without the tower (and, under vLLM, its encoder's profile) and
    writes the flag into the launch line: Qwen3.6-35B-A3B NVFP4 on an RTX 5090 under vLLM, its pool at 9,000 tokens
    grows by about the tower's 0.83 GiB and the profile's peak over the text model's."""
    from llmsize.estimate.fleet import replica_inputs
    from llmsize.estimate.plan import make_plan
    from llmsize.estimate.replica import kv_pool_bytes
    from llmsize.estimate.workload import Workload

    m, g = catalog.model("qwen3.6-35b-a3b"), catalog.gpu("rtx5090")
    pools = []
    for alone in (False, True):
        w = Workload(8000, 1000, users=50, quant="nvfp4", language_model_only=alone)
        inputs = replica_inputs("vllm", w, 1, 1, None)
        assert inputs.language_model_only is alone
        pools.append(kv_pool_bytes(make_plan(m, g, inputs, search_fit=False), "vllm", 9000)[0])
    assert (pools[1] - pools[0]) / GiB > 0.83
    code, out, err = run_cli("fleet", "qwen3.6-35b-a3b", "--gpus", "rtx5090", "--quant", "nvfp4", "--users", "50",
                             "--isl", "8000", "--osl", "1000", "--language-model-only", "--emit", "vllm")
    assert code == 0 and out.rstrip().endswith("--language-model-only"), (out, err)
