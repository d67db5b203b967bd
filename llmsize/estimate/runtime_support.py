"""Which cards the serving engines run on, as their own documentation states it: the NVIDIA compute capability
each needs at least, the AMD LLVM targets each builds its kernels for. An engine or vendor the tables leave out is
not refused (nothing stated here); a card whose catalog entry lacks the figure is not refused either.

vLLM: docs.vllm.ai/en/latest/getting_started/installation/gpu/, "GPU: compute capability 7.5 or higher (e.g., T4,
RTX20xx, A100, L4, H100, B200, ...)" (7.0 up to v0.14), and on ROCm "MI200s (gfx90a), MI300 (gfx942), MI350
(gfx950), Radeon RX 7900 series (gfx1100/1101), Radeon RX 9000 series (gfx1200/1201), Ryzen AI MAX / AI 300 Series
(gfx1151/1150)" (docs.vllm.ai/en/v0.14.0/getting_started/installation/gpu/).
TensorRT-LLM: its support matrix lists Ampere (SM80, SM86), Ada Lovelace (SM89) and Hopper (SM90)
(nvidia.github.io/TensorRT-LLM/0.18.2/reference/support-matrix.html), Blackwell since ("Supported Hardware": Blackwell,
Hopper, Ada Lovelace, Ampere; nvidia.github.io/TensorRT-LLM/supported-hardware.html): compute capability 8.0 or higher.
gpt-fast: torch.compile's Inductor backend generates Triton kernels, and PyTorch refuses older cards: "Triton only
supports devices of CUDA Capability >= 7.0" (torch/_dynamo/exc.py, GPUTooOldForTriton; torch/_inductor/scheduler.py).
SGLang on AMD: "SGLang officially supports only CDNA Instinct parts (gfx942 / gfx950) plus gfx1250. RDNA3 is absent
from the docs and is rejected outright by the kernel build" (pypi.org/project/sglang-radeon-rdna3, the AMD-AIM
package that patches that allowlist from outside); docs.sglang.io/docs/hardware-platforms/amd_gpu names MI300X.
"""

from __future__ import annotations

from llmsize.catalog.schema import GpuSpec

CUDA_MIN_COMPUTE_CAPABILITY = {"vllm": (7, 5), "trtllm": (8, 0), "gpt-fast": (7, 0)}
AMD_LLVM_TARGETS = {
    "vllm": ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1200", "gfx1201", "gfx1150", "gfx1151"),
    "sglang": ("gfx942", "gfx950", "gfx1250"),
}


def architecture_refusal(runtime: str, gpu: GpuSpec) -> str | None:
    """Why `runtime` does not run on `gpu`'s architecture (its documentation's list), None where it does or where
    nothing is stated."""
    from llmsize.estimate.expected import RUNTIME_NAMES

    name = RUNTIME_NAMES.get(runtime, runtime)
    need = CUDA_MIN_COMPUTE_CAPABILITY.get(runtime)
    if gpu.vendor == "NVIDIA" and need and gpu.compute_capability:
        have = tuple(int(x) for x in gpu.compute_capability.split("."))
        if have < need:
            others = [r for r in ("vllm", "llamacpp") if r != runtime and architecture_refusal(r, gpu) is None]
            return (f"{name} needs CUDA compute capability {need[0]}.{need[1]} or higher, and the {gpu.name} has "
                    f"{gpu.compute_capability}; pick --runtime {' or '.join(others)}")
    targets = AMD_LLVM_TARGETS.get(runtime)
    if gpu.vendor == "AMD" and targets and gpu.llvm_target and gpu.llvm_target not in targets:
        return (f"{name} builds its ROCm kernels for {', '.join(targets)}, and the {gpu.name} is "
                f"{gpu.llvm_target}; pick --runtime llamacpp")
    return None
