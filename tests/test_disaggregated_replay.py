"""The disaggregated replay (llmsize/estimate/disaggregated_replay.py) on cases small enough to follow by hand, with
the made-up engine of tests/test_serving_replay.py: a decode step of b requests costs 10 ms + 1 ms x b; a prefill
forward of n tokens max(10 us x n, 20 ms) + 50 ms; and a cache move of 5 ms."""

import pytest

from llmsize.estimate.disaggregated_replay import replay_disaggregated
from llmsize.estimate.serving_replay import Forward, poisson_arrivals

ENGINE = Forward(decode_step_s=lambda b: 0.010 + 0.001 * b, compute_per_token_s=1e-5, weights_s=0.020, fixed_s=0.050)
MOVE = lambda p: 0.005  # noqa: E731


def run(prompts, outputs, x=1, budget=8192, y=1, cap=100, **load):
    load = load or {"users": len(prompts)}
    return replay_disaggregated(prompts, outputs, ENGINE, x, budget, ENGINE.decode_step_s, y, cap, MOVE, **load)


def test_one_request_through_a_prefill_and_a_decode_worker():
    # prefill of 1,000 tokens 0.070 s, the cache's move 0.005 s: first token at 0.075 s; 9 more tokens at a step of
    # one, 0.011 s each: done at 0.075 + 0.099 = 0.174 s
    r = run([1000], [10])
    assert r.ttft_mean_s == pytest.approx(0.075)
    assert r.tpot_mean_s == pytest.approx(0.011)
    assert r.duration_s == pytest.approx(0.174)


def test_prompts_waiting_share_a_forward_up_to_the_budget():
    """Two prompts sent together: one forward of 2,000 tokens (max(0.020, 0.020) + 0.050 = 0.070 s) carries both
    when the budget holds them; with a budget of 1,000 the second waits for the worker's next forward (first token
    at 0.145 s), unless a second worker takes it (0.075 s)."""
    assert run([1000, 1000], [1, 1]).ttft_s_quantiles == pytest.approx((0.075, 0.075, 0.075))
    assert run([1000, 1000], [1, 1], budget=1000).ttft_s_quantiles == pytest.approx((0.075, 0.145, 0.145))
    assert run([1000, 1000], [1, 1], x=2, budget=1000).ttft_s_quantiles == pytest.approx((0.075, 0.075, 0.075))


def test_a_prompt_over_the_budget_goes_in_chunks_on_one_worker():
    # 2,500 tokens at 1,000 a forward: 0.070 + 0.070 + (max(0.005, 0.020) + 0.050 = 0.070) = 0.210 s, then the move;
    # a second worker has nothing to take meanwhile
    assert run([2500], [1], x=2, budget=1000).ttft_mean_s == pytest.approx(0.215)


def test_a_decode_worker_admits_up_to_its_cap_and_the_router_spreads_the_load():
    """Two requests of 3 tokens ready together (one forward, first tokens at 0.075 s). One decode worker capped at
    one: the first takes two steps of one (0.011 s each), the second then its two; TPOT 0.011 s each, the second
    done at 0.075 + 0.044 = 0.119 s. Uncapped, both in steps of two (0.012 s). Two workers: one each, steps of one."""
    capped = run([1000, 1000], [3, 3], cap=1)
    assert capped.duration_s == pytest.approx(0.119)
    assert run([1000, 1000], [3, 3]).tpot_s_quantiles == pytest.approx((0.012, 0.012, 0.012))
    spread = run([1000, 1000], [3, 3], y=2)
    assert spread.tpot_s_quantiles == pytest.approx((0.011, 0.011, 0.011))
    assert spread.duration_s == pytest.approx(0.075 + 0.022)


def test_a_closed_loop_sends_the_next_request_when_an_answer_ends():
    """One user, three requests of 1,000 in and 2 out: each 0.070 + 0.005 + 0.011 = 0.086 s, one after another."""
    r = run([1000] * 3, [2] * 3, users=1)
    assert r.requests == 3 and r.duration_s == pytest.approx(3 * 0.086)


