"""Under Triton's CPU interpreter (what the tests and the self-checks run on the CPU), the time of one NVFP4
GEMV call with the launchers' interpreter tiles before 2026-12-02 (words 128 rows a program, the tensor-core
kernel 32 rows and 16 words, the byte kernel 32 rows) against their defaults now: one program over all rows
(launch.interpreter_rows). The interpreter's cost is per program and per operation, not per element. Prints a
Markdown table; CPU only, no GPU.

    TRITON_INTERPRET=1 python benchmarks/interpreter_tiles.py
"""
from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from llmsize.measure import gemv, gemv_tc, gemv_words, nvfp4  # noqa: E402
from llmsize.measure.launch import interpreter_rows  # noqa: E402

# the test model's gate | up weight (2 x intermediate 256, hidden 128) and its down weight (128 x 256)
SHAPES = ((512, 128), (128, 256))


def seconds(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    torch.manual_seed(0)
    print("| kernel | weight N x K | rows | before: rows a program | s | now: rows a program | s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for n, k in SHAPES:
        w = nvfp4.quantize(torch.randn(n, k) / k ** 0.5)
        x1, x3 = torch.randn(1, k), torch.randn(3, k)
        kw = k // 8
        cases = [("words (batch 1)", 1, lambda: gemv_words.nvfp4_gemv_words(x1, w, block_n=128, block_w=min(64, kw)),
                  lambda: gemv_words.nvfp4_gemv_words(x1, w), 128),
                 ("tc (3 rows)", 3, lambda: gemv_tc.nvfp4_gemv_tc(x3, w, block_n=32, block_w=16),
                  lambda: gemv_tc.nvfp4_gemv_tc(x3, w), 32),
                 ("byte (batch 1)", 1, lambda: gemv.nvfp4_gemv(x1, w, block_n=32, block_k=256 if k >= 256 else 128),
                  lambda: gemv.nvfp4_gemv(x1, w), 32)]
        for name, rows, before, now, before_bn in cases:
            before(), now()  # the interpreter's first call per kernel pays its AST rewrite
            t_before, t_now = seconds(before), seconds(now)
            print(f"| {name} | {n} x {k} | {rows} | {before_bn} | {t_before:.3f} | {interpreter_rows(n)} | "
                  f"{t_now:.3f} | {t_before / t_now:.1f}x |")


if __name__ == "__main__":
    main()
