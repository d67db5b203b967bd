"""Gemma 4 E2B / E4B: a per-layer embedding table gathered a row a token (stored, never read in full) and layers
that read an earlier layer's KV cache (holding none). Hand arithmetic from their config.json files
(tests/data/hf-configs, byte-exact copies) and E2B's real safetensors header (tests/data/safetensors-headers)."""

import gzip
import json
from math import prod
from pathlib import Path

import numpy as np
import pytest

from llmsize.catalog.schema import ModelSpec
from llmsize.estimate.engines import v1_layout
from llmsize.estimate.kv import kv_bytes
from llmsize.estimate.llamacpp_memory import LlamaCppSettings, gguf_file_tensors, llamacpp_ledger
from llmsize.estimate.params import params_active, params_by_component, params_total
from llmsize.estimate.quant import FORMATS
from llmsize.estimate.weights import weight_bytes
from llmsize.importer.config_fields import ConfigError
from llmsize.importer.source import import_model
from tests.stfiles import write_safetensors

DATA = Path(__file__).resolve().parent / "data"
CONFIGS = DATA / "hf-configs"
E2B_HEADER = DATA / "safetensors-headers" / "google__gemma-4-E2B-it.tensors.json.gz"


def _header() -> dict:
    return json.loads(gzip.decompress(E2B_HEADER.read_bytes()))


def test_e2b_counts_are_its_published_header(catalog):
    """E2B: vocab 262,144, hidden 1,536, 35 layers, per-layer width 256. The per-layer table is 262,144 x 35 x 256 =
    2,348,810,240; the input embedding 262,144 x 1,536 = 402,653,184. The catalog's decoder is the header's
    model.language_model.* (4,647,449,891 elements, unused k/v of the shared layers included: Google's checkpoint
    stores them), and with the towers the header's whole 5,123,178,979 (x 2 B + its 263,960-byte head = the
    10,246,621,918-byte file)."""
    m = catalog.model("gemma-4-e2b")
    by = params_by_component(m)
    assert by["per_layer_embedding"] == 262_144 * 35 * 256 == 2_348_810_240
    assert by["embedding"] == 262_144 * 1536
    header = _header()
    text = sum(prod(shape) for name, (_, shape) in header.items() if name.startswith("model.language_model."))
    assert text == 4_647_449_891
    assert params_total(m) - sum(x.params for x in m.extra) == text
    assert params_total(m) == sum(prod(shape) for _, shape in header.values()) == 5_123_178_979


def test_e4b_counts_add_up_to_its_published_file_size(catalog):
    """E4B (no header copy found): its config's shapes and E2B's towers give 7,996,157,418 elements, x 2 B =
    15,992,314,836 B, which leaves 281,048 B of the 15,992,595,884-byte model.safetensors pinned at @ee0ef602 for a
    header of 42 layers' names (E2B's 35 layers: 263,960 B)."""
    m = catalog.model("gemma-4-e4b")
    assert params_by_component(m)["per_layer_embedding"] == 262_144 * 42 * 256
    head = 15_992_595_884 - 2 * params_total(m)
    assert head == 281_048 and 263_960 < head < 263_960 * 42 / 35 * 1.1


def test_a_decode_step_reads_neither_table_nor_the_shared_layers_kv_weights(catalog):
    """What one token multiplies: E2B's text less its two tables' lookups and the 18,880,512 unused k/v weights of
    its 20 shared layers (16 sliding: k, v [256, 1536] and k_norm 256; 4 full: [512, 1536] and 512):
    4,647,449,891 - 2,348,810,240 (per-layer table) - 18,880,512 = 2,279,759,139 parameters, the tied embedding
    read once as the lm_head. In BF16 that is 2 B each."""
    m = catalog.model("gemma-4-e2b")
    unused = 16 * (2 * 256 * 1536 + 256) + 4 * (2 * 512 * 1536 + 512)
    assert unused == 18_880_512
    assert params_active(m) == 4_647_449_891 - 2_348_810_240 - unused == 2_279_759_139
    w = weight_bytes(m, FORMATS["bf16"], "all")
    assert w.read_bytes_per_token["per_layer_embedding"] == w.read_bytes_per_token["embedding"] == 0
    assert w.bytes_read_per_token == 2 * params_active(m)
    assert w.stored_bytes["per_layer_embedding"] == 2 * 2_348_810_240


