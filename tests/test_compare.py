"""`llmsize compare`: ranking, multi-card rows, prices, and each output format parsing back."""

import csv
import io
import json
from pathlib import Path

import pytest

from llmsize.estimate.compare import compare, sort_rows
from llmsize.estimate.plan import PlanInputs, make_plan

ROOT = Path(__file__).resolve().parent.parent


def test_rows_agree_with_plan(catalog):
    m = catalog.model("gemma-4-12b")
    g = catalog.gpu("rtx5060ti")
    row = compare(m, [g], PlanInputs(), users=4)[0]
    p = make_plan(m, g, PlanInputs(batch=4))
    v = row.values()
    assert v["cards"] == 1 and v["fits"] is True
    assert v["ceiling_tok_s"] == pytest.approx(p.decode_ceiling_tok_s)
    assert v["aggregate_tok_s"] == pytest.approx(p.decode_b.tok_s)
    assert v["max_sequences"] == p.max_sequences
    # tok/s per watt: aggregate / (TDP 180 W x 1 card)
    assert v["tok_s_per_w"] == pytest.approx(p.decode_b.tok_s / 180)


def test_a_card_too_small_is_costed_on_enough_cards(catalog):
    m = catalog.model("llama-3.1-70b")
    row = compare(m, [catalog.gpu("h100-sxm")], PlanInputs(quant="bf16"), users=1)[0]
    assert (row.tp, row.pp, row.cards) == (2, 1, 2) and row.values()["fits"] is False
    # `fits` is one card's; the JSON and CSV say the row serves on its two (a spreadsheet filtered them out)
    from llmsize.render.compare_table import rows_to_dicts

    assert rows_to_dicts([row])[0]["serves"] is True
    # per watt counts both cards: 700 W x 2
    assert row.values()["tok_s_per_w"] == pytest.approx(row.values()["aggregate_tok_s"] / 1400)


def test_users_are_capped_by_the_cache(catalog):
    m = catalog.model("gemma-4-12b")
    row = compare(m, [catalog.gpu("rtx3060")], PlanInputs(), users=1000)[0]
    assert row.users_served == row.plan.max_sequences < 1000


def test_ranking_follows_the_key_and_is_stable(catalog):
    m = catalog.model("gemma-4-12b")
    cards = [catalog.gpu(x) for x in ("rtx5060ti", "rtx4060ti16", "rtx5090", "rtx3060", "l4")]
    rows = compare(m, cards, PlanInputs(), users=1)
    by_bw = sort_rows(rows, "bandwidth_gb_s")
    bws = [r.gpu.bandwidth_gb_s for r in by_bw]
    assert bws == sorted(bws, reverse=True)
    by_ttft = sort_rows(rows, "ttft_s")  # lower is better: ascending
    tt = [r.values()["ttft_s"] for r in by_ttft]
    assert tt == sorted(tt)
    # equal keys keep card-id order, whatever the input order
    same = sort_rows(list(reversed(rows)), "cards")
    assert [r.gpu.id for r in same] == sorted(r.gpu.id for r in rows)


def _run(run_cli, *args):
    code, out, err = run_cli("compare", *args)
    assert code == 0, err
    return out


def test_csv_parses_back_to_the_json_numbers(run_cli):
    args = ["gemma-4-12b", "--gpus", "rtx5060ti,rtx5090,h100", "--users", "8"]
    data = json.loads(_run(run_cli, *args, "--format", "json"))["rows"]
    rows = list(csv.DictReader(io.StringIO(_run(run_cli, *args, "--format", "csv"))))
    assert [r["gpu"] for r in rows] == [d["gpu"] for d in data]
    for r, d in zip(rows, data):
        for k in ("bandwidth_gb_s", "ceiling_tok_s", "aggregate_tok_s", "ttft_s", "tok_s_per_w"):
            assert float(r[k]) == pytest.approx(d[k], rel=1e-12)
        assert int(r["max_sequences"]) == d["max_sequences"]


