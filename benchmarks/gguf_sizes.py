"""GGUF file sizes: llama-quantize's per-tensor rules (llmsize/estimate/gguf_mix.py) against published files.

Every llama.cpp row of measurements/ that prints its file's size (llama-bench `model_size`: the tensors' bytes)
for a catalog model and a file type, once per (model, file type); beside it the pure block type of the old
estimate, to show what the per-tensor rules add.

    python benchmarks/gguf_sizes.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmsize.catalog.loader import Catalog  # noqa: E402
from llmsize.catalog.measurement import format_id, load_dataset, printed_bytes  # noqa: E402
from llmsize.estimate.gguf_blocks import FILE_TYPES  # noqa: E402
from llmsize.estimate.quant import FORMATS, quant_format  # noqa: E402
from llmsize.estimate.weights import weight_bytes  # noqa: E402


# Unsloth's dynamic quants (files named ...-UD-Q4_K_XL.gguf, -UD-Q8_K_XL) keep the file type of their base recipe
# in their header, so llama-bench prints "Q4_K - Medium" or "Q8_0", but choose each tensor's type their own way
# (2-20% larger than llama-quantize's rules on the Strix Halo logs): not a file of that recipe
UNSLOTH_DYNAMIC = "-UD-"


def rows():
    seen = {}
    for stem, f in load_dataset(ROOT / "measurements").items():
        if f.runtime != "llamacpp":
            continue
        for r in f.rows:
            fid = format_id("llamacpp", r.format)
            mid = r.model_id or r.shape_of
            if UNSLOTH_DYNAMIC in f"{r.where or ''} {r.test} {r.model}":
                continue
            if r.model_size and mid and fid and fid.startswith("gguf-"):
                seen.setdefault((mid, fid), (r.model_size, printed_bytes(r.model_size), stem))
    return seen


def main() -> int:
    cat = Catalog()
    print(f"{'model':18} {'file type':16} {'published':>11} {'per-tensor':>11} {'err':>7} {'pure block':>11} "
          f"{'err':>7}   source")
    errs = []
    for (mid, fid), (printed, size, stem) in sorted(rows().items()):
        model = cat.model(mid)
        mix = weight_bytes(model, quant_format(fid), "all").bytes_total
        pure_id = "ggml-" + FILE_TYPES[fid.removeprefix("gguf-")]
        pure = weight_bytes(model, FORMATS[pure_id], "all").bytes_total if pure_id in FORMATS else None
        e = mix / size - 1
        errs.append(abs(e))
        pe = f"{pure / 2**30:8.2f} GiB {pure / size - 1:+7.1%}" if pure else f"{'-':>11} {'-':>7}"
        print(f"{mid:18} {fid:16} {printed:>11} {mix / 2**30:7.2f} GiB {e:+7.2%} {pe}   measurements/{stem}.yaml")
    errs.sort()
    print(f"\n{len(errs)} files; per-tensor rules within 1%: {sum(e <= 0.01 for e in errs)}; "
          f"median |error| {errs[len(errs) // 2]:.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
