"""`llmsize compare` rows as a rich table, JSON, CSV, Markdown or one HTML page. No arithmetic: the values come from
estimate/compare.py."""

from __future__ import annotations

import csv
import io

from llmsize.estimate.compare import COLUMNS
from llmsize.units import fmt_tokens_k

SHORT = {"gpu": "card", "bandwidth_gb_s": "GB/s", "memory_gib": "GiB", "cards": "cards",
         "max_context_tokens": "max ctx", "max_sequences": "seqs", "ceiling_tok_s": "ceil b=1",
         "expected_tok_s": "expect b=1",
         "aggregate_tok_s": "tok/s agg", "ttft_s": "TTFT", "expected_ttft_s": "exp TTFT", "tok_s_per_w": "tok/s/W",
         "price": "price", "cost": "cost",
         "tok_s_per_kcurrency": "tok/s/k"}
# the cost of a row's cards, not one card's price: a row on 8 cheap cards beside one dear one (JSON and CSV keep both)
SHOWN = ["gpu", "bandwidth_gb_s", "memory_gib", "cards", "max_context_tokens", "max_sequences", "ceiling_tok_s",
         "expected_tok_s", "aggregate_tok_s", "ttft_s", "expected_ttft_s", "tok_s_per_w", "cost",
         "tok_s_per_kcurrency"]


def _staged(row) -> str | None:
    """A row's cards with their split where it has pipeline stages (`3 (1x3)`: tp 1 x pp 3), else None."""
    return f"{row.cards:,} ({row.tp}x{row.pp})" if row.plan is not None and row.pp > 1 else None


def _cells(row, cols: list[str]) -> list[str]:
    """A row's cells, its cards with their split where it has stages (_staged)."""
    v = row.values()
    return [(c == "cards" and _staged(row)) or _cell(c, v[c]) for c in cols]


def _cell(key: str, v) -> str:
    """Compact cells for the 100-column table (CSV and JSON keep every digit)."""
    if v is None:
        return "-"
    if key == "gpu":
        return str(v)
    if key in ("cards", "max_sequences"):
        return f"{v:,}"
    if key == "max_context_tokens":
        return fmt_tokens_k(v)
    if key in ("ttft_s", "expected_ttft_s"):
        return f"{v * 1e3:,.0f} ms" if v < 1 else f"{v:,.2f} s"
    if key == "tok_s_per_w":
        return f"{v:,.3f}"
    if key in ("memory_gib", "ceiling_tok_s", "expected_tok_s", "aggregate_tok_s", "tok_s_per_kcurrency"):
        return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"
    if key == "bandwidth_gb_s":
        return f"{v:,.0f}"
    if key in ("price", "cost"):  # money: whole units from 100 up ("27,000", not "27,000.0"), cents below
        return f"{v:,.0f}" if v >= 100 else f"{v:,.2f}"
    return f"{v:,.1f}"


def _columns(rows, currency: str | None) -> list[str]:
    cols = list(SHOWN)
    if not any(r.price for r in rows):
        cols = [c for c in cols if c not in ("price", "cost", "tok_s_per_kcurrency")]
    return cols


def _header(key: str, currency: str | None) -> str:
    name, unit, _ = COLUMNS[key]
    if key == "price":
        unit = f"{currency} per card"
    if key == "cost":
        unit = f"{currency}, cards x price"
    if key == "tok_s_per_kcurrency":
        name, unit = f"per 1,000 {currency}", "tok/s"
    if key in ("ttft_s", "expected_ttft_s"):  # each cell says its own unit (_cell: ms below a second, else s)
        unit = unit.removeprefix("s").lstrip(", ")
    return f"{name} ({unit})" if unit else name


def rows_to_dicts(rows) -> list[dict]:
    out = []
    for r in rows:
        d = r.values()
        d.update({"gpu_name": r.gpu.name, "serves": r.plan is not None,  # `fits` is one card's
                  "tp": r.tp if r.plan else None, "pp": r.pp if r.plan else None,
                  "users_served": r.users_served, "tensor_cards": r.tensor_cards, "ledger_short": r.ledger_short,
                  "gpu_util": r.plan.budget.gpu_util if r.plan else None})  # the share its runtime budgets
        e = r.expected
        d.update({"expected_runtime": e.runtime if e else None, "expected_backend": e.backend if e else None,
                  "expected_tok_s_low": e.expected.tok_s_low if e and e.expected else None,
                  "expected_tok_s_high": e.expected.tok_s_high if e and e.expected else None,
                  "expected_ttft_s_low": e.expected.ttft_s_low if e and e.expected else None,
                  "expected_ttft_s_high": e.expected.ttft_s_high if e and e.expected else None,
                  "expected_reason": e.reason if e else None, "why_not": r.why_not})
        out.append(d)
    return out


