"""Every option is defined once (llmsize/options.py) and checked where it enters: the same value is refused
the same way by every command that takes it, non-finite and out-of-range numbers never reach an estimate,
closed sets are closed. The commands' options are enumerated from the app itself, so an option added later
is covered without editing this file."""

import json
from typing import get_args

import pytest
import typer
from conftest import assert_one_line_error

from llmsize import options
from llmsize.catalog.schema import GpuSpec

# a minimal valid invocation per command, to which one bad option is added
BASE = {
    "plan": ["plan", "gemma-4-12b", "--gpu", "h200"],
    "compare": ["compare", "gemma-4-12b", "--gpus", "h200"],
    "roofline": ["roofline", "gemma-4-12b", "--gpu", "h200"],
    "kv": ["kv", "gemma-4-12b"],
    "gpus": ["gpus"],
    "models": ["models"],
    "measure": ["measure", "--device", "cpu"],
    "import": ["import", "/nonexistent/never-read"],
}


def command_options(name: str):
    """(option name, python type) of every option of a command, read from its signature's annotations."""
    from typing import Union, get_origin, get_type_hints

    from llmsize.cli import COMMANDS

    fn = next(f for n, f in COMMANDS if (n or f.__name__.rstrip("_")) == name)
    for param, hint in get_type_hints(fn, include_extras=True).items():
        base, *meta = get_args(hint) or (hint,)
        info = next((m for m in meta if isinstance(m, typer.models.OptionInfo)), None)
        if info is None:
            continue
        if get_origin(base) is Union:
            base = next(a for a in get_args(base) if a is not type(None))
        decls = info.param_decls or ("--" + param.replace("_", "-"),)
        yield decls[0].split("/")[0], base


def numeric_options():
    for name in BASE:
        for opt, base in command_options(name):
            if base in (int, float):
                yield name, opt, base.__name__


NUMERIC = sorted(set(numeric_options()))


def test_every_command_with_numeric_options_is_exercised():
    assert {c for c, _, _ in NUMERIC} <= set(BASE)
    assert len(NUMERIC) >= 30


@pytest.mark.parametrize("command, option, kind", NUMERIC, ids=[f"{c} {o}" for c, o, _ in NUMERIC])
def test_non_finite_negative_and_huge_values_are_one_line(run_cli, command, option, kind):
    bad = ["nan", "inf", "-inf", "1e308", "-1"] if kind == "float" else ["-1", "1" + "0" * 400, "1e3"]
    for value in bad:
        code, out, err = run_cli(*BASE[command], option, value)
        assert code == 2, (option, value, out[-300:], err)
        assert len(err.strip().splitlines()) == 1 and err.startswith("Error: ") and "Traceback" not in err
        assert value[:80] in err, err  # named (long values cut to 80 characters)


SHARED = [("--tp", "-1"), ("--tp", "0"), ("--pp", "0"), ("--nodes", "0"), ("--context", "0"),
          ("--gpu-util", "1.5"), ("--gpu-util", "nan"), ("--overhead-gib", "inf"), ("--kv-dtype", "fp5"),
          ("--quant", "fp3"), ("--node-link-gb-s", "0"),
          ("--node-link-gb-s", "1e-312"), ("--host-bandwidth-gb-s", "1e-312"), ("--vendor", "nvida"), ("--segment", "gamer")]


@pytest.mark.parametrize("option, value", SHARED)
def test_a_shared_option_is_refused_identically_by_every_command(run_cli, option, value):
    """`compare --tp -1` exactly as `plan --tp -1`: one definition, one message (measure's --context, --quant and
    --batch are its own: the decode loop's prompt, its two formats, its kernels' rows)."""
    messages = {}
    for name, argv in BASE.items():
        if name == "measure" or option not in {o for o, _ in command_options(name)}:
            continue
        code, out, err = run_cli(*argv, option, value)
        assert code == 2, (name, err)
        messages[name] = err.split(" Run `llmsize")[0]
    assert messages and len(set(messages.values())) == 1, messages


def test_closed_sets_are_the_schemas():
    assert options.VENDORS == tuple(v.lower() for v in get_args(GpuSpec.model_fields["vendor"].annotation))
    assert options.SEGMENTS == get_args(GpuSpec.model_fields["segment"].annotation)


def test_mixer_kinds_are_the_schemas(catalog):
    kinds = {g.mixer.kind for m in catalog.models.all() for g in m.layer_groups if g.mixer}
    assert kinds == set(options.MIXER_KINDS)


