"""The one launch-settings tuner of the shipped kernels: each configuration timed by CUDA events over copies of
the weight that together overflow the L2, so each launch reads from DRAM as the decode step does; once per
shape, before any graph capture. Torch only; no kernel of its own.

What it chose is a value, `Tuning`, that a run makes once and hands to the decoder, which passes it to every
GEMV call: the first call of each shape (the warm-up step) times the configurations and records the fastest;
then the run freezes it, so a shape first met inside a captured graph is an error, not a timing in the graph.
The report reads the settings that ran from the same value (`Tuning.chosen`).
"""

from __future__ import annotations

import torch

L2_DEFEAT_BYTES = 192 * 2 ** 20  # three times the H200's 60 MiB L2 (shared/reference/h200-measurements.md)


def copies_beyond_l2(mats: tuple[torch.Tensor, ...]) -> list[tuple[torch.Tensor, ...]]:
    """The weight and enough clones of it that cycling through them reads from DRAM, as the decode step does
    (each matrix once per token), not from L2: timing one 9 MB matrix over and over would time L2."""
    nbytes = sum(t.numel() * t.element_size() for t in mats)
    n = min(64, max(1, -(-L2_DEFEAT_BYTES // nbytes)))
    return [mats] + [tuple(t.clone() for t in mats) for _ in range(n - 1)]


ROUNDS = 3  # each configuration timed this many times, the configurations in turn; its fastest round counts


def time_configs(launch, configs, copies):
    """Fastest of `configs`, each launched on the next of `copies` (DRAM-bound, as in the decode step); called
    once per shape, before any graph capture. Each configuration's launches are replayed from a CUDA graph, as the
    decode step runs them, and timed by CUDA events in ROUNDS rounds, the configurations in turn, its best round
    kept. Launched from Python instead, a Triton kernel costs the host tens of microseconds (triton-lang/triton
    #2637), as long as a small GEMV runs on an H200 (17.7 MB in 18-30 us, benchmarks/RESULTS.md): such a timing
    is the host's more than the kernel's (two H200 runs of the same settings differed by 8% a step on 2026-12-04,
    7.02 against 6.46 ms; their tiles were not recorded then). A configuration whose launches cannot be captured
    is timed as launched."""
    reps = max(10, len(copies))
    runs = {}
    capturing = torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()  # no capture in a capture
    for cfg in configs:
        for i in range(3):  # compiled and warm before the capture
            launch(*cfg, mats=copies[i % len(copies)])

        def each(cfg=cfg):
            for i in range(reps):
                launch(*cfg, mats=copies[i % len(copies)])
        try:
            runs[cfg] = each if capturing else replay_of(each)
        except Exception:  # noqa: BLE001 - launches this stream cannot capture: timed as launched
            runs[cfg] = each
    best_ms = {cfg: float("inf") for cfg in runs}
    for _ in range(ROUNDS):
        for cfg, run in runs.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            best_ms[cfg] = min(best_ms[cfg], start.elapsed_time(end))
    return min(configs, key=lambda cfg: best_ms[cfg])


def replay_of(fn):
    """fn's kernel launches captured in a CUDA graph on the current device (gpu.capture_step: one warm call on a
    side stream, then the capture): its replay."""
    from llmsize.measure.gpu import capture_step

    return capture_step(torch, fn, torch.cuda.current_device())


class TuningFrozenError(RuntimeError):
    """A shape whose launch settings were not timed before the run froze its tuning."""


class Tuning:
    """The launch settings one run's kernels use, keyed by (kernel, shape...): timed at a shape's first call,
    then fixed. A call without one (a benchmark's or test's one-off) gets a fresh Tuning and times its configs."""

    def __init__(self) -> None:
        self._best: dict[tuple, tuple] = {}
        self.frozen = False

    def best(self, key: tuple, launch, configs, mats: tuple[torch.Tensor, ...]) -> tuple:
        """The settings for `key`: timed now over copies of `mats` beyond the L2 if this is its first call (one
        configuration is taken as it is)."""
        if key not in self._best:
            if self.frozen:
                raise TuningFrozenError(f"launch settings for {key} were not timed before the decode step was "
                                        "captured")
            self._best[key] = tuple(configs[0] if len(configs) == 1 else
                                    time_configs(launch, configs, copies_beyond_l2(mats)))
        return self._best[key]

    def freeze(self) -> None:
        self.frozen = True

    def chosen(self, kernel: str) -> dict[tuple, tuple]:
        """{shape key (without the kernel's name): settings} for one kernel, in order."""
        return {k[1:]: v for k, v in sorted(self._best.items(), key=lambda kv: repr(kv[0])) if k[0] == kernel}