def test_the_shared_layers_hold_no_cache_but_read_their_sources(catalog):
    """E4B, 42 layers, the last 18 shared: 24 keep a cache, 20 sliding (2 KV heads x 256, K and V, 2 B: 2,048 B a
    token, up to the 512-token window) and 4 full (2 x 512: 4,096 B a token). At 4,096 tokens in BF16:
    held 20 x 512 x 2,048 + 4 x 4,096 x 4,096 = 20,971,520 + 67,108,864 = 88,080,384 B; the 15 shared sliding and
    3 shared full layers read their sources' again: + 15 x 512 x 2,048 + 3 x 4,096 x 4,096 = 66,060,288 B."""
    kv = kv_bytes(catalog.model("gemma-4-e4b"), 4096, "bf16")
    assert kv.layers_by_kind["sliding"] == 20 and kv.layers_by_kind["full"] == 4 and kv.shared_layers == 18
    assert kv.bytes_per_sequence == 88_080_384
    assert kv.read_bytes == 88_080_384 + 66_060_288


def test_vllm_and_llamacpp_give_the_shared_layers_no_cache(catalog):
    """vLLM V1 (gpu_model_runner.get_kv_cache_spec skips a layer with kv_sharing_target_layer_name) lays out 24
    layers; llama.cpp (n_layer_kv_from_start = n_layer - shared_kv_layers) caches 24 too. -c 4096, f16, one slot,
    -ub 512: the sliding layers hold pad(512 + 512, 256) = 1,024 cells of K and V 512 values each (2,048 B a cell),
    the full ones 4,096 of 1,024 values each: 20 x 1,024 x 2,048 + 4 x 4,096 x 4,096 = 109,051,904 B."""
    m = catalog.model("gemma-4-e4b")
    lay = v1_layout(m, "bf16", 16)
    assert lay.group_size * len(lay.groups) - lay.padded_layers == 24
    tensors = gguf_file_tensors(m, "gguf-q4_k_m")
    led = llamacpp_ledger(m, catalog.gpu("rtx4060ti16"), tensors, LlamaCppSettings(ctx_size=4096))
    assert led.kv_cache_bytes == 20 * 1024 * 2048 + 4 * 4096 * 4096 == 109_051_904


def test_llamacpp_keeps_both_tables_in_host_memory(catalog):
    """llama.cpp loads token_embd and per_layer_token_embd as input-layer tensors, on the host
    (llama-arch.cpp: LLM_TENSOR_PER_LAYER_TOKEN_EMBD is LLM_TENSOR_LAYER_INPUT); per_layer_model_proj goes with
    block 0. The card's model buffer is the file less the two tables."""
    m = catalog.model("gemma-4-e4b")
    tensors = gguf_file_tensors(m, "gguf-q4_k_m")
    named = dict(tensors)
    tables = named["token_embd.weight"] + named["per_layer_token_embd.weight"]
    led = llamacpp_ledger(m, catalog.gpu("rtx4060ti16"), tensors, LlamaCppSettings(ctx_size=4096))
    gpu, host = led.devices[0], led.devices[-1]
    assert host.model_bytes == tables
    # the tied embedding is loaded a second time as the output layer
    assert gpu.model_bytes == sum(named.values()) - tables + named["token_embd.weight"]


