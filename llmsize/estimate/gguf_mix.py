"""What llama-quantize writes for a file type (Q4_K_M, Q3_K_L, ...): the type of every tensor, and the bytes.

A file type is not one block type: llama-quantize picks a type per tensor (src/llama-quant.cpp,
`llama_tensor_get_type_impl`, read at ggml-org/llama.cpp@007dbbf3; first at JohannesGaessler/llama.cpp@5a44f27e).
The rules carried over here, for the file types llmsize names (default options; no importance matrix where
llama-quantize does not require one, an importance matrix for IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M,
IQ3_XXS, IQ3_XS and Q2_K_S, which it refuses to write without one):
  * output.weight, and token_embd.weight when the model has no output.weight (tied): Q6_K, or Q8_0 when the
    file type's block type is Q8_0, when the row length is not a multiple of that block, or for MXFP4_MOE; Q5_K
    for IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M and IQ3_XXS;
  * a separate token_embd.weight: Q2_K for IQ1_S, IQ1_M, IQ2_XXS and IQ2_XS; IQ3_S for IQ2_S, IQ2_M and IQ3_XXS;
  * the 1- and 2-bit i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M) have a branch of their own: attn_v
    Q4_K with GQA >= 4 or 4+ experts, else Q2_K (IQ3_S for IQ2_S/IQ2_M); the first n/8 ffn_down tensors by count
    the same step; attn_output IQ2_XXS for IQ1, IQ3_S for IQ2_S/IQ2_M, Q5_K with 8 experts; attn_k Q4_K with 8
    experts. The rules below are for the other types;
  * attn_v.weight, and with it attn_qkv and attn_kv_b (`category_is_attn_v`; one counter over the three, in
    file order): Q2_K -> Q4_K (GQA >= 4) else Q3_K; Q3_K_M -> Q5_K for the first two, Q4_K after; Q3_K_L ->
    Q5_K; IQ4_NL/IQ4_XS with GQA >= 4 -> Q5_K; Q4_K_M/Q5_K_M -> Q6_K on `use_more_bits` layers; Q4_K_S -> Q5_K for
    the first four; Q2_K_S, IQ3_XS and IQ3_S with GQA >= 4 -> Q4_K; IQ3_XXS -> Q4_K with GQA >= 4 (else IQ3_XXS,
    with its importance matrix); IQ3_M -> Q4_K; then 70B-class models (80 layers) lift Q3_K/Q4_K to Q5_K, and
    8-expert models use Q8_0;
  * attn_k.weight: Q8_0 for 8-expert models; else, as attn_q.weight, IQ3_XS -> IQ3_XXS and IQ3_XXS -> IQ2_S;
  * ffn_gate and ffn_up: IQ3_XS -> IQ3_XXS between n/8 and 7n/8;
  * ffn_down (dense, expert and shared): Q2_K -> Q3_K; Q2_K_S -> Q4_K below n/8; Q3_K_M -> Q5_K below n/16, else
    Q4_K; IQ3_M -> Q4_K below n/8 (and on `use_more_bits` layers with 8 experts); Q3_K_L -> Q5_K; Q4_K_M -> Q6_K
    on `use_more_bits` layers; IQ4_NL/IQ4_XS -> Q5_K below n/8 (without an importance matrix); Q5_K_M -> Q6_K on
    `use_more_bits` layers; Q4_K_S -> Q5_K below n/8 (Falcon has its own ladder, followed too);
  * attn_output.weight: 8-expert models -> Q5_K for Q2_K..Q4_K_M, the IQ3s and the IQ4s; else Q2_K -> Q3_K,
    IQ3_XXS -> IQ3_S, Q3_K_M -> Q4_K, Q3_K_L -> Q5_K, IQ3_M -> Q4_K. (Earlier builds, as read at 5a44f27e, gave
    attn_qkv its own rule, Q4_K_M -> Q5_K, and counted attn_v alone; the current source keeps that branch,
    unreachable behind this one);
  * MXFP4_MOE: stacked expert tensors MXFP4, every other matrix Q8_0;
  * TQ1_0 / TQ2_0 (ternary, llama.cpp PR #8151): a separate token_embd.weight Q4_K (the output, or a tied
    embedding, Q6_K by the first rule); rows not a multiple of 256 fall back to Q4_0;
  * a row length that is not a multiple of the chosen block falls back (the 256-weight i-quants and IQ4_XS ->
    IQ4_NL, Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), and to F16 if that does not divide
    either (llama-quantize refuses a 32-block type on such rows; the estimate costs them in F16);
  * per_layer_token_embd.weight (Gemma 3n and 4 E) as token_embd.weight; per_layer_model_proj and every tensor
    whose name holds altup or laurel (Gemma 3n) kept as converted, 16 bits ("these are very small", "these are not
    too big so keep them as it is");
  * never quantized: 1-D tensors, norms, the MoE router, SSM conv kernels (kept as converted: F32), and nothing
    outside the text model (a GGUF's vision tower is a separate mmproj file).
use_more_bits(i, n) = i < n/8 or i >= 7n/8 or (i - n/8) % 3 == 2 (integer division, as in the C++).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

from llmsize.catalog.schema import AttentionBase, ModelSpec
from llmsize.errors import InvalidValueError
from llmsize.estimate.gguf_blocks import FALLBACK, FILE_TYPES, GGML_BLOCKS
from llmsize.estimate.gguf_tensors import GgufTensor, gguf_tensors
from llmsize.estimate.memo import by_identity
from llmsize.estimate.runtime_model import text_model

FUSED_QKV_FAMILIES = ("phi3", "falcon")  # their GGUF stores one attn_qkv matrix (and phi3 one ffn_up for gate+up)
SEVENTY_B_FAMILIES = ("llama", "qwen2", "deci")  # 80 layers is llama.cpp's LLM_TYPE_70B for these
ATTN_V_LIKE = re.compile(r"attn_(v|qkv|kv_b)\.weight$")  # tensor_get_category's ATTENTION_V, _QKV and _KV_B


def use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


@dataclass(frozen=True)
class Hparams:
    family: str
    n_layer: int
    n_gqa: int  # query heads per KV head, first attention layer
    n_expert: int
    is_70b: bool


def hparams(model: ModelSpec) -> Hparams:
    att = next((g.mixer for g in model.layer_groups if isinstance(g.mixer, AttentionBase)), None)
    gqa = att.num_attention_heads // att.num_key_value_heads if att else 1
    moe = next((g.mlp for g in model.layer_groups if g.mlp is not None and g.mlp.kind == "moe"), None)
    fam = model.family.lower()
    is_70b = model.num_layers == 80 and fam in SEVENTY_B_FAMILIES and (fam != "llama" or gqa > 1)
    return Hparams(fam, model.num_layers, gqa, moe.num_experts if moe else 0, is_70b)


def _fused(tensors: list[GgufTensor]) -> list[GgufTensor]:
    """Phi-3 / Falcon layout: q, k, v in one attn_qkv (and Phi-3's gate+up in one ffn_up)."""
    out, by_layer = [], defaultdict(dict)
    for t in tensors:
        m = re.match(r"blk\.(\d+)\.(attn_q|attn_k|attn_v|ffn_gate|ffn_up)\.weight$", t.name)
        if m:
            by_layer[int(m.group(1))][m.group(2)] = t
    for t in tensors:
        m = re.match(r"blk\.(\d+)\.(attn_q|attn_k|attn_v|ffn_gate|ffn_up)\.weight$", t.name)
        if not m:
            out.append(t)
            continue
        i, kind, parts = int(m.group(1)), m.group(2), by_layer[int(m.group(1))]
        if kind == "attn_q":
            rows = sum(parts[k].ne1 for k in ("attn_q", "attn_k", "attn_v") if k in parts)
            out.append(GgufTensor(f"blk.{i}.attn_qkv.weight", t.ne0, rows, component="attention"))
        elif kind == "ffn_up" and "ffn_gate" in parts:
            out.append(GgufTensor(f"blk.{i}.ffn_up.weight", t.ne0, 2 * t.ne1, component="mlp"))
        elif kind == "ffn_up":
            out.append(t)
    return out


def file_tensors(model: ModelSpec) -> tuple[GgufTensor, ...]:
    """The file's tensors before quantization (the same for every file type of a model: `fit` asks for six). A GGUF
    holds the text model (a vision tower is an mmproj file apart): the caches here key on it (runtime_model.
    text_model, one object per catalog model), so a model and a text-only runtime's copy of it are one file."""
    return _file_tensors(text_model(model))


@by_identity(maxsize=1024)
def _file_tensors(model: ModelSpec) -> tuple[GgufTensor, ...]:
    ts = gguf_tensors(model)
    return tuple(_fused(ts) if model.family.lower() in FUSED_QKV_FAMILIES else ts)


def _layer(name: str) -> int:
    m = re.match(r"blk\.(\d+)\.", name)
    return int(m.group(1)) if m else 0


# what llama_tensor_get_type's rules tell tensors apart by (their names: tensor_get_category), read once per model
KEEP16, OUTPUT, EMBD, ATTN_V, ATTN_K, ATTN_Q, ATTN_OUTPUT, FFN_UP, FFN_GATE, FFN_DOWN, OTHER = range(11)
# the file types with a branch of their own below 3 bits (the 1- and 2-bit i-quants)
LOW_IQ = ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m")


def _kind(name: str, has_output: bool) -> int:
    if name == "per_layer_model_proj.weight" or "altup" in name or "laurel" in name:
        return KEEP16
    if name == "output.weight" or (not has_output and name == "token_embd.weight"):
        return OUTPUT
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):  # tensor_name_match_token_embd
        return EMBD
    if ATTN_V_LIKE.search(name):
        return ATTN_V
    for part, kind in (("attn_k.weight", ATTN_K), ("attn_q.weight", ATTN_Q), ("attn_output.weight", ATTN_OUTPUT),
                       ("ffn_up", FFN_UP), ("ffn_gate", FFN_GATE), ("ffn_down", FFN_DOWN)):
        if part in name:
            return kind
    return OTHER


