"""Expected decode rate = the bandwidth ceiling x an efficiency: from a documented table per engine and card
class, or from the user's own `llmsize measure --save` file (--calibrate). No entry, no figure.

Table entries (fraction of the plan's batch-1 ceiling an engine reaches), each with its source:
- vLLM on a consumer card: 45 tok/s measured by seed 000 (shared/seeds) for Gemma 4 12B NVFP4 on an RTX 5060 Ti,
  against plan's 55.0 tok/s ceiling at 448 GB/s (the article's own 59 mixes GB and GiB) -> 0.82.
- vLLM and SGLang on an H100 for a 1B model at batch 1: "at most 50% of available GPU bandwidth" (Hazy Research,
  "Look Ma, No Bubbles", 2025-05-27; shared/reference/fast-decode-notes.md) -> 0.50, for models under 3B
  parameters, where kernel launches dominate.
- A bf16 decode loop in one CUDA graph through cuBLAS on an H200: 73.4% of the NVML theoretical 4,814 GB/s
  (shared/reference/h200-measurements.md), i.e. 3,533 / 4,800 = 0.736 of the datasheet ceiling: the figure for
  a graph-captured engine on a datacenter card.
SGLang shares vLLM's entries (both capture decode in CUDA graphs; no separate measurement here); TensorRT-LLM
has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmsize.errors import InvalidValueError

SMALL_MODEL_PARAMS = 3e9


@dataclass(frozen=True)
class Efficiency:
    value: float
    source: str


TABLE = {
    ("vllm", "consumer", "any"): Efficiency(0.82, "seed 000: vLLM, Gemma 4 12B NVFP4, RTX 5060 Ti, 45 of 55.0 tok/s"),
    ("vllm", "datacenter", "any"): Efficiency(0.736, "h200-measurements.md: CUDA-graph bf16 loop, 3,533 of 4,800 "
                                                     "GB/s on an H200"),
    ("vllm", "any", "small"): Efficiency(0.50, "Hazy Research 2025: vLLM/SGLang at most 50% of H100 bandwidth, "
                                               "Llama-3.2-1B, batch 1"),
}


def table_efficiency(engine: str, segment: str, params_total: int) -> Efficiency | None:
    eng = "vllm" if engine in ("vllm", "sglang") else engine
    size = "small" if params_total < SMALL_MODEL_PARAMS else "any"
    for key in ((eng, segment, size), (eng, "any", size), (eng, segment, "any")):
        if key in TABLE:
            e = TABLE[key]
            if engine == "sglang":
                e = Efficiency(e.value, e.source + " (SGLang assumed equal to vLLM)")
            return e
    return None


def calibrated_efficiency(path: Path) -> Efficiency:
    """From `llmsize measure --save FILE`: measured tok/s over plan's ceiling on that card (the datasheet one,
    else NVML's theoretical), or the achieved fraction of the datasheet bandwidth."""
    from llmsize.files import read_json

    r = read_json(path, "--calibrate")
    try:
        pred, ach = r.get("predicted") or {}, r["achieved"]
        value = pred.get("measured_fraction_of_ceiling_datasheet") or pred.get(
            "measured_fraction_of_ceiling_theoretical") or ach.get("fraction_of_datasheet") or ach.get(
            "fraction_of_theoretical")
        card = (r.get("gpu") or {}).get("name", "?")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise InvalidValueError(f"--calibrate `{path}`: not a `llmsize measure --save` file.",
                                "Give a file written by `llmsize measure --save`.") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1.5:
        raise InvalidValueError(f"--calibrate `{path}`: no usable efficiency in it (GPU figures missing: was it "
                                "a --device cpu run?).", "Calibrate with a GPU measurement.")
    return Efficiency(float(value), f"measured by `llmsize measure` on {card} ({path})")


def expected_tok_s(ceiling_tok_s: float, eff: Efficiency | None) -> float | None:
    return ceiling_tok_s * eff.value if eff else None
