"""What tests/test_fuzz.py found beyond the issue's list, each pinned here so it stays fixed whatever the fuzz
seed draws (first found by the fuzz test against 2026-12-01's tree: 32 failing cases in 14 groups)."""

import json
from pathlib import Path

import pytest
from conftest import assert_one_line_error
from stfiles import tiny_llama_folder, write_safetensors


def test_path_names_too_long_are_one_line(run_cli, tmp_path, monkeypatch):
    code, _, err = run_cli("plan", "./" + "a" * 300, "--gpu", "h100")
    assert_one_line_error(code, err)
    code, _, err = run_cli("gpus", "--catalog", "b" * 5000)
    assert_one_line_error(code, err)
    monkeypatch.setenv("LLMSIZE_CATALOG", "c" * 5000)
    code, _, err = run_cli("gpus")
    assert_one_line_error(code, err)


@pytest.mark.parametrize("args", [["plan", "gemma-4-12b", "--gpu", "h100", "--engine", "vllm"],
                                  ["kv", "gemma-4-12b"], ["roofline", "gemma-4-12b", "--gpu", "h100"]])
def test_a_terminal_one_column_wide_still_gets_a_report(run_cli, monkeypatch, args):
    monkeypatch.setenv("COLUMNS", "1")
    code, out, err = run_cli(*args)
    assert code == 0 and out, err


@pytest.mark.parametrize("price, needle", [("1" + "0" * 400, "expected a number from"),
                                           ("5e-324", "expected a number from"), ("-0.0", "expected a number from"),
                                           # YAML 1.1 reads 2e3 as text (a hostile-input review, 2026-12-07)
                                           ("2e3", "YAML reads 2e3 as text: write 2000.0"),
                                           # no hint to write a price that is out of range anyway
                                           ("1e400", "expected a number from 0.001")])
def test_prices_that_overflow_or_vanish(run_cli, tmp_path, price, needle):
    f = tmp_path / "p.yaml"
    f.write_text(f"prices: {{rtx5090: {price}}}\n")
    code, _, err = run_cli("compare", "gemma-4-12b", "--prices", str(f))
    assert_one_line_error(code, err)
    assert needle in err


def test_a_dtype_that_is_a_list(run_cli, tmp_path):
    folder = tiny_llama_folder(tmp_path / "m")
    f = folder / "model.safetensors"
    blob = json.dumps({"w": {"dtype": ["F16"], "shape": [1], "data_offsets": [0, 2]}}).encode()
    blob += b" " * (-len(blob) % 8)
    f.write_bytes(len(blob).to_bytes(8, "little") + blob + b"\0\0")
    code, _, err = run_cli("plan", str(folder), "--gpu", "h100")
    assert_one_line_error(code, err)
    assert "unknown dtype" in err


def test_control_characters_in_tensor_names_stay_on_their_line(run_cli, tmp_path):
    """A tensor name with a newline went into an `import` note, a YAML comment, and broke the entry."""
    from stfiles import tiny_llama_tensors

    folder = tiny_llama_folder(tmp_path / "m")
    t = tiny_llama_tensors("bf16")
    t["odd\nname\x1b[31m"] = ("BF16", (2,))
    write_safetensors(folder / "model.safetensors", t)
    code, out, err = run_cli("import", str(folder))
    assert code == 0, err
    assert "odd\\nname\\x1b[31m" in out and "odd\nname" not in out


def test_a_lone_surrogate_prints_escaped(run_cli, tmp_path):
    folder = tiny_llama_folder(tmp_path / "m", shards=2)
    idx = folder / "model.safetensors.index.json"
    data = json.loads(idx.read_text())
    data["weight_map"]["extra"] = "\udcff.safetensors"
    idx.write_text(json.dumps(data))  # \udcff written as its JSON escape
    code, out, err = run_cli("plan", str(folder), "--gpu", "h100", "--estimate-only")
    assert code == 0, err
    assert "\\udcff" in out


def test_values_with_newlines_are_echoed_on_one_line(run_cli):
    for args in (["plan", "gemma-4-12b", "--gpu", "no\nsuch"], ["models", "--family", "lla\nma"],
                 ["import", "--hub", "a/b", "--id", "x\ny"]):
        code, _, err = run_cli(*args)
        assert_one_line_error(code, err)
        assert "\\n" in err