@by_identity(maxsize=1024)
def _kinds(model: ModelSpec) -> tuple[Hparams, tuple[tuple[int, int], ...], int]:
    """The model's hparams, each of its file's tensors' (kind, block index) in file order, and its attn_v-like
    tensors' count: the same for every file type (`fit` asks for a dozen)."""
    tensors = file_tensors(model)
    has_output = any(t.name == "output.weight" for t in tensors)
    kinds = tuple((_kind(t.name, has_output), _layer(t.name)) for t in tensors)
    return hparams(model), kinds, sum(k == ATTN_V for k, _ in kinds)


class _Chooser:
    """llama_tensor_get_type for one file, with its counters (attn_v, ffn_down, ffn_gate and ffn_up seen so far)."""

    def __init__(self, model: ModelSpec, ftype: str):
        self.hp, _, self.n_attention_wv = _kinds(model)
        self.ftype, self.default = ftype, FILE_TYPES[ftype]
        self.i_attention_wv = 0
        self.i_ffn = {FFN_DOWN: 0, FFN_GATE: 0, FFN_UP: 0}

    def _ffn_layer(self, kind: int, layer: int) -> int:
        """layer_info: the block of an expert model's tensor, else the count of such tensors seen so far."""
        i = layer if self.hp.n_expert > 1 else self.i_ffn[kind]
        self.i_ffn[kind] += 1
        return i

    def _low_iq(self, kind: int, new: str) -> str:
        """The 1- and 2-bit i-quants' own branch: attn_v to Q4_K (GQA >= 4 or 4+ experts), else a step up, as are
        ffn_down's first eighth (by count) and attn_output (IQ1 -> IQ2_XXS; Q5_K with 8 experts). IQ2_S and IQ2_M
        step to IQ3_S where the others take Q2_K."""
        hp, ft = self.hp, self.ftype
        up = "iq3_s" if ft in ("iq2_s", "iq2_m") else "q2_k"
        if kind == ATTN_V:
            self.i_attention_wv += 1
            return "q4_k" if hp.n_gqa >= 4 or hp.n_expert >= 4 else up
        if kind == ATTN_K and hp.n_expert == 8:
            return "q4_k"
        if kind == FFN_DOWN:
            i = self.i_ffn[FFN_DOWN]
            self.i_ffn[FFN_DOWN] += 1
            return up if i < hp.n_layer // 8 else new
        if kind == ATTN_OUTPUT:
            if hp.n_expert == 8:
                return "q5_k"
            return {"iq1_s": "iq2_xxs", "iq1_m": "iq2_xxs", "iq2_s": "iq3_s", "iq2_m": "iq3_s"}.get(ft, new)
        return new

    def choose(self, t: GgufTensor, kind: int, layer: int) -> str:
        """The type of tensor `t`, of `kind` (_kind) in block `layer`."""
        hp, ft = self.hp, self.ftype
        new = self.default
        falcon = hp.family == "falcon"
        if kind == KEEP16:
            return "f16"  # "these are not too big so keep them as it is", "these are very small": as converted
        if kind == OUTPUT:
            if ft == "mxfp4_moe" or falcon or t.ne0 % GGML_BLOCKS[new][0]:
                new = "q8_0"
            elif ft in LOW_IQ or ft == "iq3_xxs":
                new = "q5_k"
            elif new != "q8_0":
                new = "q6_k"
        elif ft == "mxfp4_moe":
            new = "mxfp4" if t.ne2 > 1 else "q8_0"
        elif kind == EMBD:
            if ft in ("iq2_xxs", "iq2_xs", "iq1_s", "iq1_m"):
                new = "q2_k"
            elif ft in ("iq2_s", "iq2_m", "iq3_xxs"):
                new = "iq3_s"
            elif ft in ("tq1_0", "tq2_0"):
                new = "q4_k"
        elif ft in LOW_IQ:
            new = self._low_iq(kind, new)
        elif kind == ATTN_V:
            i, n = self.i_attention_wv, self.n_attention_wv
            if ft == "q2_k":
                new = "q4_k" if hp.n_gqa >= 4 else "q3_k"
            elif ft == "q2_k_s" and hp.n_gqa >= 4:
                new = "q4_k"
            elif ft == "iq3_xxs":
                # (IQ3_S without an importance matrix, which llama-quantize requires for IQ3_XXS)
                new = "q4_k" if hp.n_gqa >= 4 else "iq3_xxs"
            elif ft in ("iq3_xs", "iq3_s") and hp.n_gqa >= 4 or ft == "iq3_m":
                new = "q4_k"
            elif ft == "q3_k_m":
                new = "q5_k" if i < 2 else "q4_k"
            elif ft == "q3_k_l":
                new = "q5_k"
            elif ft in ("iq4_nl", "iq4_xs") and hp.n_gqa >= 4:
                new = "q5_k"
            elif ft in ("q4_k_m", "q5_k_m") and use_more_bits(i, n):
                new = "q6_k"
            elif ft == "q4_k_s" and i < 4:
                new = "q5_k"
            if hp.is_70b and new in ("q3_k", "q4_k"):
                new = "q5_k"
            if hp.n_expert == 8:
                new = "q8_0"
            self.i_attention_wv += 1
        elif kind in (ATTN_K, ATTN_Q):
            if kind == ATTN_K and hp.n_expert == 8:
                new = "q8_0"
            elif ft in ("iq3_xs", "iq3_xxs"):
                new = "iq3_xxs" if ft == "iq3_xs" else "iq2_s"
        elif kind in (FFN_GATE, FFN_UP):
            i, n = self._ffn_layer(kind, layer), hp.n_layer
            if ft == "iq3_xs" and n // 8 <= i < 7 * n // 8:
                new = "iq3_xxs"
        elif kind == FFN_DOWN:
            i, n = self._ffn_layer(kind, layer), hp.n_layer
            if ft == "q2_k":
                new = "q3_k"
            elif ft == "q2_k_s":
                new = "q4_k" if i < n // 8 else new
            elif ft == "q3_k_m":
                new = "q5_k" if i < n // 16 else ("q4_k" if not falcon or use_more_bits(i, n) else "q3_k")
            elif ft == "iq3_m" and (i < n // 8 or hp.n_expert == 8 and use_more_bits(i, n)):
                new = "q4_k"
            elif ft == "q3_k_l":
                new = "q4_k" if falcon else "q5_k"
            elif ft == "q4_k_m":
                if falcon:
                    new = "q6_k" if i < n // 16 else ("q5_k" if use_more_bits(i, n) else "q4_k")
                elif use_more_bits(i, n):
                    new = "q6_k"
            elif i < n // 8 and ft in ("iq4_nl", "iq4_xs"):
                new = "q5_k"
            elif ft == "q5_k_m" and use_more_bits(i, n):
                new = "q6_k"
            elif ft == "q4_k_s" and not falcon and i < n // 8:
                new = "q5_k"
        elif kind == ATTN_OUTPUT:
            if not falcon:
                if hp.n_expert == 8:
                    if ft in ("q2_k", "iq3_xs", "iq3_xxs", "q3_k_s", "q3_k_m", "iq4_nl", "q4_k_s", "q4_k_m", "iq3_s",
                              "iq3_m", "iq4_xs"):
                        new = "q5_k"
                else:
                    new = {"q2_k": "q3_k", "iq3_xxs": "iq3_s", "q3_k_m": "q4_k", "q3_k_l": "q5_k",
                           "iq3_m": "q4_k"}.get(ft, new)
            elif ft == "q3_k_l":
                new = "q4_k"
        if t.ne0 % GGML_BLOCKS[new][0]:
            new = FALLBACK.get(new, "f16")  # a 32-block type on odd rows: llama-quantize refuses; costed in F16
            if t.ne0 % GGML_BLOCKS[new][0]:
                new = "f16"
        return new


def tensor_bytes(t: GgufTensor, ggml_type: str) -> int:
    per, nbytes = GGML_BLOCKS[ggml_type]
    return t.elements // per * nbytes


class MixTensor(NamedTuple):  # (a tuple: a file holds hundreds, and `fit` makes a file per model and type)
    tensor: GgufTensor
    ggml_type: str
    nbytes: int


def file_mix(model: ModelSpec, ftype: str) -> tuple[MixTensor, ...]:
    """Every tensor of the file llama-quantize would write for `ftype`, with its type and bytes (worked out once per
    model and type: a plan asks three times, `fit` for every model and type)."""
    return _file_mix(text_model(model), ftype)


@by_identity(maxsize=1024)
def _file_mix(model: ModelSpec, ftype: str) -> tuple[MixTensor, ...]:
    if ftype not in FILE_TYPES:
        raise InvalidValueError(f"Unknown GGUF file type `{ftype}`.", f"Choose one of: {', '.join(FILE_TYPES)}.")
    tensors = file_tensors(model)
    chooser = _Chooser(model, ftype)
    kinds = _kinds(model)[1]
    # a checkpoint released with MXFP4 experts (gpt-oss) keeps them: convert_hf_to_gguf writes the MXFP4 blocks
    # as they are, and llama-quantize does not requantize an already quantized tensor ("requantizing from type
    # mxfp4 is disabled")
    mxfp4_experts = model.release.quant == "mxfp4"
    out = []
    for t, (kind, layer) in zip(tensors, kinds):
        if t.f32:
            ty = "f32"
        elif mxfp4_experts and t.component == "experts" and t.ne2 > 1:
            ty = "mxfp4"
        else:
            ty = chooser.choose(t, kind, layer)
        out.append(MixTensor(t, ty, tensor_bytes(t, ty)))
    return tuple(out)


def mix_bytes(model: ModelSpec, ftype: str, unread: bool = False) -> dict[str, int]:
    """Stored bytes per component (llmsize.estimate.params.COMPONENTS) of the file; `unread`: of them, the tensors
    loaded and never read (a shared-cache layer's k/v)."""
    out: dict[str, int] = defaultdict(int)
    for m in file_mix(model, ftype):
        if not (unread and m.tensor.read):
            out[m.tensor.component] += m.nbytes
    return dict(out)


def types_by_bytes(mix: list[MixTensor]) -> dict[str, int]:
    """Bytes per ggml type, largest first (what a header dump summarises)."""
    out: dict[str, int] = defaultdict(int)
    for m in mix:
        out[m.ggml_type] += m.nbytes
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
