"""llama.cpp with part of the model in host memory: llmsize's offload model (llmsize/estimate/offload.py) against
published runs (tests/data/offload_runs.yaml).

    python benchmarks/offload_speed.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from llmsize.catalog.loader import Catalog  # noqa: E402
from llmsize.estimate.runtimes import backend, constants
from llmsize.estimate.host_memory import host_memory, platforms  # noqa: E402
from llmsize.estimate.llamacpp_options import LlamaCppOptions
from llmsize.estimate.llamacpp_plan import llamacpp_plan
from llmsize.estimate.plan import PlanInputs, make_plan  # noqa: E402
from llmsize.estimate.speed import format_class  # noqa: E402
from llmsize.estimate.llamacpp_options import card_bytes

RUNS = ROOT / "tests" / "data" / "offload_runs.yaml"


def offload(run: dict, cat: Catalog, output_first: bool = True):
    """The run's plan's offload (llmsize.estimate.offload.OffloadSpeed), or None where the model fits the card;
    `output_first=False` places -ngl's layers as llama.cpp builds before PR #18148 did."""
    p = run["plan"]
    g, m = cat.gpu(p["gpu"]), cat.model(p["model"])
    prompt = p.get("prompt", 512)
    context = p.get("context", prompt)
    plan = make_plan(m, g, PlanInputs(quant=p["quant"], context_tokens=context, prompt_tokens=prompt),
                     search_fit=False)
    spec = next(r for r in cat.runtimes.all() if r.id == "llamacpp")
    c = constants(spec, backend(g))
    o = LlamaCppOptions(context, ubatch_size=p.get("ubatch", 512), n_cpu_moe=p.get("n_cpu_moe", 0),
                        cpu_moe=p.get("cpu_moe", False), gpu_layers=p.get("gpu_layers"), output_first=output_first)
    host = host_memory(p.get("host_memory", "DDR5-6000x2"), None, platforms(cat.hosts.all()))
    return llamacpp_plan(plan, None, "llamacpp", o, host, c, card_bytes(g), False, format_class(p["quant"])).offload


def predicted(run: dict, cat: Catalog, output_first: bool = True) -> float | None:
    off = offload(run, cat, output_first)
    if off is None:
        return None
    if run["kind"] == "prefill":
        return run["plan"].get("prompt", 512) / off.prefill_s if off.prefill_s else None
    return off.decode_tok_s


def copy_share(run: dict, cat: Catalog) -> float | None:
    """For a prefill run: the PCIe copy time the published figure leaves once the prompt's compute (as modelled) is
    taken out, over the copy time modelled: below 1, fewer bytes crossed than the model copies (uniform routing)."""
    off = offload(run, cat) if run["kind"] == "prefill" else None
    if off is None or not off.prefill_copy_s:
        return None
    needed = run["plan"].get("prompt", 512) / float(run["tok_s"]) - (off.prefill_s - off.prefill_copy_s)
    return needed / off.prefill_copy_s


def comparisons(cat: Catalog | None = None, output_first: bool = True) -> list[tuple[str, str, float | None, float]]:
    cat = cat or Catalog()
    return [(r["id"], r["kind"], predicted(r, cat, output_first), float(r["tok_s"]))
            for r in yaml.safe_load(RUNS.read_text())]


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Offloaded llama.cpp runs: predicted against published.")
    ap.add_argument("--output-last", action="store_true", help="place -ngl's layers as builds before llama.cpp PR "
                    "#18148 did (the last N repeating layers, the output only with N > the layer count)")
    output_first = not ap.parse_args().output_last
    cat = Catalog()
    runs = {r["id"]: r for r in yaml.safe_load(RUNS.read_text())}
    print(f"{'run':54} {'kind':8} {'predicted tok/s':>15} {'published':>10} {'error':>7} {'copy share':>10}")
    for rid, kind, pred, got in comparisons(cat, output_first):
        err = f"{(pred - got) / got * 100:+6.1f}%" if pred else "      -"
        share = copy_share(runs[rid], cat)
        print(f"{rid:54} {kind:8} {pred or 0:15.1f} {got:10.1f} {err} {'' if share is None else f'{share:10.2f}'}")
    print("copy share (prefill): the PCIe copy the published figure leaves after the prompt's modelled compute, over "
          "the copy modelled")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
