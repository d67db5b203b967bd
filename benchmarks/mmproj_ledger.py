"""An mmproj's buffers: llmsize's prediction (llmsize/estimate/mmproj.py) against published llama.cpp logs
(tests/data/mmproj_logs.yaml), one line per logged figure.

    python benchmarks/mmproj_ledger.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from llmsize.catalog.loader import Catalog  # noqa: E402
from llmsize.estimate.mmproj import projector  # noqa: E402

LOGS = ROOT / "tests" / "data" / "mmproj_logs.yaml"
MiB = 2**20


def rows(catalog: Catalog) -> list[tuple[str, str, float, float]]:
    """(log id, figure, logged MiB, predicted MiB) for each figure a log prints."""
    out = []
    for log in yaml.safe_load(LOGS.read_text()):
        plan = log["plan"]
        p = projector(catalog.model(plan["model"]), plan["mmproj"], plan["flash_attn"])
        for key, predicted in (("weights_mib", p.weight_bytes), ("compute_mib", p.compute_bytes)):
            if key in log:
                out.append((log["id"], key.removesuffix("_mib"), float(log[key]), predicted / MiB))
    return out


def main() -> None:
    print(f"{'log':<26} {'figure':<8} {'logged MiB':>11} {'llmsize MiB':>12} {'error':>7}")
    for log_id, figure, logged, predicted in rows(Catalog()):
        print(f"{log_id:<26} {figure:<8} {logged:>11,.2f} {predicted:>12,.2f} {predicted / logged - 1:>+7.1%}")


if __name__ == "__main__":
    main()
