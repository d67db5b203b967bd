"""llama.cpp's start-up buffers: llmsize's prediction (llmsize/estimate/llamacpp_memory.py) against published logs
(tests/data/llamacpp_logs.yaml), one line per logged buffer.

    python benchmarks/llamacpp_ledger.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from llmsize.catalog.loader import Catalog  # noqa: E402
from llmsize.catalog.schema import ModelSpec  # noqa: E402
from llmsize.estimate.llamacpp_memory import LlamaCppSettings, gguf_file_tensors, llamacpp_ledger  # noqa: E402

LOGS = ROOT / "tests" / "data" / "llamacpp_logs.yaml"
MiB = 2**20
BUFFER = re.compile(r"(\S+)\s+(model|KV|RS|compute|output) buffer size =\s*([\d.]+) MiB")
# The host's compute buffer holds one copy of the input embedding in builds to b7772 (the logs: b4485-b7772) and two
# from b7896 (b7896-b8999, and the 2026 builds that print no version), as the ledger sizes it for current builds: a
# log of an older build is compared with one copy. (A build number is read from the log's `build`.)
TWO_EMBEDDING_COPIES_FROM = 7800


def inline_model(log: dict) -> ModelSpec:
    spec = dict(log["plan"]["spec"])
    spec.update(id=log["id"].replace("_", "-"), name=log["id"], family="inline", sources=[log["source"]["url"]], params_official=1,
                params_official_source="not used", params_official_includes="not used",
                release={"quant": "bf16", "scope": "all"})
    return ModelSpec.model_validate(spec)


def logged(log: dict) -> dict[str, float]:
    """Bytes per (device, kind) the log prints, summed over its lines."""
    out: dict[str, float] = {}
    for line in log["lines"]:
        m = BUFFER.search(line)
        if m:
            dev, kind = m.group(1), m.group(2)
            dev = "CPU" if dev.startswith("CPU") or dev.endswith("_Host") else "GPU"  # CUDA_Host, Vulkan_Host, ROCm_Host
            key = f"{dev} {kind}" if kind not in ("output", "RS") else kind
            out[key] = out.get(key, 0.0) + float(m.group(3)) * MiB
    return out


def build_number(log: dict) -> int | None:
    """The llama.cpp build a log prints ("build: 8179 (ecbcb7ea9)", "b8680-15f786e65"), None where it prints none."""
    text = str(log.get("build") or "")
    m = re.search(r"(?:build|version):\s*(\d{4,5})\b", text) or re.match(r"\s*b?(\d{4,5})\b", text)
    return int(m.group(1)) if m else None


def predicted(log: dict, cat: Catalog) -> dict[str, float]:
    p = log["plan"]
    model = cat.model(p["model"]) if "model" in p else inline_model(log)
    tensors = gguf_file_tensors(model, p["quant"]) if "quant" in p else []
    settings = LlamaCppSettings(**p["settings"])
    led = llamacpp_ledger(model, cat.gpu(p["gpu"]), tensors, settings)
    out = {"output": led.output_buffer_bytes, "RS": led.recurrent_bytes}
    for d in led.devices:
        dev = "CPU" if d.name == "CPU" else "GPU"
        out[f"{dev} model"], out[f"{dev} KV"], out[f"{dev} compute"] = d.model_bytes, d.kv_bytes, d.compute_bytes
    build = build_number(log)
    if build is not None and build < TWO_EMBEDDING_COPIES_FROM and "CPU compute" in out:
        out["CPU compute"] -= min(led.n_ctx, settings.ubatch_size) * 4 * model.hidden_size  # one copy, not two
    return out


def comparisons(cat: Catalog | None = None) -> list[tuple[str, str, float, float]]:
    """(log id, buffer, predicted bytes, logged bytes) for every buffer a log prints and the plan can size."""
    cat = cat or Catalog()
    rows = []
    for log in yaml.safe_load(LOGS.read_text()):
        pred = predicted(log, cat)
        for key, value in logged(log).items():
            if "model" in key and "quant" not in log["plan"]:
                continue  # no file behind an inline model: its tensors are not known
            rows.append((log["id"], key, float(pred.get(key, 0.0)), value))
    return rows


def known_misses() -> dict[tuple[str, str], str]:
    """(log id, buffer) -> why, for the buffers a log's `misses` says the ledger does not size as that run did."""
    return {(log["id"], key): why for log in yaml.safe_load(LOGS.read_text()) for key, why in
            (log.get("misses") or {}).items()}


def main() -> int:
    cat = Catalog()
    misses = known_misses()
    print(f"{'log':44} {'buffer':12} {'predicted MiB':>14} {'logged MiB':>11} {'error':>8}")
    for lid, key, pred, got in comparisons(cat):
        err = (pred - got) / got if got else 0.0
        print(f"{lid:44} {key:12} {pred / MiB:14.2f} {got / MiB:11.2f} {err * 100:+7.2f}%"
              + ("  (known: see the log's misses)" if (lid, key) in misses else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
