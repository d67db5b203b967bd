"""fleet --simulate (llmsize/estimate/fleet_simulation.py): a row's replica replayed under its share of the load."""

import json

import pytest

from llmsize.estimate.fleet import fleet_rows
from llmsize.estimate.fleet_simulation import simulate_row
from llmsize.estimate.workload import Workload


@pytest.fixture(scope="module")
def runtimes(catalog):
    return {r.id: r for r in catalog.runtimes.all()}


def test_a_replica_at_fixed_lengths_replays_near_the_closed_form(catalog, runtimes):
    """Llama 3.1 8B on an H100 under SGLang, 64 users, 1,000 in / 1,000 out: one replica runs all 64; the replay's
    mean TPOT is within 10% of the row's (the closed form is checked against the scheduler in
    tests/test_serving_replay.py), and with fixed lengths the spread is small: p99 TPOT within 10% of p50."""
    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("h100-sxm")
    (row,) = fleet_rows(m, [g], Workload(1000, 1000, users=64), "sglang", runtimes)
    assert row.mode == "aggregated" and row.replicas == 1 and row.batch_per_replica == 64
    sim = simulate_row(m, g, row, Workload(1000, 1000, users=64), "sglang", runtimes)
    assert sim.requests == 2000 and sim.measured == 2000 - 2 * 64
    assert sim.tpot_mean_s == pytest.approx(row.tpot_s, rel=0.10)
    assert sim.tpot_s[2] < 1.10 * sim.tpot_s[0]
    assert sim.ttft_s[0] <= sim.ttft_s[1] <= sim.ttft_s[2]


def test_long_tailed_prompts_spread_the_first_token(catalog, runtimes):
    """The same replica with prompts of median 1,000 and p95 8,000 tokens: the p95 TTFT is several times the p50
    (a long prompt is several chunks and queues), which the closed form's mean does not show."""
    from llmsize.estimate.workload import workload_from_options

    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("h100-sxm")
    w = workload_from_options("1000:p95=8000", "500", 64, None, None, None, None, 0.0, None, catalog)
    (row,) = fleet_rows(m, [g], w, "sglang", runtimes)
    sim = simulate_row(m, g, row, w, "sglang", runtimes)
    assert sim.ttft_s[1] > 2 * sim.ttft_s[0]


def test_rows_the_replay_cannot_run_say_why(catalog, runtimes):
    """Llama 3.1 405B in BF16 on H100s: no node of 8 holds it, so the row is two pipeline stages of 8, which the
    replay has not; speculative decoding neither."""
    m, g = catalog.model("llama-3.1-405b"), catalog.gpu("h100-sxm")
    w = Workload(2000, 300, users=100)
    (row,) = fleet_rows(m, [g], w, "vllm", runtimes)
    assert row.pp > 1
    assert "pipeline rows are not replayed" in simulate_row(m, g, row, w, "vllm", runtimes)


