"""quantization_config (config.json) and hf_quant_config.json -> the release format and its scope.

Layouts and field names: shared/reference/nvfp4-checkpoints.md (compressed-tensors, ModelOpt), gpt-oss's
config (quant_method mxfp4, modules_to_not_convert), Qwen3-FP8's (quant_method fp8, weight_block_size),
GPTQ/AWQ (bits, group_size), bitsandbytes (load_in_4bit / load_in_8bit, bnb_4bit_use_double_quant).
The ignore / exclude_modules / modules_to_not_convert lists decide the scope, read by the module names of every
layer (ignore_release): lm_head, embeddings, norms and routers are never quantized by these tools; attention
excluded in every layer gives scope `mlp` (or `experts` for a MoE whose dense and shared MLPs, if any, are excluded
too), another split a recipe; a component excluded in some layers only takes its layers' majority and is reported,
and only the safetensors headers can count it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llmsize.errors import shown
from llmsize.estimate.quant import recipe_format
from llmsize.importer.compressed_tensors import ct_recipe, single_format
from llmsize.importer.config_fields import ConfigError
from llmsize.importer.hf_config import text_part
from llmsize.importer.modelopt import MODELOPT_ALGOS, mixed_precision
from llmsize.importer.module_names import checked_names, ignores, probe_names

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16", "float": "fp32"}


@dataclass
class Release:
    quant: str
    scope: str
    method: str  # what announced it: "compressed-tensors", "modelopt", "mxfp4", "dtype", ...
    kv_cache_dtype: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_yaml(self) -> dict:
        out = {"quant": self.quant, "scope": self.scope, "note": f"from {self.method}"}
        if self.kv_cache_dtype and self.method.split()[0] in ("modelopt", "compressed-tensors"):
            out |= {"kv_cache": self.kv_cache_dtype, "kv_cache_from": self.method.split()[0]}
        return out


def ignore_release(ignore: list, spec_fields: dict, fid: str,
                   model_type: str | None = None) -> tuple[str, str, list[str]] | None:
    """Which weights an ignore list (module names, globs, regexes after 're:') keeps in 16 bits, read by the module
    names of every layer that has each component: (format, scope, notes). Each component takes the format its
    layers mostly have, the rest said in a note (nvidia's Nemotron 3 Nano NVFP4 keeps Mamba-2 in 16 bits in 6 of its
    23 layers); what is left is a scope where it is one (linear: every component; mlp: the MLPs and experts;
    experts: routed experts only, nvidia's Gemma 4 26B-A4B and GLM-5.1 NVFP4), else a recipe (nvidia's DeepSeek-V3.2
    NVFP4 keeps attention in BF16 but its output projection); None where it keeps every component in most layers.
    The lm_head and embedding stay 16-bit, as under scope linear."""
    cells = probe_names(spec_fields, model_type)
    present = set(cells)
    recipe, notes = {}, []
    for part, layers in cells.items():
        kept = sum(1 for names in layers if any(ignores(ignore, n) for n in names))
        if 2 * kept <= len(layers):
            recipe[part] = fid
        if 0 < kept < len(layers):
            priced = fid if part in recipe else "16-bit"
            notes.append(f"{part}: the ignore list keeps it in 16 bits in {kept} of its {len(layers)} layers; priced "
                         f"as {priced} in all (the safetensors headers count them exactly)")
    if set(recipe) == present:
        return fid, "linear", notes
    mlps = present & {"experts", "shared_experts", "mlp"}
    if recipe and set(recipe) in ({"experts"}, mlps):
        scope = "experts" if set(recipe) == {"experts"} else "mlp"
        words = {"attention": "attention", "ssm": "SSM", "shared_experts": "shared experts", "mlp": "dense MLPs"}
        left = [w for p, w in words.items() if p in present - set(recipe)]
        said = " and ".join(left) if len(left) < 3 else ", ".join(left[:-1]) + " and " + left[-1]
        return fid, scope, notes + [f"{said} kept in 16 bits (ignore list): scope {scope}"]
    if not recipe:
        return None
    return recipe_format(recipe).id, "all", notes


def _dtype(raw: dict) -> tuple[str, list[str]]:
    """config.json's dtype: (its format id, notes where one is assumed)."""
    dtype = raw.get("torch_dtype") or raw.get("dtype") or (raw.get("text_config") or {}).get("dtype")
    notes = ([] if str(dtype) in DTYPES else [f"dtype `{shown(dtype, 40)}` in config.json is not one of "
             f"{', '.join(DTYPES)}: bf16 assumed"]) if dtype else ["no dtype in config.json: bf16 assumed"]
    return DTYPES.get(str(dtype), "bf16"), notes


# DeepSeek-V4's release (deepseek-ai/DeepSeek-V4-Flash, -Pro): routed experts in FP4 (E2M1, a UE8M0 scale a block of
# 32: MXFP4's layout), every other linear layer FP8 E4M3 with a UE8M0 scale a 128x128 block (quantization_config
# weight_block_size, scale_fmt ue8m0); the embedding, output head, routers, norms and hyper-connections unquantized.
# A public report's safetensors element count of DeepSeek-V4-Pro, 861,608,274,846, is the hand count with FP4 experts
# two values a byte and their scales (tests/data/hf-configs/SOURCES.yaml).
DEEPSEEK_V4_RECIPE = "experts=mxfp4,shared_experts=fp8-block128,attention=fp8-block128"


