"""ModelOpt's hf_quant_config.json: the quant_algo of a whole checkpoint, and a MIXED_PRECISION export's
quantized_layers (a format per layer) -> a recipe, a format per component (estimate.quant.recipe_format)."""

from __future__ import annotations

import re

from llmsize.errors import shown
from llmsize.estimate.quant import recipe_format
from llmsize.importer.config_fields import ConfigError
from llmsize.importer.module_names import layers_with, part_of

# ModelOpt's quant_algo per layer (modelopt/torch/export/model_config.py QUANTIZATION_*) -> llmsize's format
MODELOPT_ALGOS = {"NVFP4": "nvfp4", "FP8": "fp8", "W4A16_AWQ": "awq-int4-g128"}
MODELOPT_LAYER_ALGOS = {**MODELOPT_ALGOS, "W4A16_NVFP4": "nvfp4-w4a16", "MXFP8": "mxfp8", "MXFP4": "mxfp4",
                        "FP8_PB_WO": "fp8-block128"}


def mixed_precision(layers, spec_fields: dict, where: str) -> tuple[str, list[str]]:
    """A ModelOpt MIXED_PRECISION export's quantized_layers (module -> {quant_algo, group_size}) -> a recipe (a
    format per component, quant.recipe_format) and notes. Modules outside the text model (MTP, vision) are left
    out, as the estimate leaves their weights in 16 bits; a component in two formats takes the one most of its
    modules have, and one quantized in some layers only is priced in all: both said in a note."""
    if not isinstance(layers, dict) or not layers:
        raise ConfigError(f"{where}: quant_algo MIXED_PRECISION without a quantized_layers table.",
                          "Give the hf_quant_config.json its exporter wrote (ModelOpt lists each layer's quant_algo).")
    seen: dict[str, dict[str, int]] = {}
    layer_ids: dict[str, set[int]] = {}
    unplaced = 0
    for module, meta in layers.items():
        algo = meta.get("quant_algo") if isinstance(meta, dict) else meta
        fid = MODELOPT_LAYER_ALGOS.get(algo) if isinstance(algo, str) else None
        if fid is None:
            raise ConfigError(f"{where}: quantized_layers gives {shown(str(module), 80)} quant_algo "
                              f"{shown(repr(algo), 40)}, which llmsize does not price.",
                              f"Supported per layer: {', '.join(MODELOPT_LAYER_ALGOS)}.")
        part = part_of(str(module))
        if part is None:
            unplaced += 1
            continue
        seen.setdefault(part, {})
        seen[part][fid] = seen[part].get(fid, 0) + 1
        m = re.search(r"layers\.(\d+)\.", str(module))
        if m:
            layer_ids.setdefault(part, set()).add(int(m.group(1)))
    if not seen:
        raise ConfigError(f"{where}: no module of quantized_layers is one of the text model's layers.",
                          "Check that the hf_quant_config.json belongs to this config.json.")
    recipe, notes = {}, []
    for part, counts in seen.items():
        fid = max(counts, key=lambda f: (counts[f], f))
        recipe[part] = fid
        if len(counts) > 1:
            notes.append(f"{part}: " + ", ".join(f"{n} modules {f}" for f, n in sorted(counts.items()))
                         + f"; priced as {fid} (the safetensors headers count them exactly)")
        want = layers_with(spec_fields, part)
        have = len(layer_ids.get(part, ()))
        if want and have and have < want:
            notes.append(f"{part} quantized in {have} of {want} layers; priced in all of them (the safetensors "
                         "headers count them exactly)")
    if unplaced:
        notes.append(f"{unplaced} quantized modules outside the text model (MTP, vision) are priced in 16 bits")
    return recipe_format(recipe).id, notes
