"""NVFP4 Triton GEMVs vs bf16 cuBLAS on Gemma 4 12B's linear shapes, batch 1 to 256: time and achieved GB/s
(and from 16 rows the TFLOP/s: past ~64 rows the tensor-core kernel stops being bandwidth-bound).

    python benchmarks/gemv_bench.py [--iters 200] [--best-out FILE] [--smoke]

Prints a table (shape, bytes, us, GB/s, % of the NVML theoretical bandwidth) for each path, then the time one
decoded token spends in each NVFP4 kernel (every shape times the layers that run it); --best-out writes the
name of the fastest batch-1 kernel `llmsize measure` ships (words or triton) for the scripts that follow. The
kernels under benchmarks/kernels (dot, pairs, the 2-4-row word kernel, the lm_head kernel) are timed beside
the shipped ones, so the table says what each is worth. Each call reads
a different copy of the matrix (enough copies to exceed L2 several times), as the decode step reads each
matrix once per token: a 9 MB matrix timed over and over would be served by the 60 MiB L2. Paste the table into
benchmarks/RESULTS.md with the card, date and commit. Needs a CUDA GPU and the measure extra; `--smoke` runs
the same code on the CPU through Triton's interpreter (TRITON_INTERPRET=1), on two small shapes, untimed in
any sense worth reading: what a GPU run would otherwise find broken.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmsize.measure.preflight import no_driver_reason  # noqa: E402

SHAPES = {  # [N, K] of Gemma 4 12B (shared/reference/gemma-architecture.md), fused as the decoder runs them
    "qkv sliding": (4096 + 2048 + 2048, 3840), "qkv full": (8192 + 512, 3840), "o sliding": (3840, 4096),
    "o full": (3840, 8192), "gate_up": (2 * 15360, 3840), "down": (3840, 15360),
}
PER_TOKEN = {"qkv sliding": 40, "qkv full": 8, "o sliding": 40, "o full": 8, "gate_up": 48, "down": 48}
KERNELS_B1 = {"nvfp4": "triton", "dot b1": "dot", "pairs b1": "pairs", "words b1": "words"}
SHIPPED_B1 = ("nvfp4", "words b1")  # the paths whose kernel `llmsize measure --gemv` takes
SMOKE_SHAPES = {"o sliding": (64, 128), "gate_up": (256, 256)}


def bench(fn, iters, device="cuda"):
    """Seconds per call of fn(i), i = 0..iters-1 captured in one CUDA graph (fn cycles through weight copies);
    on the CPU (--smoke) two plain calls."""
    import torch

    if device != "cuda":
        t = time.perf_counter()
        for i in range(2):
            fn(i)
        return (time.perf_counter() - t) / 2
    for i in range(5):
        fn(i)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(iters):
            fn(i)
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
    ap.add_argument("--smoke", action="store_true", help="the CPU, two small shapes, through the interpreter")
    args = ap.parse_args()
    why = None if args.smoke else no_driver_reason()  # NVML, before torch's seconds of import
    if why:
        sys.exit(f"Error: gemv_bench.py needs a CUDA GPU (or --smoke on the CPU): {why}.")
    run(args)


def run(args):
    import torch
    import torch.nn.functional as F

    from benchmarks.kernels import gemv_dot, gemv_rows, lm_head
    from llmsize.measure import gemv, gemv_tc, gemv_words, nvfp4, tuner
    from llmsize.measure.card import read_card

    dev = "cpu" if args.smoke else "cuda"
    per_token = {k: 0.0 for k in KERNELS_B1}
    theo = None if args.smoke else read_card(0).theoretical_bandwidth_gb_s
    print(f"theoretical bandwidth (NVML): {theo or 0:.1f} GB/s")

    def pct(gbs):
        return f"{100 * gbs / theo:6.1f}%" if theo else "    n/a"
    print(f"{'shape':12s} {'N x K':>13s} {'path':7s} {'MB':>8s} {'us':>8s} {'GB/s':>8s} {'% theo':>7s}")
    for name, (n, k) in (SMOKE_SHAPES if args.smoke else SHAPES).items():
        w16 = (torch.randn(n, k, device=dev) / k ** 0.5).to(torch.bfloat16)
        w4 = nvfp4.quantize(w16)
        # copies cycled through so each call reads DRAM, as the decode step does, not an L2-resident matrix
        c16 = [m[0] for m in tuner.copies_beyond_l2((w16,))]
        nb4 = w4.packed_bytes + w4.scale_bytes
        c4 = [nvfp4.Nvfp4Weight(*m) for m in tuner.copies_beyond_l2((w4.packed, w4.scales, w4.row_scale))]
        x = torch.randn(1, k, device=dev, dtype=torch.bfloat16)
        out = torch.empty(1, n, device=dev, dtype=torch.bfloat16)
        x16 = torch.randn(16, k, device=dev, dtype=torch.bfloat16)
        out16 = torch.empty(16, n, device=dev, dtype=torch.bfloat16)
        x256 = torch.randn(256, k, device=dev, dtype=torch.bfloat16)
        tuning = tuner.Tuning()  # the settings each shipped kernel timed, shown beside its row
        out256 = torch.empty(256, n, device=dev, dtype=torch.bfloat16)
        for path, fn, nbytes in (
            ("bf16", lambda i: F.linear(x, c16[i % len(c16)]), w16.numel() * 2),
            ("nvfp4", lambda i: gemv.nvfp4_gemv(x, c4[i % len(c4)], out=out), nb4),
            ("dot b1", lambda i: gemv_dot.nvfp4_gemv_dot(x, c4[i % len(c4)], out=out), nb4),
            ("pairs b1", lambda i: gemv_dot.nvfp4_gemv_pairs(x, c4[i % len(c4)], out=out), nb4),
            ("words b1", lambda i: gemv_words.nvfp4_gemv_words(x, c4[i % len(c4)], out=out, tuning=tuning), nb4),
            ("tc b1", lambda i: gemv_tc.nvfp4_gemv_tc(x, c4[i % len(c4)], out=out, tuning=tuning), nb4),
            ("rows4", lambda i: gemv_rows.nvfp4_gemv_rows(x16[:4], c4[i % len(c4)], out=out16[:4], tuning=tuning), nb4),
            ("pairs4", lambda i: gemv_dot.nvfp4_gemv_pairs(x16[:4], c4[i % len(c4)], out=out16[:4]), nb4),
            ("tc2", lambda i: gemv_tc.nvfp4_gemv_tc(x16[:2], c4[i % len(c4)], out=out16[:2], tuning=tuning), nb4),
            ("tc4", lambda i: gemv_tc.nvfp4_gemv_tc(x16[:4], c4[i % len(c4)], out=out16[:4], tuning=tuning), nb4),
            ("dot16", lambda i: gemv_dot.nvfp4_gemv_dot(x16, c4[i % len(c4)], out=out16), nb4),
            ("pairs16", lambda i: gemv_dot.nvfp4_gemv_pairs(x16, c4[i % len(c4)], out=out16), nb4),
            ("tc16", lambda i: gemv_tc.nvfp4_gemv_tc(x16, c4[i % len(c4)], out=out16, tuning=tuning), nb4),
            ("bf16x16", lambda i: F.linear(x16, c16[i % len(c16)]), w16.numel() * 2),
            ("tc64", lambda i: gemv_tc.nvfp4_gemv_tc(x256[:64], c4[i % len(c4)], out=out256[:64], tuning=tuning), nb4),
            ("tc256", lambda i: gemv_tc.nvfp4_gemv_tc(x256, c4[i % len(c4)], out=out256, tuning=tuning), nb4),
            ("bf16x256", lambda i: F.linear(x256, c16[i % len(c16)]), w16.numel() * 2),
        ):
            try:
                got = fn(0).float()
                rows = got.shape[0]
                if not path.startswith("bf16"):  # a fast wrong kernel must not win: check it first
                    xin = (x256 if rows > 16 else x16)[:rows] if rows > 1 else x
                    want = gemv.nvfp4_linear_reference(xin.float(), w4)
                    if not torch.allclose(got, want, rtol=2e-2, atol=2e-2):
                        raise ValueError(f"wrong result (max error {(got - want).abs().max().item():.3g})")
                t = bench(fn, args.iters, dev)
            except Exception as e:  # one kernel failing to compile must not hide the others
                print(f"{name:12s} {n:>6d}x{k:<6d} {path:7s} failed: {type(e).__name__}: {str(e)[:120]}")
                per_token.pop(path, None)
                continue
            if path in per_token:
                per_token[path] += t * PER_TOKEN[name]
            gbs = nbytes / t / 1e9
            cfg = tile = None
            if path == "words b1":
                cfg = next((v for key, v in tuning.chosen("words").items() if key[:3] == (n, k, 1)), None)
            if path.startswith("tc"):
                tile = tuning.chosen("tc").get((n, k, 1 if path == "tc b1" else int(path[2:]), False))
            print(f"{name:12s} {n:>6d}x{k:<6d} {path:7s} {nbytes / 1e6:8.2f} {t * 1e6:8.1f} {gbs:8.1f} "
                  f"{pct(gbs)}" + (f"  (BN, BW, warps, stages, split K, 16-byte x loads: {cfg})" if cfg else "")
                  + (f"  (BN, BW, warps, K splits, rows a program: {tile})" if tile else "")
                  + (f"  {2 * n * k * rows / t / 1e12:.0f} TFLOP/s" if rows >= 16 else ""))
    # the tied lm_head stays bf16 (262,144 x 3,840, 2.01 GB: a quarter of an NVFP4 step's bytes), through cuBLAS
    vocab, hidden = (1000, 128) if args.smoke else (262144, 3840)
    emb = (torch.randn(vocab, hidden, device=dev) * 0.02).to(torch.bfloat16)
    x = torch.randn(1, hidden, device=dev, dtype=torch.bfloat16)
    t = bench(lambda i: F.linear(x, emb), 20, dev)
    gbs = emb.numel() * 2 / t / 1e9
    print(f"{'lm_head':12s} {vocab:>6d}x{hidden:<6d} {'bf16':7s} {emb.numel() * 2 / 1e6:8.2f} {t * 1e6:8.1f} "
          f"{gbs:8.1f} {pct(gbs)}  (cuBLAS GEMV alone)")
    # the same bytes through benchmarks/kernels/lm_head.py's kernel (GEMV + soft-cap + greedy token + pos += 1)
    tok, pos = torch.zeros(1, dtype=torch.long, device=dev), torch.zeros(1, dtype=torch.long, device=dev)
    try:
        head_tuning = tuner.Tuning()
        lm_head.lm_head_greedy(x, emb, 30.0, tok, pos, tuning=head_tuning)  # times its configs
        t = bench(lambda i: lm_head.lm_head_greedy(x, emb, 30.0, tok, pos, tuning=head_tuning), 20, dev)
        gbs = emb.numel() * 2 / t / 1e9
        cfg = head_tuning.chosen("lm_head").get((vocab, hidden, torch.bfloat16))
        print(f"{'lm_head':12s} {vocab:>6d}x{hidden:<6d} {'kernel':7s} {emb.numel() * 2 / 1e6:8.2f} {t * 1e6:8.1f} "
              f"{gbs:8.1f} {pct(gbs)}  (Triton, with soft-cap and token; BN, BK, warps, stages: {cfg})")
    except Exception as e:  # report it and finish the table
        print(f"lm_head kernel failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
    print("time per decoded token in the linear layers, batch 1 (lm_head excluded):")
    for path, t in sorted(per_token.items(), key=lambda kv: kv[1]):
        print(f"  {path:9s} {t * 1e3:8.3f} ms  ({KERNELS_B1[path]})")
    shipped = {p: t for p, t in per_token.items() if p in SHIPPED_B1}
    if args.best_out and shipped:
        best = min(shipped, key=shipped.get)
        with open(args.best_out, "w") as f:
            f.write(KERNELS_B1[best] + "\n")


if __name__ == "__main__":
    main()