# what a checkpoint's FP8 KV-cache scheme means for a plan (runtimes.runtime_kv_dtype)
KV_SCHEME_NOTE = ("the checkpoint ships an FP8 KV-cache scheme: SGLang's default cache takes it (and vLLM's, for a "
                  "ModelOpt checkpoint); elsewhere --kv-dtype fp8")


def deepseek_v4_release(raw: dict, qc: dict, where: str) -> Release:
    """DeepSeek-V4's FP8 config: the recipe above, whose experts' FP4 the config says in expert_dtype (aiconfigurator's
    copy of it) or leaves to the release."""
    experts = raw.get("expert_dtype")
    if experts not in (None, "fp4"):
        raise ConfigError(f"{where}: expert_dtype {shown(repr(experts), 30)} is not the release's fp4.",
                          "Give DeepSeek-V4's own config.json, or plan the model with --quant.")
    if qc.get("weight_block_size") not in (None, [128, 128]):
        raise ConfigError(f"{where}: weight_block_size {shown(qc.get('weight_block_size'), 40)} is not DeepSeek-V4's "
                          "[128, 128].", "Give DeepSeek-V4's own config.json, or plan the model with --quant.")
    said = "expert_dtype fp4" if experts else "DeepSeek-V4's release (config.json does not say expert_dtype)"
    return Release(DEEPSEEK_V4_RECIPE, "linear", "fp8 + fp4 experts",
                   notes=[f"routed experts FP4 with a scale a 32 (MXFP4's layout; {said}), the other linear layers "
                          "FP8 in 128x128 blocks"])


def release_from(raw: dict, hf_quant: dict | None, spec_fields: dict, where: str) -> Release:
    """raw: config.json (its text part already merged); hf_quant: hf_quant_config.json or None."""
    qc = raw.get("quantization_config") or (raw.get("text_config") or {}).get("quantization_config")
    if hf_quant is not None:
        q = hf_quant.get("quantization") or {}
        qc = {"quant_method": "modelopt", "quant_algo": q.get("quant_algo"),
              "ignore": q.get("exclude_modules") or [], "kv_cache_quant_algo": q.get("kv_cache_quant_algo"),
              "quantized_layers": q.get("quantized_layers")}
    if not qc:
        plain, notes = _dtype(raw)
        return Release(plain, "all", "dtype", notes=notes)
    if not isinstance(qc, dict):
        raise ConfigError(f"{where}: quantization_config is not an object.")
    method = qc.get("quant_method")
    model_type = text_part(raw).get("model_type") or raw.get("model_type")
    kv = None
    if method == "modelopt":
        algo = qc.get("quant_algo")
        kv = "fp8" if (qc.get("kv_cache_quant_algo") == "FP8" or (qc.get("kv_cache_scheme") or {}).get(
            "num_bits") == 8) else None
        if algo == "MIXED_PRECISION":
            quant, notes = mixed_precision(qc.get("quantized_layers"), spec_fields, where)
            if kv:
                notes.append(KV_SCHEME_NOTE)
            return Release(quant, "all", "modelopt MIXED_PRECISION", kv, notes)
        quant = MODELOPT_ALGOS.get(algo)
        if quant is None:
            raise ConfigError(f"{where}: ModelOpt quant_algo {shown(repr(algo), 40)} is not supported.",
                              "Supported: NVFP4, FP8, W4A16_AWQ, MIXED_PRECISION.")
        ignore = qc.get("ignore") or qc.get("exclude_modules") or []
        note = None
    elif method == "compressed-tensors":
        mixed = ct_recipe(qc, spec_fields, where, model_type)
        kvs = qc.get("kv_cache_scheme") or {}
        if mixed is not None:
            kv = "fp8" if kvs.get("num_bits") == 8 and kvs.get("type") == "float" else None
            notes = mixed[1] + ([KV_SCHEME_NOTE] if kv else [])
            return Release(mixed[0], "all", "compressed-tensors config groups", kv, notes)
        quant, note = single_format(qc, where)
        ignore = qc.get("ignore") or []
        kvs = qc.get("kv_cache_scheme") or {}
        kv = "fp8" if kvs.get("num_bits") == 8 and kvs.get("type") == "float" else None
    elif method == "mxfp4":
        quant, note, ignore = "mxfp4", None, qc.get("modules_to_not_convert") or []
    elif method == "fp8" and model_type == "deepseek_v4":
        return deepseek_v4_release(raw, qc, where)
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
    found = ignore_release(checked_names(ignore, "its ignore list", where), spec_fields, quant, model_type)
    if found is None:
        plain = _dtype(raw)[0]
        return Release(plain, "all", method, kv, [f"the ignore list keeps every component in 16 bits in most of its "
                                                  f"layers: {plain}, not {quant}"])
    quant, scope, notes = found
    if note:
        notes.append(note)
    if kv:
        notes.append(KV_SCHEME_NOTE)
    return Release(quant, scope, method, kv, notes)
