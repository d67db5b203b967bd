"""Gemma4Decoder with the benchmark kernels selectable, for the scripts that time them in a whole step:
gemv "dot" or "pairs" (tensor-core GEMVs of 1-16 rows, gemv_dot.py) and lm_head "triton" (the batch-1 fused
step ending in lm_head.py's kernel). Everything else is the shipped decoder's."""

from __future__ import annotations

import torch

from benchmarks.kernels import gemv_dot, lm_head
from llmsize.measure import gemma4, nvfp4


class LabDecoder(gemma4.Gemma4Decoder):
    GEMVS = gemma4.Gemma4Decoder.GEMVS + ("dot", "pairs")

    def __init__(self, *args, lm_head: str = "torch", **kwargs):
        super().__init__(*args, **kwargs)
        if lm_head not in ("torch", "triton"):
            raise ValueError(f"lm_head must be 'torch' or 'triton', got {lm_head!r}")
        self.lm_head = lm_head

    def _linear(self, x: torch.Tensor, w) -> torch.Tensor:
        if self.gemv in ("dot", "pairs") and isinstance(w, nvfp4.Nvfp4Weight) and x.shape[0] <= 16:
            return (gemv_dot.nvfp4_gemv_pairs if self.gemv == "pairs" else gemv_dot.nvfp4_gemv_dot)(x, w)
        return super()._linear(x, w)

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        if self.lm_head == "triton" and self.batch == 1:  # the token and the position written by the kernel
            return lm_head.lm_head_greedy(h, self.w.embed, self.cfg.final_softcap, self.token, self.pos,
                                          tuning=self.tuning)
        return super()._head(h)