def test_simulate_in_the_cli(run_cli):
    base = ("fleet", "llama-3.1-8b", "--isl", "1000", "--osl", "500", "--users", "64", "--gpus", "h100-sxm,b200")
    code, out, err = run_cli(*base, "--simulate")
    assert code == 0, err
    assert "Simulated" in out and "p95" in out
    assert "(agg)" not in out  # every row aggregated: no row tagged, no footnote for the tag
    code, out, err = run_cli(*base, "--simulate", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert all("simulated" in r for r in rows if r["meets_slo"])
    sim = rows[0]["simulated"]
    assert sim.get("why_not") or sim["ttft_p50_s"] <= sim["ttft_p95_s"] <= sim["ttft_p99_s"]
    code, out, err = run_cli(*base)
    assert "simulated" not in out
    for extra in (("--format", "csv"), ("--emit", "vllm"), ("--format", "html")):
        code, out, err = run_cli(*base, "--simulate", *extra)
        assert code == 2 and "--simulate" in err and "Traceback" not in err


def test_a_disaggregated_row_replays_its_prefill_and_decode_workers(run_cli):
    """Llama 3.1 70B on B200s, 400 users at 2 s / 30 tok/s: the best row is disaggregated, and --simulate replays
    its prefill and decode workers together under all 400 users (estimate/disaggregated_replay.py): the decode
    workers' TPOT within 5% of the row's, the mean TTFT within 25% (at commit time 0.43 s beside 0.37 s: the closed
    loop's users are periodic, the closed form's arrivals Poisson, and 5 prefill workers at a load of 0.85 spread
    the first token: p99 1.6 s)."""
    base = ("fleet", "llama-3.1-70b", "--isl", "3000", "--osl", "500", "--users", "400", "--ttft", "2s",
            "--tok-s-per-user", "30", "--gpus", "b200", "--simulate")
    code, out, err = run_cli(*base, "--json")
    assert code == 0, err
    (row,) = json.loads(out)["rows"]
    assert row["mode"] == "disaggregated" and "simulated" not in row["other"]
    sim = row["simulated"]
    assert sim["requests"] > sim["measured"] > 0
    assert sim["tpot_mean_s"] == pytest.approx(row["tpot_s"], rel=0.05)
    assert sim["ttft_mean_s"] == pytest.approx(row["ttft_s"], rel=0.25)
    assert sim["ttft_p50_s"] <= sim["ttft_p95_s"] <= sim["ttft_p99_s"]
    code, out, err = run_cli(*base)
    assert code == 0, err
    assert "not replayed" not in out and "(agg)" not in out
    assert "a disaggregated row's prefill and decode workers together" in " ".join(out.split())


def test_under_a_rate_the_closed_form_waits_for_a_slot_as_the_replay_does(run_cli, catalog, runtimes):
    """Llama 3.1 70B, 6 requests/s of 2,000 in / 300 out on B200s: the replicas were sized so that their mean batch
    filled --max-num-seqs, and Poisson bursts then queued for a slot: the replay's mean TTFT was 0.99 s beside the
    closed form's 0.28 s. The cap now sits above the mean batch (the targets' largest batch), the closed form adds
    the wait for a slot (every slot taken with Erlang C's probability, then freed at the full batch's pace), and the
    two agree within 25%; the vLLM line admits the cap. (At commit time 0.52 s, 0.31 s of it the slot's, beside the
    replay's 0.65 s over 2,000 requests; the slot wait at the mean batch's pace had said 0.42 s.) The aggregated row
    is the best row's other mode since vLLM 0.34's ledger left a B200 more cache and 0.28 a 16,384-token chunk."""
    m, g = catalog.model("llama-3.1-70b"), catalog.gpu("b200")
    w = Workload(2000, 300, rate=6.0, ttft_s=1.0, tpot_s=0.05)
    (best,) = fleet_rows(m, [g], w, "vllm", runtimes)
    row = best if best.mode == "aggregated" else best.other
    assert row.mode == "aggregated" and row.max_batch > row.batch_per_replica
    sim = simulate_row(m, g, row, w, "vllm", runtimes)
    assert abs(sim.ttft_mean_s - row.ttft_s) / sim.ttft_mean_s < 0.25, (row.ttft_s, sim)
    code, out, err = run_cli("fleet", "llama-3.1-70b", "--rate", "6", "--isl", "2000", "--osl", "300", "--tpot",
                             "50ms", "--ttft", "1s", "--gpus", "b200", "--emit", "vllm", "--mode", "aggregated")
    line = out.strip().splitlines()[-1].split()
    assert code == 0 and line[line.index("--max-num-seqs") + 1] == str(row.max_batch)


def test_under_a_rate_a_disaggregated_row_replays_near_its_closed_form(catalog, runtimes):
    """Llama 3.1 70B on B200s, 5 requests/s of 3,000 in / 500 out within 2 s and 33 ms: its disaggregated
    configuration (two prefill workers of one card at a load of 0.77, three decode workers admitting up to their
    cap) replayed under Poisson arrivals: mean TTFT within 15% of the closed form's, TPOT within 10% (2026-12-07:
    0.67 s beside 0.76 s, 29.0 ms beside 31.8 ms: the closed form's wait for a decode slot, three workers near their
    cap of 27, is ~10% high; with one worker of two cards, its row before prefill loads were capped at 0.85, 22.2 ms
    beside 22.4 ms)."""
    m, g = catalog.model("llama-3.1-70b"), catalog.gpu("b200")
    w = Workload(3000, 500, rate=5.0, ttft_s=2.0, tpot_s=1 / 30)
    (row,) = fleet_rows(m, [g], w, "vllm", runtimes)
    pd = row if row.mode == "disaggregated" else row.other
    assert pd.prefill_workers >= 1 and pd.max_batch > pd.batch_per_replica
    sim = simulate_row(m, g, pd, w, "vllm", runtimes)
    assert sim.ttft_mean_s == pytest.approx(pd.ttft_s, rel=0.15)
    assert sim.tpot_mean_s == pytest.approx(pd.tpot_s, rel=0.10)


def test_a_whole_deployment_is_replayed_for_several_waves_or_says_why_not(catalog, runtimes):
    """A disaggregated row is replayed whole, so its requests in flight are all its users: 2,000 users of Llama
    3.1 70B on B200s get 12 requests each (24,000, 12M answer tokens), the first and last two waves of 2,000 left out
    (the first users, in small decode batches, finish early, and their next requests meet the staggered starts: a
    second wave of ramp-up, which had put the p99 at 3.3 s); 20,000 users would need 6 x 20,000 requests of 500
    tokens, past the 30M tokens a replay emits, and the row says so instead of a figure from the ramp-up alone (the
    replay had stopped at 3,000 requests: 2 measured)."""
    m, g = catalog.model("llama-3.1-70b"), catalog.gpu("b200")
    w = Workload(3000, 500, users=2000, ttft_s=2.0, tpot_s=1 / 30)
    (row,) = fleet_rows(m, [g], w, "vllm", runtimes)
    assert row.mode == "disaggregated"
    sim = simulate_row(m, g, row, w, "vllm", runtimes)
    assert sim.requests == 24_000 and sim.measured == 16_000
    assert sim.ttft_s[2] < w.ttft_s  # its p99 within the target (the ramp-up had put it at 3.3 s)
    w = Workload(3000, 500, users=20_000, ttft_s=2.0, tpot_s=1 / 30)
    (row,) = fleet_rows(m, [g], w, "vllm", runtimes)
    why = simulate_row(m, g, row, w, "vllm", runtimes)
    assert isinstance(why, str) and "20,000 requests in flight are more than a replay follows" in why


def test_prompts_with_one_token_answers_queue_behind_the_other_users_alone(catalog, runtimes):
    """Llama 3.1 70B on B200s, 100 users of 3,000-token prompts and one-token answers (a scoring load): vLLM's
    step budget (16,384 tokens on a card of >= 160 GiB from 0.28.0; 8,192 before, which admitted 2) admits 5 such
    requests a replica, so each replica's prompt can wait for four others at most. The closed form's mixed steps take
    their mean from the arrival rate, d / (1 - lam m), and at most b - 1 others in a step: within 25% of the replay
    (1.37 s beside 1.49 s; with 8,192 tokens, at the commit that made the form, 0.71 s beside 0.61 s, where taking
    the step as TPOT_agg, d + b m / osl, and no cap had said 1.30 s)."""
    m, g = catalog.model("llama-3.1-70b"), catalog.gpu("b200")
    w = Workload(3000, 1, users=100)
    (row,) = fleet_rows(m, [g], w, "vllm", runtimes)
    assert row.mode == "aggregated" and row.batch_per_replica == 5
    sim = simulate_row(m, g, row, w, "vllm", runtimes)
    assert abs(row.ttft_s / sim.ttft_mean_s - 1) <= 0.25


def test_one_token_answers_have_no_time_per_output_token_and_long_answers_a_short_replay(run_cli):
    """--osl 1: the replay has no TPOT to give, and says "-" (JSON null), not 0.0. One user of 120,000-token answers:
    the replay stops at 2M decode steps (16 requests at a batch of one), where 200 requests had taken 48 s."""
    code, out, err = run_cli("fleet", "llama-3.1-70b", "--isl", "3000", "--osl", "1", "--users", "100", "--gpus",
                             "b200", "--simulate", "--json")
    assert code == 0, err
    sim = json.loads(out)["rows"][0]["simulated"]
    assert sim["tpot_mean_s"] is None and sim["tpot_p99_s"] is None and sim["ttft_mean_s"] > 0
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--isl", "1", "--osl", "120000", "--users", "1", "--gpus",
                             "h100-sxm", "--simulate", "--json")
    assert code == 0, err
    sim = json.loads(out)["rows"][0]["simulated"]
    assert sim["requests"] == 2_000_000 // 120_000 and sim["tpot_mean_s"] > 0


def test_a_rate_too_slow_for_the_replays_clock_says_so(run_cli):
    """--rate 1e-12: 2,000 requests would span 2e15 s, where a float clock resolves no better than 0.25 s, below a
    decode step; the replay says so (it had printed a p50 TPOT of 0.0 ms). One request in 11 days still replays."""
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--rate", "1e-12", "--gpus", "h100-sxm", "--simulate", "--json")
    assert code == 0, err
    assert "too slow a rate to replay" in json.loads(out)["rows"][0]["simulated"]["why_not"]
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--rate", "1e-6", "--gpus", "h100-sxm", "--simulate", "--json")
    assert code == 0, err
    sim = json.loads(out)["rows"][0]["simulated"]
    assert sim["tpot_p50_s"] > 0.001