def test_double_wide_mlps_are_the_shared_layers_only():
    """modeling_gemma4.py: `use_double_wide_mlp = config.use_double_wide_mlp and is_kv_shared_layer`: E2B's layers
    15-34 are 12,288 wide, 0-14 6,144 (its header: mlp.gate_proj [12288, 1536] from layer 15); E4B has none."""
    e2b = import_model(CONFIGS / "google__gemma-4-E2B-it.json", read_headers=False).spec
    widths = [(g.mlp.intermediate_size, g.mixer.kv_shared) for g in e2b.layer_stack()]
    assert widths == [(6144, False)] * 15 + [(12288, True)] * 20
    header = _header()
    assert [header[f"model.language_model.layers.{i}.mlp.gate_proj.weight"][1][0] for i in range(35)] == \
        [w for w, _ in widths]
    e4b = import_model(CONFIGS / "google__gemma-4-E4B-it.json", read_headers=False).spec
    assert {g.mlp.intermediate_size for g in e4b.layer_groups} == {10240}
    assert [g.mixer.kv_shared for g in e4b.layer_stack()] == [False] * 24 + [True] * 18


def test_the_real_e2b_header_imports_exactly(tmp_path, catalog):
    """A folder of E2B's config.json and a safetensors file with its real header (data left as a hole): the exact
    count is the header's, the per-layer table its own component, stored and not read, and the shared layers'
    k/v (37,761,024 B of BF16) stored and not read; what a token reads is the catalog's estimate to the byte."""
    folder = tmp_path / "gemma-4-E2B-it"
    folder.mkdir()
    (folder / "config.json").write_bytes((CONFIGS / "google__gemma-4-E2B-it.json").read_bytes())
    write_safetensors(folder / "model.safetensors", {n: (d, tuple(s)) for n, (d, s) in _header().items()},
                      sparse=True)
    ex = import_model(folder).exact
    assert ex.params_total == 5_123_178_979
    assert ex.bytes_by_component["per_layer_embedding"] == 2 * 2_348_810_240
    assert sum(ex.unused_bytes.values()) == 2 * 18_880_512
    est = weight_bytes(catalog.model("gemma-4-e2b"), FORMATS["bf16"], "all")
    assert ex.bytes_read(1) == est.bytes_read_per_token


def test_a_gguf_with_per_layer_tables_and_shared_layers(tmp_path):
    """llama.cpp's gemma4 names: per_layer_token_embd [n_layer x 64, vocab], per_layer_model_proj, per_layer_proj_norm,
    blk.N.inp_gate / proj / post_norm, and `gemma4.attention.shared_kv_layers` 2 of 4 layers: the last two read a
    cache, their attn_k / attn_v loaded and never read; post_norm is the per-layer input's, not a fifth layer norm."""
    from llmsize.importer.source import import_gguf

    h, kv, hd, w, n, vocab, q8 = 256, 2, 64, 64, 4, 1024, 34  # q8: bytes per 32 Q8_0 values
    path = _gemma_e_gguf(tmp_path / "gemma4-e-like.gguf", "gemma4", n, {"attention.shared_kv_layers": 2},
                         lambda p: [])
    im = import_gguf(path)
    assert im.spec.per_layer_input.hidden_size == w and im.spec.per_layer_input.vocab_size == vocab
    assert [g.mixer.kv_shared for g in im.spec.layer_stack()] == [False, False, True, True]
    assert all(g.norms == 4 and not g.mixer.k_eq_v for g in im.spec.layer_groups)
    kv_bytes_q8 = (h * kv * hd) // 32 * q8  # one attn_k or attn_v
    assert im.exact.unused_bytes == {"attention": 2 * 2 * kv_bytes_q8}
    table = (n * w * vocab) // 32 * q8
    assert im.exact.bytes_by_component["per_layer_embedding"] == table
    stored = sum(im.exact.bytes_by_component.values())
    embd = (h * vocab) // 32 * q8
    # read: all but the two tables and the unused k/v, the tied embedding read again as the output
    assert im.exact.bytes_read(1) == stored - table - embd - 2 * 2 * kv_bytes_q8 + embd


