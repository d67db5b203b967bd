"""Attention data parallel with expert parallel (DEP, llmsize/estimate/expert_parallel.py): one card's share, the
all-to-all traffic, what it holds and how fast it decodes against tensor parallel, and fleet's use of it."""

from dataclasses import replace

import pytest

from llmsize.errors import InvalidValueError
from llmsize.estimate.expert_parallel import all_to_all_bytes_per_card, all_to_alls_per_step, expert_shard, supports_dep
from llmsize.estimate.plan import PlanInputs, make_plan
from llmsize.estimate.workload import Workload


@pytest.fixture(scope="module")
def runtimes(catalog):
    return {r.id: r for r in catalog.runtimes.all()}


def test_a_card_holds_its_share_of_the_experts_and_everything_else_whole(catalog):
    """Qwen3-30B-A3B: 48 MoE layers of 128 experts, 8 a token. DEP 2: 64 experts a card, the attention, router and
    embeddings whole; DEP 32 would leave 4 experts a card, fewer than the 8 a token takes: refused. A dense model
    has no experts to split."""
    m = catalog.model("qwen3-30b-a3b")
    card = expert_shard(m, 2)
    assert {g.mlp.num_experts for g in card.layer_groups} == {64}
    assert card.hidden_size == m.hidden_size and card.num_layers == m.num_layers
    assert supports_dep(m, 8) and supports_dep(m, 16) and not supports_dep(m, 32) and not supports_dep(m, 3)
    assert not supports_dep(catalog.model("llama-3.1-8b"), 2)
    with pytest.raises(InvalidValueError, match="does not split"):
        expert_shard(m, 3)
    # weights: the experts halve, and in this stand-in the router's hidden x E matrix with them (each card of a
    # real DEP replica routes over all E: 48 x 2,048 x 64 x 2 bytes = 12.6 MB, 0.04% of the card's weights)
    from llmsize.estimate.plan import resolve_format
    from llmsize.estimate.weights import weight_bytes

    whole = weight_bytes(m, *resolve_format(m, "bf16", None))
    half = weight_bytes(card, *resolve_format(card, "bf16", None))
    experts = 48 * 128 * 3 * 2048 * 768 * 2  # bf16 bytes of the routed experts
    router = 48 * 2048 * 128 * 2
    assert whole.bytes_total - half.bytes_total == (experts + router) // 2


def test_the_all_to_alls_of_a_step():
    """Per MoE layer a card sends each of its b tokens' hidden state (bf16) to k experts, (n - 1) / n of them on
    other cards, and gets as much back (dispatch and combine): Qwen3-30B-A3B, DEP 2, 16 tokens a card:
    2 x 48 x 16 x 8 x 2,048 x 2 x 1/2 = 25,165,824 bytes, in 96 exchanges."""
    from llmsize.catalog.loader import Catalog

    m = Catalog().model("qwen3-30b-a3b")
    assert all_to_alls_per_step(m) == 96
    assert all_to_all_bytes_per_card(m, 16, 2) == 2 * 48 * 16 * 8 * 2048 * 2 // 2 == 25_165_824
    assert all_to_all_bytes_per_card(m, 16, 1) == 0


def test_a_dep_step_is_the_card_step_at_its_share_of_the_batch_plus_the_exchanges(catalog, runtimes):
    """Qwen3-30B-A3B DEP 2 on H100 SXM (NVLink 4, 450 GB/s a direction), vLLM: a replica batch of 33 is 17 a card;
    the step is the card model's step at 17 with 96 collectives at vLLM's fitted NVLink latency and
    all_to_all_bytes_per_card(17) / 450 GB/s."""
    from llmsize.estimate.runtimes import constants
    from llmsize.estimate.step_inputs import step_inputs
    from llmsize.estimate.replica import replica_timing
    from llmsize.estimate.speed import decode_step_time_s

    m, g = catalog.model("qwen3-30b-a3b"), catalog.gpu("h100-sxm")
    card = make_plan(expert_shard(m, 2), g, PlanInputs(quant="bf16", context_tokens=1500, prompt_tokens=1000),
                     search_fit=False)
    c = constants(runtimes["vllm"], "cuda")
    tpot, _, cost = replica_timing(card, "vllm", c, 8192, dp=2)
    x = step_inputs(card, card.decode_model.step(17), "vllm")
    want = decode_step_time_s(replace(x, collectives=96, link="nvlink",
                                      comm_time_s=all_to_all_bytes_per_card(m, 17, 2) / 450e9), c)
    assert tpot(33) == pytest.approx(want)
    assert tpot(34) == pytest.approx(tpot(33))  # 17 a card either way
    # two cards prefill side by side: a prompt costs the replica half what it costs its card
    assert cost.cards == 2 and cost(5.0) == pytest.approx(replace(cost, cards=1)(2.5) / 2)


