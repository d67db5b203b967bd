"""`llmsize fit` rows (estimate/model_fit.py) as a table and as JSON."""

from __future__ import annotations

from dataclasses import asdict

from llmsize.estimate.runtimes import RUNTIME_NAMES


def fit_rows_to_dicts(rows) -> list[dict]:
    return [asdict(r) for r in rows]


def _tok(x: float) -> str:
    """A speed with a decimal below 100 tok/s (a band of 0.1-0.2 must not print as 0-0)."""
    return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"


def render_fit(rows, gpu, runtime, context, host, skipped, total, console, sort: str = "tok_s",
               min_tok_s: float | None = None, fitting: int | None = None, one_per_model: bool = False,
               notes: list[str] | tuple[str, ...] = (), engine: str | None = None, wired_limit: bool = False) -> None:
    from llmsize.render.columns import print_table

    where = f", host memory {host.name} ({host.bandwidth_gb_s:.1f} GB/s)" if host else ""
    cells = []
    for r in rows:
        band = f"{_tok(r.expected_low)}-{_tok(r.expected_high)}" if r.expected_low else "-"
        exp = f"{r.expected_tok_s:,.1f}" if r.expected_tok_s else "-"
        name = r.model + (" +mmproj" if r.mmproj_bytes else "")
        cells.append([name, r.format.removeprefix("gguf-"), f"{r.bits_per_weight:.2f}", r.placement,
                      f"{r.context_tokens:,}" if r.context_tokens else "-",
                      f"{r.host_bytes / 2**30:,.1f}" if r.host_bytes else "-", exp, band,
                      f"{r.ceiling_tok_s:,.1f}" if r.ceiling_tok_s else "-"])
    name = "Ollama (llama.cpp)" if engine == "ollama" else RUNTIME_NAMES[runtime]
    spill = any(r.host_bytes for r in rows)  # an offloaded placement: part of the model in system RAM (host GiB)
    title = (f"Models that fit {gpu.id} ({gpu.memory_size:,.7g} {gpu.memory_vendor_unit})"
             f"{', whole or with a part in system RAM (host GiB),' if spill else ''} in {name} at {context:,} "
             f"token{'s' if context != 1 else ''}{where}")
    if cells:
        print_table(console, title, ["model", "format", "bpw", "placement", "ctx", "host GiB", "tok/s", "band",
                                     "ceiling"], cells, left=(0, 1, 3))
    else:
        console.print(title, style="bold")
        # (offloaded rows, llama.cpp's alone, have a speed with --host-memory; only --min-tok-s drops them without)
        host_helps = runtime == "llamacpp" and not host and min_tok_s is not None
        advice = ([f"lower --min-tok-s {min_tok_s:g}"] if min_tok_s is not None else []) + \
            (["raise --wired-limit-gb"] if wired_limit else []) + \
            ([f"lower --context {context:,}"] if context > 1 else []) + \
            (["give --host-memory for the offloaded ones' speed"] if host_helps else [])
        why = f" ({', or '.join(advice)})" if advice else " (not even the smallest at one token: the card's memory)"
        console.print(f" none: no model/format pair is left{why}", markup=False, highlight=False)
    for n in [*notes, *sorted({r.note for r in rows if r.note})]:
        console.print(f" {n}", style="dim", markup=False, highlight=False)
    order = "largest model first (--sort size)" if sort == "size" else "fastest expected first"
    kept = []
    if min_tok_s is not None:
        kept.append(f"expected at {min_tok_s:g} tok/s or more (--min-tok-s; rows without a figure dropped)")
    if one_per_model:
        kept.append("one a model, its best format; --all-formats keeps every one")
    what = f"{total} kept of {fitting} fitting model/format pairs ({', '.join(kept)})" if kept and fitting is not None \
        else f"{total} fitting model/format pairs"
    if not rows:
        counted = f"0 of {what}" if total or fitting else "No model/format pair fits"
        console.print(f"{counted}; {skipped} pair(s) could not be planned.", style="dim")
        return
    console.print(f"{len(rows)} of {what} shown (--top), {order}; {skipped} "
                  "pair(s) could not be planned. tok/s: expected decode at batch 1 (band: held-out p5-p95; "
                  "ceiling: the bandwidth-bound ceiling, tok/s, with that placement); bpw: bits "
                  "per quantized weight (a GGUF file's "
                  "average over its quantized tensors, else the format's bits with its scales; 16-bit tensors aside); "
                  "ctx: the "
                  "longest context one sequence can hold with that placement; host GiB: what an offloaded "
                  "placement leaves in system RAM (--host-ram-gib drops those that do not fit).", style="dim")
