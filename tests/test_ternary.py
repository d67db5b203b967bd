"""Ternary weights: BitNet b1.58 2B4T (models/bitnet-b1.58-2b-4t.yaml) and the formats that store them, at their
real bits with scales: llama.cpp's TQ1_0 (54 B per 256 weights, 1.6875 bits) and TQ2_0 (66 B per 256, 2.0625 bits)
(ggml-common.h block_tq1_0 / block_tq2_0; llama.cpp PR #8151), bitnet.cpp's I2_S (2 bits a weight and a 32-byte
tail a tensor: microsoft/BitNet utils/convert-hf-to-gguf-bitnet.py quantize_to_i2_s), not the ideal log2(3) = 1.58.
"""

from __future__ import annotations

import json
import math

import pytest

from llmsize.estimate.gguf_blocks import GGML_BLOCKS
from llmsize.estimate.gguf_mix import file_mix, types_by_bytes
from llmsize.estimate.params import params_total
from llmsize.estimate.quant import quant_format
from llmsize.estimate.weights import weight_bytes

# 30 layers x (q 2560^2 + k, v 2560 x 640 each + o 2560^2 + gate, up, down 2560 x 6912): every ternary matrix
TERNARY = 30 * (2 * 2560 * 2560 + 2 * 2560 * 640 + 3 * 2560 * 6912)
EMBEDDING = 128256 * 2560  # tied: stored once
NORMS = 30 * (3 * 2560 + 6912) + 2560  # input, post-attention, attn_sub_norm, ffn_sub_norm; the final norm


def test_parameters_are_the_readmes_2_4b(catalog):
    """2,084,044,800 ternary + 328,335,360 embedding + 440,320 norms = 2,412,820,480: microsoft/BitNet's README
    says "2.4B parameters"; the technical report's 0.4 GB non-embedding memory is the ternary weights at
    log2(3) bits, 2,084,044,800 x 1.585 / 8 = 0.413 GB (the files store more bits than that)."""
    m = catalog.model("bitnet-b1.58-2b-4t")
    assert TERNARY == 2_084_044_800 and params_total(m) == TERNARY + EMBEDDING + NORMS == 2_412_820_480
    assert round(params_total(m) / 1e9, 1) == m.params_official / 1e9 == 2.4
    assert TERNARY * math.log2(3) / 8 / 1e9 == pytest.approx(0.413, abs=5e-4)


def test_block_sizes_are_ggmls(catalog):
    """The ternary blocks as gguf-py (ggml-org's own package) states them: (256, 2 + 4 x 13) and (256, 2 + 64)."""
    gguf = pytest.importorskip("gguf")
    for name in ("tq1_0", "tq2_0"):
        assert GGML_BLOCKS[name] == tuple(gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name.upper()]])
    assert quant_format("ggml-tq1_0").bits_per_weight == 54 * 8 / 256 == 1.6875
    assert quant_format("ggml-tq2_0").bits_per_weight == 66 * 8 / 256 == 2.0625


def test_i2_s_is_within_1_percent_of_the_published_file(catalog):
    """microsoft/bitnet-b1.58-2B-4T-gguf ggml-model-i2_s.gguf (revision a1f2f1c7) is 1,187,801,280 B: 210 I2_S
    matrices (TERNARY / 4 B + 32 B each = 521,017,920), the tied embedding in F16 (656,670,720), 121 F32 norms
    (1,761,280) and the header (tokenizer and metadata, the rest). llmsize counts the matrices and embedding exactly
    and the norms at 16 bits: 1,178,569,280 B, 0.78% under the file."""
    w = weight_bytes(catalog.model("bitnet-b1.58-2b-4t"), quant_format("i2_s"), "linear")
    assert w.bytes_total == TERNARY // 4 + 210 * 32 + EMBEDDING * 2 + NORMS * 2 == 1_178_569_280
    assert w.bytes_total / 1_187_801_280 - 1 == pytest.approx(-0.0078, abs=5e-4)


