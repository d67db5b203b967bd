"""Every shipped entry validates, is sourced, and counts to its official parameter figure."""

import json
from pathlib import Path

import pytest

from llmsize.catalog.loader import Catalog, normalize
from llmsize.errors import CatalogError, UnknownNameError
from llmsize.estimate.params import params_comparable_to_official

ROOT = Path(__file__).resolve().parent.parent
MODEL_FILES = sorted((ROOT / "models").glob("*.yaml"))
GPU_FILES = sorted((ROOT / "hardware").glob("*.yaml"))


def test_catalog_sizes(catalog):
    """The README's opening counts the shelves and its checks section the models counted exactly."""
    cards, models = catalog.hardware.all(), catalog.models.all()
    assert len(cards) >= 35 and len(models) >= 20
    readme = (ROOT / "README.md").read_text().replace("\n", " ")
    assert f"catalogs of {len(cards)} accelerators and {len(models)} models" in readme
    exact = sum(params_comparable_to_official(m) == m.params_official for m in models)
    assert f"within 1% of its official figure ({exact} of {len(models)} exact)" in readme


def test_required_entries_present(catalog):
    for gid in ["rtx3060", "rtx5060ti", "rtx5090", "t4", "h100-sxm", "h200-sxm", "b300", "mi300x", "m4-max",
                "gaudi3", "rx7900xtx", "rtxpro6000"]:
        assert catalog.gpu(gid).id == gid
    for mid in ["gemma-4-12b", "gemma-3-12b", "gemma-3-27b", "gemma-4-26b-a4b", "llama-2-7b", "llama-2-70b",
                "llama-3-8b", "llama-3.1-8b", "llama-3.1-70b", "mistral-7b", "mixtral-8x7b", "qwen2.5-7b",
                "qwen3-8b", "qwen3-30b-a3b", "deepseek-v2-lite", "deepseek-v3", "gpt-oss-20b", "gpt-oss-120b",
                "phi-3-mini", "falcon-7b", "nemotron-3-nano-30b-a3b"]:
        assert catalog.model(mid).id == mid


def test_every_mixer_and_mlp_kind_is_covered(catalog):
    mixers = {g.mixer.kind for m in catalog.models.all() for g in m.layer_groups if g.mixer}
    mlps = {g.mlp.kind for m in catalog.models.all() for g in m.layer_groups if g.mlp}
    assert mixers == {"full", "sliding", "mla", "compressed", "ssm", "linear", "conv"}
    assert mlps == {"dense", "moe"}
    shared = [m.id for m in catalog.models.all() for g in m.layer_groups
              if g.mlp is not None and g.mlp.kind == "moe" and g.mlp.num_shared_experts]
    assert "deepseek-v3" in shared


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_parameter_count_within_1_percent_of_official(catalog, path):
    # each entry cites params_official_source and says what the figure includes (vision, MTP)
    m = catalog.model(path.stem)
    assert m.params_official_source and m.params_official_includes
    assert params_comparable_to_official(m) == pytest.approx(m.params_official, rel=0.01)


@pytest.mark.parametrize("path", GPU_FILES, ids=lambda p: p.stem)
def test_gpu_entry_is_sourced_and_consistent(catalog, path):
    g = catalog.gpu(path.stem)
    assert g.sources
    if g.bus_width_bits and g.data_rate_gbps:
        # bandwidth = bus / 8 * per-pin rate; HBM parts whose NVML bus width differs from the sheet are
        # within 4% (nvml.md section 4), and say so in their notes
        assert g.bus_width_bits / 8 * g.data_rate_gbps == pytest.approx(g.bandwidth_gb_s, rel=0.04)


@pytest.mark.parametrize("gpu_id, cores, mhz", [
    ("m1-pro-14", 14, 1296), ("m1-max-24", 24, 1296), ("m1-ultra-48", 48, 1296), ("m2-8", 8, 1398),
    ("m2-pro-16", 16, 1398), ("m2-max-30", 30, 1398), ("m2-ultra-60", 60, 1398)])
