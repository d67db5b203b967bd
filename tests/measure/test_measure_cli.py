"""`llmsize measure` as a user runs it: the CPU model end to end, the JSON keys scripts rely on, bad input,
missing GPU or extra, VRAM refusal, Ctrl-C."""

import json

import pytest

from llmsize.errors import LlmsizeError
from llmsize.measure import gemma4, preflight

REQUIRED = ["gpu.name", "gpu.theoretical_bandwidth_gb_s", "gpu.probed_read_bandwidth_gb_s", "run.context_tokens",
            "run.batch", "bytes_per_token", "decode.tok_s", "decode.ms_per_token_median", "prefill.ttft_s",
            "achieved.bandwidth_gb_s", "achieved.fraction_of_theoretical", "achieved.fraction_of_probe",
            "predicted.ceiling_tok_s"]


def _get(d, dotted):
    for k in dotted.split("."):
        d = d[k]
    return d


def test_cpu_run_json_has_every_key_and_consistent_figures(run_cli, tmp_path):
    save = tmp_path / "run.json"
    code, out, err = run_cli("measure", "--device", "cpu", "--context", "40", "--tokens", "12", "--json",
                             "--save", str(save))
    assert code == 0, err
    r = json.loads(out)
    for key in REQUIRED:
        _get(r, key)  # present (null where a CPU has no such figure)
    assert json.loads(save.read_text()) == r
    assert r["run"]["context_tokens"] == 40 and r["run"]["tokens_measured"] == 12
    # achieved bandwidth = bytes per token x tok/s (batch 1)
    assert r["achieved"]["bandwidth_gb_s"] == pytest.approx(r["bytes_per_token"] * r["decode"]["tok_s"] / 1e9)
    assert r["bytes_per_step"] == sum(r["bytes_per_step_parts"].values())
    d = r["decode"]
    assert d["ms_per_token_p10"] <= d["ms_per_token_median"] <= d["ms_per_token_p90"]
    # KV of the full layer at the mean attended length: 1 layer x (K, V) x 1 head x 64 dims x 4 B (float32)
    mean_pos = r["run"]["mean_attended_positions"]
    assert mean_pos == 40 + 8 + (12 - 1) / 2 + 1
    assert r["bytes_per_step_parts"]["kv_full"] == round(1 * 2 * 1 * 64 * mean_pos * 4)
    assert r["bytes_per_step_parts"]["kv_sliding"] == 2 * 2 * 2 * 32 * 4 * 4  # 2 layers, capped at the window of 4


def test_cpu_report_renders(run_cli):
    code, out, err = run_cli("measure", "--device", "cpu", "--context", "16", "--tokens", "4", "--quant", "bf16")
    assert code == 0, err
    assert "Bytes read per decode step" in out and "bf16 linear weights" in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_cpu_run_above_16_sequences(run_cli):
    """Batches above 16 (the sweep past plan's ridge) run on the CPU too: 20 sequences a step, each with its
    own cache, so a step reads 20 times batch 1's KV bytes and embedding rows, and the weights once."""
    import json
    runs = {}
    for batch in ("1", "20"):
        code, out, err = run_cli("measure", "--device", "cpu", "--context", "8", "--tokens", "3", "--batch", batch,
                                 "--json")
        assert code == 0, err
        runs[batch] = json.loads(out)
    one, many = runs["1"]["bytes_per_step_parts"], runs["20"]["bytes_per_step_parts"]
    assert runs["20"]["run"]["batch"] == 20 and runs["20"]["run"]["tokens_measured"] == 3
    for part in ("kv_full", "kv_sliding", "embedding_rows"):
        assert many[part] == 20 * one[part], part
    assert many["nvfp4_packed"] == one["nvfp4_packed"] and many["lm_head"] == one["lm_head"]


