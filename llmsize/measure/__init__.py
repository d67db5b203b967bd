"""`llmsize measure`: a real NVFP4 Gemma 4 decode loop on the live card. The only package that imports torch.

Import the submodules directly (llmsize.measure.nvfp4, .gemma4, ...); this file imports nothing heavy so
that `llmsize.measure.preflight` can explain a missing extra before torch is touched.
"""

import os
import re

from llmsize.errors import shown

# Triton 3.9 warns that its default for floating-point contraction (a * b + c as one FMA: on) turns off in 3.10.
# The kernels' instruction counts (benchmarks/kernel_sass.py) and the accuracy figures in the tests were taken
# with it on; keep it on, and the warning off the report, unless the user has chosen.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

# the NVFP4 decode kernels `--gemv` takes: the word family (gemv_words at batch 1, gemv_tc for 2-256 rows) and the
# byte kernel (gemv.py), the readable fallback; benchmarks/kernels holds others, to time against these
GEMV_KERNELS = ("words", "triton")


def launch_env() -> tuple[int, int]:
    """LLMSIZE_PDL (0 off, the default; 1 wait first; 2 early) and LLMSIZE_PREFETCH_KB (the L2 prefetch per
    GEMV program, 0-1024 KiB: one bulk prefetch moves at most 1 MiB; default 32), as launch.py uses them.
    Raises ValueError naming the variable and the value. Torch-free, so `measure` checks them before anything."""
    mode, kb = os.environ.get("LLMSIZE_PDL", "0"), os.environ.get("LLMSIZE_PREFETCH_KB", "32")
    if mode not in ("0", "1", "2"):
        raise ValueError(f"LLMSIZE_PDL `{shown(mode)}` is not a launch mode: set it to 0 (off, the default), 1 (wait "
                         "first) or 2 (early), or unset it.")
    if not re.fullmatch(r"[0-9]{1,4}", kb) or int(kb) > 1024:  # (ASCII digits: int() refuses superscripts)
        raise ValueError(f"LLMSIZE_PREFETCH_KB `{shown(kb)}` is not a prefetch size: set it to a whole number of KiB "
                         "from 0 (off) to 1024, or unset it.")
    return int(mode), int(kb)
