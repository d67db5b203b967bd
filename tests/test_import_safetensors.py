"""safetensors headers: exact bytes by dtype and component, the formats detected, shards and indexes, and
hostile files (truncated, garbled, oversized, inconsistent) as one-line errors, fuzzed."""

import json
import random
import struct

import pytest
from stfiles import LINEARS, tiny_llama_folder, write_safetensors

from llmsize.estimate.quant import quant_format
from llmsize.estimate.weights import weight_bytes
from llmsize.importer.safetensors_header import HeaderError, read_folder, read_header
from llmsize.importer.source import import_model


@pytest.mark.parametrize("layout, fmt, detected", [
    ("bf16", "bf16", ["bf16"]),
    ("ct-nvfp4", "nvfp4", ["bf16", "nvfp4 (compressed-tensors)"]),
    ("modelopt-nvfp4", "nvfp4", ["bf16", "nvfp4 (ModelOpt)"]),
    ("fp8", "fp8", ["bf16", "fp8"]),
])
def test_exact_bytes_equal_the_analytic_estimate(tmp_path, layout, fmt, detected):
    """The tiny checkpoints hold exactly what the formats price: NVFP4 = N*K/2 codes + N*K/16 fp8 scales +
    4 B per tensor (4.5 bits); FP8 = N*K + 4 B; embedding, lm_head and norms bf16."""
    im = import_model(tiny_llama_folder(tmp_path / layout, layout))
    assert im.release.quant == fmt
    ex = im.exact
    est = weight_bytes(im.spec, quant_format(fmt), im.release.scope)
    assert ex.bytes_total == est.bytes_total
    for comp in ("embedding", "lm_head", "attention", "mlp", "norms"):
        assert ex.bytes_by_component.get(comp, 0) == est.stored_bytes[comp], comp
    assert ex.bytes_read() == pytest.approx(est.bytes_read_per_token)
    assert ex.formats == detected
    # parameters are logical weights, not storage elements: 2 per packed byte, none in scales
    assert ex.params_total == im.spec.params_official
    from llmsize.estimate.params import params_total
    assert ex.params_total == params_total(im.spec)


