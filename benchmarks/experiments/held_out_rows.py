"""A group's held-out decode rows, as `benchmarks/fit_speed.py --sources RT:BE` computes them, read two ways that
its table does not print: the error on the rows outside some sources (a refit's new sources set apart from the rows
the group had), and each depth sweep's ratio at its shortest and longest context beside the model's query heads a
KV head serves.

    python benchmarks/experiments/held_out_rows.py llamacpp:cuda --without llamacpp-cuda-jiegec-kb-rtx4090 \\
        llamacpp-cuda-pr-22478 llamacpp-cuda-llmfit-community-gb10-2 --depth

Errors and quantiles are fit_speed's own (HeldOut.errors, quantile "high"). RESULTS.md, "Expected speed: llama.cpp's
hybrids on CUDA from four sources" (2026-12-06).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import fit_speed  # noqa: E402

from llmsize.catalog.loader import Catalog  # noqa: E402

_LABEL = re.compile(r"^(\S+) \S+ \d+ x \S+ batch 1 context ([\d,]+)$")


def decode_rows(group: str) -> fit_speed.HeldOut:
    """The group's held-out decode rows, captured where fit_speed's --sources prints them."""
    got = {}

    def keep(rt, be, ho, kind="decode"):
        got.setdefault(kind, ho)

    fit_speed.print_sources = keep
    with contextlib.redirect_stdout(io.StringIO()):
        fit_speed.run(False, False, group)
    return got["decode"]


def summary(errors: list[float]) -> str:
    return (f"{len(errors)} rows, {fit_speed.median(errors):.1%} / {fit_speed.quantile(errors, 0.9, 'high'):.1%} "
            "median / p90")


def group_size(model) -> int:
    """The most query heads a KV head serves in any attention layer of the model."""
    return max((g.mixer.num_attention_heads // g.mixer.num_key_value_heads for g in model.layer_groups
                if g.mixer is not None and getattr(g.mixer, "num_key_value_heads", 0)), default=1)


def by_group(ho: fit_speed.HeldOut, by: str) -> None:
    """Each model's, card's or (model, card)'s held-out rows: how many, their median measured / predicted and their
    median error (fit_speed's HeldOut.ratios and .errors)."""
    groups = defaultdict(list)
    for ratio, error, (_, card), label in zip(ho.ratios, ho.errors, ho.sources, ho.labels):
        model = label.split()[0]
        groups[{"model": model, "card": card, "model-card": f"{model} {card}"}[by]].append((ratio, error))
    print(f"\nBy {by}: rows, median measured / predicted, median error")
    for name, rows in sorted(groups.items()):
        print(f"  {name:44} {len(rows):4}  {fit_speed.median([r for r, _ in rows]):.2f}  "
              f"{fit_speed.median([e for _, e in rows]):.1%}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("group", help="RUNTIME:BACKEND, as fit_speed.py --sources takes it")
    ap.add_argument("--without", nargs="*", default=[], metavar="SOURCE", help="sources set apart")
    ap.add_argument("--depth", action="store_true", help="each depth sweep's ratio at its ends")
    ap.add_argument("--by", choices=("model", "card", "model-card"), help="the rows' median measured / predicted and "
                    "median error by model, card, or both")
    a = ap.parse_args()
    ho = decode_rows(a.group)
    print(f"{a.group} decode, held out: {summary(ho.errors)}")
    if a.by:
        by_group(ho, a.by)
    if a.without:
        apart = [src in a.without for src, _ in ho.sources]
        print(f"  outside {', '.join(a.without)}: {summary([e for e, x in zip(ho.errors, apart) if not x])}")
        print(f"  theirs: {summary([e for e, x in zip(ho.errors, apart) if x])}")
    if a.depth:
        cat = Catalog()
        sweeps = defaultdict(list)
        for ratio, (src, _), label in zip(ho.ratios, ho.sources, ho.labels):
            m = _LABEL.match(label)
            if m:
                sweeps[(src, m.group(1))].append((int(m.group(2).replace(",", "")), ratio))
        print("\nDepth sweeps (a source's rows of one model at 2 contexts or more, the longest 8,192 or more): mean "
              "measured / predicted at the shortest and longest context")
        for (src, model), pts in sorted(sweeps.items()):
            ctxs = sorted({c for c, _ in pts})
            if len(ctxs) < 2 or ctxs[-1] < 8192:
                continue
            ends = [[r for c, r in pts if c == end] for end in (ctxs[0], ctxs[-1])]
            print(f"  {src:42} {model:18} {group_size(cat.model(model))} q heads a KV head, context {ctxs[0]:,} -> "
                  f"{ctxs[-1]:,}: {sum(ends[0]) / len(ends[0]):.2f} -> {sum(ends[1]) / len(ends[1]):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
