"""Where a decode step's time goes on the GPU: kernels per step and the top kernels by CUDA time, for the
NVFP4 Gemma 4 12B loop (or bf16). For issue 5's work: which kernels to fuse, how far the GEMV is from the
bandwidth it moves.

    python benchmarks/profile_decode.py [--quant nvfp4] [--context 4096] [--batch 1] [--steps 8] [--compile]

Prints a table; needs a CUDA GPU and the measure extra.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from llmsize.measure import GEMV_KERNELS, gemma4


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quant", default="nvfp4", choices=["nvfp4", "bf16"])
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=1,
                    help="sequences decoded together (1-16; 1-256 with --gemv words or --quant bf16)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--gemv", default="triton", choices=GEMV_KERNELS)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--fused", action="store_true")
    ap.add_argument("--lm-head", default=None, choices=["torch", "triton"],
                    help="the step's end: cuBLAS + torch ops, or the lm_head kernel (default: the kernel for the "
                         "fused NVFP4 step, as measure uses it when it times no slower)")
    args = ap.parse_args()
    most = 256 if args.gemv == "words" or args.quant == "bf16" else 16  # above 16 rows: the word family alone
    if not 1 <= args.batch <= most:
        ap.error(f"--batch {args.batch}: use 1 to {most}" + (" (up to 256 with --gemv words)" if most == 16 else ""))
    lm_head = args.lm_head or ("triton" if args.fused and args.quant == "nvfp4" else "torch")
    cfg = gemma4.GEMMA4_12B
    w = gemma4.build_random(cfg, device="cuda", dtype=torch.bfloat16, quant=args.quant)
    dec = gemma4.Gemma4Decoder(w, batch=args.batch, max_positions=args.context + args.steps + 16,
                               gemv=args.gemv if args.quant == "nvfp4" else "torch", fused=args.fused,
                               lm_head=lm_head)
    dec.prefill(torch.randint(0, cfg.vocab_size, (args.batch, args.context), device="cuda"))
    step = torch.compile(dec.decode_step, dynamic=False) if args.compile else dec.decode_step
    for _ in range(3):  # compile, autotune
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
    per_kernel = defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = per_kernel[e.name[:70]]
            k[0] += 1
            k[1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    total_us = sum(v[1] for v in per_kernel.values())
    kernels = sum(v[0] for v in per_kernel.values())
    how = (args.gemv if args.quant == "nvfp4" else "cuBLAS") + (", compiled" if args.compile else "") + \
        (", fused" if args.fused else "")
    print(f"{args.quant} ({how}), "
          f"context {args.context}, batch {args.batch}: {kernels / args.steps:,.0f} kernels per step, "
          f"{total_us / args.steps / 1e3:,.3f} ms of kernel time per step")
    print(f"{'kernel':70s} {'per step':>9s} {'us/step':>9s} {'share':>6s}")
    for name, (n, us) in sorted(per_kernel.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"{name:70s} {n / args.steps:9.1f} {us / args.steps:9.1f} {100 * us / total_us:5.1f}%")


if __name__ == "__main__":
    main()
