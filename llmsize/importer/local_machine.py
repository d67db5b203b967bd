"""`--gpu local`: the card (or Apple chip) of this machine, read offline from what the system reports, matched to
the catalog. NVIDIA: NVML's name and total memory (nvidia-ml-py, the measure extra), else lspci's name. AMD on
Linux: lspci's name and the driver's VRAM total (/sys/class/drm/card*/device/mem_info_vram_total). Apple:
sysctl's chip name (machdep.cpu.brand_string) and RAM (hw.memsize), and the GPU core count system_profiler prints;
the catalog entry is taken with this Mac's RAM. The host's RAM comes from /proc/meminfo (Linux) or hw.memsize.
Nothing here opens a network connection.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from llmsize.catalog.match import gpu_candidates, match_gpu
from llmsize.catalog.schema import GpuSpec
from llmsize.errors import InvalidValueError
from llmsize.units import GiB

TIMEOUT_S = 5


class Probe:
    """What the machine reports; each method returns None where the source is missing. Tests replace them."""

    platform = sys.platform

    def nvml(self) -> list[tuple[str, int]] | None:
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
        except Exception:  # no driver, no device: NVML raises its own error types
            return None
        try:
            out = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                name = pynvml.nvmlDeviceGetName(h)
                out.append((name.decode() if isinstance(name, bytes) else name,
                            int(pynvml.nvmlDeviceGetMemoryInfo(h).total)))
            return out
        finally:
            pynvml.nvmlShutdown()

    def run(self, *cmd: str) -> str | None:
        if not shutil.which(cmd[0]):
            return None
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout if r.returncode == 0 else None

    def read(self, path: str) -> str | None:
        try:
            return Path(path).read_text()
        except OSError:
            return None

    def amd_vram_bytes(self) -> dict[str, int]:
        """Each AMD card's VRAM total by its PCI address (/sys/class/drm/cardN/device links to .../0000:03:00.0)."""
        out = {}
        for p in sorted(Path("/sys/class/drm").glob("card*/device/mem_info_vram_total")):
            try:
                out[p.parent.resolve().name] = int(p.read_text().strip())
            except (OSError, ValueError):
                continue
        return out


@dataclass(frozen=True)
class Detected:
    gpu: GpuSpec
    found: str  # what the machine reported, in words
    host_ram_bytes: int | None


