"""NVFP4 Triton GEMV vs bf16 cuBLAS on Gemma 4 12B's linear shapes, batch 1: time and achieved GB/s.

    python benchmarks/gemv_bench.py [--iters 200]

Prints a table (shape, bytes, us, GB/s, % of the NVML theoretical bandwidth) for each path; paste it into
benchmarks/RESULTS.md with the card, date and commit. Needs a CUDA GPU and the measure extra.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from llmsize.measure import gemv, nvfp4
from llmsize.measure.card import read_card

SHAPES = {  # [N, K] of Gemma 4 12B (shared/reference/gemma-architecture.md), fused as the decoder runs them
    "qkv sliding": (4096 + 2048 + 2048, 3840), "qkv full": (8192 + 512, 3840), "o sliding": (3840, 4096),
    "o full": (3840, 8192), "gate_up": (2 * 15360, 3840), "down": (3840, 15360),
}


def bench(fn, iters):
    for _ in range(5):
        fn()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters):
            fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / 1e3 / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args()
    theo = read_card(0).theoretical_bandwidth_gb_s
    print(f"theoretical bandwidth (NVML): {theo:.1f} GB/s")
    print(f"{'shape':12s} {'N x K':>13s} {'path':7s} {'MB':>8s} {'us':>8s} {'GB/s':>8s} {'% theo':>7s}")
    for name, (n, k) in SHAPES.items():
        w16 = (torch.randn(n, k, device="cuda") / k ** 0.5).to(torch.bfloat16)
        w4 = nvfp4.quantize(w16)
        x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(1, n, device="cuda", dtype=torch.bfloat16)
        x16 = torch.randn(16, k, device="cuda", dtype=torch.bfloat16)
        out16 = torch.empty(16, n, device="cuda", dtype=torch.bfloat16)
        for path, fn, nbytes in (
            ("bf16", lambda: F.linear(x, w16), w16.numel() * 2),
            ("nvfp4", lambda: gemv.nvfp4_gemv(x, w4, out=out), w4.packed_bytes + w4.scale_bytes),
            ("dot b1", lambda: gemv.nvfp4_gemv_dot(x, w4, out=out), w4.packed_bytes + w4.scale_bytes),
            ("dot16", lambda: gemv.nvfp4_gemv_dot(x16, w4, out=out16), w4.packed_bytes + w4.scale_bytes),
            ("bf16x16", lambda: F.linear(x16, w16), w16.numel() * 2),
        ):
            t = bench(fn, args.iters)
            gbs = nbytes / t / 1e9
            print(f"{name:12s} {n:>6d}x{k:<6d} {path:7s} {nbytes / 1e6:8.2f} {t * 1e6:8.1f} {gbs:8.1f} "
                  f"{100 * gbs / theo:6.1f}%")


if __name__ == "__main__":
    main()
