"""The one launch-settings tuner of the shipped kernels: each configuration timed by CUDA events over copies of
the weight that together overflow the L2, so each launch reads from DRAM as the decode step does; once per
shape, before any graph capture. Torch only; no kernel of its own."""

from __future__ import annotations

import torch

L2_DEFEAT_BYTES = 192 * 2 ** 20  # three times the H200's 60 MiB L2 (shared/reference/h200-measurements.md)


def copies_beyond_l2(mats: tuple[torch.Tensor, ...]) -> list[tuple[torch.Tensor, ...]]:
    """The weight and enough clones of it that cycling through them reads from DRAM, as the decode step does
    (each matrix once per token), not from L2: timing one 9 MB matrix over and over would time L2."""
    nbytes = sum(t.numel() * t.element_size() for t in mats)
    n = min(64, max(1, -(-L2_DEFEAT_BYTES // nbytes)))
    return [mats] + [tuple(t.clone() for t in mats) for _ in range(n - 1)]


def time_configs(launch, configs, copies):
    """Fastest of `configs` by CUDA events, each launch on the next of `copies` (DRAM-bound, as in the decode
    step); called once per shape, before any graph capture."""
    best, best_t = configs[0], float("inf")
    reps = max(10, len(copies))
    for cfg in configs:
        for i in range(3):
            launch(*cfg, mats=copies[i % len(copies)])
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(reps):
            launch(*cfg, mats=copies[i % len(copies)])
        end.record()
        end.synchronize()
        t = start.elapsed_time(end)
        if t < best_t:
            best, best_t = cfg, t
    return best
