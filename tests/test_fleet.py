"""`llmsize fleet`: cards needed for a workload within its latency targets (llmsize/estimate/fleet.py)."""

from __future__ import annotations

import json
import math

import pytest

from llmsize.estimate.fleet import Workload, fleet_rows


@pytest.fixture(scope="module")
def runtimes(catalog):
    return {r.id: r for r in catalog.runtimes.all()}


def test_a_dense_8b_on_one_card_follows_the_formulas(catalog, runtimes):
    """Llama 3.1 8B on an H100, 1,000 in / 200 out, 64 users, no targets. Aggregated: one card holds it (tp 1);
    a running request holds 1,000 + 200 / 2 = 1,100 tokens of cache on average (vLLM admits on blocks in use), and
    the batch is the 64 users (the cache holds more, and vLLM's cap on an 80 GiB card is 1,024). vLLM prefills
    8,192 tokens a forward on such a card, so 8 prompts of 1,000 share one read of the weights and one set of fixed
    costs: a prompt costs max(compute, weights / 8) + fixed / 8 (fixed: the layers' decode and eager-prefill costs and
    the step's). A user sees TPOT(b) + (b - 1) x that / 200 per token (the other users' prefills stall it; its own
    came before its first token), replicas = ceil(64 / b), output by Little's law. vLLM's prompts ride in decode
    steps: at the replica's arrival rate lambda = b / (T_prefill + 200 x (TPOT(b) + b x that / 200)) (b requests a
    cycle of the replica, every prompt in it), a step is the decode step d plus `cost` for each prompt that arrived
    during the last one, mean d / (1 - lambda x cost) and variance lambda x that mean x cost^2 / (1 - (lambda x
    cost)^2); a prompt waits out the step it lands in (length-biased rest R = E[S^2] / (2 E[S])), then rides the next
    with the lambda x 2R others that arrived meanwhile (at most the 63 other users): TTFT = R + d + cost x (1 +
    lambda x 2R), of which all but its own step's d + cost is waiting."""
    from llmsize.estimate.runtimes import constants
    from llmsize.estimate.step_inputs import prefill_inputs, step_inputs
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.speed import decode_step_time_s, prefill_time_s

    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("h100-sxm")
    (row,) = fleet_rows(m, [g], Workload(1000, 200, users=64), "vllm", runtimes)
    agg = row if row.mode == "aggregated" else row.other
    p = make_plan(m, g, PlanInputs(context_tokens=1100, prompt_tokens=1000), search_fit=False)
    c = constants(runtimes["vllm"], "cuda")
    b = min(p.max_sequences, 64)
    assert p.max_sequences > 64
    x = prefill_inputs(p, "vllm")
    pre = prefill_time_s(x, c)
    assert x.collectives == 0  # one card: no all-reduce in the fixed cost
    compute = x.flops / (x.peak_flop_per_s * c.eta_p(x.format_class))
    weights = x.weight_bytes / (x.bandwidth_bytes_per_s * c.eta_w(x.format_class))
    cost = max(compute, weights / 8) + (x.layers * (c.t_layer_s + c.t_prefill_layer_s) + c.t_step_s) / 8
    assert cost < pre  # batching prompts never makes one dearer
    d = decode_step_time_s(step_inputs(p, p.decode_model.step(b), "vllm"), c)
    tpot = d + (b - 1) * cost / 200
    assert agg.tp == 1 and agg.batch_per_replica == b and agg.replicas == math.ceil(64 / b)
    # the replica's cycle, every prompt in it: b requests per T_prefill + 200 x (d + b x cost / 200)
    lam = b / (pre + 200 * (d + b * cost / 200))
    rho = lam * cost
    assert 0 < rho < 1
    mean = d / (1 - rho)
    rest = (mean ** 2 + lam * mean * cost ** 2 / (1 - rho ** 2)) / (2 * mean)
    assert lam * 2 * rest < 63
    ttft = rest + d + cost * (1 + lam * 2 * rest)
    assert agg.tpot_s == pytest.approx(tpot) and agg.ttft_s == pytest.approx(ttft)
    assert agg.ttft_wait_s == pytest.approx(ttft - d - cost)
    # 64 users, each a request of 200 tokens every TTFT + 200 x TPOT (Little's law)
    assert agg.output_tok_s_total == pytest.approx(64 * 200 / (ttft + 200 * tpot))


