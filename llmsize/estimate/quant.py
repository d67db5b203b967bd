"""Weight formats and KV dtypes, counted in bits.

A weight format is bits per element + its scales, as stored: NVFP4 = 4 + 8/16 = 4.5 bits (+4 B per tensor).
Which tensors a format leaves in 16 bits matters more than the format itself; that is the `scope`:
  linear  - attention/MLP/expert/SSM projections quantized; embedding, lm_head, norms, routers, biases
            stay in `keep` precision (NVFP4, MXFP4, FP8, GPTQ/AWQ checkpoints);
  experts - only routed experts quantized (gpt-oss: config.json modules_to_not_convert);
  mlp     - MLP, routed and shared experts quantized, attention and SSM mixers kept (NVIDIA's Gemma-4-31B
            NVFP4 export excludes every self_attn);
  all     - every matrix, embedding and lm_head included (llama.cpp GGUF); vectors stay f32.
A recipe names a format per component instead (ModelOpt's MIXED_PRECISION exports: NVIDIA's Qwen3.6 NVFP4 keeps
its experts, shared experts and lm_head in weight-only NVFP4, attention and Gated DeltaNet projections in FP8):
`experts=nvfp4-w4a16,shared_experts=nvfp4-w4a16,attention=fp8,ssm=fp8,lm_head=nvfp4-w4a16`; what it does not
name stays in 16 bits, and the scope is not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import get_args

from llmsize.catalog.recipe import RECIPE_PARTS, check_components, recipe_parts
from llmsize.catalog.schema import Scope
from llmsize.errors import InvalidValueError, close_names, shown
from llmsize.estimate.gguf_blocks import FILE_TYPES, GGML_BLOCKS, NEEDS_IMATRIX


@dataclass(frozen=True)
class QuantFormat:
    id: str
    bits_per_weight: Fraction  # exact: elements + block scales (+ zero points)
    per_tensor_bytes: int  # global scales stored once per tensor
    default_scope: str
    native_compute: str  # precision a card with matching tensor cores computes in
    keep_bits: int  # precision of what the scope leaves unquantized
    description: str
    source: str
    mix: str | None = None  # a llama-quantize file type: one block type per tensor (llmsize.estimate.gguf_mix)
    recipe: tuple[tuple[str, str], ...] = ()  # (component, format id) of a recipe; empty for a plain format
    primary: str | None = None  # a recipe's kernel format: its experts' (else its MLP's ...; RECIPE_PARTS order)

    @property
    def kernel_id(self) -> str:
        """The format whose kernels run most of the step: a recipe's primary part, else the format itself."""
        return self.primary or self.id


def _f(num: int, den: int = 1) -> Fraction:
    return Fraction(num, den)