def test_gptq_counts_eight_weights_per_int32_and_reports_g_idx(tmp_path):
    im = import_model(tiny_llama_folder(tmp_path / "gptq", "gptq"))
    assert im.release.quant == "gptq-int4-g128" and "int4 (GPTQ/AWQ qweight)" in im.exact.formats
    from llmsize.estimate.params import params_total
    assert im.exact.params_total == params_total(im.spec)
    # by hand: per matrix qweight K/8*N*4 + scales 1*N*2 + qzeros 1*N/8*4 + g_idx K*4 bytes
    per_layer = sum(k // 8 * n * 4 + n * 2 + n // 8 * 4 + k * 4 for n, k in LINEARS.values())
    assert im.exact.bytes_by_component["attention"] + im.exact.bytes_by_component["mlp"] == 2 * per_layer


def test_shards_through_the_index(tmp_path):
    one = import_model(tiny_llama_folder(tmp_path / "one", "ct-nvfp4"))
    three = import_model(tiny_llama_folder(tmp_path / "three", "ct-nvfp4", shards=3))
    assert len(three.exact.files) == 3
    assert three.exact.bytes_by_component == one.exact.bytes_by_component


def test_missing_shard_is_named(tmp_path):
    folder = tiny_llama_folder(tmp_path / "m", "bf16", shards=2)
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(HeaderError,
                       match=r"1 shard\(s\) that .*index.json lists are missing: model-00002-of-00002.safetensors"):
        import_model(folder)


def test_index_listing_a_tensor_no_shard_has(tmp_path):
    folder = tiny_llama_folder(tmp_path / "x", "bf16", shards=2)
    idx = folder / "model.safetensors.index.json"
    raw = json.loads(idx.read_text())
    raw["weight_map"]["model.ghost.weight"] = "model-00001-of-00002.safetensors"
    idx.write_text(json.dumps(raw))
    with pytest.raises(HeaderError, match="1 tensor\\(s\\) it lists are in no shard"):
        read_folder(folder)


def _valid(tmp_path):
    return write_safetensors(tmp_path / "v.safetensors", {"a.weight": ("BF16", (4, 8)), "b": ("F32", (3,))})


def _raw(path, header_bytes: bytes, n=None, data=b""):
    path.write_bytes(struct.pack("<Q", len(header_bytes) if n is None else n) + header_bytes + data)
    return path


@pytest.mark.parametrize("make, match", [
    (lambda p: p.write_bytes(b"\x01\x02"), "too short"),
    (lambda p: _raw(p, b"{}", n=0), "header length 0 bytes is out of range"),
    (lambda p: _raw(p, b"{}", n=200 * 2**20), "out of range"),
    (lambda p: _raw(p, b"{}", n=64), "runs past the end"),
    (lambda p: _raw(p, b"\xff\xfe{"), "not valid JSON"),
    (lambda p: _raw(p, b"[1,2]"), "not a JSON object"),
    (lambda p: _raw(p, b'{"t": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}}', data=b"\0"),
     "unknown dtype 'Q9'"),
    (lambda p: _raw(p, b'{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}', data=b"\0" * 8),
     "needs 8 bytes but data_offsets span 4"),
    (lambda p: _raw(p, b'{"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}', data=b"\0" * 4),
     "not a list of non-negative integers"),
    (lambda p: _raw(p, b'{"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}', data=b"\0" * 8),
     "past the 8 bytes of data"),
    (lambda p: _raw(p, b'{"t": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}}', data=b"\0" * 8),
     "begin <= end"),
])
def test_hostile_headers_are_one_line_errors(tmp_path, make, match):
    p = tmp_path / "bad.safetensors"
    make(p)
    with pytest.raises(HeaderError, match=match) as e:
        read_header(p)
    assert str(p) in e.value.one_line() and "\n" not in e.value.one_line()


def test_fuzzed_headers_never_escape_as_other_errors(tmp_path):
    """1,200 seeded mutations of a valid file (byte flips in the length and header, truncations, spliced
    JSON): each either parses or raises HeaderError; nothing else, no hang (reads are bounded)."""
    good = _valid(tmp_path).read_bytes()
    (n,) = struct.unpack("<Q", good[:8])
    rng = random.Random(1234)
    p = tmp_path / "fuzz.safetensors"
    outcomes = {"ok": 0, "error": 0}
    for i in range(1200):
        b = bytearray(good)
        kind = i % 4
        if kind == 0:  # flip bytes in the length field or header
            for _ in range(rng.randint(1, 4)):
                j = rng.randrange(0, 8 + n)
                b[j] = rng.randrange(256)
        elif kind == 1:  # truncate anywhere
            b = b[:rng.randrange(0, len(b))]
        elif kind == 2:  # replace a header character by a JSON-significant one
            j = rng.randrange(8, 8 + n)
            b[j] = ord(rng.choice('{}[]",:0123456789-e. '))
        else:  # a random length field
            b[:8] = struct.pack("<Q", rng.choice([rng.randrange(0, 2**64), rng.randrange(0, 4 * n)]))
        p.write_bytes(bytes(b))
        try:
            read_header(p)
            outcomes["ok"] += 1
        except HeaderError as e:
            assert "\n" not in e.one_line()
            outcomes["error"] += 1
    assert outcomes["error"] > 600 and sum(outcomes.values()) == 1200


def test_no_tensor_data_is_read(tmp_path, monkeypatch):
    """Only 8 + header bytes are read, whatever the file size."""
    import os
    p = write_safetensors(tmp_path / "big.safetensors", {"w": ("BF16", (1024, 1024))})
    real_open, reads = os.fdopen, []

    class Spy:
        def __init__(self, f):
            self.f = f

        def read(self, k=-1):
            reads.append(k)
            return self.f.read(k)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

    monkeypatch.setattr(os, "fdopen", lambda *a, **k: Spy(real_open(*a, **k)))  # how llmsize.files opens
    read_header(p)
    assert reads[0] == 8 and len(reads) == 2 and reads[1] < 200


@pytest.mark.parametrize("layout, fmt, detected", [
    ("ct-int4", "int4-g128", "int4 (compressed-tensors pack-quantized)"),
    ("awq", "awq-int4-g128", "int4 (GPTQ/AWQ qweight)"),
    ("bnb-nf4", "bnb-nf4", "bitsandbytes"),
])
def test_int4_layouts_count_logical_weights(tmp_path, layout, fmt, detected):
    im = import_model(tiny_llama_folder(tmp_path / layout, layout))
    assert im.release.quant == fmt and detected in im.exact.formats
    from llmsize.estimate.params import params_total
    assert im.exact.params_total == params_total(im.spec)  # 8 weights per int32, 2 per packed byte


def test_gpt_oss_mxfp4_blocks_equal_the_estimate(tmp_path):
    """gpt-oss: MXFP4 experts (4 bits + an E8M0 byte per 32 = 4.25 bits), everything else bf16; scope experts."""
    from stfiles import tiny_gpt_oss_folder
    im = import_model(tiny_gpt_oss_folder(tmp_path / "oss"))
    assert (im.release.quant, im.release.scope) == ("mxfp4", "experts")
    assert "mxfp4" in im.exact.formats
    est = weight_bytes(im.spec, quant_format("mxfp4"), "experts")
    for comp in ("experts", "attention", "router", "embedding", "lm_head", "norms"):
        assert im.exact.bytes_by_component.get(comp, 0) == est.stored_bytes[comp], comp
    from llmsize.estimate.params import params_total
    assert im.exact.params_total == params_total(im.spec)
    # routed experts read at k/E = 2/4 at batch 1
    assert im.exact.read_by_component(1)["experts"] == pytest.approx(im.exact.bytes_by_component["experts"] / 2)


def test_an_mtp_layer_stays_in_the_files_and_a_vision_tower_comes_in(tmp_path, run_cli):
    """A checkpoint's multi-token-prediction layer (here DeepSeek's way: a layer past num_hidden_layers, index 2 of a
    2-layer model; Qwen3.5's are named mtp.*) is in the files, and engines load it only to draft: the plan's weights
    leave its bytes out and a note says so, where a vision tower's bytes stay in (engines load it). The tiny tower:
    one [64, 64] BF16 matrix, 8,192 B; the MTP layer: one [64, 128] BF16 matrix, 16,384 B, and mtp.fc [64, 128]
    another 16,384 B."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 256,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16"}))
    from stfiles import tiny_llama_tensors
    tensors = tiny_llama_tensors("bf16")
    tensors["model.visual.blocks.0.attn.proj.weight"] = ("BF16", (64, 64))
    tensors["model.layers.2.mlp.down_proj.weight"] = ("BF16", (64, 128))
    tensors["mtp.fc.weight"] = ("BF16", (64, 128))
    write_safetensors(folder / "model.safetensors", tensors)
    im = import_model(folder)
    assert im.exact.bytes_by_component["extra"] == 8_192 + 16_384 + 16_384
    assert im.exact.draft_only_bytes == 32_768
    assert any("multi-token-prediction tensors" in n for n in im.notes)
    code, out, err = run_cli("plan", str(folder), "--gpu", "h100", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["weights"]["bytes_by_component"]["extra"] == 8_192
    assert d["weights"]["bytes_total"] == im.exact.bytes_total - 32_768


def test_a_qwen35_folder_counts_its_tower_and_mtp_layer_in_the_headers_total(tmp_path, run_cli):
    """A Qwen3.5 checkpoint folder (a tiny one: hidden 64, 4 layers, a 1-block tower of width 32): config.json
    describes the tower and the MTP layer (the entry's extra) and the headers count every tensor, so the extras are
    in the official count and the counts agree; the plan stores the tower, not the MTP layer."""
    import json as _json

    from llmsize.estimate.params import params_comparable_to_official

    cfg = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
           "text_config": {"model_type": "qwen3_5_text", "hidden_size": 64, "num_hidden_layers": 4,
                           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                           "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 256,
                           "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
                           "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
                           "mtp_num_hidden_layers": 1, "tie_word_embeddings": False},
           "vision_config": {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                             "out_hidden_size": 64, "num_position_embeddings": 16, "patch_size": 2,
                             "deepstack_visual_indexes": []}}
    folder = tmp_path / "q35"
    folder.mkdir()
    (folder / "config.json").write_text(_json.dumps(cfg))
    spec = import_model(folder / "config.json", read_headers=False).spec
    tower, mtp = spec.extra
    from llmsize.estimate.params import model_pieces
    decoder = sum(p.params for p in model_pieces(spec) if p.stored and p.component != "extra")
    # the decoder's parameters in three tensors of the right components, then the tower's and the MTP layer's
    tensors = {"model.language_model.embed_tokens.weight": ("BF16", (100, 64)), "lm_head.weight": ("BF16", (100, 64)),
               "model.language_model.layers.0.mlp.up_proj.weight": ("BF16", (decoder - 2 * 6400,)),
               "model.visual.blocks.0.mlp.weight": ("BF16", (tower.params,)),
               "mtp.layers.0.mlp.weight": ("BF16", (mtp.params,))}
    write_safetensors(folder / "model.safetensors", tensors)
    im = import_model(folder)
    assert im.spec.params_official == decoder + tower.params + mtp.params == im.exact.params_total
    assert all(x.in_official_count for x in im.spec.extra)
    assert params_comparable_to_official(im.spec) == im.spec.params_official
    code, out, err = run_cli("plan", str(folder), "--gpu", "h100", "--json")
    assert code == 0, err
    assert _json.loads(out)["weights"]["bytes_by_component"]["extra"] == tower.params * 2