def test_disaggregation_wins_with_long_prompts_and_a_tight_tpot_not_with_short_ones(catalog, runtimes):
    """Llama 3.1 70B on B200s, 3,000 in / 500 out, 400 users at 30 tok/s each: aggregated, a user's TPOT carries
    b x T_prefill / 500 of other users' prefills, so the batch shrinks and the replicas grow; apart, prefill and
    decode workers cost fewer cards (with the constants fitted on 2026-12-07: 5 prefill and 3 decode workers of tp 2,
    the decode workers 132 users each: 16 cards against 20; vLLM's P/D workers run no pipeline stages).
    Llama 3.1 8B on an H100 with 200-token prompts and 2,000-token answers: the
    stall is ~0.2 ms a token, and a separate prefill worker costs a whole card: aggregated wins."""
    w = Workload(3000, 500, users=400, ttft_s=2.0, tpot_s=1 / 30)
    (row,) = fleet_rows(catalog.model("llama-3.1-70b"), [catalog.gpu("b200")], w, "vllm", runtimes)
    assert row.mode == "disaggregated" and row.other.mode == "aggregated"
    assert row.cards_total < row.other.cards_total
    assert row.prefill_workers + row.decode_workers == row.replicas
    # x = ceil(request rate x T_prefill), the rate by Little's law on the 400 users
    # (a prefill worker batches the prompts that arrived while its last forward ran, at most 8,192 tokens a forward,
    # 2 prompts of 3,000, each costing _prefill_cost_s)
    from llmsize.estimate.runtimes import constants
    from llmsize.estimate.step_inputs import prefill_inputs
    from llmsize.estimate.replica import prefill_cost_s as _prefill_cost_s
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.speed import prefill_time_s

    p = make_plan(catalog.model("llama-3.1-70b"), catalog.gpu("b200"),
                  PlanInputs(context_tokens=3250, prompt_tokens=3000, tp=row.tp, pp=row.pp), search_fit=False)
    x, c = prefill_inputs(p, "vllm"), constants(runtimes["vllm"], "cuda")
    pre = prefill_time_s(x, c)
    assert row.ttft_s > pre  # the cache's move over the node link
    # a prefill worker has no decode steps for prompts to ride in: whatever the engine, its forwards take the prompts
    # waiting (apart), each worker seeing rate / x; a pipeline's pp stages hold pp prompts at once, each costing the
    # worker 1 / pp of its time (replica.PrefillCost.cards). The pool's load: rate x that cost / x
    cost = lambda x_: _prefill_cost_s(x, c, 8192 // 3000, rate / x_ / row.pp, apart=True) / row.pp  # noqa: E731
    # a user's life: the prompt alone and the cache's move (3,000 tokens x 327,680 bytes / (tp x pp) at 50 GB/s), then
    # its answer: Little's law gives the rate
    base = pre + 3000 * 327_680 / (row.tp * row.pp) / 50e9
    rate = 400 / (base + 500 * row.tpot_s)
    xs = row.prefill_workers
    assert row.prefill_load == pytest.approx(rate * cost(xs) / xs, rel=1e-6) and row.prefill_load < 1
    # TTFT: the prompt alone and its move, and the wait for a worker (replica.pool_first_token_s, checked against
    # the pool replayed in tests/test_disaggregated_replay.py); x is the fewest that keep it within 2 s and load the
    # pool at most fleet.PREFILL_LOAD_MAX (0.85, the loads that replay checks)
    from llmsize.estimate.replica import PrefillCost, pool_first_token_s

    pool = PrefillCost(x, c, 8192 // 3000, True, cards=row.pp, prompt_tokens=3000, step_tokens=8192, pool=True)
    assert row.ttft_wait_s == pytest.approx(pool_first_token_s(pool, rate, xs) - pre, rel=1e-6)
    assert row.ttft_s == pytest.approx(base + row.ttft_wait_s) and row.ttft_s <= 2.0
    assert row.prefill_load <= 0.85
    assert xs == 1 or base + pool_first_token_s(pool, rate, xs - 1) - pre > 2.0 or rate * cost(xs - 1) / (xs - 1) > 0.85
    # the decode workers hold the users decoding at a time (Little's law: a user's life is its prefill, the move of
    # its cache and its decode; the first two spent elsewhere), not all 400
    decoding = 400 * 500 * row.tpot_s / (base + 500 * row.tpot_s)
    assert row.decode_workers * row.batch_per_replica >= decoding
    assert row.decode_workers <= math.ceil(400 / row.batch_per_replica)
    assert row.ttft_s <= 2.0 and row.tpot_s <= 1 / 30
    (row,) = fleet_rows(catalog.model("llama-3.1-8b"), [catalog.gpu("h100-sxm")], Workload(200, 2000, users=64),
                        "vllm", runtimes)
    assert row.mode == "aggregated" and row.other.mode == "disaggregated"
    assert row.cards_total < row.other.cards_total


def test_a_tpot_target_caps_the_batch_and_a_70b_needs_tensor_parallel(catalog, runtimes):
    m = catalog.model("llama-3.1-70b")
    w = Workload(3000, 500, users=400, ttft_s=2.0, tpot_s=1 / 30)
    (row,) = fleet_rows(m, [catalog.gpu("h100-sxm")], w, "vllm", runtimes)
    assert row.tp >= 2  # 141 GB of BF16 weights on 80 GB cards
    assert row.tpot_s <= 1 / 30 and row.ttft_s <= 2.0
    assert row.cards_total == row.replicas * row.tp
    # disaggregated here: y decode workers each run their share of the users decoding at a time (Little's law over
    # a user's life, its prefill and cache move spent on the other workers: 394 of the 400 here, at the largest
    # batch's step), and y is the fewest that keep TPOT within the target: one fewer would put ceil(400 / (y - 1))
    # on each, past the target or past what a worker's cache holds
    assert row.mode == "disaggregated"
    y = row.decode_workers
    base = row.ttft_s - row.ttft_wait_s
    decoding = 400 * 500 * row.tpot_s / (base + 500 * row.tpot_s)
    assert decoding / y <= row.batch_per_replica <= -(-400 // y)
    from llmsize.estimate.runtimes import constants
    from llmsize.estimate.step_inputs import step_inputs
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.speed import decode_step_time_s

    p = make_plan(m, catalog.gpu("h100-sxm"), PlanInputs(context_tokens=3250, prompt_tokens=3000, tp=row.tp),
                  search_fit=False)
    c = constants(runtimes["vllm"], "cuda")
    step = lambda b: decode_step_time_s(step_inputs(p, p.decode_model.step(b), "vllm"), c)  # noqa: E731
    assert step(row.batch_per_replica) == pytest.approx(row.tpot_s)
    if y > 1:
        fewer = -(-400 // (y - 1))
        assert fewer > p.max_sequences or step(fewer) > 1 / 30


def test_moe_uses_expert_parallel_and_rate_uses_littles_law(catalog, runtimes):
    m = catalog.model("qwen3-30b-a3b")
    (row,) = fleet_rows(m, [catalog.gpu("h100-sxm")], Workload(2000, 400, rate=5.0), "vllm", runtimes)
    assert row.ep == row.tp
    # users in the system = rate x request time; replicas also keep up with rate x osl output tokens a second
    users = math.ceil(5.0 * (row.ttft_s + 400 * row.tpot_s))
    assert row.replicas >= math.ceil(users / row.batch_per_replica)
    assert row.output_tok_s_total == pytest.approx(5.0 * 400)  # the offered load, not the replicas' room
    light = fleet_rows(m, [catalog.gpu("h100-sxm")], Workload(2000, 400, rate=0.01), "vllm", runtimes)[0]
    assert light.output_tok_s_total == pytest.approx(0.01 * 400) and light.replicas == 1


@pytest.mark.parametrize("model, card, rate", [("llama-3.1-8b", "h100-sxm", 6.0), ("llama-3.1-8b", "h200-sxm", 20.0),
                                               ("qwen3-30b-a3b", "h100-sxm", 5.0), ("llama-3.1-70b", "b200", 3.0)])
def test_with_a_rate_the_batch_a_row_reports_is_the_one_its_requests_fill(catalog, runtimes, model, card, rate):
    """Little's law at the batch a row runs: the requests its workers hold (replicas or decode workers x batch)
    are rate x (TTFT + osl x TPOT) at that batch, to one request a worker (the batch is whole). An audit saw the
    8B on H100s at 6 requests/s reported as 2 x 75 at 30.2 ms a token, where those latencies hold 6 x 15.2 s = 91
    requests: the batch had been sized from the largest batch's step, not from the step it runs. A disaggregated
    row's decode workers hold a request from the moment its cache arrives, its osl x TPOT."""
    w = Workload(3000, 500, rate=rate)
    (row,) = fleet_rows(catalog.model(model), [catalog.gpu(card)], w, "vllm", runtimes)
    for r in filter(None, (row, row.other)):
        workers = r.decode_workers if r.mode == "disaggregated" else r.replicas
        held_s = 0.0 if r.mode == "disaggregated" else r.ttft_s
        in_flight = rate * (held_s + 500 * r.tpot_s)
        assert in_flight <= workers * r.batch_per_replica <= in_flight + workers, (r.mode, workers, r.batch_per_replica)


def test_a_rate_without_targets_sizes_every_card_at_a_batch_whose_prompts_it_keeps_up_with(run_cli):
    """With --rate and no --ttft, a replica's batch had been the largest its memory holds even where its users'
    prompts then come faster than it prefills them (an A10 at the 8B's 256 sequences: the first token's queue
    without end): the request's life was infinite and Little's law raised OverflowError, a traceback, on
    `fleet llama-3.1-8b --rate 20`. Every card vLLM runs on now gets rows whose first token is finite."""
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--rate", "20", "--json")
    assert code == 0, err
    sized = [r for r in json.loads(out)["rows"] if r["why_not"] is None]  # the rest: cards vLLM does not run on
    assert len(sized) > 40 and any(r["card"] == "a10" for r in sized)
    for r in sized:
        for x in filter(None, (r, r.get("other"))):
            assert math.isfinite(x["ttft_s"]) and math.isfinite(x["tpot_s"]), (r["card"], x["mode"])


@pytest.mark.parametrize("start, first_ok", [(1, 1), (1, 2), (5, 6), (7, 1000), (100_000_000, 101_234_567)])
def test_the_fewest_workers_search_finds_what_one_worker_a_step_would(start, first_ok):
    """fleet._fewest (doubling, then halving) returns the first count from `start` where a monotone test holds, as
    adding one worker at a time would, and asks the test a few dozen times, not once per worker."""
    from llmsize.estimate.fleet import _fewest

    asked = []

    def ok(n):
        asked.append(n)
        return n >= first_ok

    assert _fewest(start, ok) == max(start, first_ok)
    assert len(asked) <= 2 * 64 and all(n >= start for n in asked)


def test_impossible_targets_say_which_and_by_how_much(catalog, runtimes):
    m = catalog.model("llama-3.1-8b")
    (row,) = fleet_rows(m, [catalog.gpu("rtx4090")], Workload(1000, 200, users=8, tpot_s=0.001), "vllm", runtimes)
    assert not row.meets_slo and "exceeds the 1 ms target" in row.why_not
    (row,) = fleet_rows(m, [catalog.gpu("rtx4090")], Workload(100000, 200, users=8, ttft_s=0.1), "vllm", runtimes)
    assert not row.meets_slo and ("TTFT" in row.why_not or "do not fit" in row.why_not)


def test_fleet_cli_json_and_hourly_prices(run_cli, tmp_path):
    prices = tmp_path / "p.yaml"
    prices.write_text("currency: USD\nhourly:\n  h100-sxm: 2.5\n  b200: 6.0\n")
    code, out, err = run_cli("fleet", "llama-3.1-70b", "--isl", "3000", "--osl", "500", "--users", "400",
                             "--ttft", "2s", "--tok-s-per-user", "30", "--gpus", "h100-sxm,b200", "--prices",
                             str(prices), "--json")
    assert code == 0, err
    d = json.loads(out)
    fixed = lambda n: {"described": f"{n:,}", "mean": n, "p95": n, "p99": n, "points": [n] * 16}  # noqa: E731
    assert d["workload"] == {"isl": 3000, "osl": 500, "users": 400, "rate": None, "ttft_s": 2.0,
                             "tpot_s": pytest.approx(1 / 30), "tok_s_per_user": pytest.approx(30.0),
                             "shared_prefix": 0.0, "kv_dtype": "bf16", "spec": None,
                             "isl_lengths": fixed(3000), "osl_lengths": fixed(500), "longest_tokens": 3500,
                             "node_link_gb_s": 50.0, "quant": "bf16"}  # the release's weights, named
    keys = {"card", "mode", "tp", "pp", "ep", "replicas", "cards_total", "nodes", "batch_per_replica",
            "output_tok_s_per_gpu", "output_tok_s_total", "tok_s_per_user", "ttft_s", "tpot_s", "meets_slo", "watts",
            "cost_per_mtok_out", "why_not"}
    for r in d["rows"]:
        assert keys <= set(r) and r["mode"] in ("aggregated", "disaggregated")
        assert r["other"]["mode"] != r["mode"]
        # cost per million output tokens = cards x hourly price / (output tok/s x 3600) x 1e6
        price = {"h100-sxm": 2.5, "b200": 6.0}[r["card"]]
        assert r["cost_per_mtok_out"] == pytest.approx(price * r["cards_total"] / (r["output_tok_s_total"] * 3600)
                                                       * 1e6)
    costs = [r["cost_per_mtok_out"] * r["output_tok_s_total"] for r in d["rows"]]
    assert costs == sorted(costs)  # cheapest per hour first
    import csv
    import io

    code, out, err = run_cli("fleet", "llama-3.1-70b", "--users", "400", "--gpus", "h100-sxm,b200", "--prices",
                             str(prices), "--format", "csv")
    assert code == 0 and {r["currency"] for r in csv.DictReader(io.StringIO(out))} == {"USD"}  # its cost columns'


@pytest.mark.parametrize("args, needle", [
    (["llama-3.1-8b"], "--users N or --rate R"),
    (["llama-3.1-8b", "--users", "4", "--rate", "1"], "--users N or --rate R"),
    (["llama-3.1-8b", "--users", "4", "--tpot", "30ms", "--tok-s-per-user", "30"], "same thing"),
    (["llama-3.1-8b", "--users", "4", "--ttft", "soon"], "not a duration"),
    (["llama-3.1-8b", "--users", "0"], "--users"),
    (["llama-3.1-8b", "--users", "4", "--gpus", "nope"], "nope"),
    # a runtime no card sized runs: no load or target would change it, so the line says to change those
    (["llama-3.1-8b", "--users", "4", "--vendor", "intel"], "--runtime vllm (the default): no card sized runs it"),
    (["llama-3.1-8b", "--users", "4", "--runtime", "mlx", "--gpus", "h100-sxm"],
     "--runtime mlx: no card sized runs it (h100-sxm: no mlx constants for NVIDIA cards). Give another --runtime"),
    (["llama-3.1-8b", "--users", "4", "--gpus", "tesla-p40"], "tesla-p40: vLLM needs CUDA compute capability 7.5"),
])
def test_bad_fleet_input_is_one_line(run_cli, args, needle):
    code, out, err = run_cli("fleet", *args)
    assert code == 2 and needle in err and "Traceback" not in err and out == ""


def test_emit_launch_lines_for_the_best_row(run_cli):
    base = ("fleet", "llama-3.1-70b", "--users", "400", "--ttft", "2s", "--tok-s-per-user", "30", "--gpus", "b200")
    code, out, err = run_cli(*base, "--json")
    row = json.loads(out)["rows"][0]
    assert row["mode"] == "disaggregated"
    # --emit sglang sizes the fleet for SGLang, as --runtime sglang does (its disaggregated configuration: the best
    # row's, or the one beside it where aggregated serving needs no more cards)
    code, out, err = run_cli(*base, "--runtime", "sglang", "--json")
    first = json.loads(out)["rows"][0]
    sg = first if first["mode"] == "disaggregated" else first["other"]
    code, out, err = run_cli(*base, "--emit", "sglang", "--mode", "disaggregated")
    assert code == 0, err
    assert f"{sg['prefill_workers']} x prefill" in out and "--disaggregation-mode prefill" in out
    assert "--disaggregation-mode decode" in out and "sglang_router.launch_router --pd-disaggregation" in out
    assert f"--tp-size {sg['tp']}" in out and "--context-length 3500" in out
    assert f"--max-running-requests {sg['batch_per_replica']}" in out
    # the rows are sized with SGLang's own default share for the card and tp (engines.engine_ledger), which the line
    # leaves to it
    assert "--mem-fraction-static" not in out and sg["gpu_util"] is None
    code, out, err = run_cli(*base, "--runtime", "trtllm", "--emit", "sglang")
    assert code == 2 and "sized for trtllm" in err and out == ""
    code, out, err = run_cli(*base, "--emit", "vllm")
    assert code == 0 and "dynamo.vllm" in out and "NixlConnector" in out
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--isl", "200", "--osl", "2000", "--users", "64", "--gpus",
                             "h100-sxm", "--emit", "vllm")
    assert code == 0 and "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1" in out
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "8", "--tpot", "0.1ms", "--gpus", "rtx4090",
                             "--emit", "vllm")
    assert code == 2 and "No card serves the workload" in err and "TPOT" in err and "Loosen --ttft / --tpot" in err
    # replicas of one card share a node: each on its own card and port, said beside the line (an audit saw five
    # identical `vllm serve` lines that would all start on GPU 0 and port 8000)
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "400", "--tok-s-per-user", "30", "--gpus", "h100-sxm",
                             "--emit", "vllm")
    assert code == 0 and "CUDA_VISIBLE_DEVICES=1 ... --port 8001" in out and "load balancer" in out
    # without targets, the reason is the card's (vLLM does not run on a Mac), not a target to loosen
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "10", "--gpus", "m4-max", "--emit", "vllm")
    assert code == 2 and "vllm does not run on Apple cards" in err and "Loosen" not in err