def test_binned_apple_gpus_rate_is_cores_by_the_per_core_rate(catalog, gpu_id, cores, mhz):
    """The M1/M2 parts with GPU cores disabled: FP32 = cores x 256 FP32 operations a clock a core x the chip's clock
    (philipturner/metal-benchmarks: 1296 MHz for M1 Pro/Max/Ultra, 1398 for M2), FP16 at the same rate; the core
    count is the one the entry's name says. E.g. the M1 Max 24-core: 24 x 256 x 1.296e9 = 7.96e12."""
    g = catalog.gpu(gpu_id)
    assert f"{cores}-core GPU" in g.name
    assert g.dense_tflops.fp32 == pytest.approx(cores * 256 * mhz * 1e6 / 1e12, abs=0.005)
    assert g.dense_tflops.fp16 == g.dense_tflops.fp32


def test_strix_halo_fp16_is_rdna3_wmma_rate_at_its_cus_and_clock(catalog):
    """RDNA3's WMMA rate, 512 FP16 FLOPS a clock a CU (the RX 7900 XTX's 123 TFLOPS at 96 CUs and ~2.5 GHz), at the
    Radeon 8060S's 40 CUs and 2.9 GHz: 512 x 40 x 2.9e9 = 59.4e12 (lhl's "theoretical 59 FP16 TFLOPS")."""
    assert catalog.gpu("strix-halo").dense_tflops.fp16 == pytest.approx(512 * 40 * 2.9e9 / 1e12, abs=0.05)


def test_gemma_4_12b_matches_reference_shapes(catalog):
    # shared/reference/gemma-architecture.md: 40 sliding (8 kv x 256, window 1024) + 8 full (1 kv x 512, K=V)
    m = catalog.model("gemma-4-12b")
    sliding, full = m.layer_groups
    assert (sliding.count, sliding.mixer.kind, sliding.mixer.num_key_value_heads, sliding.mixer.head_dim,
            sliding.mixer.sliding_window) == (40, "sliding", 8, 256, 1024)
    assert (full.count, full.mixer.kind, full.mixer.num_key_value_heads, full.mixer.head_dim,
            full.mixer.k_eq_v) == (8, "full", 1, 512, True)
    assert m.tie_word_embeddings and m.vocab_size == 262144 and m.hidden_size == 3840


@pytest.mark.parametrize("typed, expected", [
    ("h200", "h200-sxm"), ("H200", "h200-sxm"), ("rtx-5060-ti", "rtx5060ti"), ("RTX 5060 Ti", "rtx5060ti"),
    ("h100", "h100-sxm"), ("a100", "a100-80gb-sxm"),
])
def test_gpu_aliases(catalog, typed, expected):
    assert catalog.gpu(typed).id == expected


def test_unknown_name_suggests(catalog):
    with pytest.raises(UnknownNameError) as e:
        catalog.gpu("rtx5600ti")
    assert "Did you mean" in e.value.one_line() and "`rtx5060ti`" in e.value.one_line()
    assert "llmsize gpus" in e.value.one_line()


def test_normalize():
    assert normalize("RTX 5060 Ti") == normalize("rtx-5060-ti") == "rtx5060ti"


def _write(dirpath: Path, kind: str, stem: str, text: str) -> Path:
    (dirpath / kind).mkdir(parents=True, exist_ok=True)
    p = dirpath / kind / f"{stem}.yaml"
    p.write_text(text)
    return p


GOOD_GPU = (ROOT / "hardware" / "rtx5060ti.yaml").read_text()


def _renamed(text: str, new_id: str) -> str:
    """A shipped card's file as a user copies it: another id, and aliases of its own (the README's sed)."""
    import re

    return re.sub(r"(?m)^aliases: .*$", f"aliases: [{new_id}-x]", text.replace("id: rtx5060ti", f"id: {new_id}"))


