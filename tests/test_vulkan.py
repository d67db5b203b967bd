"""llama.cpp's Vulkan backend: its own fitted group, `--backend vulkan` on plan and compare, the rows that fit it, and
llama-bench files that say they ran on it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from llmsize.catalog.measurement import Row
from llmsize.estimate.runtimes import backend
from llmsize.estimate.expected import expect
from llmsize.estimate.kernels import matmul_rate
from llmsize.estimate.step_inputs import prefill_inputs
from llmsize.estimate.observed import asked_backend, observe
from llmsize.estimate.plan import PlanInputs, make_plan

ROOT = Path(__file__).resolve().parent.parent
CAL = ROOT / "tests" / "data" / "calibration"
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.fixture(scope="module")
def runtimes(catalog):
    return {r.id: r for r in catalog.runtimes.all()}


def _row(**kw) -> Row:
    base = dict(runtime_version="0253fb21f (9187)", backend="Vulkan", card="AMD Radeon 8060S Graphics",
                card_id="strix-halo", model="llama 7B Q4_0", model_id="llama-2-7b", format="Q4_0", test="tg128",
                kind="decode", batch=1, prompt_tokens=0, depth_tokens=0, gen_tokens=128, tok_s=55.73,
                verbatim="| llama 7B Q4_0 | 3.56 GiB | 6.74 B | Vulkan | 99 | 1 | 0 | tg128 | 55.73 ± 0.02 |")
    return Row(**{**base, **kw})


def test_a_row_that_says_vulkan_is_a_vulkan_observation_and_others_keep_their_cards_backend(catalog):
    gpu, model = catalog.gpu("strix-halo"), catalog.model("llama-2-7b")
    o = observe(_row(), "llamacpp", "t", model, gpu, published="2026-05")
    assert not isinstance(o, str), o
    assert (o.backend, o.family) == ("vulkan", "vulkan")
    rocm = observe(_row(backend="ROCm"), "llamacpp", "t", model, gpu, published="2026-05")
    assert (rocm.backend, rocm.family) == ("rocm", "rdna")  # gfx1151: an RDNA card under ROCm
    assert asked_backend(_row(backend="Vulkan (PR)")) == "vulkan" and asked_backend(_row(backend="CUDA")) is None
    # Vulkan through MoltenVK on a Mac, or a serving engine said to run on Vulkan, has no group to fit
    mac = observe(_row(card="Apple M4 Max", card_id="m4-max"), "llamacpp", "t", model, catalog.gpu("m4-max"))
    assert isinstance(mac, str) and "Vulkan" in mac


def test_llama_cpp_prompts_on_an_nvidia_card_run_at_int8_under_cuda_and_fp16_accumulate_under_vulkan(catalog):
    """Under CUDA llama.cpp's quantized prompts go through MMQ (INT8 mma); its Vulkan build multiplies dequantized
    weights on the tensor cores in FP16 with FP16 accumulation (ggml-vulkan's f16acc pipelines at the default
    precision): half the INT8 rate, twice a GeForce card's FP16 figure (FP32 accumulation). On an AMD card, and an
    NVIDIA card without tensor cores, the faster of fp16 and fp32."""
    p = make_plan(catalog.model("llama-3.1-8b"), catalog.gpu("rtx4090"), PlanInputs(quant="gguf-q4_k_m"),
                  search_fit=False)
    cuda_rate, cuda_name = matmul_rate(p, "llamacpp")
    vk_rate, vk_name = matmul_rate(p, "llamacpp", be="vulkan")
    g = catalog.gpu("rtx4090").dense_tflops
    assert (cuda_name, cuda_rate) == ("INT8", g.int8 * 1e12)
    # RTX 4090: 660.6 TOPS INT8 -> 330.3 TFLOPS FP16 with FP16 accumulation, 2 x its catalog FP16 figure (165.2)
    assert vk_name == "FP16 (FP16 accumulate)" and vk_rate == g.int8 / 2 * 1e12 == pytest.approx(2 * g.fp16 * 1e12, rel=1e-3)
    assert prefill_inputs(p, "llamacpp", be="vulkan").peak_flop_per_s == vk_rate
    # the RTX PRO 6000 (a workstation card) accumulates FP32 at full rate: the same FP16 figure either way
    pro = make_plan(catalog.model("llama-3.1-8b"), catalog.gpu("rtxpro6000"), PlanInputs(quant="gguf-q4_k_m"),
                    search_fit=False)
    assert matmul_rate(pro, "llamacpp", be="vulkan")[0] == catalog.gpu("rtxpro6000").dense_tflops.fp16 * 1e12
    for card in ("rx7900xtx", "gtx1080"):  # no NVIDIA tensor cores: the faster of fp16 and fp32
        q = make_plan(catalog.model("llama-3.1-8b"), catalog.gpu(card), PlanInputs(quant="gguf-q4_k_m"),
                      search_fit=False)
        d = catalog.gpu(card).dense_tflops
        assert matmul_rate(q, "llamacpp", be="vulkan") == (max(d.fp16 or 0, d.fp32 or 0) * 1e12, "FP16/FP32")


def test_the_vulkan_group_is_fitted_on_its_own_rows_and_says_so(runtimes):
    g = runtimes["llamacpp"].backends["vulkan"]
    assert "vulkan" in g.row_backends and g.decode_held_out.rows >= 80
    assert {"strix-halo", "r9700"} <= set(g.cards)
    assert 0 < g.band[0] < 1 < g.band[1]


def test_plan_backend_vulkan_prices_llama_cpp_on_vulkan(run_cli, runtimes):
    args = ("plan", "llama-3.1-8b", "--gpu", "rx7900xtx", "--quant", "gguf-q4_k_m", "--json")
    code, out, err = run_cli(*args, "--backend", "vulkan")
    assert code == 0, err
    e = json.loads(out)["expected"]
    assert (e["runtime"], e["backend"]) == ("llamacpp", "vulkan") and "Vulkan" in e["basis"]
    code, out, err = run_cli(*args)
    native = json.loads(out)["expected"]
    assert native["backend"] == "rocm" and native["tok_s"] != e["tok_s"]
    # the same figure through the estimator: --backend is a plan input the expected speed reads
    code, out, err = run_cli(*args[:-1], "--backend", "vulkan")
    assert code == 0 and "Expected in llama.cpp on Vulkan" in out


@pytest.mark.parametrize("args, words", [
    (("--gpu", "rtx4090", "--backend", "vulkan"), "vLLM has no Vulkan backend"),  # the default runtime: vLLM
    (("--gpu", "rtx4090", "--runtime", "sglang", "--backend", "vulkan"), "SGLang has no Vulkan backend"),
    (("--gpu", "m4-max", "--quant", "gguf-q4_k_m", "--backend", "vulkan"), "runs on Metal on Apple silicon"),
    (("--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--backend", "rocm"), "own backend is CUDA (NVIDIA), not ROCm"),
    (("--gpu", "rtx4090", "--backend", "opencl"), "`opencl` is not one of cuda, rocm, metal, vulkan"),
    # CDNA has no graphics engine: RADV refuses it, AMDVLK lists no Instinct card (runtimes.CDNA_TARGETS)
    (("--gpu", "mi300x", "--quant", "gguf-q4_k_m", "--backend", "vulkan"), "AMD's Vulkan drivers do not run"),
    (("--gpu", "mi355x", "--runtime", "llamacpp", "--backend", "vulkan"), "is an Instinct (CDNA) card"),
    (("--gpu", "mi250x", "--runtime", "llamacpp", "--backend", "vulkan"), "is an Instinct (CDNA) card"),
])
def test_a_backend_the_plan_cannot_run_is_refused_in_one_line(run_cli, args, words):
    code, out, err = run_cli("plan", "llama-3.1-8b", *args)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1 and not out
    assert "Traceback" not in err


def test_compare_backend_vulkan_prices_each_card_and_refuses_a_runtime_without_it(run_cli):
    code, out, err = run_cli("compare", "llama-3.1-8b", "--quant", "gguf-q4_k_m", "--gpus", "rx7900xtx,m4-max",
                             "--backend", "vulkan", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["inputs"]["backend"] == "vulkan"
    rows = {r["gpu"]: r for r in d["rows"]}
    assert rows["rx7900xtx"]["expected_tok_s"] and rows["m4-max"]["expected_tok_s"] is None
    # Vega 20 (an MI50) has graphics and RADV runs it; an MI300X gets no Vulkan figure
    code, out, err = run_cli("compare", "llama-3.1-8b", "--quant", "gguf-q4_k_m", "--gpus", "mi50-32gb,mi300x",
                             "--backend", "vulkan", "--json")
    rows = {r["gpu"]: r for r in json.loads(out)["rows"]}
    assert rows["mi50-32gb"]["expected_tok_s"] and rows["mi300x"]["expected_tok_s"] is None
    code, out, err = run_cli("compare", "llama-3.1-8b", "--gpus", "rx7900xtx", "--runtime", "vllm", "--backend",
                             "vulkan")
    assert code == 2 and "vLLM has no Vulkan backend" in err and not out


def test_a_llama_bench_file_that_ran_on_vulkan_calibrates_the_vulkan_figure(run_cli, tmp_path):
    """llama-bench writes its backend (`backends`: "CUDA", "Vulkan"); the shipped file (an RTX 4080, CUDA) made a
    Vulkan run here. Without --backend the plan takes the run's; against --backend cuda it is refused."""
    runs = json.loads((CAL / "llama-bench.json").read_text())
    for r in runs:
        r["backends"] = "Vulkan"
    f = tmp_path / "vk.json"
    f.write_text(json.dumps(runs))
    from llmsize.importer.calibration import read_run

    assert read_run(f).backend == "vulkan" and read_run(CAL / "llama-bench.json").backend is None
    args = ("plan", "qwen2.5-7b", "--gpu", "rtx4080super", "--quant", "gguf-q4_k_m", "--json", "--calibrate", str(f))
    code, out, err = run_cli(*args)
    assert code == 0, err
    e = json.loads(out)["expected"]
    assert e["backend"] == "vulkan" and e["basis"].startswith("calibrated by your run")
    code, out, err = run_cli(*args, "--backend", "cuda")
    assert code == 2 and "a run on Vulkan" in err and len(err.strip().splitlines()) == 1
    # and a run on the card's own backend does not calibrate a Vulkan figure
    code, out, err = run_cli(*args[:-1], str(CAL / "llama-bench.json"), "--backend", "vulkan")
    assert code == 2 and "a run on CUDA (NVIDIA); it cannot calibrate a figure on Vulkan" in err


