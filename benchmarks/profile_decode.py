"""Where a decode step's time goes on the GPU: kernels per step, the top kernels by GPU time, and how much of
the step no kernel runs at all (the launch gaps), for the NVFP4 Gemma 4 12B loop (or bf16). For issue 5's
work: which kernels to fuse, how far the GEMV is from the bandwidth it moves, and whether the gaps between
kernels are worth a persistent kernel.

    python benchmarks/profile_decode.py [--quant nvfp4] [--context 4096] [--batch 1] [--steps 8] [--gemv words]
                                        [--fused] [--eager] [--compile] [--smoke]

By default the step is replayed from a CUDA graph, as `llmsize measure` times it (`--eager`: launched one
kernel at a time from Python, so the gaps are the host's launch overhead). Besides the table it prints:
- the step's time from CUDA events, with the profiler off (what measure's ms per token is);
- the kernels' span in the profile (first start to last end, per step), the time at least one kernel runs
  (the union of their intervals) and the gaps = span - union;
- the sum of kernel durations, which exceeds the union where kernels overlap (programmatic dependent launch
  lets a kernel start while the one before it ends).
Needs a CUDA GPU and the measure extra; `--smoke` runs the same code on the CPU (the small Gemma-4-shaped
model, torch's CPU profiler, top-level operators in place of kernels, no graph): figures not worth reading,
only what a GPU run would otherwise find broken.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmsize.measure.preflight import no_driver_reason  # noqa: E402

GEMVS = ("triton", "words", "dot", "pairs")  # benchmarks/kernels/decoder.LabDecoder's NVFP4 kernels


def union_us(intervals) -> float:
    """Length of the union of [start, end] intervals (microseconds): the time at least one of them runs."""
    total, reach = 0.0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def step_timeline(intervals, steps: int) -> dict:
    """Per step: the span from the first kernel's start to the last one's end, the union of the kernels'
    intervals, the gaps (span - union) and the sum of their durations (above the union where they overlap)."""
    if not intervals:
        return {"span_us": 0.0, "busy_us": 0.0, "gap_us": 0.0, "sum_us": 0.0}
    span = max(e for _, e in intervals) - min(s for s, _ in intervals)
    busy = union_us(intervals)
    return {"span_us": span / steps, "busy_us": busy / steps, "gap_us": (span - busy) / steps,
            "sum_us": sum(e - s for s, e in intervals) / steps}


def _replay(step, device, smoke: bool, eager: bool):
    """The step as measure runs it: captured in a CUDA graph (unless eager or on the CPU)."""
    if smoke or eager:
        return step
    import torch

    from llmsize.measure.gpu import capture_step
    return capture_step(torch, step, device)


def _step_ms(replay, smoke: bool, reps: int = 20) -> float:
    """Median ms of one step with the profiler off (measure's own timer: CUDA events on a GPU, the wall clock on
    the CPU)."""
    import torch

    from llmsize.measure.gpu import CudaGpu, timed_s
    gpu = None if smoke else CudaGpu(torch, torch.cuda.current_device())
    return statistics.median(timed_s(gpu, replay) for _ in range(reps)) * 1e3


def _kernel_events(prof, smoke: bool):
    """(name, start_us, end_us) of every kernel (on the CPU: of every top-level operator)."""
    import torch

    out = []
    for e in prof.events():
        if smoke:
            if e.device_type != torch.autograd.DeviceType.CPU or e.cpu_parent is not None:
                continue
        elif e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        out.append((e.name, float(e.time_range.start), float(e.time_range.end)))
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quant", default="nvfp4", choices=["nvfp4", "bf16"])
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=1,
                    help="sequences decoded together (1-16; 1-256 with --gemv words or --quant bf16)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--gemv", default="triton", choices=GEMVS)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--fused", action="store_true")
    ap.add_argument("--eager", action="store_true", help="launch the step's kernels one by one (no CUDA graph)")
    ap.add_argument("--lm-head", default="torch", choices=["torch", "triton"],
                    help="the fused step's end at batch 1: cuBLAS's GEMM then the soft-cap and token kernel, as "
                         "measure runs it (torch), or benchmarks/kernels/lm_head.py's kernel (triton)")
    ap.add_argument("--smoke", action="store_true",
                    help="on the CPU: the small model, torch's CPU profiler (set TRITON_INTERPRET=1 for Triton paths)")
    return ap


def main() -> None:
    ap = parser()
    args = ap.parse_args()
    most = 256 if args.gemv == "words" or args.quant == "bf16" else 16  # above 16 rows: the word family alone
    if not 1 <= args.batch <= most:
        ap.error(f"--batch {args.batch}: use 1 to {most}" + (" (up to 256 with --gemv words)" if most == 16 else ""))
    if args.steps < 1:
        ap.error(f"--steps {args.steps}: profile at least one step")
    why = None if args.smoke else no_driver_reason()  # NVML, before torch's seconds of import
    if why:
        ap.error(f"{why}: run on a GPU machine, or --smoke for the CPU rehearsal")
    import torch
    from torch.profiler import ProfilerActivity, profile

    from benchmarks.kernels.decoder import LabDecoder
    from llmsize.measure import gemma4

    if not args.smoke and not torch.cuda.is_available():
        ap.error("no CUDA GPU visible to torch: run on a GPU machine, or --smoke for the CPU rehearsal")
    if args.smoke:
        cfg, device, dtype = gemma4.GEMMA4_TINY, torch.device("cpu"), torch.float32
    else:
        cfg, device, dtype = gemma4.GEMMA4_12B, torch.device("cuda"), torch.bfloat16
    if args.context < 1:
        ap.error(f"--context {args.context}: prefill at least one token")
    w = gemma4.build_random(cfg, device=device, dtype=dtype, quant=args.quant)
    reps = 3 if args.smoke else 20  # steps timed with the profiler off; positions: the prompt, 3 warm-up
    # steps, one more before the capture, the timed and the profiled replays, each a token further
    dec = LabDecoder(w, batch=args.batch, max_positions=args.context + 3 + 1 + reps + args.steps + 8,
                     gemv=args.gemv if args.quant == "nvfp4" else "torch", fused=args.fused,
                     cap_argmax=args.fused, lm_head=args.lm_head)
    dec.prefill(torch.randint(0, cfg.vocab_size, (args.batch, args.context), device=device))
    step = torch.compile(dec.decode_step, dynamic=False) if args.compile else dec.decode_step
    for _ in range(3):  # compile, autotune
        step()
    replay = _replay(step, device, args.smoke, args.eager)
    step_ms = _step_ms(replay, args.smoke, reps)
    if not args.smoke:
        torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU if args.smoke else ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            replay()
        if not args.smoke:
            torch.cuda.synchronize()
    events = _kernel_events(prof, args.smoke)
    per_kernel = defaultdict(lambda: [0, 0.0])
    for name, start, end in events:
        k = per_kernel[name[:70]]
        k[0] += 1
        k[1] += end - start
    line = step_timeline([(s, e) for _, s, e in events], args.steps)
    total_us = line["sum_us"] * args.steps
    how = (args.gemv if args.quant == "nvfp4" else "cuBLAS") + (", compiled" if args.compile else "") + \
        (", fused" if args.fused else "") + (", eager launches" if args.eager or args.smoke else ", CUDA graph")
    what = "top-level operators" if args.smoke else "kernels"
    print(f"{args.quant} ({how}){', CPU smoke' if args.smoke else ''}, "
          f"context {args.context}, batch {args.batch}: {len(events) / args.steps:,.0f} {what} per step")
    span, pct = line["span_us"], (lambda us: f"{100 * us / line['span_us'] if line['span_us'] else 0:.1f}%")
    for label, ms, note in (
            ("step, profiler off", step_ms, f"median of {reps} replays"),
            (f"{what}' span a step", span / 1e3, "first start to last end, profiled"),
            ("  at least one running", line["busy_us"] / 1e3, f"{pct(line['busy_us'])} of the span"),
            ("  gaps, none running", line["gap_us"] / 1e3, f"{pct(line['gap_us'])} of the span"),
            ("  sum of their durations", line["sum_us"] / 1e3, "above the union where they overlap")):
        print(f"{label + ':':34s} {ms:9.3f} ms  ({note})")
    print(f"{'kernel' if not args.smoke else 'operator':70s} {'per step':>9s} {'us/step':>9s} {'share':>6s}")
    for name, (n, us) in sorted(per_kernel.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"{name:70s} {n / args.steps:9.1f} {us / args.steps:9.1f} {100 * us / total_us if total_us else 0:5.1f}%")


if __name__ == "__main__":
    main()
