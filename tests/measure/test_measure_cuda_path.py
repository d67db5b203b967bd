"""The CUDA path of `llmsize measure`, run on the CPU: what a GPU run does between its checks and its report (the
card read through NVML, the catalog match, the self-checks, the word kernels and the fused step, the soft-cap and
token kernel, the timed loop with CUDA events, plan's prediction, the JSON) with the card faked (FakeGpu in place of
gpu.CudaGpu, whose own calls tests/measure/test_gpu.py checks), the device a CPU one (so the Triton kernels run
through the interpreter) and the model the tiny Gemma-4-shaped one under Gemma 4 12B's name, in float32 (Triton
3.9's interpreter multiplies bf16 dot operands as their integer bits: the attention kernel's bf16 dots are checked
on the card, by measure's own attention self-check and tests/gpu). None of this code runs in CPU-only `measure
--device cpu`, so without this test a slip in it (an attribute that does not exist, say) would only show on a
GPU, after the whole run."""

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from llmsize.measure import card, gemma4, run

from .wall_event import WallEvent

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
H200_NVML = card.CardInfo(index=0, name="NVIDIA H200", driver="580.159.03", vram_total_bytes=150_754_820_096,
                          vram_free_bytes=150_000_000_000, bus_width_bits=6016, max_memory_clock_mhz=3201,
                          max_sm_clock_mhz=1980, sm_clock_mhz=1980, memory_clock_mhz=3201, power_limit_w=700.0)


class FakeGpu:
    """gpu.CudaGpu's methods answered without a card: a CPU device (the Triton kernels run through the
    interpreter), float32, an H200 as NVML reads it, wall-clock events, no graph (the step itself). Records the
    methods asked, so a test can see the run went through each."""

    def __init__(self, torch_=None, index=0):
        self.device, self.dtype, self.index, self.asked = torch.device("cpu"), torch.float32, index, []

    def _ask(self, name, value=None):
        self.asked.append(name)
        return value

    def require(self, triton):
        return self._ask("require")

    def open(self):
        return self._ask("open")

    def card(self):
        return self._ask("card", H200_NVML)

    def clocks(self):
        return self._ask("clocks", {"sm_clock_mhz": 1980, "memory_clock_mhz": 3201})

    def free_bytes(self):
        return self._ask("free_bytes", 140 * 2 ** 30)

    def probe(self, buffer_bytes):
        return self._ask("probe", (4400.0, "fake probe"))

    def synchronize(self):
        return self._ask("synchronize")

    def capture(self, step):
        return self._ask("capture", step)

    def event(self):
        return WallEvent()

    def peak_memory_bytes(self):
        return self._ask("peak_memory_bytes", 0)

    def capability(self):
        return self._ask("capability", "9.0")


@pytest.fixture
def fake_gpu():
    return FakeGpu()


@pytest.fixture
def fake_cuda(monkeypatch, fake_gpu):
    """The card faked (fake_gpu, which the run takes in place of gpu.CudaGpu); Gemma 4 12B the tiny model (its
    plan figures still Gemma 4 12B's on an H200). The self-checks answer "passed" without running (each takes 4-30
    s under the interpreter, and tests/measure/test_gemma4_decode.py and test_logits.py run each of them for real,
    and test_kernel_plan.py what a failed one does). The tiny model cut to one sliding and one full layer: these
    tests follow the run's plumbing, whose every step is per layer kind, not its numbers (the decoder's tests keep
    the two sliding layers a cache mixed up between layers needs): batch 17 took 13.0 s with three layers and 8.3 s
    with two, the byte kernel's batch 4 5.6 and 3.4 s (2026-12-04, `python -m pytest -n 2 -p no:cacheprovider
    tests/measure/test_measure_cuda_path.py --durations=5`). Returns the checks' calls, in order."""
    monkeypatch.setattr(run, "CudaGpu", lambda torch_, index: fake_gpu)
    # NVML asked for a driver before torch is imported (preflight.require_driver): the fake card has one
    monkeypatch.setattr(run.preflight, "require_driver", lambda index: fake_gpu._ask("driver"))
    monkeypatch.setattr(gemma4, "GEMMA4_12B", dataclasses.replace(
        gemma4.GEMMA4_TINY, name="gemma-4-12b", layer_types=(gemma4.SLIDING, gemma4.FULL)))
    from llmsize.measure import selfcheck
    faked = []

    def words_kernel_check(device, batch=1):
        faked.append(("words", batch))
        return True, frozenset()

    def fused_step_ok(device, gemv="torch", fold=True):
        faked.append(("fused", gemv, fold))
        return True

    def attention_ok(device, fold_combine):
        faked.append(("attention", fold_combine))
        return True

    def cap_argmax_ok(device):
        faked.append(("cap",))
        return True
    for check in (words_kernel_check, fused_step_ok, attention_ok, cap_argmax_ok):
        monkeypatch.setattr(selfcheck, check.__name__, check)
    return faked


