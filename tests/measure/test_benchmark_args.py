"""The GPU scripts agree on the kernel names: measure_gpu.sh passes the kernel gemv_bench.py found fastest to
decode.py, profile_decode.py and `llmsize measure --gemv`, so each must accept every name gemv_bench can write
(a rejected name would waste a rare borrowed GPU's minutes)."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from llmsize.measure import GEMV_KERNELS  # noqa: E402

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_gemv_bench_writes_only_known_kernels():
    sys.path.insert(0, str(BENCH))
    try:
        import gemv_bench
    finally:
        sys.path.remove(str(BENCH))
    # --best-out names a shipped kernel only: the benchmark kernels are timed beside them, never passed on
    assert {gemv_bench.KERNELS_B1[p] for p in gemv_bench.SHIPPED_B1} == set(GEMV_KERNELS)


def _script(name: str):
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def _run_main(monkeypatch, capsys, name: str, *argv: str) -> tuple[int, str, str]:
    """`python benchmarks/NAME.py ARGV` as its main() in this process (torch imported once, the interpreter as the
    other tests run it): exit code, stdout, stderr."""
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
    code = 0
    try:
        _script(name).main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("script", ["decode", "profile_decode"])
def test_script_accepts_the_shipped_kernels(script, capsys):
    """Each script's own argument parser: every name gemv_bench can pass on is taken, another is refused."""
    ap = _script(script).parser()
    for kernel in GEMV_KERNELS:
        assert ap.parse_args(["--gemv", kernel]).gemv == kernel
    with pytest.raises(SystemExit) as e:
        ap.parse_args(["--gemv", "nope"])
    assert e.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err


def test_step_variants_parses_and_names_its_variants():
    step_variants = _script("step_variants")
    args = step_variants.parser().parse_args(["--smoke", "--only", "1,2", "--steps", "3"])
    assert args.smoke and args.only == "1,2" and args.steps == 3
    import inspect

    from llmsize.measure.gemma4 import Gemma4Decoder
    params = {*inspect.signature(Gemma4Decoder).parameters, "lm_head"}  # (LabDecoder's own)
    for label, pdl, kb, settings in step_variants.VARIANTS:
        s = {**step_variants.DEFAULT, **settings}
        assert set(s) <= params, label  # every setting a decoder attribute of that name
        assert s["gemv"] in GEMV_KERNELS and pdl in ("0", "1", "2") and kb.isdigit() and s["lm_head"] in (
            "torch", "triton") and all(s[k] in (True, False) for k in ("fused", "fold", "fold_combine",
                                                                       "cap_argmax")), label
        assert set(s["attn_split"]) <= {"full", "sliding"}, label
    from llmsize.measure import launch_env
    label, pdl, kb, settings = step_variants.VARIANTS[0]  # the reference row: what `llmsize measure` runs
    assert settings == {} and (int(pdl), int(kb)) == launch_env(), label


def test_step_variants_smoke_run_on_the_cpu(tmp_path, monkeypatch, capsys):
    """The whole script on the toy model through the interpreter: builds, checks each variant's logits against
    the default step's, times, writes the table (what a GPU run would otherwise find broken). The variants that
    only switch a shipped decoder's setting off (soft-cap and token in torch ops, no folds) are left to
    tests/measure/test_gemma4_decode.py, and the launch settings do nothing on the CPU;
    test_step_variants_parses_and_names_its_variants checks every variant's settings."""
    out = tmp_path / "variants.md"
    monkeypatch.setenv("LLMSIZE_PDL", "1")
    code, _, err = _run_main(monkeypatch, capsys, "step_variants", "--smoke", "--context", "12", "--steps", "1",
                             "--only", "2,10,11,14", "--out", str(out))
    assert code == 0, err[-2000:]
    assert os.environ["LLMSIZE_PDL"] == "1" and "LLMSIZE_PREFETCH_KB" not in os.environ  # each variant's, undone
    rows = [ln for ln in out.read_text().splitlines() if ln.startswith("| ") and "variant" not in ln]
    assert [ln.split(" | ")[0] for ln in rows] == [
        "| fused, words, PDL off (default)", "| eager, words", "| fused, words, lm_head kernel",
        "| fused, words, combine kernel", "| fused, triton (byte kernel)"]
    assert all(ln.split(" | ")[1].startswith("yes (max ") for ln in rows), rows
    assert rows[0].split(" | ")[1] == "yes (max 0)", rows[0]  # the reference against itself


