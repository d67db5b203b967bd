"""How the decode step's Triton kernels are launched: programmatic dependent launch where the GPU has it.

With PDL (Hopper and later; CUDA graphs keep it) a kernel is scheduled while the one before it drains, and
waits in griddepcontrol.wait until that one's writes are visible before it reads anything: the ~10 kernels of
a fused Gemma 4 layer overlap their launches instead of paying ~1-2 us each. Every kernel launched this way
calls wait first (fused._pdl_entry, and the word GEMV), so no kernel reads an input early.
"""

from __future__ import annotations

import os

import torch


def pdl(device) -> bool:
    """On for CUDA devices of compute capability 9 and up; LLMSIZE_PDL=0 turns it off (to compare); never on
    the CPU, where Triton's interpreter runs the kernels."""
    if device.type != "cuda" or os.environ.get("LLMSIZE_PDL", "1") == "0":
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9


def launch_opts(on: bool) -> dict:
    """The kernel's PDL constexpr and, when on, Triton's launch_pdl option."""
    return {"PDL": on, "launch_pdl": True} if on else {"PDL": False}