def test_prices_give_tok_s_per_currency(run_cli, tmp_path):
    f = tmp_path / "prices.yaml"
    f.write_text("currency: EUR\nprices:\n  rtx5090: 2400\n  h100: 27000\n")
    d = json.loads(_run(run_cli, "gemma-4-12b", "--gpus", "rtx5090,h100,rtx5060ti", "--prices", str(f),
                        "--sort", "tok_s_per_kcurrency", "--format", "json"))
    rows = {r["gpu"]: r for r in d["rows"]}
    assert rows["rtx5090"]["tok_s_per_kcurrency"] == pytest.approx(rows["rtx5090"]["aggregate_tok_s"] / 2.4)
    assert rows["rtx5060ti"]["price"] is None and d["rows"][-1]["gpu"] == "rtx5060ti"  # no price: last
    md = _run(run_cli, "gemma-4-12b", "--gpus", "rtx5090,h100", "--prices", str(f), "--format", "markdown")
    assert "| card | bandwidth (GB/s)" in md and "per 1,000 EUR (tok/s)" in md
    # the TTFT cells carry their unit (95 ms, 1.20 s): the headers said (s) above cells in ms
    assert "| TTFT | expected TTFT (in the runtime) |" in md and " ms |" in md and "TTFT (s" not in md
    rows = list(csv.DictReader(io.StringIO(_run(run_cli, "gemma-4-12b", "--gpus", "rtx5090,h100", "--prices", str(f),
                                                "--format", "csv"))))  # its price columns named no currency
    assert {r["currency"] for r in rows} == {"EUR"} and {float(r["price"]) for r in rows} == {2400, 27000}


@pytest.mark.parametrize("content, needle", [
    ("prices: {rtx9999: 10}", "rtx9999"),
    ("prices: {rtx5090: -3}", "price of `rtx5090` is -3"),
    ("[1, 2]", "expected a mapping with a `prices:`"),
    ("prices: {}", "`prices:` is empty"),  # said "expected a mapping with a `prices:` mapping"
    # the hourly prices fleet reads are checked by compare too: one file, one verdict (compare took a -1 fleet refused)
    ("prices: {rtx5090: 10}\nhourly: {rtx5090: -1}", "price of `rtx5090` is -1"),
    ("prices: {rtx5090: 10}\nhourly: [1]", "`hourly:` is not a mapping"),
])
def test_bad_price_files(run_cli, tmp_path, content, needle):
    f = tmp_path / "p.yaml"
    f.write_text(content)
    code, out, err = run_cli("compare", "gemma-4-12b", "--prices", str(f))
    assert code != 0 and needle in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args, needle", [
    (["--sort", "speed"], "`speed` is not one of ceiling_tok_s"),
    (["--format", "xml"], "'--format': `xml` is not one of table, json, csv, markdown"),
    (["--vendor", "acme"], "'--vendor': `acme` is not one of nvidia, amd, apple, intel"),
    (["--vendor", "apple", "--segment", "datacenter"], "No card matches"),
    (["--users", "0"], "'--users': `0` is not an integer from 1"),
])
def test_bad_options(run_cli, args, needle):
    code, out, err = run_cli("compare", "gemma-4-12b", *args)
    assert code == 2 and needle in err


def test_table_fits_100_columns(run_cli):
    out = _run(run_cli, "llama-3.1-70b", "--gpus", "h100,h200,b200,mi300x,rtx5090", "--users", "32")
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "h200-sxm" in out and "tok/s agg" in out


def test_fixed_split_for_every_row(run_cli):
    d = json.loads(_run(run_cli, "llama-3.1-70b", "--gpus", "h100,h200,rtx5090,m4-max", "--tp", "4",
                        "--quant", "bf16", "--format", "json"))
    rows = {r["gpu"]: r for r in d["rows"]}
    assert rows["h100-sxm"]["cards"] == 4 and rows["h100-sxm"]["tp"] == 4
    assert rows["m4-max"]["cards"] is None  # no card-to-card link: no row figures
    assert rows["rtx5090"]["cards"] is None  # 141 GB / 4 does not fit 32 GB cards


def test_nodes_put_one_stage_per_node(run_cli):
    code, out, err = run_cli("plan", "deepseek-v3", "--gpu", "h100", "--tp", "8", "--nodes", "2", "--json")
    assert code == 0, err
    par = json.loads(out)["parallel"]
    assert (par["tp"], par["pp"], par["cards"], par["nodes"]) == (8, 2, 16, 2)
    code, out, err = run_cli("plan", "deepseek-v3", "--gpu", "h100", "--pp", "3", "--nodes", "2")
    assert code == 2 and "--pp 3 and --nodes 2 disagree" in err


