"""Achievable read bandwidth of the card: a Triton streaming-read kernel over a large buffer, timed with
CUDA events, median of several runs. The kernel shape is the best measured on an H200
(shared/reference/h200-measurements.md: int32 loads, 16 programs per SM, 8 warps, 4096 per block: 90% of
the NVML theoretical 4,814 GB/s, vs 87% for torch's sum). torch.sum is the fallback without Triton."""

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
    def _read_kernel(x_ptr, out_ptr, n, per_program, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        start = pid * per_program
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for off in range(start, start + per_program, BLOCK):
            idx = off + tl.arange(0, BLOCK)
            acc ^= tl.load(x_ptr + idx, mask=idx < n, other=0)
        tl.store(out_ptr + pid, tl.reduce(acc, 0, _xor))

    @triton.jit
    def _xor(a, b):
        return a ^ b


def read_once(buf: torch.Tensor, out: torch.Tensor, programs: int, block: int = 4096) -> None:
    n = buf.numel()
    per = triton.cdiv(triton.cdiv(n, programs), block) * block
    _read_kernel[(programs,)](buf, out, n, per, BLOCK=block, num_warps=8)


def probe_read_bandwidth_gb_s(device: torch.device, buffer_bytes: int, runs: int = 15) -> tuple[float, str]:
    """Median bytes-read/s of `runs` timed passes over a buffer, after two warm-ups. Returns (GB/s, method)."""
    n = buffer_bytes // 4
    buf = torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), dtype=torch.int32, device=device)
    props = torch.cuda.get_device_properties(device)
    programs = 16 * props.multi_processor_count
    out = torch.empty(programs, dtype=torch.int32, device=device)
    if triton is not None:
        def once():
            read_once(buf, out, programs)
        method = f"triton streaming read, {programs} programs x 8 warps, int32 blocks of 4096"
    else:
        def once():
            buf.sum()
        method = "torch.sum over int32"
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
    return n * 4 / statistics.median(times) / 1e9, method
