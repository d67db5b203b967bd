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

import re
from dataclasses import dataclass, field

from llmsize.errors import shown
from llmsize.estimate.quant import recipe_format
from llmsize.importer.compressed_tensors import ct_recipe, single_format
from llmsize.importer.hf_config import ConfigError
from llmsize.importer.modelopt import MODELOPT_ALGOS, mixed_precision
from llmsize.importer.module_names import (
    ATTN,
    PROBE_PREFIXES,
    PROBE_SUFFIXES,
    SSM,
    ignores,
    layer_groups,
    layer_parts,
)

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16", "float": "fp32"}


@dataclass
class Release:
    quant: str
    scope: str
    method: str  # what announced it: "compressed-tensors", "modelopt", "mxfp4", "dtype", ...
    kv_cache_dtype: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_yaml(self) -> dict:
        return {"quant": self.quant, "scope": self.scope, "note": f"from {self.method}"}


def _mlp_kinds(spec_fields: dict) -> tuple[bool, bool, bool]:
    """Whether the model routes to experts, has shared experts, has dense MLP layers."""
    mlps = [g.get("mlp") for g in spec_fields["layer_groups"] if g.get("mlp")]
    moe = [m for m in mlps if m["kind"] == "moe"]
    return bool(moe), any(m.get("num_shared_experts") for m in moe), any(m["kind"] == "dense" for m in mlps)


def _kept_where_first(ignore: list | None, spec_fields: dict, part: str, has) -> bool:
    """Whether the ignore list keeps `part` in 16 bits in the first layer whose group `has` it, under any of the
    names checkpoints give it there (DeepSeek's and Kimi's mlp.shared_experts, Qwen MoE's mlp.shared_expert, a
    dense layer's mlp.gate_proj; Gemma 4's model.language_model.layers.N prefix); True where no layer has it."""
    i = next((k for k, g in enumerate(layer_groups(spec_fields)) if has(g.get("mlp") or {})), None)
    return i is None or any(ignores(ignore, pre.format(i=i) + suf) for pre in PROBE_PREFIXES
                            for suf in PROBE_SUFFIXES[part])


def _only_routed_experts(spec_fields: dict, ignore: list | None = None) -> bool:
    """Whether every quantized MLP weight is a routed expert's: a MoE whose shared experts and dense MLPs, where it
    has them, the ignore list keeps in 16 bits (Kimi K2.5: re:.*shared_experts.*, re:.*mlp\\.(gate|up|down)_proj.*;
    nvidia's Gemma 4 26B-A4B NVFP4: model.language_model.layers.N.mlp* in every layer)."""
    return _mlp_kinds(spec_fields)[0] and (
        _kept_where_first(ignore, spec_fields, "shared_experts", lambda m: bool(m.get("num_shared_experts")))
        and _kept_where_first(ignore, spec_fields, "mlp", lambda m: m.get("kind") == "dense"))


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
    attn, attn_all = _excluded_layers(ignore, ATTN)
    ssm, ssm_all = _excluded_layers(ignore, SSM)
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


def ignore_recipe(ignore: list, spec_fields: dict, fid: str) -> tuple[str, str, list[str]] | None:
    """Where the ignore list's patterns leave the layer-by-layer count unclear (nvidia's GLM-5.1 NVFP4 excludes
    `model.layers.1.*`, whole dense layers, beside each MoE layer's attention and shared experts), each component's
    format by the majority of the layers that have it, matching module names rather than patterns: (format, scope,
    notes naming any minority), a scope where the result is one (experts only; every MLP), else a recipe; None where
    every component is quantized. The lm_head and embedding stay 16-bit, as under scope linear."""
    per_layer = layer_parts(spec_fields)
    present = {p for parts in per_layer for p in parts}
    recipe, notes = {}, []
    for part, suffixes in PROBE_SUFFIXES.items():
        layers = [i for i, parts in enumerate(per_layer) if part in parts]
        if not layers:
            continue
        kept = sum(1 for i in layers if any(ignores(ignore, pre.format(i=i) + suf)
                                            for pre in PROBE_PREFIXES for suf in suffixes))
        if 2 * kept <= len(layers):
            recipe[part] = fid
        if 0 < kept < len(layers):
            priced = fid if part in recipe else "16-bit"
            notes.append(f"{part}: the ignore list keeps it in 16 bits in {kept} of its {len(layers)} layers; priced "
                         f"as {priced} in all (the safetensors headers count them exactly)")
    if not recipe or set(recipe) == present:
        return None
    if set(recipe) == {"experts"}:
        return fid, "experts", notes + ["attention and every MLP but the routed experts kept in 16 bits in every "
                                        "layer, as the ignore list's module names say: scope experts"]
    if set(recipe) == present & {"experts", "shared_experts", "mlp"}:
        return fid, "mlp", notes + ["attention (and SSM) kept in 16 bits in every layer, as the ignore list's module "
                                    "names say: scope mlp"]
    return recipe_format(recipe).id, "all", notes


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
        quant, note = single_format(qc, where)
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
    mixed = ignore_recipe(ignore, spec_fields, quant) if notes else None
    if mixed is not None and (scope == "linear" or ("attention_out=" in mixed[0] and "attention=" not in mixed[0])):
        # kept in 16 bits in some layers only: each component as most of its layers are; or attention kept but its
        # output projection quantized (nvidia's DeepSeek NVFP4 exports name q_a/q_b/kv_a/kv_b_proj, not o_proj)
        quant, scope, notes = mixed
    if note:
        notes.append(note)
    if kv:
        notes.append("the checkpoint ships an FP8 KV-cache scheme: try --kv-dtype fp8")
    return Release(quant, scope, method, kv, notes)
