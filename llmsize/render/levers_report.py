"""plan --levers: the lever table (estimate/levers.py) as text."""

from __future__ import annotations

import textwrap

from llmsize.estimate.levers import FIGURE_WORDS, Lever
from llmsize.units import fmt_seconds


def _fmt(figure: str, v: float | None) -> str:
    if v is None:
        return "-"
    if figure == "kv_budget_gb":
        return f"{v:,.1f} GB"
    if figure == "sequences":
        return f"{v:,.0f}"
    return f"{v:,.1f} tok/s"


def render_levers(levers: list[Lever], console, width: int = 100, runtime_name: str | None = None) -> None:
    """One line per lever (name, before -> after, the runtime's expected before -> after where known, resource),
    its caveat wrapped at `width` and its command (one line, to copy) beneath; the diagnosis first, then by
    effect."""
    if not levers:
        return
    head = levers[0]
    ranked = (f"; ranked by {runtime_name}'s expected speed, rows of another figure after"
              if runtime_name and head.expected_before is not None else "")
    out = ["", *textwrap.wrap(f"Levers (what binds: {FIGURE_WORDS[head.figure]}; each row is the plan its command "
                              f"gives{ranked})", width, subsequent_indent="  "), ""]
    for lv in levers:
        after = _fmt(lv.figure, lv.after)
        change = after if lv is head else f"{_fmt(lv.figure, lv.before)} -> {after}"
        words = "" if lv.figure == head.figure else f", {FIGURE_WORDS[lv.figure]}"
        if lv.expected_after is not None:
            words += (f"; expected {lv.expected_after:,.1f} tok/s" if lv is head
                      else f"; expected {lv.expected_before:,.1f} -> {lv.expected_after:,.1f} tok/s")
        if lv.ttft_moves:  # a row that changes the time to first token says so
            words += f"; roofline TTFT {fmt_seconds(lv.ttft_before_s, 0)} -> {fmt_seconds(lv.ttft_after_s, 0)}"
        if lv is not head and lv.worse:  # tried, and worse here: listed so that the reader need not try it
            words += "; worse than now"
        out += textwrap.wrap(f"{lv.name:<34} {change}{words}   [{lv.resource}]", width, initial_indent="  ",
                             subsequent_indent="      ")
        out += textwrap.wrap(lv.caveat, width, initial_indent="      ", subsequent_indent="      ")
        if lv.command:
            out.append(f"      {lv.command}")
    console.file.write("\n".join(out) + "\n\n")