def test_the_vulkan_figure_comes_from_the_vulkan_group(catalog, runtimes):
    """Same plan, two groups: the figure differs exactly as the groups' constants do (no CUDA constants leak in)."""
    p = make_plan(catalog.model("llama-3.1-8b"), catalog.gpu("rtx3090"), PlanInputs(quant="gguf-q4_0"),
                  search_fit=False)
    cuda = expect(p, runtimes, "llamacpp").expected
    vk = expect(p, runtimes, "llamacpp", gpu_backend="vulkan").expected
    assert (cuda.backend, vk.backend) == ("cuda", "vulkan")
    assert backend(catalog.gpu("rtx3090")) == "cuda" and backend(catalog.gpu("rtx3090"), "vulkan") == "vulkan"
    assert vk.tok_s != cuda.tok_s and vk.tok_s < vk.ceiling_tok_s


def test_a_vulkan_plan_of_bf16_experts_says_what_published_runs_decoded_at(catalog, runtimes, monkeypatch):
    """BF16 MoE decode on Vulkan leaves the fit (its experts take the tiled matmul: expected.VULKAN_BF16_EXPERTS_NOTE);
    those rows, priced with the shipped constants as if they counted, give the note's range. The note is on a Vulkan
    plan of BF16 experts only: not a Q8_0 GGUF, a dense BF16 model, or the same plan under ROCm."""
    from test_speed import _priced_as_if_counted

    from llmsize.estimate.expected import VULKAN_BF16_EXPERTS_NOTE

    got = _priced_as_if_counted(catalog, monkeypatch, "vulkan_bf16_experts", "BF16 routed experts",
                                "llamacpp-vulkan-*.yaml")
    assert len(got) >= 12 and max(got) < 1
    # Gemma 4 26B-A4B's six rows (its file's rows 109-119) sit near the figure, the others far below it
    slow, gemma = sorted(got)[:-6], sorted(got)[-6:]
    assert f"decoded at {min(slow):.2f}-{max(slow):.2f} of such a figure" in VULKAN_BF16_EXPERTS_NOTE
    assert f"Gemma 4 26B-A4B's at {min(gemma):.2f}-{max(gemma):.2f}" in VULKAN_BF16_EXPERTS_NOTE
    assert max(slow) < 0.6 < 0.7 < min(gemma)
    for model, quant, be, says in (("qwen3-30b-a3b", "bf16", "vulkan", True), ("qwen3-30b-a3b", "gguf-q8_0",
                                   "vulkan", False), ("qwen3-8b", "bf16", "vulkan", False),
                                   ("qwen3-30b-a3b", "bf16", None, False)):
        p = make_plan(catalog.model(model), catalog.gpu("strix-halo"), PlanInputs(quant=quant), search_fit=False)
        e = expect(p, runtimes, "llamacpp", gpu_backend=be).expected
        assert (VULKAN_BF16_EXPERTS_NOTE in e.notes) == says, (model, quant, be)


