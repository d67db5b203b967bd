"""The CLI as a user meets it: exit codes, one-line errors, JSON keys, help with examples."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_one_line_error

from llmsize import __version__

REQUIRED_KEYS = [
    "gpu.bandwidth_gb_s", "model.params_total", "model.params_active", "weights.bytes_total",
    "weights.bytes_read_per_token", "kv.bytes_per_token", "kv.bytes_per_sequence", "capacity.max_context_tokens",
    "capacity.max_concurrent_sequences", "decode.ceiling_tok_s", "decode.ridge_batch", "prefill.ttft_s",
]


def test_plan_report_fits_100_columns(run_cli):
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti")
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 100
    for heading in ("Card", "Model", "Weights in nvfp4", "KV cache (bf16)", "Memory budget", "Decode", "Prefill",
                    "Diagnosis", "Assumptions"):
        assert heading in out
    assert "448.0 GB/s" in out and "Saturates first: bandwidth" in out


def test_plan_json_keys(run_cli):
    code, out, _ = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--json")
    assert code == 0
    data = json.loads(out)
    for dotted in REQUIRED_KEYS:
        node = data
        for part in dotted.split("."):
            assert part in node, dotted
            node = node[part]
    assert data["inputs"] == {**data["inputs"], "model": "gemma-4-12b", "gpu": "rtx5060ti", "quant": "nvfp4",
                              "context_tokens": 4096, "batch": 1, "gpu_util": 0.9}
    assert data["gpu"]["bandwidth_gb_s"] == 448
    assert data["inputs"]["gpu_util_given"] is False  # 0.9 is vLLM's default here, not the user's
    code, out, _ = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--gpu-util", "0.9", "--json")
    assert code == 0 and json.loads(out)["inputs"]["gpu_util_given"] is True
    assert data["decode"]["ceiling_tok_s"] == pytest.approx(52.4, rel=0.01)


def test_plan_options_change_the_answer(run_cli):
    _, base, _ = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--json")
    _, fp8, _ = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--json", "--quant", "fp8", "--kv-dtype", "fp8",
                        "--context", "32768", "--batch", "16", "--prompt", "2000")
    base, fp8 = json.loads(base), json.loads(fp8)
    assert fp8["weights"]["bytes_total"] < 0.6 * base["weights"]["bytes_total"]
    # fp8 KV: 32 layers * 8 * 128 * 2 * 1 B = 65,536 B per token
    assert fp8["kv"]["bytes_per_token"] == 65536
    assert fp8["decode"]["batch"] == 16 and fp8["prefill"]["prompt_tokens"] == 2000


def test_the_engines_names_for_an_fp8_cache_are_fp8(run_cli):
    """vLLM's and SGLang's --kv-cache-dtype fp8_e4m3 (and fp8_e5m2), as a user copies it, is --kv-dtype fp8."""
    _, fp8, _ = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--json", "--kv-dtype", "fp8")
    for name in ("fp8_e4m3", "FP8_E5M2"):
        code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--json", "--kv-dtype", name)
        assert code == 0, err
        assert json.loads(out) == json.loads(fp8)


def test_model_that_does_not_fit_is_a_normal_answer(run_cli):
    code, out, _ = run_cli("plan", "llama-3.1-70b", "--gpu", "rtx5090", "--json")
    assert code == 0
    d = json.loads(out)["diagnosis"]
    assert d["saturates"] == "weights" and d["shortfall_bytes"] > 100e9
    assert any("Quantize" in lever for lever in d["levers"]) and any("Bigger card" in lever for lever in d["levers"])
    assert d["cards_needed"] >= 5


def test_the_cache_lever_is_a_cache_the_runtime_stores(run_cli):
    """The Diagnosis' smaller-cache lever names the runtime's own: llama.cpp's -ctk/-ctv q8_0 (it offered
    --kv-dtype fp8, which a llama.cpp plan refuses); MLX stores none smaller, so none is offered."""
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx5060ti", "--quant", "gguf-q4_k_m", "--context",
                             "131072", "--engine", "llamacpp", "--json")
    kv = [x for x in json.loads(out)["diagnosis"]["levers"] if x.startswith("Smaller KV dtype")]
    assert kv and kv[0].startswith("Smaller KV dtype: --cache-type-k q8_0 --cache-type-v q8_0 --flash-attn on")
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "m4", "--quant", "mlx-4bit", "--runtime", "mlx",
                             "--context", "131072", "--json")
    assert code == 0, err
    assert not any(x.startswith("Smaller KV dtype") for x in json.loads(out)["diagnosis"]["levers"])
    # a context beyond the model's own limit (a new-user pass, 2026-12-06): the lever said fp8 "holds 1 sequence of
    # 1,000,000 tokens" beside the note that engines refuse such a context
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h200", "--context", "1000000", "--json")
    kv = [x for x in json.loads(out)["diagnosis"]["levers"] if x.startswith("Smaller KV dtype")]
    assert kv == ["Smaller KV dtype: --kv-dtype fp8 holds 1 sequence of 1,000,000 tokens in memory, beyond the "
                  "model's own limit of 131,072."]


@pytest.mark.parametrize("args, lever", [
    # a GGUF mix at its average bits over the model, as its weights table prints them (it said Q4_K's 4.5)
    (("--gpu", "m4-pro", "--quant", "gguf-q6_k"), "Quantize: in gguf-q4_k_m (4.82 bits on average) the weights fit"),
    (("--gpu", "m4-pro", "--quant", "mlx-6bit", "--runtime", "mlx"), "Quantize: in mlx-4bit (4.5 bits) the weights"),
    (("--gpu", "rtx5090"), "Quantize: in gguf-q2_k (2.99 bits on average) (under llama.cpp: not a format vLLM loads)"),
])
def test_the_quantize_lever_is_a_format_the_runtime_loads(run_cli, args, lever):
    """Llama 3.1 70B that does not fit: a GGUF plan on a Mac is offered a smaller GGUF file, an MLX one a smaller MLX
    format (both were offered NVFP4, which neither llama.cpp nor an Apple GPU runs); where none of the runtime's
    own formats fits (vLLM on a 32 GB card), another runtime's is named with it."""
    code, out, err = run_cli("plan", "llama-3.1-70b", *args, "--json")
    assert code == 0, err
    levers = json.loads(out)["diagnosis"]["levers"]
    assert any(lever in x for x in levers), levers
    assert not any("nvfp4" in x for x in levers if x.startswith("Quantize"))


