"""NVFP4 kernels `llmsize measure` does not ship, kept to be timed against the shipped ones on a card
(benchmarks/gemv_bench.py, step_variants.py, profile_decode.py) and proved against the float reference on the
CPU (tests/measure/test_bench_kernels.py). Nothing under llmsize/ imports them.

- gemv_dot: the tensor-core `dot` (~40 SASS instructions per weight) and `pairs` (9-19) GEMVs, 1-16 rows;
- gemv_rows: the word kernel for 2-4 rows on the CUDA cores (4.3 instructions per weight at 2 rows, 6.4 at 4);
- lm_head: the batch-1 lm_head in one kernel (bf16 GEMV, soft-cap, greedy token);
- decoder: Gemma4Decoder with these selectable (`gemv="dot" | "pairs"`, `lm_head="triton"`).
"""