def test_fleet_csv_and_markdown(run_cli):
    import csv
    import io

    # DeepSeek-V3's 671 GB do not fit even 4 nodes of 8 x 12 GB: the RTX 3060 row says why
    args = ("fleet", "deepseek-v3", "--users", "400", "--gpus", "b200,rtx3060")
    code, out, err = run_cli(*args, "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["card"] for r in rows] == ["b200", "rtx3060"] and rows[1]["why_not"] and rows[1]["meets_slo"] == "False"
    code, out, err = run_cli(*args, "--format", "markdown")
    assert code == 0 and out.startswith("**fleet: DeepSeek-V3") and "| b200 |" in out
    code, out, err = run_cli(*args, "--format", "html")
    assert code == 0 and out.startswith("<!DOCTYPE html>") and "rtx3060" in out  # tests/test_html_report.py
    code, out, err = run_cli(*args, "--format", "xml")
    assert code == 2 and "--format" in err and "html" in err and out == ""


def test_pareto_curves_include_pipeline_replicas(catalog, runtimes):
    """Llama 3.1 405B in BF16 (810 GB) fits no node of 8 H100s: fleet serves it with two stages of a node each (tp 8
    x pp 2), and the Pareto curve is drawn from those replicas too (before, pipelines were left out and the card had
    no curve); the fleet's own row lies within the front. vLLM's P/D workers run no pipeline stages (its
    NixlConnector refuses them): its card has no disaggregated curve; SGLang's, stage for stage, has one."""
    from llmsize.estimate.fleet import pareto_curves

    m, g, w = catalog.model("llama-3.1-405b"), catalog.gpu("h100-sxm"), Workload(2000, 500, users=400)
    row = fleet_rows(m, [g], w, "vllm", runtimes)[0]
    assert (row.tp, row.pp) == (8, 2)
    (curve,) = pareto_curves(m, [g], w, "vllm", runtimes)
    assert [c.mode for c in pareto_curves(m, [g], w, "sglang", runtimes)] == ["aggregated", "disaggregated"]
    assert curve.mode == "aggregated" and len(curve.points) >= 3
    # the row (a batch between two of the curve's) dominates none of the front's points
    assert not any(row.tok_s_per_user > x and row.output_tok_s_per_gpu > y for x, y in curve.points)
    assert min(x for x, _ in curve.points) < row.tok_s_per_user < max(x for x, _ in curve.points)


def test_pareto_points_are_not_dominated_and_chart(catalog, runtimes, run_cli, tmp_path):
    from llmsize.estimate.fleet import pareto_curves

    w = Workload(3000, 500, users=400, tpot_s=1 / 30)
    curves = pareto_curves(catalog.model("llama-3.1-70b"), [catalog.gpu("h100-sxm"), catalog.gpu("b200")], w,
                           "vllm", runtimes)
    assert {c.card for c in curves} == {"h100-sxm", "b200"}
    for c in curves:
        assert len(c.points) >= 3
        for p in c.points:
            assert not any(q[0] >= p[0] and q[1] >= p[1] and q != p for q in c.points)
        # along the front, more per user means less per GPU
        ys = [y for _, y in sorted(c.points)]
        assert ys == sorted(ys, reverse=True)
    code, out, err = run_cli("fleet", "llama-3.1-70b", "--users", "400", "--tok-s-per-user", "30", "--gpus",
                             "h100-sxm,b200", "--pareto")
    assert code == 0 and "Pareto: Llama 3.1 70B" in out and "target 30 tok/s per user" in " ".join(out.split())
    assert "the rows chosen" in out  # each card's row, marked beside the curve it was picked from
    from llmsize.render.fleet_report import _chosen

    rows = fleet_rows(catalog.model("llama-3.1-70b"), [catalog.gpu("b200")],
                      Workload(3000, 500, users=400, tpot_s=1 / 30), "vllm", runtimes)
    (label, pts, style), = _chosen(rows, curves)
    assert pts == [(rows[0].tok_s_per_user, rows[0].output_tok_s_per_gpu)] and style == "points"
    code, out, err = run_cli("fleet", "llama-3.1-70b", "--users", "4", "-o", str(tmp_path / "p.gif"))
    assert code == 2 and ".png or .svg" in err
    pytest.importorskip("matplotlib")
    code, out, err = run_cli("fleet", "llama-3.1-70b", "--users", "400", "--gpus", "b200", "-o",
                             str(tmp_path / "p.svg"), "--format", "json")
    assert code == 0 and (tmp_path / "p.svg").read_text().lstrip().startswith("<?xml")


def test_a_chart_draws_the_best_cards_each_with_its_own_marker_and_says_what_it_leaves_out(run_cli):
    """Five cards serve Llama 3.1 70B at 30 tok/s a user: the terminal chart draws the best four (two curves each,
    aggregated and P/D), the rows chosen and the target, ten series with ten markers, and says the fifth is left
    out; the HTML page says it under both charts. With two cards, nothing is left out and nothing is said."""
    import re

    base = ("fleet", "llama-3.1-70b", "--users", "400", "--ttft", "2s", "--tok-s-per-user", "30")
    code, out, err = run_cli(*base, "--gpus", "h100-sxm,h200-sxm,b200,mi300x,rtx4090", "--pareto")
    assert code == 0, err
    legend = " ".join(out[out.index("legend: "):].split())
    markers = re.findall(r"(?:^legend:|   |\s)(\S) (?:b200|h200-sxm|h100-sxm|mi300x|rtx4090|the rows|target)", legend)
    assert len(markers) == 10 and len(set(markers)) == 10, legend
    assert "rtx4090" not in legend and "the best 4 of 5 cards that serve" in out
    code, out, err = run_cli(*base, "--gpus", "h100-sxm,h200-sxm,b200,mi300x,rtx4090", "--format", "html")
    assert code == 0 and out.count("the best 4 of 5 cards that serve") == 2
    code, out, err = run_cli(*base, "--gpus", "h100-sxm,b200", "--pareto")
    assert code == 0 and "charted:" not in out


def test_a_shared_prefix_cuts_prefill_and_holds_its_cache_once(catalog, runtimes):
    """--shared-prefix 0.5: half of each 3,000-token prompt comes from the cache, so the prefill's compute is
    halved and its forward's fixed costs are not (one user's prompt alone: TTFT less its wait, less those fixed
    costs, x 0.5; the prompt is compute-bound) and, with no TPOT target to cap the batch, a replica holds more
    users:
    (budget - 1,500 tokens' cache) / the cache of 1,500 + 500 tokens each, against budget / 3,500 tokens' each,
    and many users need fewer cards."""
    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("h100-sxm")
    plain = fleet_rows(m, [g], Workload(3000, 500, users=1), "vllm", runtimes)[0]
    shared = fleet_rows(m, [g], Workload(3000, 500, users=1, shared_prefix=0.5), "vllm", runtimes)[0]
    agg = lambda r: r if r.mode == "aggregated" else r.other  # noqa: E731
    prefill = lambda r: agg(r).ttft_s - agg(r).ttft_wait_s  # noqa: E731  (the queue's wait changes with the batch)
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.replica import kv_pool_bytes, serving_prefill_parts, users_held
    from llmsize.estimate.runtimes import constants
    from llmsize.estimate.step_inputs import prefill_inputs

    one = make_plan(m, g, PlanInputs(context_tokens=3250, prompt_tokens=3000, runtime="vllm"), search_fit=False)
    compute, weights, fixed = serving_prefill_parts(prefill_inputs(one, "vllm"), constants(runtimes["vllm"], "cuda"))
    assert compute / 2 > weights and fixed > 0
    assert prefill(shared) - fixed == pytest.approx((prefill(plain) - fixed) * 0.5)

    p = make_plan(m, g, PlanInputs(context_tokens=3250, prompt_tokens=3000), search_fit=False)
    pool = kv_pool_bytes(p, "vllm", 3500)[0]
    held = [users_held(p, Workload(3000, 500, users=1, shared_prefix=f), "vllm", None, pool) for f in (0.0, 0.5)]
    assert held[1] > 1.5 * held[0]
    # at 10,000 users that capacity needs fewer cards
    many = [fleet_rows(m, [g], Workload(3000, 500, users=10_000, shared_prefix=f), "vllm", runtimes)[0]
            for f in (0.0, 0.5)]
    assert many[1].cards_total < many[0].cards_total


def test_speculative_decoding_gains_most_at_small_batches(catalog, runtimes):
    """E = (1 - a^(k+1)) / (1 - a) tokens a pass (Leviathan et al. 2023, eq. 1): k = 4, a = 0.7 gives
    (1 - 0.16807) / 0.3 = 2.773. One user of Llama 3.1 70B on H100s decodes faster with a Llama 3.2 1B draft; at 64
    users the verify pass is no longer one step's cost and the gain is smaller."""
    from llmsize.estimate.speculative import Spec, parse_spec

    spec = parse_spec("draft=llama-3.2-1b,k=4,accept=0.7", catalog)
    assert spec.tokens_per_pass() == pytest.approx((1 - 0.7 ** 5) / 0.3) == pytest.approx(2.773, abs=1e-3)
    assert Spec(3, 1.0).tokens_per_pass() == 4
    m, g = catalog.model("llama-3.1-70b"), [catalog.gpu("h100-sxm")]
    gain = {}
    for users in (1, 64):
        plain = fleet_rows(m, g, Workload(3000, 500, users=users), "vllm", runtimes)[0]
        fast = fleet_rows(m, g, Workload(3000, 500, users=users, spec=spec), "vllm", runtimes)[0]
        assert fast.tp == plain.tp
        gain[users] = fast.tok_s_per_user / plain.tok_s_per_user
    assert 1.5 < gain[1] < 2.8 and 1.0 < gain[64] < gain[1]
    mtp = parse_spec("mtp=1,accept=0.8", catalog)
    assert mtp.draft is None and mtp.k == 1 and mtp.tokens_per_pass() == pytest.approx(1.8)


@pytest.mark.parametrize("text, needle", [
    ("draft=llama-3.2-1b", "a draft model needs accept=A"), ("draft=llama-3.2-1b,accept=x", "accept must be a number"),
    ("k=4,accept=0.7", "draft=MODEL or mtp=N"),
    ("mtp=1,draft=llama-3.2-1b,accept=0.5", "draft=MODEL or mtp=N"), ("mtp=1,accept=1.5", "accept 1.5 is not in [0, 1]"),
    ("mtp=0,accept=0.5", "from 1 to 16"), ("mtp", "no multi-token-prediction module"), ("draft", "key=value"),
    ("mtp=1,accept=0.5,foo=1", "unknown key"),
    ("draft=nope-1b,accept=0.5", "nope-1b"),
])
def test_bad_spec_is_one_line(run_cli, text, needle):
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "4", "--spec", text)
    assert code == 2 and needle in err and "Traceback" not in err and out == ""


