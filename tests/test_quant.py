"""Exact bits per weight: the format table is counted in bits, converted to bytes once."""

from fractions import Fraction

import pytest

from llmsize.errors import InvalidValueError
from llmsize.estimate.quant import FORMATS, kv_dtype_bytes, quant_format


@pytest.mark.parametrize("fmt, bits", [
    # DESIGN.md / nvfp4-format.md: (16*4 + 8)/16 = 4.5
    ("nvfp4", Fraction(9, 2)),
    # OCP MX v1.0: (32*4 + 8)/32 = 4.25
    ("mxfp4", Fraction(17, 4)),
    # DESIGN.md: int4, group 128, fp16 scale: 4 + 16/128 = 4.125; with an fp16 zero: 4.25
    ("int4-g128", Fraction(33, 8)),
    ("int4-g128-zp", Fraction(17, 4)),
    # compressed-tensors pack-quantized, group 32, bf16 scale (Kimi K2.5's experts): 4 + 16/32 = 4.5
    ("int4-g32", Fraction(9, 2)),
    # GPTQ/AWQ: fp16 scale + 4-bit packed zero per 128: 4 + 20/128 = 4.15625
    ("gptq-int4-g128", Fraction(133, 32)),
    ("fp8", Fraction(8)),
    ("bf16", Fraction(16)),
    # ggml/src/ggml-common.h block sizes: bytes * 8 / elements
    ("ggml-q8_0", Fraction(34 * 8, 32)),   # 8.5
    ("ggml-q4_0", Fraction(18 * 8, 32)),   # 4.5
    ("ggml-q4_1", Fraction(20 * 8, 32)),   # 5.0
    ("ggml-q5_0", Fraction(22 * 8, 32)),   # 5.5
    ("ggml-q2_k", Fraction(84 * 8, 256)),  # 2.625
    ("ggml-q3_k", Fraction(110 * 8, 256)),  # 3.4375
    ("ggml-q4_k", Fraction(144 * 8, 256)),  # 4.5
    ("ggml-q5_k", Fraction(176 * 8, 256)),  # 5.5
    ("ggml-q6_k", Fraction(210 * 8, 256)),  # 6.5625
    ("ggml-iq4_xs", Fraction(136 * 8, 256)),  # 4.25
])
def test_bits_per_weight_exact(fmt, bits):
    assert FORMATS[fmt].bits_per_weight == bits


def test_gguf_values_in_decimal():
    assert float(FORMATS["ggml-q6_k"].bits_per_weight) == 6.5625
    assert float(FORMATS["ggml-q3_k"].bits_per_weight) == 3.4375


def test_format_lookup_accepts_gguf_short_names():
    assert quant_format("Q4_K").id == "ggml-q4_k"  # a block type: no llama-quantize file type is called Q4_K
    assert quant_format("Q4_K_M").id == "gguf-q4_k_m"  # a file type
    assert quant_format("q6_k").id == "gguf-q6_k"  # both exist: the file type wins, ggml-q6_k names the block
    assert quant_format("NVFP4").id == "nvfp4"


def test_unknown_format_names_the_value():
    with pytest.raises(InvalidValueError, match="`fp3`"):
        quant_format("fp3")


def test_kv_dtypes():
    assert kv_dtype_bytes("bf16") == 2
    assert kv_dtype_bytes("fp8") == 1
    assert kv_dtype_bytes("nvfp4") == Fraction(9, 16)  # 4.5 bits
    with pytest.raises(InvalidValueError, match="`fp5`"):
        kv_dtype_bytes("fp5")


def test_mlp_scope_keeps_attention_in_16_bits(catalog):
    """NVIDIA's Gemma-4-31B NVFP4 export excludes every self_attn (hf_quant_config exclude_modules):
    scope 'mlp' quantizes MLP/experts only, so attention bytes equal the bf16 ones."""
    from llmsize.estimate.quant import quant_format
    from llmsize.estimate.weights import weight_bytes
    m = catalog.model("gemma-4-12b")
    nv = quant_format("nvfp4")
    mlp = weight_bytes(m, nv, "mlp")
    lin = weight_bytes(m, nv, "linear")
    bf = weight_bytes(m, quant_format("bf16"), "all")
    assert mlp.stored_bytes["attention"] == bf.stored_bytes["attention"]
    assert mlp.stored_bytes["mlp"] == lin.stored_bytes["mlp"]
    assert lin.bytes_total < mlp.bytes_total < bf.bytes_total


def test_bitsandbytes_nf4_bits():
    from fractions import Fraction

    from llmsize.estimate.quant import quant_format
    # QLoRA section 3: blocksize 64 with FP32 constants = 32/64 = 0.5 bits; double quant = 8/64 + 32/(64*256)
    assert quant_format("bnb-nf4").bits_per_weight == Fraction(9, 2)
    dq = quant_format("bnb-nf4-dq").bits_per_weight
    assert dq - 4 == Fraction(8, 64) + Fraction(32, 64 * 256)
    assert float(dq - 4) == pytest.approx(0.127, abs=5e-4)


def test_fp8_ds_mla_is_656_bytes_per_token_per_mla_layer(catalog):
    """vLLM fp8_ds_mla (FlashMLA): 512 fp8 latent + 4 fp32 scales + 64 bf16 RoPE values = 656 B per token."""
    from llmsize.estimate.kv import kv_bytes
    m = catalog.model("deepseek-v3")
    assert kv_bytes(m, 1000, "fp8_ds_mla").bytes_per_token == 61 * 656
    assert kv_bytes(m, 1000, "fp8").bytes_per_token == 61 * 576


def test_every_format_plans_and_prices_or_says_why_not():
    """Every format `llmsize formats` lists plans Qwen3-8B on an RTX 4090 and an M4 Max and gets an expected figure
    or its reason under the default runtime, without an error (the pure ggml-iq* block types once raised one: their
    kernel class read a file type they have none of)."""
    from llmsize.catalog.loader import Catalog
    from llmsize.estimate.expected import expect
    from llmsize.estimate.plan import PlanInputs, make_plan

    cat = Catalog()
    runtimes = {r.id: r for r in cat.runtimes.all()}
    for fid in FORMATS:
        for gpu in ("rtx4090", "m4-max"):
            r = expect(make_plan(cat.model("qwen3-8b"), cat.gpu(gpu), PlanInputs(quant=fid)), runtimes)
            assert (r.expected is None) == (r.reason is not None), (fid, gpu)


def test_a_gguf_type_written_with_hyphens_is_found():
    assert quant_format("gguf-iq2-xxs").id == "gguf-iq2_xxs" and quant_format("GGUF-Q4-K-M").id == "gguf-q4_k_m"
    assert quant_format("ggml-iq2-xxs").id == "ggml-iq2_xxs" and quant_format("iq2-xxs").id == "gguf-iq2_xxs"
