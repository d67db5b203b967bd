"""`llmsize measure --server` result dict -> a rich report that fits 100 columns. No arithmetic beyond formatting."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from llmsize.errors import printable
from llmsize.render.measure_report import kv, num


def _pct(x):
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _p50_p90(s: dict | None, fmt: str = "{:,.1f}") -> str:
    if not s:
        return "n/a"
    return f"{fmt.format(s['median'])} / {fmt.format(s['p90'])}"  # spaced: a narrow column wraps between them


def render_server(r: dict, c: Console) -> None:
    s, run, pred = r["server"], r["run"], r["predicted"]
    engine = s.get("engine_name") or "unknown engine"
    version = f" {s['version']}" if s.get("version") else ""
    c.print(Text.assemble(("llmsize measure --server", "bold"), ": " + printable(s["url"])))
    rows = [("server", f"{engine}{version} (told by {s['engine_told_by']})"),
            ("model", printable(str(s["model"])) + (f" (max_model_len {s['max_model_len']:,})"
                                                     if s.get("max_model_len") else ""))]
    lc = s.get("llamacpp") or {}
    if lc:
        rows.append(("llama-server", ", ".join(f"{k} {printable(str(v))}" for k, v in lc.items()
                                               if k in ("total_slots", "n_ctx", "build_info"))))
    told = run.get("prompt_tokens_told")
    spread = r["prefill"].get("prompt_tokens_range")
    spread = f", p10-p90 {spread[0]:,}-{spread[1]:,}" if spread and spread[0] != spread[1] else ""
    rows += [("prompt", f"{run['context_tokens']:,} tokens" + (f" (server's count{spread})" if told else
                                                               " (~1 a word: the server reports no usage)")),
             ("output per request", f"{run['tokens_requested']:,} tokens, "
                                    + ("forced (ignore_eos)" if run["output_forced"] else "not forced (see notes)")),
             ("levels", ", ".join(str(x) for x in run["concurrency"])
              + (" stream" if run["concurrency"] == [1] else " streams") + f" at once, {run['rounds']} "
              + ("request" if run["rounds"] == 1 else "requests") + " each")]
    kv(c, rows, 28)

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="Measured (p50/p90 over requests and tokens)",
              title_justify="left")
    for col in ("streams", "aggregate tok/s", "tok/s a stream", "TTFT s", "ITL ms", "expected aggregate",
                "of expected", "band"):
        t.add_column(col, justify="right", overflow="fold")
    for row in r["concurrency"]:
        p = row.get("predicted") or {}
        exp = p.get("expected_aggregate_tok_s")
        band = (f" ({p['expected_aggregate_tok_s_low']:,.0f}-{p['expected_aggregate_tok_s_high']:,.0f})"
                if exp is not None else "")
        t.add_row(str(row["level"]), num(row["aggregate_tok_s"]), _p50_p90(row["tok_s_per_stream"]),
                  _p50_p90(row["ttft_s"], "{:,.3f}"), _p50_p90(row["itl_ms"]),
                  (num(exp) + band) if exp is not None else "n/a",
                  _pct(row.get("fraction_of_expected")), (row.get("band") or "-").removesuffix(" band"))
    c.print(t)

    c.print("[bold]Beside plan[/bold]")
    if pred.get("ceiling_tok_s") is None:
        kv(c, [("no prediction", pred.get("reason", ""))], 28)
    else:
        first = pred["levels"][str(r["concurrency"][0]["level"])]
        rows = [("plan", f"{pred['model']} on {pred['gpu']}, {pred['quant']} ({pred['quant_from']}), runtime "
                         f"{pred['runtime']}"),
                ("decode ceiling, batch 1", f"{pred['ceiling_tok_s']:,.1f} tok/s; measured "
                                            f"{num(r['decode']['tok_s'])} per stream = "
                                            f"{_pct(pred.get('measured_fraction_of_ceiling'))} of it")]
        if first.get("expected_tok_s") is not None:
            rows.append(("expected, batch 1", f"{first['expected_tok_s']:,.1f} tok/s (band "
                                              f"{first['expected_tok_s_low']:,.1f}-{first['expected_tok_s_high']:,.1f}"
                                              f"); measured {_pct(pred.get('measured_fraction_of_expected'))} of it"))
            if first.get("expected_ttft_s") is not None:
                rows.append(("expected TTFT", f"{first['expected_ttft_s']:,.3f} s for {run['context_tokens']:,} "
                                              f"tokens; measured {num(r['prefill']['ttft_s'], '{:,.3f}', ' s')}"))
            rows.append(("basis", first["basis"]))
        else:
            rows.append(("expected", first.get("reason", "n/a")))
        kv(c, rows, 28)

    metrics = [(row["level"], row.get("server_metrics"), row.get("server_timings")) for row in r["concurrency"]]
    if any(m or tm for _, m, tm in metrics):
        c.print("[bold]The server's own figures[/bold] (its /metrics over each level; llama-server's per-request "
                "timings)")
        for level, m, tm in metrics:
            parts = []
            for key, label, fmt in (("ttft_s", "TTFT", "{:,.3f} s"), ("itl_s", "ITL", "{:,.4f} s"),
                                    ("queue_s", "queue", "{:,.3f} s"), ("prompt_tok_s", "prompt", "{:,.1f} tok/s"),
                                    ("decode_tok_s", "decode", "{:,.1f} tok/s")):
                if m and m.get(key) is not None:
                    parts.append(f"{label} {fmt.format(m[key])}")
            for key, label in (("prompt_tok_s", "timings: prompt"), ("decode_tok_s", "timings: decode")):
                if tm and tm.get(key):
                    parts.append(f"{label} {tm[key]['median']:,.1f} tok/s")
            if parts:
                kv(c, [(f"{level} stream(s)", "; ".join(parts))], 28)
    for note in r.get("notes", []):
        c.print(Text(f"  note: {printable(note)}", style="dim"))
    c.print("  Units: tok/s = output tokens a second; aggregate = all output tokens over the level's wall time "
            "(prompts included); expected aggregate = plan's decode at that batch, held against streams x the median "
            "stream's decode rate; TTFT from sending the request to its first token; ITL the gap between streamed "
            "tokens, measured on this machine.", style="dim")