def test_a_replica_holds_what_the_engine_ledger_leaves_for_its_cache(catalog, runtimes):
    """vLLM's own ledger (estimate/engines.py: 0.9 x the CUDA total - weights - activations at its 8,192-token
    batch - CUDA graphs - non-torch memory) sets a replica's cache, not the plan's flat budget: Llama 3.1 8B on
    one H100, 2,000 in / 2,000 out: a running request holds 2,000 + 1,000 tokens, so a replica holds
    ledger KV bytes // the cache of 3,000 tokens; a model without a ledger (llama.cpp) keeps the plan's budget.
    (fleet_rows calls these two for every replica it sizes.)"""
    from llmsize.estimate.engines import EngineInputs, engine_ledger
    from llmsize.estimate.replica import kv_pool_bytes
    from llmsize.estimate.replica import users_held as _users_held
    from llmsize.estimate.plan import PlanInputs, make_plan

    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("h100-sxm")
    p = make_plan(m, g, PlanInputs(context_tokens=3000, prompt_tokens=2000), search_fit=False)
    ledger = engine_ledger(m, g, p.weights.bytes_total, EngineInputs(engine="vllm", max_model_len=4000))
    pool, source = kv_pool_bytes(p, "vllm", 4000)
    assert pool == ledger.kv_cache_bytes and source == "vllm ledger"
    assert 0 < pool < p.budget.kv_budget_bytes * 1.1
    w = Workload(2000, 2000, users=5000)
    assert _users_held(p, w, "vllm", None, pool) == int(ledger.kv_cache_bytes // p.kv.bytes_per_sequence)
    assert kv_pool_bytes(p, "llamacpp", 4000) == (p.budget.kv_budget_bytes, "plan budget")


def test_a_model_no_node_holds_takes_pipeline_stages_over_nodes(catalog, runtimes):
    """DeepSeek-V3 (671 GB in its FP8 release) on H100s: 8 x 80 GiB = 687 GB leaves no cache room at tp 8, so a
    replica is two nodes, tp 8 x pp 2 (16 cards, 2 nodes); a card whose node holds it (H200) stays at one node."""
    (h100,) = fleet_rows(catalog.model("deepseek-v3"), [catalog.gpu("h100-sxm")], Workload(3000, 500, users=100),
                         "vllm", runtimes)
    assert (h100.tp, h100.pp) == (8, 2) and h100.cards_total % 16 == 0 and h100.nodes == h100.cards_total // 8
    (h200,) = fleet_rows(catalog.model("deepseek-v3"), [catalog.gpu("h200-sxm")], Workload(3000, 500, users=100),
                         "vllm", runtimes)
    assert h200.pp == 1


@pytest.mark.parametrize("model, card, users, in_node_cards", [
    # 141 GB of BF16 weights on 8 x 24 GiB (206 GB): the best a node does is tp 4 x pp 2, 12 replicas, 96 cards
    # (under vLLM 0.34's extensible cache; tp 8 and 104 cards at 0.9 of the card)
    ("llama-3.1-70b", "rtx4090", 400, (4, 2, 96)),
    # 671 GB of FP8 on 48 GB RTX A6000s: tp 8 x pp 2 (16 x 48 GiB = 825 GB) leaves ~70 GB of cache; 4 nodes ~900
    ("deepseek-v3", "rtxa6000", 400, None),
])
def test_a_model_a_node_barely_holds_tries_more_nodes_a_replica(catalog, runtimes, monkeypatch, model, card, users,
                                                               in_node_cards):
    """Stages a node each are tried while one more node a stage lowers the cards in all: a replica of two nodes holds
    the weights once over twice the memory, so its cache room grows far more than 2x where the weights fill most of
    a node. Llama 3.1 70B on RTX 4090s for 400 users: tp 8 x pp 2 serves them on fewer cards than the best replica
    within a node (which stopping at a node that holds the model chose): 48 cards, not 96; DeepSeek-V3 on RTX A6000
    cards: 4 nodes a replica, 64 cards, where 2 (the first that holds it) need 224 (1,600 before vLLM 0.34's
    extensible cache left each card more). (The RTX 6000 Ada was the case until the catalog took its CUDA total,
    48,640 MiB: two nodes of it no longer hold the model.)"""
    from llmsize.estimate import fleet

    m, g, w = catalog.model(model), catalog.gpu(card), Workload(3000, 500, users=users)
    (row,) = fleet_rows(m, [g], w, "vllm", runtimes)
    if in_node_cards is not None:
        monkeypatch.setattr(fleet, "PP_NODES", ())
        (in_node,) = fleet_rows(m, [g], w, "vllm", runtimes)
        assert (in_node.tp, in_node.pp, in_node.cards_total) == in_node_cards
        assert (row.tp, row.pp) == (8, 2) and row.cards_total < in_node.cards_total, row
    else:
        monkeypatch.setattr(fleet, "PP_NODES", (2,))
        (two,) = fleet_rows(m, [g], w, "vllm", runtimes)
        assert (two.tp, two.pp) == (8, 2)
        assert (row.tp, row.pp) == (8, 4) and row.cards_total < two.cards_total / 3, (row, two)
    assert row.nodes == row.cards_total // 8 and row.meets_slo


def test_a_pipeline_keeps_one_micro_batch_a_stage_in_flight(catalog, runtimes):
    """Llama 3.1 70B on H100s, tp 4 x pp 2 within a node: the engines keep pp = 2 micro-batches in flight (vLLM's
    max_concurrent_batches, TensorRT-LLM's num_micro_batches, SGLang's pp_max_micro_batch_size), so 64 users are
    two micro-batches of 32, each crossing both stages once a token: TPOT(64) = the plan's step at batch 32 (each
    card's weights, both stages in turn, the hand-off), and the replica yields 64 / that, where one batch in flight
    would yield 64 / step(64) (little more at 64: the step is still mostly its weights' read, which a micro-batch
    pays in full; the pipeline's gain is in the cache it holds). A prompt crosses both stages too (its TTFT alone is the whole prefill), but costs
    the replica half of it: the other stage works on something else meanwhile."""
    from llmsize.estimate.runtimes import constants
    from llmsize.estimate.step_inputs import prefill_inputs, step_inputs
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.replica import prefill_cost_s, replica_timing
    from llmsize.estimate.speed import decode_step_time_s, prefill_time_s

    m, g, c = catalog.model("llama-3.1-70b"), catalog.gpu("h100-sxm"), constants(runtimes["vllm"], "cuda")
    p = make_plan(m, g, PlanInputs(context_tokens=3250, prompt_tokens=3000, tp=4, pp=2), search_fit=False)
    tpot, alone, cost = replica_timing(p, "vllm", c, 8192)

    def step(b):
        return decode_step_time_s(step_inputs(p, p.decode_model.step(b), "vllm"), c)
    assert tpot(64) == pytest.approx(step(32), rel=1e-12) and tpot(63) == pytest.approx(step(32), rel=1e-12)
    assert tpot(1) == pytest.approx(step(1), rel=1e-12)  # one user: one micro-batch, nothing to overlap
    assert tpot(64) < step(64)
    x = prefill_inputs(p, "vllm")
    assert alone == pytest.approx(prefill_time_s(x, c), rel=1e-12)
    # 8,192 // 3,000 = 2 prompts a forward (vLLM mixes them into steps); half of one's cost to the replica
    assert cost(1.0) == pytest.approx(prefill_cost_s(x, c, 2, 0.5, False) / 2, rel=1e-12)


def test_fleet_tries_pipeline_stages_within_a_node(catalog, runtimes, monkeypatch):
    """Two stages within a node (tp 1, 2, 4 x pp 2) are candidates beside tensor parallel: Llama 3.1 8B on H100s
    for a million users of 3,000 in / 200 out, no targets. At tp 2 a card's cache holds its replica's users' every
    layer; at tp 2 x pp 2 it holds half their layers, so a replica of 4 cards runs more than twice tp 2's users at
    about the same step per micro-batch: fewer cards in all. Its stages hand off within the node (one node a
    replica) and the launch line is one `vllm serve` with --pipeline-parallel-size, no multi-node set-up."""
    from llmsize.estimate.fleet import _configs, stage_nodes
    from llmsize.render.emit_fleet import fleet_command

    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("h100-sxm")
    assert {(2, 2, 1), (4, 2, 1), (1, 2, 1)} <= set(_configs(True, m))
    assert stage_nodes(4, 2) is None and stage_nodes(8, 2) == 2
    w = Workload(3000, 200, users=1_000_000)
    (row,) = fleet_rows(m, [g], w, "vllm", runtimes)
    assert (row.tp, row.pp, row.mode) == (2, 2, "aggregated"), row
    from llmsize.estimate import fleet

    monkeypatch.setattr(fleet, "PP_IN_NODE", ())
    (tp_only,) = fleet_rows(m, [g], w, "vllm", runtimes)
    monkeypatch.undo()
    assert tp_only.tp == 2 and tp_only.pp == 1
    assert row.cards_total < tp_only.cards_total and row.batch_per_replica > 2 * tp_only.batch_per_replica
    line = fleet_command(m, row, "vllm", 3200)
    assert "--tensor-parallel-size 2 --pipeline-parallel-size 2" in line and "Ray" not in line
    line = fleet_command(m, row, "sglang", 3200)
    assert "--pp-size 2" in line and "--nnodes" not in line


def test_rows_carry_the_expected_speed_band(catalog, runtimes):
    """TPOT's band is the runtime's held-out p5-p95 of measured / predicted decode rates, turned into times
    (TPOT / p95 .. TPOT / p5); TTFT's applies the prefill band to the prefill and keeps the queue's wait."""
    from llmsize.estimate.runtimes import constants

    (row,) = fleet_rows(catalog.model("llama-3.1-70b"), [catalog.gpu("b200")],
                        Workload(3000, 500, users=400, ttft_s=2.0, tpot_s=1 / 30), "vllm", runtimes)
    c = constants(runtimes["vllm"], "cuda")
    assert row.tpot_s_low == pytest.approx(row.tpot_s / c.band_high)
    assert row.tpot_s_high == pytest.approx(row.tpot_s / c.band_low)
    pre = row.ttft_s - row.ttft_wait_s
    assert row.ttft_s_low == pytest.approx(pre / c.prefill_band_high + row.ttft_wait_s)
    assert row.ttft_s_low < row.ttft_s < row.ttft_s_high
    assert row.tok_s_per_user_band == pytest.approx((1 / row.tpot_s_high, 1 / row.tpot_s_low))


def test_a_hybrids_ttft_band_spans_the_published_hybrid_prompts(catalog, runtimes):
    """As plan's: a model with recurrent layers (Qwen3.6-35B-A3B, Gated DeltaNet 3 layers in 4) has its prefill
    banded at least as wide as published hybrid prompts took (expected.RECURRENT_PREFILL_RANGE), the queue's wait
    kept; the fit's prefill band is held out on models without such layers."""
    from llmsize.estimate.expected import RECURRENT_PREFILL_RANGE
    from llmsize.estimate.runtimes import constants

    (row,) = fleet_rows(catalog.model("qwen3.6-35b-a3b"), [catalog.gpu("h100-sxm")],
                        Workload(3000, 500, users=50, ttft_s=2.0, tpot_s=1 / 30), "vllm", runtimes)
    c = constants(runtimes["vllm"], "cuda")
    lo, hi = RECURRENT_PREFILL_RANGE["serving"]
    pre = row.ttft_s - row.ttft_wait_s
    assert row.ttft_s_high == pytest.approx(max(pre / c.prefill_band_low, pre * hi) + row.ttft_wait_s)
    assert row.ttft_s_low == pytest.approx(min(pre / c.prefill_band_high, pre * lo) + row.ttft_wait_s)
    assert row.ttft_s_high > pre / c.prefill_band_low + row.ttft_wait_s  # wider than the fit's band here


@pytest.mark.parametrize("model, hybrid", [("qwen3.6-35b-a3b", True), ("qwen3-30b-a3b", False)])
def test_the_legend_says_when_a_ttft_band_is_a_hybrids(run_cli, model, hybrid):
    code, out, err = run_cli("fleet", model, "--users", "200", "--gpus", "h100-sxm")
    assert code == 0, err
    assert ("a hybrid's TTFT band" in " ".join(out.split())) == hybrid


def test_every_view_shows_the_bands(run_cli):
    """The bands are in each view, not in the JSON alone: the table (TTFT and TPOT), markdown and HTML (a user's
    tok/s too), and the JSON's tok_s_per_user_low/high (1 / TPOT's band)."""
    base = ("fleet", "llama-3.1-70b", "--isl", "3000", "--osl", "500", "--users", "400", "--tpot", "33ms",
            "--gpus", "b200")
    row = json.loads(run_cli(*base, "--json")[1])["rows"][0]
    assert row["tok_s_per_user_low"] == pytest.approx(1 / row["tpot_s_high"])
    tpot = f"{row['tpot_s'] * 1000:.1f} ({row['tpot_s_low'] * 1000:.1f}-{row['tpot_s_high'] * 1000:.1f})"
    ttft = f"{row['ttft_s']:.2f} ({row['ttft_s_low']:.2f}-{row['ttft_s_high']:.2f})"
    user = f"{row['tok_s_per_user']:.1f} ({row['tok_s_per_user_low']:.1f}-{row['tok_s_per_user_high']:.1f})"
    table, md, html = (run_cli(*base, *fmt)[1] for fmt in ((), ("--format", "markdown"), ("--format", "html")))
    assert tpot in table and ttft in table
    assert all(x in md for x in (tpot, ttft, user)) and all(x in html for x in (tpot, ttft, user))


def test_sglang_prompts_share_a_prefill_forward_only_as_they_arrive(catalog, runtimes):
    """SGLang runs prefill forwards apart from decode steps, first whenever prompts wait; a forward takes the N
    prompts that arrived while the last ran (Poisson, mean m_F = rate x F(k)) or, when none did, those that arrived
    during the last decode step (m_d / (1 - e^-m_d), m_d = rate x step): k = m_F + e^-m_F x m_d / (1 - e^-m_d)
    within [1, chunk // isl], F(k) = max(k x compute, weights) + fixed. Qwen3-235B on 8 x B200, 500-token prompts:
    F(1) ~0.1 s (94 layers of eager prefill), so at 0.5 prompts/s a forward holds ~one prompt and each pays it
    whole; at 500 prompts/s the chunk (16,384 tokens: 32 prompts) fills and a prompt costs ~1/32 of the fixed
    part. vLLM fills its step's budget from the queue at any rate. Each prompt brings its own all-reduces (tp 8):
    they go with its compute, not with the forward's fixed costs (replica.serving_prefill_parts)."""
    import math as _m

    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.replica import first_token_s, replica_timing, serving_prefill_parts
    from llmsize.estimate.runtimes import constants
    from llmsize.estimate.speed import prefill_comm_s, prefill_parts_s

    p = make_plan(catalog.model("qwen3-235b-a22b"), catalog.gpu("b200"),
                  PlanInputs(context_tokens=750, prompt_tokens=500, tp=8), search_fit=False)
    c = constants(runtimes["sglang"], "cuda")
    tpot_fn, _, cost = replica_timing(p, "sglang", c, 16384)
    compute, weights, fixed = serving_prefill_parts(cost.x, c)
    comm = prefill_comm_s(cost.x)
    assert comm > 0 and (compute - comm, weights, fixed + comm) == pytest.approx(prefill_parts_s(cost.x, c))
    forward = lambda k: max(k * compute, weights) + fixed  # noqa: E731
    alone = cost.alone()
    assert alone == pytest.approx(forward(1)) and 0.05 < alone < 0.2
    assert cost.most == 16384 // 500 == 32
    assert cost.prompts(0.5) == pytest.approx(1.0, abs=0.01) and cost(0.5) == pytest.approx(alone, rel=0.01)
    for rate, step in ((5.0, 0.0), (50.0, 0.02)):  # fixed points above one prompt
        k = cost.prompts(rate, step)
        m_d = rate * step
        after = m_d / (1 - _m.exp(-m_d)) if m_d else 1.0
        assert 1 < k < 32
        assert k == pytest.approx(rate * forward(k) + _m.exp(-rate * forward(k)) * after, rel=1e-4)
        assert cost(rate, step) == pytest.approx(forward(k) / k)
    assert cost.prompts(500.0) == 32 and cost(500.0) == pytest.approx(max(compute, weights / 32) + fixed / 32)
    rate = 6.0
    # TTFT at b users: the forward carrying the prompt, half a decode step in progress, the M/D/1 wait
    b = 64
    each = cost(rate, tpot_fn(b))
    step = tpot_fn(b) + b * each / 500
    lam = b / (alone + 500 * step)
    rho = lam * each
    expected = cost.forward_s(rate, tpot_fn(b)) + tpot_fn(b) / 2 + rho * each / (2 * (1 - rho))
    assert first_token_s(b, tpot_fn, cost, rate, 500) == pytest.approx(expected)
    # one user: no decode step in progress, a forward of its own prompt alone, no prompt ahead (a closed loop of one
    # user holds no other), whatever the rate its cycle implies (a 2-token answer had queued it behind itself)
    assert first_token_s(1, tpot_fn, cost, 0.1, 500) == pytest.approx(alone)
    assert first_token_s(1, tpot_fn, cost, 50.0, 2) == pytest.approx(alone)
    # b users: no more than the b - 1 others' prompts ahead
    assert first_token_s(2, tpot_fn, cost, 50.0, 2) <= cost.forward_s(50.0, tpot_fn(2)) + tpot_fn(2) / 2 + cost(
        50.0, tpot_fn(2)) + 1e-12
    _, _, vcost = replica_timing(p, "vllm", constants(runtimes["vllm"], "cuda"), 8192)
    assert vcost.prompts(0.01) == vcost.most == 8192 // 500


def test_the_node_link_sets_the_disaggregated_cache_move(run_cli):
    """--node-link-gb-s (plan's option, shared): a disaggregated row's TTFT pays the prompt's cache over it, so a
    slower link lengthens that row's first token by (1 / 12.5 - 1 / 50) GB/s x the cache of the prompt; the
    workload echoes it; a zero or negative link is one line."""
    import json

    base = ("fleet", "llama-3.1-70b", "--isl", "3000", "--osl", "500", "--users", "400", "--ttft", "2s",
            "--tpot", "33ms", "--gpus", "b200", "--json")
    code, out, err = run_cli(*base)
    assert code == 0, err
    fast = json.loads(out)
    code, out, err = run_cli(*base, "--node-link-gb-s", "12.5")
    assert code == 0, err
    slow = json.loads(out)
    assert fast["workload"]["node_link_gb_s"] == 50.0 and slow["workload"]["node_link_gb_s"] == 12.5
    d_fast = next(r if r["mode"] == "disaggregated" else r["other"] for r in fast["rows"])
    d_slow = next(r if r["mode"] == "disaggregated" else r["other"] for r in slow["rows"])
    base_fast = d_fast["ttft_s"] - d_fast["ttft_wait_s"]
    base_slow = d_slow["ttft_s"] - d_slow["ttft_wait_s"]
    # base = the prefill forward + move; the move is 4x longer: base_slow - base_fast = 3 x the 50 GB/s move, which is
    # 3,000 tokens x one card's cache per token (Llama 3.1 70B: 2 x 80 layers x 8 KV heads x 128 x 2 bytes = 327,680
    # bytes, split over tp cards and, a pipeline's stages each moving their own layers' part, over pp) / 50 GB/s; the
    # forward, of the prompts that arrived together, shortens a little as the longer first token slows the users'
    # requests (within 5% of the move's difference)
    assert (d_slow["tp"], d_slow["pp"]) == (d_fast["tp"], d_fast["pp"])
    move_fast = 3000 * 327_680 / (d_fast["tp"] * d_fast["pp"]) / 50e9
    assert base_slow - base_fast == pytest.approx(3 * move_fast, rel=0.05)
    for bad in ("0", "-5", "nan"):
        code, out, err = run_cli(*base, "--node-link-gb-s", bad)
        assert code == 2 and "--node-link-gb-s" in err and "Traceback" not in err


def test_a_step_token_budget_caps_the_batch_where_prompts_ride_in_decode_steps(catalog, runtimes):
    """vLLM on an H100 takes 8,192 tokens a step: with 3,000-token prompts and 200-token answers each running
    request brings 1 + 3,000 / 200 = 16 tokens a step (its decode token and its share of the prompts), so no replica
    runs more than 8,192 // 16 = 512 a micro-batch in flight (dp x pp of them); SGLang prefills apart and is bounded
    by its prefill's stall instead."""
    from llmsize.estimate.fleet import admitted_batch

    w = Workload(3000, 200, users=1_000_000)
    assert admitted_batch("vllm", 8192, w) == 512 and admitted_batch("vllm", 8192, w, cards=8) == 8 * 512
    assert admitted_batch("vllm", 8192, Workload(3000, 200, users=1, shared_prefix=0.5)) == 8192 // 8.5
    assert admitted_batch("sglang", 8192, w) > 10**6
    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("h100-sxm")
    (row,) = fleet_rows(m, [g], w, "vllm", runtimes)
    assert row.batch_per_replica <= 512 * (row.dp or 1) * row.pp


def test_why_not_names_the_closest_miss(catalog, runtimes):
    """Nothing serves 400 users of Llama 3.1 70B at 1 ms a token on B200s: why_not quotes the configuration that
    comes closest (tp 8: 8.7 ms), not the last one tried (tp 4 x pp 2: 11.4 ms)."""
    m, g = catalog.model("llama-3.1-70b"), catalog.gpu("b200")
    (row,) = fleet_rows(m, [g], Workload(3000, 500, users=400, tpot_s=0.001), "vllm", runtimes)
    assert not row.meets_slo and row.why_not.startswith("tp 8: TPOT ")


def test_runtimes_without_disaggregation_serve_aggregated_only(catalog, runtimes, run_cli):
    """llama.cpp (and MLX, gpt-fast) serve prompts and decode on one worker: no prefill/decode rows for them. A
    fleet of Apple cards defaults to llama.cpp; with other cards vLLM, whose reason on an Apple card says so."""
    rows = fleet_rows(catalog.model("llama-3.1-8b"), [catalog.gpu("b200")], Workload(3000, 500, users=400),
                      "llamacpp", runtimes)
    assert rows[0].mode == "aggregated" and rows[0].other is None
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "8", "--gpus", "m4-max", "--json")
    assert code == 0 and json.loads(out)["runtime"] == "llamacpp"
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "8", "--gpus", "m4-max,h100-sxm", "--json")
    d = json.loads(out)
    apple = next(r for r in d["rows"] if r["card"] == "m4-max")
    assert d["runtime"] == "vllm" and "--runtime llamacpp" in apple["why_not"]