@pytest.mark.parametrize("args, needle", [
    (["--context", "0"], "'--context': `0` is not an integer from 1 to 262,144"),
    (["--tokens", "-3"], "'--tokens': `-3` is not an integer from 1"),
    (["--batch", "0"], "'--batch': `0` is not an integer from 1 to 256"),
    (["--batch", "257"], "'--batch': `257` is not an integer from 1 to 256"),
    (["--batch", "20", "--gemv", "triton"], "--batch `20` with --gemv triton"),
    (["--gemv", "pairs"], "--gemv `pairs` is not a kernel. Use auto, words, triton."),
    (["--quant", "fp8"], "'--quant': `fp8` is not one of nvfp4, bf16"),
    (["--device", "tpu"], "'--device': `tpu` is not one of cuda, cpu"),
    (["--checkpoint", "/no/such/dir"], "--checkpoint `/no/such/dir`"),
    (["--device", "cpu", "--save", "/no/such/dir/x.json"], "--save `/no/such/dir/x.json`"),
    (["--device", "cpu", "--fused"], "--fused runs Triton kernels"),
    (["--gemv", "marlin"], "--gemv `marlin`"),
])
def test_bad_values_are_one_line_usage_errors(run_cli, args, needle):
    code, out, err = run_cli("measure", *args)
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_no_gpu_is_one_line_with_a_hint(run_cli):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    code, out, err = run_cli("measure")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--device cpu" in err and ("CPU-only build" in err or "No CUDA GPU" in err or "NVML could not start" in err)


def test_a_machine_without_a_driver_is_refused_before_torch_is_imported(monkeypatch):
    """NVML answers in tens of ms, importing torch takes seconds: no driver is said before torch is asked for;
    a card handed to the run (the tests' stand-in) is not asked of NVML."""
    from llmsize.measure import card, run

    def no_driver(index):
        raise LlmsizeError("NVML could not start (Driver Not Loaded): no NVIDIA driver or GPU visible.")

    def torch_first():
        raise AssertionError("torch was asked for before the driver")

    monkeypatch.setattr(card, "read_card", no_driver)
    monkeypatch.setattr(preflight, "require_torch", torch_first)
    with pytest.raises(LlmsizeError, match="NVML could not start"):
        run.measure(run.MeasureOptions())
    with pytest.raises(AssertionError, match="asked for before"):  # --device cpu needs no driver
        run.measure(run.MeasureOptions(device="cpu"))
    with pytest.raises(AssertionError, match="asked for before"):  # a card object given: NVML is its business
        run.measure(run.MeasureOptions(), gpu=object())


def test_missing_torch_is_one_line_with_the_install_hint():
    from conftest import cli_without
    p = cli_without(["torch"], ["measure", "--device", "cpu"])
    assert p.returncode == 2
    assert p.stderr.strip() == ("Error: `llmsize measure` needs torch, which is not installed. "
                                + preflight.EXTRA_HINT)


def test_not_enough_vram_is_refused_with_numbers():
    with pytest.raises(LlmsizeError, match=r"needs about 9\.31 GiB \(10\.00 GB\), the card has 4\.00 GiB free"):
        preflight.check_fits(10 * 10**9, 4 * 2**30, "gemma-4-12b")
    preflight.check_fits(1, None, "x")  # unknown free memory: no refusal


def test_a_cpu_run_larger_than_the_machines_memory_is_refused_before_it_allocates(run_cli, monkeypatch):
    """On the CPU the cache and activations are float32 (twice the bf16 bytes); at 262,144 positions x batch 256
    the tiny model's run needs tens of GiB, and the machine's available memory (MemAvailable) is asked first: one
    line, exit 2, nothing built (the run was killed for memory, or raised torch's allocator error, before)."""
    from llmsize.measure import run

    cfg = gemma4.GEMMA4_TINY
    assert run.kv_cache_bytes(cfg, 2, 100, elem=4) == 2 * run.kv_cache_bytes(cfg, 2, 100)
    real = preflight.host_available_bytes()
    assert real is None or real > 0
    monkeypatch.setattr(preflight, "host_available_bytes", lambda: 2 * 2**30)
    built = []
    monkeypatch.setattr(run, "_build", lambda *a, **k: built.append(1))
    code, out, err = run_cli("measure", "--device", "cpu", "--context", "262144", "--batch", "256")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "Not enough memory" in err and "the machine has 2.00 GiB available" in err and "--context" in err
    assert not built
    with pytest.raises(LlmsizeError, match=r"needs about 9\.31 GiB \(10\.00 GB\), the machine has 4\.00 GiB"):
        preflight.check_fits(10 * 10**9, 4 * 2**30, "x", host=True)
    preflight.check_fits(10**12, None, "x", host=True)  # not known: no refusal


