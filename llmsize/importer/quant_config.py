"""quantization_config (config.json) and hf_quant_config.json -> the release format and its scope.

Layouts and field names: shared/reference/nvfp4-checkpoints.md (compressed-tensors, ModelOpt), gpt-oss's
config (quant_method mxfp4, modules_to_not_convert), Qwen3-FP8's (quant_method fp8, weight_block_size),
GPTQ/AWQ (bits, group_size), bitsandbytes (load_in_4bit / load_in_8bit, bnb_4bit_use_double_quant).
The ignore / exclude_modules / modules_to_not_convert lists decide the scope: lm_head, embeddings, norms and
routers are never quantized by these tools; attention excluded in every layer gives scope `mlp` (or
`experts` for a MoE whose dense and shared MLPs, if any, are excluded too); excluded in some layers only is
reported, and only the safetensors headers can count it exactly.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from llmsize.errors import shown
from llmsize.importer.hf_config import ConfigError

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16", "float": "fp32"}
# an attention module (not a norm named after it, like post_attention_layernorm)
_ATTN = re.compile(r"self_attn|\.attn(\b|\.)|\.attention(\b|\.)|mixer\.(q|k|v|o)_proj")
_SSM = re.compile(r"mixer\.(in_proj|out_proj)|linear_attn")


@dataclass
class Release:
    quant: str
    scope: str
    method: str  # what announced it: "compressed-tensors", "modelopt", "mxfp4", "dtype", ...
    kv_cache_dtype: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_yaml(self) -> dict:
        return {"quant": self.quant, "scope": self.scope, "note": f"from {self.method}"}


def _ignores(ignore: list, module: str) -> bool:
    """Whether an ignore list (exact or suffix names, globs, regexes after 're:', matched from the module name's
    start as compressed-tensors does) keeps `module` out of quantization."""
    for pat in ignore or []:
        if not isinstance(pat, str):
            continue
        if pat.startswith("re:"):
            try:
                if re.match(pat[3:], module):
                    return True
            except re.error:
                continue
        elif module == pat or module.endswith("." + pat) or fnmatch.fnmatchcase(module, pat):
            return True
    return False


# a routed-expert layer's shared expert, and a dense layer's MLP, as HF checkpoints name them (DeepSeek and Kimi:
# mlp.shared_experts; Qwen MoE: mlp.shared_expert; dense layers: mlp.gate_proj)
_SHARED_PROBES = ("model.layers.1.mlp.shared_experts.gate_proj", "model.layers.1.mlp.shared_expert.gate_proj")
_DENSE_PROBE = "model.layers.0.mlp.gate_proj"


def _mlp_kinds(spec_fields: dict) -> tuple[bool, bool, bool]:
    """Whether the model routes to experts, has shared experts, has dense MLP layers."""
    mlps = [g.get("mlp") for g in spec_fields["layer_groups"] if g.get("mlp")]
    moe = [m for m in mlps if m["kind"] == "moe"]
    return bool(moe), any(m.get("num_shared_experts") for m in moe), any(m["kind"] == "dense" for m in mlps)


def _only_routed_experts(spec_fields: dict, ignore: list | None = None) -> bool:
    """Whether every quantized MLP weight is a routed expert's: a MoE whose shared experts and dense MLPs, where it
    has them, the ignore list keeps in 16 bits (Kimi K2.5: re:.*shared_experts.*, re:.*mlp\\.(gate|up|down)_proj.*)."""
    moe, shared, dense = _mlp_kinds(spec_fields)
    return moe and ((not shared or any(_ignores(ignore, p) for p in _SHARED_PROBES))
                    and (not dense or _ignores(ignore, _DENSE_PROBE)))


def _excluded_layers(ignore: list[str], rx: re.Pattern) -> tuple[set[int], bool]:
    """Layer indices whose modules matching rx are in the ignore list, and whether a pattern covers all."""
    layers: set[int] = set()
    everywhere = False
    for pat in ignore or []:
        body = pat[3:] if pat.startswith("re:") else pat
        if not rx.search(body) or "norm" in body or "indexer" in body:  # a norm, or a sparse-attention indexer's
            continue  # few weights (GLM-5-FP8 keeps self_attn.indexers_proj in 16 bits, its attention in FP8)
        m = re.search(r"layers\.(\d+)\.", body)
        if m:
            layers.add(int(m.group(1)))
        else:
            everywhere = True
    return layers, everywhere


def _layers_of(spec_fields: dict, kinds: tuple[str, ...]) -> int:
    return sum(g["count"] for g in spec_fields["layer_groups"] if g.get("mixer", {}).get("kind") in kinds)


def scope_from_ignore(ignore: list[str], spec_fields: dict, default: str) -> tuple[str, list[str]]:
    """Which weights stay 16-bit, from ignore-style patterns (globs, or regexes after 're:')."""
    attn, attn_all = _excluded_layers(ignore, _ATTN)
    ssm, ssm_all = _excluded_layers(ignore, _SSM)
    n_attn = _layers_of(spec_fields, ("full", "sliding", "mla"))
    n_ssm = _layers_of(spec_fields, ("ssm", "linear"))
    attn_kept = attn_all or (n_attn > 0 and len(attn) >= n_attn)
    ssm_kept = n_ssm == 0 or ssm_all or len(ssm) >= n_ssm
    if not attn and not attn_all and not ssm and not ssm_all:
        return default, []
    if attn_kept and ssm_kept:
        scope = "experts" if _only_routed_experts(spec_fields, ignore) else "mlp"
        kept = "attention" + (" and SSM" if n_ssm else "")
        if scope == "experts" and any(_mlp_kinds(spec_fields)[1:]):
            kept += ", shared experts and dense MLPs"
        return scope, [f"{kept} kept in 16 bits in every layer (ignore list): scope {scope}"]
    parts = []
    if attn or attn_all:
        parts.append(f"attention in {f'all {n_attn}' if attn_kept else f'{len(attn)} of {n_attn}'} layers")
    if ssm or ssm_all:
        parts.append(f"SSM projections in {f'all {n_ssm}' if ssm_all else f'{len(ssm)} of {n_ssm}'} layers")
    return default, [f"the ignore list keeps {' and '.join(parts)} in 16 bits; a config-only estimate "
                     "quantizes them (the safetensors headers count them exactly)"]


# ModelOpt's quant_algo per layer (modelopt/torch/export/model_config.py QUANTIZATION_*) -> llmsize's format
MODELOPT_ALGOS = {"NVFP4": "nvfp4", "FP8": "fp8", "W4A16_AWQ": "awq-int4-g128"}
MODELOPT_LAYER_ALGOS = {**MODELOPT_ALGOS, "W4A16_NVFP4": "nvfp4-w4a16", "MXFP8": "mxfp8", "MXFP4": "mxfp4",
                        "FP8_PB_WO": "fp8-block128"}
# a module name -> the component it is a weight of (params.COMPONENTS), tried in this order: shared experts before
# routed ones, attention (self_attn, a Nemotron-H mixer's q/k/v/o) before SSM and linear attention
_PARTS = (
    ("shared_experts", re.compile(r"shared_experts?\b|shared_mlp")),
    ("experts", re.compile(r"\.experts(\.|$)")),
    ("attention", _ATTN),
    ("ssm", _SSM),
    ("mlp", re.compile(r"\.(mlp|feed_forward|ffn)(\.|$)|mixer\.(up|down|gate)_proj|latent_proj")),
    ("lm_head", re.compile(r"(^|\.)lm_head$")),
    ("embedding", re.compile(r"embed")),
)
_EXTRA = re.compile(r"(^|\.)(mtp|visual|vision|vision_tower|multi_modal_projector)(\.|$)")


def _part_of(module: str) -> str | None:
    if _EXTRA.search(module):
        return None
    return next((part for part, rx in _PARTS if rx.search(module)), None)


def _layers_with(spec_fields: dict, part: str) -> int:
    """How many layers have weights of `part` (the denominator of a recipe's coverage)."""
    n = 0
    for g in spec_fields["layer_groups"]:
        mixer, mlp = (g.get("mixer") or {}).get("kind"), g.get("mlp") or {}
        has = {"attention": mixer in ("full", "sliding", "mla"), "ssm": mixer in ("ssm", "linear"),
               "experts": mlp.get("kind") == "moe", "shared_experts": bool(mlp.get("num_shared_experts")),
               "mlp": mlp.get("kind") == "dense" or bool(mlp.get("latent_size"))}.get(part, False)
        n += g["count"] if has else 0
    return n


def mixed_precision(layers, spec_fields: dict, where: str) -> tuple[str, list[str]]:
    """A ModelOpt MIXED_PRECISION export's quantized_layers (module -> {quant_algo, group_size}) -> a recipe (a
    format per component, quant.recipe_format) and notes. Modules outside the text model (MTP, vision) are left
    out, as the estimate leaves their weights in 16 bits; a component in two formats takes the one most of its
    modules have, and one quantized in some layers only is priced in all: both said in a note."""
    from llmsize.estimate.quant import recipe_format

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
        part = _part_of(str(module))
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
        want = _layers_with(spec_fields, part)
        have = len(layer_ids.get(part, ()))
        if want and have and have < want:
            notes.append(f"{part} quantized in {have} of {want} layers; priced in all of them (the safetensors "
                         "headers count them exactly)")
    if unplaced:
        notes.append(f"{unplaced} quantized modules outside the text model (MTP, vision) are priced in 16 bits")
    return recipe_format(recipe).id, notes


def _compressed_tensors(qc: dict, where: str) -> tuple[str, str | None]:
    groups = [g for g in (qc.get("config_groups") or {}).values() if isinstance(g, dict)]
    fmt = qc.get("format") if qc.get("format") != "mixed-precision" else None
    fmt = fmt or next((g.get("format") for g in groups if g.get("format")), None)
    w = next((g.get("weights") for g in groups if g.get("weights")), {}) or {}
    return _ct_weights(fmt, w, where)


# a module of each component as Hugging Face checkpoints name it, under the prefixes text models and the text part
# of multimodal ones use: what a config group's targets (regexes, names, the class `Linear`) are matched against
_PROBE_PREFIXES = ("model.layers.{i}.", "model.language_model.layers.{i}.", "backbone.layers.{i}.",
                   "language_model.model.layers.{i}.")
_PROBE_SUFFIXES = {
    "attention": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"),
    "ssm": ("linear_attn.in_proj_qkvz", "linear_attn.in_proj_qkv", "linear_attn.in_proj_z", "linear_attn.out_proj",
            "mixer.in_proj", "mixer.out_proj"),
    "mlp": ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"),
    "experts": ("mlp.experts.0.gate_proj", "mlp.experts.0.up_proj", "mlp.experts.0.down_proj"),
    "shared_experts": ("mlp.shared_expert.gate_proj", "mlp.shared_expert.down_proj", "mlp.shared_experts.gate_proj",
                       "mlp.shared_experts.down_proj"),
}


def _targets(targets, module: str) -> bool:
    """Whether a config group's targets take `module`: the class `Linear` takes every linear layer (the lm_head
    too, as in compressed-tensors), 're:' a regex from the name's start, else a name or its suffix."""
    for t in [targets] if isinstance(targets, str) else targets or []:
        if not isinstance(t, str):
            continue
        if t == "Linear":
            if "embed" not in module:
                return True
        elif _ignores([t], module):
            return True
    return False


def ct_recipe(qc: dict, spec_fields: dict, where: str) -> tuple[str, list[str]] | None:
    """A compressed-tensors config whose groups give different formats to different modules (its `format`
    "mixed-precision": FP8 attention beside NVFP4 MLPs, say) -> a recipe (quant.recipe_format) and notes, by
    matching each group's targets and the ignore list against each component's module names in every layer; None
    where one format covers all that is quantized (the scope then comes from the ignore list)."""
    from llmsize.estimate.quant import recipe_format

    groups = [g for g in (qc.get("config_groups") or {}).values() if isinstance(g, dict) and g.get("weights")]
    fmts = [_ct_weights(g.get("format") or (qc.get("format") if qc.get("format") != "mixed-precision" else None),
                        g.get("weights") or {}, where)[0] for g in groups]
    if len(set(fmts)) < 2:
        return None
    ignore = qc.get("ignore") or []

    def fmt_of(name: str) -> str | None:
        return None if _ignores(ignore, name) else next(
            (f for g, f in zip(groups, fmts) if _targets(g.get("targets"), name)), None)

    n_layers = sum(g["count"] for g in spec_fields["layer_groups"])
    # per layer, the formats its modules of a component take under each naming: a naming no group or ignore pattern
    # takes is another model's (Qwen3-Next's in_proj_qkvz beside Qwen3.5's in_proj_qkv), unless none is taken
    cells = {c: [[pre.format(i=i) + suf for pre in _PROBE_PREFIXES for suf in sufs] for i in range(n_layers)]
             for c, sufs in _PROBE_SUFFIXES.items() if _layers_with(spec_fields, c)}
    cells["lm_head"] = [["lm_head"]]
    recipe, notes = {}, []
    for part, layers in cells.items():
        counts: dict[str | None, int] = {}
        for names in layers:
            taken = {fmt_of(n) for n in names}
            for fid in (taken - {None}) or {None}:
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


def _ct_weights(fmt: str | None, w: dict, where: str) -> tuple[str, str | None]:
    """One compressed-tensors weights scheme (and the format that packs it) -> a format id and a note."""
    bits, typ, gs = w.get("num_bits"), w.get("type"), w.get("group_size")
    if fmt == "nvfp4-pack-quantized" or (bits == 4 and typ == "float" and gs == 16):
        return "nvfp4", None
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
    raise ConfigError(f"{where}: compressed-tensors format {fmt!r} ({bits}-bit {typ}) is not supported.",
                      "Supported: nvfp4-pack-quantized, float-quantized (FP8), pack-quantized (int4), int8.")


def release_from(raw: dict, hf_quant: dict | None, spec_fields: dict, where: str) -> Release:
    """raw: config.json (its text part already merged); hf_quant: hf_quant_config.json or None."""
    qc = raw.get("quantization_config") or (raw.get("text_config") or {}).get("quantization_config")
    if hf_quant is not None:
        q = hf_quant.get("quantization") or {}
        qc = {"quant_method": "modelopt", "quant_algo": q.get("quant_algo"),
              "ignore": q.get("exclude_modules") or [], "kv_cache_quant_algo": q.get("kv_cache_quant_algo"),
              "quantized_layers": q.get("quantized_layers")}
    if not qc:
        dtype = raw.get("torch_dtype") or raw.get("dtype") or (raw.get("text_config") or {}).get("dtype")
        quant = DTYPES.get(str(dtype), "bf16")
        notes = ([] if str(dtype) in DTYPES else [f"dtype `{shown(dtype, 40)}` in config.json is not one of "
                 f"{', '.join(DTYPES)}: bf16 assumed"]) if dtype else ["no dtype in config.json: bf16 assumed"]
        return Release(quant, "all", "dtype", notes=notes)
    if not isinstance(qc, dict):
        raise ConfigError(f"{where}: quantization_config is not an object.")
    method = qc.get("quant_method")
    kv = None
    if method == "modelopt":
        algo = qc.get("quant_algo")
        kv = "fp8" if (qc.get("kv_cache_quant_algo") == "FP8" or (qc.get("kv_cache_scheme") or {}).get(
            "num_bits") == 8) else None
        if algo == "MIXED_PRECISION":
            quant, notes = mixed_precision(qc.get("quantized_layers"), spec_fields, where)
            if kv:
                notes.append("the checkpoint ships an FP8 KV-cache scheme: try --kv-dtype fp8")
            return Release(quant, "all", "modelopt MIXED_PRECISION", kv, notes)
        quant = MODELOPT_ALGOS.get(algo)
        if quant is None:
            raise ConfigError(f"{where}: ModelOpt quant_algo {shown(repr(algo), 40)} is not supported.",
                              "Supported: NVFP4, FP8, W4A16_AWQ, MIXED_PRECISION.")
        ignore = qc.get("ignore") or qc.get("exclude_modules") or []
        note = None
    elif method == "compressed-tensors":
        mixed = ct_recipe(qc, spec_fields, where)
        kvs = qc.get("kv_cache_scheme") or {}
        if mixed is not None:
            kv = "fp8" if kvs.get("num_bits") == 8 and kvs.get("type") == "float" else None
            notes = mixed[1] + (["the checkpoint ships an FP8 KV-cache scheme: try --kv-dtype fp8"] if kv else [])
            return Release(mixed[0], "all", "compressed-tensors config groups", kv, notes)
        quant, note = _compressed_tensors(qc, where)
        ignore = qc.get("ignore") or []
        kvs = qc.get("kv_cache_scheme") or {}
        kv = "fp8" if kvs.get("num_bits") == 8 and kvs.get("type") == "float" else None
    elif method == "mxfp4":
        quant, note, ignore = "mxfp4", None, qc.get("modules_to_not_convert") or []
    elif method == "fp8":
        block = qc.get("weight_block_size")
        if block is not None and not (isinstance(block, list) and len(block) == 2 and all(
                isinstance(b, int) and not isinstance(b, bool) and 0 < b <= 2**16 for b in block)):
            raise ConfigError(f"{where}: weight_block_size {shown(block, 40)} is not two positive block sides.",
                              "Fix quantization_config (DeepSeek's FP8 has [128, 128]), or drop it for per-tensor "
                              "scales.")
        quant = "fp8" if block is None else "fp8-block128"  # a block's scales priced at 128x128's
        note = None if block in (None, [128, 128]) else f"weight_block_size {block} priced as 128x128"
        ignore = qc.get("modules_to_not_convert") or []
    elif method in ("gptq", "awq"):
        bits, gs = qc.get("bits"), qc.get("group_size")
        if bits != 4:
            raise ConfigError(f"{where}: {method} with {bits} bits is not supported.", "Supported: 4-bit.")
        quant = f"{method}-int4-g128"
        note = None if gs in (128, None) else f"group size {gs} priced as 128"
        ignore = qc.get("modules_to_not_convert") or []
    elif method == "bitnet":  # BitNet b1.58: ternary weights packed 4 a byte (transformers BitNetQuantConfig)
        quant, note, ignore = "bitnet-2bit", None, qc.get("modules_to_not_convert") or []
    elif method == "bitsandbytes":
        if qc.get("load_in_4bit"):
            quant = "bnb-nf4-dq" if qc.get("bnb_4bit_use_double_quant") else "bnb-nf4"
        elif qc.get("load_in_8bit"):
            quant = "int8"
        else:
            raise ConfigError(f"{where}: bitsandbytes config loads neither 4-bit nor 8-bit.")
        note, ignore = None, qc.get("llm_int8_skip_modules") or []
    else:
        raise ConfigError(f"{where}: quantization method {method!r} is not supported.",
                          "Supported: compressed-tensors, modelopt, mxfp4, fp8, gptq, awq, bitsandbytes, bitnet.")
    scope, notes = scope_from_ignore(ignore, spec_fields, "linear")
    if note:
        notes.append(note)
    if kv:
        notes.append("the checkpoint ships an FP8 KV-cache scheme: try --kv-dtype fp8")
    return Release(quant, scope, method, kv, notes)