@pytest.mark.parametrize("args, hub", [
    (["plan", "acme-labs/acme-7b-instruct", "--gpu", "h100"], "--hub acme-labs/acme-7b-instruct"),
    (["compare", "acme-7b-instruct"], "--hub ORG/NAME"),
    (["kv", "not a/repo id"], "--hub ORG/NAME"),
])
def test_an_unknown_model_says_how_to_plan_one_the_catalog_lacks(run_cli, args, hub):
    """A model the catalog lacks: the error names the ways in besides the catalog (its files, --hub), and a name
    shaped like a Hub repo id is offered as --hub's value; the catalog's did-you-mean still comes first."""
    code, out, err = run_cli(*args)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and "Run `llmsize models` to see them all; " in err
    assert "folder, config.json or .gguf file" in err and f"`{hub}` (network)" in err


@pytest.mark.parametrize("args, expected_code, expected", [
    (["plan", "gemma-4-12x", "--gpu", "rtx5060ti"], 2, "Unknown model `gemma-4-12x`. Did you mean `gemma-4-12b`"),
    (["plan", "gemma-4-12b", "--gpu", "rtx5600ti"], 2, "llmsize gpus"),
    (["plan", "gemma-4-12b", "--gpu", "h200", "--context", "-5"], 2, "`-5`"),
    (["plan", "gemma-4-12b", "--gpu", "h200", "--gpu-util", "1.5"], 2,
     "'--gpu-util': `1.5` is not a finite number in (0, 1]"),
    (["plan", "gemma-4-12b", "--gpu", "h200", "--batch", "0"], 2, "'--batch': `0` is not an integer from 1"),
    (["plan", "gemma-4-12b", "--gpu", "h200", "--quant", "fp3"], 2, "Unknown weight format `fp3`"),
    (["plan", "gemma-4-12b", "--gpu", "h200", "--kv-dtype", "fp5"], 2, "Unknown KV-cache dtype `fp5`"),
    (["plan", "gemma-4-12b", "--gpu", "h200", "--overhead-gib", "-1"], 2,
     "`-1.0` is not a finite number in [0, 65536]"),
    (["plan", "gemma-4-12b", "--gpu", "h200", "--compute", "fp5"], 2, "Unknown compute precision `fp5`"),
    (["plan", "gemma-4-12b", "--gpu", "h200", "--context", "abc"], 2, "abc"),
    # a repeated option keeps its last value: the message names that one, not the first
    # a repeated option is refused naming both values (the parser would keep the last one silently)
    (["plan", "gemma-4-12b", "--gpu", "h200", "--context", "5", "--context", "x1"], 2, "(`5`, then `x1`)"),
    (["plan", "gemma-4-12b"], 2, "--gpu"),
    (["show", "nothing-like-this"], 2, "neither a card, a model or a host platform in the catalog nor a weight format"),
    (["show", "arc-b58"], 2, "nor a weight format. Did you mean `arc-b580`"),
    (["show", "nvfp5"], 2, "Did you mean `nvfp4` (a weight format)?"),
    (["show", "gemma-4-12"], 2, "Did you mean `gemma-4-12b`"),
    (["gpus", "--sort", "price"], 2, "`price` is not one of bandwidth, memory, year, id"),
])
def test_bad_input_one_line_error(run_cli, args, expected_code, expected):
    code, out, err = run_cli(*args)
    assert code == expected_code
    assert out == ""
    assert err.startswith("Error: ") and expected in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_gpus_models_show_formats(run_cli):
    code, out, _ = run_cli("gpus", "--vendor", "amd", "--json")
    rows = json.loads(out)
    assert code == 0 and rows and all(r["vendor"] == "AMD" for r in rows)
    bw = [r["bandwidth_gb_s"] for r in rows]
    assert bw == sorted(bw, reverse=True)
    code, out, _ = run_cli("models", "--mixer", "mla", "--json")
    assert {r["id"] for r in json.loads(out)} == {"deepseek-v2-lite", "deepseek-v3", "deepseek-v3.2",
                                                     "glm-4.7-flash", "kimi-k2", "kimi-k2.5", "glm-5", "glm-5.2",
                                                     "kimi-linear-48b-a3b", "kimi-k3"}
    code, out, _ = run_cli("models", "--moe")
    assert code == 0 and "mixtral-8x7b" in out and "llama-3-8b" not in out
    code, out, _ = run_cli("show", "h200", "--json")
    assert json.loads(out)["id"] == "h200-sxm" and json.loads(out)["sources"]
    code, out, _ = run_cli("show", "gemma-4-12b")
    assert code == 0 and "params_official_source" in out
    # the text is the entry as YAML, unpadded: it parses back to the entry (long sources once broke it)
    import yaml

    code, out, _ = run_cli("show", "r9700")
    assert code == 0 and not any(line.endswith(" ") for line in out.splitlines())
    assert yaml.safe_load(out.split("\nmemory counted as")[0])["sources"][0].startswith("https://www.amd.com")
    code, out, _ = run_cli("formats", "--json")
    assert {f["id"]: f["bits_per_weight"] for f in json.loads(out)["weight_formats"]}["nvfp4"] == 4.5