# fmt: off
FORMATS: dict[str, QuantFormat] = {f.id: f for f in [
    QuantFormat("fp32", _f(32), 0, "all", "fp32", 32, "IEEE float32", "IEEE 754"),
    QuantFormat("bf16", _f(16), 0, "all", "bf16", 16, "bfloat16", "IEEE/Google bfloat16"),
    QuantFormat("fp16", _f(16), 0, "all", "fp16", 16, "IEEE float16", "IEEE 754"),
    # FP8 E4M3 with one FP32 scale per tensor (ModelOpt / compressed-tensors float-quantized).
    QuantFormat("fp8", _f(8), 4, "linear", "fp8", 16, "FP8 E4M3, per-tensor FP32 scale",
                "NVIDIA ModelOpt FP8; compressed-tensors float-quantized"),
    # DeepSeek-V3 release: one FP32 scale per 128x128 block -> 8 + 32/16384 bits.
    QuantFormat("fp8-block128", _f(8) + _f(32, 128 * 128), 0, "linear", "fp8", 16,
                "FP8 E4M3, FP32 scale per 128x128 block",
                "deepseek-ai/DeepSeek-V3 config.json quantization_config weight_block_size [128, 128]"),
    QuantFormat("int8", _f(8), 4, "linear", "int8", 16, "INT8 weights, per-tensor scale (W8A8)",
                "SmoothQuant W8A8 per-tensor"),
    # NVFP4: E2M1 + FP8 E4M3 scale per 16 elements + FP32 per tensor -> (16*4 + 8)/16 = 4.5 bits.
    QuantFormat("nvfp4", _f(4) + _f(8, 16), 4, "linear", "fp4", 16,
                "NVFP4: E2M1, E4M3 scale per 16, FP32 per tensor",
                "shared/reference/nvfp4-format.md (NeMo Automodel NVFP4 docs: 0.5625 bytes per parameter)"),
    # ModelOpt's W4A16_NVFP4: NVFP4's bytes (the same packed weights, E4M3 scales per 16 and FP32 scale per tensor),
    # activations kept in 16 bits: weight-only kernels multiply in BF16 (vLLM routes it to Marlin: PR #42566,
    # "W4A16 NVFP4 fused MoE + mixed-precision dispatch", merged 2026-05-13; SGLang PR #33543 likewise)
    QuantFormat("nvfp4-w4a16", _f(4) + _f(8, 16), 4, "linear", "bf16", 16,
                "NVFP4 weights, 16-bit activations (ModelOpt W4A16_NVFP4: weight-only kernels)",
                "NVIDIA ModelOpt W4A16_NVFP4; vllm-project/vllm PR #42566"),
    # MXFP4 (OCP MX): E2M1 + E8M0 scale per 32 -> (32*4 + 8)/32 = 4.25 bits.
    QuantFormat("mxfp4", _f(4) + _f(8, 32), 0, "linear", "fp4", 16,
                "MXFP4: E2M1, E8M0 scale per 32",
                "OCP Microscaling Formats (MX) v1.0; modelopt mxfp4_tensor.py"),
    # MXFP8 (OCP MX): E4M3 + E8M0 scale per 32 -> (32*8 + 8)/32 = 8.25 bits (ModelOpt MXFP8: nvidia's MiniMax-M3
    # NVFP4 keeps its attention and shared experts in it).
    QuantFormat("mxfp8", _f(8) + _f(8, 32), 0, "linear", "fp8", 16, "MXFP8: E4M3, E8M0 scale per 32",
                "OCP Microscaling Formats (MX) v1.0"),
    # int4, group 128, fp16 scale, symmetric: 4 + 16/128 = 4.125 bits.
    QuantFormat("int4-g128", _f(4) + _f(16, 128), 0, "linear", "bf16", 16,
                "INT4, group 128, FP16 scale (symmetric)", "DESIGN.md; compressed-tensors pack-quantized"),
    # ... in groups of 32 (compressed-tensors pack-quantized, group_size 32: Kimi K2.5's routed experts): 4 + 16/32
    # = 4.5 bits.
    QuantFormat("int4-g32", _f(4) + _f(16, 32), 0, "linear", "bf16", 16,
                "INT4, group 32, BF16 scale (symmetric)", "compressed-tensors pack-quantized (group_size 32)"),
    # ... with an fp16 zero point per group too: 4 + 32/128 = 4.25 bits.
    QuantFormat("int4-g128-zp", _f(4) + _f(32, 128), 0, "linear", "bf16", 16,
                "INT4, group 128, FP16 scale + FP16 zero", "DESIGN.md"),
    # GPTQ / AWQ checkpoints: int32-packed qweight, fp16 scales [K/128, N], int32-packed 4-bit qzeros:
    # 4 + 16/128 + 4/128 = 4.15625 bits.
    QuantFormat("gptq-int4-g128", _f(4) + _f(20, 128), 0, "linear", "bf16", 16,
                "GPTQ 4-bit, group 128 (FP16 scale + packed 4-bit zero)",
                "AutoGPTQ QuantLinear: qweight int32 [K/8, N], scales fp16 [K/g, N], qzeros int32 [K/g, N/8]"),
    # ... and the 8-bit kind: qweight int32 [K/4, N], scales fp16 [K/g, N], qzeros int32 [K/g, N/4]:
    # 8 + 16/128 + 8/128 = 8.1875 bits (Qwen's GPTQ-Int8 releases: bits=8, group_size=128).
    QuantFormat("gptq-int8-g128", _f(8) + _f(24, 128), 0, "linear", "bf16", 16,
                "GPTQ 8-bit, group 128 (FP16 scale + packed 8-bit zero)",
                "AutoGPTQ QuantLinear packing; QwenLM/Qwen2.5 docs/source/quantization/gptq.md @77fb0c1 "
                "(bits=8, group_size=128)"),
    QuantFormat("awq-int4-g128", _f(4) + _f(20, 128), 0, "linear", "bf16", 16,
                "AWQ 4-bit, group 128 (FP16 scale + packed 4-bit zero)",
                "AutoAWQ WQLinear_GEMM: qweight int32 [K, N/8], scales fp16 [K/g, N], qzeros int32 [K/g, N/8]"),
    # gpt-fast int4 (quantize.py WeightOnlyInt4QuantHandler): packed 4-bit weights + a bf16 scale and a bf16 zero
    # per group of 32 (its README's "int4 G=32") -> 4 + 32/32 = 5 bits.
    QuantFormat("int4-g32-zp", _f(4) + _f(32, 32), 0, "linear", "bf16", 16,
                "INT4, group 32, BF16 scale + BF16 zero (gpt-fast int4)",
                "pytorch-labs/gpt-fast quantize.py: scales_and_zeros bf16 [K/groupsize, N, 2]"),
    # MLX affine quantization (mlx.core.quantize, default group_size 64): a 16-bit scale and a 16-bit bias per
    # group -> 4-bit: 4 + 32/64 = 4.5 bits; 8-bit: 8 + 32/64 = 8.5 bits. mlx-lm quantizes the embedding too.
    # mlx.core.quantize takes 2, 3, 4, 5, 6 or 8 bits, the same scale + bias per group: bits + 32/64.
    *[QuantFormat(f"mlx-{b}bit", _f(b) + _f(32, 64), 0, "all", "bf16", 16,
                  f"MLX {b}-bit affine, group 64, 16-bit scale + bias", "ml-explore/mlx docs: mlx.core.quantize")
      for b in (4, 8, 2, 3, 5, 6)],
    # bitsandbytes NF4 (QLoRA, Dettmers et al. 2023, section 3): 4-bit codes + an FP32 absmax per block of 64
    # -> 4 + 32/64 = 4.5 bits; with double quantization the absmax is 8-bit with an FP32 scale per 256 of them
    # -> 4 + 8/64 + 32/(64*256) = 4.127 bits (the paper's 0.127 bits of scale per parameter).
    QuantFormat("bnb-nf4", _f(4) + _f(32, 64), 0, "linear", "bf16", 16,
                "bitsandbytes NF4, FP32 absmax per 64", "QLoRA (arXiv 2305.14314) section 3"),
    QuantFormat("bnb-nf4-dq", _f(4) + _f(8, 64) + _f(32, 64 * 256), 0, "linear", "bf16", 16,
                "bitsandbytes NF4 with double quantization", "QLoRA (arXiv 2305.14314) section 3"),
    # ggml block types, every matrix in the one type (ggml/src/ggml-common.h block structs):
    #   q8_0: 2 + 32 B per 32 -> 8.5 ; q4_0: 2 + 16 B per 32 -> 4.5 ; q4_1: 4 + 16 B per 32 -> 5.0
    #   q5_0: 2 + 4 + 16 B per 32 -> 5.5 ; q5_1: 4 + 4 + 16 B per 32 -> 6.0 ; iq4_nl: 2 + 16 per 32 -> 4.5
    #   q2_K: 16 + 64 + 4 = 84 B per 256 -> 2.625 ; q3_K: 32 + 64 + 12 + 2 = 110 B per 256 -> 3.4375
    #   q4_K: 4 + 12 + 128 = 144 B per 256 -> 4.5 ; q5_K: 4 + 12 + 32 + 128 = 176 B per 256 -> 5.5
    #   q6_K: 128 + 64 + 16 + 2 = 210 B per 256 -> 6.5625 ; iq4_xs: 2 + 2 + 4 + 128 = 136 B per 256 -> 4.25
    #   tq1_0: 48 + 4 + 2 = 54 B per 256 -> 1.6875 ; tq2_0: 64 + 2 = 66 B per 256 -> 2.0625 (ternary)
    #   the i-quants per 256: iq3_s 110 B -> 3.4375 ; iq3_xxs 98 -> 3.0625 ; iq2_s 82 -> 2.5625 ; iq2_xs 74 ->
    #   2.3125 ; iq2_xxs 66 -> 2.0625 ; iq1_m 56 -> 1.75 ; iq1_s 50 -> 1.5625 (gguf_blocks.GGML_BLOCKS)
    *[QuantFormat(f"ggml-{name}", _f(nbytes * 8, block), 0, "all", "bf16", 32,
                  f"ggml {name.upper()} in every matrix ({nbytes} B per {block} weights)",
                  "ggml/src/ggml-common.h block structs")
      for name, nbytes, block in [
          ("q8_0", 34, 32), ("q6_k", 210, 256), ("q5_k", 176, 256), ("q5_1", 24, 32), ("q5_0", 22, 32),
          ("q4_k", 144, 256), ("q4_1", 20, 32), ("q4_0", 18, 32), ("iq4_nl", 18, 32), ("iq4_xs", 136, 256),
          ("q3_k", 110, 256), ("iq3_s", 110, 256), ("iq3_xxs", 98, 256), ("q2_k", 84, 256), ("iq2_s", 82, 256),
          ("iq2_xs", 74, 256), ("iq2_xxs", 66, 256), ("iq1_m", 56, 256), ("iq1_s", 50, 256), ("tq1_0", 54, 256),
          ("tq2_0", 66, 256)]],
    # bitnet.cpp I2_S (microsoft/BitNet utils/convert-hf-to-gguf-bitnet.py quantize_to_i2_s: "packed ternary bytes
    # (4 values per byte) + 32-byte tail with f32 scale"): 2 bits a weight and 32 B a tensor; its quantizer keeps the
    # embedding and the output in F16 (src/llama.cpp of its llama.cpp fork: TQ1_0, TQ2_0 and I2_S -> GGML_TYPE_F16)
    # BitNet b1.58's Hugging Face checkpoints (quantization_config quant_method bitnet): ternary weights packed 4 to
    # a uint8 and one scale a matrix (transformers integrations/bitnet.py: "packed in uint8 tensors, hence the number
    # of values per item is 4"; weight_scale of shape (1)), the embedding and lm_head in 16 bits; the scale's few
    # bytes a matrix are not counted
    QuantFormat("bitnet-2bit", _f(2), 0, "linear", "int8", 16, "BitNet packed ternary: 4 weights a uint8",
                "huggingface/transformers src/transformers/integrations/bitnet.py"),
    QuantFormat("i2_s", _f(2), 32, "linear", "int8", 16, "bitnet.cpp I2_S: 2-bit ternary, one FP32 scale a tensor",
                "microsoft/BitNet utils/convert-hf-to-gguf-bitnet.py quantize_to_i2_s; src/ggml-bitnet-mad.cpp"),
    # GGUF files as llama-quantize writes them: a type per tensor (llmsize/estimate/gguf_mix.py). bits_per_weight
    # is the file type's own block type; the plan reports the file's average.
    *[QuantFormat(f"gguf-{ftype}", _f(GGML_BLOCKS[base][1] * 8, GGML_BLOCKS[base][0]), 0, "all", "bf16", 32,
                  f"GGUF file type {ftype.upper()} (llama-quantize: mostly {base.upper()}, per-tensor rules"
                  + ("; an importance matrix required)" if ftype in NEEDS_IMATRIX else ")"),
                  "llama.cpp src/llama-quant.cpp llama_tensor_get_type", mix=ftype)
      for ftype, base in FILE_TYPES.items()],
]}
# fmt: on

