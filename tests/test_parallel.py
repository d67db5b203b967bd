"""Tensor and pipeline parallel: hand-checked cases (a 70B model in bf16 on 2 and 4 H100s, DeepSeek-V3 on 8
H200s), KV-head replication, the smallest fitting configuration, links, and the serving lines."""

import json

import pytest

from llmsize.errors import InvalidValueError
from llmsize.estimate.parallel import card_link, shard_model
from llmsize.estimate.plan import PlanInputs, make_plan


def _plan(catalog, model, gpu, **kw):
    return make_plan(catalog.model(model), catalog.gpu(gpu), PlanInputs(**kw))


@pytest.mark.parametrize("tp", [2, 4])
def test_llama_70b_bf16_on_h100s(catalog, tp):
    one = _plan(catalog, "llama-3.1-70b", "h100-sxm", quant="bf16")
    p = _plan(catalog, "llama-3.1-70b", "h100-sxm", quant="bf16", tp=tp)
    assert not one.budget.weights_fit and p.budget.weights_fit
    # weights: everything split tp ways except the replicated norms (81 x 8192 x 2 B = 1.3 MB)
    norms = (80 * 2 + 1) * 8192 * 2
    assert p.weights_card.bytes_total == pytest.approx((one.weights.bytes_total - norms) / tp + norms, rel=1e-9)
    # KV per token per card: 80 layers x (K, V) x 8/tp heads x 128 x 2 B
    assert p.kv_card.bytes_per_token == 80 * 2 * (8 // tp) * 128 * 2
    # ring all-reduce per token: 160 x 2 (tp-1)/tp x 8192 x 2 B; over NVLink 4 at 450 GB/s per direction
    traffic = 160 * 2 * (tp - 1) / tp * 8192 * 2
    assert p.comm.bytes_per_card(1, 8192) == pytest.approx(traffic)
    assert p.decode_1.comm_time_s == pytest.approx(traffic / 450e9)
    # batch-1 ceiling: each card reads 1/tp of what one card would (embedding table aside), plus the links
    per_card_read = p.decode_1.bytes_total
    assert per_card_read == pytest.approx(one.decode_1.bytes_total / tp, rel=2e-4)
    assert p.decode_ceiling_tok_s == pytest.approx(1 / (per_card_read / 3350e9 + traffic / 450e9))


def test_llama_70b_on_2_h100s_hand_figures(catalog):
    p = _plan(catalog, "llama-3.1-70b", "h100-sxm", quant="bf16", tp=2)
    # 70,553,706,496 params x 2 B / 2 cards ~ 70.55 GB per card; the H100's 80 GiB = 85.90 GB x 0.9 - 1.5 GiB
    # (1.61 GB) leaves ~5.14 GB
    assert p.weights_card.bytes_total / 1e9 == pytest.approx(70.55, abs=0.01)
    assert p.budget.kv_budget_bytes / 1e9 == pytest.approx(5.14, abs=0.02)
    # 3,350 GB/s / ~70.0 GB read per card per token ~ 47.8 tok/s
    assert p.decode_ceiling_tok_s == pytest.approx(47.8, abs=0.2)


def test_deepseek_v3_on_8_h200s(catalog):
    p = _plan(catalog, "deepseek-v3", "h200-sxm", tp=8)
    assert p.fmt.id == "fp8-block128" and p.budget.weights_fit
    # MLA: the 512 + 64 latent is replicated on every card, 61 layers x 576 x 2 B
    assert p.kv_card.bytes_per_token == 61 * 576 * 2 == p.kv.bytes_per_token
    one = _plan(catalog, "deepseek-v3", "h200-sxm")
    assert not one.budget.weights_fit
    # ~1/8 of the weights, plus what every card keeps whole: the latent down-projections q_a [7168 -> 1536]
    # and kv_a [7168 -> 576] in fp8 (61 x 7168 x 2112 x ~1 B = 0.92 GB, 7/8 of it extra) and the routers
    # (58 x 256 x 7168 x 2 B = 0.21 GB): ~1.0 GB more per card
    extra = p.weights_card.bytes_total - one.weights.bytes_total / 8
    assert 0.9e9 < extra < 1.1e9


def test_fewer_kv_heads_than_cards_are_replicated(catalog):
    m = catalog.model("llama-3.1-70b")
    s16 = shard_model(m, 16)
    g = s16.layer_groups[0].mixer
    assert (g.num_attention_heads, g.num_key_value_heads) == (4, 1)  # 64/16 query heads, 8 KV heads -> 1 each


@pytest.mark.parametrize("model, tp, needle", [
    ("llama-3.1-70b", 3, "--tp 3 does not divide the 64 attention heads"),
    ("falcon-7b", 2, "--tp 2 does not divide the 71 attention heads"),
    # a hybrid's linear-attention layers (Qwen3.5 4B: 16 key heads, 32 value heads) named as such, not as KV heads
    # (its full-attention layers have 4: --tp 8 replicates them, 2 a card at --tp 2)
    ("qwen3.5-4b", 3, "--tp 3 neither divides nor is a multiple of the 16 linear-attention key heads"),
])
def test_indivisible_tp_is_refused(catalog, model, tp, needle):
    with pytest.raises(InvalidValueError, match=needle):
        _plan(catalog, model, "h100-sxm", tp=tp)


def test_pipeline_stage_holds_half_the_layers_and_one_vocab_matrix(catalog):
    p = _plan(catalog, "llama-3.1-70b", "h100-sxm", quant="bf16", pp=2)
    assert p.card_model.num_layers == 40 and p.card_model.tie_word_embeddings
    vocab = 128256 * 8192 * 2
    one = _plan(catalog, "llama-3.1-70b", "h100-sxm", quant="bf16")
    layers = one.weights.bytes_total - 2 * vocab - 8192 * 2  # minus embedding, lm_head, final norm
    assert p.weights_card.bytes_total == pytest.approx(layers / 2 + vocab + 8192 * 2)
    # a token still crosses every stage: the ceiling is that of one card reading everything, plus a hand-off
    assert p.decode_ceiling_tok_s < one.decode_ceiling_tok_s * 1.0001


def test_smallest_fit_is_named_with_its_speed(catalog):
    p = make_plan(catalog.model("llama-3.1-70b"), catalog.gpu("h100-sxm"), PlanInputs(quant="bf16"),
                  candidates=catalog.hardware.all())
    assert (p.fit.tp, p.fit.pp) == (2, 1) and p.diagnosis.cards_needed == 2
    assert any("2 x h100-sxm (--tp 2 --pp 1)" in lever for lever in p.diagnosis.levers)
    q = _plan(catalog, "llama-3.1-70b", "rtx4090", quant="bf16")
    assert q.fit.cards == 8 and q.fit.tp == 8  # 141 GB over 24 GB cards, 64 heads: tp 8 over PCIe 4.0


def test_links_from_the_catalog(catalog):
    assert card_link(catalog.gpu("h100-sxm")).gb_s == 450  # NVLink 4: 900 GB/s both directions
    assert card_link(catalog.gpu("rtx4090")).gb_s == pytest.approx(31.5, abs=0.1)  # PCIe 4.0 x16: 16 GT/s x 16
    assert card_link(catalog.gpu("h100-pcie")).kind == "PCIe 5.0 x16"  # a 2-card bridge does not serve tp > 2
    assert card_link(catalog.gpu("m4-max")) is None
    with pytest.raises(InvalidValueError, match="no card-to-card link"):
        _plan(catalog, "llama-3.1-8b", "m4-max", tp=2)


def test_plan_cli_tp_json_and_report(run_cli):
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100", "--quant", "bf16", "--tp", "4", "--json")
    assert code == 0, err
    par = json.loads(out)["parallel"]
    assert (par["tp"], par["cards"], par["link"], par["link_gb_s"]) == (4, 4, "NVLink 4", 450)
    assert par["kv_bytes_per_token_per_card"] == 80 * 2 * 2 * 128 * 2
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100", "--tp", "4")
    assert "4 (--tp 4 x --pp 1) on 1 node(s); NVLink 4" in out


@pytest.mark.parametrize("args, want", [  # the memory share only where the user gave one: else the engine's own
    (["--tp", "2", "--emit", "vllm"], "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 2 "
                                       "--pipeline-parallel-size 1 --max-model-len 4096 --max-num-seqs"),
    (["--tp", "2", "--emit", "vllm", "--gpu-util", "0.9"],
     "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 2 --pipeline-parallel-size 1 "
     "--max-model-len 4096 --gpu-memory-utilization 0.9"),
    (["--tp", "4", "--kv-dtype", "fp8", "--quant", "fp8", "--emit", "sglang", "--gpu-util", "0.9"],
     "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --tp-size 4 --pp-size 1 "
     "--context-length 4096 --mem-fraction-static 0.9"),
])
def test_emit_serving_lines(run_cli, args, want):
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100", *args)
    assert code == 0, err
    assert out.startswith(want)
    if "fp8" in args:
        assert "--kv-cache-dtype fp8_e4m3 --quantization fp8" in out


def test_a_launch_line_capped_at_the_models_positions_says_so(run_cli):
    """--context past the model's positions: the line runs at the model's 40,960, and had said "not one sequence
    of 131,072 tokens fits" beside it, a count of another length than its own."""
    code, out, err = run_cli("plan", "qwen3-30b-a3b", "--gpu", "h100", "--context", "131072", "--emit", "vllm")
    assert code == 0, err
    assert out.startswith("# --context 131,072 is beyond the model's 40,960 positions: the line runs at 40,960, "
                          "--max-num-seqs left to the engine (plan --context 40960")
    assert "--max-model-len 40960" in out and "--max-num-seqs" not in out.splitlines()[-1]
    assert "not one sequence" not in out


@pytest.mark.parametrize("args", [["--tp", "8", "--nodes", "2"], ["--tp", "16"]])
def test_a_launch_line_over_two_nodes_says_how_to_start_it(run_cli, args):
    """Llama 3.1 405B on 16 H100s over two nodes: SGLang's line had no --nnodes, --node-rank or --dist-init-addr (it
    would look for 16 cards on one machine), nor vLLM's the Ray cluster it needs; fleet's lines had both."""
    code, out, err = run_cli("plan", "llama-3.1-405b", "--gpu", "h100", *args, "--emit", "sglang")
    assert code == 0, err
    assert "# the server spans 2 nodes: run the line on each, RANK 0 to 1" in out
    assert out.splitlines()[-1].endswith("--nnodes 2 --node-rank RANK --dist-init-addr HEAD_HOST:5000")
    code, out, err = run_cli("plan", "llama-3.1-405b", "--gpu", "h100", *args, "--emit", "vllm")
    assert code == 0, err
    assert "# the server spans 2 nodes: start a Ray cluster over them first" in out
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100", "--tp", "4", "--pp", "2", "--emit", "sglang")
    assert code == 0 and "spans" not in out and "--nnodes" not in out  # 8 cards: one node


def test_emit_warns_when_the_format_needs_another_checkpoint(run_cli):
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--quant", "nvfp4", "--emit", "vllm")
    assert code == 0 and out.startswith("# the plan assumes nvfp4 weights but the checkpoint is bf16")


def test_a_fit_beyond_one_node_says_how_many_nodes(catalog):
    p = make_plan(catalog.model("deepseek-v3"), catalog.gpu("rtx5090"), PlanInputs())
    assert p.fit.cards > 8
    lever = next(lv for lv in p.diagnosis.levers if lv.startswith("More cards"))
    assert f"on {-(-p.fit.cards // 8)} nodes of 8" in lever


def test_a_pipeline_stage_of_an_interleaved_model_is_a_consistent_model(catalog):
    """A pp shard keeps each group's layers in its heaviest stage (parallel.stage_group_counts) and drops the stack's
    pattern, whose repetition would give other counts (a review saw Nemotron-3-Nano at pp 2 stacked as 12/11/4
    layers against its groups' 12/12/3, and its GGUF bytes 5% short)."""
    from llmsize.catalog.schema import ModelSpec
    from llmsize.estimate.parallel import shard_model

    for m in catalog.models.all():
        if m.layer_pattern is None:
            continue
        for pp in (2, 4):
            s = shard_model(m, 1, pp)
            assert ModelSpec.model_validate(s.model_dump()) == s
            assert len(s.layer_stack()) == s.num_layers


def test_a_launch_line_the_engine_would_not_start_says_so_and_seqs_follow_its_ledger(run_cli):
    """70B FP8 on one H100 at 4,096 tokens with --gpu-util 0.9: `--emit vllm` printed a line vLLM refuses (its own
    ledger: 1.10 GB of cache, 3,328 tokens, with 0.9 of the card); it says so above the line, with the share from
    which it starts. 70B BF16 on two H100s at 0.9: --max-num-seqs had been the plan's 7 where vLLM's cache holds 6.x
    requests: 6; with vLLM's own default (0.34's extensible cache) it holds the plan's 7."""
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100-sxm", "--quant", "fp8", "--emit", "vllm",
                             "--gpu-util", "0.9")
    assert code == 0, err
    assert out.startswith("# vLLM: its own memory ledger holds no 4,096-token request: it does not start at 4,096 "
                          "tokens a request with gpu_memory_utilization 0.9, from 0.9029 it does")
    for extra, seqs in ((["--gpu-util", "0.9"], "6"), ([], "7")):
        code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100", "--tp", "2", "--emit", "vllm", *extra)
        line = out.strip().splitlines()[-1].split()
        assert code == 0 and line[line.index("--max-num-seqs") + 1] == seqs