@pytest.mark.parametrize("args, needle", [
    (["gpus", "--vendor", "nvida"], "did you mean `nvidia`"),
    (["gpus", "--segment", "datacentre"], "did you mean `datacenter`"),
    (["compare", "gemma-4-12b", "--segment", "consumr"], "did you mean `consumer`"),
    (["models", "--mixer", "mamba"], "did you mean `ssm`"),
    (["models", "--family", "lama"], "did you mean `llama`"),
    (["gpus", "--vendor", "nv"], "did you mean `nvidia`"),  # a value cut short: the one it starts
    (["models", "--family", ""], "--family `` is not one of"),  # listed every model before
    (["compare", "gemma-4-12b", "--sort", "tok_s"], "is not one of"),
])
def test_typos_in_closed_sets_are_errors_not_empty_tables(run_cli, args, needle):
    """They printed "0 cards" before."""
    code, out, err = run_cli(*args)
    assert code == 2 and needle in err and out == ""


@pytest.mark.parametrize("args, needle", [
    # a bare number was read as a release: `v2` as 2.0, so vLLM's current ledger
    (["plan", "llama-3-8b", "--gpu", "h100", "--engine", "vllm", "--engine-version", "v2"],
     "--engine-version `v2` is not a vLLM version"),
    (["plan", "llama-3-8b", "--gpu", "h100", "--engine", "vllm", "--engine-version", "1"],
     "--engine-version `1` is not a vLLM version"),
    # a dense model has no experts: the plan said "fp8" and quantized nothing
    (["plan", "llama-3-8b", "--gpu", "h100", "--quant", "fp8", "--scope", "Experts"],
     "--scope experts: llama-3-8b has no routed experts"),
    # the error blamed --engine, which the user had not given
    (["plan", "llama-3-8b", "--gpu", "rtx4090", "--emit", "llama-server", "--tp", "2"], "--emit llama-server: "),
    (["plan", "llama-3-8b", "--gpu", "rtx4090", "--emit", "ollama", "--pp", "2"], "--emit ollama: "),
    # a hostile-input pass (2026-12-05): launch lines, ledgers and figures of what the engine would not run
    (["plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--json", "--emit", "vllm"],
     "--emit vllm prints launch lines: it does not combine with --format or --json"),  # printed the line, exit 0
    (["plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--format", "html", "--emit", "llama-server"],
     "does not combine with --format or --json"),
    (["compare", "gemma-4-12b", "--sort", "price"], "--sort price ranks by the prices --prices reads"),  # sorted
    (["compare", "gemma-4-12b", "--sort", "tok_s_per_kcurrency", "--format", "csv"], "Add --prices"),  # by name
    (["plan", "llama-3.1-8b", "--gpu", "NVIDIA A100"], "`NVIDIA A100` names 2 cards: `a100-40gb-sxm`"),
    (["plan", "llama-3.1-8b", "--gpu", "nvidia h2000"], "Did you mean `h200-sxm`"),  # offered gb300, tesla-p40
    # a count with a k or M suffix: the parser's message alone, which said nothing of what to give
    (["plan", "llama-3.1-8b", "--gpu", "rtx4090", "--context", "128k"], "(got `128k`). Give a whole number: 131072 "
     "(128 x 1,024) or 128000."),
    (["fleet", "llama-3.1-8b", "--users", "1.5M", "--gpus", "h100"], "Give a whole number: 1572864 (1.5 x "
     "1,048,576) or 1500000."),
    # a memory size no catalog card of that name has: it planned the RTX 3080 10GB, the 24 GB RTX 4090, the 96 GB M2 Max
    (["plan", "llama-3.1-8b", "--gpu", "rtx 3080 12gb"], "`rtx 3080 12gb`: no catalog card of that name has 12 GB: "
     "`rtx3080` (NVIDIA GeForce RTX 3080 10GB, 10 GB)"),
    (["plan", "llama-3.1-8b", "--gpu", "RTX 4090 48GB"], "no catalog card of that name has 48 GB: `rtx4090`"),
    (["compare", "llama-3.1-8b", "--gpus", "m2 max 32gb"], "no catalog card of that name has 32 GB: `m2-max-30`"),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--quant", "nvfp5"], "Did you mean `nvfp4`?"),  # listed all 60
    # --fp4-kernel chooses a kernel for FP4 weights under vLLM or SGLang on an NVIDIA card, nothing else
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--quant", "fp8", "--fp4-kernel", "marlin"],
     "--fp4-kernel marlin: fp8 weights have no FP4 part"),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--quant", "nvfp4", "--fp4-kernel", "native"],
     "has no FP4 tensor cores; vLLM runs FP4 weights through Marlin there"),
    (["plan", "llama-3.1-8b", "--gpu", "mi300x", "--quant", "nvfp4", "--fp4-kernel", "marlin"],
     "AMD Instinct MI300X runs neither"),
    (["plan", "llama-3.1-8b", "--gpu", "rtx5090", "--quant", "nvfp4", "--runtime", "llamacpp", "--fp4-kernel",
      "marlin"], "llama.cpp runs neither"),
    (["plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--fp4-kernel", "marlin", "--emit", "sglang"],
     "no SGLang launch flag for it is known here"),
    (["plan", "llama-3.1-70b", "--gpu", "rtx4080", "--emit", "vllm"], "vLLM would not start. Use --tp 4 --pp 3"),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--kv-dtype", ""], "'--kv-dtype': it is empty"),
    (["fleet", "llama-3.1-8b", "--users", "10", "--gpus", "gaudi3"], "No runtime here is fitted on these cards"),
    (["plan", "llama-3.1-70b", "--gpu", "h100", "--emit", "sglang"], "SGLang would not start. Use --tp 2"),
    (["plan", "llama-3.1-8b", "--gpu", "mi300x", "--kv-dtype", "nvfp4", "--emit", "vllm"],
     "--kv-dtype nvfp4 with --emit vllm: vLLM does not store its cache in nvfp4"),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--kv-dtype", "int8", "--engine", "sglang"],
     "SGLang does not store its cache in int8"),
    (["compare", "llama-3.1-8b", "--runtime", "vllm", "--kv-dtype", "int8", "--gpus", "h100"],
     "--kv-dtype int8 with --runtime vllm"),
    # llama.cpp's caches under compare and fleet: its 16- and 32-bit ones (its quantized ones are plan's
    # --cache-type-k/-v); fleet named "No card serves the workload", each row's refusal inside it
    (["compare", "llama-3.1-8b", "--runtime", "llamacpp", "--kv-dtype", "fp8", "--gpus", "rtx4090"],
     "--kv-dtype fp8 with --runtime llamacpp: llama.cpp does not store its cache in fp8. Give --kv-dtype fp32, fp16, "
     "bf16, or drop --runtime llamacpp"),
    (["compare", "llama-3.1-8b", "--runtime", "ollama", "--kv-dtype", "int8"], "llama.cpp does not store its cache"),
    (["fleet", "llama-3.1-8b", "--quant", "gguf-q4_k_m", "--runtime", "llamacpp", "--kv-dtype", "fp8", "--users", "4",
      "--gpus", "rtx4090"], "Give --kv-dtype fp32, fp16, bf16, or another --runtime"),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--quant", "mlx-4bit", "--emit", "sglang"], "is an MLX format"),
    (["plan", "llama-3.1-8b", "--gpu", "gaudi3", "--quant", "gguf-q4_0", "--emit", "llama-server"],
     "--emit llama-server on gaudi3: llama.cpp does not run on Intel Gaudi 3"),
    (["plan", "llama-3.1-8b", "--gpu", "gaudi3", "--quant", "gguf-q4_0", "--engine", "ollama"],
     "--engine ollama on gaudi3"),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--engine-version", "0.20"],
     "--engine-version sizes a serving engine's memory ledger, and this plan prints none"),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--block-size", "32", "--emit", "vllm"],
     "--emit vllm prints a launch line without it"),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--block-size", "32", "--emit", "vllm", "--engine", "vllm"],
     "--emit vllm prints a launch line without it"),
    (["plan", "deepseek-v3", "--gpu", "h100", "--tp", "8", "--emit", "vllm"],
     "per card) and the runtime's overhead exceed"),
    (["plan", "llama-3.1-8b", "--gpu", "rtx4090", "--quant", "gguf-q4_0", "--emit", "llama-server", "--nodes", "2"],
     "--tp/--pp/--nodes split across cards"),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang", "--engine-version", "0.20"],
     "--engine-version is vLLM's release"),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm", "--engine-version", "0.-1"],
     "--engine-version `0.-1` is not a vLLM version"),
    (["plan", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm", "--engine-version", "0.\u0663"],
     "is not a vLLM version"),
])
def test_values_that_meant_nothing_are_refused(run_cli, args, needle):
    code, out, err = run_cli(*args)
    assert_one_line_error(code, err)
    assert needle in err and out == ""


