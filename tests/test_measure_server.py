"""`llmsize measure --server URL` against a streaming server this test starts on the loopback (never the internet).

The fake server (tests/fake_openai_server.py) sends its first token `ttft_s` after a request and one token every
`itl_s` after that, each stream on its own thread: what it does is known, so what the client measures can be checked
against it. Timing checks bound from below by what the server sleeps (a sleep is never shorter) and from above
loosely (a busy two-core machine adds latency; where a late first token shortens a timed span, a margin allows it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fake_openai_server import Behaviour, FakeServer  # noqa: E402

from tests.conftest import assert_one_line_error, cli_without  # noqa: E402

if os.environ.get("LLMSIZE_REQUIRE_MEASURE") == "1":  # CI installs every extra: a missing one fails, not skips
    import httpx  # noqa: F401
    import httpx_sse  # noqa: F401
    import prometheus_client  # noqa: F401
else:
    pytest.importorskip("httpx")
    pytest.importorskip("httpx_sse")
    pytest.importorskip("prometheus_client")

BASE = ("--context", "300", "--tokens", "12")


def _measure(run_cli, b: Behaviour, *args: str):
    """measure --server on a fake server, with BASE's options save those `args` give (an option given twice with
    two values is refused)."""
    base = [x for opt, value in zip(BASE[::2], BASE[1::2]) if opt not in args for x in (opt, value)]
    with FakeServer(b) as s:
        code, out, err = run_cli("measure", "--server", s.url, *base, *args)
    return code, out, err, s


def _json(run_cli, b: Behaviour, *args: str) -> dict:
    code, out, err, _ = _measure(run_cli, b, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_a_vllm_server_is_timed_as_it_streams(run_cli):
    b = Behaviour(engine="vllm", ttft_s=0.05, itl_s=0.01)
    r = _json(run_cli, b, "--gpu", "rtx4090", "--concurrency", "1,4")
    # the server sleeps 50 ms before the first token and 10 ms between tokens: the client sees at least that
    assert 0.05 <= r["prefill"]["ttft_s"] < 0.5
    # a busy machine hands the client tokens in bunches (one gap long, the next short: a 7.98 ms median was seen on a
    # loaded two-core run), so the median's floor is not the server's 10 ms; the span (tok_s, below) keeps its mean
    d = r["decode"]
    assert 0 < d["ms_per_token_p10"] <= d["ms_per_token_median"] <= d["ms_per_token_p90"]
    assert d["ms_per_token_median"] < 40
    # (12 - 1) tokens over >= 11 x 10 ms sent; a busy machine can hand the client its first token late, which shortens
    # the span it times (102.8 tok/s was seen on a loaded run): up to 20 ms of that is allowed
    assert 25 < r["decode"]["tok_s"] <= 11 / (11 * 0.010 * 0.98 - 0.020)
    assert [row["level"] for row in r["concurrency"]] == [1, 4]
    one, four = r["concurrency"]
    assert one["requests"] == 1 and four["requests"] == 4 and four["output_tokens"] == 48
    # four streams side by side on the fake server: it saw four open at once (a timing ratio alone flakes when the
    # machine is busy: 1.54x, and once 1.10x in a clean-clone CI run, were seen on loaded two-core runs), and they gave
    # more than one stream's rate
    assert b.max_open_streams == 4
    assert four["aggregate_tok_s"] > one["aggregate_tok_s"]
    assert four["itl_ms"]["samples"] == 4 * 11 and four["ttft_s"]["samples"] == 4
    assert r["server"]["engine"] == "vllm" and r["server"]["version"] == "0.11.0"
    assert r["server"]["max_model_len"] == 32768 and r["run"]["output_forced"] is True
    # the prompt is fitted to the server's own count (a word is a token, plus BOS, in the fake tokenizer)
    assert abs(r["run"]["context_tokens"] - 300) <= 2 and r["run"]["prompt_tokens_told"] is not None
    # vLLM's /metrics, differenced over each level: its own TTFT (the 50 ms it slept) and token counts
    m = one["server_metrics"]
    assert m["ttft_s"] == pytest.approx(0.05, abs=0.03) and m["generation_tokens"] == 12
    assert four["server_metrics"]["generation_tokens"] == 48
    # every timed request asked for a fixed length, and no two prompts share their opening words
    timed = [q for q in b.requests if q.get("stream") and q["max_tokens"] == 12]
    assert len(timed) == 5 and all(q["ignore_eos"] is True and q["min_tokens"] == 12 for q in timed)
    assert all(q["stream_options"] == {"include_usage": True} for q in timed)
    openings = [" ".join(q["prompt"].split()[:6]) for q in timed]
    assert len(set(openings)) == len(openings)


def test_each_run_draws_prompts_of_its_own(run_cli):
    """A server keeps earlier runs' caches (a real llama-server served a second run's prompts from its slots when
    both runs drew the same words): the prompts of two runs share no opening."""
    b = Behaviour()
    with FakeServer(b) as s:
        for _ in range(2):
            code, out, err = run_cli("measure", "--server", s.url, *BASE, "--json")
            assert code == 0, err
            b.requests.append({"run": json.loads(out)["run"]["prompt_seed"]})
    marks = [i for i, q in enumerate(b.requests) if "run" in q]
    runs = [b.requests[:marks[0]], b.requests[marks[0] + 1:marks[1]]]
    openings = [{" ".join(q["prompt"].split()[:6]) for q in r if q.get("stream")} for r in runs]
    assert openings[0] and openings[1] and not openings[0] & openings[1]


def test_plan_beside_the_measurement_is_plan_itself(run_cli):
    """predicted.* are plan's figures for the served model on --gpu at the run's mean cached length."""
    from llmsize.catalog.loader import Catalog
    from llmsize.estimate.expected import expect
    from llmsize.estimate.plan import PlanInputs, make_plan

    r = _json(run_cli, Behaviour(engine="vllm"), "--gpu", "rtx4090", "--concurrency", "1,2")
    cat = Catalog()
    prompt = r["run"]["context_tokens"]
    p = make_plan(cat.model("qwen3-8b"), cat.gpu("rtx4090"),
                  PlanInputs(context_tokens=prompt + 6, batch=2, prompt_tokens=prompt), search_fit=False)
    e = expect(p, {x.id: x for x in cat.runtimes.all()}, "vllm").expected
    pred = r["predicted"]
    assert pred["model"] == "qwen3-8b" and pred["gpu"] == "rtx4090" and pred["runtime"] == "vllm"
    assert pred["quant"] == "bf16" and pred["quant_from"] == "the model's release format"
    assert pred["ceiling_tok_s"] == pytest.approx(p.decode_ceiling_tok_s)
    assert pred["levels"]["2"]["expected_aggregate_tok_s"] == pytest.approx(e.aggregate_tok_s)
    two = r["concurrency"][1]
    # plan's aggregate is decode alone: it is held against streams x the median stream's decode rate
    assert two["decode_tok_s"] == pytest.approx(2 * two["tok_s_per_stream"]["median"])
    assert two["fraction_of_expected"] == pytest.approx(two["decode_tok_s"] / e.aggregate_tok_s)
    lo, hi = pred["levels"]["2"]["expected_aggregate_tok_s_low"], pred["levels"]["2"]["expected_aggregate_tok_s_high"]
    assert two["band"] == ("in band" if lo <= two["decode_tok_s"] <= hi else
                           "above band" if two["decode_tok_s"] > hi else "below band")
    assert two["inside_band"] == (two["band"] == "in band")
    assert pred["measured_fraction_of_ceiling"] == pytest.approx(r["decode"]["tok_s"] / p.decode_ceiling_tok_s)


def test_llama_server_props_timings_and_its_file_type(run_cli):
    r = _json(run_cli, Behaviour(engine="llamacpp", model="Qwen3-8B-Q4_K_M.gguf"), "--gpu", "rtx4090")
    assert r["server"]["engine"] == "llamacpp" and r["server"]["version"] == "b6500-abcdef0"
    assert r["server"]["llamacpp"]["total_slots"] == 4 and r["server"]["llamacpp"]["slots"] == 4
    assert r["predicted"]["quant"] == "gguf-q4_k_m" and r["predicted"]["runtime"] == "llamacpp"
    row = r["concurrency"][0]
    assert row["server_timings"]["decode_tok_s"]["median"] > 0
    assert row["server_metrics"]["decode_tok_s"] > 0 and row["server_metrics"]["generation_tokens"] == 12


def test_a_vulkan_llama_server_is_held_against_the_vulkan_figure(run_cli):
    r = _json(run_cli, Behaviour(engine="llamacpp", model="Qwen3-8B-Q4_K_M.gguf"), "--gpu", "rx7900xtx",
              "--backend", "vulkan")
    assert (r["predicted"]["runtime"], r["predicted"]["backend"]) == ("llamacpp", "vulkan")
    assert "Vulkan card(s)" in r["predicted"]["levels"]["1"]["basis"]
    native = _json(run_cli, Behaviour(engine="llamacpp", model="Qwen3-8B-Q4_K_M.gguf"), "--gpu", "rx7900xtx")
    assert native["predicted"]["backend"] == "rocm"
    assert native["predicted"]["levels"]["1"]["expected_tok_s"] != r["predicted"]["levels"]["1"]["expected_tok_s"]


def test_ollama_name_and_quantization_from_its_api(run_cli):
    r = _json(run_cli, Behaviour(engine="ollama", model="qwen3:8b"), "--gpu", "rtx4090")
    assert r["server"]["engine"] == "ollama" and r["server"]["version"] == "0.12.3"
    assert r["predicted"]["model"] == "qwen3-8b" and r["predicted"]["quant"] == "gguf-q4_k_m"
    assert r["predicted"]["quant_from"] == "Ollama's /api/show" and r["predicted"]["runtime"] == "llamacpp"


def test_report_without_a_card_says_how_to_get_plans_figures(run_cli):
    code, out, err, _ = _measure(run_cli, Behaviour(engine="plain", model="my-finetune"))
    assert code == 0, err
    assert "unknown engine" in out and "pass --gpu CARD" in out and "TTFT s" in out
    r = _json(run_cli, Behaviour(engine="plain", model="my-finetune"), "--gpu", "h100")
    assert r["predicted"]["ceiling_tok_s"] is None and "--plan-model" in r["predicted"]["reason"]
    r = _json(run_cli, Behaviour(engine="plain", model="my-finetune"), "--gpu", "h100", "--plan-model", "qwen3-8b",
              "--quant", "fp8", "--runtime", "sglang")
    assert r["predicted"]["quant"] == "fp8" and r["predicted"]["runtime"] == "sglang"
    assert r["predicted"]["ceiling_tok_s"] > 0


def test_a_server_that_ignores_ignore_eos_is_said_so(run_cli):
    r = _json(run_cli, Behaviour(mode="eos", after=5))
    assert r["run"]["output_forced"] is False
    assert r["concurrency"][0]["output_tokens"] == 5 and r["concurrency"][0]["short_streams"] == 1
    assert any("could not be forced" in n for n in r["notes"])


def test_without_usage_the_tokens_are_counted_in_chunks(run_cli):
    r = _json(run_cli, Behaviour(mode="no_usage"))
    assert r["run"]["prompt_tokens_told"] is None and r["run"]["output_forced"] is False
    assert r["concurrency"][0]["output_tokens"] == 12
    assert any("reports no token usage" in n for n in r["notes"])


def test_several_tokens_a_chunk_is_flagged(run_cli):
    r = _json(run_cli, Behaviour(mode="two_per_chunk"))
    assert r["concurrency"][0]["tokens_per_chunk"] == pytest.approx(2.0)
    assert any("several tokens a chunk" in n for n in r["notes"])
    assert not any("arrived together" in n for n in r["notes"])  # two tokens every 10 ms: not bunched


def test_a_buffered_stream_is_flagged(run_cli):
    """Every token's event in one write at the end (a buffering proxy): each is its own event, so not `several a
    chunk`, but their gaps are microseconds and the per-stream rate came out in the hundreds of thousands of tok/s
    with no word (a hostile-input review, 2026-12-07)."""
    r = _json(run_cli, Behaviour(mode="bunched"))
    assert r["concurrency"][0]["itl_ms"]["median"] < 0.2
    assert any("arrived together" in n and "not the engine's" in n for n in r["notes"])


@pytest.mark.parametrize("mode, args, words", [
    ("http500", (), "HTTP 500: CUDA out of memory"),
    # 1 s: the non-streamed requests before it must answer within twice that on a loaded machine
    ("stall", ("--timeout", "1"), "stalled, nothing for 1 s after 3 chunk(s)"),
    ("malformed", (), "a chunk is not JSON"),
    ("close", (), "the connection closed after 3 chunk(s)"),
    ("not_stream", (), "the answer is not a stream"),
    ("redirect", (), "HTTP 302"),
    ("models500", (), "GET /v1/models answered HTTP 500"),
])
def test_a_misbehaving_server_is_one_line_and_no_file(run_cli, tmp_path, mode, args, words):
    save = tmp_path / "run.json"
    code, out, err, _ = _measure(run_cli, Behaviour(mode=mode), *args, "--save", str(save))
    assert_one_line_error(code, err)
    assert words in err and "concurrency 1, stream 1" in err or mode in ("http500", "redirect", "models500") \
        and words in err
    # a redirect is not followed, and the advice says so rather than to lower the load
    assert mode != "redirect" or "redirects are not followed" in err and "lower --context" not in err
    # the list of models failing before any request of ours: no load to lower
    assert mode != "models500" or "finished starting" in err and "lower --context" not in err
    assert not save.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("mode, args, words", [
    ("huge_usage", (), "usage says 1000000000000000000000000000000 completion_tokens"),
    ("endless", (), "streamed more than the 8 tokens asked (max_tokens)"),  # the warm-up's 8
    ("comments", ("--timeout", "1"), "stalled, no data event for 1 s after 3 chunk(s)"),
])
def test_a_server_that_lies_or_floods_is_stopped(run_cli, tmp_path, mode, args, words):
    """A hostile-input pass found these: usage counts far from what streamed, a stream past max_tokens, keep-alive
    comments forever (the SSE decoder swallows them: --timeout counts from the last data event)."""
    save = tmp_path / "run.json"
    code, out, err, _ = _measure(run_cli, Behaviour(mode=mode), *args, "--save", str(save))
    assert_one_line_error(code, err)
    assert words in err and not save.exists()


def test_a_server_that_undercounts_the_prompt_is_stopped_not_fed(run_cli):
    """usage saying every prompt is 1 token sized the next prompt at words x target (a 100 MB request at the default
    --context, memory exhausted at 262,144): a count far below the words sent is the server's accounting."""
    b = Behaviour(mode="tiny_usage")
    code, out, err, _ = _measure(run_cli, b)
    assert_one_line_error(code, err)
    assert "usage says a prompt of 300 words is 1 tokens" in err
    assert len(b.requests) == 1 and len(b.requests[0]["prompt"].split()) < 400  # one try, never a grown prompt


def test_probes_that_never_answer_wait_seconds_not_minutes(run_cli, monkeypatch):
    """The engine probes and /metrics are optional: each waits SIDE_TIMEOUT_S, not --timeout (six probes at the
    default 120 s held a run ~12 minutes before it started)."""
    import time

    from llmsize.measure import server

    monkeypatch.setattr(server, "SIDE_TIMEOUT_S", 0.3)
    t0 = time.perf_counter()
    r = _json(run_cli, Behaviour(mode="stall_probes", engine="plain"), "--timeout", "30", "--concurrency", "1")
    # each probe the server holds 6 s: waited out (--timeout 30) they would take 30 s or more
    assert r["decode"]["tok_s"] and time.perf_counter() - t0 < 15


def test_an_api_key_a_header_cannot_carry_is_refused_unshown(run_cli):
    code, out, err = run_cli("measure", "--server", "http://127.0.0.1:9", "--api-key", "sk-SECRET\r")
    assert_one_line_error(code, err)
    assert "SECRET" not in err and "line end" in err


def test_a_stream_beyond_the_ceiling_is_said_to_be_no_measurement(run_cli):
    """A server (or a proxy) that buffers its tokens shows a decode rate no card reaches: the report says so."""
    r = _json(run_cli, Behaviour(itl_s=0.0, ttft_s=0.3), "--gpu", "h100", "--concurrency", "1")
    assert r["concurrency"][0]["fraction_of_ceiling"] > 1.05
    assert any("beats the bandwidth ceiling" in n for n in r["notes"])
    r = _json(run_cli, Behaviour(), "--gpu", "h100", "--concurrency", "1")  # 100 tok/s: below it, no note
    assert not any("beats the bandwidth ceiling" in n for n in r["notes"])


def test_odd_but_honest_streams_are_measured(run_cli):
    # a charset the server does not use: the stream is read as UTF-8, as the protocol has it
    r = _json(run_cli, Behaviour(mode="rot13"))
    assert r["concurrency"][0]["output_tokens"] == 12
    # an empty chunk sent at once is no token: TTFT runs to the first text (the 0.2 s the server waits)
    r = _json(run_cli, Behaviour(mode="empty_first", ttft_s=0.2))
    assert r["prefill"]["ttft_s"] >= 0.2


def test_server_text_is_shown_not_interpreted(run_cli, tmp_path):
    """A model id of rich markup and a URL with a password: the report prints the id as it is, and neither the
    report nor the saved file holds the password."""
    b = Behaviour(engine="plain", model="[bold red]m[/]\x1b[2J")
    with FakeServer(b) as s:
        url = s.url.replace("http://", "http://user:secret@")
        save = tmp_path / "run.json"
        code, out, err = run_cli("measure", "--server", url, *BASE, "--save", str(save))
    assert code == 0, err
    assert "[bold red]m[/]\\x1b[2J" in out and "\x1b" not in out and "secret" not in out
    assert "secret" not in save.read_text() and json.loads(save.read_text())["server"]["url"] == s.url


@pytest.mark.parametrize("url", ["http://127.0.0.1:abc", "http://[::1:80", "http://127.0.0.1:8000?x", "http://xn--:80",
                                 "http://256.1.1.1:80"])
def test_urls_that_do_not_parse_are_one_line(run_cli, url):
    code, out, err = run_cli("measure", "--server", url, "--timeout", "1")
    assert_one_line_error(code, err)


def test_names_checked_before_any_request(run_cli):
    b = Behaviour()
    code, out, err, _ = _measure(run_cli, b, "--gpu", "rtx9999")
    assert_one_line_error(code, err)
    assert "rtx9999" in err and b.requests == []
    code, out, err, _ = _measure(run_cli, b, "--quant", "q4")
    assert_one_line_error(code, err)
    assert "`q4`" in err and b.requests == []


@pytest.mark.parametrize("args, words", [
    (("--concurrency", "0"), "`0` is not a number of streams from 1 to 1024"),
    (("--concurrency", "1,x"), "`x` is not a number of streams"),
    (("--tokens", "1"), "at least 2 output tokens"),
    (("--gemv", "words"), "--gemv is for the GPU loop, not --server"),
    (("--batch", "4"), "--batch is for the GPU loop"),
    (("--model", "other"), "--model `other` is not served"),
])
def test_bad_options_with_a_server(run_cli, args, words):
    code, out, err, _ = _measure(run_cli, Behaviour(), *args)
    assert_one_line_error(code, err)
    assert words in err


@pytest.mark.parametrize("args, words", [
    (("--concurrency", "4"), "--concurrency needs --server"),
    (("--gpu", "h100"), "--gpu needs --server"),
    (("--server", "ftp://example"), "is not an http(s) URL"),
    (("--server", "http://127.0.0.1:9/v1"), "cannot connect"),
])
def test_bad_server_options(run_cli, args, words):
    code, out, err = run_cli("measure", *args)
    assert_one_line_error(code, err)
    assert words in err


def test_several_models_need_model(run_cli):
    b = Behaviour(models=["a", "b"], model="a")
    code, out, err, _ = _measure(run_cli, b)
    assert_one_line_error(code, err)
    assert "serves 2 models (`a`, `b`)" in err and "--model" in err
    r = _json(run_cli, b, "--model", "b")
    assert r["server"]["model"] == "b"


def test_a_saved_server_run_calibrates_plan(run_cli, tmp_path):
    save = tmp_path / "run.json"
    code, out, err, _ = _measure(run_cli, Behaviour(engine="llamacpp", model="Qwen3-8B-Q4_K_M.gguf"),
                                 "--gpu", "rtx4090", "--save", str(save))
    assert code == 0, err
    saved = json.loads(save.read_text())
    for key in ("ttft_s",):
        assert saved["prefill"][key] > 0
    for key in ("tok_s", "ms_per_token_median", "ms_per_token_p10", "ms_per_token_p90"):
        assert saved["decode"][key] > 0
    assert saved["predicted"]["ceiling_tok_s"] > 0 and saved["server"]["url"].startswith("http://127.0.0.1:")
    assert "api_key" not in saved["options"]
    code, out, err = run_cli("plan", "qwen3-8b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--calibrate",
                             str(save), "--json")
    assert code == 0, err
    e = json.loads(out)["expected"]
    assert e["runtime"] == "llamacpp" and "llmsize measure --server" in e["basis"]


def test_without_the_server_extra_one_line_names_it():
    r = cli_without(["httpx"], ["measure", "--server", "http://127.0.0.1:9"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "pip install '.[server]' in the llmsize checkout" in r.stderr


def test_without_the_server_extra_the_options_are_checked_first():
    """A bad option is the user's to fix either way: it is named before the missing extra (the README's first test
    command runs without the extras)."""
    r = cli_without(["httpx"], ["measure", "--server", "http://127.0.0.1:9", "--gpu", "rtx4090", "--backend", "metal"])
    assert r.returncode == 2 and "own backend is CUDA (NVIDIA), not Metal" in r.stderr


def test_api_key_is_sent_as_a_bearer_token(run_cli, monkeypatch):
    seen = []
    b = Behaviour()
    with FakeServer(b) as s:
        import http.server
        orig = http.server.BaseHTTPRequestHandler.parse_request

        def spy(self):
            ok = orig(self)
            seen.append(self.headers.get("Authorization"))
            return ok

        monkeypatch.setattr(http.server.BaseHTTPRequestHandler, "parse_request", spy)
        code, out, err = run_cli("measure", "--server", s.url, *BASE, "--api-key", "sk-test", "--json")
    assert code == 0, err
    assert seen and set(seen) == {"Bearer sk-test"}
    assert "sk-test" not in out


# ------------------------------------------------------------------------------------------ pure parts

def test_levels_parse_sorted_once_each():
    from llmsize.options import levels

    assert levels("16, 1,4,4") == (1, 4, 16)
    for bad in ("", "0", "1025", "-1", "1.5", "a"):
        with pytest.raises(ValueError):
            levels(bad)


def test_level_stats_by_hand():
    from llmsize.measure.server import Stream
    from llmsize.measure.server_run import level_stats

    # two streams sent at 0.0 and 0.1 s; first tokens at 0.5 and 0.7 (TTFT 0.5, 0.6); tokens 0.1 s apart after
    a = Stream(sent_s=0.0, chunk_s=[0.5, 0.6, 0.7, 0.8], tokens=4)
    b = Stream(sent_s=0.1, chunk_s=[0.7, 0.8, 0.9], tokens=3)
    row = level_stats([a, b], 2, 0.0, 1.0, tokens=4)
    assert row["output_tokens"] == 7 and row["aggregate_tok_s"] == pytest.approx(7.0)  # 7 tokens in 1 s
    assert row["ttft_s"]["median"] == pytest.approx(0.55) and row["ttft_s"]["p10"] == pytest.approx(0.51)
    assert row["itl_ms"]["median"] == pytest.approx(100) and row["itl_ms"]["samples"] == 5
    assert row["tok_s_per_stream"]["median"] == pytest.approx(10)  # (4 - 1) / 0.3 s and (3 - 1) / 0.2 s
    assert row["short_streams"] == 1 and row["tokens_per_chunk"] == pytest.approx(1.0)


def test_metric_deltas_by_hand():
    from llmsize.measure.server_run import metric_deltas

    before = {"vllm:time_to_first_token_seconds_sum": 1.0, "vllm:time_to_first_token_seconds_count": 4,
              "vllm:generation_tokens_total": 100}
    after = {"vllm:time_to_first_token_seconds_sum": 2.2, "vllm:time_to_first_token_seconds_count": 7,
             "vllm:generation_tokens_total": 400}
    d = metric_deltas(before, after)
    assert d["ttft_s"] == pytest.approx(0.4) and d["generation_tokens"] == 300  # 1.2 s over 3 requests
    assert metric_deltas(None, after) is None and metric_deltas(before, {}) is None


def test_served_names_to_catalog_models_and_formats():
    from llmsize.catalog.loader import Catalog
    from llmsize.measure.server_run import catalog_model, gguf_format

    cat = Catalog()
    assert catalog_model(cat, ["Qwen/Qwen3-8B"]).id == "qwen3-8b"
    assert catalog_model(cat, ["/models/Qwen3-8B-Q4_K_M.gguf"]).id == "qwen3-8b"
    assert catalog_model(cat, ["qwen3:8b"]).id == "qwen3-8b"
    assert catalog_model(cat, ["nothing-like-it"]) is None
    assert gguf_format(["/m/Qwen3-8B-Q4_K_M.gguf"]) == "gguf-q4_k_m"
    assert gguf_format(["Qwen/Qwen3-8B"]) is None
    # the i-quants and Q2_K_S by their file names, and the type after the colon of a Hugging Face tag as Ollama
    # pulls one (hf.co/ORG/REPO:TYPE)
    assert gguf_format(["Meta-Llama-3.1-70B-Instruct-IQ2_XS.gguf"]) == "gguf-iq2_xs"
    assert gguf_format(["x-IQ3_M.gguf"]) == "gguf-iq3_m" and gguf_format(["x-Q2_K_S.gguf"]) == "gguf-q2_k_s"
    assert gguf_format(["hf.co/bartowski/Qwen_Qwen3-8B-GGUF:IQ4_XS"]) == "gguf-iq4_xs"
    assert gguf_format(["qwen3:8b"]) is None


def test_url_check():
    from llmsize.errors import LlmsizeError
    from llmsize.measure.server import check_url

    assert check_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000"
    for bad in ("127.0.0.1:8000", "file:///etc/passwd", "http://", "http://h/?q=1", "http://127.0.0.1:0"):
        with pytest.raises(LlmsizeError):
            check_url(bad)


def test_a_servers_own_timings_are_kept_only_where_they_are_rates():
    """llama-server's final-chunk timings, printed as given: -5 tok/s and 1e308 were shown as figures."""
    from types import SimpleNamespace

    from llmsize.measure.server_run import _timings

    streams = [SimpleNamespace(timings={"prompt_per_second": v, "predicted_per_second": w})
               for v, w in ((-5.0, 1e308), (800.0, 40.0), (1000.0, 50.0))]
    t = _timings(streams)
    assert t["prompt_tok_s"]["median"] == 900.0 and t["decode_tok_s"]["median"] == 45.0
    assert _timings([SimpleNamespace(timings={"prompt_per_second": -1.0, "predicted_per_second": 0})]) is None


@pytest.mark.parametrize("engine, args, told", [
    ("vllm", ("--context", "32700", "--tokens", "100"), "max_model_len (GET /v1/models) of 32,768 tokens"),
    ("llamacpp", ("--context", "8100", "--tokens", "100"), "context a slot (n_ctx, GET /props) of 8,192 tokens")])
def test_a_prompt_past_the_servers_context_is_refused_before_any_timed_request(run_cli, tmp_path, engine, args, told):
    """The fake vLLM lists max_model_len 32768 in /v1/models, the fake llama-server n_ctx 8192 a slot in /props: a
    prompt and answer longer than that would be refused by the server, so the run stops first, sends no completion
    and writes no --save file; 32,668 + 100 fits and runs."""
    out_file = tmp_path / "run.json"
    code, out, err, s = _measure(run_cli, Behaviour(engine=engine), *args, "--save", str(out_file))
    assert_one_line_error(code, err)
    assert f"--context {int(args[1]):,} + --tokens 100 is past the server's {told}" in err
    assert f"Lower --context to {(32768 if engine == 'vllm' else 8192) - 100:,} or less" in err
    assert not s.b.requests and not out_file.exists()
    code, out, err, _ = _measure(run_cli, Behaviour(engine="vllm"), "--context", "32668", "--tokens", "100",
                                 "--concurrency", "1", "--rounds", "1")
    assert code == 0, err


def test_the_text_report_says_where_each_level_falls_against_its_band(run_cli):
    """The README says the report shows whether each measurement falls in its band; the table gave a percentage
    alone (the JSON had inside_band). Each level's row now says in, above or below, as the JSON's `band`."""
    code, out, err, _ = _measure(run_cli, Behaviour(engine="vllm"), "--gpu", "rtx4090", "--concurrency", "1,2")
    assert code == 0, err
    r = _json(run_cli, Behaviour(engine="vllm"), "--gpu", "rtx4090", "--concurrency", "1,2")
    assert all(row["band"] in ("in band", "above band", "below band") for row in r["concurrency"])
    table = out[out.index("Measured"):out.index("Beside plan")]
    rows = [ln.split() for ln in table.splitlines() if ln.split() and ln.split()[0] in ("1", "2")]
    assert [row[-1] for row in rows] == [x["band"].removesuffix(" band") for x in r["concurrency"]], table


def test_streams_that_miscount_their_prompt_are_stopped(run_cli, tmp_path):
    """The one-token completion counts the prompt right, then each stream's usage says 10^8 tokens: the report had
    printed a 100,000,000-token prompt and plan's TTFT for it (4 million seconds). Refused in one line, no file."""
    out_file = tmp_path / "run.json"
    code, out, err, _ = _measure(run_cli, Behaviour(engine="vllm", mode="stream_usage_absurd"), "--gpu", "h100",
                                 "--concurrency", "1", "--rounds", "1", "--save", str(out_file))
    assert_one_line_error(code, err)
    assert "a streamed completion's usage says its prompt of" in err and "was 100,000,000 tokens" in err
    assert not out_file.exists()


def test_metrics_that_go_backwards_are_left_out_and_said(run_cli):
    """A server whose /metrics counters start again (a restart) between scrapes: the differences would be negative
    TTFTs and token counts; they are left out, and a note says so."""
    r = _json(run_cli, Behaviour(engine="vllm", mode="metrics_reset"), "--concurrency", "1,2", "--rounds", "1")
    for row in r["concurrency"]:
        m = row["server_metrics"] or {}
        assert all(v >= 0 for v in m.values()), m
    assert any("/metrics went backwards" in n for n in r["notes"])
    from llmsize.measure.server_run import metric_deltas, metrics_backwards

    before = {"vllm:time_to_first_token_seconds_sum": 5.0, "vllm:time_to_first_token_seconds_count": 10,
              "vllm:generation_tokens_total": 100}
    after = {"vllm:time_to_first_token_seconds_sum": 1.0, "vllm:time_to_first_token_seconds_count": 2,
             "vllm:generation_tokens_total": 160}
    assert metrics_backwards(before, after) == ["vllm:time_to_first_token_seconds_count",
                                                "vllm:time_to_first_token_seconds_sum"]
    assert metric_deltas(before, after) == {"generation_tokens": 60}


@pytest.mark.parametrize("limit, args, hint", [
    (4, ("--context", "32", "--tokens", "8"), "Start the server with a longer context"),
    (12, ("--context", "32", "--tokens", "8"), "Lower --tokens to 6 or less, and --context to 6"),
    (100, ("--context", "300", "--tokens", "12"), "Lower --context to 88 or less")])
def test_a_server_context_too_small_gets_advice_that_can_work(run_cli, limit, args, hint):
    """max_model_len 1 had advised `Lower --tokens below 1`, which --tokens (2 at least) cannot take."""
    code, out, err, s = _measure(run_cli, Behaviour(engine="vllm", max_model_len=limit), *args)
    assert_one_line_error(code, err)
    assert hint in err and not s.b.requests


def test_no_proxy_from_the_environment_carries_the_requests(run_cli, monkeypatch):
    """HTTP_PROXY / ALL_PROXY in the environment had carried every request, the API key with it, through the proxy
    (even to a loopback server), and its errors were blamed on the server: measure talks to the URL given only."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen = []

    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            seen.append(self.path)
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
            monkeypatch.setenv(var, f"http://127.0.0.1:{proxy.server_address[1]}")
        code, out, err, _ = _measure(run_cli, Behaviour(engine="vllm"), "--concurrency", "1", "--rounds", "1",
                                     "--api-key", "SECRET")
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert code == 0, err
    assert seen == []


def test_a_certificate_bundle_from_the_environment_that_cannot_be_read_is_one_line(run_cli, monkeypatch, tmp_path):
    """An https server is checked against SSL_CERT_FILE where the environment names one (a private authority), as
    httpx would; a bundle that does not exist is said so, naming the variable."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "nope.pem"))
    code, out, err = run_cli("measure", "--server", "https://127.0.0.1:9", "--timeout", "2")
    assert_one_line_error(code, err)
    assert "SSL_CERT_FILE" in err and "nope.pem" in err
