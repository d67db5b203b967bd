"""`llmsize plan --format html`: the plan's report as the terminal prints it, its key figures as a table, the
card's roofline with the model's points and the KV cache against context, on one self-contained page."""

from __future__ import annotations

from llmsize.render.charts import X_KV, X_ROOF, Y_ROOF, roof_series
from llmsize.render.html_page import Section, page
from llmsize.render.svg_chart import svg_plot


def _summary(d: dict) -> list[list[object]]:
    """Key figures of plan's JSON object (render/plan_json.py), with their units."""
    cap, dec, pre, e = d["capacity"], d["decode"], d["prefill"], d.get("expected") or {}
    rows = [["format", f"{d['weights']['format']} ({d['weights']['bits_per_weight']:.2f} bits per weight)"],
            ["weights (GB = 10^9 B)", d["weights"]["bytes_total"] / 1e9],
            [f"KV cache per sequence at {d['kv']['context_tokens']:,} tokens (GB)", d["kv"]["bytes_per_sequence"] / 1e9],
            ["weights fit", cap["weights_fit"]],
            ["longest context (tokens)", cap["max_context_tokens"]],
            ["concurrent sequences at the context", cap["max_concurrent_sequences"]],
            ["decode ceiling, batch 1 (tok/s)", dec["ceiling_tok_s"]],
            [f"decode, batch {dec['batch']} (tok/s, all sequences)", dec["aggregate_tok_s"]],
            ["decode bound", dec["bound"]],
            [f"prefill of {pre['prompt_tokens']:,} tokens, ceiling (s)", pre["ttft_s"]]]
    if e.get("tok_s") is not None:
        rows.append([f"expected in {e['runtime']}, batch 1 (tok/s)",
                     f"{e['tok_s']:,.1f} (band {e['tok_s_low']:,.1f}-{e['tok_s_high']:,.1f})"])
    if e.get("ttft_s") is not None:
        rows.append([f"expected time to first token in {e['runtime']} (s)", e["ttft_s"]])
    rows.append(["diagnosis", d["diagnosis"]["summary"]])
    return rows


def render_plan_html(plan, d: dict, report_text: str, roofs, curves) -> str:
    """d: plan's JSON object (with `expected`); report_text: the report as the terminal prints it."""
    m = plan.model
    who = "one sequence" if plan.inputs.batch == 1 else f"{plan.inputs.batch} sequences"
    weights = (plan.weights_card or plan.weights).bytes_total
    kv = [(f"KV {c.dtype}", [(x, y / 1e9) for x, y in zip(c.contexts, c.bytes_per_sequence)], "line") for c in curves]
    if weights and curves:
        ctx = curves[0].contexts
        kv.append(("weights (per card)", [(ctx[0], weights / 1e9), (ctx[-1], weights / 1e9)], "line"))
    charts = [svg_plot(roof_series(m.name, roofs), f"Roofline: {m.name} on {plan.gpu.name}", X_ROOF, Y_ROOF,
                       color_group=2),
              svg_plot(kv, f"KV cache against context: {m.name}, {who}", X_KV, f"GB (10^9 B), {who}")]
    return page(f"llmsize plan: {m.name} on {plan.gpu.name}",
                [Section("Key figures", tables=[(["figure", "value"], _summary(d))]),
                 Section("Report", pre=[report_text]),
                 Section("Charts", charts=charts),
                 Section("Assumptions", notes=list(d.get("assumptions") or []))],
                "Made by llmsize, offline: no scripts, nothing fetched. GB = 10^9 B, GiB = 2^30 B.")
