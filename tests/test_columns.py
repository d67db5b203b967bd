"""render/columns.py: a column table whose cells never fold (a review saw "32,00" over "0.0" in compare and the card
id cut to "h100-sx" in fleet at 100 columns)."""

from __future__ import annotations

import json

from llmsize.render.columns import table_lines, wrap_header


def test_headers_break_between_words_then_after_slashes_then_inside_words():
    assert wrap_header("max ctx", 7) == ["max ctx"] and wrap_header("max ctx", 4) == ["max", "ctx"]
    assert wrap_header("tok/s/user", 6) == ["tok/s/", "user"]
    assert wrap_header("cards", 2) == ["ca", "rd", "s"]


def test_cells_keep_their_width_and_a_table_too_wide_is_printed_wider():
    rows = [["h100-sxm", "1,198,816", "35,000.0"], ["b200", "7", "1.0"]]
    lines = table_lines(["card", "cards total", "price"], rows, width=20)
    assert any("h100-sxm" in x and "1,198,816" in x and "35,000.0" in x for x in lines)
    assert max(len(x) for x in lines) > 20  # the cells need more than 20 columns: wider, never folded
    narrow = table_lines(["card", "cards total", "price"], rows, width=100)
    assert narrow[0].split() == ["card", "cards", "total", "price"]  # room: each header on one line


def test_a_table_wider_than_the_width_anyway_cuts_no_header_word():
    """fleet at 100 columns: its cells need 103, so the table is printed wider anyway, and "cards", "batch" and
    "tok/s" were still cut into "ca" "rd" "s" over three lines (a hostile-input pass, 2026-12-05)."""
    rows = [["a100-80gb-pcie", "1", "100", "0.33 (0.27-0.61)" * 5]]
    lines = table_lines(["card", "cards", "batch", "TTFT s"], rows, width=40)
    assert lines[0].split() == ["card", "cards", "batch", "TTFT", "s"] and len(lines) == 3


def test_a_header_is_not_folded_letter_by_letter_to_widen_others():
    """compare with prices at 100 columns: every longest word did not fit, and the one left out, "cards", stood one
    letter a line while "tok/s/W" took its room (2026-12-06). The deepest header is served first: "cards" whole, and
    what folds is "tok/s/k" at its slash."""
    headers = ["card", "cards", "seqs", "tok/s/W", "tok/s/k"]
    rows = [["rtx5090", "3", "65", "0.160", "38.4"]]
    # cells 7 + 1 + 2 + 5 + 4 = 19, gaps 4 x 2, the margin 1: 8 columns to share; each longest word whole takes
    # 4 + 2 + 2 + 3 = 11, the narrowest first left "cards" none of it
    lines = table_lines(headers, rows, width=1 + 19 + 8 + 8)
    assert len(lines) == 2 + 2 and lines[1].split() == ["card", "cards", "seqs", "tok/s/W", "s/k"]
    tight = table_lines(headers, rows, width=1 + 19 + 8 + 2)  # 2 to share: "car" over "ds", not five lines
    assert len(tight) == 2 + 2 and tight[0].split()[0] == "car" and tight[1].split()[:2] == ["card", "ds"]


def test_compare_and_fleet_print_every_number_whole_at_100_columns(run_cli, tmp_path):
    prices = tmp_path / "p.yaml"
    prices.write_text("currency: EUR\nprices:\n  h100-sxm: 32000\n  h200-sxm: 35000\n  mi300x: 20000\n  b200: 45000\n"
                      "hourly:\n  h100-sxm: 2.5\n  b200: 5.2\n")
    code, out, err = run_cli("compare", "llama-3.1-70b", "--gpus", "h100-sxm,h200-sxm,mi300x,b200", "--prices",
                             str(prices))
    costs = [r["cost"] for r in json.loads(run_cli("compare", "llama-3.1-70b", "--gpus",
                                                   "h100-sxm,h200-sxm,mi300x,b200", "--prices", str(prices),
                                                   "--json")[1])["rows"]]
    assert code == 0 and len(costs) == 4 and all(f"{c:,.0f}" in out for c in costs)  # cards x price, whole
    base = ("fleet", "llama-3.1-8b", "--users", "100000000", "--gpus", "h100-sxm,b200", "--prices", str(prices))
    code, out, err = run_cli(*base)
    rows = json.loads(run_cli(*base, "--json")[1])["rows"]
    assert code == 0
    for r in rows:
        line = next(x for x in out.splitlines() if x.strip().startswith(r["card"] + " "))
        assert f"{r['cards_total']:,}" in line and f"{r['replicas']:,} x agg" in line
