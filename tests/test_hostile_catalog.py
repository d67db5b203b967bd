"""Catalog entries a user writes (or copies and edits) are checked where they enter: no infinite, NaN or
negative figure reaches an estimate, booleans are not counts, and two files never answer to one name."""

import shutil
from pathlib import Path

import pytest

from llmsize.catalog.loader import Catalog
from llmsize.errors import CatalogError

ROOT = Path(__file__).resolve().parent.parent


def user_catalog(tmp_path: Path, kind: str, name: str, text: str) -> Path:
    (tmp_path / kind).mkdir(parents=True, exist_ok=True)
    (tmp_path / kind / f"{name}.yaml").write_text(text)
    return tmp_path


def card(tmp_path: Path, name: str, edit: dict[str, str], source: str = "rtx5090") -> Path:
    text = (ROOT / "hardware" / f"{source}.yaml").read_text().replace(f"id: {source}\n", f"id: {name}\n")
    for old, new in edit.items():
        assert old in text, old
        text = text.replace(old, new)
    return user_catalog(tmp_path, "hardware", name, text)


@pytest.mark.parametrize("edit, needle", [
    ({"bandwidth_gb_s: 1792": "bandwidth_gb_s: .inf"}, "bandwidth_gb_s"),  # divided by zero downstream
    ({"bandwidth_gb_s: 1792": "bandwidth_gb_s: .nan"}, "bandwidth_gb_s"),
    ({"bf16: 209.5": "bf16: -5.0"}, "dense_tflops.bf16"),  # printed "dense peak -5.0 TFLOPS"
    ({"bf16: 209.5": "bf16: .nan"}, "dense_tflops.bf16"),  # printed "TTFT nan s"
    ({"fp4: 1676.0": "fp4: 0"}, "dense_tflops.fp4"),
    ({"memory_size: 32": "memory_size: 1e400"}, "memory_size"),
    ({"bus_width_bits: 512": "bus_width_bits: true"}, "bus_width_bits"),  # a boolean is no count
    ({"tdp_w: 575": "tdp_w: '575'"}, "tdp_w"),
    # subnormal rates passed `> 0` and overflowed to inf downstream (a traceback in fleet and roofline, Infinity
    # in JSON): a card's rates have floors, 1 GB/s and 1 GFLOPS
    ({"bandwidth_gb_s: 1792": "bandwidth_gb_s: 1.0e-320"}, "bandwidth_gb_s"),
    ({"bf16: 209.5": "bf16: 1.0e-320"}, "dense_tflops.bf16"),
])
def test_bad_figures_are_refused_naming_the_key(tmp_path, run_cli, edit, needle):
    cat = card(tmp_path, "mycard", edit)
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "mycard", "--catalog", str(cat))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "mycard.yaml" in err and needle in err


def test_a_link_below_1_gb_s_is_refused(tmp_path, run_cli):
    """A split divides by the link's rate: `NVLink 4: 0 GB/s` was a ZeroDivisionError at --tp 2."""
    cat = card(tmp_path, "mylink", {"aliases: [h100, h100-80gb, h100-sxm5]": "aliases: []",
                                    "NVLink 4: 900 GB/s": "NVLink 4: 0 GB/s"}, source="h100-sxm")
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "mylink", "--tp", "2", "--catalog", str(cat))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "mylink.yaml" in err and "interconnect" in err and "0 GB/s" in err
    cat = card(tmp_path / "x0", "myx0", {"PCIe 5.0 x16; no NVLink": "PCIe 4.0 x0"})  # no lanes: a ZeroDivisionError
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "myx0", "--tp", "4", "--catalog", str(cat))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "x0 has no lanes" in err, err


@pytest.mark.parametrize("edit, needle", [
    ({"- count: 40\n": "- count: true\n"}, "layer_groups.0.count"),
    ({"hidden_size: 3840": "hidden_size: 1e400"}, "hidden_size"),
    ({"vocab_size: 262144": "vocab_size: 262144000000000000000000000"}, "vocab_size"),
    ({"vocab_size: 262144": "vocab_size: -262144"}, "vocab_size"),
])
def test_bad_model_figures_are_refused(tmp_path, run_cli, edit, needle):
    text = (ROOT / "models" / "gemma-4-12b.yaml").read_text().replace("id: gemma-4-12b\n", "id: mymodel\n")
    for old, new in edit.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    cat = user_catalog(tmp_path, "models", "mymodel", text)
    code, out, err = run_cli("plan", "mymodel", "--gpu", "h200", "--catalog", str(cat))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert needle in err


def test_duplicate_yaml_keys_are_an_error(tmp_path, run_cli):
    cat = card(tmp_path, "mycard", {"bandwidth_gb_s: 1792": "bandwidth_gb_s: 1792\nbandwidth_gb_s: 179200"})
    code, out, err = run_cli("gpus", "--catalog", str(cat))
    assert code == 2 and "key `bandwidth_gb_s` appears twice" in err