def test_review_fixes_on_the_command_line(run_cli):
    """A card named twice is sized once; --json beside another --format is refused; `--spec mtp=1` (the issue's own
    example) takes DeepSeek-V3's acceptance, 0.85; markdown carries nodes, kW, cost per month and the targets."""
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "40", "--gpus", "h100-sxm,h100-sxm", "--json")
    assert code == 0 and len(json.loads(out)["rows"]) == 1
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "40", "--gpus", "b200", "--json", "--format", "csv")
    assert code == 2 and "two outputs" in err and out == ""
    code, out, err = run_cli("fleet", "deepseek-v3", "--users", "40", "--gpus", "h200", "--spec", "mtp=1", "--json")
    assert code == 0 and json.loads(out)["workload"]["spec"]["accept"] == 0.85
    code, out, err = run_cli("fleet", "llama-3.1-70b", "--users", "400", "--ttft", "2s", "--gpus", "b200", "--format",
                             "markdown")
    assert code == 0 and "| nodes |" in out and "| kW |" in out and "per month" in out and "TTFT <= 2 s" in out


def test_the_table_never_folds_a_number(run_cli):
    """At 100 columns a million users need tens of thousands of cards: the counts print whole (a review saw
    "19,70" and "8 P/D" on two lines), and without prices there is no cost column."""
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "1000000", "--isl", "3000", "--osl", "200", "--gpus",
                             "h100-sxm,rtx4090,b200")
    assert code == 0 and "/Mtok" not in out
    d = json.loads(run_cli("fleet", "llama-3.1-8b", "--users", "1000000", "--isl", "3000", "--osl", "200", "--gpus",
                           "h100-sxm,rtx4090,b200", "--json")[1])
    for r in d["rows"]:
        assert f"{r['cards_total']:,}" in out and f"{r['other']['cards_total']:,}" in out


def test_a_card_without_a_dense_peak_says_so(catalog, runtimes):
    """The 32-core M4 Max's catalog entry has no dense TFLOPS figure (none sourced): the fleet cannot cost a prompt
    there and says that, not that the runtime lacks constants."""
    (row,) = fleet_rows(catalog.model("llama-3.1-8b"), [catalog.gpu("m4-max-32")], Workload(3000, 500, users=4),
                        "mlx", runtimes)
    assert not row.meets_slo and "no dense TFLOPS figure" in row.why_not


def test_emit_the_other_mode(run_cli):
    """The best B200 row for 400 users of Llama 3.1 70B at 2 s / 30 tok/s is disaggregated; --mode aggregated
    prints the launch lines of the aggregated configuration beside it (its replicas of tp cards); --mode without
    --emit is refused."""
    base = ("fleet", "llama-3.1-70b", "--users", "400", "--ttft", "2s", "--tok-s-per-user", "30", "--gpus", "b200")
    row = json.loads(run_cli(*base, "--json")[1])["rows"][0]
    assert row["mode"] == "disaggregated" and row["other"]["mode"] == "aggregated"
    code, out, err = run_cli(*base, "--emit", "vllm", "--mode", "aggregated")
    assert code == 0 and f"{row['other']['replicas']} replica(s) of tp {row['other']['tp']}" in out
    assert "--disaggregation" not in out and "NixlConnector" not in out
    code, out, err = run_cli(*base, "--mode", "aggregated")
    assert code == 2 and "Add --emit" in err and out == ""