@pytest.mark.parametrize("value, says", [
    (35, "num_kv_shared_layers is 35; expected a count from 0 to 34"),
    ("20", "num_kv_shared_layers is '20'"),
    (-1, "num_kv_shared_layers is -1"),
])
def test_a_bad_shared_layer_count_is_one_line(value, says):
    cfg = json.loads((CONFIGS / "google__gemma-4-E2B-it.json").read_text())
    cfg["text_config"]["num_kv_shared_layers"] = value
    from llmsize.importer.hf_config import map_config

    with pytest.raises(ConfigError) as e:
        map_config(cfg, "config.json")
    assert says in e.value.message and "\n" not in e.value.message


def test_a_shared_layer_without_an_earlier_source_is_refused(catalog):
    """A catalog entry whose first full layer shares a cache it cannot have: refused when the catalog loads."""
    m = catalog.model("gemma-4-e4b").model_dump()
    pat = m["layer_pattern"]
    j = pat.index(3)  # the first shared full layer changes places with layer 0
    pat[0], pat[j] = pat[j], pat[0]
    with pytest.raises(ValueError, match="no earlier full layer keeps one"):
        ModelSpec(**m)


def test_gemma3n_counts_are_ollamas_and_googles(catalog):
    """Gemma 3n (the conversion script's variants, transformers' class defaults): hidden 2,048, 8 heads of 256 with 2
    KV heads, per-layer width 256, AltUp 4 streams, LAuReL rank 64; E2B 30 layers of 8,192, E4B 35 of 16,384.
    The text model is 4,456,156,768 / 6,866,696,688 parameters, what Ollama prints for its GGUFs (4.46B, 6.87B);
    less the two tables (262,400 x 2,048 and 262,144 x 30 x 256), E2B's is 1,905,495,648, Google's "1.91B"
    effective; with the towers, E2B's loader log's 5,439.44M."""
    e2b, e4b = catalog.model("gemma-3n-e2b"), catalog.model("gemma-3n-e4b")
    text = {m.id: params_total(m) - sum(x.params for x in m.extra) for m in (e2b, e4b)}
    assert text == {"gemma-3n-e2b": 4_456_156_768, "gemma-3n-e4b": 6_866_696_688}
    by = params_by_component(e2b)
    assert text["gemma-3n-e2b"] - by["embedding"] - by["per_layer_embedding"] == 1_905_495_648
    assert by["embedding"] == 262_400 * 2048 and by["per_layer_embedding"] == 262_144 * 30 * 256
    assert params_total(e2b) / 1e6 == pytest.approx(5_439.44, abs=0.01)
    # AltUp: 2 x 3 [2048, 2048] projections, and per layer 4x4 + 4x16 coefficients, a [4, 2048] router, its norm
    # and the output scale (12,368); LAuReL 2 x 64 x 2048 + its norm (264,192)
    assert by["other"] - (30 * 256 * 2048 + 30 * 2 * 256 * 2048) == 6 * 2048 ** 2 + 30 * (16 + 64 + 4 * 2048 + 2048) \
        + 30 * 2 * 64 * 2048


def test_gemma3n_e2b_and_e4b_hold_the_same_cache(catalog):
    """Both keep a cache in their first 20 layers (llama.cpp: n_layer_kv_from_start = 20 for both): 16 sliding, 4
    full, 2 KV heads x 256, K and V in BF16 = 2,048 B a token a layer. At 4,096 tokens: 16 x 512 x 2,048 +
    4 x 4,096 x 2,048 = 50,331,648 B; AltUp's four streams do not widen it (K and V come from the active one)."""
    for mid, shared in (("gemma-3n-e2b", 10), ("gemma-3n-e4b", 15)):
        kv = kv_bytes(catalog.model(mid), 4096, "bf16")
        assert kv.bytes_per_sequence == 16 * 512 * 2048 + 4 * 4096 * 2048 == 50_331_648
        assert kv.shared_layers == shared


