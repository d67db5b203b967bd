"""`llmsize fit` rows (estimate/model_fit.py) as a table and as JSON."""

from __future__ import annotations

from dataclasses import asdict

from llmsize.estimate.expected import RUNTIME_NAMES


def fit_rows_to_dicts(rows) -> list[dict]:
    return [asdict(r) for r in rows]


def render_fit(rows, gpu, runtime, context, host, skipped, total, console) -> None:
    from rich import box
    from rich.table import Table

    where = f", host memory {host.name} ({host.bandwidth_gb_s:.1f} GB/s)" if host else ""
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left",
              title=f"Models that fit {gpu.id} in {RUNTIME_NAMES[runtime]} at {context:,} tokens{where}")
    for col, just in [("model", "left"), ("format", "left"), ("bpw", "right"), ("placement", "left"),
                      ("ctx", "right"), ("host GiB", "right"), ("tok/s", "right"), ("band", "right"),
                      ("ceiling", "right")]:
        t.add_column(col, justify=just, no_wrap=col not in ("model", "placement"), overflow="fold")
    for r in rows:
        band = f"{r.expected_low:,.0f}-{r.expected_high:,.0f}" if r.expected_low else ""
        exp = f"{r.expected_tok_s:,.1f}" if r.expected_tok_s else (r.note or "-")
        t.add_row(r.model, r.format.removeprefix("gguf-"), f"{r.bits_per_weight:.2f}", r.placement,
                  f"{r.context_tokens:,}" if r.context_tokens else "-",
                  f"{r.host_bytes / 2**30:,.1f}" if r.host_bytes else "-", exp, band,
                  f"{r.ceiling_tok_s:,.1f}" if r.ceiling_tok_s else "-")
    console.print(t)
    console.print(f"{len(rows)} of {total} fitting model/format pairs shown (--top); {skipped} pair(s) could not "
                  "be planned. tok/s: expected decode at batch 1; bpw: bits per quantized weight (a GGUF file's "
                  "average over its quantized tensors, else the format's bits with its scales; 16-bit tensors aside); "
                  "ctx: the "
                  "longest context one sequence can hold with that placement; host GiB: what an offloaded "
                  "placement leaves in system RAM (--host-ram-gib drops those that do not fit).", style="dim")