@pytest.mark.parametrize("ftype, block_bytes, total", [("tq1_0", 54, 710_702_080), ("tq2_0", 66, 808_391_680)])
def test_tq_files_as_llama_quantize_writes_them(catalog, ftype, block_bytes, total):
    """llama-quantize TQ1_0 / TQ2_0 (src/llama-quant.cpp): the ternary matrices in the file type's block, the tied
    embedding quantized as the output, Q6_K (210 B per 256: 269,337,600 B), norms F32:
        TQ1_0: 2,084,044,800 x 54 / 256 = 439,603,200 + 269,337,600 + 1,761,280 = 710,702,080 B
        TQ2_0: 2,084,044,800 x 66 / 256 = 537,292,800 + 269,337,600 + 1,761,280 = 808,391,680 B."""
    m = catalog.model("bitnet-b1.58-2b-4t")
    mix = file_mix(m, ftype)
    by_type = types_by_bytes(list(mix))
    assert by_type == {ftype: TERNARY * block_bytes // 256, "q6_k": EMBEDDING * 210 // 256, "f32": NORMS * 4}
    assert sum(by_type.values()) == total
    assert weight_bytes(m, quant_format(f"gguf-{ftype}"), "all").bytes_total == total


def test_a_separate_embedding_is_q4_k_and_odd_rows_fall_back_to_q4_0(catalog):
    """With an untied output (Llama 3.1 8B) the token embedding is Q4_K and the output Q6_K; Qwen2.5 0.5B's rows of
    896 (3.5 x 256) take Q4_0, llama-quantize's fallback for the ternary types."""
    mix = {t.tensor.name: t.ggml_type for t in file_mix(catalog.model("llama-3.1-8b"), "tq1_0")}
    assert mix["token_embd.weight"] == "q4_k" and mix["output.weight"] == "q6_k"
    assert mix["blk.0.attn_q.weight"] == "tq1_0"
    odd = {t.tensor.name: t.ggml_type for t in file_mix(catalog.model("qwen2.5-0.5b"), "tq2_0")}
    assert odd["blk.0.attn_q.weight"] == "q4_0"


def test_plan_reads_fewer_bytes_in_ternary_files(run_cli):
    """The decode ceiling follows the bytes: TQ1_0 below TQ2_0 below I2_S below BF16."""
    ceilings = {}
    for q in ("gguf-tq1_0", "gguf-tq2_0", "i2_s", "bf16"):
        code, out, err = run_cli("plan", "bitnet-b1.58-2b-4t", "--gpu", "rtx4090", "--quant", q, "--json")
        assert code == 0, err
        ceilings[q] = json.loads(out)["decode"]["ceiling_tok_s"]
    assert ceilings["gguf-tq1_0"] > ceilings["gguf-tq2_0"] > ceilings["i2_s"] > ceilings["bf16"]


def test_a_ternary_gguf_file_plans_from_its_header(run_cli, tmp_path):
    """A real GGUF (gguf-py's writer) of llama.cpp's bitnet architecture with TQ1_0 and TQ2_0 matrices, its sub-norms
    in F32 and a Q6_K output: plan reads the exact bytes of each tensor from the header."""
    gguf = pytest.importorskip("gguf")
    import numpy as np

    Q = gguf.GGMLQuantizationType
    h, ff, vocab, layers = 256, 512, 512, 2
    w = gguf.GGUFWriter(str(tmp_path / "bitnet.gguf"), "bitnet")
    for k, v in {"block_count": layers, "embedding_length": h, "context_length": 4096, "feed_forward_length": ff,
                 "attention.head_count": 4, "attention.head_count_kv": 2}.items():
        w.add_uint32(f"bitnet.{k}", v)
    expected = 0

    def add(name, ne, ty):
        nonlocal expected
        if ty == Q.F32:
            w.add_tensor(name, np.zeros(tuple(reversed(ne)), dtype=np.float32))
            expected += 4 * int(np.prod(ne))
            return
        blk, size = gguf.GGML_QUANT_SIZES[ty]
        w.add_tensor(name, np.zeros(tuple(reversed(ne[1:])) + (ne[0] // blk * size,), dtype=np.uint8), raw_dtype=ty)
        expected += int(np.prod(ne)) // blk * size

    add("token_embd.weight", (h, vocab), Q.Q6_K)
    for i in range(layers):
        p = f"blk.{i}."
        for n in ("attn_norm", "attn_sub_norm", "ffn_norm"):
            add(p + n + ".weight", (h,), Q.F32)
        add(p + "ffn_sub_norm.weight", (ff,), Q.F32)
        for n, ne in (("attn_q", (h, h)), ("attn_k", (h, h // 2)), ("attn_v", (h, h // 2)), ("attn_output", (h, h))):
            add(p + n + ".weight", ne, Q.TQ1_0)
        for n, ne in (("ffn_gate", (h, ff)), ("ffn_up", (h, ff)), ("ffn_down", (ff, h))):
            add(p + n + ".weight", ne, Q.TQ2_0)
    add("output_norm.weight", (h,), Q.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    code, out, err = run_cli("plan", str(tmp_path / "bitnet.gguf"), "--gpu", "rtx4090", "--json")
    assert code == 0, err
    assert json.loads(out)["weights"]["bytes_total"] == expected


def test_expected_speed_only_where_a_runtime_runs_ternary_files(run_cli):
    """vLLM (the default for a safetensors release) does not load BitNet's packed weights, nor llama.cpp bitnet.cpp's
    I2_S: no expected figure, and the report says which runtime does; llama.cpp's TQ1_0 gets one, with the note that
    no measurement of its kernels is in the dataset."""
    for args in ((), ("--quant", "i2_s", "--runtime", "llamacpp")):
        code, out, err = run_cli("plan", "bitnet-b1.58-2b-4t", "--gpu", "rtx4090", *args, "--json")
        e = json.loads(out)["expected"]
        assert code == 0 and e["tok_s"] is None and "bitnet.cpp runs I2_S" in e["reason"]
    code, out, err = run_cli("plan", "bitnet-b1.58-2b-4t", "--gpu", "rtx4090", "--quant", "gguf-tq1_0", "--json")
    d = json.loads(out)
    assert d["expected"]["runtime"] == "llamacpp" and 0 < d["expected"]["tok_s"] < d["decode"]["ceiling_tok_s"]
    assert any("no llama.cpp measurement of gguf-tq1_0-class" in n for n in d["expected"]["notes"])


@pytest.mark.parametrize("ftype, published_mib", [("gguf-tq1_0", 176.65), ("gguf-tq2_0", 207.03)])
def test_llama_cpps_published_tq_sizes(run_cli, ftype, published_mib):
    """llama.cpp PR #8151 (github.com/ggml-org/llama.cpp/pull/8151, its "Size" table) lists 1bitLLM/bitnet_b1_58-large
    "(728.84 M)" at TQ1_0 176.65 MiB and TQ2_0 207.03 MiB. Its config.json (tests/data/hf-configs, BitnetForCausalLM
    with the two sub-norms a layer) counts 728,842,752 parameters, and the files llama-quantize writes (ternary
    matrices, the tied embedding as the output in Q6_K, F32 norms) come within 1% of the table, under it by about
    0.7 MiB: the file's header (a 32,002-token vocabulary) is not weights."""
    from pathlib import Path

    cfg = Path(__file__).parent / "data" / "hf-configs" / "1bitLLM__bitnet_b1_58-large.json"
    code, out, err = run_cli("plan", str(cfg), "--gpu", "rtx4090", "--quant", ftype, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["model"]["params_total"] == 728_842_752
    mib = d["weights"]["bytes_total"] / 2**20
    assert abs(mib / published_mib - 1) < 0.01 and 0.5 < published_mib - mib < 1.0