def test_the_readme_quotes_the_vulkan_groups_fit(runtimes):
    """The group's constants are llama.cpp's pool's (its own 150 rows hold out a little better so, 2026-12-07): the
    README quotes the pool's rows and prompts, the Vulkan rows' own count, cards and held-out errors both ways."""
    import re

    g = runtimes["llamacpp"].backends["vulkan"]
    readme = (ROOT / "README.md").read_text().replace("\n", " ")
    o, p = g.own_decode_held_out, g.prefill_held_out
    own = re.search(r"(\d+) decode rows of its own on Vulkan from \d+ sources and (\d+) cards, its own held out worse "
                    r"on them \(([\d.]+%) / ([\d.]+%)", g.borrowed)
    assert own and int(own.group(1)) == o.rows
    assert f"together ({g.rows_decode} decode and {g.rows_prefill} prompt rows)" in readme
    assert f"own {o.rows} decode rows ({own.group(2)} cards: " in readme
    assert (f"at {o.median_abs_error:.1%} / {o.p90_abs_error:.1%} median / p90 for decode (their own: "
            f"{own.group(3)} / {own.group(4)})") in readme
    assert f"the pool's prompts at {p.median_abs_error:.1%} / {p.p90_abs_error:.1%}" in readme
    names = ("a Strix Halo", "an R9700", "an RX 9070 XT", "an RX 5700 XT", "an RX 6800 XT", "an RX 7900 XT",
             "an RX 7900 XTX", "4070 Ti", "3090", "4090", "5090")
    assert len(names) == int(own.group(2)) and all(n in readme for n in names)
    # the Intel sentence quotes the reason's range, which the Arc test holds to the rows
    from llmsize.estimate.runtimes import INTEL_VULKAN_WHY

    assert "decoded at 0.26-1.01 of what the Vulkan group predicts" in readme and "0.26-1.01" in INTEL_VULKAN_WHY