def test_version(run_cli):
    code, out, _ = run_cli("--version")
    assert code == 0 and out.strip() == f"llmsize {__version__}"


@pytest.mark.parametrize("command", ["plan", "gpus", "models", "show", "formats"])
def test_help_has_examples(run_cli, command):
    code, out, _ = run_cli(command, "--help")
    assert code == 0 and "Examples:" in out and f"llmsize {command}" in out


def test_plan_never_imports_torch():
    # a subprocess: this test process may have imported torch elsewhere
    code = (
        "import sys; from llmsize.cli import main\n"
        "try:\n    main(['plan', 'gemma-4-12b', '--gpu', 'rtx5060ti', '--json'])\n"
        "except SystemExit as e:\n    assert e.code in (0, None), e.code\n"
        "heavy = [m for m in ('torch', 'triton', 'pynvml', 'safetensors', 'numpy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_console_script_runs():
    r = subprocess.run([sys.executable, "-m", "llmsize", "plan", "gemma-4-12b", "--gpu", "rtx-5060-ti", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["gpu"]["id"] == "rtx5060ti"


def test_the_default_context_is_the_models_where_it_is_shorter(run_cli):
    """TinyLlama's 2,048 tokens are under the 4,096 default: the plan sized 4,096 and warned about its own default,
    and `--emit llama-server` printed -c 4096 where `--emit vllm` clamped to 2048 (a hostile-input pass, 2026-12-05).
    Now the default is the model's, said in a note; compare titles it."""
    import json
    code, out, err = run_cli("plan", "tinyllama-1.1b", "--gpu", "rtx4080", "--json")
    assert code == 0, err
    p = json.loads(out)
    assert p["inputs"]["context_tokens"] == 2048
    assert any("--context defaults to the model's 2,048 tokens" in n for n in p["notes"])
    assert not any("beyond the model's" in n for n in p["notes"])
    code, out, err = run_cli("plan", "tinyllama-1.1b", "--gpu", "rtx4080", "--quant", "gguf-q4_k_m", "--emit",
                             "llama-server")
    assert code == 0 and " -c 2048 " in out, out
    code, out, err = run_cli("compare", "tinyllama-1.1b", "--gpus", "rtx4080", "--json")
    assert code == 0 and json.loads(out)["inputs"]["context_tokens"] == 2048, out[:300]
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4080", "--json")  # 131,072: the usual 4,096
    assert json.loads(out)["inputs"]["context_tokens"] == 4096


def test_context_beyond_the_model_limit_is_flagged(run_cli):
    import json
    code, out, err = run_cli("plan", "llama-2-7b", "--gpu", "h100", "--context", "8192", "--json")
    assert code == 0
    assert any("beyond the model's max_position_embeddings 4,096" in n for n in json.loads(out)["notes"])
    code, out, err = run_cli("plan", "llama-2-7b", "--gpu", "h100", "--context", "8192")
    assert "note: --context 8,192 is beyond" in out


@pytest.mark.parametrize("cmd", [[], ["plan"], ["compare"], ["import"], ["roofline"], ["kv"], ["gpus"], ["models"],
                                 ["show"], ["formats"], ["measure"]])
def test_help_lists_examples_one_per_line(run_cli, cmd):
    code, out, err = run_cli(*cmd, "--help")
    assert code == 0
    lines = [line for line in out.splitlines() if line.strip().startswith("llmsize ")]
    assert lines and all(line.startswith("    llmsize ") for line in lines)  # not rewrapped into a paragraph


def test_plan_report_colors_only_decorate(catalog):
    import re

    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.render.plan_report import render_plan
    p = make_plan(catalog.model("gemma-4-12b"), catalog.gpu("rtx5060ti"), PlanInputs())
    plain, colored = render_plan(p, 100, color=False), render_plan(p, 100, color=True)
    assert "\033[" not in plain and "\033[1m" in colored
    assert re.sub(r"\033\[[0-9;]*m", "", colored) == plain


def test_no_color_and_pipes_get_plain_text(monkeypatch):
    import io

    from llmsize.render.text import color_enabled
    assert color_enabled(io.StringIO()) is False

    class Tty(io.StringIO):
        def isatty(self):
            return True
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert color_enabled(Tty()) is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert color_enabled(Tty()) is False


@pytest.mark.parametrize("args, needle", [
    (("compare", "llama-3.1-8b", "--gpus", ""), "--gpus is empty"),
    (("fleet", "llama-3.1-8b", "--users", "4", "--gpus", "h100-sxm,,"), "has an empty item"),
    (("plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--quant", ""), "--quant is empty"),
])
def test_an_empty_value_is_refused_not_read_as_the_default(run_cli, args, needle):
    """A review saw --gpus "" size every card of the catalog and --quant "" plan the release format silently."""
    code, out, err = run_cli(*args)
    assert code == 2 and out == "" and needle in err and "\n" not in err.strip()


def test_llama_server_for_a_safetensors_folder_names_the_gguf_to_make(run_cli, tmp_path):
    """llama-server loads GGUF files only: for a config.json folder --emit llama-server says to convert it and puts
    a GGUF file name after -m, not the folder (a review saw `-m ./good`)."""
    folder = tmp_path / "good"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
        "max_position_embeddings": 2048, "torch_dtype": "bfloat16"}))
    code, out, err = run_cli("plan", str(folder), "--gpu", "rtx4090", "--emit", "llama-server", "--quant",
                             "gguf-q4_k_m")
    assert code == 0 and "loads GGUF files only" in out and "llama-quantize to Q4_K_M" in out
    assert f"-m {folder}" not in out and ".gguf" in out.splitlines()[-1]