# Cache dtypes: bytes per cached value. nvfp4 = 4.5 bits like the weight format (E4M3 scale per 16).
KV_DTYPE_BYTES: dict[str, Fraction] = {
    "fp32": Fraction(4),
    "bf16": Fraction(2),
    "fp16": Fraction(2),
    "fp8": Fraction(1),
    "int8": Fraction(1),
    "nvfp4": Fraction(9, 16),
    # vLLM's FlashMLA fp8 cache (kv_cache_dtype fp8_ds_mla): per token and MLA layer 512 fp8 latent values,
    # 4 fp32 scales and the 64-value bf16 RoPE part = 656 B; other layers store fp8
    "fp8_ds_mla": Fraction(1),
}
MLA_DS_FP8_BYTES_PER_TOKEN = 512 + 4 * 4 + 64 * 2  # 656
# DeepSeek-V4's FP8 cache row (a window token's or a compressed entry's, 512 values): 448 FP8 values, the 64 RoPE values
# in BF16 and 8 B of UE8M0 scales = 584 B (sgl-project/sglang#37138: "584 -> 368 B/token per K entry" for FP8 ->
# MXFP4; vllm-project/vllm-ascend#9270: "The KV block shape [256//4, head_dim] = [64, 584]")
COMPRESSED_FP8_ROW_BYTES = 448 + 64 * 2 + 8  # 584
# the engines' pages of such rows are padded to a multiple of 576 B: vLLM's fp8_ds_mla (alignment=576, attention.py
# and compressor.py) and SGLang's FlashMLA V4 layout (kernels/ops/attention/dsv4/kv_layout.py KVLayout.V4.page_align)
COMPRESSED_FP8_PAGE_ALIGN = 576
# the engines' own names for an FP8 cache (vLLM's and SGLang's --kv-cache-dtype fp8_e4m3 / fp8_e5m2), read as fp8
KV_DTYPE_ALIASES = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}