def test_a_copied_card_keeping_the_aliases_is_an_error_naming_both_files(tmp_path, run_cli):
    """Copying rtx5090.yaml to my5090.yaml (new id, same aliases) silently took `--gpu 5090` over."""
    cat = card(tmp_path, "my5090", {"bandwidth_gb_s: 1792": "bandwidth_gb_s: 1500"})
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "5090", "--catalog", str(cat))
    assert code == 2, out
    assert "my5090.yaml" in err and "rtx5090.yaml" in err and "`5090`" in err
    code, out, err = run_cli("gpus", "--catalog", str(cat))
    assert code == 2 and "also names" in err


def test_the_same_id_in_two_user_folders_is_an_error(tmp_path, run_cli):
    a = card(tmp_path / "a", "mycard", {"aliases: ['5090', geforce-rtx-5090]": "aliases: []"})
    b = card(tmp_path / "b", "mycard", {"aliases: ['5090', geforce-rtx-5090]": "aliases: []"})
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "mycard", "--catalog", str(a), "--catalog", str(b))
    assert code == 2 and "defined twice" in err and str(a) in err and str(b) in err


def test_ids_equal_once_normalized_are_an_error(tmp_path, run_cli):
    cat = card(tmp_path, "rtx-5090", {"aliases: ['5090', geforce-rtx-5090]": "aliases: []"})
    code, out, err = run_cli("gpus", "--catalog", str(cat))
    assert code == 2 and "same name once case, dashes and dots are ignored" in err


def test_overriding_a_shipped_entry_by_its_id_still_works(tmp_path, run_cli):
    cat = card(tmp_path, "rtx5090", {"bandwidth_gb_s: 1792": "bandwidth_gb_s: 1000"})
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "5090", "--catalog", str(cat), "--json")
    assert code == 0, err
    import json
    assert json.loads(out)["gpu"]["bandwidth_gb_s"] == 1000


def test_the_same_folder_twice_is_one_folder(tmp_path):
    cat = card(tmp_path, "mycard", {"aliases: ['5090', geforce-rtx-5090]": "aliases: []"})
    c = Catalog([cat, cat])
    assert c.gpu("mycard").id == "mycard" and len(c.hardware.all()) == len(Catalog().hardware.all()) + 1


def test_shipped_catalog_has_no_clashing_names(catalog):
    catalog.hardware.all()
    catalog.models.all()  # _check_names raises on a clash


def test_an_alias_without_letters_is_refused(tmp_path):
    cat = card(tmp_path, "mycard", {"aliases: ['5090', geforce-rtx-5090]": "aliases: ['--']"})
    with pytest.raises(CatalogError, match="has no letter or digit"):
        Catalog([cat]).hardware.all()


def test_shipped_yaml_copied_whole_loads(tmp_path):
    shutil.copytree(ROOT / "models", tmp_path / "models")
    shutil.copytree(ROOT / "hardware", tmp_path / "hardware")
    assert len(Catalog([tmp_path]).models.all()) == len(list((ROOT / "models").glob("*.yaml")))


def test_an_unchanged_file_is_parsed_once_a_changed_or_failing_one_each_time(tmp_path, monkeypatch):
    """loader.load_entry keeps what an entry's stem and text made (entries are frozen): the same text, here or in a
    copy elsewhere, is not parsed again; an edited file is; a file that fails fails on every load, naming itself."""
    from llmsize.catalog import loader

    parsed = []
    real = loader._parse_entry
    # the copy's own parses (with a user's folder on the path a lookup parses the shipped entries too, once)
    monkeypatch.setattr(loader, "_parse_entry", lambda *a: ("mycard" in a[0] and parsed.append(a[0])) or real(*a))
    monkeypatch.setattr(loader, "_PARSED", {})
    text = (ROOT / "hardware" / "rtx5090.yaml").read_text().replace("id: rtx5090\n", "id: mycard\n").replace(
        "aliases: ['5090', geforce-rtx-5090]", "aliases: []")  # a copy with names of its own, as card() makes them
    a = user_catalog(tmp_path / "a", "hardware", "mycard", text)
    b = user_catalog(tmp_path / "b", "hardware", "mycard", text)
    first = Catalog([a]).hardware.get("mycard")
    assert Catalog([b]).hardware.get("mycard") is first and len(parsed) == 1
    user_catalog(a, "hardware", "mycard", text.replace("tdp_w: 575", "tdp_w: 600"))
    assert Catalog([a]).hardware.get("mycard").tdp_w == 600 and len(parsed) == 2
    user_catalog(b, "hardware", "mycard", text.replace("tdp_w: 575", "tdp_w: -1"))
    for _ in range(2):
        with pytest.raises(CatalogError, match=r"b/hardware/mycard\.yaml.*tdp_w"):
            Catalog([b]).hardware.get("mycard")
    assert len(parsed) == 4