def test_mla_under_dep_holds_far_more_requests_and_one_user_decodes_faster_under_tp(catalog, runtimes):
    """DeepSeek-V3 on 8 x H200, vLLM, 1,000 in / 1,000 out. Tensor parallel keeps the MLA latent on every card (one
    KV head), so TP 8 holds ~433 requests; DEP 8 keeps each card's own requests' cache, ~297 a card, ~2,376 in all,
    for 15 GB more weights a card (the attention and dense layers whole on each). One user decodes ~2.3x faster
    under TP (each card reads 1/8 of the attention; DEP's card reads it all); at 512 requests DEP is faster (the
    batch spread over 8 attention copies). Measured at commit time: 433 / 2,376; 7.3 / 16.8 ms; 46.6 / 36.4 ms."""
    from llmsize.estimate.runtimes import constants
    from llmsize.estimate.replica import kv_pool_bytes, replica_timing, users_held

    m, g = catalog.model("deepseek-v3"), catalog.gpu("h200-sxm")
    c = constants(runtimes["vllm"], "cuda")
    w = Workload(1000, 1000, users=1)
    tp = make_plan(m, g, PlanInputs(context_tokens=1500, prompt_tokens=1000, tp=8), search_fit=False)
    dp = make_plan(expert_shard(m, 8), g, PlanInputs(context_tokens=1500, prompt_tokens=1000), search_fit=False)
    held_tp = users_held(tp, w, "vllm", None, kv_pool_bytes(tp, "vllm", 2000)[0])
    held_dp = 8 * users_held(dp, w, "vllm", None, kv_pool_bytes(dp, "vllm", 2000)[0])
    assert held_dp > 4 * held_tp
    t_tp, _, _ = replica_timing(tp, "vllm", c, 8192)
    t_dp, _, _ = replica_timing(dp, "vllm", c, 8192, dp=8)
    assert t_tp(1) * 2 < t_dp(1)
    assert t_dp(512) < t_tp(512)


def test_fleet_takes_dep_for_throughput_and_tensor_parallel_for_latency(catalog, runtimes, run_cli):
    """DeepSeek-V3 on B200s, SGLang: 2,000 users without targets fit one DEP 8 node (tensor parallel 8 holds fewer
    and needs more cards); 50 users at 15 ms TPOT need tensor parallel (a DEP card reads all the attention for each
    token: tensor parallel 4 or 8). The launch lines of a DEP row: vLLM's --data-parallel-size with --enable-expert-parallel, SGLang's
    --dp-size with --enable-dp-attention."""
    from llmsize.estimate.fleet import fleet_rows

    m, g = catalog.model("deepseek-v3"), catalog.gpu("b200")
    (row,) = fleet_rows(m, [g], Workload(1000, 1000, users=2000), "sglang", runtimes)
    assert (row.tp, row.dp, row.ep, row.pp) == (1, 8, 8, 1) and row.cards_total == row.replicas * 8
    (fast,) = fleet_rows(m, [g], Workload(1000, 1000, users=50, tpot_s=0.015), "sglang", runtimes)
    assert fast.dp == 1 and fast.tp >= 4 and fast.tpot_s <= 0.015
    base = ("fleet", "deepseek-v3", "--isl", "1000", "--osl", "1000", "--users", "2000", "--gpus", "b200")
    code, out, err = run_cli(*base, "--runtime", "sglang", "--emit", "sglang")
    assert code == 0, err
    assert "--dp-size 8 --enable-dp-attention" in out and "--tp-size 8" in out and "--ep-size 8" in out
    code, out, err = run_cli(*base, "--runtime", "vllm", "--json")
    assert code == 0, err
    import json

    first = json.loads(out)["rows"][0]
    assert (first["dp"], first["tp"], first["ep"]) == (8, 1, 8)
    code, out, _ = run_cli(*base, "--runtime", "vllm", "--emit", "vllm")
    assert "--data-parallel-size 8" in out and "--enable-expert-parallel" in out
    assert "--tensor-parallel-size" not in out
    # each of vLLM's data-parallel ranks schedules its own share: --max-num-seqs = ceil(batch / 8)
    assert f"--max-num-seqs {-(-first['batch_per_replica'] // 8)} " in out + " "
    code, out, _ = run_cli(*base)
    assert code == 0 and "dep 8" in out


def test_the_pareto_front_of_a_moe_reaches_further_with_dep(catalog, runtimes, monkeypatch):
    """DeepSeek-V3 on B200s, vLLM, 1,000 / 1,000: the front of every tp and DEP n at batches 1-1,024 tops out at
    ~3,850 output tok/s per GPU (DEP 8 at 1,024 requests); tensor parallel alone at ~2,270 (measured at commit
    time). The fastest user is the same either way (tensor parallel at batch 1)."""
    import llmsize.estimate.fleet as fleet

    m, g, w = catalog.model("deepseek-v3"), catalog.gpu("b200"), Workload(1000, 1000, users=2000)
    with_dep = fleet.pareto_curves(m, [g], w, "vllm", runtimes)[0].points
    monkeypatch.setattr(fleet, "DP_CHOICES", ())
    tp_only = fleet.pareto_curves(m, [g], w, "vllm", runtimes)[0].points
    assert max(y for _, y in with_dep) > 1.5 * max(y for _, y in tp_only)
    assert max(x for x, _ in with_dep) == pytest.approx(max(x for x, _ in tp_only))