STATE_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}

SCOPES = get_args(Scope)


RECIPE_REFUSED = ("ggml-", "mlx-")  # a GGUF file's or an MLX folder's formats: a type per tensor of their own
_RECIPES: dict[str, QuantFormat] = {}  # one object a recipe: the estimators cache by identity


def recipe_format(parts: dict[str, str]) -> QuantFormat:
    """The format of a recipe (component -> format id, each a plain safetensors format): its id lists the parts in
    RECIPE_PARTS order; its bits, scales and compute are its primary part's, what it leaves out stays in 16 bits."""
    check_components(parts)
    same = (parts.get("attention") or "").strip().lower() == (parts.get("attention_out") or "").strip().lower()
    if "attention_out" in parts and same:  # the output projection follows attention where a recipe does not say
        parts = {c: f for c, f in parts.items() if c != "attention_out"}
    fmts = {}
    for c, fid in parts.items():
        f = FORMATS.get(fid.strip().lower())
        if f is None or f.mix or f.id.startswith(RECIPE_REFUSED):
            raise InvalidValueError(f"Recipe part `{shown(c + '=' + fid, 60)}`: `{shown(fid, 40)}` is not a single "
                                    "weight format.",
                                    "Give each component one of: " + ", ".join(
                                        k for k, v in FORMATS.items() if not v.mix and not k.startswith(
                                            RECIPE_REFUSED)) + ".")
        fmts[c] = f
    order = [c for c in RECIPE_PARTS if c in fmts]
    rid = ",".join(f"{c}={fmts[c].id}" for c in order)
    if rid not in _RECIPES:
        head = fmts[order[0]]
        _RECIPES[rid] = QuantFormat(rid, head.bits_per_weight, head.per_tensor_bytes, "all", head.native_compute,
                                    16, "a format per component: " + ", ".join(f"{c} {fmts[c].id}" for c in order),
                                    "the checkpoint's own recipe (ModelOpt MIXED_PRECISION quantized_layers)",
                                    recipe=tuple((c, fmts[c].id) for c in order), primary=head.id)
    return _RECIPES[rid]


