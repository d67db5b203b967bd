"""A format per component (ModelOpt MIXED_PRECISION exports): the recipe format, its bytes, its import and its
place in the step-time model.

nvidia/Qwen3.6-35B-A3B-NVFP4 (tests/data/hf-configs, its hf_quant_config.json copied byte for byte) keeps its routed
experts, shared expert and lm_head in weight-only NVFP4 (W4A16_NVFP4), its attention and Gated DeltaNet projections
in FP8; vLLM refused such checkpoints before PR #35047 (ModelOpt mixed precision) and runs W4A16_NVFP4 through
Marlin since PR #42566.
"""

import json
import shutil
from fractions import Fraction
from pathlib import Path

import pytest

from llmsize.errors import InvalidValueError
from llmsize.estimate.plan import PlanInputs, make_plan
from llmsize.estimate.quant import quant_format
from llmsize.estimate.weights import weight_bytes
from llmsize.importer.config_fields import ConfigError
from llmsize.importer.source import import_model

CONFIGS = Path(__file__).parent / "data" / "hf-configs"
NV36 = "nvidia__Qwen3.6-35B-A3B-NVFP4"
QWEN36_RECIPE = "experts=nvfp4-w4a16,shared_experts=nvfp4-w4a16,attention=fp8,ssm=fp8,lm_head=nvfp4-w4a16"


def test_weight_only_nvfp4_and_mxfp8_bits():
    # W4A16_NVFP4 stores NVFP4's bytes: (16 x 4 + 8) / 16 = 4.5 bits; MXFP8: (32 x 8 + 8) / 32 = 8.25 bits
    assert quant_format("nvfp4-w4a16").bits_per_weight == Fraction(9, 2)
    assert quant_format("nvfp4-w4a16").native_compute == "bf16"  # activations stay 16-bit
    assert quant_format("mxfp8").bits_per_weight == Fraction(33, 4)


def test_a_recipe_is_one_object_whatever_its_order():
    a = quant_format("attention=fp8, experts=nvfp4")
    assert a is quant_format("experts=NVFP4,attention=fp8")  # estimators cache by identity
    assert a.id == "experts=nvfp4,attention=fp8" and a.kernel_id == "nvfp4"
    assert quant_format("attention=fp8,mlp=nvfp4-w4a16").kernel_id == "nvfp4-w4a16"  # a dense model's MLP


@pytest.mark.parametrize("name, said", [
    ("experts=nvfp4,router=fp8", "`router` is not one a format can quantize"),
    ("experts=nvfp5", "`nvfp5` is not a single weight format"),
    ("experts=gguf-q4_k_m", "`gguf-q4_k_m` is not a single weight format"),
    ("experts=ggml-q4_0", "`ggml-q4_0` is not a single weight format"),
    ("experts=nvfp4,experts=fp8", "names `experts` twice"),
    ("experts=nvfp4,", "`` is not COMPONENT=FORMAT"),
    ("experts=", "`experts=` is not COMPONENT=FORMAT"),
    ("=nvfp4", "`=nvfp4` is not COMPONENT=FORMAT"),
])
def test_a_bad_recipe_names_the_bad_part(name, said):
    with pytest.raises(InvalidValueError, match=said.replace("(", r"\(")) as e:
        quant_format(name)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("model_id", ["qwen3.6-35b-a3b", "qwen3.6-27b", "gpt-oss-20b", "nemotron-3-nano-30b-a3b",
                                      "deepseek-v3", "gemma-4-12b", "llama-3.1-8b"])
def test_a_recipe_prices_each_component_as_its_own_format_would(catalog, model_id):
    """Each component of a recipe costs what the plain format costs it: experts as NVFP4 under scope `experts`,
    attention and SSM as FP8 under `linear`, the lm_head as NVFP4 under `all`, the rest (embedding, routers, norms)
    as 16-bit weights. A component the model lacks costs nothing."""
    m = catalog.model(model_id)
    r = weight_bytes(m, quant_format("experts=nvfp4,mlp=nvfp4,attention=fp8,ssm=fp8,lm_head=nvfp4"), "all")
    nv_mlp = weight_bytes(m, quant_format("nvfp4"), "mlp").stored_bytes
    fp8 = weight_bytes(m, quant_format("fp8"), "linear").stored_bytes
    nv_all = weight_bytes(m, quant_format("nvfp4"), "all").stored_bytes
    bf = weight_bytes(m, quant_format("bf16"), "all").stored_bytes
    want = {"experts": nv_mlp["experts"], "mlp": nv_mlp["mlp"], "attention": fp8["attention"], "ssm": fp8["ssm"],
            "lm_head": nv_all["lm_head"], "shared_experts": bf["shared_experts"], "embedding": bf["embedding"],
            "router": bf["router"], "norms": bf["norms"]}
    for c, b in want.items():
        assert r.stored_bytes[c] == pytest.approx(b, rel=1e-12, abs=1e-6), c