def test_the_text_output_shows_each_rows_footprint_and_cost(run_cli, tmp_path):
    """Cards, nodes of 8, board power and, with hourly prices, the cost an hour and a month, in a second table that
    keeps both within 100 columns. For n B200s: ceil(n / 8) nodes, n x 1,000 W (the catalog's B200 TDP), at 5.2 an
    hour a card 5.2 n an hour and 5.2 n x 730 a month (16 cards: 2 nodes, 16.0 kW, 83.20 and 60,736)."""
    prices = tmp_path / "p.yaml"
    prices.write_text("currency: EUR\nprices: {}\nhourly:\n  b200: 5.2\n")
    base = ("fleet", "llama-3.1-70b", "--users", "400", "--ttft", "2s", "--tok-s-per-user", "30", "--gpus", "b200")
    row = json.loads(run_cli(*base, "--json", "--prices", str(prices))[1])["rows"][0]
    n = row["cards_total"]
    assert row["nodes"] == -(-n // 8) and row["watts"] == n * 1000
    code, out, err = run_cli(*base, "--prices", str(prices))
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 100
    line = next(x for x in out[out.index("Footprint and cost"):].splitlines() if x.strip().startswith("b200"))
    other = row["other"]
    assert line.split() == ["b200", f"{n:,}", f"{-(-n // 8):,}", f"{n:.1f}", f"{5.2 * n:,.2f}", f"{5.2 * n * 730:,.0f}",
                            "aggregated" if other["mode"] == "aggregated" else "P/D", f"({other['cards_total']:,})"]
    code, out, err = run_cli(*base)
    assert "Footprint of each row" in out and "/month" not in out


def test_a_disaggregated_point_counts_its_prefill_workers():
    """A decode worker of 4 cards at batch 64, TPOT 30 ms, 500-token answers finishes 64 / (500 x 0.03) = 4.27
    requests a second; at 0.5 s of a prefill worker each it needs 2.13 prefill workers of 4 cards: 64 / 0.03 =
    2,133 tok/s over 4 x 3.13 cards = 170.2 tok/s a GPU, at 1 / 0.03 = 33.3 tok/s a user."""
    from llmsize.estimate.fleet import disaggregated_point

    per_user, per_gpu = disaggregated_point(64, 0.03, 4, 500, lambda rate: 0.5)
    assert per_user == pytest.approx(33.333, rel=1e-4) and per_gpu == pytest.approx(170.21, rel=1e-4)


def test_the_pareto_has_a_disaggregated_curve_for_the_engines_that_split(catalog, runtimes, run_cli):
    """vLLM disaggregates: each card gets a P/D curve beside its aggregated one. The same GPU-seconds make a token
    either way (a prompt's prefill is paid by the replica or by its prefill workers), so at equal output per GPU the
    P/D worker is faster per user (no prefill stalls its users); the fleet's disaggregated row lies on or under its
    front. llama.cpp does not disaggregate: one curve."""
    from llmsize.estimate.fleet import pareto_curves

    m, g = catalog.model("llama-3.1-70b"), catalog.gpu("b200")
    w = Workload(3000, 500, users=400, tpot_s=1 / 30, ttft_s=2.0)
    agg, pd = pareto_curves(m, [g], w, "vllm", runtimes)
    assert (agg.mode, pd.mode, pd.label) == ("aggregated", "disaggregated", "b200 P/D")
    for y in {y for _, y in agg.points} & {y for _, y in pd.points}:
        assert max(x for x, yy in pd.points if yy == y) > max(x for x, yy in agg.points if yy == y)
    (row,) = fleet_rows(m, [g], w, "vllm", runtimes)
    assert row.mode == "disaggregated"
    assert any(x >= row.tok_s_per_user and y >= row.output_tok_s_per_gpu for x, y in pd.points)
    assert [c.mode for c in pareto_curves(m, [g], w, "llamacpp", runtimes)] == ["aggregated"]
    code, out, err = run_cli("fleet", "llama-3.1-70b", "--users", "400", "--tok-s-per-user", "30", "--gpus", "b200",
                             "--pareto")
    assert code == 0 and "b200 P/D" in out


def test_no_pareto_when_no_card_serves(run_cli, tmp_path):
    """Llama 3.1 405B in BF16 (810 GB) does not fit an M2 Ultra under llama.cpp: no card serves the workload, so
    there is no table, no front to draw and no image written: one line naming the card and why, exit 2; the JSON
    and CSV keep the card's row and its why_not, with the same line and exit code. (Llama 3.1 70B was the case until llama.cpp's plans took the whole
    working set rather than vLLM's 0.9 of it.) Where one card of several serves, the others' why_not print below
    the table."""
    from conftest import assert_one_line_error

    out_file = tmp_path / "p.svg"
    base = ("fleet", "llama-3.1-405b", "--users", "400", "--runtime", "llamacpp")
    code, out, err = run_cli(*base, "--gpus", "m2-ultra", "--pareto", "-o", str(out_file))
    assert_one_line_error(code, err)
    assert "No card serves the workload (m2-ultra: " in err and out == "" and not out_file.exists()
    for fmt in ("json", "csv"):  # the rows for scripts, and the table's exit code and line
        code, out, err = run_cli(*base, "--gpus", "m2-ultra", "--format", fmt)
        assert_one_line_error(code, err)
        assert "No card serves the workload (m2-ultra: " in err
        assert (json.loads(out)["rows"][0]["why_not"] if fmt == "json" else "m2-ultra" in out.splitlines()[1])
    code, out, err = run_cli("fleet", "llama-3.1-70b", "--users", "40", "--gpus", "m2-ultra,h100-sxm", "--runtime",
                             "vllm")
    assert code == 0 and "h100-sxm" in out and "no configuration: m2-ultra" in out


def test_each_engine_is_sized_only_in_the_splits_it_runs(catalog):
    """DEP (attention data parallel + expert parallel) for vLLM, SGLang and TensorRT-LLM only; pipeline stages within a
    node for those and llama.cpp (its layer split), over nodes for the serving engines only; gpt-fast splits tensors
    only (a review saw fleet propose `dep 8` under llama.cpp and `4x2` under gpt-fast)."""
    from llmsize.estimate.fleet import _configs

    moe = catalog.model("qwen3-30b-a3b")
    by = {rt: set(_configs(True, moe, runtime=rt)) for rt in ("vllm", "llamacpp", "gpt-fast")}
    assert any(dp > 1 for _, _, dp in by["vllm"]) and any(pp > 1 for _, pp, _ in by["vllm"])
    assert not any(dp > 1 for _, _, dp in by["llamacpp"]) and (2, 2, 1) in by["llamacpp"]
    assert all(tp * pp <= 8 for tp, pp, _ in by["llamacpp"])  # no stages over nodes
    assert all(pp == 1 and dp == 1 for _, pp, dp in by["gpt-fast"])
    rows = fleet_rows(moe, [catalog.gpu("h100-sxm")], Workload(1000, 500, users=1000), "gpt-fast",
                      {r.id: r for r in catalog.runtimes.all()})
    assert all((r.pp, r.dp or 1) == (1, 1) for r in rows if r.replicas)


def test_an_output_folder_that_refuses_files_is_refused_before_any_work(run_cli):
    """/proc is a folder where no file can be made: `-o /proc/p.svg` is refused up front, exit 2, nothing on stdout
    (a review saw the table printed, then "cannot write ... or free space")."""
    code, out, err = run_cli("fleet", "llama-3.1-70b", "--users", "400", "--gpus", "b200", "--pareto", "-o",
                             "/proc/p.svg")
    assert code == 2 and out == "" and "cannot write in /proc" in err and "free space" not in err.lower()


def test_a_mac_is_a_node_of_its_own(run_cli):
    """An M4 Max has no card-to-card link: each is its own machine, so nodes = cards (a review saw 73 Macs packed
    into 10 nodes of 8); Apple publishes no TDP, and the footprint says why kW is "-"."""
    args = ("fleet", "qwen3-30b-a3b", "--rate", "5", "--tpot", "33ms", "--ttft", "2s", "--gpus", "m4-max",
            "--runtime", "llamacpp")
    (row,) = json.loads(run_cli(*args, "--json")[1])["rows"]
    assert row["nodes"] == row["cards_total"] and row["watts"] is None
    code, out, err = run_cli(*args)
    assert code == 0 and "no published TDP for m4-max" in out


def test_pareto_to_a_file_goes_with_json(run_cli, tmp_path):
    """--pareto -o FILE --format json writes the chart to its file and the JSON to stdout (a review saw it refused
    with the advice to give the -o it had given); without -o, --pareto and JSON still refuse each other."""
    pytest.importorskip("matplotlib")  # image charts are the `charts` extra
    out_file = tmp_path / "p.svg"
    base = ("fleet", "llama-3.1-70b", "--users", "400", "--tok-s-per-user", "30", "--gpus", "b200", "--pareto")
    code, out, err = run_cli(*base, "-o", str(out_file), "--format", "json")
    assert code == 0 and json.loads(out)["rows"] and out_file.read_text().startswith("<?xml")
    code, out, err = run_cli(*base, "--format", "json")
    assert code == 2 and "table view" in err and out == ""


@pytest.mark.parametrize("text, needle", [
    ("currency: EUR\nhourly:\n  mi300x: 2\n", "no price for the cards sized (h100-sxm, b200)"),
    ('currency: "EUR <b>x</b>"\nhourly:\n  b200: 2\n', "is not a short label"),
    ("currency:\nhourly:\n  b200: 2\n", "`currency:` is empty"),
    ("currency: EUR\nhourly:\n  b200: -2\n", "Give the price of one card-hour"),
])
def test_a_prices_file_that_prices_nothing_or_labels_badly_is_refused(run_cli, tmp_path, text, needle):
    """A review saw an hourly price for none of the sized cards drop the cost columns without a word, an HTML
    currency label pass into Markdown, an empty one reported as 'None', an hourly price asked as "of one card"."""
    prices = tmp_path / "p.yaml"
    prices.write_text(text)
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "4", "--gpus", "h100-sxm,b200", "--prices",
                             str(prices))
    assert code == 2 and out == "" and needle in err


def test_launch_lines_carry_the_cache_dtype_and_the_speculation_the_rows_were_sized_with(run_cli):
    """--kv-dtype fp8 and --spec change the cards a fleet needs; launched without them, the replicas would not
    meet the targets they were sized for. vLLM: --kv-cache-dtype fp8 and --speculative-config (method draft_model
    with the draft's repo, or mtp); SGLang: --kv-cache-dtype fp8_e4m3 and a chain of k drafted tokens
    (STANDALONE with the draft's path, or EAGLE over the model's own MTP layers); a cache dtype the engine does
    not take is refused before any row is sized, and the rows' title says what they were sized with."""
    base = ("fleet", "llama-3.1-70b", "--isl", "3000", "--osl", "500", "--users", "400", "--gpus", "b200")
    code, out, err = run_cli(*base, "--spec", "draft=llama-3.2-1b,k=4,accept=0.7", "--kv-dtype", "fp8",
                             "--emit", "vllm")
    assert code == 0, err
    assert ("--kv-cache-dtype fp8 --speculative-config '{\"model\": \"meta-llama/Llama-3.2-1B-Instruct\", "
            "\"num_speculative_tokens\": 4, \"method\": \"draft_model\"}'") in out
    code, out, err = run_cli(*base, "--spec", "draft=llama-3.2-1b,k=4,accept=0.7", "--emit", "sglang")
    assert code == 0, err
    assert ("--speculative-algorithm STANDALONE --speculative-draft-model-path meta-llama/Llama-3.2-1B-Instruct "
            "--speculative-num-steps 4 --speculative-eagle-topk 1 --speculative-num-draft-tokens 5") in out
    assert "--kv-cache-dtype" not in out
    mtp = ("fleet", "deepseek-v3", "--isl", "3000", "--osl", "500", "--users", "400", "--gpus", "h200-sxm",
           "--spec", "mtp=1")
    code, out, err = run_cli(*mtp, "--kv-dtype", "fp8", "--emit", "sglang")
    assert code == 0, err
    assert "--kv-cache-dtype fp8_e4m3" in out and "--speculative-algorithm EAGLE --speculative-num-steps 1" in out
    code, out, err = run_cli(*mtp, "--emit", "vllm")
    assert code == 0, err
    assert "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'" in out
    for kv, runtime, name in (("int8", "vllm", "vLLM"), ("nvfp4", "sglang", "SGLang"), ("int8", "trtllm",
                                                                                       "TensorRT-LLM")):
        code, out, err = run_cli(*base, "--kv-dtype", kv, "--runtime", runtime)  # refused before any row
        assert code == 2 and not out and f"--kv-dtype {kv} with --runtime {runtime}: {name} does not store its cache " \
            f"in {kv}" in err and "or another --runtime." in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, out, err = run_cli(*base, "--kv-dtype", "nvfp4", "--runtime", "trtllm")  # TensorRT-LLM's FP4 cache
    assert code == 0, err
    code, out, err = run_cli(*base, "--spec", "draft=llama-3.2-1b,k=4,accept=0.7", "--kv-dtype", "fp8")
    assert code == 0, err
    assert "KV cache fp8, speculative draft=llama-3.2-1b,k=4,accept=0.7" in " ".join(out.split())