def quant_format(name: str) -> QuantFormat:
    """A format by id (or a llama.cpp file type), or a recipe written COMPONENT=FORMAT,..."""
    if "=" in name:
        return recipe_format(recipe_parts(name))
    key = name.lower()
    prefix, _, rest = key.partition("-")  # gguf-iq2-xxs: the type's own part written with hyphens
    for candidate in (key, key.replace("_", "-"), f"gguf-{key}", f"gguf-{key.replace('-', '_')}", f"ggml-{key}",
                      f"ggml-{key.replace('-', '_')}", f"{prefix}-{rest.replace('-', '_')}"):
        if candidate in FORMATS:
            return FORMATS[candidate]
    close = close_names(key, FORMATS, n=3)
    said = f" Did you mean {', '.join(f'`{c}`' for c in close)}?" if close else ""
    raise InvalidValueError(f"Unknown weight format `{shown(name)}`.{said}",
                            "`llmsize formats` lists them" + ("." if close else f": {', '.join(FORMATS)}."))


# the weight formats each runtime loads, largest first: what the levers and the diagnosis offer it
RUNTIME_FORMATS = {
    "vllm": ("fp8", "nvfp4", "mxfp4", "int4-g128"), "sglang": ("fp8", "nvfp4", "mxfp4", "int4-g128"),
    "trtllm": ("fp8", "nvfp4", "int4-g128"), "llamacpp": ("gguf-q8_0", "gguf-q4_k_m", "gguf-q3_k_m", "gguf-q2_k",
                                                                       "gguf-iq2_xxs"),
    "mlx": ("mlx-8bit", "mlx-4bit"), "gpt-fast": ("int8", "int4-g32-zp"),
}