def test_a_tied_lm_head_is_read_in_the_embedding_s_format(catalog):
    """A tied lm_head is the embedding matrix: a recipe that leaves the embedding in 16 bits reads it so, whatever it
    says of the lm_head (Gemma 4 12B ties them: 262,144 x 3,840 x 2 B = 2.013 GB a token)."""
    m = catalog.model("gemma-4-12b")
    assert m.tie_word_embeddings
    w = weight_bytes(m, quant_format("mlp=nvfp4,lm_head=nvfp4"), "all")
    assert w.read_bytes_per_token["lm_head"] == pytest.approx(262144 * 3840 * 2)
    w = weight_bytes(m, quant_format("mlp=nvfp4,embedding=fp8"), "all")
    assert w.read_bytes_per_token["lm_head"] == pytest.approx(262144 * 3840 + 4)


def _folder(tmp_path, hf_quant: dict | None = None, config: str = NV36):
    shutil.copy(CONFIGS / f"{config}.json", tmp_path / "config.json")
    if hf_quant is None:
        shutil.copy(CONFIGS / f"{NV36}.hf_quant_config.json", tmp_path / "hf_quant_config.json")
    else:
        (tmp_path / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    return tmp_path


def test_nvidia_qwen36_nvfp4_imports_as_its_recipe(tmp_path, catalog):
    im = import_model(_folder(tmp_path), read_headers=False)
    assert im.release.quant == QWEN36_RECIPE and im.release.kv_cache_dtype == "fp8"
    assert any("--kv-dtype fp8" in n for n in im.notes)
    # config.json alone carries the same table (its quantization_config, modelopt 0.37.0)
    assert import_model(CONFIGS / f"{NV36}.json", read_headers=False).release.quant == QWEN36_RECIPE
    # by hand, a token reads the lm_head in NVFP4: 248,320 x 2,048 x 4.5 / 8 + 4 B = 286,064,644 B (1.017 GB in BF16)
    plan = make_plan(im.spec, catalog.gpu("rtx5090"), PlanInputs(), search_fit=False)
    assert plan.weights.read_bytes_per_token["lm_head"] == 248320 * 2048 * 9 // 16 + 4
    assert plan.fmt.id == QWEN36_RECIPE
    # attention (10 layers of q 16 x 256 x 2 gated, k/v 2 x 256, o; no biases, its QK norms are norms) in FP8 at one
    # byte a weight + 4 B a matrix: 10 x 27,262,976 + 160 = 272,629,920 B
    h = 2048
    attn = 10 * (h * 16 * 256 * 2 + 2 * h * 2 * 256 + 16 * 256 * h)
    assert plan.weights.stored_bytes["attention"] == attn + 10 * 4 * 4 == 272_629_920


def _lightning_layers(ssm_layers: list[int], attn: bool = False, algo: str = "FP8") -> dict:
    """A Nemotron 3.5 Lightning-like quantized_layers table (the export's own names: backbone.layers.N.mixer.*):
    Mamba-2 in/out projections in `algo`, every MoE layer's experts W4A16_NVFP4, attention left out (excluded)."""
    spec = json.loads((CONFIGS / "nvidia__NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4.json").read_text())
    kinds = spec["layers_block_type"]
    out = {}
    for i, k in enumerate(kinds):
        if k == "mamba" and i in ssm_layers:
            out[f"backbone.layers.{i}.mixer.in_proj"] = {"quant_algo": algo}
            out[f"backbone.layers.{i}.mixer.out_proj"] = {"quant_algo": algo}
        elif k == "moe":
            for e in range(2):
                out[f"backbone.layers.{i}.mixer.experts.{e}.up_proj"] = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
            out[f"backbone.layers.{i}.mixer.shared_experts.up_proj"] = {"quant_algo": "W4A16_NVFP4"}
        elif k == "attention" and attn:
            out[f"backbone.layers.{i}.mixer.q_proj"] = {"quant_algo": "FP8"}
    out["lm_head"] = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
    return {"quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8", "quantized_layers": out}}


LIGHTNING = "nvidia__NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"


def test_a_hybrid_s_mamba_layers_in_fp8_and_its_attention_in_16_bits(tmp_path):
    kinds = json.loads((CONFIGS / f"{LIGHTNING}.json").read_text())["layers_block_type"]
    mamba = [i for i, k in enumerate(kinds) if k == "mamba"]
    im = import_model(_folder(tmp_path, _lightning_layers(mamba), LIGHTNING), read_headers=False)
    assert im.release.quant == "experts=nvfp4-w4a16,shared_experts=nvfp4-w4a16,ssm=fp8,lm_head=nvfp4-w4a16"
    assert not any("layers; priced in all" in n for n in im.notes)