def test_the_bf16_baseline_gpu_path(fake_cuda):
    """The baseline the headline compares with (`measure --quant bf16 --no-probe`): cuBLAS GEMMs (here torch's
    matmul), the fused kernels between them once their check passes, plan's bf16 prediction."""
    r = run.measure(run.MeasureOptions(quant="bf16", context=8, tokens=2, warmup=1, probe=False))
    rr, p = r["run"], r["predicted"]
    assert fake_cuda == [("fused", "torch", True), ("attention", False), ("attention", True), ("cap",)]
    assert rr["gemv"] == "torch" and rr["fused"] and rr["lm_head"] == {"kernel": "cublas+cap_argmax"}
    assert rr["self_checks"] and all(rr["self_checks"].values()), rr["self_checks"]
    assert r["gpu"]["probed_read_bandwidth_gb_s"] is None and r["achieved"]["fraction_of_probe"] is None
    assert p["format"] == "bf16" and p["roofline_bound"] == "memory" and p["ceiling_tok_s_probe"] is None
    # the bf16 step reads ~3x the NVFP4 one's bytes (plan at 12 positions: 23.82 GB against 8.15, x 2.92)
    assert 2.5 < p["bytes_per_step"] / run.predicted("nvfp4", 12, 1, {})["bytes_per_step"] < 3.5


