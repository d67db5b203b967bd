"""The card as NVML sees it (shared/reference/nvml.md): name, driver, memory, bus width, max memory clock,
and the theoretical bandwidth 2 x max memory clock x bus width / 8 (NVML reports a DDR-normalised clock, so
the factor is 2 for GDDR6/6X/7 and HBM2/2e/3/3e alike). Every call may fail on some systems (vGPU, MIG,
old drivers): a field that cannot be read stays None."""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

from llmsize.errors import LlmsizeError, install_hint

INSTALL_HINT = install_hint("measure", "nvidia-ml-py")


@dataclass
class CardInfo:
    index: int
    name: str
    driver: str | None
    vram_total_bytes: int | None
    vram_free_bytes: int | None
    bus_width_bits: int | None
    max_memory_clock_mhz: int | None
    max_sm_clock_mhz: int | None
    sm_clock_mhz: int | None
    memory_clock_mhz: int | None
    power_limit_w: float | None

    @property
    def theoretical_bandwidth_gb_s(self) -> float | None:
        if not self.bus_width_bits or not self.max_memory_clock_mhz:
            return None
        return 2 * self.max_memory_clock_mhz * 1e6 * self.bus_width_bits / 8 / 1e9

    def as_dict(self) -> dict:
        d = asdict(self)
        d["theoretical_bandwidth_gb_s"] = self.theoretical_bandwidth_gb_s
        return d


def _nvml():
    with warnings.catch_warnings():  # the deprecated 'pynvml' package's redirector warns on import (nvml.md)
        warnings.simplefilter("ignore", FutureWarning)
        try:
            import pynvml
        except ImportError:
            raise LlmsizeError("NVML bindings are not installed (no module 'pynvml').", INSTALL_HINT) from None
    return pynvml


def read_card(index: int = 0) -> CardInfo:
    nv = _nvml()
    try:
        nv.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded...
        raise LlmsizeError(f"NVML could not start ({e}): no NVIDIA driver or GPU visible.",
                           "Run on a machine with an NVIDIA GPU and driver, or try `llmsize measure --device cpu`.") \
            from None

    def get(fn, *args):
        try:
            v = fn(*args)
        except Exception:
            return None
        return v.decode() if isinstance(v, bytes) else v

    try:
        count = get(nv.nvmlDeviceGetCount) or 0
        if index >= count:
            raise LlmsizeError(f"GPU index {index} does not exist: NVML sees {count} GPU(s).",
                               "Pick --gpu-index between 0 and the count minus one.")
        h = nv.nvmlDeviceGetHandleByIndex(index)
        mem = get(nv.nvmlDeviceGetMemoryInfo, h)
        power_mw = get(nv.nvmlDeviceGetEnforcedPowerLimit, h)
        return CardInfo(
            index=index,
            name=get(nv.nvmlDeviceGetName, h) or "unknown NVIDIA GPU",
            driver=get(nv.nvmlSystemGetDriverVersion),
            vram_total_bytes=getattr(mem, "total", None),
            vram_free_bytes=getattr(mem, "free", None),
            bus_width_bits=get(nv.nvmlDeviceGetMemoryBusWidth, h),
            max_memory_clock_mhz=get(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM),
            max_sm_clock_mhz=get(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
            sm_clock_mhz=get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            memory_clock_mhz=get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            power_limit_w=power_mw / 1000 if power_mw else None,
        )
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def current_clocks(index: int = 0) -> dict:
    """SM and memory clocks now (MHz): read right after the decode loop, while the card is still busy."""
    nv = _nvml()
    try:
        nv.nvmlInit()
        h = nv.nvmlDeviceGetHandleByIndex(index)
        return {"sm_clock_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                "memory_clock_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)}
    except Exception:
        return {"sm_clock_mhz": None, "memory_clock_mhz": None}
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass
