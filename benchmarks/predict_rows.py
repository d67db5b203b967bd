"""Price a measurement file's rows with the shipped constants (runtimes/*.yaml), before the fit sees them.

    python benchmarks/predict_rows.py [--hybrid-prompts] measurements/FILE.yaml [...]

For each row: why the fit would skip it (the reason fit_speed.py prints), or measured / predicted speed (decode:
tok/s; a prompt: its rate, i.e. predicted time / measured time). A new source priced this way, before
`fit_speed.py --write` takes it in, is an out-of-sample test of the step model; with runtimes/*.yaml checked out as
at an earlier commit (`git checkout REV -- runtimes`) it prices the rows as that commit's fit would have.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmsize.catalog.loader import Catalog  # noqa: E402
from llmsize.catalog.measurement import load_file  # noqa: E402
from llmsize.errors import LlmsizeError  # noqa: E402
from llmsize.estimate.runtimes import constants
from llmsize.estimate.observed import card_of, observe  # noqa: E402
from llmsize.estimate.speed import decode_step_time_s, prefill_time_s  # noqa: E402


def price(path: Path, cat: Catalog, hybrid_prompts: bool = False) -> list[tuple[int, str, float | None, str | None]]:
    """(row index, what the row is, measured / predicted or None, why it is skipped or None) per row;
    `hybrid_prompts`: a hybrid's prompt rows priced too (the fit skips them; expected.RECURRENT_PREFILL_RANGE
    quotes their span)."""
    f = load_file(path)
    out = []
    for i, row in enumerate(f.rows):
        what = f"{row.card_id} x{row.gpus} {row.model_id or row.shape_of} {row.format} batch {row.batch} {row.kind}"
        if not (row.card_id or row.card_any_of) or not (row.model_id or row.shape_of):
            out.append((i, what, None, "card or model not in the catalog"))
            continue
        try:
            gpu, model = card_of(row, cat), cat.model(row.model_id or row.shape_of)
        except LlmsizeError as e:
            out.append((i, what, None, e.message))
            continue
        if isinstance(gpu, str):
            out.append((i, what, None, gpu))
            continue
        published = str(f.source.published) if f.source.published else None
        o = observe(row, f.runtime, path.stem, model, gpu, published=published, hybrid_prompts=hybrid_prompts)
        if isinstance(o, str):
            out.append((i, what, None, o))
            continue
        c = constants(cat.runtimes.get(f.runtime), o.backend, gpu, unfitted_card=True)  # a row left out, as if not
        if c is None:
            out.append((i, what, None, f"no fitted {f.runtime} constants on this backend"))
            continue
        predicted_s = decode_step_time_s(o.step, c) if o.step is not None else prefill_time_s(o.prefill, c)
        out.append((i, what, predicted_s / o.measured_s if predicted_s else None, None))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--hybrid-prompts", action="store_true",
                    help="price a hybrid's prompt rows too (the fit skips them; the plan's hybrid notes quote them)")
    args = ap.parse_args()
    cat = Catalog()
    for path in args.files:
        rows = price(path, cat, args.hybrid_prompts)
        ratios = sorted(r for _, _, r, _ in rows if r is not None)
        span = f"{ratios[0]:.2f}-{ratios[-1]:.2f}, median {ratios[(len(ratios) - 1) // 2]:.2f}" if ratios else "-"
        print(f"{path}: {len(ratios)} of {len(rows)} rows priced, measured / predicted {span}")
        for i, what, ratio, why in rows:
            print(f"  #{i:<3} {what}: " + (f"{ratio:.2f}" if ratio is not None else f"skipped ({why})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
