"""Request length distributions (llmsize/estimate/lengths.py) and how fleet sizes with them."""

from __future__ import annotations

import json
import math

import pytest

from llmsize.errors import LlmsizeError
from llmsize.estimate.fleet import Workload
from llmsize.estimate.lengths import POINTS, parse_lengths


@pytest.fixture(scope="module")
def runtimes(catalog):
    return {r.id: r for r in catalog.runtimes.all()}

from conftest import assert_one_line_error


def test_a_fixed_length_has_no_spread():
    d = parse_lengths("3000", "--isl")
    assert d.fixed and d.mean == 3000 and d.p95 == d.p99 == 3000 and d.variance == 0


def test_lognormal_from_median_and_p95():
    # sigma = ln(12000 / 3000) / 1.6449 = 0.8428; mean = 3000 e^(sigma^2 / 2) = 3000 x 1.4267 = 4,280 (the 16
    # midpoint quantiles under-weight the far tail a little: within 5%); p99 = 3000 e^(2.3263 sigma) = 21,317
    d = parse_lengths("3000:p95=12000", "--isl")
    assert len(d.points) == POINTS and list(d.points) == sorted(d.points)
    assert d.p95 == pytest.approx(12000, abs=1) and d.p99 == pytest.approx(21317, rel=1e-3)
    assert d.points[POINTS // 2 - 1] < 3000 < d.points[POINTS // 2]  # the median between the middle points
    assert d.mean == pytest.approx(4280, rel=0.05)


def test_csv_lengths_by_column_or_one_a_line(tmp_path):
    f = tmp_path / "lens.csv"
    f.write_text("isl,osl\n100,20\n3000,400\n9000,800\n")
    i, o = parse_lengths(str(f), "--isl"), parse_lengths(str(f), "--osl")
    # each point the sample's mean over a sixteenth of its probability: the sample's mean kept (4,033.3 and 406.7,
    # within the points' rounding), its least and greatest lengths at the ends
    assert abs(i.mean - 12100 / 3) < 0.5 and abs(o.mean - 1220 / 3) < 0.5 and i.p99 == 9000
    assert (min(i.points), max(i.points), min(o.points), max(o.points)) == (100, 9000, 20, 800)
    h = tmp_path / "tail.csv"  # 995 of 2,000 tokens and 5 of 100,000: the p99 is 2,000, the tail taken as it
    h.write_text("\n".join(["2000"] * 995 + ["100000"] * 5) + "\n")
    t = parse_lengths(str(h), "--isl")
    assert t.p99 == 2000 and max(t.points) == 2000
    g = tmp_path / "plain.csv"
    g.write_text("\n".join(["500"] * 9 + ["4000"]) + "\n")
    d = parse_lengths(str(g), "--osl")
    assert d.p95 == 4000 and d.points[0] == 500


def test_a_lognormals_points_keep_its_mean_up_to_its_p99():
    """Median 3,000, p95 12,000: sigma = ln 4 / 1.6449 = 0.8428, p99 = 3,000 e^(2.3263 sigma) = 21,312, and the
    mean of the lengths with those past the p99 taken as the p99 (the longest request a replica takes),
    e^(mu + sigma^2 / 2) Phi(2.3263 - sigma) + 0.01 p99 = 4,279.2 x 0.98585 + 213.1 = 4,197.2; the sixteen slice
    means average to it (the slices' midpoint quantiles gave 4,124), and none exceeds the p99, even for a tail of
    p95 / median = 1,000 (its last slice's uncapped mean, 10.8 million tokens, did)."""
    d = parse_lengths("3000:p95=12000", "--isl")
    assert abs(d.mean - 4197.2) < 0.5 and d.p95 == 12000 and d.p99 == 21312 and sorted(d.points) == list(d.points)
    wild = parse_lengths("100:p95=100000", "--isl")
    assert max(wild.points) <= wild.p99


@pytest.mark.parametrize("text,needle", [("abc", "is not a length"), ("0", "out of range"),
                                         ("3000:p95=100", "below the median"), ("nope.csv", "not found")])
def test_bad_lengths_are_refused(text, needle):
    with pytest.raises(LlmsizeError) as e:
        parse_lengths(text, "--isl")
    assert needle in e.value.message


def test_a_spread_holds_fewer_users_than_its_mean(catalog, runtimes):
    """Llama 3.1 8B on an H100, prompts of median 3,000 (p95 12,000), answers 500: a replica's batch is the
    largest b with b E[B] + 1.645 sqrt(b) sd[B] within the pool, below the mean request's count; checked here
    from the pool and the per-request caches by hand (sqrt(b) solves E s^2 + 1.645 sd s = pool)."""
    from llmsize.estimate.replica import users_held as _users_held
    from llmsize.estimate.kv import kv_bytes
    from llmsize.estimate.plan import PlanInputs, make_plan

    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("h100-sxm")
    d = parse_lengths("3000:p95=12000", "--isl")
    w = Workload(round(d.mean), 500, users=1000, isl_lengths=d)
    p = make_plan(m, g, PlanInputs(context_tokens=round(d.mean) + 250, prompt_tokens=round(d.mean)),
                  search_fit=False)
    held = _users_held(p, w, "vllm")
    per = [kv_bytes(m, i + 250, "bf16").bytes_per_sequence for i in d.points]  # answers fixed: 500 / 2 held
    mean, sd = sum(per) / len(per), math.sqrt(sum((x - sum(per) / len(per)) ** 2 for x in per) / len(per))
    s = (-1.645 * sd + math.sqrt((1.645 * sd) ** 2 + 4 * mean * p.budget.kv_budget_bytes)) / (2 * mean)
    assert held == int(s * s) and held < p.max_sequences
    assert held * mean + 1.6449 * math.sqrt(held) * sd <= p.budget.kv_budget_bytes


def test_fleet_with_a_distribution_needs_more_cards_and_reports_the_tail(run_cli):
    base = ("fleet", "llama-3.1-70b", "--osl", "500", "--users", "400", "--ttft", "2s", "--tok-s-per-user", "30",
            "--gpus", "b200", "--json")
    code, out, err = run_cli(*base, "--isl", "3000")
    fixed = json.loads(out)
    code, out, err = run_cli(*base, "--isl", "3000:p95=12000")
    assert code == 0, err
    spread = json.loads(out)
    wl = spread["workload"]["isl_lengths"]
    assert wl["p95"] == 12000 and wl["described"].startswith("lognormal")
    assert spread["workload"]["longest_tokens"] == wl["p99"] + 500
    r, f = spread["rows"][0], fixed["rows"][0]
    assert r["cards_total"] > f["cards_total"]
    assert r["ttft_p95_s"] > r["ttft_s"] and f["ttft_p95_s"] is None
    code, out, err = run_cli(*base[:-1], "--isl", "3000:p95=12000", "--emit", "vllm")
    assert code == 0 and f"--max-model-len {wl['p99'] + 500}" in out


@pytest.mark.parametrize("isl,needle", [("3000:p95=1", "below the median"), ("x.csv", "not found"),
                                        ("12:34", "is not a length")])
def test_fleet_refuses_bad_lengths_in_one_line(run_cli, isl, needle):
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--isl", isl, "--users", "4")
    assert_one_line_error(code, err)
    assert needle in err and out == ""


def test_spreadsheet_csvs_and_spelling_are_accepted(tmp_path):
    """A CSV saved by a spreadsheet starts with a byte-order mark and may hold blank lines; P95 in capitals is the
    same percentile; a bad cell is reported at its own line number, blank lines counted."""
    f = tmp_path / "lens.csv"
    f.write_bytes("\ufeffisl,osl\n100,20\n\n3000,400\n9000,800\n".encode())
    plain = tmp_path / "plain.csv"
    plain.write_text("isl,osl\n100,20\n3000,400\n9000,800\n")
    got, want = parse_lengths(str(f), "--isl"), parse_lengths(str(plain), "--isl")
    assert (got.points, got.p95, got.p99) == (want.points, want.p95, want.p99)
    assert parse_lengths("3000:P95=9000", "--isl").p95 == parse_lengths("3000:p95=9000", "--isl").p95
    g = tmp_path / "bad.csv"
    g.write_text("100\n\nabc\n")
    with pytest.raises(LlmsizeError) as e:
        parse_lengths(str(g), "--isl")
    assert "line 3" in e.value.message
    h = tmp_path / "decimal.csv"  # a number on the first line is a bad length there, not a header
    h.write_text("100.5\n200\n")
    with pytest.raises(LlmsizeError) as e:
        parse_lengths(str(h), "--isl")
    assert "line 1: `100.5` is not a token count" in e.value.message


def test_csv_line_ends_of_every_system_and_malformed_quotes(tmp_path):
    """Lines ending in \r\n (Windows) or a lone \r (classic Mac OS, some exports) read as \n lines do (a lone \r
    ended in the csv module's traceback, found by the fuzz test on 2026-12-07); a quote left open is one error
    naming the file, not a length read from the text after it."""
    want = parse_lengths(str(_write(tmp_path / "unix.csv", b"isl,osl\n100,20\n3000,400\n9000,800\n")), "--isl")
    for name, data in (("dos.csv", b"isl,osl\r\n100,20\r\n3000,400\r\n9000,800\r\n"),
                       ("mac.csv", b"isl,osl\r100,20\r3000,400\r9000,800\r"),
                       ("quoted.csv", b'"isl","osl"\n"100","20"\n"3000","400"\n"9000","800"\n')):
        got = parse_lengths(str(_write(tmp_path / name, data)), "--isl")
        assert (got.points, got.p95, got.p99) == (want.points, want.p95, want.p99), name
    bad = tmp_path / "bad\rline.csv"  # (a name with a control character is printed escaped)
    with pytest.raises(LlmsizeError) as e:
        parse_lengths(str(_write(bad, b'300\n"12\n')), "--isl")
    assert "not a CSV file (unexpected end of data)" in e.value.message and "\r" not in e.value.message


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("args,needle", [
    (("--isl", "1:p95=16777216"), "exceeds Llama 3.1 8B's context"),
    (("--kv-dtype", "foo"), "Unknown KV-cache dtype `foo`"),
    (("--tok-s-per-user", "1e-9"), "TPOT target"),
    (("--spec", "mtp=1,accept=0.8"), "no multi-token-prediction module"),
    (("--spec", "draft=llama-3.1-8b,k=4,accept=0.7"), "the target model itself"),
    (("--spec", "draft=qwen3-0.6b,k=4,accept=0.7"), "share the target's tokenizer"),
    (("--spec", ""), "--spec is empty"),
    (("--tpot", "33"), "`33` has no unit: give 33ms or 33s"),
    (("--ttft", "0"), "`0` is no target: give a duration above 0"),
    (("--tpot", "0ms"), "is not a duration such as 2s or 33ms (more than 0"),
    (("--emit", "vllm", "--json"), "does not combine"),
    (("--pareto", "--json"), "table view"),
    (("--isl", ""), "--isl is empty"),
    (("--isl", "3000:p99=9000"), "only the 95th percentile"),
])
def test_fleet_refuses_what_cannot_be_served_in_one_line(run_cli, args, needle):
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "4", "--gpus", "h100", *args)
    assert_one_line_error(code, err)
    assert needle in err and out == ""