@pytest.mark.parametrize("printed, read", [
    ("Vulkan", ("vulkan", None)), ("RPC,Vulkan", ("vulkan", None)), ("Vulkan,RPC", ("vulkan", None)),
    ("Vulkan (PR)", ("vulkan", None)), ("SYCL", (None, "SYCL")), ("CPU", (None, "CPU")), ("OpenCL", (None, "OpenCL")),
    ("CUDA 12.4", (None, None)), ("ROCm", (None, None)), ("MTL,BLAS", (None, None)), ("", (None, None)),
    (None, (None, None)), (12, (None, None)),
])
def test_one_reading_of_a_printed_backend_serves_rows_and_llama_bench_files(printed, read):
    """observed.asked_backend (a row's backend column) and the calibration importer (llama-bench's `backends`, after
    its own checks: one GPU backend, a known one or none) read a backend name through expected.printed_backend."""
    from llmsize.estimate.runtimes import printed_backend

    assert printed_backend(printed) == read


def test_intel_arc_cards_run_llama_cpp_on_vulkan_and_say_why_there_is_no_figure(run_cli, catalog, monkeypatch,
                                                                               tmp_path):
    """An Arc card's own backend here is Vulkan and its default runtime llama.cpp; its expected figure is refused with
    the range the dataset's Arc decode runs (outside the fit) price at under the Vulkan group, which the reason
    quotes; a llama-bench file from the card calibrates it; vLLM there is not modeled; Gaudi (Intel, datacenter) runs
    none of these runtimes."""
    from test_speed import _priced_as_if_counted

    from llmsize.estimate.runtimes import INTEL_VULKAN_REASON, default_runtime

    assert backend(catalog.gpu("arc-b580")) == "vulkan" and backend(catalog.gpu("gaudi3")) is None
    assert default_runtime("bf16", catalog.gpu("arc-a770"))[0] == "llamacpp"
    decode = _priced_as_if_counted(catalog, monkeypatch, "intel_vulkan", "Intel Arc on Vulkan", "llamacpp-vulkan-*.yaml",
                                   "decode")
    assert len(decode) >= 6
    assert f"decoded at {min(decode):.2f}-{max(decode):.2f} of its figure" in INTEL_VULKAN_REASON
    code, out, err = run_cli("plan", "llama-2-7b", "--gpu", "arc-a770", "--quant", "gguf-q4_0", "--json")
    assert code == 0, err
    e = json.loads(out)["expected"]
    assert (e["runtime"], e["backend"], e["tok_s"]) == ("llamacpp", "vulkan", None)
    assert e["reason"] == INTEL_VULKAN_REASON
    code, out, err = run_cli("plan", "llama-2-7b", "--gpu", "arc-a770", "--runtime", "vllm", "--json")
    assert "not modeled here" in json.loads(out)["expected"]["reason"]
    runs = json.loads((CAL / "llama-bench.json").read_text())
    for r in runs:
        r.update(gpu_info="Intel(R) Arc(TM) A770 Graphics", backends="Vulkan")
        r["avg_ts"] = 500.0 if r["n_prompt"] else 30.0
    arc = tmp_path / "arc.json"
    arc.write_text(json.dumps(runs))
    code, out, err = run_cli("plan", "qwen2.5-7b", "--gpu", "arc-a770", "--quant", "gguf-q4_k_m", "--json",
                             "--calibrate", str(arc))
    assert code == 0, err
    e = json.loads(out)["expected"]
    assert e["tok_s"] == pytest.approx(30.0, rel=0.2) and e["basis"].startswith("calibrated by your run")