def test_user_catalog_adds_and_overrides(tmp_path, monkeypatch):
    _write(tmp_path, "hardware", "mycard", _renamed(GOOD_GPU, "mycard").replace("bandwidth_gb_s: 448",
                                                                             "bandwidth_gb_s: 500"))
    _write(tmp_path, "hardware", "rtx5060ti", GOOD_GPU.replace("bandwidth_gb_s: 448", "bandwidth_gb_s: 449"))
    cat = Catalog([tmp_path])
    assert cat.gpu("mycard").bandwidth_gb_s == 500
    assert cat.gpu("rtx5060ti").bandwidth_gb_s == 449  # the user's file wins
    monkeypatch.setenv("LLMSIZE_CATALOG", str(tmp_path))
    assert Catalog().gpu("mycard").bandwidth_gb_s == 500


@pytest.mark.parametrize("name", ["mycard", "rtx5060ti", "5060 ti", "h100"])
def test_a_copy_keeping_the_shipped_aliases_is_refused_however_a_card_is_named(tmp_path, name):
    """Only a lookup by alias parsed every entry and met the clash: `--gpu mycard` (the copy's own id) and
    `--gpu rtx5060ti` ran. With a user's folder on the path every lookup checks the names first."""
    _write(tmp_path, "hardware", "mycard", GOOD_GPU.replace("id: rtx5060ti", "id: mycard"))
    with pytest.raises(CatalogError, match="also names"):
        Catalog([tmp_path]).gpu(name)


@pytest.mark.parametrize("mutation, key, expected_text", [
    (("bandwidth_gb_s: 448", "bandwidth_gb_s: fast"), "bandwidth_gb_s", "valid number"),
    (("bus_width_bits: 128", "bus_widht_bits: 128"), "bus_widht_bits", "Extra inputs are not permitted"),
    (("vendor: NVIDIA", "vendor: Nvidai"), "vendor", "NVIDIA"),
    (("dense_tflops: {", "dense_tflops: {fp64: 1, "), "dense_tflops.fp64", "Extra inputs"),
])
def test_bad_gpu_yaml_names_file_and_key(tmp_path, mutation, key, expected_text):
    path = _write(tmp_path, "hardware", "bad", GOOD_GPU.replace("id: rtx5060ti", "id: bad").replace(*mutation))
    with pytest.raises(CatalogError) as e:
        Catalog([tmp_path]).gpu("bad")
    msg = e.value.one_line()
    assert str(path) in msg and f"`{key}`" in msg and expected_text in msg
    assert "\n" not in msg


def test_bad_model_key(tmp_path):
    text = (ROOT / "models" / "llama-3-8b.yaml").read_text().replace("id: llama-3-8b", "id: bad")
    path = _write(tmp_path, "models", "bad", text.replace("num_key_value_heads: 8", "num_kv_head: 8"))
    with pytest.raises(CatalogError) as e:
        Catalog([tmp_path]).model("bad")
    assert str(path) in e.value.message and "num_kv_head" in e.value.message


def test_invalid_yaml_and_wrong_stem(tmp_path):
    _write(tmp_path, "hardware", "broken", "id: broken\nname: [unclosed\n")
    with pytest.raises(CatalogError, match="broken.yaml"):
        Catalog([tmp_path]).gpu("broken")
    _write(tmp_path / "b", "hardware", "other", GOOD_GPU)  # id rtx5060ti in other.yaml
    with pytest.raises(CatalogError, match="but the file is named `other.yaml`"):
        Catalog([tmp_path / "b"]).gpu("other")
    # a broken file on the path is reported whichever card is asked for (every name is checked first)
    with pytest.raises(CatalogError, match="broken.yaml"):
        Catalog([tmp_path]).gpu("h100")


def test_a_catalog_folder_holding_no_shelf_is_refused(tmp_path):
    """`--catalog mycat/hardware` (the shelf, not the folder above it) was taken and silently added nothing."""
    (tmp_path / "hardware").mkdir()
    with pytest.raises(CatalogError, match="holds none of hardware/, models/"):
        Catalog([tmp_path / "hardware"])


