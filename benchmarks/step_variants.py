"""One Gemma 4 12B NVFP4 model on the card, many ways to run its decode step: which launch settings and kernels
make the batch-1 step fastest. For issue 5's sweeps: the model is built and prefilled once, then each variant
is captured in its own CUDA graph and timed, and its first logits are set beside the default's (the first row).

    python benchmarks/step_variants.py [--context 4096] [--steps 64] [--out FILE] [--append]

A variant is a GEMV kernel, the eager or fused step (with or without the word GEMVs' epilogue folds and the
folded attention combine; ending in cuBLAS's lm_head GEMM and the soft-cap and token kernel, in cuBLAS + torch
ops, or in benchmarks/kernels/lm_head.py's kernel), and launch.py's settings
(LLMSIZE_PDL: 0 off, 1 wait first, 2 early; LLMSIZE_PREFETCH_KB: the L2 prefetch per GEMV program before its
wait). Every variant replays from the same position, so each attends to the same context. Prints a Markdown
table (card, date, commit, command) of ms per step, GB/s and percent of NVML theoretical; --append adds it to
benchmarks/RESULTS.md.

The logits column is a check only where one can be made. Through 48 layers of random bf16 weights a rounding
difference grows to the size of the logits themselves (eager against fused: 1.10 on average, 7.3 at most on an
H200, tests/gpu/test_gpu_decode.py::test_fused_bf16_step_close_to_the_eager_one), as large as a wrong kernel
would make it. Nor is the step bit-for-bit repeatable: the word GEMVs split over K (the 3840-row ones) add
their partial sums with float atomics, in whatever order the programs finish, so the default run three times on
an H200 gave identical, identical, then logits off by 1.1 on average and 6.7 at most (2026-12-04,
`--only 1,1,1,6,6`). On the card the column therefore only says whether a variant's first logits came out
identical to the default's or by how much they differ; the kernels themselves are checked by `llmsize
measure`'s self-checks and tests/gpu. On the toy model (--smoke, float32, two layers) every variant must be
within the GPU tests' bound of the default.
Needs a CUDA GPU and the measure extra.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmsize.measure.preflight import no_driver_reason  # noqa: E402

# (label, LLMSIZE_PDL, LLMSIZE_PREFETCH_KB, decoder settings): the settings are LabDecoder's, over DEFAULT, which
# is what `llmsize measure` runs (fold: GeGLU and residual norms in the word GEMVs' epilogues; fold_combine: the
# attention combine in the split kernel's last slice; cap_argmax: the soft-cap and tokens in one kernel after
# cuBLAS's lm_head GEMM; lm_head: "triton" for benchmarks/kernels/lm_head.py's kernel in place of both). The
# first row, `llmsize measure`'s own step, is the one the others' logits are set beside.
DEFAULT = {"gemv": "words", "fused": True, "fold": True, "fold_combine": True, "cap_argmax": True, "lm_head": "torch",
           "attn_split": {}}
VARIANTS = [
    ("fused, words, PDL off (default)", "0", "32", {}),
    ("eager, words", "0", "32", {"fused": False}),
    ("fused, words, PDL wait first", "1", "0", {}),
    ("fused, words, PDL early, no prefetch", "2", "0", {}),
    ("fused, words, PDL early, prefetch 16 KiB", "2", "16", {}),
    ("fused, words, PDL early, prefetch 32 KiB", "2", "32", {}),
    ("fused, words, PDL early, prefetch 64 KiB", "2", "64", {}),
    ("fused, words, PDL early, prefetch 128 KiB", "2", "128", {}),
    ("fused, words, soft-cap and token in torch ops", "0", "32", {"cap_argmax": False}),
    ("fused, words, lm_head kernel", "0", "32", {"lm_head": "triton"}),
    ("fused, words, combine kernel", "0", "32", {"fold_combine": False}),
    ("fused, words, full-layer slices of 32 rows", "0", "32", {"attn_split": {"full": 32}}),
    ("fused, words, no folds", "0", "32", {"fold": False}),
    ("fused, triton (byte kernel)", "0", "32", {"gemv": "triton"}),
]


def logits_column(first, ref, smoke: bool) -> str:
    """The logits cell: on the toy model (smoke) a verdict against the GPU tests' bound (fused against eager,
    bf16: mean under 0.05, max under 1.0); on the card "identical" or the difference (see the module's note)."""
    err = (first - ref).abs()
    mean, top = err.mean().item(), err.max().item()
    if smoke:
        return f"{'yes' if mean < 0.05 and top < 1.0 else 'NO'} (max {top:.2g})"
    return "identical" if top == 0 else f"differs: mean {mean:.2g}, max {top:.2g}"


def time_variant(dec, start_pos: int, start_token, steps: int):
    """Logits of the first step from start_pos, then the median and mean ms of `steps` graph replays, each
    replay starting again from start_pos (the same attended length for every variant). On the CPU (--smoke)
    the step runs eagerly, timed by the clock."""
    import torch

    def reset():
        dec.pos.fill_(start_pos)
        dec.token.copy_(start_token)

    reset()
    first = dec.decode_step()[0].float().clone()  # compiles, autotunes (outside the graph)
    if dec.device.type != "cuda":
        ms = []
        for _ in range(steps):
            reset()
            t = time.perf_counter()
            dec.decode_step()
            ms.append((time.perf_counter() - t) * 1e3)
        return first, statistics.median(ms), statistics.fmean(ms)
    reset()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        dec.decode_step()
    torch.cuda.current_stream().wait_stream(side)
    reset()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = dec.decode_step()
    reset()
    graph.replay()
    first = out[0].float().clone()
    times = []
    for _ in range(steps + 8):
        reset()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        times.append((a, b))
    torch.cuda.synchronize()
    ms = [a.elapsed_time(b) for a, b in times[8:]]
    del graph
    return first, statistics.median(ms), statistics.fmean(ms)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--only", default=None, help="comma-separated variant numbers (1-based) to run")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--smoke", action="store_true",
                    help="the toy model on the CPU through Triton's interpreter (TRITON_INTERPRET=1): checks the "
                         "script, not the card")
    return ap