def test_a_part_quantized_in_some_layers_only_is_said(tmp_path):
    kinds = json.loads((CONFIGS / f"{LIGHTNING}.json").read_text())["layers_block_type"]
    mamba = [i for i, k in enumerate(kinds) if k == "mamba"]
    im = import_model(_folder(tmp_path, _lightning_layers(mamba[:5]), LIGHTNING), read_headers=False)
    assert any(f"ssm quantized in 5 of {len(mamba)} layers; priced in all of them" in n for n in im.notes)


def test_a_part_in_two_formats_takes_the_most_common_and_says_so(tmp_path):
    cfg = _lightning_layers([])
    kinds = json.loads((CONFIGS / f"{LIGHTNING}.json").read_text())["layers_block_type"]
    mamba = [i for i, k in enumerate(kinds) if k == "mamba"]
    for n, i in enumerate(mamba):
        cfg["quantization"]["quantized_layers"][f"backbone.layers.{i}.mixer.in_proj"] = {
            "quant_algo": "FP8" if n < 3 else "NVFP4"}
    im = import_model(_folder(tmp_path, cfg, LIGHTNING), read_headers=False)
    assert "ssm=nvfp4" in im.release.quant
    assert any(n.startswith(f"ssm: 3 modules fp8, {len(mamba) - 3} modules nvfp4; priced as nvfp4") for n in im.notes)


@pytest.mark.parametrize("quantization, said", [
    ({"quant_algo": "MIXED_PRECISION"}, "MIXED_PRECISION without a quantized_layers table"),
    ({"quant_algo": "MIXED_PRECISION", "quantized_layers": []}, "MIXED_PRECISION without a quantized_layers table"),
    ({"quant_algo": "MIXED_PRECISION", "quantized_layers": {"backbone.layers.0.mixer.in_proj": {"quant_algo": "INT3"}}},
     "backbone.layers.0.mixer.in_proj quant_algo 'INT3', which llmsize does not price"),
    ({"quant_algo": "MIXED_PRECISION", "quantized_layers": {"backbone.layers.0.mixer.in_proj": {"quant_algo": 7}}},
     "quant_algo 7, which llmsize does not price"),
    ({"quant_algo": "MIXED_PRECISION", "quantized_layers": {"mtp.layers.0.fc": {"quant_algo": "FP8"}}},
     "no module of quantized_layers is one of the text model's layers"),
    ({"quant_algo": "W4A8_AWQ"}, "ModelOpt quant_algo 'W4A8_AWQ' is not supported"),
])
def test_a_bad_mixed_precision_table_is_one_line(tmp_path, quantization, said):
    with pytest.raises(ConfigError, match=said) as e:
        import_model(_folder(tmp_path, {"quantization": quantization}, LIGHTNING), read_headers=False)
    assert "\n" not in str(e.value)


def test_the_recipe_s_fp8_and_16_bit_bytes_stream_at_their_own_kernels_fractions(tmp_path, catalog):
    """The step-time model streams each part of a recipe's bytes at its kernels' class: the W4A16 NVFP4 experts
    through Marlin (the 4-bit weight-only class, on a card with FP4 tensor cores too), the FP8 attention and
    DeltaNet projections at the 8-bit class's fraction, routers, norms and the DeltaNet's small weights at the
    16-bit one; together they are the step's weight bytes."""
    from llmsize.estimate.speed import weight_bytes_by_class
    from llmsize.estimate.step_inputs import step_inputs

    im = import_model(_folder(tmp_path), read_headers=False)
    plan = make_plan(im.spec, catalog.gpu("rtx5090"), PlanInputs(), search_fit=False)
    x = step_inputs(plan, plan.decode_1, "vllm")
    by = weight_bytes_by_class(x)
    assert x.format_class == "int4"
    assert sum(by.values()) == pytest.approx(x.weight_bytes)
    w = plan.weights.read_bytes_per_token
    # FP8: attention's matrices and the DeltaNet's (all but its conv, dt_bias and A_log: under 1% of them)
    assert by["8bit"] == pytest.approx(w["attention"] + w["ssm"], rel=0.01)
    assert 0 < by["f16"] < 0.05 * x.weight_bytes  # routers, norms, the DeltaNet's small weights
    assert by["int4"] == pytest.approx(w["experts"] + w["shared_experts"] + w["lm_head"], rel=1e-9)