def test_fit_estimate_for_the_seed_card():
    """The default run must fit a 16 GB RTX 5060 Ti (seed 000): 16 GiB of VRAM, ~15.5 GiB usable."""
    from llmsize.measure.run import kv_cache_bytes, transient_bytes, weight_memory_bytes
    cfg = gemma4.GEMMA4_12B
    w = weight_memory_bytes(cfg, "nvfp4")
    # 6.10 GB of NVFP4 linears (+ scales) + 2.01 GB bf16 embedding: the plan's 8.15 GB minus vision extras
    assert 8.0e9 < w < 8.3e9
    need = w + kv_cache_bytes(cfg, 1, 4096 + 266) + transient_bytes(cfg, 1, 4096) + 0.75 * 2**30
    assert need < 15.5 * 2**30
    assert weight_memory_bytes(cfg, "bf16") > 2.9 * w  # the bf16 baseline reads ~3x the bytes


def test_prefill_transient_is_one_pass_of_sequences_not_the_batch():
    """Prefill goes 16,384 prompt tokens a pass (gemma4.PREFILL_TOKENS), so its activations stop growing with
    the batch: at 4,096 tokens a pass is 4 sequences, and batch 128 adds what batch 4 does. Hand arithmetic,
    Gemma 4 12B (hidden 3,840, intermediate 15,360, 16 heads):
      gate|up output and gelu, 3 x 16,384 tokens x 2 x 15,360 x 2 B  = 3,019,898,880
      one dequantized gate|up matrix, 2 x 15,360 x 3,840 x 2 B       =   235,929,600
      scores of a 512-query chunk, 3 x 4 x 16 x 512 x 4,096 x 4 B    = 1,610,612,736
                                                                        4,866,441,216 B
    Batch 128 at 4,096 then needs ~66 GB in all (KV 52 GB) and fits an H200; as one pass (32 times the above's
    activations and scores) its transient alone was 148.4 GB, ~209 GB in all, and it was refused."""
    from llmsize.measure.run import kv_cache_bytes, transient_bytes, weight_memory_bytes
    cfg = gemma4.GEMMA4_12B
    assert gemma4.prefill_rows(128, 4096) == 4 and gemma4.prefill_rows(2, 4096) == 2
    assert gemma4.prefill_rows(256, 128) == 128 and gemma4.prefill_rows(3, 20000) == 1
    assert transient_bytes(cfg, 128, 4096) == transient_bytes(cfg, 4, 4096) == 4_866_441_216
    assert transient_bytes(cfg, 2, 4096) < transient_bytes(cfg, 4, 4096)  # a smaller batch is one smaller pass
    need = (weight_memory_bytes(cfg, "nvfp4") + kv_cache_bytes(cfg, 128, 4096 + 266)
            + transient_bytes(cfg, 128, 4096) + 0.75 * 2**30)
    assert 60e9 < need < 70e9  # the H200 has ~139 GiB free