def test_missing_catalog_dir(tmp_path):
    with pytest.raises(CatalogError, match="does not exist"):
        Catalog([tmp_path / "nope"])
    (tmp_path / "afile").write_text("x")
    with pytest.raises(CatalogError, match="is a file, not a folder"):
        Catalog([tmp_path / "afile"])


def test_a_models_hugging_face_repo_names_it(catalog, run_cli):
    """The repo id the launch lines print (meta-llama/Llama-3.1-8B-Instruct) is accepted back as the model, any
    case; an entry sharing its repo with another resolves to one of them."""
    for m in catalog.models.all():
        if m.hf_repo:
            assert catalog.model(m.hf_repo.upper()).hf_repo == m.hf_repo
    code, out, err = run_cli("fleet", "meta-llama/Llama-3.1-8B-Instruct", "--users", "10", "--gpus", "h100-sxm",
                             "--json")
    assert code == 0 and json.loads(out)["model"] == "llama-3.1-8b"


@pytest.mark.parametrize("typed, card", [
    ("NVIDIA H200", "h200-sxm"), ("NVIDIA B200", "b200"),  # as nvidia-smi names them
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),  # nvidia-smi's SXM name, no form factor in it
    ("NVIDIA H100 SXM5 80GB", "h100-sxm"),  # the catalog's own name, which plan prints in its heading
    ("AMD Instinct MI300X", "mi300x"), ("h200", "h200-sxm"),
    # several cards share the model number: the one whose names carry every word typed
    ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"), ("NVIDIA A100-SXM4-40GB", "a100-40gb-sxm"),
    ("AMD Radeon RX 7900 XTX", "rx7900xtx"), ("AMD Radeon RX 7900 XT", "rx7900xt"),
    # a memory size typed picks the card of that size among those sharing the name
    ("RTX 5060 Ti 8GB", "rtx5060ti8"), ("rtx 5060 ti 16gb", "rtx5060ti"), ("A100 40GB", "a100-40gb-sxm")])
def test_a_card_is_found_by_the_name_its_vendor_or_driver_gives_it(catalog, typed, card):
    """A hostile-input pass (2026-12-05) found `--gpu "NVIDIA H200"` refused with `gb300`, `tesla-p40`, `a10`
    suggested: the ids and aliases did not carry the vendor's spelling. A name that is not an id or alias is read as
    the driver's is (catalog.match: its model number and qualifiers), and taken where it names one card."""
    assert catalog.gpu(typed).id == card


def test_a_vendor_name_of_several_cards_names_them(catalog):
    from llmsize.errors import UnknownNameError

    with pytest.raises(UnknownNameError) as e:
        catalog.gpu("NVIDIA GeForce RTX 5060 Ti")  # sold with 16 and 8 GB
    assert "`rtx5060ti` (NVIDIA GeForce RTX 5060 Ti 16GB), `rtx5060ti8`" in e.value.message


def test_by_id_parses_a_file_when_its_id_is_read():
    """plan's expected figure reads one runtime's constants: by_id parses that file alone (all() parsed every
    runtime's, ~12 ms of a plan's start on a 2-core machine, 2026-12-07), and gives the entries all() gives."""
    shelf = Catalog().runtimes
    by_id = shelf.by_id()
    assert sorted(by_id) == sorted(shelf.files) and len(by_id) == len(shelf.files) >= 5
    assert shelf._cache == {}  # naming the ids parsed nothing
    assert by_id["vllm"].id == "vllm" and list(shelf._cache) == ["vllm"]
    assert by_id.get("no-such-runtime") is None and "no-such-runtime" not in by_id
    with pytest.raises(KeyError):
        by_id["no-such-runtime"]
    assert dict(by_id) == {r.id: r for r in shelf.all()}


def test_by_id_refuses_a_users_clashing_names_as_a_lookup_does(tmp_path):
    _write(tmp_path, "hardware", "mycard", GOOD_GPU.replace("id: rtx5060ti", "id: mycard"))
    with pytest.raises(CatalogError, match="also names"):
        Catalog([tmp_path]).hardware.by_id()