def test_a_row_with_its_checkpoint_s_recipe_is_priced_at_it(catalog):
    """club-3090's RTX 5090 runs of nvidia/Qwen3.6-35B-A3B-NVFP4 (vLLM v0.24.0, issue #612) print the format as NVFP4;
    the row's recipe prices the checkpoint's FP8 attention and weight-only NVFP4 experts and lm_head, against the
    format's default (every linear layer NVFP4, the lm_head in BF16): by hand the lm_head alone reads 1.017 GB in
    BF16 and 0.286 in NVFP4, the attention (272,629,760 weights) 0.2726 GB in FP8 and 0.1534 in NVFP4."""
    from pydantic import ValidationError

    from llmsize.catalog.measurement import Row
    from llmsize.estimate.observed import observe

    base = dict(card="NVIDIA GeForce RTX 5090", card_id="rtx5090", model="qwen3.6-35b-a3b-nvfp4",
                model_id="qwen3.6-35b-a3b", format="NVFP4", test="NARRATIVE", kind="decode", batch=1,
                depth_tokens=0, tok_s=257.3, verbatim="decode_TPS mean= 257.30")
    m, g = catalog.model("qwen3.6-35b-a3b"), catalog.gpu("rtx5090")
    mixed = observe(Row(**base, recipe=QWEN36_RECIPE), "vllm", "k", m, g)
    plain = observe(Row(**base), "vllm", "k", m, g)
    assert mixed.plan.fmt.id == QWEN36_RECIPE and plain.plan.fmt.id == "nvfp4"
    w, p = mixed.plan.weights.read_bytes_per_token, plain.plan.weights.read_bytes_per_token
    assert (p["lm_head"], w["lm_head"]) == (pytest.approx(1.017e9, rel=1e-3), pytest.approx(0.286e9, rel=1e-3))
    assert (w["attention"], p["attention"]) == (pytest.approx(0.2726e9, rel=1e-3), pytest.approx(0.1534e9, rel=1e-3))
    for bad in ("nvfp4", "experts=nvfp5"):
        with pytest.raises(ValidationError):
            Row(**base, recipe=bad)
    with pytest.raises(ValidationError, match="no scope beside it"):
        Row(**base, recipe=QWEN36_RECIPE, scope="experts")


def test_the_cli_plans_a_recipe_and_refuses_a_scope_beside_it(run_cli, tmp_path):
    code, out, err = run_cli("plan", "qwen3.6-35b-a3b", "--gpu", "rtx5090", "--quant", QWEN36_RECIPE)
    assert code == 0, err
    assert f"Weights in {QWEN36_RECIPE}" in out.replace("\n", " ") or "Weights in experts=nvfp4-w4a16" in out
    assert "bits per quantized weight on average" in out and "scope all" not in out
    assert "runs weight-only NVFP4 (W4A16) through the Marlin kernel" in " ".join(out.split())
    code, out, err = run_cli("plan", "qwen3.6-35b-a3b", "--gpu", "rtx5090", "--quant", "experts=nvfp4",
                             "--scope", "mlp")
    assert code == 2 and "--scope mlp: the recipe experts=nvfp4 names each component's format" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    code, out, err = run_cli("plan", "qwen3.6-35b-a3b", "--gpu", "rtx5090", "--quant", "experts=nvfp4,bogus=fp8")
    assert code == 2 and "`bogus`" in err and "Traceback" not in err
    # the imported folder plans as its own recipe, and says so
    code, out, err = run_cli("plan", str(_folder(tmp_path)), "--gpu", "rtx5090", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["weights"]["format"] == QWEN36_RECIPE
    code, out, err = run_cli("formats")
    assert code == 0 and "A recipe gives a format per component" in out
    # a launch line for a catalog model asked in a recipe says what checkpoint to serve; the imported folder needs none
    code, out, err = run_cli("plan", "qwen3.6-35b-a3b", "--gpu", "rtx5090", "--quant", QWEN36_RECIPE, "--emit", "vllm")
    assert code == 0 and "serve a checkpoint with that format per component" in out
    code, out, err = run_cli("plan", str(tmp_path), "--gpu", "rtx5090", "--emit", "vllm")
    assert code == 0 and out.startswith("vllm serve ") and "#" not in out


def test_a_recipe_of_parts_the_model_lacks(run_cli):
    """A recipe naming only components the model has no weights of would price it all in 16 bits under a quantized
    name: refused in one line that names what the model has. One naming some it lacks prices the rest, and a note
    says which parts priced nothing. A speculative draft of another shape keeps its release format where the
    recipe names nothing of it (an experts-only recipe and a dense draft)."""
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx5090", "--quant", "ssm=nvfp4,experts=fp8")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "llama-3.1-8b has no `experts` or `ssm` weights, so the recipe would quantize nothing" in err
    assert "Name components it has: mlp, attention, attention_out, lm_head, embedding." in err
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx5090", "--quant", "experts=nvfp4,attention=fp8",
                             "--json")
    assert code == 0, err
    d = json.loads(out)
    assert any("no `experts` weights: the recipe's experts=nvfp4 prices nothing" in n for n in d["notes"])
    # attention in FP8 and the rest 16-bit: fewer bytes than BF16, more than all-FP8
    code, bf16, _ = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx5090", "--quant", "bf16", "--json")
    code, fp8, _ = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx5090", "--quant", "fp8", "--json")
    total = [json.loads(x)["weights"]["bytes_total"] for x in (fp8, out, bf16)]
    assert total[0] < total[1] < total[2]
    code, out, err = run_cli("plan", "qwen3-30b-a3b", "--gpu", "rtx5090", "--quant", "experts=nvfp4",
                             "--spec", "draft=qwen3-0.6b,k=4,accept=0.7", "--json")
    assert code == 0, err


