"""`llmsize measure`: a real NVFP4 Gemma 4 decode loop on the live card. The only package that imports torch.

Import the submodules directly (llmsize.measure.nvfp4, .gemma4, ...); this file imports nothing heavy so
that `llmsize.measure.preflight` can explain a missing extra before torch is touched.
"""

GEMV_KERNELS = ("triton", "dot", "pairs", "words")  # the NVFP4 decode kernels: `--gemv` and the benchmarks take these