@pytest.mark.parametrize("batch", [1, 17])
def test_the_gpu_path_runs_end_to_end(fake_cuda, fake_gpu, batch, tmp_path, run_cli):
    """Batch 1, through the CLI as a user runs it (report on screen, JSON saved): the word kernel, the fused
    step with its epilogues; batch 17, through run.measure: the tensor-core word GEMV's row blocks. Both end in
    the soft-cap and token kernel. Every self-check named and passed, the
    report's keys filled, plan's prediction for an H200 beside the measurement."""
    from rich.console import Console

    from llmsize.render.measure_report import render_measure
    if batch == 1:
        code, out, err = run_cli("measure", "--context", "8", "--tokens", "2", "--warmup", "1", "--save",
                                 str(tmp_path / "run.json"))
        assert code == 0, err
        text = " ".join(out.split())
        assert "NVIDIA H200" in text and "What `plan` predicted for this card" in text and "roofline at batch 1" in text
        r = json.loads((tmp_path / "run.json").read_text())
    else:
        # a one-token prompt: the row blocks under test are the decode step's (17 prompts of 8 cost ~2 s more)
        r = run.measure(run.MeasureOptions(context=1, tokens=2, warmup=1, batch=batch))
        json.dumps(r)
    g, rr, p = r["gpu"], r["run"], r["predicted"]
    assert fake_cuda == [("words", batch), ("fused", "words", True), ("attention", False), ("attention", True),
                         ("cap",)]  # asked once each, before the build
    # the card: checked and read before any work, the probe before the build, the graph after the warm-up, the
    # clocks, capability and peak memory for the report
    asked = fake_gpu.asked
    assert asked[:6] == ["driver", "require", "card", "open", "free_bytes", "probe"], asked
    assert asked.index("capture") < asked.index("clocks") and {"capability", "peak_memory_bytes"} <= set(asked)
    assert g["name"] == "NVIDIA H200" and g["catalog_id"] == "h200-sxm" and g["compute_capability"] == "9.0"
    assert g["theoretical_bandwidth_gb_s"] == pytest.approx(4814.3, abs=0.1)  # 2 x 3,201 MHz x 6,016 bits / 8
    assert g["probed_read_bandwidth_gb_s"] == 4400.0 and g["datasheet_bandwidth_gb_s"] == 4800.0
    assert rr["gemv"] == "words" and rr["fused"] and rr["cuda_graph"] and rr["tokens_measured"] == 2
    assert rr["self_checks"] and all(rr["self_checks"].values()), rr["self_checks"]
    if batch == 1:
        assert rr["fused_epilogues"]
        assert "words kernel, 2-16 rows on the tensor cores" not in rr["self_checks"]  # batch paths unchecked
    else:
        assert rr["self_checks"]["words kernel, 17-256 rows on the tensor cores"]
    assert rr["lm_head"] == {"kernel": "cublas+cap_argmax"} and rr["self_checks"]["soft-cap and token kernel"]
    # plan: Gemma 4 12B NVFP4 on the H200 at this run's batch and attended length
    assert p["catalog_gpu"] == "h200-sxm" and p["format"] == "nvfp4" and p["roofline_bound"] == "memory"
    assert p["ceiling_tok_s"] == pytest.approx(p["ceiling_tok_s_datasheet"])
    assert p["roofline_tok_s"] == pytest.approx(p["ceiling_tok_s_datasheet"], rel=1e-6)  # memory-bound: equal
    assert p["measured_fraction_of_ceiling_probe"] == pytest.approx(r["decode"]["tok_s"] / p["ceiling_tok_s_probe"])
    for key in ("fraction_of_theoretical", "fraction_of_probe", "fraction_of_datasheet"):
        assert r["achieved"][key] > 0
    render_measure(r, Console(width=100, file=open("/dev/null", "w")))
    # what benchmarks/measure_gpu.sh makes of such a run: the Markdown block, and decode.py's table row
    f = tmp_path / f"measure-b{batch}.json"
    f.write_text(json.dumps(r))
    out = subprocess.run([sys.executable, str(BENCH / "measure_summary.py"), str(f)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "## `llmsize measure` on NVIDIA H200" in out.stdout and "| nvfp4 | words, fused" in out.stdout
    assert "words kernel: ok" in out.stdout
    sys.path.insert(0, str(BENCH))
    try:
        import decode
    finally:
        sys.path.remove(str(BENCH))
    row = decode.row(r)
    assert row.startswith(f"| nvfp4 | {batch} |") and row.endswith(" (memory) |")


def test_config_timing_keeps_the_fastest(monkeypatch):
    """tuner.time_configs, which every kernel's first call per shape runs on a GPU: each configuration launched
    on the weight copies in turn (three warm-ups, then its launches captured once and replayed in three rounds,
    the configurations in turn, each timed between two CUDA events), the one with the fastest round kept: here
    64 rows, slow in two rounds of three (another process on the card, say) but the fastest in one."""
    from llmsize.measure import tuner
    monkeypatch.setattr(torch.cuda, "Event", WallEvent)
    captured = []
    monkeypatch.setattr(tuner, "replay_of", lambda fn: captured.append(fn) or fn)  # the replay runs fn again
    seen = []
    costs_s = {32: (0.001,) * 3, 64: (0.003, 0.0001, 0.003), 16: (0.002,) * 3}  # a launch's cost in each round

    def launch(bn, mats):
        n = sum(1 for b, _ in seen if b == bn)
        seen.append((bn, mats))
        if n >= 3:  # after the warm-ups: replayed rounds of 10 launches
            time.sleep(costs_s[bn][(n - 3) // 10])
    best = tuner.time_configs(launch, [(32,), (64,), (16,)], copies=["w0", "w1", "w2"])
    assert best == (64,) and len(captured) == 3  # one capture per configuration
    assert {m for _, m in seen} == {"w0", "w1", "w2"}  # every copy read: DRAM, not one L2-resident matrix
    assert [b for b, _ in seen].count(64) == 3 + 3 * 10  # three warm-ups, then three rounds of max(10, copies)
    order = [b for b, _ in seen[9:]]  # after the warm-ups (3 each) the rounds take the configurations in turn
    assert order[:30] == [32] * 10 + [64] * 10 + [16] * 10 and order[30:60] == order[:30]


def test_config_timing_without_a_capture_times_the_launches(monkeypatch):
    """A configuration whose launches cannot be captured is timed as launched."""
    from llmsize.measure import tuner
    monkeypatch.setattr(torch.cuda, "Event", WallEvent)

    def no_capture(fn):
        raise RuntimeError("operation not permitted when stream is capturing")
    monkeypatch.setattr(tuner, "replay_of", no_capture)
    seen = []

    def launch(bn, cost_s, mats):
        seen.append(bn)
        time.sleep(cost_s)
    assert tuner.time_configs(launch, [(32, 0.002), (64, 0.0)], copies=["w0"]) == (64, 0.0)
    assert seen.count(32) == seen.count(64) == 3 + 3 * 10


def test_a_run_s_tuning_is_a_value_frozen_before_the_graph(monkeypatch):
    """tuner.Tuning: each shape timed once (its first call), a single configuration taken untimed; once the run
    freezes it (after the warm-up steps, before the CUDA graph is captured), a shape first met then is an error,
    not a timing inside the graph; each kernel's choices read back apart."""
    from llmsize.measure import tuner
    timed = []
    monkeypatch.setattr(tuner, "time_configs", lambda launch, configs, copies: timed.append(configs) or configs[1])
    monkeypatch.setattr(tuner, "copies_beyond_l2", lambda mats: [mats])
    t = tuner.Tuning()
    assert t.best(("tc", 64, 128, 4, False), None, [(1,), (2,)], ()) == (2,)
    assert t.best(("tc", 64, 128, 4, False), None, [(1,), (2,)], ()) == (2,) and len(timed) == 1  # kept
    assert t.best(("words", 64, 128, 1), None, [(7,)], ()) == (7,) and len(timed) == 1  # one: not timed
    t.freeze()
    assert t.best(("tc", 64, 128, 4, False), None, [(1,), (2,)], ()) == (2,)  # known shapes still served
    with pytest.raises(tuner.TuningFrozenError, match="not timed before the decode step was captured"):
        t.best(("tc", 32, 128, 4, False), None, [(1,), (2,)], ())
    assert t.chosen("tc") == {(64, 128, 4, False): (2,)} and t.chosen("words") == {(64, 128, 1): (7,)}


def test_the_gpu_path_with_the_byte_kernel(fake_cuda):
    """What the sweep runs when the GEMV microbenchmark finds the byte kernel faster than the word kernel on the
    card (`decode.py --gemv triton --fused` at batch 4): the fused step around gemv.py's byte kernel, no word
    kernel checks, the soft-cap and token kernel, plan beside it."""
    r = run.measure(run.MeasureOptions(context=8, tokens=2, warmup=1, batch=4, gemv="triton", fused=True))
    rr = r["run"]
    assert rr["gemv"] == "triton" and rr["fused"] and rr["batch_kernels"] is None
    assert not any(k.startswith("words kernel") for k in rr["self_checks"])
    assert fake_cuda == [("fused", "triton", True), ("attention", False), ("attention", True), ("cap",)]
    assert rr["lm_head"] == {"kernel": "cublas+cap_argmax"} and all(rr["self_checks"].values()), rr["self_checks"]
    assert r["predicted"]["roofline_bound"] == "memory" and r["decode"]["tok_s"] > 0