def test_decode_says_where_the_loop_stops_being_memory_bound():
    """Issue 5's batch regime: decode.py names the batch where the NVFP4 loop stops moving bytes at its batch-1
    rate, next to plan's ridge for the card, from the runs' JSON (llmsize.measure.run.plan_roofline: Gemma 4 12B
    NVFP4 on the H200 never turns compute-bound at 4,096 tokens, where the KV cache, ~0.4 GB a sequence read at
    ~60 FLOPs a byte, grows as fast as the FLOPs, below the card's ridge of ~206; at 168 attended positions, the
    crossover sweep's, it does from batch 140)."""
    from llmsize.catalog.loader import Catalog
    from llmsize.measure.run import plan_roofline
    sys.path.insert(0, str(BENCH))
    try:
        import decode
    finally:
        sys.path.remove(str(BENCH))
    h200 = Catalog().gpu("h200")
    assert plan_roofline("nvfp4", 4096, 1, h200)["ridge_batch"] is None
    assert plan_roofline("nvfp4", 168, 1, h200)["ridge_batch"] == 140
    v = decode.memory_bound_verdict([(1, 0.85), (4, 0.80), (16, 0.40)], None)
    assert "memory-bound up to batch 4 and stops by batch 16" in v and "stays memory-bound at every batch" in v
    assert "every batch measured (up to 16)" in decode.memory_bound_verdict([(16, 0.8), (1, 0.85), (4, 0.84)], 64)
    assert "compute-bound at batch 64" in decode.memory_bound_verdict([(1, 0.85)], 64)
    assert "no verdict" in decode.memory_bound_verdict([(4, 0.5)], None)
    assert "no theoretical bandwidth" in decode.memory_bound_verdict([(1, 0.0), (4, 0.0)], None)
    assert "no catalog card" in decode.memory_bound_verdict([(1, 0.8), (4, 0.8)], None, card=False)


def test_decode_script_smoke_run_on_the_cpu(tmp_path, monkeypatch, capsys):
    """decode.py end to end on the small CPU model, a batch above 16 included (no bf16 row): one table row a
    batch with the plan columns (n/a: no catalog card), a JSON per run, no verdict without NVML's bandwidth."""
    code, out, err = _run_main(monkeypatch, capsys, "decode", "--device", "cpu", "--context", "8", "--tokens", "2",
                               "--batches", "1,20", "--no-baseline", "--save-dir", str(tmp_path))
    assert code == 0, err
    rows = [ln for ln in out.splitlines() if ln.startswith("| nvfp4 |")]
    assert [ln.split(" | ")[1] for ln in rows] == ["1", "20"] and all(ln.endswith("| n/a | n/a |") for ln in rows)
    assert "plan roofline tok/s (datasheet)" in out and "no theoretical bandwidth" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decode-nvfp4-b1-c8.json", "decode-nvfp4-b20-c8.json"]


def test_measure_gpu_refuses_an_unknown_stage_before_any_work():
    r = subprocess.run(["bash", str(BENCH / "measure_gpu.sh"), "headline", "sweeps"], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "OUT": "/nonexistent/out"})
    assert r.returncode == 2 and "unknown stage `sweeps`" in r.stderr and "sweep crossover profile" in r.stderr