@pytest.mark.parametrize("cmd", [("plan", "llama-3.1-8b", "--gpu", "rtx4090"), ("compare", "llama-3.1-8b",
                                                                             "--vendor", "nvidia")])
def test_a_link_between_nodes_without_nodes_is_refused(run_cli, cmd):
    """--node-link-gb-s prices the hand-off between nodes: on one node it would change nothing, silently."""
    code, out, err = run_cli(*cmd, "--node-link-gb-s", "25")
    assert code == 2 and len(err.strip().splitlines()) == 1 and not out
    assert "--node-link-gb-s 25 sizes the link between nodes" in err and "--nodes N" in err
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100", "--tp", "8", "--nodes", "2",
                             "--node-link-gb-s", "25", "--json")
    slow = json.loads(out)["expected"]["tok_s"]
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100", "--tp", "8", "--nodes", "2", "--json")
    assert code == 0 and json.loads(out)["expected"]["tok_s"] > slow  # the default 50 GB/s is faster


def test_a_split_no_card_can_take_is_refused_with_its_reason(run_cli):
    """--tp 3 does not divide Llama 3.1 8B's 32 heads on any card: one line and exit 2, as plan says it (a review saw
    a table of dashes and exit 0)."""
    code, out, err = run_cli("compare", "llama-3.1-8b", "--tp", "3", "--gpus", "h100-sxm,mi300x")
    assert code == 2 and out == "" and "--tp 3 does not divide the 32 attention heads" in err


def test_compare_takes_json_as_plan_and_fleet_do(run_cli):
    """`compare --json` is `--format json` (plan and fleet took --json; compare refused it), and --json beside
    another --format is one line, in plan, compare and fleet alike."""
    base = ("compare", "llama-3.1-8b", "--gpus", "rtx4090,h100-sxm")
    code, out, err = run_cli(*base, "--json")
    assert code == 0, err
    assert out == run_cli(*base, "--format", "json")[1]
    for argv in ((*base, "--json", "--format", "csv"), ("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--json",
                                                       "--format", "html"),
                 ("fleet", "llama-3.1-8b", "--users", "8", "--gpus", "h100-sxm", "--json", "--format", "markdown")):
        code, out, err = run_cli(*argv)
        assert code == 2 and "ask for two outputs" in err and out == "", argv


def test_a_card_named_twice_is_one_row(run_cli):
    """--gpus h100,h100,h100-sxm named one card three times (an id and an alias): three identical rows."""
    import json

    code, out, err = run_cli("compare", "llama-3.1-8b", "--gpus", "h100,h100,h100-sxm,rtx4090", "--json")
    assert code == 0, err
    assert [r["gpu"] for r in json.loads(out)["rows"]] == ["h100-sxm", "rtx4090"]


def test_a_card_no_configuration_holds_says_why(run_cli):
    """DeepSeek-V3 in FP8 (671 GB) does not fit an M3 Ultra's 512 GB and the catalog has no link to split it over
    several: its row was every figure blank with no reason (a plausibility sweep)."""
    import json

    code, out, err = run_cli("compare", "deepseek-v3", "--gpus", "m3-ultra,h200", "--json")
    assert code == 0, err
    rows = {r["gpu"]: r for r in json.loads(out)["rows"]}
    assert rows["m3-ultra"]["cards"] is None and "no split over up to 256" in rows["m3-ultra"]["why_not"]
    assert rows["h200-sxm"]["why_not"] is None and rows["h200-sxm"]["cards"] > 1
    code, out, err = run_cli("compare", "deepseek-v3", "--gpus", "m3-ultra,h200")
    assert code == 0 and "m3-ultra: one card does not hold the model" in " ".join(out.split())


def test_a_wide_terminal_gets_the_priced_table_on_one_header_line(run_cli, monkeypatch, tmp_path):
    """With prices the table has 14 columns: at 100 columns its headers break inside words ("cards" one letter a
    line); a wider terminal (here 160) gives them their width, as it does fleet's table."""
    prices = tmp_path / "p.yaml"
    prices.write_text("currency: EUR\nprices:\n  rtx5090: 2400\n  h100-sxm: 27000\n")
    monkeypatch.setenv("COLUMNS", "160")
    code, out, err = run_cli("compare", "qwen3-30b-a3b", "--gpus", "rtx5090,h100-sxm", "--prices", str(prices))
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.lstrip().startswith("card "))
    assert header.split() == ["card", "GB/s", "GiB", "cards", "max", "ctx", "seqs", "ceil", "b=1", "expect", "b=1",
                              "tok/s", "agg", "TTFT", "exp", "TTFT", "tok/s/W", "cost", "tok/s/k"]


