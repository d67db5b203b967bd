"""Catalog listings (`llmsize gpus`, `llmsize models`) and single entries (`llmsize show`)."""

from __future__ import annotations

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.estimate.params import (
    params_active,
    params_active_with_embedding,
    params_comparable_to_official,
    params_total,
)
from llmsize.render.columns import print_rich, print_table
from llmsize.units import GiB, fmt_tokens_k


def gpu_row(g: GpuSpec) -> dict:
    t = g.dense_tflops
    return {
        "id": g.id, "name": g.name, "vendor": g.vendor, "segment": g.segment, "year": g.year,
        "memory_size": g.memory_size, "memory_vendor_unit": g.memory_vendor_unit, "memory_bytes": g.memory_bytes,
        "memory_type": g.memory_type, "bandwidth_gb_s": g.bandwidth_gb_s,
        "dense_tflops": t.model_dump(), "tdp_w": g.tdp_w,
    }


def model_row(m: ModelSpec) -> dict:
    kinds = sorted({g.mixer.kind for g in m.layer_groups if g.mixer})
    mlps = sorted({g.mlp.kind for g in m.layer_groups if g.mlp})
    return {
        "id": m.id, "name": m.name, "family": m.family, "params_total": params_total(m),
        "params_active": params_active(m), "params_active_with_embedding": params_active_with_embedding(m),
        "layers": m.num_layers, "mixers": kinds, "mlps": mlps,
        "release_format": m.release.quant, "max_position_embeddings": m.max_position_embeddings,
    }


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def render_gpus(gpus: list[GpuSpec], console) -> None:
    from rich import box
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="Accelerators (dense TFLOPS, no sparsity)",
              title_justify="left")
    for col, just in [("id", "left"), ("vendor", "left"), ("VRAM GiB", "right"), ("GB/s", "right"),
                      ("bf16", "right"), ("fp8", "right"), ("fp4", "right"), ("W", "right"), ("year", "right")]:
        t.add_column(col, justify=just, no_wrap=True)
    for g in gpus:
        tf = g.dense_tflops
        t.add_row(g.id, g.vendor, f"{g.memory_bytes / GiB:.4g}", _num(g.bandwidth_gb_s),
                  _num(tf.bf16), _num(tf.fp8), _num(tf.fp4), _num(g.tdp_w), str(g.year))
    print_rich(console, t)
    console.print(f"{len(gpus)} cards. VRAM in GiB (2^30 B), as plan sizes it: a vendor's \"24 GB\" card's memory chips "
                  "hold 24 GiB; GB/s decimal (10^9 B/s). `llmsize show ID` for sources.", style="dim")


def _billions(n: int) -> str:
    """Parameters in billions, three figures from 100B up ("1,026B", "671B"), one decimal below ("12.2B")."""
    return f"{n / 1e9:,.0f}B" if n >= 100e9 else f"{n / 1e9:,.1f}B"


def _release_cell(release: str) -> str:
    """A release format as the table prints it: a recipe (COMPONENT=FORMAT,...) as its primary component's format and
    "+mix" ("mxfp4+mix": DeepSeek-V4's FP4 experts beside FP8 layers), the rest being `llmsize show`'s."""
    if "=" not in release:
        return release
    return release.split(",")[0].partition("=")[2] + "+mix"


def render_models(models: list[ModelSpec], console) -> None:
    """The catalog's models as a column table (render/columns.py: no cell cut, "dense+moe" whole)."""
    rows = []
    for m in models:
        r = model_row(m)
        rows.append([m.id, _billions(r["params_total"]), _billions(r["params_active"]), str(r["layers"]),
                     "+".join(r["mixers"]), "+".join(r["mlps"]), _release_cell(r["release_format"]),
                     fmt_tokens_k(m.max_position_embeddings)])
    print_table(console, "Models", ["id", "params", "active", "layers", "mixers", "mlp", "release", "max ctx"], rows,
                left=(0, 4, 5, 6))
    console.print(f"{len(models)} models (B = 10^9 parameters; max ctx: K = 1,000 tokens). active: parameters "
                  "per token, the input embedding excluded (a row is gathered; the lm_head counts); release: +mix, a "
                  "format per component (`llmsize show ID` for them, the layer groups and sources).",
                  style="dim")


def render_entry(entry, console) -> None:
    """One catalog entry as YAML-like text, with its derived figures."""
    import yaml

    data = entry.model_dump(exclude_none=True)
    # as plain text: valid YAML a user can paste into a catalog file (rich's syntax view padded every line to the
    # terminal's width and wrapped long strings where YAML cannot break them)
    console.print(yaml.safe_dump(data, sort_keys=False, width=96).rstrip("\n"), markup=False, highlight=False,
                  soft_wrap=True)
    if isinstance(entry, GpuSpec):
        console.print(f"memory counted as {entry.memory_bytes:,} B = {entry.memory_bytes / GiB:,.2f} GiB", style="dim")
    elif isinstance(entry, ModelSpec):
        comparable = params_comparable_to_official(entry)
        same = "" if comparable == params_total(entry) else \
            f"; {comparable:,} counted as the official figure counts (its extras in, loaded or not)"
        console.print(f"counted: {params_total(entry):,} parameters loaded ({params_active(entry):,} active per "
                      f"token, the input embedding excluded; {params_active_with_embedding(entry):,} with it); "
                      f"official {entry.params_official:,}{same}", style="dim")


def host_row(h) -> dict:
    return {"id": h.id, "name": h.name, "segment": h.segment, "memory_type": h.memory_type, "channels": h.channels,
            "data_rate_mt_s": h.data_rate_mt_s, "bandwidth_gb_s": h.bandwidth_gb_s,
            "bandwidth_printed": h.bandwidth_printed}


def render_hosts(hosts, console) -> None:
    from rich import box
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="Host memory platforms (for --host-memory)",
              title_justify="left")
    for col, just in [("id", "left"), ("segment", "left"), ("memory", "left"), ("channels", "right"),
                      ("GB/s", "right"), ("name", "left")]:
        t.add_column(col, justify=just, no_wrap=col != "name")
    for h in hosts:
        t.add_row(h.id, h.segment, f"{h.memory_type}-{h.data_rate_mt_s}", str(h.channels),
                  f"{h.bandwidth_gb_s:,.1f}" + ("" if h.bandwidth_printed else "*"), h.name)
    print_rich(console, t)
    console.print(f"{len(hosts)} platforms at their fastest supported memory (1 DIMM per channel); GB/s decimal "
                  "peaks, * = channels x MT/s x 8 B where the vendor prints none. Any other: --host-memory "
                  "DDR5-6000x2.", style="dim")
