"""The batch-1 GEMVs of Gemma 4 12B's gate | up pass (30,720 x 3,840) under Nsight Compute: why a kernel reaches
the fraction of the bandwidth it does (DRAM throughput, issue-slot use, warp stall reasons, occupancy).

    ncu --nvtx --nvtx-include "profiled/" --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy \
        --section LaunchStats python benchmarks/ncu_gemv.py

Each kernel is tuned and warmed outside the NVTX range "profiled", then launched once inside it, on weights that are
not in L2: the word kernel (the tuner's pick for the shape), the word kernel with its loads pipelined and with one
stage (fixed tiles, so the two differ in that alone), the one-stage tile again with its activations in 4-byte loads
(no barrier in the loop instead of 10: gemv_words.x_pairs), the tensor-core kernel at one row, and cuBLAS's
bf16 GEMV on the dense copy (the bandwidth a well-made kernel reaches on the shape). On 2026-12-04 on an H200
(`benchmarks/gemv_bench.py`, commit 3889ed6) the word kernel read this matrix at 27.7% of NVML's theoretical
bandwidth and cuBLAS's bf16 GEMV at 82.7%. Needs a CUDA GPU and the measure extra; without ncu it runs the launches
alone (a smoke test of the script).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmsize.measure.preflight import no_driver_reason  # noqa: E402

N, K = 2 * 15360, 3840


def main() -> int:
    reason = no_driver_reason()
    if reason:
        print(f"ncu_gemv.py: {reason}", file=sys.stderr)
        return 2
    import torch

    from llmsize.measure import gemv_tc, gemv_words, nvfp4
    from llmsize.measure.tuner import Tuning

    torch.manual_seed(0)
    dense = (torch.randn(N, K, device="cuda") / K ** 0.5).to(torch.bfloat16)
    w = nvfp4.quantize(dense.float())
    x = torch.randn(1, K, device="cuda").to(torch.bfloat16)
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")  # 256 MiB: the weights out of L2

    tuning = Tuning()  # one for the script: the profiled calls reuse what the warm-up calls timed
    runs = {
        "words, tuned": lambda: gemv_words.nvfp4_gemv_words(x, w, tuning=tuning),
        "words 64x32 w8, 3 stages": lambda: gemv_words.nvfp4_gemv_words(x, w, block_n=64, block_w=32, num_warps=8,
                                                                          stages=3),
        "words 64x32 w8, 1 stage": lambda: gemv_words.nvfp4_gemv_words(x, w, block_n=64, block_w=32, num_warps=8,
                                                                         stages=1),
        "words 64x32 w8, 1 stage, 4-byte x loads": lambda: gemv_words.nvfp4_gemv_words(
            x, w, block_n=64, block_w=32, num_warps=8, stages=1, x_wide=False),
        "tc, 1 row": lambda: gemv_tc.nvfp4_gemv_tc(x, w, tuning=tuning),
        "cuBLAS bf16": lambda: torch.nn.functional.linear(x, dense),
    }
    for fn in runs.values():  # tune, compile and warm, outside the profiled range
        fn()
        fn()
    tuning.freeze()  # a shape not timed above would be an error, not a timing inside the profiled range
    torch.cuda.synchronize()
    print("tiles:", gemv_words.chosen_tiles(tuning), tuning.chosen("tc"), flush=True)
    for name, fn in runs.items():
        flush.zero_()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("profiled")
        fn()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        print(f"launched: {name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
