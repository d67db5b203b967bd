"""The README shows `llmsize plan gemma-4-12b --gpu rtx5060ti` and its lever table as they print (100 columns)."""

from __future__ import annotations

from pathlib import Path

README = (Path(__file__).parent.parent / "README.md").read_text()


def _block_after(marker: str) -> str:
    start = README.index("```text\n", README.index(marker)) + len("```text\n")
    return README[start:README.index("```\n", start)]


def test_the_seed_plan_as_it_prints(run_cli):
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti")
    assert code == 0, err
    block = _block_after("`llmsize plan gemma-4-12b --gpu rtx5060ti` (the seed article's card")
    assert block == out.rstrip("\n") + "\n", "README.md's plan block is stale: paste this output (COLUMNS=100)"


def test_the_lever_table_as_it_prints(run_cli):
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--levers")
    assert code == 0, err
    table = out[out.index("Levers (what"):]
    start = README.index("```text\nLevers (what") + len("```text\n")
    assert README[start:README.index("```\n", start)] == table.rstrip("\n") + "\n"