def test_gemma3n_q8_0_is_the_published_file(catalog):
    """ggml-org's gemma-3n-E4B-it-Q8_0.gguf, as llama-bench prints it (mixa3607/ML-gfx906's readme: 6.84 GiB,
    6.87 B): llama-quantize's Q8_0 everywhere but the tensors it keeps as converted (altup, laurel,
    per_layer_model_proj, in 16 bits) and the 1-D ones."""
    w = weight_bytes(catalog.model("gemma-3n-e4b"), FORMATS["gguf-q8_0"], "all")
    assert w.bytes_total / 2**30 == pytest.approx(6.84, abs=0.005)


def test_a_gemma3n_gguf_reads_its_altup_and_shared_layers(tmp_path):
    """llama.cpp's gemma3n GGUF carries no shared-layer key: n_layer_kv_from_start is 20, so of 22 layers the last
    two read a cache; AltUp's streams come from altup_proj {n_embd, n_embd, n - 1}, LAuReL's rank from laurel_l;
    their norms are not the layer's four."""
    from gguf import GGMLQuantizationType as Q

    from llmsize.importer.source import import_gguf

    h, w, n, rank = 256, 64, 22, 64

    def altup_laurel(p):
        return [(p + x + ".weight", (h,), Q.F32) for x in ("altup_router_norm", "altup_correct_scale",
                                                            "laurel_post_norm")] + [
            (p + "altup_correct_coef.weight", (4, 4), Q.F32), (p + "altup_predict_coef.weight", (4, 16), Q.F32),
            (p + "altup_router.weight", (h, 4), Q.F32), (p + "laurel_l.weight", (h, rank), Q.F32),
            (p + "laurel_r.weight", (rank, h), Q.F32)]

    path = _gemma_e_gguf(tmp_path / "gemma3n-like.gguf", "gemma3n", n, {"attention.sliding_window": 512},
                         altup_laurel, [("altup_proj.weight", (h, h, 3), Q.F32),
                                        ("altup_unembd_proj.weight", (h, h, 3), Q.F32)])
    spec = import_gguf(path).spec
    assert spec.altup.num_inputs == 4 and spec.laurel_rank == rank and spec.per_layer_input.hidden_size == w
    stack = spec.layer_stack()
    assert [g.mixer.kv_shared for g in stack] == [False] * 20 + [True] * 2
    assert [g.mixer.kind for g in stack[:5]] == ["sliding"] * 4 + ["full"]  # llama.cpp's set_swa_pattern(5)
    assert all(g.norms == 4 for g in spec.layer_groups)


