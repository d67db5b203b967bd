"""The read-bandwidth probe (llmsize.measure.probe), through Triton's interpreter: the streaming-read kernel
covers every element of the buffer exactly once whatever the split into programs and blocks (the bytes it
claims to have read, it read), and the probe's timing loop runs with CUDA events stood in for."""

import functools
import types

import pytest
import torch

from llmsize.measure import probe

from .wall_event import WallEvent


@pytest.mark.parametrize("n, programs, block, stages", [(1000, 7, 128, 1), (4096, 4, 256, 3), (130, 32, 64, 2)])
def test_read_kernel_covers_every_element_once(n, programs, block, stages):
    """The programs' XORs combine to the whole buffer's: an element skipped or read twice would change it."""
    torch.manual_seed(n)
    buf = torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), dtype=torch.int32)
    out = torch.zeros(programs, dtype=torch.int32)
    probe.read_once(buf, out, programs, block=block, warps=4, stages=stages)
    assert functools.reduce(lambda a, b: a ^ b, out.tolist()) == functools.reduce(lambda a, b: a ^ b, buf.tolist())


def test_probe_times_every_shape_and_names_the_best(monkeypatch):
    """The loop over kernel shapes (two small ones here: the interpreter's cost is per program and block)."""
    monkeypatch.setattr(probe, "PROBE_SHAPES", ((4, 4, 256, 1), (2, 4, 512, 2)))
    monkeypatch.setattr(torch.cuda, "Event", WallEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: None)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(multi_processor_count=1))
    gb_s, method = probe.probe_read_bandwidth_gb_s(torch.device("cpu"), 64 * 1024, runs=1)
    assert gb_s > 0 and method.startswith("triton streaming read, best of 2 shapes:") and "x 4 warps" in method