def test_quant_sizes_the_fleet_in_that_format_and_the_launch_lines_say_so(run_cli):
    """--quant fp8 (a procurement's usual choice for a 70B): the weights' format in the title and workload, about
    half the bytes (Llama 3.1 70B: 141.1 GB in bf16, 72.7 GB in fp8 with its scales, embeddings and norms left
    16-bit: an H100 80GB replica of tp 4 becomes one of tp 2), half the cards, vLLM's launch lines quantize on
    loading (--quantization fp8); a format the runtime does not serve is one line before any work. At 20 tok/s a
    user (50 ms a token) two fp8 replicas of tp 2 come out at ~51 ms a token at batch 50, and one of tp 4 serves the
    100 users on the same 4 cards; at 15 tok/s (67 ms) the tp-2 replicas meet it."""
    base = ("fleet", "llama-3.1-70b", "--users", "100", "--gpus", "h100-sxm")
    for per_user, fp8_tp in (("20", {2, 4}), ("15", {2})):
        bf16 = json.loads(run_cli(*base, "--tok-s-per-user", per_user, "--json")[1])
        fp8 = json.loads(run_cli(*base, "--tok-s-per-user", per_user, "--quant", "fp8", "--json")[1])
        assert bf16["workload"]["quant"] == "bf16" and fp8["workload"]["quant"] == "fp8"
        (b, f) = bf16["rows"][0], fp8["rows"][0]
        assert b["tp"] == 4 and f["tp"] in fp8_tp and (b["cards_total"], f["cards_total"]) == (8, 4)
    base = (*base, "--tok-s-per-user", "20")
    code, out, err = run_cli(*base, "--quant", "fp8")
    assert code == 0 and "weights fp8" in out
    code, out, err = run_cli(*base, "--quant", "fp8", "--emit", "vllm")
    assert code == 0 and "--quantization fp8" in out
    code, out, err = run_cli(*base, "--quant", "nvfp4", "--emit", "vllm")
    assert code == 0 and "--quantization" not in out and "give a nvfp4 checkpoint" in out
    code, out, err = run_cli(*base, "--quant", "gguf-q4_k_m", "--runtime", "vllm")  # llama.cpp's without --runtime
    assert code == 2 and "GGUF" in err and "--runtime" in err and out == "" and "Traceback" not in err
    code, out, err = run_cli(*base, "--quant", "q9_z")
    assert code == 2 and "q9_z" in err and out == ""


def test_a_card_the_catalog_leaves_short_says_what_its_figures_lean_on(run_cli):
    """A DGX Spark in FP8 (no 16-bit or FP8 tensor rate in the catalog: NVIDIA prints GB10's FP4 alone) has its
    prompts costed at its FP32 rate, and an H100 PCIe replica of several cards its collectives over PCIe (its NVLink
    bridge joins pairs only): each said under the table and in JSON (`caveats`), where an audit found the fleet
    silent on both."""
    spark = ("fleet", "llama-3.1-8b", "--users", "20", "--quant", "fp8", "--gpus", "dgx-spark")
    (row,) = json.loads(run_cli(*spark, "--json")[1])["rows"]
    assert any("FP32 rate (31 TFLOPS)" in c for c in row["caveats"])
    code, out, err = run_cli(*spark)
    assert code == 0 and "note: dgx-spark: prompts costed at its FP32 rate" in " ".join(out.split())
    base = ("fleet", "llama-3.1-70b", "--users", "400", "--ttft", "2s", "--tok-s-per-user", "30", "--gpus",
            "h100-pcie,h100-sxm")
    rows = {r["card"]: r for r in json.loads(run_cli(*base, "--json")[1])["rows"]}
    assert rows["h100-pcie"]["tp"] > 1 and any("PCIe 5.0 x16" in c and "NVLink" in c
                                                for c in rows["h100-pcie"]["caveats"])
    # NVLink 4 figures in the catalog, a 16-bit rate too: no caveat of the catalog's (its prefill pool's load may be)
    assert not [c for c in rows["h100-sxm"]["caveats"] if not c.startswith("its prefill workers run at")]
    # an RTX 3080's text says "no NVLink (only the RTX 3090 had NVLink ...)": PCIe is its link, no caveat
    (r3080,) = json.loads(run_cli("fleet", "llama-3.1-8b", "--users", "20", "--gpus", "rtx3080", "--json")[1])["rows"]
    assert not any("collectives" in c for c in r3080["caveats"])


def test_a_card_the_engine_does_not_build_for_gets_no_row(catalog, runtimes, run_cli):
    """vLLM's documentation: compute capability 7.5 or higher, and on ROCm gfx90a, gfx942, gfx950, gfx1100/1101,
    gfx1200/1201, gfx1150/1151 (estimate/runtimes.py). A Tesla P40 (6.1), an MI50 (gfx906) and an RX 6800 XT
    (gfx1030) get no vLLM row, each saying why, where an audit saw them sized as if vLLM ran there; an RX 7900 XTX
    (gfx1100) and a T4 (7.5) keep theirs; llama.cpp, which the tables leave out, still sizes the P40; `plan` gives
    no expected vLLM figure there, with the same reason."""
    m = catalog.model("llama-3.1-8b")
    cards = [catalog.gpu(c) for c in ("tesla-p40", "mi50-16gb", "rx6800xt", "rx7900xtx", "t4")]
    rows = {r.card: r for r in fleet_rows(m, cards, Workload(1000, 200, users=8), "vllm", runtimes)}
    assert "compute capability 7.5" in rows["tesla-p40"].why_not and "6.1" in rows["tesla-p40"].why_not
    assert "gfx906" in rows["mi50-16gb"].why_not and "gfx1030" in rows["rx6800xt"].why_not
    assert rows["rx7900xtx"].meets_slo and rows["t4"].meets_slo
    (p40,) = fleet_rows(m, [catalog.gpu("tesla-p40")], Workload(1000, 200, users=8), "llamacpp", runtimes)
    assert p40.meets_slo
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "tesla-p40", "--runtime", "vllm", "--json")
    assert code == 0 and json.loads(out)["expected"]["tok_s"] is None
    assert "compute capability 7.5" in json.dumps(json.loads(out)["expected"])


def test_a_p95_prompt_that_misses_the_ttft_target_is_said(run_cli):
    """--ttft applies to the mean prompt; with a spread of lengths the row's p95 prompt (ttft_p95_s) can miss it:
    a caveat says so (an audit saw ttft_p95_s over the target beside meets_slo true and nothing in the table)."""
    base = ("fleet", "llama-3.1-70b", "--isl", "3000:p95=12000", "--osl", "500", "--users", "400",
            "--tok-s-per-user", "30", "--gpus", "h200-sxm")
    (loose,) = json.loads(run_cli(*base, "--ttft", "5s", "--json")[1])["rows"]
    assert loose["ttft_p95_s"] <= 5 and not any("p95 prompt" in c for c in loose["caveats"])
    # a target between the layout's mean-prompt and p95-prompt waits (the fitted constants move both)
    target = round((loose["ttft_s"] + loose["ttft_p95_s"]) / 2, 2)
    (row,) = json.loads(run_cli(*base, "--ttft", f"{target}s", "--json")[1])["rows"]
    assert row["meets_slo"] and row["ttft_s"] <= target < row["ttft_p95_s"]
    assert any("p95 prompt (12,000 tokens)" in c for c in row["caveats"])


def test_tensorrt_llm_and_gpt_fast_state_their_oldest_card(catalog, run_cli):
    """TensorRT-LLM's support matrix starts at Ampere (SM80); gpt-fast compiles through Triton, which PyTorch
    refuses below compute capability 7.0 (torch/_dynamo/exc.py, GPUTooOldForTriton): a T4 (7.5) gets no
    TensorRT-LLM figure, a Tesla P40 (6.1) neither that nor gpt-fast's, each saying which engines do run there."""
    def expected(gpu, rt):
        code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", gpu, "--runtime", rt, "--json")
        assert code == 0, err
        return json.loads(out)["expected"]

    t4 = expected("t4", "trtllm")
    assert t4["tok_s"] is None and "compute capability 8.0" in json.dumps(t4) and "vllm or llamacpp" in json.dumps(t4)
    p40 = expected("tesla-p40", "gpt-fast")
    assert p40["tok_s"] is None and "compute capability 7.0" in json.dumps(p40)
    assert "pick --runtime llamacpp" in json.dumps(p40)  # vLLM needs 7.5: not offered on a P40
    assert expected("t4", "gpt-fast")["tok_s"] and expected("a100-80gb-sxm", "trtllm")["tok_s"]


def test_launch_lines_pass_trust_remote_code_where_the_checkpoint_needs_it(run_cli):
    """Kimi K2's and MiniMax-M2.5's checkpoints load code from their repositories: Moonshot's deploy guide and
    SGLang's MiniMax-M2 docs launch them with --trust-remote-code, without which vLLM and SGLang stop at start-up.
    plan --emit and fleet --emit pass it there, and not for a model transformers knows (Llama 3.1)."""
    for model, gpu, tp, engine in (("kimi-k2", "h200-sxm", "16", "vllm"), ("minimax-m2.5", "h200-sxm", "4", "sglang")):
        code, out, err = run_cli("plan", model, "--gpu", gpu, "--tp", tp, "--emit", engine)
        assert code == 0, err
        assert out.rstrip().splitlines()[-1].endswith("--trust-remote-code")
    code, out, err = run_cli("fleet", "kimi-k2", "--isl", "2000", "--osl", "500", "--users", "50", "--tok-s-per-user",
                             "20", "--gpus", "h200-sxm", "--emit", "vllm")
    assert code == 0 and "--trust-remote-code" in out, err
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--emit", "vllm")
    assert code == 0 and "--trust-remote-code" not in out


def test_the_other_modes_row_in_json_has_the_same_keys_as_the_row(run_cli):
    """A row's `other` (the mode not chosen) lacked tok_s_per_user_low/high, which the rows and the README have."""
    import json

    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "4", "--gpus", "h100,rtx4090", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    others = [r["other"] for r in rows if r["other"]]
    assert others
    for o in others:
        assert set(o) - {"other"} == set(rows[0]) - {"other", "simulated"}
        assert o["tok_s_per_user_low"] <= o["tok_s_per_user"] <= o["tok_s_per_user_high"]


def test_where_no_card_serves_the_line_names_the_one_that_comes_closest(run_cli):
    """A new-user pass (2026-12-06) asked for 500 tok/s a user (a 2 ms TPOT) of Llama 3.1 70B on an RTX 5090, a B200
    and an A10: the line named the A10 (tp 8, 39.7 ms), the first card, where the B200 comes within 8.6 ms. It names
    the card whose closest miss is smallest against its target (estimate/fleet.Miss), whatever the order of --gpus."""
    from conftest import assert_one_line_error

    for gpus in ("rtx5090,b200,a10", "a10,rtx5090,b200"):
        code, out, err = run_cli("fleet", "llama-3.1-70b", "--isl", "3000", "--osl", "500", "--users", "400",
                                 "--tok-s-per-user", "500", "--gpus", gpus)
        assert_one_line_error(code, err)
        assert "No card serves the workload (b200: " in err and "exceeds the 2 ms target" in err


def test_a_gguf_fleet_is_sized_for_llamacpp_by_default(run_cli):
    """A new-user pass (2026-12-06): `fleet` of GGUF weights without --runtime sized them for vLLM and refused them
    with an error on --quant, which the user had not given; like plan, GGUF weights default to llama.cpp."""
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--quant", "gguf-q4_k_m", "--users", "10", "--gpus", "rtx4090",
                             "--json")
    assert code == 0, err
    assert json.loads(out)["runtime"] == "llamacpp"
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "10", "--gpus", "rtx4090", "--json")
    assert code == 0 and json.loads(out)["runtime"] == "vllm"


