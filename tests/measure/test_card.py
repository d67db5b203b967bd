"""The card as NVML sees it (llmsize.measure.card), against a stand-in for the pynvml module that answers what
an H200 answered here (shared/reference/h200-measurements.md: bus width 6,016 bits, max memory clock 3,201 MHz,
so 2 x 3,201 MHz x 6,016 / 8 = 4,814 GB/s; 143,771 MiB; 1,980 MHz; 700 W): the fields, the theoretical bandwidth,
the calls that fail on some systems left None, and the one-line errors."""

import sys
import types

import pytest

from llmsize.errors import LlmsizeError
from llmsize.measure import card


def _fake_nvml(count=1, fail=(), init_error=None):
    nv = types.SimpleNamespace(NVML_CLOCK_MEM=2, NVML_CLOCK_SM=1, calls=[])

    def answer(name, value):
        def fn(*args):
            nv.calls.append(name)
            if name in fail:
                raise RuntimeError(f"{name}: Not Supported")
            return value
        return fn

    def init():
        if init_error:
            raise init_error
    nv.nvmlInit, nv.nvmlShutdown = init, answer("nvmlShutdown", None)
    nv.nvmlDeviceGetCount = answer("nvmlDeviceGetCount", count)
    nv.nvmlDeviceGetHandleByIndex = answer("nvmlDeviceGetHandleByIndex", "h0")
    nv.nvmlDeviceGetName = answer("nvmlDeviceGetName", b"NVIDIA H200")
    nv.nvmlSystemGetDriverVersion = answer("nvmlSystemGetDriverVersion", "580.159.04")
    nv.nvmlDeviceGetMemoryInfo = answer("nvmlDeviceGetMemoryInfo", types.SimpleNamespace(
        total=143771 * 2 ** 20, free=143000 * 2 ** 20))
    nv.nvmlDeviceGetEnforcedPowerLimit = answer("nvmlDeviceGetEnforcedPowerLimit", 700_000)
    nv.nvmlDeviceGetMemoryBusWidth = answer("nvmlDeviceGetMemoryBusWidth", 6016)
    nv.nvmlDeviceGetMaxClockInfo = lambda h, kind: {2: 3201, 1: 1980}[kind]
    nv.nvmlDeviceGetClockInfo = lambda h, kind: {2: 3201, 1: 1755}[kind]
    return nv


def test_read_card_as_an_h200_answers(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml())
    c = card.read_card(0)
    assert (c.name, c.driver, c.bus_width_bits, c.max_memory_clock_mhz, c.max_sm_clock_mhz) == (
        "NVIDIA H200", "580.159.04", 6016, 3201, 1980)
    assert c.vram_total_bytes == 150_754_820_096 and c.power_limit_w == 700.0 and c.sm_clock_mhz == 1755
    assert c.theoretical_bandwidth_gb_s == pytest.approx(4814.3, abs=0.05)
    d = c.as_dict()
    assert d["theoretical_bandwidth_gb_s"] == c.theoretical_bandwidth_gb_s and d["index"] == 0
    assert card.current_clocks(0) == {"sm_clock_mhz": 1755, "memory_clock_mhz": 3201}
    assert "nvmlShutdown" in sys.modules["pynvml"].calls  # NVML closed after each read


def test_fields_nvml_cannot_read_stay_none(monkeypatch):
    """vGPU, MIG or old drivers refuse some calls: those fields are None, and without the bus width there is
    no theoretical bandwidth (not a guess)."""
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(fail=("nvmlDeviceGetMemoryBusWidth",
                                                                "nvmlDeviceGetEnforcedPowerLimit")))
    c = card.read_card(0)
    assert c.bus_width_bits is None and c.power_limit_w is None and c.theoretical_bandwidth_gb_s is None
    assert c.name == "NVIDIA H200"


def test_nvml_errors_are_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(init_error=RuntimeError("Driver Not Loaded")))
    with pytest.raises(LlmsizeError, match=r"NVML could not start \(Driver Not Loaded\)") as e:
        card.read_card(0)
    assert "--device cpu" in e.value.one_line() and "\n" not in e.value.one_line()
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(count=1))
    with pytest.raises(LlmsizeError, match=r"GPU index 3 does not exist: NVML sees 1 GPU\(s\)"):
        card.read_card(3)