UNQUANTIZED = ("fp32", "fp16", "bf16")


# checkpoints of a safetensors format that llama.cpp's converter writes to a GGUF in their own format: NVFP4
# (convert_hf_to_gguf.py repacks ModelOpt's NVFP4 into ggml's NVFP4 type, ggml-org/llama.cpp PR #19769, with
# kernels from PR #20644, CUDA's dp4a, March 2026); llama-quantize does not make the type
LLAMACPP_CONVERTED = ("nvfp4",)


def block_format(ggml_type: str) -> str | None:
    """The llmsize format of a GGUF tensor's ggml block type: the 16- and 32-bit ones, a converted checkpoint's own
    (LLAMACPP_CONVERTED: NVFP4), MXFP4, else the pure block format (ggml-q4_k ...); None for a type not listed."""
    plain = {"f16": "fp16", "bf16": "bf16", "f32": "fp32"}
    if ggml_type in plain:
        return plain[ggml_type]
    if ggml_type in (*LLAMACPP_CONVERTED, "mxfp4"):
        return ggml_type
    return f"ggml-{ggml_type}" if f"ggml-{ggml_type}" in FORMATS else None


# the GGUF file type nearest a safetensors format llama.cpp does not load, to suggest in its place (gpt-oss's MXFP4
# release is the MXFP4_MOE file its GGUFs are)
NEAREST_GGUF = {"mxfp4": "gguf-mxfp4_moe", "fp8": "gguf-q8_0", "fp8-block128": "gguf-q8_0", "int8": "gguf-q8_0"}