def test_ctrl_c_reports_the_tokens_measured_so_far(run_cli, monkeypatch):
    real = gemma4.Gemma4Decoder.decode_step
    calls = {"n": 0}

    def flaky(self):
        calls["n"] += 1
        if calls["n"] == 8 + 5:  # 8 warm-up steps, then 4 timed ones, then Ctrl-C
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(gemma4.Gemma4Decoder, "decode_step", flaky)
    code, out, err = run_cli("measure", "--device", "cpu", "--context", "16", "--tokens", "50", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["run"]["interrupted"] is True and r["run"]["tokens_measured"] == 4


def test_probe_kernel_reads_every_element():
    from llmsize.measure.gemv import triton_available
    if not triton_available():
        pytest.skip("triton not installed")
    import torch

    from llmsize.measure.probe import read_once
    x = torch.randint(-2**31, 2**31 - 1, (10_000,), dtype=torch.int32)
    want = 0
    for v in x.tolist():
        want ^= v
    for stages in (1, 3):  # every shape the probe tries reads each element once
        out = torch.empty(3, dtype=torch.int32)
        read_once(x, out, programs=3, block=256, stages=stages)
        got = 0
        for v in out.tolist():
            got ^= v
        assert got == want


def test_cpu_run_from_a_compressed_tensors_checkpoint(run_cli, tmp_path):
    from .ckpt import write
    folder = write(tmp_path / "tiny-ct", gemma4.GEMMA4_TINY, "compressed-tensors")
    code, out, err = run_cli("measure", "--device", "cpu", "--checkpoint", str(folder), "--context", "20",
                             "--tokens", "5", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["model"]["layout"] == "compressed-tensors" and r["run"]["tokens_measured"] == 5
    assert r["bytes_per_step_parts"]["nvfp4_packed"] > 0


def test_checkpoint_that_is_not_gemma4_is_one_line_naming_the_file(run_cli, tmp_path):
    from .ckpt import config_json, write
    folder = write(tmp_path / "llama", gemma4.GEMMA4_TINY, "dense")
    raw = config_json(gemma4.GEMMA4_TINY)
    raw["model_type"] = raw["text_config"]["model_type"] = "llama"
    (folder / "config.json").write_text(json.dumps(raw))
    code, out, err = run_cli("measure", "--device", "cpu", "--checkpoint", str(folder))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{folder / 'config.json'}: model_type 'llama' is not Gemma 4" in err


def test_compiled_decode_step_runs_on_the_cpu(run_cli, monkeypatch):
    """--compile: torch.compile of the decode step gives the same kind of run. The step is traced by Dynamo and
    AOTAutograd as on a GPU (backend aot_eager: graph breaks and unsupported ops fail here), but not handed to
    inductor, whose CPU backend writes and builds C++ where a GPU run's writes Triton: the CPU build proves
    nothing of the GPU one, and took 48.2 s (`pytest --durations`, two cores, 2026-12-03; aot_eager: 6.8 s)."""
    import torch

    calls = []
    real = torch.compile

    def traced_only(fn, **kw):
        calls.append(kw)
        return real(fn, backend="aot_eager", **kw)

    monkeypatch.setattr(torch, "compile", traced_only)
    code, out, err = run_cli("measure", "--device", "cpu", "--context", "8", "--tokens", "3", "--warmup", "1",
                             "--compile", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["run"]["compiled"] is True and r["run"]["tokens_measured"] == 3
    assert calls == [{"dynamic": False}]  # the decode step, once


def test_report_says_when_a_self_check_failed(run_cli, tmp_path):
    """On a GPU the defaults rest on two self-checks (word kernel, fused step); a failed one is named in the
    report and the JSON, so a slower run is not mistaken for the fast path. The JSON of a CPU run, with the
    checks a GPU run would have added, renders them."""
    from io import StringIO

    from rich.console import Console

    from llmsize.render.measure_report import render_measure
    f = tmp_path / "r.json"
    code, _, err = run_cli("measure", "--device", "cpu", "--context", "16", "--tokens", "2", "--json", "--save",
                           str(f))
    assert code == 0, err
    r = json.loads(f.read_text())
    assert r["run"]["self_checks"] == {} and r["run"]["fused"] is False
    r["run"]["self_checks"] = {"words kernel": False, "fused step": True}
    r["run"]["fallbacks"] = ["the word GEMV failed its self-check: the byte kernel (--gemv triton) runs instead"]
    buf = StringIO()
    render_measure(r, Console(file=buf, width=100))
    assert "words kernel: FAILED on this card" in buf.getvalue()
    assert "--fallback" in buf.getvalue() and "the byte kernel (--gemv" in buf.getvalue()
    assert "fused step: passed, used" in buf.getvalue()
    assert "programmatic" not in buf.getvalue()  # a CPU run: no PDL
    r["run"].update(pdl=True, pdl_mode="early", l2_prefetch_kb=32)  # what a Hopper run records
    buf = StringIO()
    render_measure(r, Console(file=buf, width=100))
    text = " ".join(buf.getvalue().split())  # the line may wrap
    assert "programmatic dependent launch (early), L2 prefetch 32 KiB per GEMV program" in text
    assert r["run"]["lm_head"] == {"kernel": "torch"} and "one Triton kernel" not in text  # CPU: eager ops
    r["run"].update(device="cuda", lm_head={"kernel": "cublas+cap_argmax"})
    r["gpu"].update(driver="580", vram_total_bytes=None, vram_free_bytes=None, bus_width_bits=None,
                    max_memory_clock_mhz=None, catalog_id=None)
    buf = StringIO()
    render_measure(r, Console(file=buf, width=100))
    text = " ".join(buf.getvalue().split())
    assert "lm_head cuBLAS GEMM, then one Triton kernel (soft-cap, greedy tokens)" in text
    assert r["run"]["batch_kernels"] is None and "GEMV tiles" not in text  # a CPU run: nothing timed
    r["run"]["batch_kernels"] = {"3840x4096": "tc 64x16 w4 k2", "30720x3840 GeGLU": "tc 128x16 w4 k1"}  # batch 4
    buf = StringIO()
    render_measure(r, Console(file=buf, width=100))
    text = " ".join(buf.getvalue().split())
    assert "GEMV tiles 3840x4096: tc 64x16 w4 k2, 30720x3840 GeGLU: tc 128x16 w4 k1" in text
    # a loop whose step times spread (a CPU run on a busy machine: 80x was seen) says so beside its figures
    from llmsize.measure.run import unsteady_note

    assert unsteady_note([0.010, 0.0101, 0.0102, 0.0099, 0.0105]) is None  # a steady loop: a few percent
    r["decode"]["timing_note"] = unsteady_note([0.004] * 5 + [0.368] * 5)
    assert r["decode"]["timing_note"].startswith("the steps' times spread 92.0x from p10 to p90")
    buf = StringIO()
    render_measure(r, Console(file=buf, width=100))
    assert "spread 92.0x from p10 to p90" in " ".join(buf.getvalue().split())


def test_batch_kernels_name_what_the_card_timed():
    """run.batch_kernels: per shape the tile the run's tuning kept, the GeGLU pass named apart; only the run's
    batch: at 2-256 rows the tensor-core kernel's, at batch 1 the word kernel's (the residual norm's epilogue named
    too); nothing without the word kernels, or where nothing was timed."""
    from llmsize.measure.run import batch_kernels
    from llmsize.measure.tuner import Tuning

    tuning = Tuning()
    for key, cfg in {("tc", 3840, 4096, 4, False): (128, 16, 4, 4, 16), ("tc", 8192, 3840, 4, False): (64, 16, 4, 2, 16),
                     ("tc", 30720, 3840, 4, True): (256, 16, 8, 1, 16), ("tc", 8192, 3840, 16, False): (128, 16, 4, 1, 16),
                     ("tc", 8192, 3840, 64, False): (128, 16, 8, 1, 64),
                     ("words", 8192, 3840, 4, False, False, False, False, False, False):
                         (32, 32, 4, 1, 1, True)}.items():
        assert tuning.best(key, None, [cfg], ()) == cfg  # one config: nothing to time
    assert batch_kernels("words", 4, tuning) == {"3840x4096": "tc 128x16 w4 k4", "8192x3840": "tc 64x16 w4 k2",
                                                 "30720x3840 GeGLU": "tc 256x16 w8 k1"}
    assert batch_kernels("words", 64, tuning) == {"8192x3840": "tc 128x16 w8 k1 b64"}  # (above 16: rows a program)
    assert batch_kernels("words", 1, tuning) is None and batch_kernels("triton", 4, tuning) is None
    for key, cfg in {("words", 30720, 3840, 1, True, True, False, False, False, False): (64, 32, 8, 1, 1, False),
                     ("words", 3840, 15360, 1, False, False, True, False, False, False):
                         (32, 32, 4, 3, 4, True)}.items():
        tuning.best(key, None, [cfg], ())
    assert batch_kernels("words", 1, tuning) == {"30720x3840 GeGLU": "words 64x32 w8 s1 k1 x4",
                                                 "3840x15360 norm": "words 32x32 w4 s3 k4"}
    assert batch_kernels("triton", 1, tuning) is None


@pytest.mark.parametrize("var, value", [("LLMSIZE_PDL", "yes"), ("LLMSIZE_PREFETCH_KB", "4096"),
                                        ("LLMSIZE_PREFETCH_KB", "-1")])
def test_bad_launch_environment_is_one_line(run_cli, monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    code, out, err = run_cli("measure", "--device", "cpu", "--context", "16", "--tokens", "2")
    assert code != 0 and f"{var} `{value}`" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert out == ""


def test_a_batch_above_16_is_refused_when_its_kernel_failed_on_the_card():
    """The one NVFP4 kernel above 16 rows is the tensor-core word GEMV's row blocks: with it (or the word GEMV,
    or its 16-row programs) left out by the card's self-checks, measure refuses, naming what failed."""
    from llmsize.measure.run import check_wide_batch
    check_wide_batch(16, "triton", {"tc", "wide"})  # up to 16 rows other kernels serve
    check_wide_batch(64, "words", {"stages", "split"})  # paths a wide batch does not use
    for gemv, off, named in (("triton", set(), "the word GEMV failed"),
                             ("words", {"wide"}, "17-256 rows on the tensor cores failed"),
                             ("words", {"tc", "wide"}, "2-16 rows on the tensor cores and the word GEMV's 17-256")):
        with pytest.raises(LlmsizeError, match=named) as e:
            check_wide_batch(64, gemv, off)
        assert "--batch `64`" in str(e.value) and "16 or less" in e.value.one_line()


def test_report_puts_plan_beside_the_measurement(run_cli, tmp_path):
    """On a catalog card the report ends with plan's figures for the run: the bandwidth ceilings and, with the
    card's peak, the roofline at the run's batch (for Gemma 4 12B NVFP4 on an H200 at 168 attended positions,
    the crossover sweep's: memory-bound at batch 64, 25,934 tok/s = 64 / (11.85 GB / 4.8 TB/s); compute-bound
    at 256, 41,281 tok/s; plan's ridge at 140)."""
    from io import StringIO

    from rich.console import Console

    from llmsize.catalog.loader import Catalog
    from llmsize.measure.run import plan_roofline, predicted
    from llmsize.render.measure_report import render_measure
    h200 = Catalog().gpu("h200")
    roof = plan_roofline("nvfp4", 168, 64, h200)
    assert roof["roofline_bound"] == "memory" and roof["ridge_batch"] == 140
    assert roof["roofline_tok_s"] == pytest.approx(25_934, rel=1e-3)
    roof256 = plan_roofline("nvfp4", 168, 256, h200)
    assert roof256["roofline_bound"] == "compute" and roof256["roofline_tok_s"] == pytest.approx(41_281, rel=1e-3)
    assert plan_roofline("nvfp4", 4362, 16, h200)["ridge_batch"] is None  # the KV cache keeps pace at 4,096
    f = tmp_path / "r.json"
    code, _, err = run_cli("measure", "--device", "cpu", "--context", "16", "--tokens", "2", "--json", "--save",
                           str(f))
    assert code == 0, err
    r = json.loads(f.read_text())
    pred = predicted("nvfp4", 168, 64, {"datasheet": 4800.0, "theoretical": 4814.1, "probe": None})
    assert pred["ceiling_tok_s_datasheet"] == pytest.approx(roof["roofline_tok_s"], rel=1e-6)  # memory-bound
    pred.update(roof, ceiling_tok_s=pred["ceiling_tok_s_datasheet"], measured_fraction_of_roofline=0.5,
                measured_fraction_of_ceiling_datasheet=0.5, measured_fraction_of_ceiling_theoretical=0.4987)
    r["predicted"], r["run"]["batch"] = pred, 64
    buf = StringIO()
    render_measure(r, Console(file=buf, width=100))
    text = " ".join(buf.getvalue().split())
    assert "ceiling at datasheet bandwidth 25,934.1 tok/s; measured 50.0% of it" in text
    assert ("roofline at batch 64 25,934.1 tok/s, memory-bound (compute-bound from batch 140 at this length); "
            "measured 50.0% of it") in text
    assert "ceiling at probe bandwidth" not in text  # no probe in this run


def test_commit_from_llmsize_commit_else_from_git(monkeypatch):
    """The JSON's git_commit: LLMSIZE_COMMIT where set (a copy of the tree sent to a GPU machine, whose .git may
    name another commit), else git's HEAD, else None."""
    from llmsize.measure import run

    head = run.subprocess.CompletedProcess(["git"], 0, "fedcba9\n", "")
    monkeypatch.setattr(run.subprocess, "run", lambda *a, **k: head)
    monkeypatch.delenv("LLMSIZE_COMMIT", raising=False)
    assert run.git_commit() == "fedcba9"
    monkeypatch.setenv("LLMSIZE_COMMIT", "0123abc")
    assert run.git_commit() == "0123abc"  # named wins over the .git that came with the copy

    def no_git(*a, **k):
        raise FileNotFoundError("git")
    monkeypatch.setenv("LLMSIZE_COMMIT", "0123abc")
    monkeypatch.setattr(run.subprocess, "run", no_git)
    assert run.git_commit() == "0123abc"
    monkeypatch.delenv("LLMSIZE_COMMIT")
    assert run.git_commit() is None
    not_a_repo = run.subprocess.CompletedProcess(["git"], 128, "", "fatal: not a git repository")
    monkeypatch.setattr(run.subprocess, "run", lambda *a, **k: not_a_repo)
    monkeypatch.setenv("LLMSIZE_COMMIT", "0123abc")
    assert run.git_commit() == "0123abc"
