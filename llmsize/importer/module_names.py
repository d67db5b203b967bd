"""Module names in a checkpoint's quantization config (ignore lists, config groups' targets, ModelOpt's
quantized_layers) -> the component of the model they are weights of (estimate.params.COMPONENTS)."""

from __future__ import annotations

import fnmatch
import re
from functools import lru_cache

from llmsize.catalog.recipe import RECIPE_PARTS
from llmsize.errors import shown
from llmsize.importer.config_fields import ConfigError
from llmsize.importer.exact import component


def ignores(ignore: list, module: str, ancestors: bool = True) -> bool:
    """Whether an ignore list keeps `module` out of quantization: a regex after 're:' matched from the module name's
    start, as compressed-tensors does; an exact or suffix name or a glob, of the module or (`ancestors`) of a module
    it is part of, as transformers reads modules_to_not_convert (gpt-oss's `model.layers.*.self_attn`)."""
    regexes, names, globs = _compiled(tuple(p for p in ignore or [] if isinstance(p, str)))
    if any(rx.match(module) for rx in regexes):
        return True
    parts = module.split(".")
    for end in range(len(parts), 0 if ancestors else len(parts) - 1, -1):
        name = ".".join(parts[:end])
        if globs is not None and globs.match(name):
            return True
        if any(".".join(parts[k:end]) in names for k in range(end)):  # the name, or a dotted suffix of it
            return True
    return False


# a group quantified inside a quantified group ((.*)*, (a+)+): Python's re backtracks exponentially on names it does
# not match, and has no time limit
NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[*+}](?:[^()\\]|\\.)*\)[*+{]")


def checked_names(value, what: str, where: str) -> list[str]:
    """A quantization config's list of module names or patterns (an ignore list, a group's targets): a list of
    strings (a lone string is a list of one, null none), each regex after 're:' one that compiles and nests no
    quantifier; anything else refused in one line."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(p, str) for p in items):
        raise ConfigError(f"{where}: {what} is {shown(value, 60)}, not a list of module names.",
                          "Fix the quantization config: a list of names, globs or 're:' regexes.")
    for p in items:
        if p.startswith("re:"):
            try:
                re.compile(p[3:])
            except re.error as e:
                raise ConfigError(f"{where}: {what} holds {shown(p, 60)}, a regex that does not compile ({e}).",
                                  "Fix the quantization config's pattern.") from None
            if NESTED_QUANTIFIER.search(p[3:]):
                raise ConfigError(f"{where}: {what} holds {shown(p, 60)}, a regex with a quantified group inside a "
                                  "quantified group, which can take exponential time to match.",
                                  "Write it without the nested repetition (e.g. re:.*x instead of re:(.*)*x).")
    return items


@lru_cache(maxsize=64)
def _compiled(ignore: tuple[str, ...]) -> tuple[list[re.Pattern], frozenset[str], re.Pattern | None]:
    """An ignore list once compiled (nvidia's DeepSeek-V3.2 NVFP4 lists 307 patterns): its regexes (the invalid left
    out), its plain names, and its globs as one expression."""
    regexes = []
    for pat in ignore:
        if pat.startswith("re:"):
            try:
                regexes.append(re.compile(pat[3:]))
            except re.error:
                continue
    plain = [p for p in ignore if not p.startswith("re:")]
    globs = [p for p in plain if any(c in p for c in "*?[")]
    glob_rx = re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs)) if globs else None
    return regexes, frozenset(p for p in plain if p not in globs), glob_rx


# the attention output projection, a recipe part apart from the rest of attention (catalog/recipe.py)
ATTN_OUT = re.compile(r"(self_attn|\.attn|\.attention)\.(o_proj|out_proj)$|mixer\.o_proj$")


def part_of(module: str) -> str | None:
    """The recipe part a module of a quantization table is a weight of, as the safetensors headers' reader names its
    tensor's component (importer.exact.component), with the attention output projection apart; None for a module
    outside the text model (MTP, vision), a norm or a router."""
    if ATTN_OUT.search(module):
        return "attention_out"
    part = component(module + ".weight", 2**31)
    return part if part in RECIPE_PARTS else None


def layer_groups(spec_fields: dict) -> list[dict]:
    """Each layer's group, in stack order: the groups one after the other, or as layer_pattern repeats them."""
    groups = spec_fields["layer_groups"]
    pattern = spec_fields.get("layer_pattern")
    n = sum(g["count"] for g in groups)
    if pattern:
        return [groups[pattern[i % len(pattern)]] for i in range(n)]
    return [g for g in groups for _ in range(g["count"])]


def layer_parts(spec_fields: dict) -> list[set[str]]:
    """Each layer's components, in stack order."""
    out = []
    for g in layer_groups(spec_fields):
        mixer, mlp = (g.get("mixer") or {}).get("kind"), g.get("mlp") or {}
        attends = mixer in ("full", "sliding", "mla", "compressed")
        has = {"attention": attends, "attention_out": attends,
               "ssm": mixer in ("ssm", "linear", "conv"),
               "experts": mlp.get("kind") == "moe", "shared_experts": bool(mlp.get("num_shared_experts")),
               "mlp": mlp.get("kind") == "dense" or bool(mlp.get("latent_size"))}
        out.append({part for part, yes in has.items() if yes})
    return out


def layers_with(spec_fields: dict, part: str) -> int:
    """How many layers have weights of `part` (the denominator of a recipe's coverage)."""
    return sum(part in parts for parts in layer_parts(spec_fields))


# a module of each component as Hugging Face checkpoints name it, under the prefixes text models and the text part
# of multimodal ones use: what a config group's targets (regexes, names, the class `Linear`) are matched against
PROBE_PREFIXES = ("model.layers.{i}.", "model.language_model.layers.{i}.", "backbone.layers.{i}.",
                   "language_model.model.layers.{i}.")
PROBE_SUFFIXES = {
    "attention": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mixer.q_proj",  # Nemotron-H's
                  "self_attn.q_a_proj", "self_attn.q_b_proj", "self_attn.kv_a_proj_with_mqa", "self_attn.kv_b_proj"),
    "attention_out": ("self_attn.o_proj", "mixer.o_proj"),
    "ssm": ("linear_attn.in_proj_qkvz", "linear_attn.in_proj_qkv", "linear_attn.in_proj_z", "linear_attn.out_proj",
            "mixer.in_proj", "mixer.out_proj"),
    "mlp": ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"),
    "experts": ("mlp.experts.0.gate_proj", "mlp.experts.0.up_proj", "mlp.experts.0.down_proj"),
    "shared_experts": ("mlp.shared_expert.gate_proj", "mlp.shared_expert.down_proj", "mlp.shared_experts.gate_proj",
                       "mlp.shared_experts.down_proj"),
}