def test_fleet_reads_a_model_folder_and_stays_fast_at_huge_loads(run_cli, tmp_path):
    """A folder with config.json is planned like `plan` plans it (not the catalog entry of the same name); 10^8
    users or 10^9 requests/s size in well under a second (the prefill queue's Erlang C switches to the
    Halfin-Whitt limit past 500 servers), and 10^9 requests/s as 10^6 do, a thousand times the replicas: the
    search for the workers whose wait for a slot is within the target had stepped one worker at a time and given up
    after 10,000 (both rows then waited: 0.31 s a token decoded, 398 s to the aggregated row's first token, beside
    0.030 s and 0.36 s at 10^6/s); a tiny rate batches one request, not the most the targets allow."""
    import time

    from pathlib import Path

    import shutil

    src = Path(__file__).resolve().parent.parent / "examples" / "Qwen3-8B" / "config.json"
    folder = tmp_path / "Qwen3-8B"
    folder.mkdir()
    cfg = json.loads(src.read_text())
    cfg["num_hidden_layers"] *= 2  # the folder's own model: twice the layers of the catalog's Qwen3-8B
    (folder / "config.json").write_text(json.dumps(cfg))
    rows = {}
    for name in (str(folder), "qwen3-8b"):
        code, out, err = run_cli("fleet", name, "--users", "4", "--gpus", "h100", "--json")
        assert code == 0, err
        rows[name] = json.loads(out)["rows"][0]
    assert rows[str(folder)]["tpot_s"] > 1.5 * rows["qwen3-8b"]["tpot_s"]
    t = time.perf_counter()
    for load in (("--users", "100000000"), ("--rate", "1000000000")):
        code, out, err = run_cli("fleet", "llama-3.1-8b", *load, "--gpus", "h100", "--json")
        assert code == 0, err
    assert time.perf_counter() - t < 20  # was minutes; a loose bound against a loop coming back
    huge = json.loads(out)["rows"][0]
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--rate", "1000000", "--gpus", "h100", "--json")
    small = json.loads(out)["rows"][0]
    for big, less in ((huge, small), (huge["other"], small["other"])):
        assert big["mode"] == less["mode"]
        assert big["tpot_s"] == pytest.approx(less["tpot_s"], rel=0.01)
        assert big["ttft_s"] == pytest.approx(less["ttft_s"], rel=0.01)
        assert big["replicas"] / 1e9 == pytest.approx(less["replicas"] / 1e6, rel=0.01)
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--rate", "1e-9", "--gpus", "h100", "--json")
    row = json.loads(out)["rows"][0]
    assert row["batch_per_replica"] == 1 and row["cards_total"] == 1


def test_a_csv_whose_columns_are_unnamed_or_named_twice_is_refused(tmp_path):
    """`3000,500` a line without a header: the prompt's and the answer's lengths, or two prompts? --isl would read the
    first column and --osl too (the answers taken as prompts); a header `isl,isl` likewise picked one silently. Both
    are refused; a trailing empty cell is not a second value, and one length is `1 length`."""
    for name, data, needle in (("two.csv", b"3000,500\n4000,600\n", "several values and no header"),
                               ("dup.csv", b"isl,isl\n3000,500\n", "names `isl` 2 times")):
        with pytest.raises(LlmsizeError) as e:
            parse_lengths(str(_write(tmp_path / name, data)), "--isl")
        assert needle in e.value.message
    assert parse_lengths(str(_write(tmp_path / "trail.csv", b"3000,\n4000\n")), "--isl").points[0] == 3000
    assert parse_lengths(str(_write(tmp_path / "one.csv", b"3000\n")), "--isl").described == "1 length from one.csv"