def _host_ram(probe: Probe) -> int | None:
    if probe.platform == "darwin":
        v = probe.run("sysctl", "-n", "hw.memsize")
        return int(v.strip()) if v and v.strip().isdigit() else None
    text = probe.read("/proc/meminfo") or ""
    m = re.search(r"^MemTotal:\s+(\d+)\s+kB", text, re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None


def _apple(probe: Probe, gpus: list[GpuSpec], ram: int | None) -> Detected | None:
    brand = (probe.run("sysctl", "-n", "machdep.cpu.brand_string") or "").strip()
    m = re.match(r"Apple (M\d+)(?: (Pro|Max|Ultra))?$", brand)
    if not m:
        return None
    chip = m.group(1).lower() + (f"-{m.group(2).lower()}" if m.group(2) else "")
    prof = probe.run("system_profiler", "SPDisplaysDataType") or ""
    cores = re.search(r"Total Number of Cores:\s*(\d+)", prof)
    family = [g for g in gpus if g.vendor == "Apple" and (g.id == chip or re.fullmatch(rf"{chip}-\d+", g.id))]
    if not family:
        return None
    pick = next((g for g in family if cores and re.search(rf"\b{cores.group(1)}-core", g.name)), None)
    note = f"{cores.group(1)}-core GPU" if cores else "GPU core count not read: the full chip assumed"
    pick = pick or next((g for g in family if g.id == chip), family[0])
    if ram:
        pick = pick.model_copy(update={"memory_size": ram / GiB, "memory_vendor_unit": "GiB",
                                       "memory_counts_as": "GiB"})
    return Detected(pick, f"{brand}, {note}, {ram / GiB:g} GiB unified memory" if ram else brand, ram)


def _lspci_cards(probe: Probe) -> list[tuple[str, str]]:
    """(PCI address, name) of each display controller lspci lists ("03:00.0", "Radeon RX 7900 XT/7900 XTX")."""
    text = probe.run("lspci") or ""
    out = []
    for line in text.splitlines():
        if re.search(r"VGA compatible controller|3D controller|Display controller", line):
            names = re.findall(r"\[([^\]]+)\]", line)
            out.append((line.split(" ", 1)[0], names[-1] if names else line.split(": ", 1)[-1]))
    return out


def _vram_at(address: str, vram: dict[str, int]) -> int | None:
    """The sysfs VRAM total of the card at lspci's `address` (sysfs adds the PCI domain: 0000:03:00.0)."""
    return next((b for k, b in vram.items() if k == address or k.endswith(":" + address)), None)


def _alternatives(name: str) -> list[str]:
    """lspci names one chip's products together: "Radeon RX 7900 XT/7900 XTX/7900 GRE" -> each, with the words
    before the first model number ("Radeon RX") put back in front of the others."""
    parts = [x.strip() for x in name.split("/") if x.strip()]
    if len(parts) < 2:
        return parts
    m = re.match(r"^(\D*?)\s*\d", parts[0])
    prefix = m.group(1).strip() if m else ""
    return [parts[0]] + [f"{prefix} {x}".strip() if not x.lower().startswith(prefix.lower()) else x for x in parts[1:]]


def _match_alternatives(name: str, mem: int | None, gpus: list[GpuSpec]) -> GpuSpec | None:
    found = [g for alt in _alternatives(name) if (g := match_gpu(alt, mem, gpus))]
    if not found:
        return None
    if mem is None:
        return found[0] if len({g.id for g in found}) == 1 else None
    return min(found, key=lambda g: abs(g.memory_driver_bytes - mem))


def detect(gpus: list[GpuSpec], probe: Probe | None = None) -> Detected:
    probe = probe or Probe()
    ram = _host_ram(probe)
    if probe.platform == "darwin":
        found = _apple(probe, gpus, ram)
        if found:
            return found
    for name, total in probe.nvml() or []:
        g = match_gpu(name, total, gpus)
        if g:
            return Detected(g, f"NVML: {name}, {total / 2**20:,.0f} MiB", ram)
    vram = probe.amd_vram_bytes()
    for address, name in _lspci_cards(probe):  # each card with its own VRAM figure, matched by its PCI address
        mem = _vram_at(address, vram)
        g = _match_alternatives(name, mem, gpus)
        if g:
            return Detected(g, f"lspci: {name}" + (f", {mem / 2**20:,.0f} MiB VRAM" if mem else
                                                   f", memory not read: the catalog's {g.memory_size:g} "
                                                   f"{g.memory_vendor_unit} card"), ram)
    for _, name in _lspci_cards(probe):  # named, but sold in several memory sizes lspci does not tell apart
        ids = sorted({g.id for alt in _alternatives(name) for g in gpu_candidates(alt, gpus)})
        if len(ids) > 1:
            raise InvalidValueError(f"--gpu local: found {name}, which matches {len(ids)} catalog cards "
                                    f"({', '.join(ids[:6])}), and nothing read here tells which (no memory size).",
                                    f"Name it: --gpu {ids[0]}, or another of them.")
    seen = [n for n, _ in probe.nvml() or []] + [n for _, n in _lspci_cards(probe)]
    what = f"found {', '.join(seen)}, not in the catalog" if seen else "found no GPU (NVML, lspci, sysctl)"
    raise InvalidValueError(f"--gpu local: {what}.", "Name the card instead (`llmsize gpus`), or add it to a "
                                                     "catalog folder (README: Add a card).")