def test_the_headers_of_a_mixed_precision_folder_match_its_recipe(tmp_path, catalog):
    """A 2-layer Llama written as ModelOpt writes a MIXED_PRECISION export (tests/stfiles.py): attention FP8 (E4M3
    weight + an FP32 scale), MLP and lm_head NVFP4 (packed uint8 weight, E4M3 scales per 16, an FP32 scale_2).
    Read from its headers, every component's bytes are the recipe's estimate to the byte: by hand, an attention
    matrix of 64 x 64 is 4,096 + 4 B, an MLP one of 128 x 64 is 4,096 packed + 512 scale + 4 B."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from stfiles import TINY, tiny_llama_tensors, write_safetensors

    cfg = dict(TINY)
    tensors = tiny_llama_tensors("bf16")
    layers = {}
    for name, (dtype, (n, k)) in list((k, v) for k, v in tensors.items() if k.endswith("proj.weight")):
        base = name[:-len(".weight")]
        if "self_attn" in base:
            tensors[base + ".weight"] = ("F8_E4M3", (n, k))
            tensors[base + ".weight_scale"] = ("F32", ())
            layers[base] = {"quant_algo": "FP8"}
        else:
            tensors[base + ".weight"] = ("U8", (n, k // 2))
            tensors[base + ".weight_scale"] = ("F8_E4M3", (n, k // 16))
            tensors[base + ".weight_scale_2"] = ("F32", ())
            layers[base] = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
    tensors["lm_head.weight"] = ("U8", (100, 32))
    tensors["lm_head.weight_scale"] = ("F8_E4M3", (100, 4))
    tensors["lm_head.weight_scale_2"] = ("F32", ())
    layers["lm_head"] = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"},
         "quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": layers}}))
    write_safetensors(tmp_path / "model.safetensors", tensors)
    im = import_model(tmp_path)
    assert im.release.quant == "mlp=nvfp4-w4a16,attention=fp8,lm_head=nvfp4-w4a16"
    plan = make_plan(im.spec, catalog.gpu("rtx5090"), PlanInputs(), exact=im.exact, search_fit=False)
    est = weight_bytes(im.spec, plan.fmt, plan.scope).stored_bytes
    assert im.exact.bytes_by_component["attention"] == est["attention"] == 2 * (2 * (64 * 64 + 4) + 2 * (32 * 64 + 4))
    assert im.exact.bytes_by_component["mlp"] == est["mlp"] == 2 * 3 * (4096 + 512 + 4)
    assert im.exact.bytes_by_component["lm_head"] == est["lm_head"] == 100 * 32 + 100 * 4 + 4


def _ct_mixed(groups: dict, ignore: list | None = None, fmt: str = "mixed-precision") -> dict:
    """Qwen3.6-35B-A3B's config.json with a compressed-tensors quantization_config of these config groups."""
    raw = json.loads((CONFIGS / "Qwen__Qwen3.6-35B-A3B.json").read_text())
    raw["quantization_config"] = {"quant_method": "compressed-tensors", "format": fmt, "config_groups": groups,
                                  "ignore": ignore or ["re:.*visual.*", "re:.*mlp\\.gate$", "re:^mtp.*"]}
    return raw


FP8_W = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}
NVFP4_W = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}


def test_a_compressed_tensors_checkpoint_in_two_formats_is_a_recipe(tmp_path):
    """compressed-tensors writes a mixed checkpoint as config groups, each a weights scheme and the modules it
    targets (regexes after 're:', names, or the class Linear), and the top-level format "mixed-precision". FP8
    attention, DeltaNet and lm_head beside NVFP4 MLPs, except the last two layers' experts in FP8: each component
    takes the format most of its layers have, and the exception is said; before, the first group's weights gave
    the whole checkpoint one format."""
    groups = {
        "group_0": {"format": "float-quantized", "weights": FP8_W, "targets": [
            "re:.*self_attn\\.(q|k|v|o)_proj$", "re:.*linear_attn\\.(in_proj_qkv|in_proj_z|out_proj)$", "re:.*lm_head",
            "re:.*layers\\.(38|39)\\.mlp\\.experts\\.\\d+\\.(gate|up|down)_proj$"]},
        "group_1": {"format": "nvfp4-pack-quantized", "weights": NVFP4_W, "targets": [
            "re:.*mlp\\.experts\\.\\d+\\.(gate|up|down)_proj$", "re:.*shared_expert\\.(gate|up|down)_proj$"]}}
    im = import_model(_write(tmp_path, _ct_mixed(groups)), read_headers=False)
    assert im.release.quant == "experts=nvfp4,shared_experts=nvfp4,attention=fp8,ssm=fp8,lm_head=fp8"
    assert any(n.startswith("experts: the config groups give its layers 38 nvfp4, 2 fp8; priced as nvfp4")
               for n in im.notes)
    # the class Linear takes every linear layer a later group does not: NVFP4 everywhere but attention's FP8
    groups = {"group_0": {"weights": FP8_W, "targets": ["re:.*self_attn\\.(q|k|v|o)_proj$"]},
              "group_1": {"weights": NVFP4_W, "targets": ["Linear"]}}
    im = import_model(_write(tmp_path, _ct_mixed(groups, ignore=["lm_head", "re:.*mlp\\.gate$"])),
                      read_headers=False)
    assert im.release.quant == "experts=nvfp4,shared_experts=nvfp4,attention=fp8,ssm=nvfp4"