def test_markdown_keeps_a_hostile_model_name_inert(run_cli, tmp_path):
    """A name from a user's catalog or config.json went into the Markdown title raw: `<script>` ran as HTML in a
    renderer, a newline broke the title, a pipe a cell."""
    from llmsize.render.markdown import md

    assert md("TTFT <= 2 s & up") == "TTFT <= 2 s & up"
    assert md("<script>x</script> a|b\nc &amp;") == "&lt;script>x&lt;/script> a\\|b c &amp;amp;"
    text = (ROOT / "models" / "llama-3.1-8b.yaml").read_text()
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "odd.yaml").write_text(
        text.replace("id: llama-3.1-8b", "id: odd").replace("aliases: [llama3.1-8b, llama-3.1-8b-instruct]",
                                                            "aliases: []")
        .replace("name: Llama 3.1 8B", 'name: "<script>alert(1)</script> | x"'))
    code, out, err = run_cli("compare", "odd", "--gpus", "h100", "--format", "markdown", "--catalog", str(tmp_path))
    assert code == 0, err
    assert out.startswith("**") and "<script>" not in out and "&lt;script>" in out and "\\| x" in out


def test_a_context_beyond_the_models_limit_is_said_under_the_table(run_cli):
    """compare at --context 100,000 for Qwen3 30B A3B (max_position_embeddings 40,960) printed seqs and TTFTs
    for a context its engines refuse, without a word; plan says it, and now compare does too."""
    code, out, err = run_cli("compare", "qwen3-30b-a3b", "--gpus", "rtx5090,h100", "--context", "100000")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "--context 100,000 is beyond the model's max_position_embeddings 40,960: engines refuse it" in flat
    code, out, err = run_cli("compare", "qwen3-30b-a3b", "--gpus", "rtx5090,h100", "--context", "100000", "--format",
                             "json")
    assert code == 0 and any("beyond the model's max_position_embeddings" in n for n in json.loads(out)["notes"])
    code, out, err = run_cli("compare", "qwen3-30b-a3b", "--gpus", "rtx5090,h100", "--context", "32768")
    assert code == 0 and "max_position_embeddings" not in out


def test_markdown_keeps_the_notes(run_cli):
    """The markdown table dropped every note, the one that says a --context past the model's is refused by the
    engines among them: they follow the table as a list, as the table and HTML print them."""
    md = _run(run_cli, "llama-3.1-8b", "--gpus", "h100,rtx4090", "--context", "200000", "--format", "markdown")
    assert "- Units: GB = 10^9 B, GiB = 2^30 B." in md
    assert "- --context 200,000 is beyond the model's max_position_embeddings 131,072" in md


