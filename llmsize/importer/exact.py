"""Exact weight bytes from safetensors headers: by dtype and by component, the parameters they hold, the
formats they show, and the bytes a decode step reads (same rules as llmsize.estimate.weights: embedding
table not read, a tied lm_head read in full, routed experts at the share the batch routes to, vision/audio
towers and MTP layers stored but not read).

Parameters in packed tensors (shared/reference/nvfp4-checkpoints.md and the formats' loaders): NVFP4
`weight_packed` / ModelOpt uint8 `weight` and MXFP4 `*_blocks` hold 2 weights per byte, GPTQ/AWQ int32
`qweight` 8; scales, zero points and index tensors hold none.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from llmsize.catalog.schema import ModelSpec
from llmsize.errors import shown
from llmsize.estimate.params import GATHERED, shared_cache_layers, unused_kv_weight
from llmsize.importer.safetensors_header import TensorInfo

SCALE_SUFFIXES = ("weight_scale", "weight_scale_2", "weight_global_scale", "input_scale", "input_global_scale",
                  "weight_scale_inv", "_scales", ".scales", "qzeros", "g_idx", "absmax", "quant_map",
                  "weight_zero_point", "weight_shape", "k_scale", "v_scale", "bitsandbytes__nf4",
                  "bitsandbytes__fp4")
EXTRA = re.compile(r"vision|visual|audio|mm_projector|multi_modal|embed_vision|embed_audio|image_newline|mtp")
# DeepSeek-V4's checkpoints keep DeepSeek's own names: embed.weight, head.weight, layers.N.attn.*, layers.N.ffn.*
# (gate.tid2eid: the hash-routed layers' token table), layers.N.hc_attn_* / hc_ffn_* and hc_head_* (the
# hyper-connections), mtp.N.* (public DeepSeek-V4 conversion and quantization tools' tests name them so)
COMPONENT_RULES = [  # first match wins; names lower-cased
    ("per_layer_embedding", re.compile(r"embed_tokens_per_layer")),
    ("embedding", re.compile(r"embed_tokens|word_embeddings|\bwte\b|tok_embeddings|embeddings\.weight|"
                             r"^embed\.weight$")),
    ("lm_head", re.compile(r"lm_head|^output\.weight|^head\.weight$")),
    ("other", re.compile(r"(^|\.)hc_(attn|ffn|head)_")),
    ("norms", re.compile(r"norm|layer_scalar|\bln_")),
    ("shared_experts", re.compile(r"shared_expert")),
    ("experts", re.compile(r"\.experts\.|block_sparse_moe\.(input|output)_linear")),  # Granite's stacked experts
    ("router", re.compile(r"\.(gate|router)\.(weight|bias|e_score_correction_bias|tid2eid)$|\.router\.|"
                          r"e_score_correction_bias")),
    # Mamba-2's (Nemotron-H's mixer., Granite 4.0's mamba.), gated delta-nets', LFM2's short conv (conv.in_proj,
    # conv.conv, conv.out_proj)
    ("ssm", re.compile(r"(mixer|mamba)\.(in_proj|out_proj|conv1d|a_log|d$|dt_bias)|\.a_log$|\.d$|conv1d|linear_attn|"
                       r"\.conv\.(in_proj|out_proj|conv)\.")),
    ("attention", re.compile(r"self_attn|\.attn\.|attention|mixer\.(q|k|v|o)_proj|\.sinks")),
    ("mlp", re.compile(r"mlp|feed_forward|ffn|mixer\.(up|down|gate)_proj|latent_proj")),  # LatentMoE's fc1/fc2
]


LAYER_INDEX = re.compile(r"layers\.(\d+)\.")


def component(name: str, num_layers: int, layers: tuple[tuple[str | None, str | None], ...] = ()) -> str:
    """The component a checkpoint tensor belongs to, by its name; `layers`, each decoder layer's (mixer kind, MLP
    kind), settles the names whose component depends on the layer: Kimi Linear's KDA layers keep their q/k/v/o
    and gate projections under self_attn. like its MLA layers (ssm there), and Granite 4.0's shared_mlp is a shared
    expert beside routed ones but the dense MLP without them."""
    n = name.lower()
    if EXTRA.search(n) or draft_only(n, num_layers):
        return "extra"
    m = LAYER_INDEX.search(n) if layers else None
    kinds = layers[int(m.group(1))] if m and int(m.group(1)) < len(layers) else (None, None)
    if kinds[0] == "linear" and "self_attn." in n and "norm" not in n.rsplit("self_attn.", 1)[1]:
        return "ssm"
    if "shared_mlp." in n and "norm" not in n:
        return "shared_experts" if kinds[1] == "moe" else "mlp"
    for comp, rx in COMPONENT_RULES:
        if rx.search(n):
            return comp
    return "other"


def layer_kinds(spec: ModelSpec) -> tuple[tuple[str | None, str | None], ...]:
    """Each decoder layer's (mixer kind, MLP kind), in stack order."""
    return tuple((g.mixer.kind if g.mixer else None, g.mlp.kind if g.mlp else None) for g in spec.layer_stack())


