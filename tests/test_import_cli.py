"""`llmsize plan PATH` and `llmsize import` as a user runs them."""

import json
from pathlib import Path

import pytest
import yaml
from stfiles import tiny_llama_folder, write_safetensors
from test_import_config import CONFIGS


def test_plan_a_folder_uses_the_exact_header_bytes(run_cli, tmp_path):
    folder = tiny_llama_folder(tmp_path / "tiny", "ct-nvfp4", shards=2)
    code, out, err = run_cli("plan", str(folder), "--gpu", "h200", "--json")
    assert code == 0, err
    d = json.loads(out)
    w = d["weights"]
    assert w["source"] == "safetensors headers" and w["format"] == "nvfp4"
    assert w["exact"]["formats"] == ["bf16", "nvfp4 (compressed-tensors)"]
    assert w["bytes_total"] == sum(w["exact"]["bytes_by_dtype"].values())
    # bytes read per token: all but the (untied) embedding table
    assert w["bytes_read_per_token"] == w["bytes_total"] - w["bytes_by_component"]["embedding"]
    assert d["decode"]["bytes_read_per_token"] >= w["bytes_read_per_token"]


def test_plan_a_folder_report_shows_estimate_and_difference(run_cli, tmp_path):
    folder = tiny_llama_folder(tmp_path / "gptq", "gptq")
    code, out, err = run_cli("plan", str(folder), "--gpu", "h200")
    assert code == 0, err
    assert "exact from the safetensors headers" in out and "estimate" in out and "diff" in out
    assert "by dtype: I32" in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_other_quant_than_the_checkpoint_falls_back_to_the_estimate(run_cli, tmp_path):
    folder = tiny_llama_folder(tmp_path / "t", "bf16")
    code, out, err = run_cli("plan", str(folder), "--gpu", "h200", "--quant", "nvfp4", "--json")
    d = json.loads(out)
    assert d["weights"]["source"] == "estimate"
    assert any("differs from the checkpoint's bf16" in n for n in d["notes"])


@pytest.mark.parametrize("stem", ["deepseek-ai__DeepSeek-V3", "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
                                  "google__gemma-4-26B-A4B"])
def test_plan_a_config_json(run_cli, stem):
    code, out, err = run_cli("plan", str(CONFIGS / f"{stem}.json"), "--gpu", "h200", "--json")
    assert code == 0, err
    assert json.loads(out)["weights"]["source"] == "estimate"


def test_import_writes_an_entry_that_plans_like_the_folder(run_cli, tmp_path):
    folder = tiny_llama_folder(tmp_path / "tiny", "bf16")
    (tmp_path / "cat" / "models").mkdir(parents=True)
    target = tmp_path / "cat" / "models" / "my-tiny.yaml"
    code, out, err = run_cli("import", str(folder), "-o", str(target))
    assert code == 0, err
    assert f"Wrote {target}" in err
    entry = yaml.safe_load(target.read_text())
    assert entry["id"] == "my-tiny" and entry["release"]["quant"] == "bf16"
    assert str(folder / "config.json") in entry["sources"]
    _, a, _ = run_cli("plan", "my-tiny", "--gpu", "h200", "--catalog", str(tmp_path / "cat"), "--json")
    _, b, _ = run_cli("plan", str(folder), "--gpu", "h200", "--json")
    a, b = json.loads(a), json.loads(b)
    # bf16 checkpoint: the estimate and the headers agree to the byte
    assert a["weights"]["bytes_total"] == b["weights"]["bytes_total"]
    assert a["decode"]["ceiling_tok_s"] == pytest.approx(b["decode"]["ceiling_tok_s"])


def test_import_of_a_renamed_config_names_the_model_by_the_file_and_hints_only_a_working_catalog(run_cli, tmp_path):
    """A config.json saved under another name is named by that name, not by the folder it sits in; the hint after
    writing names a --catalog that finds the entry only when the entry sits in a catalog's models/ folder."""
    cfg = str(CONFIGS / "meta-llama__Meta-Llama-3.1-405B.json")
    code, out, err = run_cli("import", cfg)
    assert code == 0, err
    assert yaml.safe_load(out)["name"] == "meta-llama__Meta-Llama-3.1-405B"  # not "hf-configs"
    loose = tmp_path / "l405.yaml"
    code, _, err = run_cli("import", cfg, "-o", str(loose))
    assert code == 0 and "--catalog" in err and f"--catalog {tmp_path.parent}" not in err, err
    assert "mycat/models/l405.yaml" in err
    shelf = tmp_path / "cat" / "models"
    shelf.mkdir(parents=True)
    code, _, err = run_cli("import", cfg, "-o", str(shelf / "l405.yaml"))
    hint = err.split("`")[1]
    assert code == 0 and hint == f"llmsize plan l405 --gpu CARD --catalog {tmp_path / 'cat'}", err
    code, out, err = run_cli("plan", "l405", "--gpu", "h200", "--tp", "8", "--catalog", str(tmp_path / "cat"), "--json")
    assert code == 0, err


