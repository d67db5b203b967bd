"""gpu.CudaGpu, the one place `llmsize measure` calls torch.cuda and NVML on its way: each method against a
stand-in torch that records the calls (no card here), and each torch.cuda name it calls checked against the real
torch.cuda, so a misspelt call shows on the CPU, not after a whole run on a borrowed card."""

import types

import pytest
import torch

from llmsize.errors import LlmsizeError
from llmsize.measure import gpu

from .wall_event import WallEvent


class _Cuda:
    """torch.cuda's names CudaGpu calls, recording (name, args)."""

    def __init__(self):
        self.calls = []

    def _rec(self, name, *args, value=None):
        self.calls.append((name, args))
        return value

    def set_device(self, d):
        return self._rec("set_device", d)

    def mem_get_info(self, d):
        return self._rec("mem_get_info", d, value=(7, 9))

    def synchronize(self, d=None):
        return self._rec("synchronize", d)

    def Event(self, enable_timing=False):
        return self._rec("Event", enable_timing, value="event")

    def max_memory_allocated(self, d):
        return self._rec("max_memory_allocated", d, value=123)

    def get_device_capability(self, d):
        return self._rec("get_device_capability", d, value=(9, 0))


def _stub():
    cuda = _Cuda()
    stub = types.SimpleNamespace(cuda=cuda, device=lambda kind, index: (kind, index), bfloat16="bf16",
                                 version=types.SimpleNamespace(cuda="12.8"), __version__="stub")
    return stub, cuda


def test_each_method_is_one_call_on_the_run_s_device():
    stub, cuda = _stub()
    g = gpu.CudaGpu(stub, 1)
    assert g.device == ("cuda", 1) and g.dtype == "bf16"
    g.open()
    assert g.free_bytes() == 7
    g.synchronize()
    assert g.event() == "event"
    assert g.peak_memory_bytes() == 123
    assert g.capability() == "9.0"
    d = ("cuda", 1)
    assert cuda.calls == [("set_device", (d,)), ("mem_get_info", (d,)), ("synchronize", (d,)), ("Event", (True,)),
                          ("max_memory_allocated", (d,)), ("get_device_capability", (d,))]
    for name, _ in cuda.calls:  # the names exist in the real torch.cuda
        assert callable(getattr(torch.cuda, name)), name


def test_require_names_what_is_missing_in_one_line():
    """A CPU-only torch build is refused before any work, with what to do (a stand-in build: whatever torch is
    installed here)."""
    stub, _ = _stub()
    stub.version = types.SimpleNamespace(cuda=None, hip=None)
    with pytest.raises(LlmsizeError, match="CPU-only build"):
        gpu.CudaGpu(stub, 0).require(triton=False)


def test_capture_step_warms_on_a_side_stream_then_captures_and_returns_the_replay():
    """capture_step (measure's graph, the fused-step self-check's, the lm_head benchmark's): one real call on a
    side stream that waits for the current one, the current stream waiting for it in turn, then one call inside
    the graph; the replay is the graph's. Run against a recording stand-in of torch.cuda; each name it used is
    checked against the real torch.cuda."""
    log = []

    class _Ctx:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            log.append(("enter", self.name))

        def __exit__(self, *exc):
            log.append(("exit", self.name))

    class _Stream:
        def __init__(self, name):
            self.name = name

        def wait_stream(self, other):
            log.append(("wait", self.name, other.name))

    class _Graph:
        def replay(self):
            log.append(("replay",))

    graph = _Graph()
    cuda = types.SimpleNamespace(
        synchronize=lambda d: log.append(("synchronize", d)), CUDAGraph=lambda: graph,
        Stream=lambda d: _Stream("side"), current_stream=lambda d: _Stream("current"),
        stream=lambda st: _Ctx(f"stream {st.name}"), graph=lambda g: _Ctx("graph"))
    replay = gpu.capture_step(types.SimpleNamespace(cuda=cuda), lambda: log.append(("step",)), "dev")
    assert log == [("synchronize", "dev"), ("wait", "side", "current"), ("enter", "stream side"), ("step",),
                   ("exit", "stream side"), ("wait", "current", "side"), ("enter", "graph"), ("step",),
                   ("exit", "graph")]
    replay()
    assert log[-1] == ("replay",)
    for name in vars(cuda):
        assert hasattr(torch.cuda, name), name


def test_timed_s_without_a_card_is_the_wall_clock_and_with_one_the_events():
    import time

    assert gpu.timed_s(None, lambda: time.sleep(0.01)) >= 0.009

    fake = types.SimpleNamespace(synchronize=lambda: None, event=WallEvent)
    assert 0.009 <= gpu.timed_s(fake, lambda: time.sleep(0.01)) < 1.0
