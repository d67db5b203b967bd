"""Checks that run before any work: the extra is installed, a GPU is there, the run fits in free VRAM (or, on the
CPU, in the memory the machine has available).
Each failure is one LlmsizeError line with what to do next. Imports torch only inside the functions."""

from __future__ import annotations

from llmsize.errors import InvalidValueError, LlmsizeError, install_hint
from llmsize.units import GB, GiB

EXTRA_HINT = install_hint("measure", "torch triton safetensors nvidia-ml-py")


def require_torch():
    try:
        import torch
    except ImportError:
        raise LlmsizeError("`llmsize measure` needs torch, which is not installed.", EXTRA_HINT) from None
    return torch


def require_driver(index: int) -> None:
    """An NVIDIA driver whose NVML sees card `index`, asked before torch is imported: NVML answers in tens of
    milliseconds where importing torch takes seconds, so a machine without an NVIDIA GPU is refused at once.
    (The run reads the card through NVML anyway: a machine where it cannot start could not be measured.)"""
    from llmsize.measure.card import read_card

    read_card(index)


def no_driver_reason(index: int = 0) -> str | None:
    """require_driver's refusal as text without its final period, None when NVML sees card `index`: for the
    benchmark scripts, which word their own exit."""
    try:
        require_driver(index)
    except LlmsizeError as e:
        return str(e).rstrip(".")
    return None


def require_cuda(torch, index: int) -> None:
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        raise LlmsizeError(f"torch {torch.__version__} is a CPU-only build: it cannot reach a GPU.",
                           "Install a CUDA build of torch (pip install torch), or run `llmsize measure --device cpu`.")
    if not torch.cuda.is_available():
        raise LlmsizeError("No CUDA GPU is visible to torch.",
                           "Run on a machine with an NVIDIA GPU and driver, or use `llmsize measure --device cpu`.")
    if index >= torch.cuda.device_count():
        raise InvalidValueError(f"--gpu-index {index}: torch sees {torch.cuda.device_count()} GPU(s).",
                                "Pick an index between 0 and the count minus one.")


def require_triton() -> None:
    try:
        import triton  # noqa: F401
    except ImportError:
        raise LlmsizeError("The NVFP4 decode kernel needs triton, which is not installed.",
                           EXTRA_HINT + " Or measure the cuBLAS baseline with --quant bf16.") from None


def check_fits(need_bytes: int, free_bytes: int | None, what: str, host: bool = False) -> None:
    """Refuse before allocating when the run cannot fit the card's free memory (`host`: a CPU run, the machine's
    available memory); no refusal where that is not known (None)."""
    if free_bytes is not None and need_bytes > free_bytes:
        have = (f"the machine has {free_bytes / GiB:.2f} GiB available" if host
                else f"the card has {free_bytes / GiB:.2f} GiB free")
        raise LlmsizeError(
            f"Not enough {'memory' if host else 'free VRAM'}: {what} needs about {need_bytes / GiB:.2f} GiB "
            f"({need_bytes / GB:.2f} GB), {have}.",
            "Lower --context, --batch or --tokens, or close what else holds memory." if host
            else "Lower --context, --batch or --tokens, free the GPU, or use --quant nvfp4.")


def host_available_bytes() -> int | None:
    """The memory the machine can give a new allocation without swapping: Linux's MemAvailable (/proc/meminfo),
    else the physical memory (os.sysconf), else None (not known: no check)."""
    import os

    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