def test_import_to_stdout(run_cli):
    code, out, err = run_cli("import", str(CONFIGS / "openai__gpt-oss-20b.json"))
    assert code == 0, err
    entry = yaml.safe_load(out)
    assert entry["release"] == {"quant": "mxfp4", "scope": "experts", "note": "from mxfp4"}
    assert "# note: attention kept in 16 bits" in out


@pytest.mark.parametrize("args, code_want, needle", [
    (["plan", "/no/such/model", "--gpu", "h200"], 2, "/no/such/model: no such file or folder"),
    (["import", "/no/such/model"], 2, "no such file or folder"),
])
def test_missing_paths(run_cli, args, code_want, needle):
    code, out, err = run_cli(*args)
    assert code == code_want and needle in err and len(err.strip().splitlines()) == 1


def test_import_output_must_be_yaml_in_an_existing_folder(run_cli, tmp_path):
    folder = tiny_llama_folder(tmp_path / "t", "bf16")
    code, _, err = run_cli("import", str(folder), "-o", str(tmp_path / "x.txt"))
    assert code == 2 and "must end in .yaml" in err
    code, _, err = run_cli("import", str(folder), "-o", str(tmp_path / "nope" / "x.yaml"))
    assert code == 2 and "does not exist" in err
    code, _, err = run_cli("import", str(folder), "-o", "")  # read as `.` before: "-o `.` must end in .yaml"
    assert code == 2 and "-o names no file" in err
    code, _, err = run_cli("import", str(folder), "-o", str(tmp_path / ".yaml"))  # said it must end in .yaml
    assert code == 2 and "names no id before .yaml" in err and not (tmp_path / ".yaml").exists()


def test_damaged_shard_is_one_line_naming_it(run_cli, tmp_path):
    folder = tiny_llama_folder(tmp_path / "t", "bf16")
    st = folder / "model.safetensors"
    st.write_bytes(st.read_bytes()[:100])
    code, out, err = run_cli("plan", str(folder), "--gpu", "h200")
    assert code == 2 and str(st) in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_vision_tower_tensors_count_as_extra(run_cli, tmp_path):
    folder = tiny_llama_folder(tmp_path / "mm", "bf16")
    write_safetensors(folder / "vision.safetensors", {"model.vision_tower.patch_embed.weight": ("BF16", (64, 48))})
    code, out, err = run_cli("plan", str(folder), "--gpu", "h200", "--json")
    w = json.loads(out)["weights"]
    assert w["bytes_by_component"]["extra"] == 64 * 48 * 2
    assert w["bytes_read_per_token_by_component"]["extra"] == 0


def test_hub_without_huggingface_hub_is_one_line_with_the_hint():
    from conftest import cli_without
    p = cli_without(["huggingface_hub", "huggingface_hub.utils"], ["plan", "--hub", "acme/tiny", "--gpu", "h200"])
    assert p.returncode == 2
    assert p.stderr.strip() == ("Error: --hub needs huggingface_hub, which is not installed. "
                                "Install the hub extra: pip install '.[hub]' in the llmsize checkout (or pip "
                                "install huggingface_hub).")


@pytest.mark.parametrize("given", ["a/b", "../../etc", "BAD ID"])
def test_a_bad_id_with_an_output_file_is_one_line_and_writes_nothing(run_cli, tmp_path, given):
    """`--id a/b -o x.yaml` made a file name of the id before checking it: a ValueError traceback."""
    from conftest import assert_one_line_error

    folder = tiny_llama_folder(tmp_path / "m")
    out = tmp_path / "cat" / "x.yaml"
    code, stdout, err = run_cli("import", str(folder), "-o", str(out), "--id", given)
    assert_one_line_error(code, err)
    assert f"--id `{given}` is not a catalog id" in err and not stdout and not out.parent.exists()


def test_planning_the_yaml_import_wrote_says_how_to_use_it(run_cli, tmp_path):
    """`llmsize import -o x.yaml` writes a catalog entry; `plan x.yaml` reads a path as a config.json and said only
    "not valid JSON": it now says where the entry goes."""
    out = tmp_path / "phi-4.yaml"
    cfg = Path(__file__).parent / "data" / "hf-configs" / "microsoft__phi-4.json"
    assert run_cli("import", str(cfg), "-o", str(out))[0] == 0
    code, stdout, err = run_cli("plan", str(out), "--gpu", "h100-sxm")
    assert code == 2 and "catalog entry: put it under DIR/models/" in err and "Traceback" not in err and not stdout


def test_an_entry_named_as_a_shipped_model_is_warned_of(run_cli, tmp_path):
    """Under --catalog a user's file replaces the shipped entry of its id: writing one says so; another id does not."""
    cfg = str(CONFIGS / "Qwen__Qwen3-8B.json")
    (tmp_path / "models").mkdir()
    code, _, err = run_cli("import", cfg, "-o", str(tmp_path / "models" / "gemma-4-12b.yaml"))
    assert code == 0 and "Warning: `gemma-4-12b` is a shipped model's id" in err
    code, _, err = run_cli("import", cfg, "-o", str(tmp_path / "models" / "my-qwen.yaml"))
    assert code == 0 and "Warning" not in err