def render_csv(rows, currency) -> str:
    """The rows as CSV, with a currency column beside the prices where --prices gave them (the table and markdown
    name it in their headers)."""
    buf = io.StringIO()
    data = [{**d, "currency": currency} for d in rows_to_dicts(rows)] if currency else rows_to_dicts(rows)
    w = csv.DictWriter(buf, fieldnames=list(data[0]) if data else ["gpu"], lineterminator="\n")
    w.writeheader()
    for d in data:
        w.writerow({k: ("" if v is None else v) for k, v in d.items()})
    return buf.getvalue()


def render_markdown(rows, currency, title: str, notes: list[str] = ()) -> str:
    """The rows as a markdown table under its title, the notes (units, what the rows lean on) beneath it."""
    from llmsize.render.markdown import md

    cols = _columns(rows, currency)
    lines = [f"**{md(title)}**", "", "| " + " | ".join(md(_header(c, currency)) for c in cols) + " |",
             "|" + "|".join("---" if c == "gpu" else "---:" for c in cols) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(md(c) for c in _cells(r, cols)) + " |")
    lines += [""] + [f"- {md(n)}" for n in notes] if notes else []
    return "\n".join(lines) + "\n"


def render_table(rows, currency, title: str, notes: list[str], console) -> None:
    from llmsize.render.columns import print_table

    cols = _columns(rows, currency)
    print_table(console, title, [SHORT[c] for c in cols], [_cells(r, cols) for r in rows])
    legend = ("GB/s: memory bandwidth; GiB: VRAM; cards: the fewest that hold the model (tp x pp where it has pipeline "
              "stages); max ctx: longest context one sequence can hold (K = 1,000); seqs: "
              "sequences that fit at --context; ceil b=1: batch-1 decode ceiling; expect b=1: expected batch-1 "
              "decode in the runtime (--runtime, else the format's and card's default; - where it has no figure); "
              "tok/s agg: the roofline's aggregate at --users (or what the cache holds); TTFT: the roofline's "
              "time to first token (the prompt at the dense peak plan prints, 16-bit where the catalog has it, its "
              "cards one after another); exp TTFT: the expected one in the runtime, shorter where its matmuls run at "
              "another rate (llama.cpp's quantized prompts at the INT8 rate) or it pipelines the prompt over its "
              "cards; `plan --gpu CARD` gives the runtime's bands")
    if currency:
        legend += (f"; cost: {currency} for the row's cards (cards x the price of one); tok/s/k: aggregate tok/s per "
                   f"1,000 {currency} of cards")
    console.print(f" {legend}.", style="dim")
    for r in rows:
        if r.why_not:
            console.print(f" {r.gpu.id}: {r.why_not.rstrip('.')}.", style="dim")
    for n in notes:
        console.print(f" {n}", style="dim")


def render_html(rows, currency, title: str, notes: list[str], roofs) -> str:
    """One self-contained page: the table (every shown column, full values), the rooflines of the best cards with
    the model's points, the notes."""
    from llmsize.render.charts import X_ROOF, Y_ROOF, roof_series
    from llmsize.render.html_page import Section, page
    from llmsize.render.svg_chart import svg_plot

    cols = _columns(rows, currency)
    body = [[(c == "cards" and _staged(r)) or r.values()[c] for c in cols] for r in rows]
    model_name = rows[0].plan.model.name if rows and rows[0].plan else ""
    chart = svg_plot(roof_series(model_name, roofs), f"Roofline: {model_name} decode (batch 1, 2, 4 ...) and "
                     "prefill", X_ROOF, Y_ROOF, color_group=2)
    return page(title, [Section("Cards", tables=[([_header(c, currency) for c in cols], body)], notes=notes),
                        Section("Rooflines of the first cards", charts=[chart])],
                "Made by llmsize, offline: no scripts, nothing fetched.")
