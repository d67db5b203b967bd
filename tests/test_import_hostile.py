"""Imported models are what the files say, or the report says otherwise: null means null, required fields are
required, a partial download is not a small model, and `tied` is the config's word, never a guess."""

import json
import struct
from pathlib import Path

import pytest

from llmsize.errors import LlmsizeError
from llmsize.importer.source import import_model

CONFIGS = Path(__file__).parent / "data" / "hf-configs"
MISTRAL_V03 = json.loads((CONFIGS / "mistralai__Mistral-7B-Instruct-v0.3.json").read_text())
TYPE_BYTES = {"BF16": 2}


def sparse_safetensors(path: Path, tensors: dict) -> None:
    """A real-size safetensors file whose data is a hole: the header is exact, no disk is used for the data."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = TYPE_BYTES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        f.truncate(8 + len(blob) + offset)


def mistral_tensors(cfg: dict) -> dict:
    h, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * h // cfg["num_attention_heads"]
    t = {"model.embed_tokens.weight": ("BF16", (vocab, h)), "lm_head.weight": ("BF16", (vocab, h)),
         "model.norm.weight": ("BF16", (h,))}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t.update({p + "self_attn.q_proj.weight": ("BF16", (h, h)), p + "self_attn.k_proj.weight": ("BF16", (kv, h)),
                  p + "self_attn.v_proj.weight": ("BF16", (kv, h)), p + "self_attn.o_proj.weight": ("BF16", (h, h)),
                  p + "mlp.gate_proj.weight": ("BF16", (inter, h)), p + "mlp.up_proj.weight": ("BF16", (inter, h)),
                  p + "mlp.down_proj.weight": ("BF16", (h, inter)), p + "input_layernorm.weight": ("BF16", (h,)),
                  p + "post_attention_layernorm.weight": ("BF16", (h,))})
    return t


def mistral_folder(root: Path, keep_shards: tuple[int, ...] = (1, 2, 3)) -> Path:
    """Mistral-7B-v0.3 as its repository ships it: config.json and three shards, no index needed to read them."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(MISTRAL_V03))
    names = list(mistral_tensors(MISTRAL_V03).items())
    for s in range(3):
        if s + 1 in keep_shards:
            sparse_safetensors(root / f"model-{s + 1:05d}-of-00003.safetensors", dict(names[s::3]))
    return root


def test_mistral_v03_null_window_means_no_window(run_cli, tmp_path):
    """Its real config has "sliding_window": null: it was read as a 4,096-token window on every layer, so the
    growing layers' KV per token came out 0 and the longest context unbounded."""
    p = tmp_path / "config.json"
    p.write_text(json.dumps(MISTRAL_V03))
    code, out, err = run_cli("plan", str(p), "--gpu", "rtx3090", "--context", "32768", "--json")
    assert code == 0, err
    d = json.loads(out)
    # 32 layers x 2 (K, V) x 8 kv heads x 128 x 2 B = 131,072 B per token, all of it growing
    assert d["kv"]["bytes_per_token"] == 131072
    # 24 GiB x 0.9 - 14.5 GB of weights - 1.5 GiB = 7.08 GB: one 32,768-token sequence (4.3 GB), where a
    # 4,096-token window held 13
    assert d["capacity"]["max_concurrent_sequences"] == 1
    spec = import_model(p).spec
    assert [g.mixer.kind for g in spec.layer_groups] == ["full"]


def test_mistral_v01_window_is_still_its_window(tmp_path):
    spec = import_model(CONFIGS / "mistralai__Mistral-7B-v0.1.json").spec
    assert [(g.mixer.kind, g.mixer.sliding_window) for g in spec.layer_groups] == [("sliding", 4096)]


def test_a_partial_download_is_refused_naming_the_missing_shards(run_cli, tmp_path):
    """One of three shards, no index: it planned 1/3 of the weights, called the untied lm_head tied, and
    predicted several times the real speed, exit 0."""
    folder = mistral_folder(tmp_path / "m", keep_shards=(1,))
    code, out, err = run_cli("plan", str(folder), "--gpu", "rtx3090")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "2 shard(s) that the shard names announce are missing" in err
    assert "model-00002-of-00003.safetensors, model-00003-of-00003.safetensors" in err and "--estimate-only" in err


def test_estimate_only_plans_from_the_config_and_says_so_first(run_cli, tmp_path):
    folder = mistral_folder(tmp_path / "m", keep_shards=(1,))
    code, out, err = run_cli("plan", str(folder), "--gpu", "rtx3090", "--estimate-only")
    assert code == 0, err
    warning = out.split("llmsize plan:")[0]  # before the title: the first thing a user reads
    assert warning.startswith("Warning: Sized from config.json alone (--estimate-only)") and "missing" in warning
    code, out, err = run_cli("plan", str(folder), "--gpu", "rtx3090", "--estimate-only", "--json")
    d = json.loads(out)
    assert d["warnings"] and d["weights"]["bytes_total"] > 14e9  # 7.25 B parameters in bf16
    # 936 GB/s over ~14.5 GB read per token: about 60-65 tok/s, not ~590
    assert 55 < d["decode"]["ceiling_tok_s"] < 70