def test_a_llama_bench_run_on_sycl_or_on_another_backend_does_not_calibrate_an_arc_figure(run_cli, tmp_path):
    """An Arc card's figure is Vulkan's: a SYCL run (no group here) is refused as such, a CUDA run (another group's
    constants) as a run on CUDA; a Vulkan run calibrates it (the test above)."""
    runs = json.loads((CAL / "llama-bench.json").read_text())
    for backends, words in (("SYCL", "ran on llama.cpp's SYCL backend, which has no group"),
                            ("CUDA", "a run on CUDA (NVIDIA); it cannot calibrate a figure on Vulkan")):
        for r in runs:
            r["backends"] = backends
        f = tmp_path / f"{backends}.json"
        f.write_text(json.dumps(runs))
        code, out, err = run_cli("plan", "qwen2.5-7b", "--gpu", "arc-b580", "--quant", "gguf-q4_k_m", "--calibrate",
                                 str(f))
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1 and not out, (backends, err)


def test_the_arc_and_gaudi_refusals_hold_across_commands(run_cli):
    # fleet sizes nothing on an Arc card, and says why (the same reason as plan)
    code, out, err = run_cli("fleet", "llama-3.1-8b", "--users", "10", "--gpus", "arc-b580")
    assert code == 2 and "--runtime llamacpp (the default)" in err and "Intel Arc A770" in err
    # a serving engine on an Arc card: no figure, and not said to run on Vulkan
    code, out, err = run_cli("plan", "llama-2-7b", "--gpu", "arc-a770", "--runtime", "vllm", "--json")
    e = json.loads(out)["expected"]
    assert e["backend"] is None and "not modeled here" in e["reason"]
    code, out, err = run_cli("plan", "llama-2-7b", "--gpu", "arc-a770", "--runtime", "vllm")
    assert "Expected in vLLM (asked for)" in out
    # Gaudi runs none of these runtimes, Vulkan included
    code, out, err = run_cli("plan", "llama-2-7b", "--gpu", "gaudi3", "--quant", "gguf-q4_0", "--backend", "vulkan")
    assert code == 2 and "runs none of these runtimes" in err
    # fit's speed floor on a card without a figure says why, instead of dropping every row
    code, out, err = run_cli("fit", "--gpu", "arc-b580", "--min-tok-s", "1")
    assert code == 2 and "llama.cpp has no expected figure on arc-b580" in err and not out
    # compare on Vulkan under a safetensors format's default runtime (vLLM) would price nothing: refused
    code, out, err = run_cli("compare", "llama-3.1-8b", "--backend", "vulkan", "--gpus", "rtx4090")
    assert code == 2 and "default runtime for bf16 weights" in err and "--runtime llamacpp" in err
    # measure --server checks the backend against the card before any request (the port is closed)
    code, out, err = run_cli("measure", "--server", "http://127.0.0.1:9", "--gpu", "rtx4090", "--backend", "metal")
    assert code == 2 and "own backend is CUDA (NVIDIA), not Metal" in err


