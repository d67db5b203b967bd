"""ggml block types and llama-quantize file types, as facts: sizes from ggml/src/ggml-common.h, file types and
their default block type from llama.cpp src/llama-quant.cpp (llama_ftype_get_default_type, tensor_type_fallback,
tensor_requires_imatrix; read at ggml-org/llama.cpp@007dbbf3)."""

from __future__ import annotations

# ggml block types: (weights per block, bytes per block), ggml/src/ggml-common.h block structs
GGML_BLOCKS: dict[str, tuple[int, int]] = {
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2),
    "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "q8_0": (32, 34),
    "q2_k": (256, 84), "q3_k": (256, 110), "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210),
    "iq4_nl": (32, 18), "iq4_xs": (256, 136), "mxfp4": (32, 17),
    # NVIDIA's FP4 (ggml PR #19769): four UE4M3 scales, one a 16 weights, and 32 B of E2M1 pairs per 64 weights; a
    # checkpoint's second-level scale a tensor is not in the block (its few bytes are not counted)
    "nvfp4": (64, 36),
    # the i-quants (weights as indices into lattice codebooks, ggml-common.h block_iq*), per 256 weights:
    #   iq1_s: d 2 + qs 32 + qh 16 = 50 B (1.5625 bits); iq1_m: qs 32 + qh 16 + scales 8 = 56 B (1.75; no d)
    #   iq2_xxs: d 2 + qs 64 = 66 B (2.0625); iq2_xs: d 2 + qs 64 + scales 8 = 74 B (2.3125)
    #   iq2_s: d 2 + qs 64 + qh 8 + scales 8 = 82 B (2.5625); iq3_xxs: d 2 + qs 96 = 98 B (3.0625)
    #   iq3_s: d 2 + qs 64 + qh 8 + signs 32 + scales 4 = 110 B (3.4375)
    "iq1_s": (256, 50), "iq1_m": (256, 56), "iq2_xxs": (256, 66), "iq2_xs": (256, 74), "iq2_s": (256, 82),
    "iq3_xxs": (256, 98), "iq3_s": (256, 110),
    # ternary (llama.cpp PR #8151): tq1_0 = 48 B of 5 trits a byte + 4 B of 4 a byte + an f16 scale = 54 B per 256
    # (1.6875 bits); tq2_0 = 64 B of 2-bit values + an f16 scale = 66 B per 256 (2.0625 bits)
    "tq1_0": (256, 54), "tq2_0": (256, 66),
}

# file type -> the block type its tensors default to (llama_ftype_get_default_type). Not one-to-one: IQ2_S writes
# mostly IQ2_XS, IQ2_M mostly IQ2_S, IQ3_XS, IQ3_S and IQ3_M mostly IQ3_S; their rules tell them apart.
FILE_TYPES: dict[str, str] = {
    "q4_0": "q4_0", "q4_1": "q4_1", "q5_0": "q5_0", "q5_1": "q5_1", "q8_0": "q8_0",
    "q2_k": "q2_k", "q2_k_s": "q2_k", "q3_k_s": "q3_k", "q3_k_m": "q3_k", "q3_k_l": "q3_k",
    "q4_k_s": "q4_k", "q4_k_m": "q4_k", "q5_k_s": "q5_k", "q5_k_m": "q5_k", "q6_k": "q6_k",
    "iq1_s": "iq1_s", "iq1_m": "iq1_m", "iq2_xxs": "iq2_xxs", "iq2_xs": "iq2_xs", "iq2_s": "iq2_xs",
    "iq2_m": "iq2_s", "iq3_xxs": "iq3_xxs", "iq3_xs": "iq3_s", "iq3_s": "iq3_s", "iq3_m": "iq3_s",
    "iq4_nl": "iq4_nl", "iq4_xs": "iq4_xs", "mxfp4_moe": "mxfp4", "tq1_0": "tq1_0", "tq2_0": "tq2_0",
}

# the file types llama-quantize refuses to write without an importance matrix (tensor_requires_imatrix: a tensor
# other than the embedding and the output in IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S or IQ3_XXS, or Q2_K in a Q2_K_S
# file): every published file of these types was made with one
NEEDS_IMATRIX = ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq3_xxs", "iq3_xs", "q2_k_s")

# a row length that is not a multiple of the block (tensor_type_fallback): the 256-weight i-quants and IQ4_XS ->
# IQ4_NL, Q2_K, Q3_K and the ternary types -> Q4_0 (IQ4_NL and Q4_0 both 18 B per 32)
FALLBACK = {**{t: "iq4_nl" for t in ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_xs")},
            "q2_k": "q4_0", "q3_k": "q4_0", "tq1_0": "q4_0", "tq2_0": "q4_0",
            "q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0"}