def test_cost_is_the_rows_cards_times_the_price_and_sorts_the_cheapest_set_first(run_cli, tmp_path):
    """Qwen3-32B FP8 at 16K tokens on cards of 500, 1,800 and 3,000 USD: `--sort price` had put 8 RTX 3070s first
    (500 a card, 4,000 in all) and the RTX PRO 6000 (3,000 for the one card it needs) last. cost = cards x price:
    8 x 500 = 4,000, 2 x 1,800 = 3,600, 1 x 3,000 = 3,000; `--sort cost` ranks them so, the table shows it."""
    import json

    prices = tmp_path / "p.yaml"
    prices.write_text("currency: USD\nprices:\n  rtx3070: 500\n  rtx4090: 1800\n  rtxpro6000: 3000\n")
    args = ("compare", "qwen3-32b", "--context", "16384", "--quant", "fp8", "--gpus", "rtx3070,rtx4090,rtxpro6000",
            "--prices", str(prices))
    code, out, err = run_cli(*args, "--sort", "cost", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [(r["gpu"], r["cards"], r["price"], r["cost"]) for r in rows] == [
        ("rtxpro6000", 1, 3000, 3000), ("rtx4090", 2, 1800, 3600), ("rtx3070", 8, 500, 4000)]
    code, out, err = run_cli(*args, "--sort", "price", "--json")
    assert [r["gpu"] for r in json.loads(out)["rows"]] == ["rtx3070", "rtx4090", "rtxpro6000"]  # one card's price
    code, out, err = run_cli(*args, "--sort", "cost", "--format", "csv")
    import csv

    assert code == 0 and [float(r["cost"]) for r in csv.DictReader(out.splitlines())] == [3000, 3600, 4000]
    code, out, err = run_cli(*args, "--sort", "cost")
    assert code == 0 and "cost: USD for the row's cards (cards x the price of one)" in " ".join(out.split())
    code, out, err = run_cli("compare", "qwen3-32b", "--gpus", "rtx3070", "--sort", "cost")
    assert code == 2 and "--sort cost ranks by the prices" in err


def test_a_row_on_pipeline_stages_shows_its_split_and_the_tensor_split(run_cli):
    """Llama 3.1 405B in FP8 (~406 GB): three B200s hold it only as tp 1 x pp 3 (tp 3 divides no head count), whose
    batch-1 token reads the stages in turn, 406 GB / 8,000 GB/s ~ 51 ms: 19.6 tok/s, where four as tp 4 read 102 GB
    a card at once (78 tok/s). The row had said "3" cards and ranked B200 below H200's tensor split; it now says
    `3 (1x3)` and a note gives the tensor split (4, --tp 4 --pp 1), as the JSON's tp and pp do."""
    import json

    code, out, err = run_cli("compare", "llama-3.1-405b", "--quant", "fp8", "--gpus", "h200,b200")
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.lstrip().startswith("b200"))
    assert "3 (1x3)" in row
    h200 = next(line for line in out.splitlines() if line.lstrip().startswith("h200"))
    assert "(" not in h200.split()[4]  # tp 4 alone: no split shown
    assert "b200 3 cards as tp 1 x pp 3, a tensor split 4 (--tp 4 --pp 1)" in " ".join(out.split())
    code, out, err = run_cli("compare", "llama-3.1-405b", "--quant", "fp8", "--gpus", "b200", "--json")
    (r,) = json.loads(out)["rows"]
    assert (r["cards"], r["tp"], r["pp"]) == (3, 1, 3)
    assert r["ceiling_tok_s"] == pytest.approx(8000e9 / 406e9, rel=0.03)  # one card's bandwidth, the whole model
    code, out, err = run_cli("compare", "llama-3.1-405b", "--quant", "fp8", "--gpus", "b200", "--tp", "4")
    assert code == 0 and "Pipeline stages decode" not in out  # a split the user chose: no note
    code, out, err = run_cli("compare", "llama-3.1-405b", "--quant", "fp8", "--gpus", "b200", "--tp", "4", "--json")
    assert json.loads(out)["rows"][0]["ceiling_tok_s"] == pytest.approx(4 * 8000e9 / 406e9, rel=0.05)


def test_a_row_whose_engine_ledger_holds_far_less_is_said(run_cli):
    """compare's max ctx and seqs are the generic budget's: 70B FP8 on an H100 at --gpu-util 0.9 showed 9,284 tokens
    and 2 sequences of 4,096 while vLLM, the expected figure's engine, does not start there (its ledger: 3,328
    tokens). A note names the row (ledger_short in JSON); the H200, whose ledger holds most of its budget, is not
    named. Under SGLang's own default fraction on an H100 (0.83) the weights leave no cache at all."""
    import json

    code, out, err = run_cli("compare", "llama-3.1-70b", "--quant", "fp8", "--gpus", "h100-sxm,h200", "--gpu-util",
                             "0.9", "--json")
    assert code == 0, err
    d = json.loads(out)
    rows = {r["gpu"]: r for r in d["rows"]}
    assert "3,328 tokens" in rows["h100-sxm"]["ledger_short"] and rows["h200-sxm"]["ledger_short"] is None
    assert any(n.startswith("max ctx and seqs are the plan's budget; on h100-sxm, vLLM's own memory ledger")
               for n in d["notes"])
    code, out, err = run_cli("compare", "llama-3.1-70b", "--quant", "fp8", "--gpus", "h100-sxm,h200", "--runtime",
                             "sglang", "--json")
    rows = {r["gpu"]: r for r in json.loads(out)["rows"]}
    assert rows["h100-sxm"]["ledger_short"].startswith("SGLang's own memory ledger leaves no cache after the weights")
    assert rows["h200-sxm"]["ledger_short"] is None