def test_a_fleet_cache_is_its_runtimes_own_by_default(run_cli):
    """Without --kv-dtype a fleet sizes the runtime's own cache, as plan does: llama.cpp's f16 (it titled a
    llama.cpp fleet's cache bf16, beside plan's ledger of K f16, V f16); vLLM's bf16; a --kv-dtype given stands."""
    for args, kv in ((("--quant", "gguf-q4_k_m"), "fp16"), ((), "bf16"), (("--kv-dtype", "fp8"), "fp8")):
        code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "10", "--gpus", "rtx4090", *args)
        assert code == 0, err
        assert f"KV cache {kv})" in " ".join(out.split())


def test_a_release_format_the_runtime_cannot_load_names_no_flag_not_given(run_cli):
    """DeepSeek-V3 on Mac Studios: its FP8 release under llama.cpp (the cards' default runtime) is refused naming the
    release format and the default runtime, not a --quant the user never gave; with --quant given, that flag."""
    code, out, err = run_cli("fleet", "deepseek-v3", "--gpus", "m3-ultra", "--users", "4")
    assert code == 2 and out == ""
    assert "deepseek-v3's release format, fp8-block128 (no --quant given)" in err and "Give --quant" in err
    code, out, err = run_cli("fleet", "deepseek-v3", "--gpus", "m3-ultra", "--users", "4", "--quant", "fp8-block128")
    assert code == 2 and err.startswith("Error: --quant fp8-block128, under llamacpp")


@pytest.mark.parametrize("args", [
    ("--users", "500", "--isl", "2000", "--osl", "300", "--ttft", "2s", "--tpot", "50ms", "--gpus", "mi300x"),
    ("--rate", "20", "--isl", "2000", "--osl", "300", "--ttft", "2s", "--tok-s-per-user", "30", "--gpus", "b200"),
])
def test_a_prefill_pool_is_loaded_at_most_85_percent(run_cli, args):
    """Llama 3.1 70B for 500 users on MI300X had been served by 7 prefill workers at 98% of what they serve, and at
    20 requests/s on B200s by 4 at 99%: within the TTFT target at the expected speed, saturated by a prefill 1-2%
    slower (the prompts' held-out band is ~20% wide), at loads past those the pool's closed form was checked at
    against its replay (0.85). Workers loaded at most 0.85 now serve them (that they are the fewest:
    test_disaggregation_wins_with_long_prompts_and_a_tight_tpot_not_with_short_ones)."""
    code, out, err = run_cli("fleet", "llama-3.1-70b", *args, "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    pools = [r for row in rows for r in (row, row["other"]) if r and r["mode"] == "disaggregated"]
    assert pools and all(0 < r["prefill_load"] <= 0.85 for r in pools)


def test_decode_workers_hold_the_users_decoding_not_those_prefilling(run_cli):
    """Llama 3.1 70B, 64 users of 100,000 tokens in and 1,000 out on MI300X: a user spends ~24 s on the prefill
    workers (and the move of its cache) for every ~57 s on a decode worker, so ~45 decode at a time; the decode
    workers were sized for all 64 (13 workers, 62 cards), now for those (10, 56)."""
    code, out, err = run_cli("fleet", "llama-3.1-70b", "--users", "64", "--isl", "100000", "--osl", "1000", "--ttft",
                             "30s", "--tpot", "60ms", "--gpus", "mi300x", "--json")
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    assert row["mode"] == "disaggregated"
    base = row["ttft_s"] - row["ttft_wait_s"]
    decoding = 64 * 1000 * row["tpot_s"] / (base + 1000 * row["tpot_s"])  # Little's law over a user's life
    assert decoding < 64 and row["decode_workers"] * row["batch_per_replica"] >= decoding
    assert row["decode_workers"] < math.ceil(64 / row["batch_per_replica"])


def test_disaggregated_decode_workers_under_a_rate_admit_above_their_mean(run_cli):
    """Llama 3.1 70B at 30 requests/s on B200s, disaggregated: the decode workers' prompts arrive from the prefill
    workers at a rate, so each admits up to the TPOT target's largest batch (`max_batch`, the emitted
    --max-num-seqs), above the mean it runs; a wait for a slot would fall between the first token and the second."""
    base = ("fleet", "llama-3.1-70b", "--rate", "30", "--isl", "2000", "--osl", "300", "--tpot", "50ms", "--ttft",
            "1s", "--gpus", "b200")
    code, out, err = run_cli(*base, "--json")
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    row = row if row["mode"] == "disaggregated" else row["other"]
    assert row["mode"] == "disaggregated" and row["max_batch"] > row["batch_per_replica"]
    assert row["tpot_s"] <= 0.050
    code, out, err = run_cli(*base, "--emit", "vllm", "--mode", "disaggregated")
    assert code == 0, err
    assert f"--max-num-seqs {row['max_batch']}" in out


def test_vllm_disaggregates_no_replica_over_pipeline_stages(catalog, runtimes, run_cli):
    """Llama 3.1 70B on B200s at 20 requests/s (2,000 in / 300 out, TTFT 2 s, 30 tok/s a user): the fleet's row had
    been 2 prefill and 2 decode workers of tp 1 x pp 2, and `--emit vllm` printed Dynamo lines with
    --pipeline-parallel-size 2 beside the NixlConnector, which refuses a pipeline-parallel peer (vllm #52913). Under
    vLLM no disaggregated row has stages, and the split is said among the reasons; SGLang (the same stages on both
    sides, sglang #14265) and TensorRT-LLM keep theirs."""
    from llmsize.estimate.fleet import disaggregation_refused

    assert disaggregation_refused("vllm", 2) and disaggregation_refused("vllm", 1) is None
    assert disaggregation_refused("sglang", 2) is None and disaggregation_refused("trtllm", 4) is None
    assert disaggregation_refused("llamacpp", 1)
    w = Workload(2000, 300, rate=20, ttft_s=2.0, tpot_s=1 / 30)
    m, g = catalog.model("llama-3.1-70b"), catalog.gpu("b200")
    (row,) = fleet_rows(m, [g], w, "vllm", runtimes)
    for r in (row, row.other):
        assert r is None or r.mode == "aggregated" or r.pp == 1
    code, out, err = run_cli("fleet", "llama-3.1-70b", "--isl", "2000", "--osl", "300", "--rate", "20", "--ttft", "2s",
                             "--tok-s-per-user", "30", "--gpus", "b200", "--emit", "vllm")
    assert code == 0 and "dynamo.vllm" in out  # still disaggregated, over tp alone
    assert not ("--disaggregation-mode" in out and "--pipeline-parallel-size" in out)


def test_csv_carries_the_prefill_load_caveats_and_budget_and_one_user_is_singular(run_cli):
    """The spreadsheet export had no prefill_load, max_batch, gpu_util or caveats: the table's warnings (a prefill
    pool at 99% of what it serves) vanished from the format procurement shares. And a title said "1 users"."""
    import csv

    code, out, err = run_cli("fleet", "llama-3.1-70b", "--isl", "2000", "--osl", "300", "--rate", "20", "--ttft", "2s",
                             "--tok-s-per-user", "30", "--gpus", "b200,h200", "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(out.splitlines()))
    assert {"prefill_load", "max_batch", "gpu_util", "caveats"} <= set(rows[0])
    disagg = [r for r in rows if r["mode"] == "disaggregated"]
    assert disagg and all(0 < float(r["prefill_load"]) <= 1 for r in disagg)
    assert all(r["gpu_util"] == "" for r in rows)  # no --gpu-util: the engine's own share
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "1", "--gpus", "h100")
    assert code == 0 and ", 1 user," in out.splitlines()[0]


def test_a_cards_price_gives_what_each_rows_cards_cost_to_buy(run_cli, tmp_path):
    """A buyer's prices (`prices:`, a card's) had been refused by fleet, which read only `hourly:`, and ignored
    beside them. cards_cost = cards_total x the price of one; with no hourly prices the rows rank by it (same card:
    fewest cards; across cards: cheapest to buy), and the footprint table, CSV and JSON carry it."""
    import csv

    prices = tmp_path / "p.yaml"
    prices.write_text("currency: USD\nprices:\n  b200: 45000\n  h200-sxm: 32000\n  h100-sxm: 25000\n")
    base = ("fleet", "llama-3.1-70b", "--isl", "2000", "--osl", "300", "--rate", "20", "--ttft", "2s",
            "--tok-s-per-user", "30", "--gpus", "b200,h200,h100", "--prices", str(prices))
    code, out, err = run_cli(*base, "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    price = {"b200": 45000, "h200-sxm": 32000, "h100-sxm": 25000}
    for r in rows:
        assert r["cards_cost"] == r["cards_total"] * price[r["card"]] and r["cost_per_hour"] is None
        assert r["other"]["cards_cost"] == r["other"]["cards_total"] * price[r["card"]]
    assert [r["cards_cost"] for r in rows] == sorted(r["cards_cost"] for r in rows)
    code, out, err = run_cli(*base)
    assert code == 0 and "USD to buy" in out
    line = next(x for x in out[out.index("Footprint and price to buy"):].splitlines() if x.strip().startswith("b200"))
    assert f"{next(r for r in rows if r['card'] == 'b200')['cards_cost']:,.0f}" in line.split()
    code, out, err = run_cli(*base, "--format", "csv")
    assert {r["card"]: float(r["cards_cost"]) for r in csv.DictReader(out.splitlines())} == {
        r["card"]: r["cards_cost"] for r in rows}


def test_each_card_keeps_its_runtimes_cache_dtype(run_cli):
    """SGLang keeps a DSA model's cache in FP8 on compute capability >= 10 (runtimes.runtime_kv_dtype): without
    --kv-dtype, fleet sizes the B200's row with it and the H200's in BF16, as `plan` does card by card; the B200 row
    is the one --kv-dtype fp8 gives, the header says which card keeps another, and --kv-dtype applies to all."""
    base = ("fleet", "deepseek-v3.2", "--runtime", "sglang", "--users", "64", "--isl", "8000", "--osl", "1000")

    def rows(*extra):
        code, out, err = run_cli(*base, *extra, "--json")
        assert code == 0, err
        d = json.loads(out)
        return d["workload"]["kv_dtype"], {r["card"]: r for r in d["rows"]}

    shown, by_card = rows("--gpus", "b200,h200-sxm")
    assert shown == "bf16" and (by_card["b200"]["kv_dtype"], by_card["h200-sxm"]["kv_dtype"]) == ("fp8", "bf16")
    _, fp8 = rows("--gpus", "b200", "--kv-dtype", "fp8")
    drop = ("kv_dtype",)
    assert {k: v for k, v in by_card["b200"].items() if k not in drop} == \
        {k: v for k, v in fp8["b200"].items() if k not in drop}
    forced, bf16 = rows("--gpus", "b200,h200-sxm", "--kv-dtype", "bf16")
    assert forced == "bf16" and {r["kv_dtype"] for r in bf16.values()} == {"bf16"}
    code, out, _ = run_cli(*base, "--gpus", "b200,h200-sxm")
    assert code == 0 and "KV cache bf16 (fp8 on b200: the runtime's own there)" in " ".join(out.split())
    code, out, _ = run_cli(*base, "--gpus", "b200", "--emit", "sglang")
    assert code == 0 and "--kv-cache-dtype fp8_e4m3" in out


@pytest.mark.parametrize("runtime", ["vllm", "sglang"])
def test_one_user_waits_for_no_prompt_but_its_own(run_cli, runtime):
    """A closed loop of one user: a 2-token answer makes its prompts come often, but none is ever ahead of its own,
    so fleet's first token is the plan's expected one (it had added a queue wait: 0.147 s against 0.107 under vLLM,
    and under SGLang a forward of several prompts, its wait reported negative)."""
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--gpus", "h100-sxm", "--users", "1", "--isl", "4096",
                             "--osl", "2", "--runtime", runtime, "--json")
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--runtime", runtime, "--json")
    assert code == 0, err
    assert row["ttft_s"] == pytest.approx(json.loads(out)["expected"]["ttft_s"], rel=1e-6)
    assert row["ttft_wait_s"] == 0.0