@pytest.mark.parametrize("args", [
    ["plan", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "8192", "--emit", "vllm"],
    # a dense draft beside an experts-only format: the draft takes the format's own scope (it was refused)
    ["plan", "qwen3-30b-a3b", "--gpu", "rtx4090", "--quant", "int4-g128", "--scope", "experts", "--spec",
     "draft=qwen3-0.6b,k=4,accept=0.7"],
    ["plan", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm", "--engine-version", "0.6.3.post1"],
    ["plan", "llama-3.1-8b", "--gpu", "b200", "--kv-dtype", "nvfp4", "--runtime", "trtllm"],
    ["plan", "llama-3.1-8b", "--gpu", "b200", "--kv-dtype", "nvfp4"],  # a what-if: no engine named
    ["compare", "llama-3.1-8b", "--runtime", "vllm", "--kv-dtype", "fp8", "--gpus", "h100"],
    ["compare", "llama-3.1-8b", "--runtime", "llamacpp", "--kv-dtype", "fp16", "--gpus", "rtx4090"],
])
def test_what_the_engines_take_still_runs(run_cli, args):
    code, out, err = run_cli(*args)
    assert code == 0 and out, err


def test_a_serving_engines_figure_on_a_gguf_file_says_its_support_is_experimental(run_cli):
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--quant", "gguf-q4_k_m", "--runtime", "vllm",
                             "--json")
    e = json.loads(out)["expected"]
    assert code == 0 and e["tok_s"] and any("highly experimental and under-optimized" in n for n in e["notes"])