def test_compare_keeps_the_cards_whose_runtime_takes_the_cache_and_refuses_the_others_in_their_row(run_cli):
    """llama.cpp (an Apple or Arc card's runtime) has no FP8 cache: those rows say so, the others are priced."""
    code, out, err = run_cli("compare", "llama-3.1-8b", "--kv-dtype", "fp8", "--gpus", "h100,m4-max,arc-b580",
                             "--json")
    assert code == 0, err
    rows = {r["gpu"]: r for r in json.loads(out)["rows"]}
    assert rows["h100-sxm"]["ceiling_tok_s"] and rows["h100-sxm"]["expected_backend"] == "cuda"
    assert rows["m4-max"]["ceiling_tok_s"] is None and rows["arc-b580"]["ceiling_tok_s"] is None
    code, out, err = run_cli("compare", "llama-3.1-8b", "--kv-dtype", "fp8", "--gpus", "m4-max,arc-b580")
    assert code == 2 and "has no such cache type" in err and "Give --kv-dtype fp16, bf16 or fp32" in err
    assert "`plan --cache-type-k q8_0 --cache-type-v q8_0 --flash-attn on`" in err  # compare has no such options


def test_llama_cpp_and_mlx_give_no_figure_for_a_format_their_files_cannot_hold(run_cli):
    """llama.cpp loads GGUF files (no FP8 or AWQ type; NVFP4 as a converted checkpoint, tests/test_llamacpp_memory.py),
    MLX its own formats: no expected figure, and why; 16-bit weights load everywhere."""
    for rt, quant, words in (("llamacpp", "fp8", "fp8 is not a GGUF type"),
                             ("llamacpp", "awq-int4-g128", "not a GGUF type"), ("mlx", "gguf-q4_k_m", "")):
        gpu = "m4-max" if rt == "mlx" else "rtx4090"
        code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", gpu, "--quant", quant, "--runtime", rt, "--json")
        assert code == 0, err
        e = json.loads(out)["expected"]
        assert e["tok_s"] is None and words in e["reason"], (rt, quant, e["reason"])
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--quant", "bf16", "--runtime", "llamacpp",
                             "--json")
    assert json.loads(out)["expected"]["tok_s"] > 0


@pytest.mark.parametrize("args, words", [
    (("--gpu", "m4-max", "--engine", "vllm"), "--engine vllm on m4-max: vLLM has no Metal backend"),
    (("--gpu", "arc-b580", "--emit", "vllm"), "--emit vllm on arc-b580: vLLM on Intel cards is not modeled"),
    (("--gpu", "arc-b580", "--engine", "trtllm"), "TensorRT-LLM runs on NVIDIA cards only"),
])
def test_a_serving_engines_ledger_or_launch_line_is_refused_on_a_card_it_does_not_run_on(run_cli, args, words):
    code, out, err = run_cli("plan", "llama-3.1-8b", *args)
    assert code == 2 and words in err and not out and len(err.strip().splitlines()) == 1