def test_plan_keeps_the_cache_in_its_runtimes_dtype_unless_told(run_cli):
    """llama.cpp and MLX keep an f16 cache (common/common.h: cache_type_k and _v GGML_TYPE_F16), the serving engines
    bf16: a GGUF plan (llama.cpp by default) says fp16, as its ledger's "K f16, V f16" does, a safetensors plan on an
    NVIDIA card (vLLM) bf16; --kv-dtype overrides either. Two bytes a value both ways: the sizes do not change."""
    def plan(*args):
        code, out, err = run_cli("plan", "qwen3-30b-a3b", "--gpu", "rtx4090", "--json", *args)
        assert code == 0, err
        d = json.loads(out)
        assert d["kv"]["dtype"] == d["inputs"]["kv_dtype"]
        return d["inputs"]["kv_dtype"], d["kv"]["bytes_per_sequence"], d["expected"]["runtime"]
    gguf, safetensors = plan("--quant", "gguf-q4_k_m"), plan("--quant", "fp8")
    assert gguf[0::2] == ("fp16", "llamacpp") and safetensors[0::2] == ("bf16", "vllm")
    assert gguf[1] == safetensors[1]  # 2 B a value either way
    assert plan("--quant", "gguf-q4_k_m", "--kv-dtype", "bf16")[0] == "bf16"
    assert plan("--quant", "fp8", "--runtime", "llamacpp")[0] == "fp16"


def test_llamacpp_cache_types_size_the_plans_cache_not_only_its_ledger(run_cli):
    """-ctk q8_0 -ctv q4_0 (llama.cpp's --cache-type-k/-v): the plan's cache is that pair, (34 / 32 + 18 / 32) / 2 =
    13/16 B a value, so its bytes a sequence are 13/32 of f16's, the same as the ledger's KV, and the decode at
    depth reads them (a higher expected tok/s at 32K); --kv-dtype takes no such pair."""
    def plan(*args):
        code, out, err = run_cli("plan", "qwen3-8b", "--gpu", "rtx5060ti", "--quant", "gguf-q4_k_m", "--engine",
                                 "llamacpp", "--context", "32768", "--json", *args)
        assert code == 0, err
        return json.loads(out)
    f16, quant = plan(), plan("--cache-type-k", "q8_0", "--cache-type-v", "q4_0", "--flash-attn", "on")
    assert quant["kv"]["dtype"] == quant["inputs"]["kv_dtype"] == "q8_0/q4_0"
    assert quant["kv"]["bytes_per_sequence"] == pytest.approx(f16["kv"]["bytes_per_sequence"] * 13 / 32)
    ratio = quant["engine"]["kv_cache_bytes"] / f16["engine"]["kv_cache_bytes"]
    assert ratio == pytest.approx(13 / 32)
    assert quant["expected"]["tok_s"] > f16["expected"]["tok_s"]
    code, out, err = run_cli("plan", "qwen3-8b", "--gpu", "h100", "--kv-dtype", "q4_0/q4_0")
    assert code == 2 and "--cache-type-k and --cache-type-v" in err
    # the two ways of naming the cache at once would split the plan's cache from the ledger's: refused
    code, out, err = run_cli("plan", "qwen3-8b", "--gpu", "rtx5060ti", "--quant", "gguf-q4_k_m", "--engine",
                             "llamacpp", "--kv-dtype", "fp16", "--cache-type-k", "q8_0", "--cache-type-v", "q8_0",
                             "--flash-attn", "on")
    assert code == 2 and "drop --kv-dtype" in err and out == ""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_standard_output_that_cannot_be_written_is_one_line():
    """A full disk behind the standard output (/dev/full): one line and exit 2, no traceback (an audit saw
    OSError's traceback and exit 1 from `fleet --format html > /dev/full`)."""
    for args in (["plan", "llama-3.1-8b", "--gpu", "h100-sxm"],
                 ["fleet", "llama-3.1-8b", "--users", "100", "--gpus", "h100-sxm", "--format", "html"]):
        with open("/dev/full", "w") as full:
            r = subprocess.run([sys.executable, "-m", "llmsize", *args], stdout=full, stderr=subprocess.PIPE,
                               text=True, timeout=120)
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and "could not write the output" in r.stderr and "Traceback" not in r.stderr