def draft_only(name: str, num_layers: int) -> bool:
    """Whether the tensor is a multi-token-prediction layer's, which engines load only to draft for speculative
    decoding (vLLM's DeepSeek, GLM and Qwen3.5 loaders skip them otherwise): Qwen3.5's `mtp.` tensors, or a layer
    past the decoder's (DeepSeek-V3's MTP layer sits at index 61, GLM-4.5's at num_hidden_layers)."""
    n = name.lower()
    m = re.search(r"layers\.(\d+)\.", n)
    return "mtp" in n or bool(m and int(m.group(1)) >= num_layers)


def logical_params(t: TensorInfo, names: set[str]) -> int:
    n = t.name
    if n.endswith(SCALE_SUFFIXES) or ".quant_state" in n:
        return 0
    if t.dtype == "U8" and (n.endswith(("weight_packed", "_blocks"))
                            or (n.endswith(".weight") and n[:-len("weight")] + "weight_scale" in names)
                            or n[:-len("weight")] + "weight.absmax" in names):
        return 2 * t.numel  # two 4-bit codes per byte (NVFP4, MXFP4, bitsandbytes 4-bit)
    if t.dtype == "I32" and n.endswith(("qweight", "weight_packed")):
        return 8 * t.numel  # GPTQ / AWQ qweight, compressed-tensors pack-quantized: eight 4-bit weights per int32
    return t.numel


def detect_formats(tensors: dict[str, TensorInfo]) -> list[str]:
    names = set(tensors)
    found = set()
    for n, t in tensors.items():
        base = n.rsplit(".", 1)[0]
        if n.endswith("weight_packed") and tensors.get(base + ".weight_scale", t).dtype == "F8_E4M3":
            found.add("nvfp4 (compressed-tensors)")
        elif n.endswith("weight_packed") and t.dtype == "I32":
            found.add("int4 (compressed-tensors pack-quantized)")
        elif n.endswith(".weight") and t.dtype == "U8" and base + ".weight_scale_2" in names:
            found.add("nvfp4 (ModelOpt)")
        elif n.endswith("_blocks") and t.dtype == "U8":
            found.add("mxfp4")
        elif n.endswith(".weight") and t.dtype in ("F8_E4M3", "F8_E5M2"):
            found.add("fp8")
        elif n.endswith("qweight") and t.dtype == "I32":
            found.add("int4 (GPTQ/AWQ qweight)")
        elif n.endswith("absmax"):
            found.add("bitsandbytes")
        elif n.endswith(".weight") and t.dtype in ("BF16", "F16", "F32") and len(t.shape) == 2:
            found.add(t.dtype.lower())
    return sorted(found)


@dataclass
class ExactWeights:
    files: list  # paths, or URLs for --hub
    bytes_by_component: dict[str, int]
    bytes_by_dtype: dict[str, int]
    params_by_component: dict[str, int]
    formats: list[str]
    tied: bool  # the config ties them and no lm_head tensor is stored: the embedding is read as the lm_head
    experts_share: tuple[int, int] | None  # (top-k, experts) of the routed experts
    notes: list[str] = field(default_factory=list)
    source: str = "safetensors headers"  # what the bytes were read from ("GGUF tensor infos")
    tensors: tuple[tuple[str, int], ...] = ()  # (name, bytes) of each tensor, where a placement needs them (GGUF)
    quantized_bits: float | None = None  # bits per weight over the quantized tensors, where the file says (GGUF)
    unused_bytes: dict[str, int] = field(default_factory=dict)  # stored, never read: shared-cache layers' k/v
    draft_only_bytes: int = 0  # of the extra bytes, the MTP layers': in the files, out of memory unless drafting

    @property
    def bytes_total(self) -> int:
        return sum(self.bytes_by_component.values())

    @property
    def params_total(self) -> int:
        return sum(self.params_by_component.values())

    def read_by_component(self, batch: int = 1) -> dict[str, float]:
        out: dict[str, float] = {}
        for comp, b in self.bytes_by_component.items():
            if comp in (*GATHERED, "extra"):
                continue
            b -= self.unused_bytes.get(comp, 0)
            if comp == "experts" and self.experts_share:
                k, e = self.experts_share
                b = b * (1 - (1 - k / e) ** batch)
            out[comp] = float(b)
        if self.tied:
            out["lm_head"] = float(self.bytes_by_component.get("embedding", 0))
        return out

    def bytes_read(self, batch: int = 1) -> float:
        return sum(self.read_by_component(batch).values())


