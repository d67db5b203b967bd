"""Achievable read bandwidth of the card: a Triton streaming-read kernel over a large buffer, timed with
CUDA events, median of several runs, for a few kernel shapes; the best shape's median is the probe. The
first shape is the best measured on an H200 (shared/reference/h200-measurements.md: int32 loads, 16
programs per SM, 8 warps, 4096 per block: 90% of the NVML theoretical 4,814 GB/s, vs 87% for torch's sum;
published read-only streams reach ~93-95% of the datasheet there). The others add pipelined loads and other
grid sizes, so that the probe, the honest denominator of `fraction_of_probe`, is not a weak one that would
flatter the decode loop. torch.sum is the fallback without Triton."""

from __future__ import annotations

import statistics

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

if triton is not None:
    @triton.jit
    def _read_kernel(x_ptr, out_ptr, n, per_program, BLOCK: tl.constexpr, STAGES: tl.constexpr):
        pid = tl.program_id(0)
        start = pid * per_program
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for off in tl.range(start, start + per_program, BLOCK, num_stages=STAGES):
            idx = off + tl.arange(0, BLOCK)
            acc ^= tl.load(x_ptr + idx, mask=idx < n, other=0)
        tl.store(out_ptr + pid, tl.reduce(acc, 0, _xor))

    @triton.jit
    def _xor(a, b):
        return a ^ b


# (programs per SM, warps, int32 elements per block, pipeline stages)
PROBE_SHAPES = ((16, 8, 4096, 1), (16, 8, 4096, 3), (8, 8, 8192, 3), (32, 4, 2048, 2), (4, 16, 8192, 3))


def read_once(buf: torch.Tensor, out: torch.Tensor, programs: int, block: int = 4096, warps: int = 8,
              stages: int = 1) -> None:
    n = buf.numel()
    per = triton.cdiv(triton.cdiv(n, programs), block) * block
    _read_kernel[(programs,)](buf, out, n, per, BLOCK=block, STAGES=stages, num_warps=warps)


def _median_s(device, once, runs: int) -> float:
    for _ in range(2):
        once()
    torch.cuda.synchronize(device)
    times = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        once()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return statistics.median(times)


def probe_read_bandwidth_gb_s(device: torch.device, buffer_bytes: int, runs: int = 15) -> tuple[float, str]:
    """Bytes-read/s of the best kernel shape (median of `runs` timed passes over a buffer each, after two
    warm-ups). Returns (GB/s, method)."""
    n = buffer_bytes // 4
    buf = torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), dtype=torch.int32, device=device)
    if triton is None:
        return n * 4 / _median_s(device, lambda: buf.sum(), runs) / 1e9, "torch.sum over int32"
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    best_s, method = float("inf"), ""
    for per_sm, warps, block, stages in PROBE_SHAPES:
        programs = per_sm * sms
        out = torch.empty(programs, dtype=torch.int32, device=device)
        t = _median_s(device, lambda: read_once(buf, out, programs, block, warps, stages), runs)
        if t < best_s:
            best_s = t
            method = (f"triton streaming read, best of {len(PROBE_SHAPES)} shapes: {programs} programs x {warps} "
                      f"warps, int32 blocks of {block}, {stages} stage(s)")
    return n * 4 / best_s / 1e9, method
