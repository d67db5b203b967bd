"""Which kernels a `llmsize measure` run uses: a frozen value made once, before the model is built, from the
options and the card's self-checks (selfcheck.py), and handed to the decoder. Nothing else decides.

A self-check that fails stops the run with the kernel named and the option that measures without it, unless the
user asked for fallbacks (`--fallback`): then the run goes on with the slower path and the report says what was
given up. Asking for a kernel by name (`--gemv words`, `--fused`) is asking for it: its check still runs and a
failure still stops the run (with `--fallback`: the named kernel is used all the same, as before).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.errors import LlmsizeError


class SelfCheckError(LlmsizeError):
    """A kernel did not reproduce the reference on this card."""


@dataclass(frozen=True)
class KernelPlan:
    gemv: str  # the NVFP4 GEMV family: words | triton (the byte kernel) | torch (the bf16 baseline, or the CPU)
    fused: bool  # the work between the GEMVs in fused.py's kernels
    fold: bool  # with the word kernel at batch 1: GeGLU and residual norms in the GEMVs' epilogues
    fold_combine: bool  # the attention combine in the split kernel's last slice (sliding layers)
    cap_argmax: bool  # fused step: the soft-cap and greedy tokens in one kernel after cuBLAS's lm_head GEMM
    off: frozenset[str] = frozenset()  # the word family's optional paths left out (gemv_words.WORDS_FEATURES)
    checks: tuple[tuple[str, bool], ...] = ()  # every self-check run, in order: (name, passed)
    fallbacks: tuple[str, ...] = ()  # what --fallback gave up, in words


def _fail(what: str, instead: str, found: str = "") -> SelfCheckError:
    said = f" ({found})" if found else ""
    return SelfCheckError(f"Self-check failed on this card: {what} did not reproduce the reference{said}.",
                          f"Measure without it ({instead}), or pass --fallback to let measure use the slower path "
                          "and say so.")


def plan_kernels(gemv: str, fused: bool | None, compile_: bool, quant: str, batch: int, device, cuda: bool,
                 fallback: bool = False) -> KernelPlan:
    """The run's kernels. `gemv` and `fused` as the options give them (auto / None: the shipped default where
    it checks out)."""
    from llmsize.measure import selfcheck
    from llmsize.measure.gemv_words import BATCH_FEATURES, WIDE_FEATURES, WORDS_FEATURES

    checks: list[tuple[str, bool]] = []
    gave_up: list[str] = []

    def judge(name: str, ok: bool, what: str, instead: str, given_up: str) -> bool:
        """Record a check; a failure stops the run (SelfCheckError) unless --fallback, which records what goes."""
        checks.append((name, ok))
        found = "" if ok else selfcheck.last_failure(device)
        if not ok and not fallback:
            raise _fail(what, instead, found)
        if not ok:
            gave_up.append(given_up + (f" ({found})" if found else ""))
        return ok

    off: frozenset[str] = frozenset()
    gemv = gemv if cuda and quant == "nvfp4" else "torch"
    if gemv in ("auto", "words"):
        ok, failed = selfcheck.words_kernel_check(device, batch)
        judge("words kernel", ok, "the word GEMV (gemv_words)", "--gemv triton, the byte kernel",
              "the word GEMV failed its self-check: " + ("the byte kernel (--gemv triton) runs instead"
                                                         if gemv == "auto" else "used as asked"))
        gemv = "words" if ok or gemv == "words" else "triton"
        if gemv == "words":
            used = [n for n in WORDS_FEATURES if (batch > 1 or n not in BATCH_FEATURES)
                    and (batch > 16 or n not in WIDE_FEATURES)]
            checks.extend((f"words kernel, {WORDS_FEATURES[n]}", n not in failed) for n in used)
            off = failed
            if failed and not fallback:
                raise _fail("the word GEMV's " + ", ".join(WORDS_FEATURES[n] for n in sorted(failed)),
                            "--gemv triton" + (", at a batch of 16 or less" if batch > 16 else ""))
            gave_up += [f"the word GEMV's {WORDS_FEATURES[n]} failed its self-check: left out" for n in sorted(failed)]
    fold, fold_combine = True, True
    if fused is not False and cuda and not compile_:
        ok = selfcheck.fused_step_ok(device, gemv)
        if gemv == "words" and not judge("fused step, GEMV epilogues", ok, "the fused step with the GEMV epilogues",
                                         "--no-fused", "the GEMV epilogues failed the fused step's self-check: "
                                                       "left out"):
            fold = False
            ok = selfcheck.fused_step_ok(device, gemv, fold=False)
        judge("fused step", ok, "the fused step (fused.py)", "--no-fused", "the fused step failed its self-check: "
              + ("used as asked (--fused)" if fused else "the eager step runs instead"))
        fused = ok or bool(fused)
    else:
        fused = bool(fused) and cuda
    if fused and cuda:
        if not judge("attention over cache slices", selfcheck.attention_ok(device, fold_combine=False),
                     "the split attention over cache slices (fused.attention)", "--no-fused",
                     "the split attention failed its self-check: the eager step runs instead"):
            fused = False
        elif fold:
            fold_combine = judge("attention, combine folded", selfcheck.attention_ok(device, fold_combine=True),
                                 "the attention combine folded into its last slice", "--no-fused",
                                 "the folded attention combine failed its self-check: the combine kernel runs")
    cap = False
    if cuda and fused:
        cap = judge("soft-cap and token kernel", selfcheck.cap_argmax_ok(device),
                    "the soft-cap and token kernel (logits.cap_argmax)", "--no-fused",
                    "the soft-cap and token kernel failed its self-check: the eager ops run instead")
    return KernelPlan(gemv=gemv, fused=fused, fold=fold, fold_combine=fold_combine, cap_argmax=cap, off=off,
                      checks=tuple(checks), fallbacks=tuple(gave_up))