def main() -> None:
    ap = parser()
    args = ap.parse_args()
    why = None if args.smoke else no_driver_reason()  # NVML, before torch's seconds of import
    if why:
        sys.exit(f"Error: step_variants.py needs a CUDA GPU (or --smoke on the CPU): {why}.")
    run(args)


def run(args) -> None:
    import torch

    from benchmarks.kernels.decoder import LabDecoder
    from llmsize.measure import gemma4
    from llmsize.measure.card import read_card
    from llmsize.measure.run import bytes_read_per_step, git_commit

    if args.smoke:
        device, cfg, dtype, card_name, driver, theo = "cpu", gemma4.GEMMA4_TINY, torch.float32, "cpu", None, None
    else:
        if not torch.cuda.is_available():
            sys.exit("Error: step_variants.py needs a CUDA GPU (or --smoke on the CPU).")
        card = read_card(0)
        device, cfg, dtype = "cuda", gemma4.GEMMA4_12B, torch.bfloat16
        card_name, driver, theo = card.name, card.driver, card.theoretical_bandwidth_gb_s
    w = gemma4.build_random(cfg, device=device, dtype=dtype, quant="nvfp4", seed=0)
    dec = LabDecoder(w, batch=1, max_positions=args.context + 16, gemv="words", fused=False)
    dec.prefill(torch.randint(0, cfg.vocab_size, (1, args.context), device=device,
                              generator=torch.Generator(device=device).manual_seed(1)))
    start_pos, start_token = int(dec.pos.item()), dec.token.clone()
    step_bytes = sum(bytes_read_per_step(w, 1, start_pos + 1).values())
    chosen = VARIANTS if not args.only else [VARIANTS[int(i) - 1] for i in args.only.split(",")]
    if chosen[0] is not VARIANTS[0]:
        chosen = [VARIANTS[0]] + chosen
    rows, ref = [], None
    saved = {k: os.environ.get(k) for k in ("LLMSIZE_PDL", "LLMSIZE_PREFETCH_KB")}
    for label, pdl_env, kb, settings in chosen:
        os.environ["LLMSIZE_PDL"], os.environ["LLMSIZE_PREFETCH_KB"] = pdl_env, kb
        for name, value in {**DEFAULT, **settings}.items():
            setattr(dec, name, value)
        try:
            first, med, mean = time_variant(dec, start_pos, start_token, args.steps)
        except Exception as e:  # report it and go on with the next variant
            rows.append(f"| {label} | failed: {type(e).__name__}: {str(e).splitlines()[0][:80]} | | | | |")
            print(rows[-1], file=sys.stderr)
            continue
        if ref is None:
            ref = first
        gb_s = step_bytes / (mean / 1e3) / 1e9
        rows.append(f"| {label} | {logits_column(first, ref, args.smoke)} | {med:.3f} | {mean:.3f} | "
                    f"{gb_s:,.0f} | {'n/a' if not theo else f'{100 * gb_s / theo:.1f}%'} |")
        print(rows[-1], file=sys.stderr)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    cmd = " ".join(["python benchmarks/step_variants.py"] + sys.argv[1:])
    lines = [f"## step_variants.py on {card_name}", "",
             f"- Card: {card_name}, driver {driver}, NVML theoretical {theo or 0:,.0f} GB/s",
             f"- Date: {date.today().isoformat()}; commit {git_commit()}; torch {torch.__version__}",
             f"- Command: `{cmd}`; {cfg.name} NVFP4 (random weights), batch 1, {start_pos} positions attended, "
             f"{step_bytes / 1e9:.3f} GB read per step; each variant's first logits beside the first row's",
             "", "| variant | logits vs the default | ms/step median | ms/step mean | GB/s (mean) | of theoretical |",
             "|---|---|---|---|---|---|"] + rows
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    if args.append:
        with open(Path(__file__).with_name("RESULTS.md"), "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
