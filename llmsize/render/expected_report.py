"""The expected-speed section of `plan`: text and JSON."""

from __future__ import annotations

import textwrap

from rich.console import Console

from llmsize.estimate.expected import ExpectedResult
from llmsize.estimate.runtimes import RUNTIME_NAMES
from llmsize.estimate.speed import CLASS_WORDS
from llmsize.units import fmt_bytes


def expected_to_dict(r: ExpectedResult) -> dict:
    e = r.expected
    d = {"runtime": r.runtime, "runtime_why": r.runtime_why}
    if e is None:
        return {**d, "backend": r.backend, "tok_s": None, "tok_s_low": None, "tok_s_high": None,
                "aggregate_tok_s": None,
                "ttft_s": None, "basis": None, "reason": r.reason}
    return {**d, "backend": e.backend, "tok_s": e.tok_s, "tok_s_low": e.tok_s_low, "tok_s_high": e.tok_s_high,
            "batch": e.batch, "aggregate_tok_s": e.aggregate_tok_s, "aggregate_tok_s_low": e.aggregate_tok_s_low,
            "aggregate_tok_s_high": e.aggregate_tok_s_high, "ttft_s": e.ttft_s, "ttft_s_low": e.ttft_s_low,
            "ttft_s_high": e.ttft_s_high, "ttft_reason": e.ttft_reason, "spec_tok_s": e.spec_tok_s,
            "spec_tok_s_low": e.spec_tok_s_low, "spec_tok_s_high": e.spec_tok_s_high, "ceiling_tok_s": e.ceiling_tok_s,
            "basis": e.basis, "step_terms_s": e.terms_s, "calibrated_step_s": e.calibrated_step_s,
            "weight_streams": [{"kernels": cls, "words": CLASS_WORDS.get(cls, cls), "bandwidth_fraction": eta,
                                "bytes_per_card": b} for cls, eta, b in e.weight_streams],
            "notes": list(e.notes)}


def _ms(s: float) -> str:
    return f"{s * 1000:,.1f} ms" if s < 10 else f"{s:,.1f} s"


def render_expected(r: ExpectedResult, plan, c: Console) -> None:
    name = RUNTIME_NAMES[r.runtime] + (" on Vulkan" if r.backend == "vulkan" else "")  # (None where it cannot run)
    c.print(f"\nExpected in {name} ({r.runtime_why})", style="bold")
    e = r.expected
    if e is None:
        _wrapped(c, f"no figure: {r.reason}.")
        return
    # the cache read at the whole --context (a full window; a short chat reads less of it: --context N prices one)
    c.print(f"  decode, batch 1      {e.tok_s:,.1f} tok/s at a {plan.decode_1.context_tokens:,}-token context (band "
            f"{e.tok_s_low:,.1f}-{e.tok_s_high:,.1f}; ceiling "
            f"{e.ceiling_tok_s if e.ceiling_tok_s is not None else plan.decode_ceiling_tok_s:,.1f})")
    if e.spec_tok_s is not None:
        c.print(f"  with --spec, batch 1 {e.spec_tok_s:,.1f} tok/s (band {e.spec_tok_s_low:,.1f}-"
                f"{e.spec_tok_s_high:,.1f}; ceiling {plan.speculative.ceiling_tok_s:,.1f})")
    if e.batch > 1 and e.aggregate_tok_s is None:
        c.print(f"  decode, batch {e.batch:<6} not estimated (see the notes)")
    elif e.batch > 1:
        c.print(f"  decode, batch {e.batch:<6} {e.aggregate_tok_s:,.1f} tok/s all sequences (band "
                f"{e.aggregate_tok_s_low:,.1f}-{e.aggregate_tok_s_high:,.1f})")
    if e.ttft_s is not None:
        c.print(f"  time to first token  {_ms(e.ttft_s)} for {plan.prompt_tokens:,} tokens (band "
                f"{_ms(e.ttft_s_low)}-{_ms(e.ttft_s_high)})")
    else:
        _wrapped(c, f"time to first token  no figure: {e.ttft_reason or 'not estimated'}.")
    t = e.terms_s
    total = sum(t.values())
    fitted = "" if e.calibrated_step_s is None else f" (the fit's; --calibrate makes it {_ms(e.calibrated_step_s)})"
    _terms(c, f"batch-1 step {_ms(total)}{fitted} = ", [f"{k} {_ms(v)}" for k, v in t.items() if v > 0])
    if e.weight_streams:
        _terms(c, "weights read at", [f"{eta:.2f} of the bandwidth by {CLASS_WORDS.get(cls, cls)} kernels "
                                       f"({fmt_bytes(b)})" for cls, eta, b in e.weight_streams])
    for line in [f"basis: {e.basis}; band = held-out p5-p95.", *(f"note: {n}" for n in e.notes)]:
        _wrapped(c, line, "dim")


def _terms(c: Console, head: str, terms: list[str]) -> None:
    """The step's terms, broken between terms only ("comm 0.8 ms" stays whole)."""
    width, lines, cur = max(40, c.width - 1), [], "  " + head
    for i, term in enumerate(terms):
        piece = term + ("," if i < len(terms) - 1 else "")
        if len(cur) + 1 + len(piece) > width and cur.strip():
            lines.append(cur)
            cur = "    " + piece
        else:
            cur += ("" if cur.endswith("= ") else " ") + piece
    for line in lines + [cur]:
        c.print(line, style="dim", soft_wrap=True)


def _wrapped(c: Console, line: str, style: str | None = None) -> None:
    """One line of the block, wrapped under its own indent within the console's width."""
    c.print(textwrap.fill(line, max(40, c.width - 1), initial_indent="  ", subsequent_indent="    "),
            style=style, soft_wrap=True)