def test_expert_scope_still_plans_a_moe_model(run_cli):
    code, out, err = run_cli("plan", "qwen3.6-35b-a3b", "--gpu", "h100", "--quant", "fp8", "--scope", "experts",
                             "--json")
    assert code == 0, err
    assert json.loads(out)["weights"]["scope"] == "experts"


def test_vendor_is_case_insensitive(run_cli):
    code, out, _ = run_cli("gpus", "--vendor", "NVIDIA", "--json")
    assert code == 0 and json.loads(out) and all(r["vendor"] == "NVIDIA" for r in json.loads(out))


def test_nodes_are_honoured(run_cli):
    """`--nodes 2 --tp 2` was reported "on 1 node(s)", its stage hand-off costed over NVLink."""
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100", "--tp", "2", "--nodes", "2", "--json")
    assert code == 0, err
    two = json.loads(out)
    assert two["parallel"]["nodes"] == 2 and two["parallel"]["pp"] == 2
    _, out, _ = run_cli("plan", "llama-3.1-70b", "--gpu", "h100", "--tp", "2", "--pp", "2", "--json")
    one = json.loads(out)
    assert one["parallel"]["nodes"] == 1
    # the hand-off between the two stages crosses the 50 GB/s node link instead of 450 GB/s NVLink
    assert two["decode"]["ceiling_tok_s"] < one["decode"]["ceiling_tok_s"]
    code, out, _ = run_cli("plan", "llama-3.1-70b", "--gpu", "h100", "--tp", "2", "--nodes", "2")
    assert "on 2 node(s)" in out


def test_emitted_launch_line_carries_the_users_values(run_cli):
    """`--emit vllm --max-model-len 1000` printed --max-model-len 4096, and --max-num-seqs the --batch default 1; the
    sequences are those of 1,000 tokens, the longest the engine takes (the plan's context where none is given), as
    many as both the plan's budget and vLLM's own ledger hold (455 and, under 0.34's extensible cache, 487.8: 455;
    at --gpu-util 0.9 the ledger's 440.6: 440)."""
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--emit", "vllm", "--max-model-len", "1000")
    assert code == 0, err
    line = out.strip().splitlines()[-1].split()
    assert line[line.index("--max-model-len") + 1] == "1000"
    _, js, _ = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--context", "1000", "--json")
    seqs = json.loads(js)["capacity"]["max_concurrent_sequences"]
    _, js, _ = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--context", "1000", "--engine", "vllm",
                       "--max-model-len", "1000", "--json")
    held = int(json.loads(js)["engine"]["max_concurrency"])
    assert held > seqs > 1 and line[line.index("--max-num-seqs") + 1] == str(seqs)
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--emit", "vllm", "--max-model-len", "1000",
                             "--gpu-util", "0.9")
    line = out.strip().splitlines()[-1].split()
    _, js, _ = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--context", "1000", "--engine", "vllm",
                       "--max-model-len", "1000", "--gpu-util", "0.9", "--json")
    held = int(json.loads(js)["engine"]["max_concurrency"])
    assert seqs > held > 1 and line[line.index("--max-num-seqs") + 1] == str(held)
    assert line[line.index("--gpu-memory-utilization") + 1] == "0.9"
    _, out, _ = run_cli("plan", "llama-3.1-8b", "--gpu", "h100", "--emit", "sglang", "--context", "8192")
    line = out.strip().splitlines()[-1].split()
    assert line[line.index("--context-length") + 1] == "8192"


@pytest.mark.parametrize("command", [["plan", "llama-3.1-8b", "--gpu", "h100"],
                                     ["fleet", "llama-3.1-8b", "--users", "10", "--gpus", "h100"]])
def test_emit_trtllm_says_there_is_no_launch_line_not_did_you_mean_vllm(run_cli, command):
    """`--emit trtllm` was answered "did you mean `vllm`?": a spelling hint for an engine the user named right."""
    code, out, err = run_cli(*command, "--emit", "trtllm")
    assert code == 2 and "did you mean" not in err
    assert "TensorRT-LLM's launch lines are not written here (--runtime trtllm sizes for it)" in err
    assert len(err.strip().splitlines()) == 1
