"""`plan model.gguf`: real GGUF files written with gguf-py's GGUFWriter (tiny tensors, real metadata keys of
several architectures), read back through the header only; hostile headers get one line and exit code 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from conftest import assert_one_line_error  # noqa: E402
from gguf import GGML_QUANT_SIZES, GGUFWriter  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402

from llmsize.importer.gguf_file import GgufError, read_gguf  # noqa: E402
from llmsize.importer.source import import_gguf  # noqa: E402


def _nbytes(ne, ty):
    blk, size = GGML_QUANT_SIZES[ty]
    return int(np.prod(ne)) // blk * size


class Model:
    """A GGUF in the making: metadata and tensors (shape as GGUF stores it, ne0 first)."""

    def __init__(self, arch):
        self.arch, self.meta, self.tensors = arch, {}, []

    def t(self, name, ne, ty=Q.Q4_K):
        self.tensors.append((name, tuple(ne), ty))

    def write(self, path, split=None):
        w = GGUFWriter(str(path), self.arch)
        for k, v in self.meta.items():
            key = k if k.startswith(("general.", "tokenizer.", "split.")) else f"{self.arch}.{k}"
            if isinstance(v, bool):
                w.add_bool(key, v)
            elif isinstance(v, list):
                w.add_array(key, v)
            elif isinstance(v, float):
                w.add_float32(key, v)
            elif isinstance(v, str):
                w.add_string(key, v)
            else:
                w.add_uint32(key, v)
        for name, ne, ty in (self.tensors if split is None else split):
            if ty == Q.F32:
                w.add_tensor(name, np.zeros(tuple(reversed(ne)), dtype=np.float32))
            else:
                blk, size = GGML_QUANT_SIZES[ty]
                w.add_tensor(name, np.zeros(tuple(reversed(ne[1:])) + (ne[0] // blk * size,), dtype=np.uint8),
                             raw_dtype=ty)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path

    def bytes(self):
        return sum(_nbytes(ne, ty) for _, ne, ty in self.tensors)


def llama(layers=2, h=256, heads=4, kv=2, ff=512, vocab=512):
    m = Model("llama")
    m.meta = {"block_count": layers, "embedding_length": h, "context_length": 4096, "feed_forward_length": ff,
              "attention.head_count": heads, "attention.head_count_kv": kv, "general.file_type": 15}
    m.t("token_embd.weight", (h, vocab))
    for i in range(layers):
        p = f"blk.{i}."
        m.t(p + "attn_norm.weight", (h,), Q.F32)
        m.t(p + "attn_q.weight", (h, heads * h // heads))
        m.t(p + "attn_k.weight", (h, kv * h // heads))
        m.t(p + "attn_v.weight", (h, kv * h // heads), Q.Q6_K)
        m.t(p + "attn_output.weight", (h, h))
        m.t(p + "ffn_norm.weight", (h,), Q.F32)
        m.t(p + "ffn_gate.weight", (h, ff))
        m.t(p + "ffn_up.weight", (h, ff))
        m.t(p + "ffn_down.weight", (ff, h), Q.Q6_K)
    m.t("output_norm.weight", (h,), Q.F32)
    m.t("output.weight", (h, vocab), Q.Q6_K)
    return m


def test_a_llama_gguf_plans_from_its_header(tmp_path, run_cli):
    m = llama()
    path = m.write(tmp_path / "tiny-llama-Q4_K_M.gguf")
    im = import_gguf(path)
    spec = im.spec
    assert spec.num_layers == 2 and spec.hidden_size == 256 and spec.vocab_size == 512
    g = spec.layer_groups[0]
    assert (g.mixer.num_attention_heads, g.mixer.num_key_value_heads, g.mixer.head_dim) == (4, 2, 64)
    assert g.mlp.intermediate_size == 512 and g.mlp.gated and not spec.tie_word_embeddings
    assert im.release.quant == "gguf-q4_k_m"  # general.file_type 15 = MOSTLY_Q4_K_M
    assert im.exact.bytes_total == m.bytes()  # every tensor's bytes as the infos give them
    assert im.exact.bytes_by_component["lm_head"] == _nbytes((256, 512), Q.Q6_K)
    code, out, err = run_cli("plan", str(path), "--gpu", "rtx4090", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["weights"]["format"] == "gguf-q4_k_m" and d["weights"]["source"] == "GGUF tensor infos"
    assert d["weights"]["bytes_total"] == m.bytes()
    # the embedding is gathered, not read; every other tensor is read per token
    assert d["weights"]["bytes_read_per_token"] == m.bytes() - _nbytes((256, 512), Q.Q4_K)


def test_layers_past_block_count_beyond_its_mtp_layers_are_refused(tmp_path, run_cli):
    """A header that declares 2 blocks over tensors of 4 (llama.cpp's loader: "wrong number of tensors") would plan
    half the weights and twice the ceiling: one line, exit 2. Layers past block_count that the header declares as
    multi-token prediction (nextn_predict_layers) are kept, with a note."""
    from conftest import assert_one_line_error

    m = llama(layers=4)
    m.meta["block_count"] = 2
    code, out, err = run_cli("plan", str(m.write(tmp_path / "damaged.gguf")), "--gpu", "rtx4090")
    assert_one_line_error(code, err)
    assert "tensors of 2 layer(s) past its block_count (2)" in err and "llama.nextn_predict_layers" in err
    m = llama(layers=3)
    m.meta.update(block_count=2, nextn_predict_layers=1)
    im = import_gguf(m.write(tmp_path / "mtp.gguf"))
    assert im.spec.num_layers == 2 and any("multi-token prediction" in n for n in im.notes)


def test_a_projector_file_and_a_context_past_int32_are_one_line(tmp_path, run_cli):
    """A vision projector (architecture clip) is not the model: say so and point to the model's file (it said a
    metadata key was missing: convert it again). A context_length of 2^32 - 1 is a damaged header, named as one
    (it printed the schema validator's words)."""
    from conftest import assert_one_line_error

    clip = Model("clip")
    clip.meta = {"has_vision_encoder": True}  # clip.has_vision_encoder; the architecture alone names it
    clip.t("v.blk.0.attn_q.weight", (256, 256))
    code, out, err = run_cli("plan", str(clip.write(tmp_path / "mmproj-model-f16.gguf")), "--gpu", "rtx4090")
    assert_one_line_error(code, err)
    assert "multimodal projector (mmproj" in err and "the model's own GGUF file" in err
    m = llama()
    m.meta["context_length"] = 2**32 - 1
    code, out, err = run_cli("plan", str(m.write(tmp_path / "ctx.gguf")), "--gpu", "rtx4090")
    assert_one_line_error(code, err)
    assert "llama.context_length` is '4294967295', not a whole count from 1 to 2,147,483,647" in err


def test_gemma3_sliding_layers_follow_llama_cpps_pattern_and_tied_output(tmp_path):
    m = Model("gemma3")
    h, heads, kv, hd = 256, 4, 2, 64
    m.meta = {"block_count": 6, "embedding_length": h, "context_length": 8192, "attention.head_count": heads,
              "attention.head_count_kv": kv, "attention.key_length": hd, "attention.value_length": hd,
              "attention.sliding_window": 512, "general.file_type": 2}
    m.t("token_embd.weight", (h, 1024), Q.Q6_K)
    for i in range(6):
        p = f"blk.{i}."
        for n in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"):
            m.t(p + n + ".weight", (h,), Q.F32)
        m.t(p + "attn_q_norm.weight", (hd,), Q.F32)
        m.t(p + "attn_k_norm.weight", (hd,), Q.F32)
        m.t(p + "attn_q.weight", (h, heads * hd), Q.Q4_0)
        m.t(p + "attn_k.weight", (h, kv * hd), Q.Q4_0)
        m.t(p + "attn_v.weight", (h, kv * hd), Q.Q4_0)
        m.t(p + "attn_output.weight", (heads * hd, h), Q.Q4_0)
        m.t(p + "ffn_gate.weight", (h, 512), Q.Q4_0)
        m.t(p + "ffn_up.weight", (h, 512), Q.Q4_0)
        m.t(p + "ffn_down.weight", (512, h), Q.Q4_0)
    m.t("output_norm.weight", (h,), Q.F32)
    im = import_gguf(m.write(tmp_path / "g3.gguf"))
    kinds = {g.mixer.kind: g.count for g in im.spec.layer_groups}
    assert kinds == {"sliding": 5, "full": 1}  # set_swa_pattern(6): layers 0-4 slide, layer 5 is global
    assert all(g.mixer.qk_norm and g.norms == 4 for g in im.spec.layer_groups)
    assert im.spec.tie_word_embeddings and im.release.quant == "gguf-q4_0"
    assert im.exact.tied


@pytest.mark.parametrize("layout", ["kv_b", "k_b/v_b"])
def test_moe_and_mla_layers_come_from_their_tensors(tmp_path, layout):
    """Both of llama.cpp's MLA layouts: attn_kv_b with key_length = a head's K (qk_nope + rope) and value_length
    its V; and since PR #12801 attn_k_b / attn_v_b, with key_length / value_length the latent's widths (kv_lora_rank
    + rope, kv_lora_rank) and key_length_mla / value_length_mla a head's (an audit saw such a file refused as 27%
    short of its metadata's parameters)."""
    m = Model("deepseek2")
    h, heads, e = 256, 4, 8
    widths = ({"attention.key_length": 96, "attention.value_length": 64} if layout == "kv_b" else
              {"attention.key_length": 128 + 32, "attention.value_length": 128, "attention.key_length_mla": 96,
               "attention.value_length_mla": 64})
    m.meta = {"block_count": 2, "embedding_length": h, "context_length": 4096, "attention.head_count": heads,
              "attention.head_count_kv": heads, **widths,
              "rope.dimension_count": 32, "attention.kv_lora_rank": 128, "expert_used_count": 2,
              "expert_shared_count": 1, "general.file_type": 7}
    m.t("token_embd.weight", (h, 512), Q.Q8_0)
    for i in range(2):
        p = f"blk.{i}."
        m.t(p + "attn_norm.weight", (h,), Q.F32)
        m.t(p + "ffn_norm.weight", (h,), Q.F32)
        m.t(p + "attn_q_a.weight", (h, 64), Q.Q8_0)
        m.t(p + "attn_q_a_norm.weight", (64,), Q.F32)
        m.t(p + "attn_q_b.weight", (64, heads * 96), Q.Q8_0)
        m.t(p + "attn_kv_a_mqa.weight", (h, 128 + 32), Q.Q8_0)
        m.t(p + "attn_kv_a_norm.weight", (128,), Q.F32)
        if layout == "kv_b":
            m.t(p + "attn_kv_b.weight", (128, heads * (64 + 64)), Q.Q8_0)
        else:  # a head's K nope part and V, each from the latent
            m.t(p + "attn_k_b.weight", (64, 128, heads), Q.Q8_0)
            m.t(p + "attn_v_b.weight", (128, 64, heads), Q.Q8_0)
        m.t(p + "attn_output.weight", (heads * 64, h), Q.Q8_0)
        if i == 0:
            for n, ne in (("ffn_gate", (h, 512)), ("ffn_up", (h, 512)), ("ffn_down", (512, h))):
                m.t(p + n + ".weight", ne, Q.Q8_0)
        else:
            m.t(p + "ffn_gate_inp.weight", (h, e), Q.F32)
            for n, ne in (("ffn_gate_exps", (h, 128, e)), ("ffn_up_exps", (h, 128, e)), ("ffn_down_exps", (128, h, e))):
                m.t(p + n + ".weight", ne, Q.Q8_0)
            for n, ne in (("ffn_gate_shexp", (h, 128)), ("ffn_up_shexp", (h, 128)), ("ffn_down_shexp", (128, h))):
                m.t(p + n + ".weight", ne, Q.Q8_0)
    m.t("output_norm.weight", (h,), Q.F32)
    m.t("output.weight", (h, 512), Q.Q8_0)
    im = import_gguf(m.write(tmp_path / "ds.gguf"))
    mla = im.spec.layer_groups[0].mixer
    assert (mla.kind, mla.kv_lora_rank, mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim,
            mla.q_lora_rank) == ("mla", 128, 64, 32, 64, 64)
    moe = next(g.mlp for g in im.spec.layer_groups if g.mlp.kind == "moe")
    assert (moe.num_experts, moe.experts_per_token, moe.moe_intermediate_size, moe.num_shared_experts) == (8, 2, 128, 1)
    assert im.release.quant == "gguf-q8_0" and im.exact.experts_share == (2, 8)
    assert im.exact.bytes_by_component["experts"] == 3 * _nbytes((h, 128, e), Q.Q8_0)


def test_split_files_are_read_together_and_a_missing_split_is_named(tmp_path, run_cli):
    m = llama()
    half = len(m.tensors) // 2
    a = m.write(tmp_path / "big-00001-of-00002.gguf", split=m.tensors[:half])
    m.write(tmp_path / "big-00002-of-00002.gguf", split=m.tensors[half:])
    g = read_gguf(a)
    assert len(g.tensors) == len(m.tensors) and len(g.files) == 2
    assert import_gguf(a).exact.bytes_total == m.bytes()
    (tmp_path / "big-00002-of-00002.gguf").unlink()
    code, out, err = run_cli("plan", str(a), "--gpu", "rtx4090")
    assert code == 2 and "1 of its 2 splits is missing (first: big-00002-of-00002.gguf)" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_a_gguf_path_that_does_not_exist_says_so(tmp_path, run_cli):
    code, out, err = run_cli("plan", str(tmp_path / "nope.gguf"), "--gpu", "rtx4090")
    assert code == 2 and "nope.gguf: no such file" in err and "splits" not in err and out == ""


def _hostile(tmp_path, blob, name="bad.gguf"):
    p = tmp_path / name
    p.write_bytes(blob)
    return p


@pytest.mark.parametrize("case", ["empty", "magic", "truncated", "huge_count", "long_string", "past_end",
                                  "huge_layers", "no_heads", "kv_heads", "no_kv_heads", "float_heads", "no_context",
                                  "huge_array", "version_1", "version_99", "many_tensors", "layers_array",
                                  "key_length_0", "experts_used", "zero_dim", "kv_heads_0"])
def test_hostile_headers_are_one_line(tmp_path, run_cli, case):
    good = llama().write(tmp_path / "good.gguf").read_bytes()
    meta_cases = ("huge_layers", "no_heads", "kv_heads", "no_kv_heads", "float_heads", "no_context", "layers_array",
                  "key_length_0", "experts_used", "kv_heads_0")
    if case in meta_cases:  # a header that parses, with metadata no model has
        m = llama()
        if case == "huge_layers":
            m.meta["block_count"] = 2**31  # found by mutating headers: a list per layer would take all memory
        elif case == "no_heads":
            del m.meta["attention.head_count"]
        elif case == "float_heads":  # an integer key stored as a float: llama.cpp's get_key refuses its type
            m.meta["attention.head_count"] = 4.0
        elif case == "no_context":  # a training context of 0 tokens
            m.meta["context_length"] = 0
        elif case == "kv_heads":  # attn_k holds 2 heads; a review planned 4x the cache from this header
            m.meta["attention.head_count_kv"] = 4
        elif case == "layers_array":  # llama.cpp reads block_count with get_key: an array was read as its first
            m.meta["block_count"] = [2, 2]
        elif case == "key_length_0":  # it fell back silently to embedding_length / heads
            m.meta["attention.key_length"] = 0
        elif case == "experts_used":  # 99 of 8 experts: it said "experts_per_token", a field of llmsize's own
            m.meta.update({"expert_count": 8, "expert_used_count": 99})
            m.tensors = [x for x in m.tensors if not x[0].startswith("blk.0.ffn_")]
            m.t("blk.0.ffn_gate_inp.weight", (256, 8), Q.F32)
            m.t("blk.0.ffn_up_exps.weight", (256, 128, 8), Q.Q8_0)
            m.t("blk.0.ffn_down_exps.weight", (128, 256, 8), Q.Q8_0)
        elif case == "no_kv_heads":  # missing: read as one KV head per query head, which attn_k's 2 heads contradict
            del m.meta["attention.head_count_kv"]
        elif case == "kv_heads_0":  # 0 beside an attn_k: the message named "head_count_kv 4", a value not in the file
            m.meta["attention.head_count_kv"] = 0
        good = m.write(tmp_path / "meta.gguf").read_bytes()
    if case in meta_cases:
        blob = good
    elif case == "empty":
        blob = b""
    elif case == "magic":
        blob = b"GGUX" + good[4:]
    elif case == "truncated":
        blob = good[:200]
    elif case == "huge_count":
        blob = good[:8] + (2**62).to_bytes(8, "little") + good[16:]  # tensor count
    elif case == "long_string":
        # the first key's length field (after magic, version, 2 counts) claims more bytes than the file has
        blob = good[:24] + (10**12).to_bytes(8, "little") + good[32:]
    elif case == "huge_array":  # a key turned into an array of 2**40 strings (an audit saw gguf-py take minutes and
        # gigabytes on it): the walk of the length prefixes finds it past the end of the file
        key = b"general.architecture"
        at = good.index(key) + len(key)
        blob = good[:at] + (9).to_bytes(4, "little") + (8).to_bytes(4, "little") + (2**40).to_bytes(8, "little") \
            + good[at + 4:]
    elif case == "version_1":  # a 2023 format gguf-py and llama.cpp no longer read: converting is the fix
        blob = good[:4] + (1).to_bytes(4, "little") + good[8:]
    elif case == "version_99":  # it said the tensor data did not match
        blob = good[:4] + (99).to_bytes(4, "little") + good[8:]
    elif case == "many_tensors":  # 70,000 entries the file could hold: gguf-py took 27 s on 200,000 before failing
        blob = good[:8] + (70_000).to_bytes(8, "little") + good[16:] + bytes(70_000 * 24)
    elif case == "zero_dim":  # a tensor of no elements: it named llmsize's intermediate_size, not the tensor
        m = llama()
        m.tensors = [(n, (ne[0], 0) if n == "blk.0.ffn_up.weight" else ne, ty) for n, ne, ty in m.tensors]
        blob = m.write(tmp_path / "zero.gguf").read_bytes()
    else:  # the header parses but the data section is cut short
        blob = good[: len(good) - 4096]
    p = _hostile(tmp_path, blob)
    code, out, err = run_cli("plan", str(p), "--gpu", "rtx4090")
    assert code == 2, (case, err)
    assert "Traceback" not in err and "bad.gguf" in err
    assert len(err.strip().splitlines()) <= 2, err
    if case in ("float_heads", "no_context"):  # the key named, and what to do
        assert ("attention.head_count` is '4.0'" in err and "stored as float" in err) if case == "float_heads" else \
            "context_length` is '0', not a whole count from 1" in err
        assert "convert it again" in err
    if case == "huge_array":
        assert "runs past the end" in err
    if case == "version_1":
        assert "GGUF version 1" in err and "Convert the model again" in err and "download" not in err
    if case == "past_end":  # the header is fine: the data is what is short
        assert "header parses" in err or "past the end" in err
    if case == "huge_count":  # refused from the counts, before the reader walks 2**62 entries (4 s to fail before)
        assert "4,611,686,018,427,387,904 tensors, beyond any model's" in err
    needles = {"version_99": "GGUF version 99, newer than the 3", "many_tensors": "70,000 tensors, beyond any model's",
               "layers_array": "block_count` is an array of 2", "key_length_0": "key_length` is '0'",
               "experts_used": "expert_used_count` 99 is more than layer 0's 8 experts",
               "zero_dim": "`blk.0.ffn_up.weight` has shape", "kv_heads_0": "attention.head_count_kv 0 x",
               "no_kv_heads": "attention.head_count 4 (no head_count_kv) x"}
    assert needles.get(case, "") in err
    with pytest.raises(GgufError):
        import_gguf(p) if case in meta_cases else read_gguf(p)


def test_a_files_bits_per_weight_are_its_tensors_not_its_label(tmp_path, run_cli):
    """A file whose general.file_type says Q4_K_M but whose tensors are all Q8_0 (a custom mix keeps its base
    label): the plan's bits per quantized weight are the tensors' own, 8.5 (Q8_0: 34 B a block of 32), beside bytes
    that were always the tensors' (a review saw 4.89 bits printed over Q8_0 bytes)."""
    m = llama()
    m.tensors = [(n, ne, ty if ty == Q.F32 else Q.Q8_0) for n, ne, ty in m.tensors]
    code, out, err = run_cli("plan", str(m.write(tmp_path / "mix.gguf")), "--gpu", "rtx4090", "--json")
    assert code == 0, err
    w = json.loads(out)["weights"]
    assert w["bits_per_weight"] == pytest.approx(8.5) and w["bytes_total"] == m.bytes()


def test_sliding_layers_take_their_own_key_length(tmp_path):
    """Gemma's GGUFs give the sliding layers their own head size (attention.key_length_swa, 64 here, beside 128 for
    the full layers): those layers' heads are that wide, and their attn_k holds head_count_kv of them (it was
    refused as damaged, every layer read at key_length)."""
    m = Model("gemma4")
    h, heads, pattern = 256, 4, [True, True, True, True, True, False]
    kvs = [2 if s else 1 for s in pattern]
    m.meta = {"block_count": 6, "embedding_length": h, "context_length": 8192, "attention.head_count": heads,
              "attention.head_count_kv": kvs, "attention.key_length": 128, "attention.value_length": 128,
              "attention.key_length_swa": 64, "attention.value_length_swa": 64, "attention.sliding_window": 512,
              "attention.sliding_window_pattern": pattern, "general.file_type": 2}
    m.t("token_embd.weight", (h, 1024), Q.Q6_K)
    for i, swa in enumerate(pattern):
        hd, kv, p = (64 if swa else 128), kvs[i], f"blk.{i}."
        for n in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"):
            m.t(p + n + ".weight", (h,), Q.F32)
        m.t(p + "attn_q.weight", (h, heads * hd), Q.Q4_0)
        m.t(p + "attn_k.weight", (h, kv * hd), Q.Q4_0)
        m.t(p + "attn_v.weight", (h, kv * hd), Q.Q4_0)
        m.t(p + "attn_output.weight", (heads * hd, h), Q.Q4_0)
        for n, ne in (("ffn_gate", (h, 512)), ("ffn_up", (h, 512)), ("ffn_down", (512, h))):
            m.t(p + n + ".weight", ne, Q.Q4_0)
    m.t("output_norm.weight", (h,), Q.F32)
    spec = import_gguf(m.write(tmp_path / "gemma-like.gguf")).spec
    mixers = [g.mixer for g in spec.layer_groups for _ in range(g.count)]
    assert [(x.kind, x.head_dim, x.num_key_value_heads) for x in mixers] == \
        [("sliding", 64, 2)] * 5 + [("full", 128, 1)]


def test_import_writes_a_catalog_entry_from_a_gguf(tmp_path, run_cli):
    path = llama().write(tmp_path / "tiny-llama-Q4_K_M.gguf")
    out_file = tmp_path / "cat" / "models" / "tiny.yaml"
    out_file.parent.mkdir(parents=True)
    code, out, err = run_cli("import", str(path), "-o", str(out_file))
    assert code == 0, err
    text = out_file.read_text()
    assert "num_key_value_heads: 2" in text and "gguf-q4_k_m" in text
    code, out, err = run_cli("plan", "tiny", "--gpu", "rtx4090", "--catalog", str(tmp_path / "cat"), "--json")
    assert code == 0, err
    assert json.loads(out)["weights"]["format"] == "gguf-q4_k_m"  # the entry plans in its file type


def test_mutated_headers_never_raise_anything_but_one_line_errors(tmp_path):
    """Random byte changes in the first 3,000 bytes of a real header (and truncations): every file either plans or
    is refused with an LlmsizeError, never a traceback (a 2^31-layer header once took all memory this way)."""
    import random

    from llmsize.errors import LlmsizeError

    good = llama().write(tmp_path / "good.gguf").read_bytes()
    rng = random.Random(2026_12_01)
    p = tmp_path / "mutated.gguf"
    for _ in range(400):
        b = bytearray(good)
        for _ in range(rng.choice([1, 2, 4, 8, 16])):
            b[rng.randrange(0, min(len(b), 3000))] = rng.randrange(256)
        if rng.random() < 0.2:
            b = b[: rng.randrange(8, len(b))]
        p.write_bytes(bytes(b))
        try:
            import_gguf(p)
        except LlmsizeError:
            pass


def _hybrid(arch, ssm_meta, ssm_tensors, h=256):
    m = Model(arch)
    m.meta = {"block_count": 3, "embedding_length": h, "context_length": 8192, "feed_forward_length": 512,
              "attention.head_count": 4, "attention.head_count_kv": [0, 0, 2], "attention.key_length": 64,
              "expert_count": 8, "expert_used_count": 2, **ssm_meta}
    m.t("token_embd.weight", (h, 512), Q.Q8_0)
    m.t("blk.0.attn_norm.weight", (h,), Q.F32)
    for name, ne, ty in ssm_tensors:
        m.t("blk.0." + name, ne, ty)
    m.t("blk.1.attn_norm.weight", (h,), Q.F32)
    m.t("blk.1.ffn_gate_inp.weight", (h, 8), Q.F32)
    m.t("blk.1.ffn_up_exps.weight", (h, 128, 8), Q.Q8_0)
    m.t("blk.1.ffn_down_exps.weight", (128, h, 8), Q.Q8_0)
    m.t("blk.2.attn_norm.weight", (h,), Q.F32)
    m.t("blk.2.attn_q.weight", (h, 256), Q.Q8_0)
    m.t("blk.2.attn_k.weight", (h, 128), Q.Q8_0)
    m.t("blk.2.attn_v.weight", (h, 128), Q.Q8_0)
    m.t("blk.2.attn_output.weight", (256, h), Q.Q8_0)
    m.t("output_norm.weight", (h,), Q.F32)
    m.t("output.weight", (h, 512), Q.Q8_0)
    return m


def test_mamba2_and_gated_delta_net_layers_come_from_the_ssm_keys(tmp_path, run_cli):
    """nemotron_h: a Mamba-2 layer of 8 heads x 32 (inner 256), state 16, 2 groups, conv 4 (ssm_in 256 -> 2 x 256 +
    2 x 2 x 16 + 8 = 584, conv1d over 256 + 64 = 320 channels); qwen3next: a gated delta-net of 2 key heads of 16
    and 4 value heads of 32. Both plan, with their recurrent state in the KV line."""
    mamba = _hybrid("nemotron_h", {"ssm.conv_kernel": 4, "ssm.state_size": 16, "ssm.group_count": 2,
                                   "ssm.time_step_rank": 8, "ssm.inner_size": 256},
                    [("ssm_in.weight", (256, 584), Q.Q8_0), ("ssm_conv1d.weight", (4, 320), Q.F32),
                     ("ssm_conv1d.bias", (320,), Q.F32), ("ssm_a", (8,), Q.F32), ("ssm_d", (8,), Q.F32),
                     ("ssm_dt.bias", (8,), Q.F32), ("ssm_norm.weight", (128, 2), Q.F32),
                     ("ssm_out.weight", (256, 256), Q.Q8_0)])
    spec = import_gguf(mamba.write(tmp_path / "tiny-nemotron-h.gguf")).spec
    mixers = [g.mixer for g in spec.layer_groups for _ in range(g.count)]
    assert mixers[0].kind == "ssm" and (mixers[0].num_heads, mixers[0].head_dim, mixers[0].state_size,
                                        mixers[0].n_groups, mixers[0].conv_kernel) == (8, 32, 16, 2, 4)
    assert mixers[0].conv_bias and mixers[1] is None and mixers[2].kind == "full"
    code, out, err = run_cli("plan", str(tmp_path / "tiny-nemotron-h.gguf"), "--gpu", "rtx4090", "--json")
    assert code == 0, err
    kv = json.loads(out)["kv"]
    # one Mamba-2 layer's state as llama.cpp (a GGUF's default runtime) keeps it: conv (4 - 1) x 320 channels and
    # 8 x 32 x 16 values, both in F32
    assert kv["bytes_per_sequence_by_kind"]["ssm"] == 3 * 320 * 4 + 8 * 32 * 16 * 4
    qnext = _hybrid("qwen3next", {"ssm.conv_kernel": 4, "ssm.state_size": 16, "ssm.group_count": 2,
                                  "ssm.time_step_rank": 4, "ssm.inner_size": 128},
                    [("ssm_in.weight", (256, 448), Q.Q8_0), ("ssm_conv1d.weight", (4, 192), Q.F32),
                     ("ssm_a", (4,), Q.F32), ("ssm_dt", (4,), Q.F32), ("ssm_norm.weight", (32,), Q.F32),
                     ("ssm_out.weight", (128, 256), Q.Q8_0)])
    spec = import_gguf(qnext.write(tmp_path / "tiny-qwen3next.gguf")).spec
    lin = spec.layer_groups[0].mixer
    assert lin.kind == "linear" and (lin.num_key_heads, lin.num_value_heads, lin.key_head_dim,
                                     lin.value_head_dim, lin.conv_kernel) == (2, 4, 16, 32, 4)
    # the current layout (qwen35, qwen35moe, and qwen3next converted now): the delta-net's input fused in attn_qkv
    # (2 x 2 x 16 + 4 x 32 = 192) and attn_gate (128), beta and alpha apart, no ssm_in; it was read as attention
    for arch in ("qwen35", "qwen35moe", "qwen3next"):
        new = _hybrid(arch, {"ssm.conv_kernel": 4, "ssm.state_size": 16, "ssm.group_count": 2,
                             "ssm.time_step_rank": 4, "ssm.inner_size": 128},
                      [("attn_qkv.weight", (256, 192), Q.Q8_0), ("attn_gate.weight", (256, 128), Q.Q8_0),
                       ("ssm_conv1d.weight", (4, 192), Q.F32), ("ssm_a", (4,), Q.F32), ("ssm_dt.bias", (4,), Q.F32),
                       ("ssm_beta.weight", (256, 4), Q.F32), ("ssm_alpha.weight", (256, 4), Q.F32),
                       ("ssm_norm.weight", (32,), Q.F32), ("ssm_out.weight", (128, 256), Q.Q8_0)])
        spec = import_gguf(new.write(tmp_path / f"tiny-{arch}.gguf")).spec
        mixers = [g.mixer for g in spec.layer_groups for _ in range(g.count)]
        assert mixers[0].kind == "linear" and (mixers[0].num_key_heads, mixers[0].num_value_heads,
                                               mixers[0].key_head_dim, mixers[0].value_head_dim) == (2, 4, 16, 32)
        assert mixers[2].kind == "full"
    bad = _hybrid("mamba", {"ssm.conv_kernel": 4, "ssm.state_size": 16, "ssm.time_step_rank": 8,
                            "ssm.inner_size": 256}, [("ssm_in.weight", (256, 512), Q.Q8_0)])
    code, out, err = run_cli("plan", str(bad.write(tmp_path / "tiny-mamba1.gguf")), "--gpu", "rtx4090")
    assert code == 2 and "Mamba-1" in err and "Traceback" not in err


def test_an_f16_gguf_defaults_to_llamacpp(tmp_path, run_cli):
    """A GGUF whose tensors are F16 plans as fp16 weights, but it is a GGUF file: llama.cpp runs it by default, not
    vLLM (a review saw "Expected in vLLM (the default for safetensors formats ...)")."""
    m = llama()
    m.meta["general.file_type"] = 1  # MOSTLY_F16
    m.tensors = [(n, ne, Q.F32 if ty == Q.F32 else Q.F16) for n, ne, ty in m.tensors]
    path = m.write(tmp_path / "tiny-llama-F16.gguf")
    code, out, err = run_cli("plan", str(path), "--gpu", "rtx4090", "--json")
    d = json.loads(out)
    assert code == 0 and d["expected"]["runtime"] == "llamacpp"
    assert d["expected"]["runtime_why"] == "the default for a GGUF file"


def test_a_folder_of_gguf_files_points_to_the_file(tmp_path, run_cli):
    """A folder that holds a GGUF file and no config.json: the one line names the file to pass (it said
    config.json was not found)."""
    from conftest import assert_one_line_error

    llama().write(tmp_path / "m-Q4_K_M.gguf")
    code, out, err = run_cli("plan", str(tmp_path), "--gpu", "rtx4090")
    assert_one_line_error(code, err)
    assert f"Pass the GGUF file itself: `llmsize plan {tmp_path / 'm-Q4_K_M.gguf'} ...`" in err


def test_a_tokenizer_is_kept_as_its_length_and_the_tensors_read_as_they_are(tmp_path, monkeypatch):
    """A real tokenizer (Llama 3: 128,256 tokens, 280,147 merges) took gguf-py 20 s of CPU to parse element by
    element; the header is walked by its length prefixes and the long arrays left out of what gguf-py parses (a
    sparse copy, removed after): their lengths kept, every tensor's type, shape and bytes as before, and no copy
    left in the temporary folder."""
    import tempfile

    m = llama()
    m.meta["tokenizer.ggml.tokens"] = [f"tok{i}" for i in range(6000)]
    m.meta["tokenizer.ggml.scores"] = [0.0] * 6000
    m.meta["tokenizer.ggml.bos_token_id"] = 1
    path = m.write(tmp_path / "tok.gguf")
    before = set(Path(tempfile.gettempdir()).glob("llmsize-header-*"))
    import llmsize.importer.gguf_file as gf

    copies = []
    real = gf._without_long_arrays
    monkeypatch.setattr(gf, "_without_long_arrays", lambda *a: copies.append(real(*a)) or copies[-1])
    g = read_gguf(path)
    assert len(copies) == 1  # gguf-py parsed the copy without the long arrays, not the file
    assert g.metadata["tokenizer.ggml.tokens"] == g.metadata["tokenizer.ggml.scores"] == ("array", 6000)
    assert g.metadata["tokenizer.ggml.bos_token_id"] == 1 and g.arch == "llama"
    assert sum(x.nbytes for x in g.tensors.values()) == m.bytes()
    assert set(Path(tempfile.gettempdir()).glob("llmsize-header-*")) == before
    im = import_gguf(path)
    assert im.exact.bytes_total == m.bytes()


def test_a_split_renamed_is_named_as_a_split(tmp_path, run_cli):
    """The first split of three, renamed model.gguf: its split.count says 3, and the error says so (an audit saw
    "layer 2 holds no attention or MLP tensor" from the tensors that split happened to hold)."""
    m = llama()
    m.meta["split.count"], m.meta["split.no"], m.meta["split.tensors.count"] = 3, 0, len(m.tensors)
    half = len(m.tensors) // 3
    path = m.write(tmp_path / "model.gguf", split=m.tensors[:half])
    code, out, err = run_cli("plan", str(path), "--gpu", "rtx4090")
    assert code == 2 and "split 1 of 3 (its split.count)" in err and "only 1 of the 3" in err and out == ""
    assert f"({half:,} of its {len(m.tensors):,} tensors)" in err and "Traceback" not in err


def test_importing_a_file_of_its_own_mix_warns_that_the_entry_sizes_the_recipe(tmp_path, run_cli):
    """An entry records the file's type, so plans of the entry size llama-quantize's recipe for it: a file more
    than 1% off the recipe (here Q4_K tensors under a Q8_0 file type) gets a warning, on stderr and in the entry
    (an audit saw an Unsloth UD-Q4_K_M import planned at 18.55 GB for a 16.53 GB file, with nothing said)."""
    m = llama()
    m.meta["general.file_type"] = 7  # Q8_0, while the tensors are mostly Q4_K
    path = m.write(tmp_path / "mix.gguf")
    code, out, err = run_cli("import", str(path))
    assert code == 0 and "Warning: the file holds" in err and "recipe" in err
    assert "# warning: the file holds" in out
    # two sizes a percent or more apart print apart (a new-user pass saw "0.06 GB ... writes 0.06 GB (+5.4%)")
    said = re.search(r"the file holds ([\d.,]+) GB where .* writes ([\d.,]+) GB", " ".join(err.split()))
    held, written = said.groups()
    assert held != written
    code, out, err = run_cli("plan", str(path), "--gpu", "rtx4090")  # planning the file itself: its own bytes
    assert code == 0 and "recipe writes" not in err + out


def test_a_gguf_whose_mapped_model_is_invalid_points_at_the_file_not_a_config(tmp_path, run_cli):
    """More KV heads than query heads: the schema refuses the mapped model, and the advice names the GGUF file
    (it said to check a config.json the user never gave)."""
    p = llama(heads=2, kv=4).write(tmp_path / "kv.gguf")
    code, out, err = run_cli("plan", str(p), "--gpu", "h100")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "must be a multiple of num_key_value_heads (4)" in err and "Check the GGUF file" in err
    assert "config.json" not in err


@pytest.mark.parametrize("flat", ["attn_k.weight", "attn_q.weight", "ffn_up.weight"])
def test_a_matrix_stored_flat_is_one_line(tmp_path, run_cli, flat):
    """A damaged file's 2-D weight stored with one dimension (its element count) was indexed for its rows:
    IndexError, a traceback. Now refused naming the tensor, its shape and the layer."""
    m = llama()
    m.tensors = [(n, (int(np.prod(ne)),), Q.F32) if n == f"blk.0.{flat}" else (n, ne, ty) for n, ne, ty in m.tensors]
    path = m.write(tmp_path / "flat.gguf")
    for cmd in (("plan", str(path), "--gpu", "h100"), ("import", str(path))):
        code, out, err = run_cli(*cmd)
        assert_one_line_error(code, err)
        assert f"layer 0's {flat} has shape [" in err and "not a matrix's two dimensions" in err


def test_a_split_number_that_is_not_a_number_is_one_line(tmp_path, run_cli):
    """split.no written as text in a file that says it is one of 2 splits: int() of it raised ValueError."""
    m = llama()
    m.meta.update({"split.count": 2, "split.no": "x"})
    path = m.write(tmp_path / "single.gguf")
    code, out, err = run_cli("plan", str(path), "--gpu", "h100")
    assert_one_line_error(code, err)
    assert "one of 2 splits (its split.count), and only 1 of the 2 were found by name" in err


def test_a_gguf_without_its_extension_is_read_as_a_gguf(tmp_path, run_cli):
    """Ollama keeps its models as blobs named by their digest: a file that starts with `GGUF` is a GGUF whatever
    its name (it was read as a config.json: "not valid JSON ... download it again")."""
    blob = llama().write(tmp_path / "m.gguf").rename(tmp_path / "sha256-4f2a")
    code, out, err = run_cli("plan", str(blob), "--gpu", "h100", "--json")
    assert code == 0, err
    assert json.loads(out)["model"]["id"] == "sha256-4f2a"
    # a file that is not a GGUF is still read as a config.json
    (tmp_path / "notes").write_text("not json")
    code, out, err = run_cli("plan", str(tmp_path / "notes"), "--gpu", "h100")
    assert_one_line_error(code, err)
    assert "not valid JSON" in err


def test_a_gguf_name_with_control_characters_prints_escaped(tmp_path, run_cli):
    """general.name, or the file's name where the metadata has none, goes to the report's title: an escape
    sequence in it printed raw would clear the user's terminal."""
    m = llama()
    m.meta["general.name"] = "\x1b[2J\nX"
    code, out, err = run_cli("plan", str(m.write(tmp_path / "named.gguf")), "--gpu", "h100")
    assert code == 0, err
    assert "\x1b" not in out and "llmsize plan: \\x1b[2J\\nX on NVIDIA H100" in out
    bare = llama().write(tmp_path / "a\x1b[2Jb.gguf")
    code, out, err = run_cli("kv", str(bare))
    assert code == 0, err
    assert "\x1b" not in out and "a\\x1b[2Jb" in out


def test_a_kimi_delta_attention_layer_comes_from_its_tensors(tmp_path, run_cli):
    """kimi-linear: a KDA layer stores its q/k/v projections as attn_q/k/v beside ssm_f_a (gguf-py MODEL_TENSORS
    [KIMI_LINEAR]); it was read as attention. Here 4 heads of 32 (attn_k 128 rows), gates of rank 32, conv 4: a
    linear layer of variant kda whose state is a gated delta-net's of the same heads, then an MLA layer."""
    h = 256
    m = Model("kimi-linear")
    m.meta = {"block_count": 2, "embedding_length": h, "context_length": 8192, "feed_forward_length": 512,
              "attention.head_count": 4, "attention.head_count_kv": [0, 1], "attention.key_length": 96,
              "attention.value_length": 64, "attention.kv_lora_rank": 64, "rope.dimension_count": 32,
              "ssm.conv_kernel": 4, "kda.head_dim": 32}
    m.t("token_embd.weight", (h, 512), Q.Q8_0)
    p = "blk.0."
    for name, ne, ty in [("attn_norm.weight", (h,), Q.F32), ("attn_q.weight", (h, 128), Q.Q8_0),
                         ("attn_k.weight", (h, 128), Q.Q8_0), ("attn_v.weight", (h, 128), Q.Q8_0),
                         ("ssm_conv1d_q.weight", (4, 128), Q.F32), ("ssm_conv1d_k.weight", (4, 128), Q.F32),
                         ("ssm_conv1d_v.weight", (4, 128), Q.F32), ("ssm_f_a.weight", (h, 32), Q.Q8_0),
                         ("ssm_f_b.weight", (32, 128), Q.Q8_0), ("ssm_g_a.weight", (h, 32), Q.Q8_0),
                         ("ssm_g_b.weight", (32, 128), Q.Q8_0), ("ssm_beta.weight", (h, 4), Q.F32),
                         ("ssm_a", (4,), Q.F32), ("ssm_dt.bias", (128,), Q.F32), ("ssm_norm.weight", (32,), Q.F32),
                         ("attn_output.weight", (128, h), Q.Q8_0), ("ffn_norm.weight", (h,), Q.F32),
                         ("ffn_gate.weight", (h, 512), Q.Q8_0), ("ffn_up.weight", (h, 512), Q.Q8_0),
                         ("ffn_down.weight", (512, h), Q.Q8_0)]:
        m.t(p + name, ne, ty)
    p = "blk.1."
    for name, ne, ty in [("attn_norm.weight", (h,), Q.F32), ("attn_q.weight", (h, 4 * 96), Q.Q8_0),
                         ("attn_kv_a_mqa.weight", (h, 64 + 32), Q.Q8_0), ("attn_kv_a_norm.weight", (64,), Q.F32),
                         ("attn_kv_b.weight", (64, 4 * (64 + 64)), Q.Q8_0), ("attn_output.weight", (256, h), Q.Q8_0),
                         ("ffn_norm.weight", (h,), Q.F32), ("ffn_gate.weight", (h, 512), Q.Q8_0),
                         ("ffn_up.weight", (h, 512), Q.Q8_0), ("ffn_down.weight", (512, h), Q.Q8_0)]:
        m.t(p + name, ne, ty)
    m.t("output_norm.weight", (h,), Q.F32)
    m.t("output.weight", (h, 512), Q.Q8_0)
    spec = import_gguf(m.write(tmp_path / "tiny-kimi-linear.gguf")).spec
    kda, mla = [g.mixer for g in spec.layer_groups for _ in range(g.count)]
    assert (kda.kind, kda.variant, kda.num_key_heads, kda.num_value_heads, kda.key_head_dim, kda.gate_rank,
            kda.conv_kernel) == ("linear", "kda", 4, 4, 32, 32, 4)
    assert mla.kind == "mla" and mla.kv_lora_rank == 64
    code, out, err = run_cli("plan", str(tmp_path / "tiny-kimi-linear.gguf"), "--gpu", "rtx4090", "--json")
    assert code == 0, err
    # llama.cpp keeps both states in F32 (its kimi-linear n_embd_r = 3 x (d_conv - 1) x heads x head_dim, n_embd_s =
    # head_dim^2 x heads): 3 x 3 x 128 + 4 x 32 x 32 = 5,248 values, the plan's line under it
    assert json.loads(out)["kv"]["bytes_per_sequence_by_kind"]["linear"] == 5_248 * 4
    # every parameter of the file is counted by the layer groups it maps to
    from llmsize.estimate.params import params_total

    assert params_total(spec) == sum(int(np.prod(ne)) for _, ne, _ in m.tensors)


def test_an_lfm2_short_conv_layer_comes_from_its_tensors(tmp_path, run_cli):
    """lfm2: a conv layer stores shortconv.in_proj (256 -> 3 x 256), shortconv.conv (3 taps of 256) and
    shortconv.out_proj (gguf-py MODEL_TENSORS[LFM2]); it had been refused, its tensors holding a third more than the
    layers read without them. The plan holds llama.cpp's conv state, (3 - 1) x 256 values in F32 a layer."""
    h = 256
    m = Model("lfm2")
    m.meta = {"block_count": 3, "embedding_length": h, "context_length": 8192, "feed_forward_length": 512,
              "attention.head_count": 4, "attention.head_count_kv": [0, 0, 2], "shortconv.l_cache": 3}
    m.t("token_embd.weight", (h, 512), Q.Q8_0)
    for i in (0, 1):
        p = f"blk.{i}."
        for name, ne, ty in [("attn_norm.weight", (h,), Q.F32), ("shortconv.conv.weight", (3, h), Q.F32),
                             ("shortconv.in_proj.weight", (h, 3 * h), Q.Q8_0),
                             ("shortconv.out_proj.weight", (h, h), Q.Q8_0), ("ffn_norm.weight", (h,), Q.F32),
                             ("ffn_gate.weight", (h, 512), Q.Q8_0), ("ffn_up.weight", (h, 512), Q.Q8_0),
                             ("ffn_down.weight", (512, h), Q.Q8_0)]:
            m.t(p + name, ne, ty)
    for name, ne in [("attn_norm.weight", (h,)), ("attn_q.weight", (h, 256)), ("attn_k.weight", (h, 128)),
                     ("attn_v.weight", (h, 128)), ("attn_output.weight", (256, h)), ("attn_q_norm.weight", (64,)),
                     ("attn_k_norm.weight", (64,)), ("ffn_norm.weight", (h,)), ("ffn_gate.weight", (h, 512)),
                     ("ffn_up.weight", (h, 512)), ("ffn_down.weight", (512, h))]:
        m.t("blk.2." + name, ne, Q.F32 if len(ne) == 1 else Q.Q8_0)
    m.t("token_embd_norm.weight", (h,), Q.F32)
    path = m.write(tmp_path / "tiny-lfm2.gguf")
    spec = import_gguf(path).spec
    conv, _, attention = [g.mixer for g in spec.layer_groups for _ in range(g.count)]
    assert (conv.kind, conv.conv_dim, conv.conv_kernel, conv.bias) == ("conv", 256, 3, False)
    assert attention.kind == "full" and attention.qk_norm
    code, out, err = run_cli("plan", str(path), "--gpu", "rtx4090", "--engine", "llamacpp", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["kv"]["bytes_per_sequence_by_kind"]["conv"] == 2 * 2 * 256 * 4  # two layers' F32 states
    from llmsize.estimate.llamacpp_memory import layer_caches

    assert [c.state_bytes for c in layer_caches(spec)] == [2 * 256 * 4, 2 * 256 * 4, 0]
    # damaged: taps the metadata contradicts, a conv over the wrong channels, a layer without its in_proj
    for edit, says in ((lambda meta: meta.update({"shortconv.l_cache": 9}), "has 3 taps, where lfm2.shortconv.l_cache"),
                       (lambda ts: ts.update({"blk.0.shortconv.conv.weight": ((3, 100), Q.F32)}),
                        "shortconv.conv [3, 100]"),
                       (lambda ts: ts.pop("blk.0.shortconv.in_proj.weight"), "shortconv.in_proj missing")):
        bad = Model("lfm2")
        bad.meta = dict(m.meta)
        tensors = {name: (ne, ty) for name, ne, ty in m.tensors}
        edit(bad.meta if says.startswith("has 3 taps") else tensors)
        bad.tensors = [(name, ne, ty) for name, (ne, ty) in tensors.items()]
        code, out, err = run_cli("plan", str(bad.write(tmp_path / "bad-lfm2.gguf")), "--gpu", "rtx4090")
        assert code == 2 and says in err and "Traceback" not in err, err


def test_a_hybrid_under_llamacpp_counts_its_f32_state_in_the_table_and_the_lever(run_cli):
    """llama.cpp keeps a recurrent layer's states in F32 and its ledger sizes the slots so: Granite 4.0 H Small at
    512 tokens on an RTX 4090 holds 28 sequences, whose state the KV table had shown in BF16 (77 MB, where llama.cpp
    holds 155 MB) and whose KV-dtype lever had promised 56 with q8_0 caches where the plan with them holds 29. The
    table, the lever and the plan under the flags now agree; vLLM's plan keeps the 16-bit states."""
    args = ("plan", "granite-4.0-h-small", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--context", "512",
            "--batch", "60")
    code, out, err = run_cli(*args, "--json")
    assert code == 0, err
    plan = json.loads(out)
    # 36 Mamba-2 layers: (4 - 1) x (8192 + 2 x 128) conv channels + 8192 x 128 recurrent values, 4 B each
    assert plan["kv"]["bytes_per_sequence_by_kind"]["ssm"] == 36 * 4 * (3 * 8448 + 8192 * 128)
    lever = next(x for x in plan["diagnosis"]["levers"] if x.startswith("Smaller KV dtype"))
    code, out, err = run_cli(*args, "--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "--json")
    assert code == 0, err
    assert f"holds {json.loads(out)['capacity']['max_concurrent_sequences']} sequences" in lever, lever
    code, out, err = run_cli("plan", "granite-4.0-h-small", "--gpu", "h100", "--engine", "vllm", "--json")
    assert json.loads(out)["kv"]["bytes_per_sequence_by_kind"]["ssm"] == 36 * (2 * 3 * 8448 + 2 * 8192 * 128)


def _deepseek4(ratios=(0, 4, 128), h=256, hc=2):
    """A tiny DeepSeek-V4 GGUF (deepseek4) laid out as llama.cpp creates its tensors (src/llama-model.cpp
    LLM_ARCH_DEEPSEEK4; antirez/ds4 ds4.c weights_validate_layout): 4 heads of one 64-wide KV row, q rank 64, 2 output
    groups of rank 32, a 16-token window, layer 0 the window alone and hash-routed, layer 1 ratio 4 with an indexer
    (4 heads of 32, top 8), layer 2 ratio 128; 4 experts of 64 (2 used) and one shared; 2 hyper-connection streams."""
    heads, hd, ql, og, ol, ih, ihd, e, ff, vocab = 4, 64, 64, 2, 32, 4, 32, 4, 64, 512
    mix = 2 * hc + hc * hc
    m = Model("deepseek4")
    m.meta = {"block_count": len(ratios), "embedding_length": h, "context_length": 65536,
              "attention.head_count": heads, "attention.head_count_kv": 1, "rope.dimension_count": 16,
              "attention.output_group_count": og, "attention.output_lora_rank": ol, "attention.sliding_window": 16,
              "attention.compress_ratios": list(ratios), "attention.indexer.head_count": ih,
              "attention.indexer.key_length": ihd, "attention.indexer.top_k": 8, "hyper_connection.count": hc,
              "expert_used_count": 2, "expert_shared_count": 1}
    m.t("token_embd.weight", (h, vocab), Q.Q8_0)
    for i, r in enumerate(ratios):
        p = f"blk.{i}."
        rows = [("attn_norm.weight", (h,), Q.F32), ("attn_q_a.weight", (h, ql), Q.Q8_0),
                ("attn_q_a_norm.weight", (ql,), Q.F32), ("attn_q_b.weight", (ql, heads * hd), Q.Q8_0),
                ("attn_kv.weight", (h, hd), Q.Q8_0), ("attn_kv_a_norm.weight", (hd,), Q.F32),
                ("attn_sinks.weight", (heads,), Q.F32), ("attn_output_a.weight", (hd * heads // og, og * ol), Q.Q8_0),
                ("attn_output_b.weight", (og * ol, h), Q.Q8_0)]
        for part in ("attn", "ffn"):
            rows += [(f"hc_{part}_fn.weight", (hc * h, mix), Q.F32), (f"hc_{part}_base.weight", (mix,), Q.F32),
                     (f"hc_{part}_scale.weight", (3,), Q.F32)]
        if r:
            w = (2 if r == 4 else 1) * hd
            rows += [("attn_compressor_ape.weight", (w, r), Q.F32), ("attn_compressor_kv.weight", (h, w), Q.Q8_0),
                     ("attn_compressor_gate.weight", (h, w), Q.Q8_0), ("attn_compressor_norm.weight", (hd,), Q.F32)]
        if r == 4:
            rows += [("indexer.attn_q_b.weight", (ql, ih * ihd), Q.Q8_0), ("indexer.proj.weight", (h, ih), Q.F32),
                     ("indexer_compressor_ape.weight", (2 * ihd, 4), Q.F32),
                     ("indexer_compressor_kv.weight", (h, 2 * ihd), Q.Q8_0),
                     ("indexer_compressor_gate.weight", (h, 2 * ihd), Q.Q8_0),
                     ("indexer_compressor_norm.weight", (ihd,), Q.F32)]
        rows += [("ffn_norm.weight", (h,), Q.F32), ("ffn_gate_inp.weight", (h, e), Q.F32),
                 ("ffn_gate_exps.weight", (h, ff, e), Q.Q8_0), ("ffn_up_exps.weight", (h, ff, e), Q.Q8_0),
                 ("ffn_down_exps.weight", (ff, h, e), Q.Q8_0), ("ffn_gate_shexp.weight", (h, ff), Q.Q8_0),
                 ("ffn_up_shexp.weight", (h, ff), Q.Q8_0), ("ffn_down_shexp.weight", (ff, h), Q.Q8_0)]
        if i:  # past the hash-routed layers: the router's bias
            rows.append(("exp_probs_b.bias", (e,), Q.F32))
        for name, ne, ty in rows:
            m.t(p + name, ne, ty)
    for name, ne in (("output_hc_base.weight", (hc,)), ("output_hc_fn.weight", (hc * h, hc)),
                     ("output_hc_scale.weight", (1,)), ("output_norm.weight", (h,))):
        m.t(name, ne, Q.F32)
    m.t("output.weight", (h, vocab), Q.Q8_0)
    return m


def test_a_deepseek_v4_gguf_comes_from_its_tensors(tmp_path, run_cli):
    """deepseek4: each layer's window, compress ratio (the metadata's compress_ratios), compressor overlap (its width)
    and indexer (its tensors, the metadata's top-k) come back as the layer groups llmsize plans, every parameter of
    the file counted by them and the hyper-connections (hc_*: no tensor of unknown component)."""
    from llmsize.estimate.params import params_total

    m = _deepseek4()
    path = m.write(tmp_path / "tiny-deepseek4.gguf")
    im = import_gguf(path)
    window, csa, hca = [g.mixer for g in im.spec.layer_stack()]
    assert (window.kind, window.compress_ratio, window.sliding_window, window.head_dim) == ("compressed", None, 16, 64)
    assert (csa.compress_ratio, csa.compress_overlap, csa.indexer.n_heads, csa.indexer.head_dim, csa.indexer.topk) \
        == (4, True, 4, 32, 8)
    assert (hca.compress_ratio, hca.compress_overlap, hca.indexer) == (128, False, None)
    assert (csa.o_groups, csa.o_lora_rank, csa.q_lora_rank, csa.qk_rope_head_dim) == (2, 32, 64, 16)
    assert im.spec.hyper_connections == 2
    assert [g.mlp.router_bias for g in im.spec.layer_stack()] == [False, True, True]
    assert params_total(im.spec) == sum(int(np.prod(ne)) for _, ne, _ in m.tensors)
    assert not any("no known component" in n for n in im.exact.notes)
    code, out, err = run_cli("plan", str(path), "--gpu", "rtx4090", "--json")
    assert code == 0, err
    assert json.loads(out)["kv"]["layers_by_kind"]["compressed"] == 2


def test_a_damaged_deepseek_v4_gguf_is_refused_in_one_line(tmp_path, run_cli):
    m = _deepseek4(ratios=(0, 1, 128))  # a ratio of 1 compresses nothing: no DeepSeek-V4 layer has it
    path = m.write(tmp_path / "bad-deepseek4.gguf")
    code, out, err = run_cli("plan", str(path), "--gpu", "rtx4090")
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "compress ratio 1" in err


@pytest.mark.parametrize("damage, says", [
    (lambda m: m.meta.pop("hyper_connection.count"), "hyper_connection.count` is missing"),
    (lambda m: m.meta.update({"hyper_connection.count": 3}), "hyper_connection.count 3 and blk.0.hc_attn_base [8]"),
    (lambda m: m.meta.update({"attention.compress_ratios": [0, 128, 4]}), "has compress ratio 128"),
    (lambda m: m.meta.update({"attention.compress_ratios": [0, 4]}), "compress_ratios` has 2 entries for 3 layers"),
    (lambda m: m.meta.update({"attention.head_count_kv": 2}), "head_count_kv 2: its attention caches one KV head"),
    (lambda m: m.tensors.remove(next(t for t in m.tensors if t[0] == "blk.1.indexer.proj.weight")),
     "holds an indexer without"),
])
def test_a_deepseek_v4_gguf_whose_metadata_and_tensors_disagree_is_refused(tmp_path, run_cli, damage, says):
    """Each had been accepted, and planned as another model: the streams from a count the tensors do not have, the
    ratios from metadata their compressors contradict, an indexer half there dropped in silence."""
    m = _deepseek4()
    damage(m)
    code, out, err = run_cli("plan", str(m.write(tmp_path / "bad.gguf")), "--gpu", "rtx4090")
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert says in err


def test_an_i_quant_file_is_its_file_type_and_costed_as_an_i_quant(tmp_path, run_cli):
    """A file llama-quantize wrote as IQ2_XS (general.file_type 20, MOSTLY_IQ2_XS: its matrices IQ2_XS, attn_v Q4_K,
    ffn_down Q2_K) plans as gguf-iq2_xs (it was the nearest pure block type by bits before the i-quants had file
    types), its bytes the tensors' own, its expected speed the i-quants' (a default fraction, the band down to what
    published i-quant decodes took)."""
    from gguf import LlamaFileType

    m = llama()
    m.meta["general.file_type"] = int(LlamaFileType.MOSTLY_IQ2_XS)
    m.tensors = [(n, ne, ty if ty != Q.Q4_K else Q.IQ2_XS) for n, ne, ty in m.tensors]
    path = m.write(tmp_path / "tiny-llama-IQ2_XS.gguf")
    assert import_gguf(path).release.quant == "gguf-iq2_xs"
    code, out, err = run_cli("plan", str(path), "--gpu", "rtx4090", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["weights"]["bytes_total"] == m.bytes()
    assert any(n.startswith("i-quant weights") for n in d["expected"]["notes"])


def test_an_nvfp4_file_is_nvfp4_with_its_cuda_only_figure(tmp_path, run_cli):
    """A GGUF converted from an NVFP4 checkpoint (general.file_type MOSTLY_NVFP4: its matrices in ggml's NVFP4
    blocks, the embedding and output 16-bit) plans as nvfp4 (it fell back to the 16-bit or nearest pure block type),
    its bytes the tensors' own; llama.cpp's expected figure on a CUDA card, on a ROCm card the reason there is
    none."""
    from gguf import LlamaFileType

    m = llama()
    m.meta["general.file_type"] = int(LlamaFileType.MOSTLY_NVFP4)
    m.tensors = [(n, ne, Q.F16 if n in ("token_embd.weight", "output.weight") else ty if ty == Q.F32 else Q.NVFP4)
                 for n, ne, ty in m.tensors]
    path = m.write(tmp_path / "tiny-llama-NVFP4.gguf")
    assert import_gguf(path).release.quant == "nvfp4"
    code, out, err = run_cli("plan", str(path), "--gpu", "rtx5090", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["weights"]["bytes_total"] == m.bytes() and d["expected"]["tok_s"] > 0
    assert any(n.startswith("nvfp4 under llama.cpp") for n in d["expected"]["notes"])
    code, out, err = run_cli("plan", str(path), "--gpu", "rx7900xtx", "--json")
    assert code == 0, err
    assert json.loads(out)["expected"]["tok_s"] is None and "CUDA's" in json.loads(out)["expected"]["reason"]