@pytest.mark.parametrize("kwargs, words", [
    ({"users": None}, "users"), ({"users": 2, "arrivals_s": [0.0, 1.0]}, "not both"),
    ({"users": 1, "skip": 1}, "skip"), ({"users": None, "arrivals_s": [1.0, 0.0]}, "in order"),
])
def test_bad_arguments_say_which(kwargs, words):
    with pytest.raises(ValueError, match=words):
        replay_disaggregated([10, 10], [5, 5], ENGINE, 1, 100, ENGINE.decode_step_s, 1, 4, MOVE, **kwargs)
    with pytest.raises(ValueError, match="at least 1"):
        replay_disaggregated([10], [5], ENGINE, 0, 100, ENGINE.decode_step_s, 1, 4, MOVE, users=1)


@pytest.mark.parametrize("model_id, gpu_id, tp, isl, workers, loads", [
    ("llama-3.1-70b", "b200", 1, 3000, 1, (0.3, 0.6, 0.85)), ("llama-3.1-70b", "b200", 1, 3000, 4, (0.3, 0.6, 0.85)),
    ("llama-3.1-70b", "b200", 2, 3000, 3, (0.3, 0.6, 0.85)), ("llama-3.1-8b", "h100-sxm", 1, 1000, 1, (0.3, 0.6, 0.85)),
    ("llama-3.1-8b", "h100-sxm", 1, 1000, 6, (0.3, 0.6, 0.85)),
    ("qwen3-235b-a22b", "b200", 8, 2000, 2, (0.3, 0.6, 0.85)),
    ("llama-3.1-8b", "h100-sxm", 1, 20000, 2, (0.3, 0.6)), ("llama-3.1-70b", "b200", 2, 12000, 1, (0.3, 0.6)),
])
def test_a_prefill_pool_queues_as_fleets_closed_form_says(catalog, runtimes, model_id, gpu_id, tp, isl, workers,
                                                          loads):
    """fleet's prefill pool (estimate/replica.pool_first_token_s): x workers sharing a queue, each batching the
    prompts that arrived while it was busy (PrefillCost.prefill_only); a prompt goes alone when a worker is free,
    else waits for the next to free and rides its forward with the prompts that arrived meanwhile; a prompt over
    vLLM's 8,192-token budget goes in chunks, one prompt at a time (M/D/s). One-token answers, Poisson arrivals at
    loads of 0.3, 0.6 and 0.85 of the pool (chunked prompts 0.3 and 0.6): within 20% of the replay (within 12.8%,
    median 3.1%, when written; 17.0%, median 2.3%, since the serving engines' prompt constants were refitted by kernel
    launches on 2026-12-07: the largest, Llama 3.1 70B on one B200 at 0.85, where a prompt is more of its compute;
    the earlier form, the prompts' forward plus an M/D/x wait at a prompt's cost, was up to 75% over, and the prompt
    alone plus that wait 27% under to 67% over). At 0.85 the chunked prompts' first tokens
    fall 19% and 34% short of the replay: a prompt's last chunk also carries the next prompt's first, and the
    M/D/s wait is steep there (fleet flags a pool loaded past 85%)."""
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.replica import pool_first_token_s, replica_engine, replica_timing
    from llmsize.estimate.runtimes import constants

    p = make_plan(catalog.model(model_id), catalog.gpu(gpu_id), PlanInputs(context_tokens=isl + 10, prompt_tokens=isl,
                                                                          tp=tp), search_fit=False)
    c = constants(runtimes["vllm"], "cuda")
    tpot_fn, pre, cost = replica_timing(p, "vllm", c, 8192)
    forward, _ = replica_engine(p, "vllm", c, 8192)
    pool = cost.prefill_only()
    if isl <= 8192:  # an idle pool: the prompt alone, max(compute, weights) + fixed
        assert pool_first_token_s(pool, 1e-9, workers) == pytest.approx(pre, rel=1e-6)
    for load in loads:
        rate = load * workers / pre
        for _ in range(60):  # the rate at which the pool's load is `load`
            rate = load * workers / pool(rate / workers)
        closed = pool_first_token_s(pool, rate, workers)
        n = int(min(20000, rate * 600))
        r = replay_disaggregated([isl] * n, [1] * n, forward, workers, 8192, tpot_fn, 1, 10**6, lambda _: 0.0,
                                 arrivals_s=poisson_arrivals(n, rate, seed=3), skip=n // 10)
        assert closed == pytest.approx(r.ttft_mean_s, rel=0.20), (load, closed, r.ttft_mean_s)


@pytest.fixture(scope="module")
def runtimes(catalog):
    return {r.id: r for r in catalog.runtimes.all()}