def test_a_single_format_under_mixed_precision_is_that_format(tmp_path):
    groups = {"group_0": {"weights": NVFP4_W, "targets": ["Linear"]},
              "group_1": {"weights": dict(NVFP4_W), "targets": ["re:.*lm_head"]}}
    im = import_model(_write(tmp_path, _ct_mixed(groups, ignore=["lm_head"])), read_headers=False)
    assert (im.release.quant, im.release.scope) == ("nvfp4", "linear")


def _write(tmp_path, raw: dict) -> Path:
    p = tmp_path / "config.json"
    p.write_text(json.dumps(raw))
    return p


def test_a_long_or_escaped_recipe_is_cut_and_shown_printable(run_cli):
    code, out, err = run_cli("plan", "qwen3.6-35b-a3b", "--gpu", "rtx5090", "--quant", "experts=" + "x" * 5000)
    assert code == 2 and len(err) < 600 and "Traceback" not in err
    code, out, err = run_cli("plan", "qwen3.6-35b-a3b", "--gpu", "rtx5090", "--quant", "exp\x1b[31merts=nvfp4")
    assert code == 2 and "\x1b" not in err and "exp\\x1b[31merts" in err


def test_a_catalog_release_recipe_in_any_order_is_the_one_recipe():
    from pydantic import ValidationError

    from llmsize.catalog.schema import ReleaseFormat

    r = ReleaseFormat(quant="lm_head=nvfp4-w4a16,attention=fp8,experts=nvfp4-w4a16", scope="all")
    assert r.quant == "experts=nvfp4-w4a16,attention=fp8,lm_head=nvfp4-w4a16"
    assert ReleaseFormat(quant="nvfp4").quant == "nvfp4"
    # the form is checked when the catalog loads; format names when a plan prices them, as a plain format's are
    with pytest.raises(ValidationError, match="`head` is not one a format can quantize"):
        ReleaseFormat(quant="head=nvfp4")
    with pytest.raises(InvalidValueError, match="`nvfp5` is not a single weight format"):
        quant_format(ReleaseFormat(quant="lm_head=nvfp5").quant)


def test_an_ignore_list_that_excludes_whole_layers_is_read_by_module_names(tmp_path):
    """nvidia's GLM-5.1 NVFP4 excludes `model.layers.1.*` (whole dense layers) beside each MoE layer's self_attn* and
    mlp.shared_experts*: the patterns alone count attention kept in 75 of 78 layers; read by module names in every
    layer, each component as most of its layers are, attention is kept everywhere and only the routed experts are
    NVFP4. DeepSeek-V2-Lite's config as the stand-in: its dense first layer excluded whole, every MoE layer's
    attention and shared experts excluded. And an ignore list that keeps attention in 3 of its 27 layers only: most
    layers quantize it, so every layer does in the estimate, and the note names the 3."""
    raw = json.loads((CONFIGS / "deepseek-ai__DeepSeek-V2-Lite-Chat.json").read_text())
    n = raw["num_hidden_layers"]
    first = raw.get("first_k_dense_replace", 1)
    ignore = [f"model.layers.{i}.*" for i in range(first)]
    ignore += [f"model.layers.{i}.self_attn*" for i in range(first, n)]
    ignore += [f"model.layers.{i}.mlp.shared_experts*" for i in range(first, n)] + ["lm_head"]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"quantization": {"quant_algo": "NVFP4", "exclude_modules": ignore}}))
    im = import_model(tmp_path, read_headers=False)
    assert (im.release.quant, im.release.scope) == ("nvfp4", "experts")
    # attention kept in a minority of the layers: quantized everywhere, the exceptions said
    ignore = [f"model.layers.{i}.self_attn*" for i in range(3)]
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"quantization": {"quant_algo": "NVFP4", "exclude_modules": ignore}}))
    im = import_model(tmp_path, read_headers=False)
    assert (im.release.quant, im.release.scope) == ("nvfp4", "linear")
    assert any(n.startswith("attention: the ignore list keeps it in 16 bits in 3 of its 27 layers; priced as nvfp4")
               for n in im.notes)


