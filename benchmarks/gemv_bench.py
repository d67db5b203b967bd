"""NVFP4 Triton GEMVs vs bf16 cuBLAS on Gemma 4 12B's linear shapes, batch 1 and 16: time and achieved GB/s.

    python benchmarks/gemv_bench.py [--iters 200] [--best-out FILE]

Prints a table (shape, bytes, us, GB/s, % of the NVML theoretical bandwidth) for each path, then the time one
decoded token spends in each NVFP4 kernel (every shape times the layers that run it); --best-out writes the
name of the fastest batch-1 kernel (triton, dot or pairs) for the scripts that follow. Paste the table into
benchmarks/RESULTS.md with the card, date and commit. Needs a CUDA GPU and the measure extra.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from llmsize.measure import gemv, gemv_words, nvfp4
from llmsize.measure.card import read_card

SHAPES = {  # [N, K] of Gemma 4 12B (shared/reference/gemma-architecture.md), fused as the decoder runs them
    "qkv sliding": (4096 + 2048 + 2048, 3840), "qkv full": (8192 + 512, 3840), "o sliding": (3840, 4096),
    "o full": (3840, 8192), "gate_up": (2 * 15360, 3840), "down": (3840, 15360),
}
PER_TOKEN = {"qkv sliding": 40, "qkv full": 8, "o sliding": 40, "o full": 8, "gate_up": 48, "down": 48}
KERNELS_B1 = {"nvfp4": "triton", "dot b1": "dot", "pairs b1": "pairs", "words b1": "words"}


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
    ap.add_argument("--best-out", default=None)
    args = ap.parse_args()
    per_token = {k: 0.0 for k in KERNELS_B1}
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
            ("pairs b1", lambda: gemv.nvfp4_gemv_pairs(x, w4, out=out), w4.packed_bytes + w4.scale_bytes),
            ("words b1", lambda: gemv_words.nvfp4_gemv_words(x, w4, out=out), w4.packed_bytes + w4.scale_bytes),
            ("dot16", lambda: gemv.nvfp4_gemv_dot(x16, w4, out=out16), w4.packed_bytes + w4.scale_bytes),
            ("pairs16", lambda: gemv.nvfp4_gemv_pairs(x16, w4, out=out16), w4.packed_bytes + w4.scale_bytes),
            ("bf16x16", lambda: F.linear(x16, w16), w16.numel() * 2),
        ):
            try:
                if path not in ("bf16", "bf16x16"):  # a fast wrong kernel must not win: check it first
                    got = fn().float()
                    xin = x16 if got.shape[0] == 16 else x
                    want = gemv.nvfp4_linear_reference(xin.float(), w4)
                    if not torch.allclose(got, want, rtol=2e-2, atol=2e-2):
                        raise ValueError(f"wrong result (max error {(got - want).abs().max().item():.3g})")
                t = bench(fn, args.iters)
            except Exception as e:  # one kernel failing to compile must not hide the others
                print(f"{name:12s} {n:>6d}x{k:<6d} {path:7s} failed: {type(e).__name__}: {str(e)[:120]}")
                per_token.pop(path, None)
                continue
            if path in per_token:
                per_token[path] += t * PER_TOKEN[name]
            gbs = nbytes / t / 1e9
            print(f"{name:12s} {n:>6d}x{k:<6d} {path:7s} {nbytes / 1e6:8.2f} {t * 1e6:8.1f} {gbs:8.1f} "
                  f"{100 * gbs / theo:6.1f}%")
    print("time per decoded token in the linear layers, batch 1 (lm_head excluded):")
    for path, t in sorted(per_token.items(), key=lambda kv: kv[1]):
        print(f"  {path:9s} {t * 1e3:8.3f} ms  ({KERNELS_B1[path]})")
    if args.best_out and per_token:
        best = min(per_token, key=per_token.get)
        with open(args.best_out, "w") as f:
            f.write(KERNELS_B1[best] + "\n")


if __name__ == "__main__":
    main()
