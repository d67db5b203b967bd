"""An experiment, not the dataset: rewrite the vLLM AccelMark files so that each decode row's ttft_ms_p50 becomes a
prompt row of its own (kind: prefill, as measurements/sglang-accelmark-*.yaml has them), in place.

    python benchmarks/experiments/accelmark_ttft_as_prompt_rows.py
    python benchmarks/predict_rows.py measurements/vllm-accelmark-*.yaml   # priced with the shipped constants
    python benchmarks/fit_speed.py                                         # held out with them in the fit
    git checkout measurements/                                              # back to the dataset

RESULTS.md, "Their times to first token as prompt rows: tried, left out" (2026-12-06)."""

from __future__ import annotations

import re
from pathlib import Path

FILES = ("vllm-accelmark-datacenter-workstation", "vllm-accelmark-geforce-rtx3090-4090-5090",
         "vllm-accelmark-vllm020-a100-b200")
VERBATIM = re.compile(r"verbatim: \['(\"ttft_ms_p50\": [0-9.]+)', ('\"tpot_ms_p50\": [0-9.]+')\]")


def split_row(row: str) -> tuple[str, str]:
    """A decode row with ttft_ms as (the decode row without it, the prompt row of the same run)."""
    ttft = re.search(r"\n  ttft_ms: ([0-9.]+)", row).group(1)
    said = VERBATIM.search(row)
    decode = row.replace(f"\n  ttft_ms: {ttft}", "").replace(said.group(0), f"verbatim: {said.group(2)}")
    prompt = decode.replace(", tpot_ms_p50\n", ", ttft_ms_p50\n").replace("  kind: decode\n", "  kind: prefill\n")
    prompt = re.sub(r"\n  depth_tokens: 0\n  gen_tokens: \d+\n  ms_per_token: [0-9.]+", f"\n  ttft_ms: {ttft}", prompt)
    prompt = prompt.replace(f"verbatim: {said.group(2)}", f"verbatim: '{said.group(1)}'")
    prompt = re.sub(r"lengths are the (suite_\w) p50s \(input (\d+), output \d+\), not fixed lengths",
                    r"prompt length is the \1 p50 (\2), not a fixed length", prompt)
    return decode, prompt


def main() -> None:
    root = Path(__file__).resolve().parents[2] / "measurements"
    for stem in FILES:
        path = root / f"{stem}.yaml"
        head, body = path.read_text().split("rows:\n", 1)
        rows = [r.rstrip("\n") for r in re.split(r"\n(?=- )", body)]
        path.write_text(head + "rows:\n" + "\n".join(part for r in rows for part in split_row(r)) + "\n")
        print(f"{path.name}: {len(rows)} decode rows, {len(rows)} prompt rows")


if __name__ == "__main__":
    main()