def _ignore_import(tmp_path, config: str, ignore: list[str], hf_quant: bool = True):
    """`config` from tests/data/hf-configs with an NVFP4 quantization config excluding `ignore`: ModelOpt's
    hf_quant_config.json, or compressed-tensors' in config.json (`hf_quant` False)."""
    raw = json.loads((CONFIGS / config).read_text())
    for f in tmp_path.glob("*.json"):
        f.unlink()
    if hf_quant:
        (tmp_path / "hf_quant_config.json").write_text(json.dumps(
            {"quantization": {"quant_algo": "NVFP4", "exclude_modules": ignore}}))
    else:
        raw["quantization_config"] = {
            "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ignore,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float",
                                                                            "group_size": 16}}}}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    return import_model(tmp_path, read_headers=False).release


@pytest.mark.parametrize("hf_quant", [True, False])
def test_an_ignore_list_is_read_by_the_module_names_it_takes(tmp_path, hf_quant):
    """Each component is kept in 16 bits where the list takes its modules' names in most of its layers, whatever the
    pattern's form: a module it is part of (transformers' modules_to_not_convert: gpt-oss's
    `model.layers.*.self_attn`), a regex that names the layers it keeps, the MLP module above a Qwen MoE's experts."""
    # Qwen3.5-27B: 48 Gated DeltaNet layers and 16 attention layers. The attention modules, named as a whole:
    # attention 16-bit, the MLPs and DeltaNet projections NVFP4, a recipe (no scope says it)
    r = _ignore_import(tmp_path, "Qwen__Qwen3.5-27B.json", ["model.layers.*.self_attn", "lm_head"], hf_quant)
    assert (r.quant, r.scope) == ("mlp=nvfp4,ssm=nvfp4", "all")
    # a regex keeping attention in layers 0-9 only: 10 of Llama 3.1 8B's 32, quantized in the estimate, said
    r = _ignore_import(tmp_path, "meta-llama__Llama-3.1-8B-Instruct.json",
                       ["re:model\\.layers\\.[0-9]\\.self_attn.*"], hf_quant)
    assert (r.quant, r.scope) == ("nvfp4", "linear")
    assert any(n.startswith("attention: the ignore list keeps it in 16 bits in 10 of its 32 layers") for n in r.notes)
    # the output projections only (`*o_proj`): the rest of attention quantized, a recipe naming the part apart
    r = _ignore_import(tmp_path, "meta-llama__Llama-3.1-8B-Instruct.json", ["*o_proj"], hf_quant)
    assert (r.quant, r.scope) == ("mlp=nvfp4,attention=nvfp4", "all")
    # a Qwen3 MoE's `mlp` module holds its experts: excluding it keeps them all
    r = _ignore_import(tmp_path, "Qwen__Qwen3-30B-A3B.json", ["model.layers.*.mlp"], hf_quant)
    assert (r.quant, r.scope) == ("attention=nvfp4", "all")
    # every component kept: the checkpoint is its 16-bit dtype, and the note says so
    r = _ignore_import(tmp_path, "meta-llama__Llama-3.1-8B-Instruct.json",
                       ["re:.*mlp\\.(gate|up|down)_proj.*", "re:.*self_attn.*"], hf_quant)
    assert (r.quant, r.scope) == ("bf16", "all")
    assert r.notes[0].startswith("the ignore list keeps every component in 16 bits")


@pytest.mark.parametrize("hf_quant", [True, False])
@pytest.mark.parametrize("ignore, said", [
    ({"lm_head": True}, "not a list of module names"), ([1, 2], "not a list of module names"),
    ([["lm_head"]], "not a list of module names"), (["re:("], "a regex that does not compile"),
    (["re:(.*)*x"], "a quantified group inside a quantified group"),
    (["re:model\\.(layers\\.\\d+)+\\.mlp"], "a quantified group inside a quantified group")])
def test_a_hostile_ignore_list_is_refused_in_one_line(tmp_path, hf_quant, ignore, said):
    """An ignore list that is not a list of names, or holds a regex that does not compile or would backtrack
    exponentially on the names it is matched against (re:(.*)*x took minutes on one module name): one line, the
    file and the value named, before any work."""
    with pytest.raises(ConfigError, match=said) as e:
        _ignore_import(tmp_path, "meta-llama__Llama-3.1-8B-Instruct.json", ignore, hf_quant)
    assert "\n" not in e.value.message and ("hf_quant_config.json" if hf_quant else "config.json") in e.value.message
    # a lone name is a list of one; null is none
    assert _ignore_import(tmp_path, "meta-llama__Llama-3.1-8B-Instruct.json", "lm_head", hf_quant).scope == "linear"


