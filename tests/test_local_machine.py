"""`--gpu local`: this machine's card from what the system reports, offline (llmsize/importer/local_machine.py).
The probes are replaced by the outputs real tools print."""

from __future__ import annotations

import json

import pytest

from llmsize.errors import InvalidValueError
from llmsize.importer import local_machine
from llmsize.importer.local_machine import Probe, detect
from llmsize.units import GiB


class Fake(Probe):
    def __init__(self, platform="linux", nvml=None, commands=None, files=None, vram=None):
        self.platform, self._nvml, self._cmd, self._files, self._vram = platform, nvml, commands or {}, files or {}, vram

    def nvml(self):
        return self._nvml

    def run(self, *cmd):
        return self._cmd.get(" ".join(cmd))

    def read(self, path):
        return self._files.get(path)

    def amd_vram_bytes(self):
        return dict(self._vram or {})


MEMINFO = {"/proc/meminfo": "MemTotal:       65798844 kB\nMemFree:        1234 kB\n"}


def test_nvml_names_the_card_and_meminfo_the_host(catalog):
    d = detect(catalog.hardware.all(), Fake(nvml=[("NVIDIA GeForce RTX 4090", 25757220864)], files=MEMINFO))
    assert d.gpu.id == "rtx4090" and d.host_ram_bytes == 65798844 * 1024 and "NVML" in d.found


def test_lspci_and_sysfs_tell_two_amd_cards_apart(catalog):
    line = ("03:00.0 VGA compatible controller: Advanced Micro Devices, Inc. [AMD/ATI] Navi 31 [Radeon RX 7900 XT/"
            "7900 XTX/7900 GRE/7900M] (rev c8)\n")
    xtx = detect(catalog.hardware.all(), Fake(commands={"lspci": line}, vram={"0000:03:00.0": 25753026560},
                                              files=MEMINFO))
    xt = detect(catalog.hardware.all(), Fake(commands={"lspci": line}, vram={"0000:03:00.0": 21458059264},
                                             files=MEMINFO))
    assert (xtx.gpu.id, xt.gpu.id) == ("rx7900xtx", "rx7900xt")


def test_an_arc_card_beside_an_amd_igpu_takes_no_vram_figure_of_the_igpu(catalog):
    """The iGPU (a Ryzen's Raphael, 512 MiB carved out) comes first in lspci and has a sysfs VRAM figure; the Arc card
    has none (xe/i915 publish no mem_info_vram_total): figures are paired by PCI address, not by list position, so the
    Arc is matched by its name, and the report says its memory was not read."""
    lspci = ("0c:00.0 VGA compatible controller: Advanced Micro Devices, Inc. [AMD/ATI] Raphael (rev c6)\n"
             "03:00.0 VGA compatible controller: Intel Corporation Battlemage G21 [Arc B580]\n")
    d = detect(catalog.hardware.all(), Fake(commands={"lspci": lspci}, vram={"0000:0c:00.0": 536870912},
                                            files=MEMINFO))
    assert d.gpu.id == "arc-b580" and "memory not read" in d.found


def test_an_apple_chip_is_taken_with_this_macs_ram(catalog):
    probe = Fake(platform="darwin", commands={
        "sysctl -n machdep.cpu.brand_string": "Apple M2 Max\n", "sysctl -n hw.memsize": "68719476736\n",
        "system_profiler SPDisplaysDataType": "Graphics/Displays:\n    Apple M2 Max:\n      Chipset Model: Apple M2 "
                                              "Max\n      Total Number of Cores: 30\n"})
    d = detect(catalog.hardware.all(), probe)
    assert d.gpu.id == "m2-max-30" and d.gpu.memory_bytes == 64 * GiB and d.host_ram_bytes == 64 * GiB


def test_nothing_found_or_not_in_the_catalog_is_one_line(catalog):
    with pytest.raises(InvalidValueError, match="found no GPU"):
        detect(catalog.hardware.all(), Fake(files=MEMINFO))
    with pytest.raises(InvalidValueError, match="Quadro K420, not in the catalog"):
        detect(catalog.hardware.all(), Fake(nvml=[("Quadro K420", 2 * GiB)]))


def test_a_card_sold_in_two_memory_sizes_is_named_not_guessed(catalog):
    """lspci names an RTX 5060 Ti without its memory, and the catalog has the 16 GB and 8 GB cards: --gpu local
    says so and asks for the id (it said "not in the catalog"); an AMD line naming several products without a
    VRAM figure says the same."""
    line = "01:00.0 VGA compatible controller: NVIDIA Corporation GB206 [GeForce RTX 5060 Ti] (rev a1)\n"
    with pytest.raises(InvalidValueError, match=r"GeForce RTX 5060 Ti, which matches 2 catalog cards "
                                                r"\(rtx5060ti, rtx5060ti8\)") as e:
        detect(catalog.hardware.all(), Fake(commands={"lspci": line}, files=MEMINFO))
    assert "--gpu rtx5060ti" in e.value.hint
    amd = ("03:00.0 VGA compatible controller: Advanced Micro Devices, Inc. [AMD/ATI] Navi 31 [Radeon RX 7900 XT/"
           "7900 XTX/7900 GRE/7900M] (rev c8)\n")
    with pytest.raises(InvalidValueError, match=r"matches 3 catalog cards \(rx7900gre, rx7900xt, rx7900xtx\)"):
        detect(catalog.hardware.all(), Fake(commands={"lspci": amd}, files=MEMINFO))


def test_plan_and_fit_with_gpu_local(run_cli, monkeypatch):
    fake = Fake(nvml=[("NVIDIA GeForce RTX 4090", 25757220864)], files=MEMINFO)
    monkeypatch.setattr(local_machine, "Probe", lambda: fake)
    code, out, err = run_cli("plan", "qwen3-8b", "--gpu", "local", "--json")
    assert code == 0, err
    assert json.loads(out)["gpu"]["id"] == "rtx4090" and "--gpu local: NVML: NVIDIA GeForce RTX 4090" in err
    code, out, err = run_cli("fit", "--gpu", "local", "--top", "3")
    assert code == 0 and "rtx4090" in out
    # the machine's RAM (62.8 GiB here) bounds the offloaded placements, as --host-ram-gib would: a 24 GB card
    # offloads Llama 3.1 70B's Q4_K_M (19 GiB on the host; its pick is the IQ2_XXS file whole on the card, so every
    # format is asked for) but no longer the 405B (more than 62.8 GiB on the host even at IQ2_XXS)
    code, out, err = run_cli("fit", "--gpu", "local", "--host-memory", "DDR5-6000x2", "--all-formats", "--json")
    assert code == 0 and "62.8 GiB of RAM" in err
    rows = json.loads(out)["rows"]
    assert all((r["host_bytes"] or 0) <= 65798844 * 1024 for r in rows)
    assert any(r["model"] == "llama-3.1-70b" and r["host_bytes"] for r in rows)
    assert not any(r["model"] == "llama-3.1-405b" for r in rows)
    monkeypatch.setattr(local_machine, "Probe", lambda: Fake())
    code, out, err = run_cli("plan", "qwen3-8b", "--gpu", "local")
    assert code == 2 and "found no GPU" in err and out == ""
