"""The catalog listed: `llmsize gpus`, `hosts`, `models`, `show`, `formats`."""

from __future__ import annotations

from typing import Annotated

import typer

from llmsize.commands.shared import gib_bytes, load_catalog, make_console, print_json
from llmsize.errors import InvalidValueError, not_one_of, shown
from llmsize.options import (
    CatalogOpt,
    FamilyOpt,
    GpuSortOpt,
    JsonOpt,
    MinMemoryOpt,
    MixerOpt,
    MoeOpt,
    SegmentOpt,
    VendorOpt,
)


def gpus(
    vendor: VendorOpt = None,
    segment: SegmentOpt = None,
    min_memory_gib: MinMemoryOpt = None,
    sort: GpuSortOpt = "bandwidth",
    as_json: JsonOpt = False,
    catalog: CatalogOpt = None,
):
    """List accelerators.

    Examples:

    \b
      llmsize gpus
      llmsize gpus --vendor nvidia --segment consumer
      llmsize gpus --min-memory-gib 80 --sort memory --json
    """
    from llmsize.render.listing import gpu_row, render_gpus

    items = load_catalog(catalog).hardware.all()
    if vendor:
        items = [g for g in items if g.vendor.lower() == vendor]
    if segment:
        items = [g for g in items if g.segment == segment]
    if min_memory_gib is not None:
        items = [g for g in items if g.memory_bytes >= gib_bytes(min_memory_gib)]
    keys = {"bandwidth": lambda g: -g.bandwidth_gb_s, "memory": lambda g: -g.memory_bytes,
            "year": lambda g: -g.year, "id": lambda g: g.id}
    items.sort(key=keys[sort])
    if as_json:
        print_json([gpu_row(g) for g in items])
    else:
        render_gpus(items, make_console())


def hosts(as_json: JsonOpt = False, catalog: CatalogOpt = None):
    """List host memory platforms (for --host-memory): channels, data rate, peak bandwidth.

    Examples:

    \b
      llmsize hosts
      llmsize plan gpt-oss-120b --gpu rtx3090 --quant gguf-mxfp4_moe --engine llamacpp --cpu-moe \\
          --host-memory epyc-9004
    """
    from llmsize.render.listing import host_row, render_hosts

    items = sorted(load_catalog(catalog).hosts.all(), key=lambda h: -h.bandwidth_gb_s)
    if as_json:
        print_json([host_row(h) for h in items])
    else:
        render_hosts(items, make_console())


def models(
    family: FamilyOpt = None,
    mixer: MixerOpt = None,
    moe: MoeOpt = None,
    as_json: JsonOpt = False,
    catalog: CatalogOpt = None,
):
    """List models.

    Examples:

    \b
      llmsize models
      llmsize models --moe
      llmsize models --mixer sliding --json
    """
    from llmsize.render.listing import model_row, render_models

    items = load_catalog(catalog).models.all()
    if family is not None:
        families = sorted({m.family for m in items})  # the catalog's own: a closed set, known once loaded
        if family.lower() not in families:
            raise InvalidValueError(f"--family {not_one_of(family, families)}.", "See `llmsize models`.")
        items = [m for m in items if m.family == family.lower()]
    if mixer:
        items = [m for m in items if any(g.mixer is not None and g.mixer.kind == mixer for g in m.layer_groups)]
    if moe is not None:
        items = [m for m in items if m.is_moe == moe]
    items.sort(key=lambda m: m.id)
    if as_json:
        print_json([model_row(m) for m in items])
    else:
        render_models(items, make_console())