@pytest.mark.parametrize("text_config, needle", [
    ({"rope_parameters": 3}, "unexpected value"),
    ({"hidden_size": "8"}, "hidden_size is '8'"),
    ({"layer_types": ["sliding_attention"] * 2000}, "2000 layers"),
])
def test_measure_checkpoint_config_of_the_wrong_shape(run_cli, tmp_path, text_config, needle):
    pytest.importorskip("torch")
    base = {"model_type": "gemma4", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
            "layer_types": ["sliding_attention", "full_attention"], "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 16, "sliding_window": 8}
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gemma4", "text_config": {**base, **text_config}}))
    code, _, err = run_cli("measure", "--device", "cpu", "--checkpoint", str(folder), "--tokens", "2", "--context",
                           "8")
    assert_one_line_error(code, err)
    assert needle in err


def test_measure_errors_have_no_blank_line_before_them(run_cli, tmp_path):
    """An error inside measure's progress bar started stderr with a newline: no bar when stderr is no terminal."""
    pytest.importorskip("torch")
    code, _, err = run_cli("measure", "--device", "cpu", "--checkpoint", str(tmp_path), "--tokens", "2")
    assert_one_line_error(code, err)


def test_compare_sizes_splits_with_each_cards_own_share(run_cli):
    """Found by the fuzz (seed 20261201, 2026-12-03): compare sized a split for a card that cannot hold the model
    alone from inputs whose share of the card was left to the runtime (None), and crashed; each card's split now
    takes its runtime's share (0.9 under vLLM, the whole card under llama.cpp on a Mac)."""
    code, out, err = run_cli("compare", "qwen3-235b-a22b", "--gpus", "t4,m3-pro,hgx-b200", "--format", "json")
    assert code == 0, err
    assert "Traceback" not in err


# Found by the fuzz's fleet and fit cases (2026-12-07): a value that may be a length or a file's path (--isl, --osl,
# --mmproj) was looked up as a path, and a name too long for one ended in an OSError; a path starting ~user of a user
# that does not exist ended in pathlib's RuntimeError, wherever a model or mmproj path is taken. And by hand the same
# day: a GGUF path too long for one (OSError), and --spec's and import's errors echoing a value of thousands of
# characters whole.
@pytest.mark.parametrize("args", [
    ["fleet", "llama-3.1-8b", "--gpus", "h100", "--users", "8", "--isl", "x" * 5000],
    ["fleet", "llama-3.1-8b", "--gpus", "h100", "--users", "8", "--osl", "x" * 5000 + ".csv"],
    ["plan", "llama-3.1-8b", "--gpu", "h100", "--mmproj", "x" * 5000],
    ["plan", "llama-3.1-8b", "--gpu", "h100", "--mmproj", "x" * 5000 + ".gguf"],
    ["fit", "--gpu", "rtx4090", "--runtime", "llamacpp", "--mmproj", "y" * 5000],
    ["plan", "~nosuchuser-llmsize/model", "--gpu", "h100"],
    ["plan", "~nosuchuser-llmsize/model.gguf", "--gpu", "h100"],
    ["import", "~nosuchuser-llmsize/model.gguf"],
    ["import", "x" * 5000 + ".gguf"],  # (a GGUF's splits were looked up by name: OSError)
    ["plan", "y" * 5000 + ".gguf", "--gpu", "h100"],
    ["import", "z" * 5000],
    ["plan", "llama-3.1-8b", "--gpu", "h100", "--mmproj", "~nosuchuser-llmsize/mmproj.gguf"],
    # (and --spec, whose errors quoted the whole value: a draft's path may be long, not thousands of characters)
    ["plan", "llama-3.1-8b", "--gpu", "h100", "--spec", "draft=" + "x" * 5000 + ",k=4"],
    ["fleet", "llama-3.1-8b", "--gpus", "h100", "--users", "8", "--spec", "k=" + "9" * 5000 + ",draft=a,accept=1"],
    ["plan", "llama-3.1-8b", "--gpu", "h100", "--spec", "draft=a,accept=0.5," + "z" * 5000 + "=1"],
])
def test_values_that_cannot_be_paths_are_one_line(run_cli, args):
    code, _, err = run_cli(*args)
    assert_one_line_error(code, err)
    assert len(err) < 600, err  # the name is cut, not echoed whole


def test_a_lengths_value_too_long_for_a_path_is_not_a_length(run_cli):
    code, _, err = run_cli("fleet", "llama-3.1-8b", "--gpus", "h100", "--users", "8", "--isl", "9x" * 3000)
    assert_one_line_error(code, err)
    assert "is not a length" in err


# Found by a hostile-input review (2026-12-07): str.isdigit() takes a superscript ², which int() refuses, and int()
# refuses a number of more than 4,300 digits: a vLLM release, --concurrency and LLMSIZE_PREFETCH_KB ended in a
# traceback or in Python's own words; and errors quoting a value whole (a KV dtype, a KV policy, host memory, a hub
# id, a kernel, an unknown command or option) repeated thousands of characters, now cut by the last guard
# (errors.bounded) whatever the message.
@pytest.mark.parametrize("args,env", [
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm", "--engine-version", "0.20.\u00b2"], {}),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm", "--engine-version", "0." + "1" * 4301], {}),
    (["measure", "--server", "http://127.0.0.1:9", "--gpu", "rtx4090", "--concurrency", "\u00b2"], {}),
    (["measure", "--server", "http://127.0.0.1:9", "--gpu", "rtx4090", "--concurrency", "1" * 5000], {}),
    (["measure", "--device", "cpu"], {"LLMSIZE_PREFETCH_KB": "\u00b2"}),
    (["measure", "--device", "cpu"], {"LLMSIZE_PREFETCH_KB": "1" * 5000}),
    (["measure", "--device", "cpu"], {"LLMSIZE_PDL": "1" * 5000}),
    (["fleet", "llama-3.1-8b", "--users", "4", "--gpus", "h100", "--kv-dtype", "z" * 5000], {}),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--kv-policy", "budget:" + "9" * 5000], {}),
    (["plan", "llama-3.1-8b", "--gpu", "rtx4090", "--host-memory", "z" * 5000], {}),
    (["plan", "--hub", "z" * 5000, "--gpu", "rtx4090"], {}),
    (["measure", "--gemv", "z" * 5000], {}),
    (["z" * 5000], {}),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--" + "z" * 5000], {}),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "extra", "z" * 5000], {}),
])
def test_digits_python_refuses_and_values_of_thousands_of_characters(run_cli, monkeypatch, args, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code, _, err = run_cli(*args)
    assert_one_line_error(code, err)
    assert len(err) < 700 and "int()" not in err and "sys.set_int_max_str_digits" not in err, err


def test_bounded_cuts_only_runs_past_its_limit():
    from llmsize.errors import LONGEST_WORD, bounded

    path = "/".join(["d" * 40] * 6)  # a deep path of 245 characters prints whole
    assert bounded(f"file `{path}` is empty.") == f"file `{path}` is empty."
    cut = bounded("x" * 5000 + " rest")
    assert cut.endswith("... (5,000 characters) rest") and len(cut) < LONGEST_WORD + 40


def test_a_fleet_recipe_for_parts_the_model_lacks_is_said_once(run_cli):
    """`--quant experts=fp8` for a dense model: the recipe's refusal (the parts it has), not a card's reason for no
    row ("tp 8 x pp 4: ...", "widen --gpus")."""
    code, _, err = run_cli("fleet", "llama-3.1-8b", "--users", "10", "--gpus", "h100", "--quant", "experts=fp8")
    assert_one_line_error(code, err)
    assert "has no `experts` weights" in err and "Name components it has" in err and "tp 8" not in err


def test_fit_with_nothing_left_at_one_token_does_not_ask_for_a_shorter_context(run_cli):
    code, out, err = run_cli("fit", "--gpu", "rtx5090", "--memory-gb", "0.5", "--context", "1")
    flat = " ".join(out.split())
    assert code == 0, err
    assert "at 1 token" in flat and "lower --context" not in flat and "the card's memory" in flat
    code, out, _ = run_cli("fit", "--gpu", "rtx5090", "--memory-gb", "1e6", "--context", "1")
    assert "(1,000,000 GB)" in out


def test_spec_accept_out_of_range_is_quoted_as_given(run_cli):
    code, _, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--spec", "draft=llama-3.2-1b,k=4,accept=1.0000001")
    assert_one_line_error(code, err)
    assert "accept 1.0000001 is not in [0, 1]" in err


def test_hostile_review_findings_read_as_one_line(run_cli, tmp_path):
    """A new user's review (2026-12-07): an empty --gpu is not a missing one, a missing --checkpoint does not exist,
    a falcon fleet at the default lengths says they are the defaults."""
    code, _, err = run_cli("plan", "gemma-4-12b", "--gpu", "")
    assert_one_line_error(code, err)
    assert "--gpu is empty" in err
    code, _, err = run_cli("measure", "--checkpoint", str(tmp_path / "nowhere"), "--device", "cpu")
    assert_one_line_error(code, err)
    assert "does not exist" in err
    code, _, err = run_cli("fleet", "falcon-7b", "--gpus", "h100", "--users", "50")
    assert_one_line_error(code, err)
    assert "by default 3000 and 500" in err


def test_a_few_megabyte_checkpoint_is_not_zero_gigabytes(run_cli, tmp_path):
    """A tiny model's total prints in MB and MiB (the Units line names them), not 0.00 GB = 0.00 GiB."""
    folder = tiny_llama_folder(tmp_path / "m")
    code, out, err = run_cli("plan", str(folder), "--gpu", "rtx4080")
    assert code == 0, err
    assert "0.00 GiB" not in out and " MiB" in out and "MB 10^6" in out


def test_a_compressed_tensors_config_without_a_scheme_says_so(run_cli, tmp_path):
    """quantization_config {quant_method: compressed-tensors} alone had read "format None (None-bit None)"."""
    cfg = json.loads((Path(__file__).parent / "data" / "hf-configs" / "Qwen__Qwen3-8B.json").read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, _, err = run_cli("plan", str(tmp_path / "config.json"), "--gpu", "h100")
    assert_one_line_error(code, err)
    assert "names no format and no weights scheme" in err and "None" not in err