def test_small_rates_keep_their_digits_in_json(run_cli):
    """tok/s figures are rounded to significant digits, not 3 decimals: a 0.0845 tok/s ceiling printed as 0.084 sat
    below the expected figure it bounds (a plausibility sweep)."""
    import json

    code, out, err = run_cli("plan", "llama-3.1-405b", "--gpu", "m1", "--json")
    assert code == 0, err
    d = json.loads(out)
    ceiling = d["gpu"]["bandwidth_gb_s"] * 1e9 / d["decode"]["bytes_read_per_token"]
    assert ceiling < 0.1 and d["decode"]["ceiling_tok_s"] == pytest.approx(ceiling, rel=1e-6)


def test_an_offload_asked_for_says_the_budget_and_decode_are_the_whole_models(run_cli):
    """--cpu-moe on a card that holds the whole model: Memory budget and Decode stay the whole model's (18 GB on the
    card, 13 sequences, 434 tok/s) beside a ledger of 1.4 GiB and an expected 23 tok/s; a plausibility sweep read
    them as the option ignored. The sections now say which placement they are."""
    base = ("plan", "qwen3-30b-a3b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m")
    code, out, err = run_cli(*base, "--cpu-moe", "--host-memory", "ryzen-9000")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "Memory budget (every layer on the card: the what-if; llama.cpp's placement keeps" in flat
    assert "Decode (the whole model on the card; the offload's decode: the ledger and Expected below)" in flat
    assert "--host-memory/--host-bandwidth-gb-s: unused" not in flat  # it prices the experts' host side here
    code, out, err = run_cli(*base)
    assert code == 0 and "\nMemory budget\n" in out and "\nDecode\n" in out
    # the same plan without the offload: the host memory prices nothing, and the plan says so (it was silent)
    code, out, err = run_cli(*base, "--host-memory", "ryzen-9000", "--json")
    assert code == 0 and any(n.startswith("--host-memory/--host-bandwidth-gb-s: unused here")
                             for n in json.loads(out)["notes"]), err


def test_an_offload_says_the_longest_context_it_holds(run_cli):
    """What an offload buys is context: the ledger gives the longest -c of the placement itself (40 of Llama 3.1
    70B's 80 layers on a 24 GB card), where Memory budget gives the whole model's (which does not fit there)."""
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--gpu-layers",
                             "40", "--host-memory", "ryzen-9000", "--json")
    assert code == 0, err
    led = json.loads(out)["engine"]
    n = led["max_context_tokens"]
    assert n and n % 256 == 0 and 4096 < n < 131072
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--gpu-layers",
                             "40", "--host-memory", "ryzen-9000", "--context", str(n + 16384), "--json")
    e = json.loads(out)["engine"]  # past it (beyond --fit's margin), the placement does not fit
    assert code == 0 and not e["fits"] and e["max_context_tokens"] == n


def test_a_bare_llmsize_prints_its_help(run_cli):
    """A new user's first command printed the whole help squashed into one error line, exit 2."""
    code, out, err = run_cli()
    assert code == 0 and err == ""
    assert out.startswith("Usage: llmsize") and "plan" in out and "compare" in out and len(out.splitlines()) > 10


@pytest.mark.parametrize("argv, needle", [
    # the parser kept the last silently: a plan of the H200 for a user who named the H100 first
    (["plan", "gemma-4-12b", "--gpu", "h100", "--gpu", "h200"],
     "--gpu is given twice (`h100`, then `h200`): plan takes one. Give --gpu once."),
    (["compare", "gemma-4-12b", "--gpus", "h100", "--gpus=h200"],
     "--gpus is given twice (`h100`, then `h200`): compare takes one. Give --gpus once, as one comma list."),
    (["fit", "--gpu", "rtx5060ti", "--all-formats", "--one-per-model"],
     "--all-formats and --one-per-model contradict each other"),
    # a vLLM ledger printed beside "Expected in llama.cpp"
    (["plan", "gemma-4-12b", "--gpu", "h100", "--runtime", "llamacpp", "--engine", "vllm"],
     "--runtime llamacpp asks for llamacpp's expected speed, and --engine vllm plans vllm's memory ledger"),
    (["plan", "--context"], "Option '--context' requires an argument. Run `llmsize plan --help`"),
    (["compare"], "e.g. `llmsize compare gemma-4-12b"),
    (["import"], "Give a checkpoint (a folder, config.json or .gguf file) or --hub ORG/NAME"),
    (["import", ""], "The checkpoint path is empty"),  # it read the current folder (a Path of '' is '.')
    (["plan", "llama-3.1-8b", "-gh100", "-gh200"], "--gpu is given twice (`h100`, then `h200`)"),  # attached values
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--gpu"], "Option '--gpu' requires an argument"),
])
def test_conflicting_or_missing_options_are_one_line(run_cli, argv, needle):
    code, out, err = run_cli(*argv)
    assert_one_line_error(code, err)
    assert needle in err, err


