"""compressed-tensors quantization_config: the weights scheme of its config groups -> a format, and a checkpoint
whose groups give different modules different formats (its format "mixed-precision") -> a recipe."""

from __future__ import annotations

from llmsize.errors import shown
from llmsize.estimate.quant import recipe_format
from llmsize.importer.config_fields import ConfigError
from llmsize.importer.module_names import checked_names, ignores, probe_names, targets_take


def single_format(qc: dict, where: str) -> tuple[str, str | None]:
    groups = [g for g in (qc.get("config_groups") or {}).values() if isinstance(g, dict)]
    fmt = qc.get("format") if qc.get("format") != "mixed-precision" else None
    fmt = fmt or next((g.get("format") for g in groups if g.get("format")), None)
    w = next((g.get("weights") for g in groups if g.get("weights")), {}) or {}
    return ct_weights(fmt, w, where)


def ct_recipe(qc: dict, spec_fields: dict, where: str, model_type: str | None = None) -> tuple[str, list[str]] | None:
    """A compressed-tensors config whose groups give different formats to different modules (its `format`
    "mixed-precision": FP8 attention beside NVFP4 MLPs, say) -> a recipe (quant.recipe_format) and notes, by
    matching each group's targets and the ignore list against each component's module names in every layer; None
    where one format covers all that is quantized (the scope then comes from the ignore list)."""
    groups = [g for g in (qc.get("config_groups") or {}).values() if isinstance(g, dict) and g.get("weights")]
    fmts = [ct_weights(g.get("format") or (qc.get("format") if qc.get("format") != "mixed-precision" else None),
                        g.get("weights") or {}, where)[0] for g in groups]
    if len(set(fmts)) < 2:
        return None
    ignore = checked_names(qc.get("ignore"), "its ignore list", where)
    for g in groups:
        checked_names(g.get("targets"), "a config group's targets", where)

    def fmt_of(name: str) -> tuple[str | None, bool]:
        """The format a module takes and whether a pattern names it (the ignore list, or a group's regex or name)
        rather than the class Linear, which takes every naming of it, this checkpoint's or not."""
        if ignores(ignore, name):
            return None, True
        for g, f in zip(groups, fmts):
            how = targets_take(g.get("targets"), name)
            if how:
                return f, how == "name"
        return None, False

    # per layer that has the component, the formats its modules take under each naming: those a pattern names
    # where one does (a naming no pattern takes is another model's: Qwen3-Next's in_proj_qkvz beside Qwen3.5's
    # in_proj_qkv), else what the class Linear gives, else 16 bits
    cells = {**probe_names(spec_fields, model_type), "lm_head": [["lm_head"]]}
    recipe, notes = {}, []
    for part, layers in cells.items():
        counts: dict[str | None, int] = {}
        for names in layers:
            taken = [fmt_of(n) for n in names]
            named = {f for f, by_name in taken if by_name}
            for fid in named or ({f for f, _ in taken} - {None}) or {None}:
                counts[fid] = counts.get(fid, 0) + 1
        if set(counts) == {None}:
            continue
        fid = max(counts, key=lambda f: (counts[f], f or ""))
        if fid is not None:
            recipe[part] = fid
        if len(counts) > 1:
            share = ", ".join(f"{n} {f or '16-bit'}" for f, n in sorted(counts.items(), key=lambda kv: -kv[1]))
            notes.append(f"{part}: the config groups give its layers {share}; priced as {fid or '16-bit'} (the "
                         "safetensors headers count them exactly)")
    if not recipe:
        return None
    return recipe_format(recipe).id, notes


def ct_weights(fmt: str | None, w: dict, where: str) -> tuple[str, str | None]:
    """One compressed-tensors weights scheme (and the format that packs it) -> a format id and a note."""
    bits, typ, gs = w.get("num_bits"), w.get("type"), w.get("group_size")
    if fmt == "nvfp4-pack-quantized" or (bits == 4 and typ == "float" and gs == 16):
        return "nvfp4", None
    if fmt == "mxfp4-pack-quantized" or (bits == 4 and typ == "float" and gs == 32):  # E2M1, a uint8 E8M0 scale a 32
        return "mxfp4", None
    if fmt == "float-quantized" or (bits == 8 and typ == "float"):
        if w.get("strategy") == "block":
            return "fp8-block128", None
        return "fp8", None
    symmetric = w.get("symmetric", True)
    if symmetric is None:
        symmetric = True
    if not isinstance(symmetric, bool) or (gs is not None and (type(gs) is not int or gs <= 0)) or (
            bits is not None and type(bits) is not int):
        raise ConfigError(f"{where}: compressed-tensors weights have symmetric {shown(repr(symmetric), 20)}, "
                          f"group_size {shown(repr(gs), 20)}, num_bits {shown(repr(bits), 20)}; expected a boolean and "
                          "positive integers.",
                          "Fix quantization_config.")
    if fmt == "pack-quantized" and bits == 8 and typ == "int":  # W8A16 packed: 8-bit integers
        return "int8", None if gs is None else f"8-bit weights in groups of {gs} priced as int8 (one scale a tensor)"
    if fmt == "pack-quantized" and bits not in (None, 4):
        raise ConfigError(f"{where}: compressed-tensors pack-quantized with {bits}-bit weights is not supported.",
                          "Supported: 4-bit int (groups of 32 or 128), 8-bit int, nvfp4, FP8.")
    if fmt == "pack-quantized" or (bits == 4 and typ == "int"):
        if gs == 32:
            return ("int4-g32", None) if symmetric else ("int4-g32-zp", "zero points priced as BF16 (packed 4-bit)")
        fmt_id = "int4-g128" if symmetric else "int4-g128-zp"
        return fmt_id, (None if gs in (None, 128) else f"group size {gs} priced as 128")
    if fmt in ("int-quantized", "naive-quantized") or (bits == 8 and typ == "int"):
        return "int8", None
    if fmt is None and bits is None and typ is None:  # nothing read: no config_groups weights, no format
        raise ConfigError(f"{where}: compressed-tensors quantization_config names no format and no weights scheme "
                          "(config_groups ... weights).", "Fix quantization_config, or plan with --quant.")
    raise ConfigError(f"{where}: compressed-tensors format {fmt!r} ({bits}-bit {typ}) is not supported.",
                      "Supported: nvfp4-pack-quantized, mxfp4-pack-quantized, float-quantized (FP8), pack-quantized "
                      "(int4), int8.")
