"""What the GPU of a unified-memory machine may use: not the RAM, its share.

Apple silicon: Metal's recommendedMaxWorkingSetSize, which llama.cpp prints at start-up. Published logs of
macOS 13-15 fit two fractions exactly: 2/3 of the RAM up to 32 GB (`recommendedMaxWorkingSetSize = 21845.34 MB`
on a 32 GB M1 Max, ggml-org/llama.cpp#2011; 10922.67 on 16 GB) and 3/4 above (49152.00 on a 64 GB M1 Max,
llama.cpp#1870; 73728 on a 96 GB M2 Max, llama.cpp#3213). Logs of macOS 26 print more (0.74-0.84 of the RAM), and
`sudo sysctl iogpu.wired_limit_mb=N` raises it to N MiB (until reboot): pass what your log prints, or the limit
you set, as --wired-limit-gb, in GB (10^9 B: the log's MB / 1,000, the sysctl's MiB x 0.0010486). A model above the working set but within the RAM loads and then pages every token:
it does not fit, and the plan says how to raise the limit.

AMD Strix Halo on Linux: amdgpu's GTT, "max(3G, 1/2 of system ram) by default" (kernel commit "drm/amdgpu: Adjust
logic around GTT size (v3)", 2022; a 128 GB machine logs "63968M of GTT memory ready", antirez/ds4#475); the BIOS
carve-out (UMA Frame Buffer Size) or ttm.pages_limit (GiB x 262144 pages) raise it: pass the result as
--wired-limit-gb. On Windows shared GPU memory is about half the RAM, not tunable (the carve-out is the lever).

NVIDIA DGX Spark and Jetson: CUDA's own total (the catalog's memory_cuda_bytes, where sourced); NVIDIA's DGX Spark
playbooks run vLLM at --gpu-memory-utilization 0.8 and SGLang at --mem-fraction-static 0.75, since the OS and its
page cache share the same memory. The host RAM of such a machine is this same memory: never an offload pool too.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import GpuSpec
from llmsize.errors import InvalidValueError
from llmsize.units import GB, GiB

APPLE_SMALL_RAM_BYTES = 32 * GiB  # up to here 2/3 of the RAM, above 3/4 (recommendedMaxWorkingSetSize)
APPLE_SMALL_SHARE = 2 / 3
APPLE_LARGE_SHARE = 3 / 4
AMD_GTT_MIN_BYTES = 3 * GiB  # "Set default GTT size to max(3G, 1/2 of system ram)" (drm/amdgpu, 2022)


@dataclass(frozen=True)
class UsableMemory:
    bytes: int
    basis: str
    unified: bool
    # the GPU may use all the machine's RAM, which the OS and its page cache share (DGX Spark, Jetson): the plan and
    # llama.cpp's ledger then budget capacity.SHARED_RAM_GPU_UTIL of it
    shares_all_ram: bool = False


def is_unified(gpu: GpuSpec) -> bool:
    return gpu.vendor == "Apple" or gpu.segment in ("desktop-soc", "edge")


def usable_memory(gpu: GpuSpec, wired_limit_bytes: float | None = None) -> UsableMemory:
    ram = gpu.memory_bytes
    if wired_limit_bytes is not None:
        if not is_unified(gpu):
            raise InvalidValueError(f"--wired-limit-gb applies to unified-memory machines; {gpu.id} has its own "
                                    "VRAM.", "Drop --wired-limit-gb.")
        if wired_limit_bytes > ram:
            raise InvalidValueError(f"--wired-limit-gb {wired_limit_bytes / GB:g} ({wired_limit_bytes / GiB:,.1f} "
                                    f"GiB) is more than the {ram / GiB:g} GiB of {gpu.id}.",
                                    f"Give at most the machine's RAM ({ram / GB:,.2f} GB).")
        return UsableMemory(int(wired_limit_bytes), f"the GPU's limit given by --wired-limit-gb "
                                                    f"{wired_limit_bytes / GB:g} ({wired_limit_bytes / GiB:,.2f} GiB "
                                                    f"of {ram / GiB:g} GiB RAM)", True)
    if gpu.vendor == "Apple":
        share = APPLE_SMALL_SHARE if ram <= APPLE_SMALL_RAM_BYTES else APPLE_LARGE_SHARE
        usable = int(ram * share)
        return UsableMemory(usable, f"Metal's working set, {share:.3g} of the {ram / GiB:g} GiB RAM = "
                                    f"{usable / GiB:.1f} GiB (recommendedMaxWorkingSetSize on macOS 13-15; newer "
                                    "macOS gives more, and sysctl iogpu.wired_limit_mb raises it: --wired-limit-gb)",
                            True)
    if gpu.vendor == "AMD" and is_unified(gpu):
        gtt = max(AMD_GTT_MIN_BYTES, ram // 2)
        return UsableMemory(gtt, f"amdgpu's default GTT on Linux, max(3 GiB, half the RAM) = {gtt / GiB:.1f} GiB of "
                                 f"{ram / GiB:g} GiB; the BIOS carve-out (UMA Frame Buffer Size) or ttm.pages_limit "
                                 "raise it: --wired-limit-gb", True)
    if is_unified(gpu):
        total = gpu.memory_cuda_bytes or ram
        how = "what CUDA reports" if gpu.memory_cuda_bytes else "the RAM"
        spark = " (NVIDIA's DGX Spark playbooks run vLLM at --gpu-memory-utilization 0.8)" if "spark" in gpu.id else ""
        return UsableMemory(total, f"{how}, {total / GiB:.1f} GiB, shared with the OS{spark}", True, True)
    return UsableMemory(ram, "the card's VRAM", False)