def runtime_load_refusal(runtime: str, format_id: str) -> str | None:
    """Why `runtime` cannot load weights in `format_id`, None where it can: GGUF files (gguf-, ggml-) are llama.cpp's
    (and Ollama's, LM Studio's), MLX's quantized formats are MLX's; 16-bit and 32-bit weights load everywhere."""
    if format_id in UNQUANTIZED:
        return None
    gguf, mlx = format_id.startswith(("gguf-", "ggml-")), format_id.startswith("mlx-")
    if runtime == "llamacpp" and not gguf and format_id not in LLAMACPP_CONVERTED:
        return f"llama.cpp loads GGUF files, and {format_id} is not a GGUF type"
    if runtime == "mlx" and not mlx:
        return f"MLX loads its own quantized formats (mlx-4bit, mlx-8bit ...), and {format_id} is not one"
    if runtime in ("vllm", "sglang") and gguf:
        return (f"{format_id} is a GGUF type (llama.cpp), which {runtime} loads only experimentally (vLLM's docs: "
                "\"highly experimental and under-optimized\")")
    if runtime not in ("llamacpp", "mlx") and (gguf or mlx):
        kind = "a GGUF type (llama.cpp)" if gguf else "an MLX format"
        return f"{format_id} is {kind}, which {runtime} does not serve"
    return None


# the smaller cache dtypes each runtime stores, as the levers and the diagnosis offer them (nvfp4 only where FP4
# runs; llama.cpp's as its K/V pair of cache types, llamacpp_kv_dtype)
RUNTIME_KV = {"vllm": ("fp8",), "sglang": ("fp8",), "trtllm": ("fp8", "nvfp4"), "llamacpp": ("q8_0/q8_0",),
              "mlx": (), "gpt-fast": ()}


def runtime_kv_refusal(runtime: str, kv_dtype: str) -> tuple[str, tuple[str, ...]] | None:
    """Why `runtime` cannot store its cache in `kv_dtype`, and the dtypes it can; None where it can: 16-bit (and
    32-bit) everywhere, beside RUNTIME_KV's (vLLM's FlashMLA cache fp8_ds_mla too)."""
    kv = kv_dtype.lower()
    taken = (*UNQUANTIZED, *(t for t in RUNTIME_KV.get(runtime, ()) if "/" not in t),
             *(("fp8_ds_mla",) if runtime == "vllm" else ()))
    if kv in taken:
        return None
    return f"{runtime} does not store its cache in {kv}", taken


def kv_dtype_flags(kv_dtype: str) -> list[str]:
    """The plan options that give a cache dtype: --kv-dtype, or llama.cpp's --cache-type-k/-v (with the flash
    attention a quantized V cache needs) for a K/V pair."""
    if "/" in kv_dtype:
        k, v = kv_dtype.split("/")
        return ["--cache-type-k", k, "--cache-type-v", v, "--flash-attn", "on"]
    return ["--kv-dtype", kv_dtype]


# llama.cpp's cache types (common/arg.cpp kv_cache_types), each priced by its ggml block
LLAMACPP_KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")


def llamacpp_kv_dtype(cache_type_k: str, cache_type_v: str) -> str:
    """The KV dtype of a llama.cpp cache with these K and V types, as `kv_dtype_bytes` reads it: `K/V`."""
    return f"{cache_type_k.lower()}/{cache_type_v.lower()}"


def kv_dtype_bytes(name: str) -> Fraction:
    """Bytes per cached value. A llama.cpp pair `K/V` (llamacpp_kv_dtype) is the mean of its K and V types' block
    bytes per value, exact where K and V hold as many values a token (every GQA layer; llama.cpp's ledger itself
    prices K and V apart)."""
    key = name.lower()
    if "/" in key:
        k, _, v = key.partition("/")
        if k in LLAMACPP_KV_TYPES and v in LLAMACPP_KV_TYPES:
            return sum((Fraction(GGML_BLOCKS[t][1], GGML_BLOCKS[t][0]) for t in (k, v)), Fraction(0)) / 2
    if key not in KV_DTYPE_BYTES:
        raise InvalidValueError(
            f"Unknown KV-cache dtype `{name}`.", f"Choose one of: {', '.join(KV_DTYPE_BYTES)}."
        )
    return KV_DTYPE_BYTES[key]
