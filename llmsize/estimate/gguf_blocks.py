"""ggml block types and llama-quantize file types, as facts: sizes from ggml/src/ggml-common.h, file types and
their default block type from llama.cpp src/llama-quant.cpp (llama_model_quantize_impl)."""

from __future__ import annotations

# ggml block types: (weights per block, bytes per block), ggml/src/ggml-common.h block structs
GGML_BLOCKS: dict[str, tuple[int, int]] = {
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2),
    "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "q8_0": (32, 34),
    "q2_k": (256, 84), "q3_k": (256, 110), "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210),
    "iq4_nl": (32, 18), "iq4_xs": (256, 136), "mxfp4": (32, 17),
    # ternary (llama.cpp PR #8151): tq1_0 = 48 B of 5 trits a byte + 4 B of 4 a byte + an f16 scale = 54 B per 256
    # (1.6875 bits); tq2_0 = 64 B of 2-bit values + an f16 scale = 66 B per 256 (2.0625 bits)
    "tq1_0": (256, 54), "tq2_0": (256, 66),
}

# file type -> the block type its tensors default to (llama_model_quantize_impl's switch)
FILE_TYPES: dict[str, str] = {
    "q4_0": "q4_0", "q4_1": "q4_1", "q5_0": "q5_0", "q5_1": "q5_1", "q8_0": "q8_0",
    "q2_k": "q2_k", "q3_k_s": "q3_k", "q3_k_m": "q3_k", "q3_k_l": "q3_k",
    "q4_k_s": "q4_k", "q4_k_m": "q4_k", "q5_k_s": "q5_k", "q5_k_m": "q5_k", "q6_k": "q6_k",
    "iq4_nl": "iq4_nl", "iq4_xs": "iq4_xs", "mxfp4_moe": "mxfp4", "tq1_0": "tq1_0", "tq2_0": "tq2_0",
}

FALLBACK = {"q2_k": "iq4_nl", "q3_k": "iq4_nl", "iq4_xs": "iq4_nl", "q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0",
            "tq1_0": "q4_0", "tq2_0": "q4_0"}