def exact_weights(tensors: dict[str, TensorInfo], files: list[Path], spec: ModelSpec) -> ExactWeights:
    names = set(tensors)
    by_comp: dict[str, int] = defaultdict(int)
    by_dtype: dict[str, int] = defaultdict(int)
    params: dict[str, int] = defaultdict(int)
    unused: dict[str, int] = defaultdict(int)
    shared = shared_cache_layers(spec)
    kinds = layer_kinds(spec)
    draft = 0
    for n, t in tensors.items():
        comp = component(n, spec.num_layers, kinds)
        by_comp[comp] += t.nbytes
        draft += t.nbytes if comp == "extra" and draft_only(n, spec.num_layers) else 0
        by_dtype[t.dtype] += t.nbytes
        params[comp] += logical_params(t, names)
        if comp != "extra" and unused_kv_weight(n, shared):  # the decoder's layers, not a tower's
            unused[comp] += t.nbytes
    moe = next((g.mlp for g in spec.layer_groups if g.mlp is not None and g.mlp.kind == "moe"), None)
    has_head = any(component(n, spec.num_layers, kinds) == "lm_head" for n in names)
    notes = []
    # the config says whether the lm_head is the embedding; the headers only confirm it (a missing lm_head of
    # an untied model is a missing tensor, checked by check_complete, never a reason to call it tied)
    tied = spec.tie_word_embeddings and not has_head
    if spec.tie_word_embeddings and has_head:
        notes.append("config.json ties the embeddings, but the checkpoint also stores an lm_head tensor: counted as "
                     "stored and read")
    if by_comp.get("other"):
        other = [n for n in names if component(n, spec.num_layers, kinds) == "other"]
        notes.append(f"{len(other)} tensor(s) of no known component (e.g. {shown(sorted(other)[0])}), counted as "
                     "read per token")
    if draft and not any("multi-token-prediction" in x.name.lower() for x in spec.extra):
        notes.append(f"multi-token-prediction tensors, {draft / 1e9:,.2f} GB of the files: engines load them only to "
                     "draft for speculative decoding, so the weights in memory leave them out")
    return ExactWeights(files, dict(by_comp), dict(by_dtype), dict(params), detect_formats(tensors), tied,
                        (moe.experts_per_token, moe.num_experts) if moe else None, notes, unused_bytes=dict(unused),
                        draft_only_bytes=draft)


MISMATCH_LIMIT = 0.10  # the headers' parameters may differ from config.json's count by this much


def _count(n: float) -> str:
    """A parameter count in the unit it reads best in: 1.23 B, 45.6 M, 7,890."""
    return f"{n / 1e9:,.2f} B" if n >= 1e9 else f"{n / 1e6:,.1f} M" if n >= 1e6 else f"{n:,.0f}"


def check_complete(exact: ExactWeights, spec: ModelSpec, where: str) -> str | None:
    """Why these headers cannot be the whole of the checkpoint config.json describes, or None.

    Two tests, both on parameters rather than bytes (so a format the headers store differently from the
    estimate's is no mismatch): an untied model must store an lm_head, and the decoder's parameters in the
    headers (towers, MTP layers and the lm_head aside) must be within MISMATCH_LIMIT of the config's count."""
    from llmsize.estimate.params import params_by_component

    if not spec.tie_word_embeddings and not exact.bytes_by_component.get("lm_head"):
        return (f"{where}: config.json says tie_word_embeddings false, but no lm_head tensor is in the "
                "safetensors headers: a shard is missing, or the files are not this model's.")
    skip = ("extra", "lm_head")  # towers and MTP layers; an lm_head some tied checkpoints store anyway
    want = sum(v for c, v in params_by_component(spec).items() if c not in skip)
    have = sum(v for c, v in exact.params_by_component.items() if c not in skip)
    if want and abs(have - want) / want > MISMATCH_LIMIT:
        return (f"{where}: the safetensors headers hold {_count(have)} decoder parameters where config.json "
                f"describes {_count(want)} ({(have - want) / want:+.0%}, more than the "
                f"{MISMATCH_LIMIT:.0%} allowed): files are missing, or they are not this model's.")
    return None
