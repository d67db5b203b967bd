"""The kernels of a measure run are one frozen value, decided before the build from the options and the card's
self-checks; a failed check stops the run naming the kernel, unless --fallback. The checks themselves are faked
here (their own tests run them through Triton's interpreter): this is about what the plan does with their answers."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from llmsize.measure import selfcheck
from llmsize.measure.kernel_plan import SelfCheckError, plan_kernels

CPU = torch.device("cpu")


@pytest.fixture
def checks(monkeypatch):
    """Every self-check passes unless the test says otherwise; returns the dict of answers it may change."""
    answers = {"words": True, "paths": frozenset(), "fused": True, "fused_no_fold": True, "attention": True,
               "attention_folded": True, "cap_argmax": True}
    seen = []

    def words(device, batch=1):
        seen.append("words")
        return answers["words"], answers["paths"]

    def fused(device, gemv="torch", fold=True):
        seen.append(f"fused fold={fold}")
        return answers["fused"] if fold else answers["fused_no_fold"]

    def attention(device, fold_combine):
        seen.append(f"attention fold={fold_combine}")
        return answers["attention_folded"] if fold_combine else answers["attention"]

    monkeypatch.setattr(selfcheck, "words_kernel_check", words)
    monkeypatch.setattr(selfcheck, "fused_step_ok", fused)
    monkeypatch.setattr(selfcheck, "attention_ok", attention)
    monkeypatch.setattr(selfcheck, "cap_argmax_ok", lambda device: answers["cap_argmax"])
    monkeypatch.setattr(selfcheck, "last_failure", lambda device: "")
    answers["seen"] = seen
    return answers


def _plan(batch=1, gemv="auto", fused=None, fallback=False, cuda=True, quant="nvfp4", compile_=False):
    return plan_kernels(gemv, fused, compile_, quant, batch, CPU, cuda, fallback)


def test_all_checks_pass_the_shipped_kernels_run(checks):
    p = _plan()
    assert (p.gemv, p.fused, p.fold, p.fold_combine, p.cap_argmax, p.off) == ("words", True, True, True, True,
                                                                             frozenset())
    assert dict(p.checks) == {"words kernel": True, "words kernel, pipelined loads": True,
                              "words kernel, split over K": True, "words kernel, activations in 4-byte loads": True,
                              "fused step, GEMV epilogues": True,
                              "fused step": True, "attention over cache slices": True,
                              "attention, combine folded": True, "soft-cap and token kernel": True}
    assert p.fallbacks == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.gemv = "triton"
    b = _plan(batch=8)
    assert b.cap_argmax and "words kernel, 2-16 rows on the tensor cores" in dict(b.checks)


@pytest.mark.parametrize("failing, words", [
    ({"words": False}, "the word GEMV (gemv_words)"),
    ({"fused": False}, "the fused step with the GEMV epilogues"),
    ({"attention": False}, "the split attention over cache slices"),
    ({"attention_folded": False}, "the attention combine folded"),
    ({"cap_argmax": False}, "the soft-cap and token kernel"),
])
def test_a_failed_check_stops_the_run_naming_the_kernel(checks, failing, words):
    checks.update(failing)
    with pytest.raises(SelfCheckError) as e:
        _plan()
    assert words in e.value.message and "--fallback" in e.value.hint


def test_a_failed_check_says_what_it_found(checks, monkeypatch):
    """The check's own finding (by how much, or the exception) goes into the one-line error and the fallback."""
    monkeypatch.setattr(selfcheck, "last_failure", lambda device: "logits off by 1.1 on average")
    checks.update(fused=False, fused_no_fold=False)
    with pytest.raises(SelfCheckError) as e:
        _plan()
    assert e.value.message.endswith("did not reproduce the reference (logits off by 1.1 on average).")
    p = _plan(fallback=True)
    assert any(f.endswith("(logits off by 1.1 on average)") for f in p.fallbacks), p.fallbacks


def test_once_per_device_keeps_why_a_check_failed():
    """A check that raises fails, and says which exception; one that passes says nothing; each answer is cached."""
    calls = []

    def broken(device):
        calls.append(1)
        raise RuntimeError("PTX for sm_90a not supported\nsecond line")

    def fine(device):
        return True, "all close"
    cache: dict = {}
    assert not selfcheck.once_per_device(cache, CPU, broken)
    assert selfcheck.last_failure(CPU) == "RuntimeError: PTX for sm_90a not supported"
    assert selfcheck.once_per_device({}, CPU, fine) and selfcheck.last_failure(CPU) == ""
    assert not selfcheck.once_per_device(cache, CPU, broken) and len(calls) == 1  # cached, with its reason
    assert selfcheck.last_failure(CPU) == "RuntimeError: PTX for sm_90a not supported"


def test_a_failed_optional_path_stops_the_run_too(checks):
    checks["paths"] = frozenset({"tc"})
    with pytest.raises(SelfCheckError) as e:
        _plan(batch=2)
    assert "the word GEMV's 2-16 rows on the tensor cores" in e.value.message


def test_with_fallback_the_slower_path_runs_and_the_plan_says_so(checks):
    checks.update(words=False)
    p = _plan(fallback=True)
    assert p.gemv == "triton" and "the byte kernel (--gemv triton) runs instead" in p.fallbacks[0]
    checks.update(words=True, paths=frozenset({"tc"}), fused=False, fused_no_fold=True)
    p = _plan(batch=2, fallback=True)
    assert p.gemv == "words" and p.off == frozenset({"tc"}) and p.fused and not p.fold
    assert any("2-16 rows on the tensor cores" in f for f in p.fallbacks) and any("GEMV epilogues" in f
                                                                               for f in p.fallbacks)
    checks.update(fused=False, fused_no_fold=False)
    p = _plan(batch=2, fallback=True)
    assert not p.fused and any("the eager step runs instead" in f for f in p.fallbacks)


def test_asked_for_kernels_and_no_gpu(checks):
    # --no-fused: no fused-step, attention or soft-cap kernel check runs
    p = _plan(fused=False)
    assert not p.fused and not p.cap_argmax and checks["seen"] == ["words"]
    # --gemv triton: the word kernel is not checked
    checks["seen"].clear()
    p = _plan(gemv="triton", fused=False)
    assert p.gemv == "triton" and checks["seen"] == []
    # the CPU and the bf16 baseline: torch matmuls, nothing checked
    for plan in (_plan(cuda=False), _plan(quant="bf16", fused=False)):
        assert plan.gemv == "torch" and plan.checks == ()
    # --compile fuses the eager step its own way: no fused-step check
    checks["seen"].clear()
    assert not _plan(compile_=True).fused and checks["seen"] == ["words"]