def test_the_same_value_twice_or_a_listed_option_repeated_is_not_a_conflict(run_cli):
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "h100", "--gpu", "h100", "--json")
    assert code == 0, err
    code, out, err = run_cli("plan", "gemma-4-12b", "-g", "h100", "--gpu", "h100", "--json")  # one option, two names
    assert code == 0, err
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "h100", "--runtime", "ollama", "--engine", "llamacpp",
                             "--quant", "gguf-q4_k_m", "--json")
    assert code == 0, err
    code, out, err = run_cli("roofline", "gemma-4-12b", "--gpu", "h100", "--gpu", "h200")  # --gpu is a list here
    assert code == 0 and "h200" in out, err


@pytest.mark.parametrize("argv, needle", [
    # the repeated-option advice offered a comma list to any option whose help says "command"
    (["plan", "gemma-4-12b", "--gpu", "h100", "--kv-dtype", "fp8", "--kv-dtype", "bf16"],
     "--kv-dtype is given twice (`fp8`, then `bf16`): plan takes one. Give --kv-dtype once."),
    # the engine that --emit implies is named as --emit, not as an --engine the user did not type
    (["plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--emit", "llama-server", "--runtime", "vllm"],
     "and --emit llama-server plans llamacpp's memory ledger: one plan is sized for one runtime. Drop --runtime "
     "(--emit llama-server sets it)"),
    (["plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--gpu-layers", "10", "--runtime", "vllm"],
     "and --gpu-layers plans llamacpp's memory ledger: one plan is sized for one runtime. Drop --runtime "
     "(--gpu-layers sets it)"),
    # SGLang's and TensorRT-LLM's ledgers charge no CUDA-graph reserve: the option changed nothing
    (["plan", "gemma-4-12b", "--gpu", "h100", "--engine", "sglang", "--cudagraph-gib", "5"],
     "--cudagraph-gib is vLLM V1's CUDA-graph reserve, and --engine sglang is not vLLM."),
    (["plan", "gemma-4-12b", "--gpu", "h100", "--engine", "trtllm", "--cudagraph-gib", "5"],
     "--engine trtllm is not vLLM"),
    # every row's expected figure would be "-": refused as fit and fleet refuse it
    (["compare", "llama-3.1-70b", "--gpus", "h100-sxm,h200", "--runtime", "mlx"],
     "--runtime mlx: no card compared runs it (h100-sxm: MLX runs on Apple silicon only"),
    # `ORG/NAME@` read as main in silence (refused before any request: no network here)
    (["plan", "--hub", "google/gemma-3-27b-it@", "--gpu", "h100"], "names no revision after @"),
])
def test_misleading_answers_found_by_a_hostile_pass_are_one_clear_line(run_cli, argv, needle):
    code, out, err = run_cli(*argv)
    assert_one_line_error(code, err)
    assert needle in err, err
    assert "comma list" not in err or "--gpus" in err


def test_compare_keeps_a_runtime_that_runs_on_some_card_compared(run_cli):
    code, out, err = run_cli("compare", "gemma-4-12b", "--gpus", "h100-sxm,m4-max", "--runtime", "mlx", "--json")
    assert code == 0, err


def test_fit_says_when_the_host_ram_given_plays_no_part(run_cli):
    code, out, err = run_cli("fit", "--gpu", "rtx5060ti", "--runtime", "vllm", "--host-ram-gib", "32", "--json")
    assert code == 0, err
    assert "--host-ram-gib 32 not used: only llama.cpp offloads, and vLLM is planned" in json.loads(out)["notes"]
    code, out, err = run_cli("fit", "--gpu", "rtx5060ti", "--host-ram-gib", "32", "--json")  # llama.cpp: it counts
    assert code == 0 and not any("not used" in n for n in json.loads(out)["notes"]), err


def test_fleet_takes_the_estimate_only_its_partial_checkpoint_hint_names(run_cli, tmp_path):
    """A folder whose shards are missing: the refusal says `--estimate-only`, which fleet did not have."""
    src = Path(__file__).parent / "data" / "hf-configs" / "meta-llama__Llama-3.1-8B-Instruct.json"
    (tmp_path / "config.json").write_text(src.read_text())
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}))
    code, out, err = run_cli("fleet", str(tmp_path), "--gpus", "h100-sxm", "--users", "10")
    assert_one_line_error(code, err)
    assert "--estimate-only" in err, err
    code, out, err = run_cli("fleet", str(tmp_path), "--gpus", "h100-sxm", "--users", "10", "--estimate-only",
                             "--json")
    assert code == 0 and json.loads(out)["rows"], err


def test_a_catalog_file_of_a_plain_string_says_what_to_do(run_cli, tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "x.yaml").write_text("just a string\n")
    code, out, err = run_cli("models", "--catalog", str(tmp_path))
    assert_one_line_error(code, err)
    assert "expected a mapping of keys, got str. Fix the file" in err, err