def test_measure_gpu_runs_every_stage_through_on_a_machine_without_a_gpu(tmp_path):
    """The GPU run's one entry point, its shell plumbing on the CPU: each stage's programs refuse (no GPU)
    and the script goes on to the next, times every stage, names its commit, falls back to the byte kernel when
    the GEMV bench picked none, and leaves the console log, the RESULTS block and the tarball of every log in
    $OUT (a stage only a GPU run reaches cannot then die of a shell error)."""
    work, out = tmp_path / "work", tmp_path / "out"
    r = subprocess.run(["bash", str(BENCH / "measure_gpu.sh")], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHON": sys.executable, "WORK": str(work), "OUT": str(out),
                            "LLMSIZE_COMMIT": "0123abc", "CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 0, r.stderr[-2000:]
    stages = [ln.split()[2].rstrip(":") for ln in (work / "stage-times.txt").read_text().splitlines()]
    assert stages == ["headline", "tests", "gemv", "ncu", "variants", "others", "sweep", "crossover", "profile"]
    console = (out / "console.log").read_text()
    commit = [ln for ln in console.splitlines() if ln.startswith("commit: ")]
    assert commit == ["commit: 0123abc"]  # LLMSIZE_COMMIT, named, wins over git's HEAD
    assert "measure nvfp4default (): exit 2" in console and "measure bf16 (--quant bf16 --no-probe --fallback): exit 2" in console
    assert "ncu: not on this machine" in console or "ncu: exit " in console
    assert "batch-1 NVFP4 kernel for what follows: triton" in console
    # a shell error inside a stage's pipeline kills only that pipeline: caught here, not on the GPU
    assert "unbound variable" not in console and "command not found" not in console and "syntax error" not in console
    for log in ("decode-sweep.log", "decode-crossover.log", "step-variants.log", "profile-nvfp4.txt",
                "profile-nvfp4-b16.txt", "profile-nvfp4-nopdl.txt", "gemv-bench.txt"):
        assert (work / log).read_text().strip(), f"{log}: its program never ran"
    assert {"console.log", "RESULTS-append.md", "all-logs.tgz"} <= {p.name for p in out.iterdir()}
    import tarfile
    with tarfile.open(out / "all-logs.tgz") as tar:
        names = {n.removeprefix("./") for n in tar.getnames()}
    assert {"stage-times.txt", "versions.txt", "measure-nvfp4default.err", "gpu-tests.log", "profile-nvfp4-nopdl.txt",
            "decode-crossover.md"} <= names


def _profile_decode_main(monkeypatch, capsys, *argv):
    """profile_decode.main() in this process (no GPU here): its exit code and stderr."""
    monkeypatch.setattr(sys, "argv", ["profile_decode.py", *argv])
    with pytest.raises(SystemExit) as e:
        _script("profile_decode").main()
    return e.value.code, capsys.readouterr().err


def test_profile_decode_refuses_a_batch_it_cannot_run(monkeypatch, capsys):
    code, err = _profile_decode_main(monkeypatch, capsys, "--batch", "17")
    assert code == 2 and "--batch 17: use 1 to 16" in err


def test_profile_timeline_counts_overlaps_once_and_the_gaps_between():
    sys.path.insert(0, str(BENCH))
    try:
        import profile_decode
    finally:
        sys.path.remove(str(BENCH))
    # kernels at 0-2 and 1-3 overlap (PDL): 3 us busy; 5-6 holds 5.5-5.7; idle 3-5: over two steps
    spans = [(1, 3), (0, 2), (5.5, 5.7), (5, 6)]
    assert profile_decode.union_us(spans) == 4
    line = profile_decode.step_timeline(spans, steps=2)
    assert line == {"span_us": 3.0, "busy_us": 2.0, "gap_us": 1.0, "sum_us": pytest.approx(2.6)}
    assert profile_decode.step_timeline([], steps=3)["gap_us"] == 0


def test_profile_decode_smoke_run_on_the_cpu(monkeypatch, capsys):
    """profile_decode.py as measure_gpu.sh's last stage runs it (word kernel, fused step, here at batch 2), on
    the small model through the interpreter: the step timed, profiled, its timeline and table printed (on the
    CPU without a CUDA graph, top-level operators standing in for kernels)."""
    code, stdout, err = _run_main(monkeypatch, capsys, "profile_decode", "--smoke", "--gemv", "words", "--fused",
                                  "--batch", "2", "--context", "8", "--steps", "1")
    assert code == 0, err[-2000:]
    out = stdout.splitlines()
    assert out[0].startswith("nvfp4 (words, fused, eager launches), CPU smoke, context 8, batch 2: ")
    labels = ["step, profiler off:", "top-level operators' span a step:", "  at least one running:",
              "  gaps, none running:", "  sum of their durations:"]
    assert [ln[:34].strip() for ln in out[1:6]] == [label.strip() for label in labels]
    assert all(ln[34:].split()[1] == "ms" for ln in out[1:6])
    assert out[6].split()[0] == "operator" and len(out) > 8


def test_profile_decode_without_a_gpu_says_so(monkeypatch, capsys):
    """No NVIDIA driver: said through NVML before torch is imported; a driver but no GPU torch can see: said by
    torch. Both one line with the CPU rehearsal's flag."""
    import torch

    from llmsize.errors import LlmsizeError
    from llmsize.measure import preflight

    def no_driver(index):
        raise LlmsizeError("NVML could not start (Driver Not Loaded): no NVIDIA driver or GPU visible.")
    monkeypatch.setattr(preflight, "require_driver", no_driver)
    code, err = _profile_decode_main(monkeypatch, capsys, "--gemv", "words")
    assert code == 2 and "error: NVML could not start (Driver Not Loaded): no NVIDIA driver or GPU visible: run on" \
        in err and "--smoke" in err
    monkeypatch.setattr(preflight, "require_driver", lambda index: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, err = _profile_decode_main(monkeypatch, capsys, "--gemv", "words")
    assert code == 2 and "no CUDA GPU visible to torch" in err and "--smoke" in err


def test_profile_decode_offers_the_lab_decoders_kernels():
    from benchmarks.kernels.decoder import LabDecoder
    assert _script("profile_decode").GEMVS == LabDecoder.GEMVS[1:]


def test_gemv_bench_smoke_run_on_the_cpu(tmp_path, monkeypatch, capsys):
    """gemv_bench.py's own code on two small shapes through the interpreter: every path checked against the
    reference and timed (no row 'failed'), the lm_head rows, the fastest batch-1 kernel written for the stages
    that follow (on a GPU, this is the stage that picks it)."""
    best = tmp_path / "best.txt"
    code, out, err = _run_main(monkeypatch, capsys, "gemv_bench", "--smoke", "--best-out", str(best))
    assert code == 0, err[-2000:]
    assert "failed" not in out, out
    rows = [ln for ln in out.splitlines() if ln.startswith(("o sliding", "gate_up"))]
    assert len(rows) == 2 * 17 and {"tc16", "tc64", "tc256", "rows4", "bf16x256"} <= {ln[27:].split()[0] for ln in rows}
    assert sum(ln.startswith("lm_head ") for ln in out.splitlines()) == 2
    assert best.read_text().strip() in GEMV_KERNELS