def _gemma3n_e2b_config(**over) -> dict:
    """E2B's text config as transformers' conversion script builds it (_VARIANT_GEMMA_3_2B over Gemma3nTextConfig's
    defaults), written out as save_pretrained would: intermediate_size one width a layer."""
    cfg = {"model_type": "gemma3n_text", "hidden_size": 2048, "hidden_size_per_layer_input": 256,
           "vocab_size": 262_400, "vocab_size_per_layer_input": 262_144, "num_hidden_layers": 30,
           "intermediate_size": [8192] * 30, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
           "num_kv_shared_layers": 10, "sliding_window": 512, "altup_num_inputs": 4, "laurel_rank": 64,
           "max_position_embeddings": 32_768, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
    return {**cfg, **over}


def test_a_gemma3n_config_maps_to_its_catalog_entry(catalog):
    """No layer_types: a full layer where (i + 1) % 5 == 0 (Gemma3nTextConfig.__post_init__); the last 10 layers
    read layer 18's or 19's cache."""
    from llmsize.importer.hf_config import map_config

    spec = ModelSpec(id="x", name="x", family="gemma3n", sources=["test"], params_official=1,
                     params_official_source="-", params_official_includes="-", release={"quant": "bf16"},
                     **map_config(_gemma3n_e2b_config(), "config.json").fields)
    cat = catalog.model("gemma-3n-e2b")
    assert params_total(spec) == params_total(cat) - sum(x.params for x in cat.extra)
    assert [(g.mixer.kind, g.mixer.kv_shared) for g in spec.layer_stack()] == \
        [(g.mixer.kind, g.mixer.kv_shared) for g in cat.layer_stack()]


@pytest.mark.parametrize("over, says", [
    ({"intermediate_size": [8192] * 29}, "intermediate_size [8192, 8192"),
    ({"intermediate_size": [8192] * 29 + ["8192"]}, "is neither a width nor one a layer"),
    ({"num_kv_shared_layers": 30}, "num_kv_shared_layers is 30"),
])
def test_a_bad_gemma3n_config_is_one_line(over, says):
    from llmsize.importer.hf_config import map_config

    with pytest.raises(ConfigError) as e:
        map_config(_gemma3n_e2b_config(**over), "config.json")
    assert says in e.value.message and "\n" not in e.value.message


def _gemma_e_gguf(path: Path, arch: str, n: int, meta: dict, layer_extra, model_extra=()) -> Path:
    """A GGUF in llama.cpp's gemma3n / gemma4 layout with per-layer embeddings: hidden 256, 4 heads of 64 with 2 KV
    heads, per-layer width 64, vocab 1,024, matrices in Q8_0 (34 B per 32 values), vectors in F32; `layer_extra(p)`
    adds a layer's own tensors (prefix p), `model_extra` the model's."""
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFWriter

    h, heads, kv, hd, w, vocab = 256, 4, 2, 64, 64, 1024
    tensors = [("token_embd.weight", (h, vocab), Q.Q8_0), ("per_layer_token_embd.weight", (n * w, vocab), Q.Q8_0),
               ("per_layer_model_proj.weight", (h, n * w), Q.F32), ("per_layer_proj_norm.weight", (w,), Q.F32),
               *model_extra]
    for i in range(n):
        p = f"blk.{i}."
        tensors += [(p + x + ".weight", (h,), Q.F32) for x in ("attn_norm", "post_attention_norm", "ffn_norm",
                                                               "post_ffw_norm", "post_norm")]
        tensors += [(p + "attn_q.weight", (h, heads * hd), Q.Q8_0), (p + "attn_k.weight", (h, kv * hd), Q.Q8_0),
                    (p + "attn_v.weight", (h, kv * hd), Q.Q8_0), (p + "attn_output.weight", (heads * hd, h), Q.Q8_0),
                    (p + "ffn_gate.weight", (h, 512), Q.Q8_0), (p + "ffn_up.weight", (h, 512), Q.Q8_0),
                    (p + "ffn_down.weight", (512, h), Q.Q8_0), (p + "inp_gate.weight", (h, w), Q.Q8_0),
                    (p + "proj.weight", (w, h), Q.Q8_0), *layer_extra(p)]
    tensors.append(("output_norm.weight", (h,), Q.F32))
    wr = GGUFWriter(str(path), arch)
    for k, v in {"block_count": n, "embedding_length": h, "context_length": 8192, "attention.head_count": heads,
                 "attention.head_count_kv": kv, "attention.key_length": hd, "attention.value_length": hd,
                 "embedding_length_per_layer_input": w, **meta}.items():
        wr.add_uint32(f"{arch}.{k}", v)
    wr.add_uint32("general.file_type", 7)
    for name, ne, ty in tensors:
        if ty == Q.F32:
            wr.add_tensor(name, np.zeros(tuple(reversed(ne)), dtype=np.float32))
        else:
            wr.add_tensor(name, np.zeros(tuple(reversed(ne[1:])) + (ne[0] // 32 * 34,), dtype=np.uint8), raw_dtype=ty)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return path