def test_gemma_4_routed_experts_sit_beside_its_mlp(tmp_path):
    """Gemma 4's MoE layers hold the routed experts at layers.N.experts, beside the MLP every token takes
    (layers.N.mlp, its shared expert here): nvidia's Gemma-4-26B-A4B-NVFP4 excludes `...layers.N.mlp*`, router*
    and self_attn* in every layer and so quantizes the routed experts only, while a Qwen MoE's `mlp*` would hold
    its experts too."""
    n = json.loads((CONFIGS / "google__gemma-4-26B-A4B.json").read_text())["text_config"]["num_hidden_layers"]
    ignore = [f"model.language_model.layers.{i}.{m}*" for i in range(n) for m in ("mlp", "router", "self_attn")]
    r = _ignore_import(tmp_path, "google__gemma-4-26B-A4B.json", ignore)
    assert (r.quant, r.scope) == ("nvfp4", "experts")
    # its attention alone kept: experts and the shared MLP quantized, scope mlp
    ignore = [f"model.language_model.layers.{i}.self_attn*" for i in range(n)]
    assert _ignore_import(tmp_path, "google__gemma-4-26B-A4B.json", ignore).scope == "mlp"


def test_the_attention_output_projection_is_a_part_a_recipe_may_name(catalog, tmp_path):
    """nvidia's DeepSeek-V3.2 NVFP4 excludes q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj and the indexer in every
    layer, not o_proj, the largest of them: 128 heads x 128 x 7,168 = 117.4 M weights a layer of ~201 M. Priced as
    attention kept in 16 bits, a token read 24.5 GB of attention; with o_proj in NVFP4, by hand 61 x (83.6 M x 2 B +
    117.4 M x 0.5625 B) = 14.2 GB (the indexer's 14 M included in the 83.6). A recipe naming attention_out prices it;
    one that names it as attention is the same recipe."""
    m = catalog.model("deepseek-v3.2")
    o = 128 * 128 * 7168
    kept = weight_bytes(m, quant_format("experts=nvfp4"), "all").read_bytes_per_token["attention"]
    mixed = weight_bytes(m, quant_format("experts=nvfp4,attention_out=nvfp4"), "all").read_bytes_per_token["attention"]
    assert kept - mixed == pytest.approx(61 * (o * 2 - (o * 9 / 16 + 4)), rel=1e-9)
    assert mixed == pytest.approx(14.2e9, rel=0.01) and kept == pytest.approx(24.5e9, rel=0.01)
    assert quant_format("attention=fp8,attention_out=fp8").id == "attention=fp8"
    # the exclude list as nvidia's export writes it (a stand-in on DeepSeek-V2-Lite's layers): attention kept but
    # its output projection, the dense first layer's MLP and every MoE layer's shared experts quantized
    raw = json.loads((CONFIGS / "deepseek-ai__DeepSeek-V2-Lite-Chat.json").read_text())
    names = ("q_proj", "kv_a_proj_with_mqa", "kv_b_proj")
    ignore = [f"model.layers.{i}.self_attn.{n}" for i in range(raw["num_hidden_layers"]) for n in names] + ["lm_head"]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"quantization": {"quant_algo": "NVFP4", "exclude_modules": ignore}}))
    im = import_model(tmp_path, read_headers=False)
    assert im.release.quant == "experts=nvfp4,mlp=nvfp4,shared_experts=nvfp4,attention_out=nvfp4"


def test_an_ignore_list_takes_names_suffixes_globs_regexes_and_the_modules_above():
    """module_names.ignores, the one reading of an ignore list: exact and dotted-suffix names, globs, regexes after
    're:' from the name's start (compressed-tensors), a module a pattern names as a whole (transformers'
    modules_to_not_convert), unless `ancestors` is off (a config group's targets); entries that are not strings,
    and regexes that do not compile, take nothing."""
    from llmsize.importer.module_names import ignores

    q = "model.layers.3.self_attn.q_proj"
    assert ignores([q], q) and ignores(["self_attn.q_proj"], q) and not ignores(["attn.q_proj"], q)
    assert ignores(["model.layers.*.self_attn"], q) and not ignores(["model.layers.*.self_attn"], q, ancestors=False)
    assert ignores(["model.layers.3.self_attn*"], q) and not ignores(["model.layers.30.self_attn*"], q)
    assert ignores(["re:.*self_attn\\..*"], q) and not ignores(["re:self_attn"], q)  # from the start, not anywhere
    assert ignores(["re:model\\.layers\\.[0-9]\\.self_attn.*"], q)
    assert not ignores(["re:model\\.layers\\.[0-9]\\.self_attn.*"], "model.layers.13.self_attn.q_proj")
    assert not ignores([None, 7, {"a": 1}, "re:(", "re:[z-a]"], q)
    assert not ignores([], q) and not ignores(None, q)
    # nvidia's DeepSeek-V3.2 NVFP4 lists 307 patterns: compiled once, read for every probe of every layer
    many = [f"model.layers.{i}.self_attn.{m}" for i in range(61) for m in ("q_a_proj", "q_b_proj", "kv_b_proj")]
    assert ignores(many, "model.layers.60.self_attn.kv_b_proj")
    assert not ignores(many, "model.layers.60.self_attn.o_proj")