def show(
    name: Annotated[str, typer.Argument(help="A card, model or host platform id (or alias), or a weight format.")],
    as_json: JsonOpt = False,
    catalog: CatalogOpt = None,
):
    """Show one catalog entry (a card, a model, a host platform) with its sources, or a weight format.

    Examples:

    \b
      llmsize show rtx5060ti
      llmsize show gemma-4-12b --json
      llmsize show ryzen-9000
      llmsize show nvfp4
    """
    from llmsize.errors import UnknownNameError
    from llmsize.render.listing import render_entry

    cat = load_catalog(catalog)
    try:
        entry = cat.gpu(name)
    except UnknownNameError as not_card:
        try:
            entry = cat.model(name)
        except UnknownNameError as not_model:
            try:
                entry = cat.hosts.get(name)
            except UnknownNameError as e:  # the near names each shelf suggests
                fmt = format_named(name)
                if fmt is not None:
                    return show_format(fmt, as_json)
                import re

                near = [m.group(1) for m in (re.search(r"Did you mean (.+)\?", x.message)
                                             for x in (not_card, not_model, e)) if m]
                near += [f"`{f}` (a weight format)" for f in format_near(name)]
                said = f" Did you mean {', '.join(near)}?" if near else ""
                raise UnknownNameError(f"`{shown(name)}` is neither a card, a model or a host platform in the "
                                       f"catalog nor a weight format.{said}",
                                       "Run `llmsize gpus`, `llmsize models` or `llmsize hosts` to see them "
                                       "(weight formats: `llmsize formats`).") from e
    if as_json:
        print_json(entry.model_dump(mode="json"))
    else:
        render_entry(entry, make_console())


def format_row(f) -> dict:
    """A weight format as `formats` lists it and `show` shows it."""
    return {"id": f.id, "bits_per_weight": float(f.bits_per_weight), "per_tensor_bytes": f.per_tensor_bytes,
            "default_scope": f.default_scope, "description": f.description, "source": f.source}


def format_named(name: str):
    """The weight format `name` names (an id, or a llama.cpp file type as --quant reads it), or None."""
    from llmsize.errors import InvalidValueError
    from llmsize.estimate.quant import quant_format

    if "=" in name:  # a recipe is --quant's, not a name
        return None
    try:
        return quant_format(name)
    except InvalidValueError:
        return None


def format_near(name: str) -> list[str]:
    """Weight format ids close to `name` (a typo of one)."""
    from llmsize.errors import close_names
    from llmsize.estimate.quant import FORMATS

    return close_names(name.lower(), FORMATS, n=2)


def show_format(f, as_json: bool) -> None:
    """`show FORMAT`: its row, the bits it keeps the rest of the model in and what its cards compute in."""
    row = {**format_row(f), "keep_bits": f.keep_bits, "native_compute": f.native_compute,
           **({"gguf_file_type": f.mix} if f.mix else {})}
    if as_json:
        print_json({"weight_format": row})
        return
    import yaml

    c = make_console()
    c.print(yaml.safe_dump(row, sort_keys=False, width=96).rstrip("\n"), markup=False, highlight=False,
            soft_wrap=True)
    if f.mix:
        c.print("a GGUF file type: the bits are its base type's; llama-quantize mixes types per tensor, so a model's "
                f"average differs (`llmsize plan MODEL --quant {f.id}` prints it)", style="dim")


def formats(as_json: JsonOpt = False):
    """List weight formats with their exact bits per weight.

    Examples:

    \b
      llmsize formats
      llmsize formats --json
    """
    from llmsize.estimate.quant import FORMATS, KV_DTYPE_BYTES, RECIPE_PARTS

    rows = [format_row(f) for f in FORMATS.values()]
    if as_json:
        print_json({"weight_formats": rows, "kv_dtype_bytes": {k: float(v) for k, v in KV_DTYPE_BYTES.items()}})
        return
    from rich import box
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="Weight formats", title_justify="left")
    for col in ("id", "bits/weight", "scope", "what"):
        t.add_column(col, overflow="fold")
    for r, f in zip(rows, FORMATS.values()):  # a GGUF mix's bits depend on the model: its base type's shown
        bits = f"{r['bits_per_weight']:g}" + ("*" if f.mix else "")
        t.add_row(r["id"], bits, r["default_scope"], r["description"])
    from llmsize.render.columns import print_rich

    c = make_console()
    print_rich(c, t)
    c.print("* a GGUF file type: its base type's bits; the file mixes types per tensor by llama-quantize's rules, so "
            "its average depends on the model (`llmsize plan MODEL --quant gguf-q4_k_m` prints it).", style="dim")
    c.print("A recipe gives a format per component, as ModelOpt's MIXED_PRECISION checkpoints do: --quant "
            "experts=nvfp4-w4a16,shared_experts=nvfp4-w4a16,attention=fp8,ssm=fp8,lm_head=nvfp4-w4a16 (components: "
            f"{', '.join(RECIPE_PARTS)}; what it does not name stays 16-bit).", style="dim")
    c.print("KV dtypes (bytes per value): " + ", ".join(f"{k} {float(v):g}" for k, v in KV_DTYPE_BYTES.items()),
            style="dim")