# Gemma 4's MoE layers hold the routed experts beside their MLP, not inside it: layers.N.experts.* (fused
# gate_up_proj and down_proj, or one module per expert in nvidia's NVFP4 export), the MLP every token takes (the
# shared expert here) at layers.N.mlp.*; nvidia's Gemma-4-26B-A4B-NVFP4 excludes `...layers.N.mlp*`, not its experts
PROBE_SUFFIXES_BY_TYPE = {
    "gemma4": {**PROBE_SUFFIXES,
               "experts": ("experts.gate_up_proj", "experts.down_proj", "experts.0.gate_proj", "experts.0.down_proj"),
               "shared_experts": ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")},
    # Kimi Linear (vLLM kimi_linear.py): a KDA layer's projections under self_attn. as an MLA layer's are, the experts
    # one module each (w1, w2, w3) under block_sparse_moe, its shared experts an MLP beside them
    "kimi_linear": {**PROBE_SUFFIXES,
                    "ssm": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                            "self_attn.f_a_proj", "self_attn.g_a_proj", "self_attn.b_proj"),
                    "experts": ("block_sparse_moe.experts.0.w1", "block_sparse_moe.experts.0.w2",
                                "block_sparse_moe.experts.0.w3"),
                    "shared_experts": ("block_sparse_moe.shared_experts.gate_proj",
                                       "block_sparse_moe.shared_experts.down_proj")},
    # Granite 4.0 (transformers modeling_granitemoehybrid.py): mamba.in_proj / out_proj, the experts stacked in
    # block_sparse_moe.input_linear / output_linear, the shared MLP (the dense one without experts) shared_mlp.*
    "granitemoehybrid": {**PROBE_SUFFIXES,
                         "ssm": ("mamba.in_proj", "mamba.out_proj"),
                         "experts": ("block_sparse_moe.input_linear", "block_sparse_moe.output_linear"),
                         "shared_experts": ("shared_mlp.input_linear", "shared_mlp.output_linear"),
                         "mlp": ("shared_mlp.input_linear", "shared_mlp.output_linear")},
    # LFM2 (modeling_lfm2.py, modeling_lfm2_moe.py): conv.in_proj / out_proj, self_attn.out_proj, the MLP's w1, w2, w3
    # under feed_forward, LFM2-MoE's experts fused under feed_forward.experts
    "lfm2": {**PROBE_SUFFIXES,
             "attention_out": ("self_attn.out_proj",),
             "ssm": ("conv.in_proj", "conv.out_proj"),
             "mlp": ("feed_forward.w1", "feed_forward.w2", "feed_forward.w3"),
             "experts": ("feed_forward.experts.gate_up_proj", "feed_forward.experts.down_proj",
                         "feed_forward.experts.0.w1", "feed_forward.experts.0.w2")},
}


def probe_names(spec_fields: dict, model_type: str | None) -> dict[str, list[list[str]]]:
    """Per component the model has, per layer that has it, the names a module of it may have there: each naming of
    the model's type (probe_suffixes) under each text-model prefix (PROBE_PREFIXES)."""
    per_layer = layer_parts(spec_fields)
    cells = {part: [[pre.format(i=i) + suf for pre in PROBE_PREFIXES for suf in suffixes]
                    for i, parts in enumerate(per_layer) if part in parts]
             for part, suffixes in probe_suffixes(model_type).items()}
    return {part: layers for part, layers in cells.items() if layers}


def probe_suffixes(model_type: str | None) -> dict[str, tuple[str, ...]]:
    """Each component's module names (under a layer's prefix) in a checkpoint of `model_type` (config.json's, or its
    text part's: gemma4, gemma4_text)."""
    for family, table in PROBE_SUFFIXES_BY_TYPE.items():
        if (model_type or "").startswith(family):
            return table
    return PROBE_SUFFIXES


def targets_take(targets, module: str) -> str | None:
    """How a config group's targets take `module`: "name" where a name, its suffix or a regex after 're:' (from the
    name's start) does, "class" where only the class `Linear` does (every linear layer, the lm_head too, as in
    compressed-tensors), None where none does."""
    by_class = False
    for t in [targets] if isinstance(targets, str) else targets or []:
        if not isinstance(t, str):
            continue
        if t == "Linear":
            by_class = by_class or "embed" not in module
        elif ignores([t], module, ancestors=False):
            return "name"
    return "class" if by_class else None