def test_a_module_the_checkpoint_holds_but_engines_leave_out_is_said(run_cli):
    """A second new-user pass (2026-12-06): DeepSeek-V3's weights printed 673 GB beside a 688 GB checkpoint, the
    14B MTP module (catalog `loaded: false`) left out without a word. The plan says so, except where --spec mtp
    loads it for drafting (its bytes then in the plan)."""
    code, out, err = run_cli("plan", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--json")
    assert code == 0, err
    said = [n for n in json.loads(out)["notes"] if n.startswith("not loaded: multi-token-prediction module")]
    assert len(said) == 1 and "14.00 B parameters" in said[0]
    code, out, err = run_cli("plan", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--spec", "mtp=1", "--json")
    assert code == 0, err
    assert not any(n.startswith("not loaded") for n in json.loads(out)["notes"])
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h200", "--json")
    assert not any(n.startswith("not loaded") for n in json.loads(out)["notes"])


def test_show_takes_a_weight_format(run_cli):
    """`show nvfp4` (an audit's new user looked for it there, 2026-12-06) shows the format `formats` lists: NVFP4's
    4.5 bits a weight (4 of E2M1 + an E4M3 scale per 16 weights), 4 B per tensor, with its source; a llama.cpp file
    type as --quant reads it (q4_k_m) shows its GGUF format; --json gives the same fields."""
    code, out, err = run_cli("show", "nvfp4")
    assert code == 0, err
    assert "bits_per_weight: 4.5" in out and "per_tensor_bytes: 4" in out and "source:" in out
    code, out, err = run_cli("show", "q4_k_m")
    assert code == 0 and "id: gguf-q4_k_m" in out and "gguf_file_type: q4_k_m" in out, err
    code, out, err = run_cli("show", "nvfp4", "--json")
    assert code == 0 and json.loads(out)["weight_format"]["bits_per_weight"] == 4.5
    code, out, err = run_cli("show", "rtx4090")  # a card still shows as a card
    assert code == 0 and "name: NVIDIA GeForce RTX 4090" in out, err


def test_show_and_host_memory_read_platform_names_as_typed(run_cli):
    """A new-user pass (2026-12-06): `show ryzen-9000` was refused as neither a card nor a model, though `hosts`
    lists it; `--host-memory ryzen9000` was refused without a near name, where cards and models offer one. A host
    platform shows like a card; its name is read without case or punctuation; a near miss offers the platform."""
    code, out, err = run_cli("show", "ryzen-9000")
    assert code == 0 and "memory_type: DDR5" in out, err
    code, out, err = run_cli("show", "nothing-like-this")
    assert code == 2 and "neither a card, a model or a host platform" in err and "llmsize formats" in err
    base = ("plan", "qwen3-30b-a3b", "--gpu", "rtx4060ti8", "--quant", "gguf-q4_k_m", "--engine", "llamacpp",
            "--cpu-moe", "--json")
    code, typed, err = run_cli(*base, "--host-memory", "Ryzen 9000")
    code2, catalogued, _ = run_cli(*base, "--host-memory", "ryzen-9000")
    assert code == code2 == 0, err
    assert json.loads(typed)["expected"]["tok_s"] == json.loads(catalogued)["expected"]["tok_s"]
    code, out, err = run_cli(*base, "--host-memory", "ryzn-9000")
    assert code == 2 and "Did you mean `ryzen-9000`" in err and out == ""


def test_emit_mismatch_names_a_launch_line_that_exists(run_cli):
    """A plan sized for mlx asked for vLLM's launch line: no `--emit mlx` is offered (there is none); a llama.cpp
    plan is pointed to llama-server's."""
    code, out, err = run_cli("plan", "qwen3.5-9b", "--gpu", "rtx4090", "--runtime", "mlx", "--emit", "vllm")
    assert code == 2 and "--emit mlx" not in err and "--emit prints none for mlx" in err, err
    code, out, err = run_cli("plan", "qwen3.5-9b", "--gpu", "rtx4090", "--runtime", "llamacpp", "--emit", "vllm")
    assert code == 2 and "use --emit llama-server" in err, err


def test_weights_that_do_not_fit_are_warned_first_unless_a_placement_holds_them(run_cli):
    """Qwen3 14B in Q4_K_M (9.0 GB) on an 8 GB RTX 3060 Ti: the cache that does not fit had a Warning line first, the
    weights that do not fit (worse) only a section title and a trailing note, below an expected 32.7 tok/s. They are
    warned first now. With llama.cpp's placement that holds it (Qwen3-30B-A3B, --n-cpu-moe 40 on an 8 GB card) the
    warning goes and the Diagnosis, which had said "it does not fit" above a ledger that fits, says the placement
    does; the expected figure's line names the context its cache is read at."""
    code, out, err = run_cli("plan", "qwen3-14b", "--gpu", "rtx3060ti", "--quant", "gguf-q4_k_m")
    assert code == 0, err
    first = " ".join(out.split("\nllmsize plan:")[0].split())
    assert first.startswith("Warning: The weights do not fit: 9.0 GB in gguf-q4_k_m and the runtime's overhead "
                            "exceed the 8.6 GB budget by 1.4 GB; the speed figures are as if they did")
    assert "tok/s at a 4,096-token context (band" in out
    code, out, err = run_cli("plan", "qwen3-30b-a3b", "--gpu", "rtx4060", "--quant", "gguf-q4_k_m", "--engine",
                             "llamacpp", "--n-cpu-moe", "40", "--host-memory", "DDR5-6000x2", "--context", "16384")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "The weights do not fit" not in flat and "it does not fit." not in flat
    assert ("the whole model does not fit the card; llama.cpp's placement, part of it in host memory, does (its "
            "ledger below).") in flat
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090")
    assert code == 0 and "Warning" not in out


def test_ollama_and_lm_studio_plan_the_gguf_their_library_pulls_and_ollamas_own_placement(run_cli):
    """A consumer-hardware review: `plan qwen3-8b --gpu rtx4060ti16 --runtime ollama` planned the BF16 release (16.4
    GB, "not one sequence fits", 15.4 tok/s) where `ollama run qwen3:8b` pulls Q4_K_M; gpt-oss under LM Studio had no
    figure ("mxfp4 is not a GGUF type"). Without --quant they plan the library's GGUF, and say so; --quant still
    rules. And `--runtime ollama` plans Ollama's own placement, as `--engine ollama` did: Qwen3-30B-A3B Q4_K_M (18.6
    GB) on a 16 GB card had headlined the whole-card figure."""
    import json

    code, out, err = run_cli("plan", "qwen3-8b", "--gpu", "rtx4060ti16", "--runtime", "ollama", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["weights"]["format"] == "gguf-q4_k_m"
    assert any("--runtime ollama without --quant: gguf-q4_k_m" in n for n in d["notes"])
    code, out, err = run_cli("plan", "gpt-oss-20b", "--gpu", "rtx5060ti", "--runtime", "lmstudio")
    assert code == 0 and "Weights in gguf-mxfp4_moe" in out and "no figure" not in out
    code, out, err = run_cli("plan", "qwen3-8b", "--gpu", "rtx4060ti16", "--runtime", "ollama", "--quant", "bf16")
    assert code == 0 and "Weights in bf16" in out and "without --quant" not in out
    code, out, err = run_cli("plan", "qwen3-8b", "--gpu", "rtx4060ti16")
    assert code == 0 and "Weights in bf16" in out  # no runtime named: the release, as before
    code, out, err = run_cli("compare", "qwen3-8b", "--gpus", "rtx4060ti16", "--runtime", "ollama", "--json")
    assert code == 0 and json.loads(out)["rows"][0]["expected_runtime"] == "llamacpp"
    assert any("gguf-q4_k_m" in n for n in json.loads(out)["notes"])
    args = ("plan", "qwen3-30b-a3b", "--quant", "gguf-q4_k_m", "--gpu", "rtx5060ti", "--host-memory", "DDR5-6000x2")
    code, runtime_out, err = run_cli(*args, "--runtime", "ollama", "--json")
    code2, engine_out, err2 = run_cli(*args, "--engine", "ollama", "--json")
    assert code == 0 and code2 == 0, (err, err2)
    r, e = json.loads(runtime_out), json.loads(engine_out)
    assert r["expected"]["tok_s"] == pytest.approx(e["expected"]["tok_s"]) and r["expected"]["tok_s"] < 80


def test_ollamas_cache_lever_names_its_environment_variable(run_cli):
    """Under Ollama the cache lever said llama.cpp's flags (--cache-type-k q8_0 ...): Ollama takes one type for K and
    V from OLLAMA_KV_CACHE_TYPE (its quantized V cache with flash attention). llama.cpp's plan keeps its flags."""
    args = ("plan", "qwen3-32b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--context", "32768")
    code, out, err = run_cli(*args, "--runtime", "ollama")
    flat = " ".join(out.split())
    assert code == 0 and ("Smaller KV dtype: OLLAMA_KV_CACHE_TYPE=q8_0 with OLLAMA_FLASH_ATTENTION=1 (plan: "
                          "--cache-type-k q8_0 --cache-type-v q8_0 --flash-attn on)") in flat
    code, out, err = run_cli(*args, "--runtime", "llamacpp")
    flat = " ".join(out.split())
    assert code == 0 and "Smaller KV dtype: --cache-type-k q8_0 --cache-type-v q8_0 --flash-attn on holds" in flat


def test_a_small_fixed_cache_prints_in_its_own_unit(run_cli):
    """gpt-oss-20b's 12 sliding layers hold 128 tokens each once full: 12 x 128 x 8 KV heads x 64 x 2 (K and V) x 2 B =
    3,145,728 B a sequence, printed as "0.00 GB that does not grow" (a zero said as a claim); now 3.15 MB."""
    code, out, err = run_cli("plan", "gpt-oss-20b", "--gpu", "rtx4090")
    said = "each sequence also holds 3.15 MB that does not grow (sliding windows)"
    assert code == 0 and said in " ".join(out.split())


def test_lm_studio_on_a_radeon_says_which_build_its_figure_is(run_cli):
    """LM Studio ships llama.cpp for ROCm and for Vulkan (the README calls Vulkan what it runs on most AMD cards); its
    figure on an RX 7900 XTX is the ROCm build's (97 tok/s for Llama 3.1 8B Q4_K_M beside Vulkan's 122, a review saw)
    and now says so; an Instinct card, which AMD's Vulkan drivers do not run, and --backend given, say nothing."""
    args = ("plan", "llama-3.1-8b", "--quant", "gguf-q4_k_m", "--runtime", "lmstudio")
    code, out, err = run_cli(*args, "--gpu", "rx7900xtx")
    said = "this figure is the ROCm build's, --backend vulkan prices the Vulkan one"
    assert code == 0 and said in " ".join(out.split())
    for extra in (["--gpu", "mi300x"], ["--gpu", "rx7900xtx", "--backend", "vulkan"]):
        code, out, err = run_cli(*args, *extra)
        assert code == 0 and "LM Studio ships" not in out