def test_the_whole_checkpoint_plans_from_its_headers(run_cli, tmp_path):
    folder = mistral_folder(tmp_path / "m")
    code, out, err = run_cli("plan", str(folder), "--gpu", "rtx3090", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert not d["warnings"] and d["weights"]["bytes_total"] == pytest.approx(14.496e9, rel=1e-3)
    assert d["weights"]["bytes_by_component"]["lm_head"] == 32768 * 4096 * 2  # stored: untied


def test_an_untied_model_without_lm_head_is_refused(tmp_path):
    """Never infer `tied` against the config: no lm_head tensor in complete-looking headers is a missing tensor."""
    root = tmp_path / "m"
    root.mkdir()
    (root / "config.json").write_text(json.dumps(MISTRAL_V03))
    t = mistral_tensors(MISTRAL_V03)
    del t["lm_head.weight"]
    sparse_safetensors(root / "model.safetensors", t)
    with pytest.raises(LlmsizeError, match="tie_word_embeddings false, but no lm_head tensor"):
        import_model(root)


def test_headers_that_match_nothing_known_are_refused(tmp_path):
    root = tmp_path / "m"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({**MISTRAL_V03, "tie_word_embeddings": True}))
    sparse_safetensors(root / "model.safetensors", {"foo": ("BF16", (8, 8)), "bar": ("BF16", (8,))})
    with pytest.raises(LlmsizeError, match=r"headers hold 72 decoder parameters where config.json describes 7.11 B"):
        import_model(root)


def _cfg(tmp_path, **changes) -> Path:
    cfg = {**MISTRAL_V03, **changes}
    for k, v in changes.items():
        if v is ...:
            del cfg[k]
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg) if not isinstance(changes.get("_raw"), str) else changes["_raw"])
    return p


@pytest.mark.parametrize("changes, needle", [
    ({"hidden_size": None}, "missing hidden_size (null)"),
    ({"hidden_size": ..., "num_hidden_layers": ...}, "missing hidden_size, num_hidden_layers"),  # not Llama's
    ({"vocab_size": ..., "intermediate_size": None}, "missing intermediate_size (null), vocab_size"),
    ({"num_hidden_layers": True}, "num_hidden_layers is 'True'; expected an integer"),
    ({"num_attention_heads": 32.0}, "num_attention_heads is '32.0'"),
    ({"hidden_size": 10**400}, "hidden_size is"),
    ({"num_hidden_layers": 10**9}, "expected an integer from 1 to 65,536"),
    ({"num_key_value_heads": -8}, "num_key_value_heads is '-8'"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings is 'yes'; expected true or false"),
    # 4,096 / 24 heads planned silently as "24q/8kv x 170": a head width rounded down
    ({"num_attention_heads": 24}, "hidden_size 4,096 is not a multiple of num_attention_heads 24"),
])
def test_required_fields_and_types(run_cli, tmp_path, changes, needle):
    p = _cfg(tmp_path, **changes)
    code, out, err = run_cli("plan", str(p), "--gpu", "h200")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert needle in err, err


def test_a_one_entry_layer_types_is_not_a_one_layer_model(run_cli, tmp_path):
    gemma = json.loads((CONFIGS / "google__gemma-3-27b-it.json").read_text())
    gemma["text_config"]["layer_types"] = ["sliding_attention"]
    p = tmp_path / "config.json"
    p.write_text(json.dumps(gemma))
    code, out, err = run_cli("plan", str(p), "--gpu", "h200")
    assert code == 2 and "layer_types has 1 entries for 62 layers" in err


def test_deep_nesting_and_huge_integers_are_one_line(run_cli, tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, out, err = run_cli("plan", str(p), "--gpu", "h200")
    assert code == 2 and "nested too deeply" in err and len(err.strip().splitlines()) == 1
    p.write_text('{"model_type": "llama", "hidden_size": 1' + "0" * 5000 + "}")
    code, out, err = run_cli("plan", str(p), "--gpu", "h200")
    assert code == 2 and "not valid JSON" in err and len(err.strip().splitlines()) == 1


def test_qwen_sliding_window_starts_at_max_window_layers(tmp_path):
    """transformers Qwen2: with use_sliding_window, layers from max_window_layers on slide; the others are full."""
    cfg = json.loads((CONFIGS / "Qwen__Qwen2.5-7B-Instruct.json").read_text())
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**cfg, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20}))
    spec = import_model(p).spec
    kinds = {g.mixer.kind: g.count for g in spec.layer_groups}
    assert kinds == {"full": 20, "sliding": cfg["num_hidden_layers"] - 20}


def test_class_defaults_taken_are_named(tmp_path):
    """Gemma 3's text_config leaves vocab_size to its class: taken, and the notes say so."""
    im = import_model(CONFIGS / "google__gemma-3-27b-it.json")
    assert im.spec.vocab_size == 262208
    assert any("vocab_size = 262208" in n for n in im.notes)


def test_a_folder_name_of_escape_sequences_reaches_no_terminal_raw(run_cli, tmp_path):
    """A config without `_name_or_path` is named after its folder: an ESC in that name went to the terminal as it
    was (a hostile-input pass, 2026-12-05), where the config's own strings were escaped."""
    folder = tmp_path / "evil\x1b[31mRED"
    folder.mkdir()
    cfg = {k: v for k, v in MISTRAL_V03.items() if k != "_name_or_path"}
    (folder / "config.json").write_text(json.dumps(cfg))
    code, out, err = run_cli("plan", str(folder), "--gpu", "h100", "--estimate-only")
    assert code == 0, err
    assert "\x1b" not in out + err and "evil\\x1b[31mRED on" in out
