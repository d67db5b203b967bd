"""The card a GPU run of `llmsize measure` uses, as one value: every call the run makes to torch.cuda and to NVML
on its way (the checks, the card's record and clocks, free memory, the bandwidth probe, graph capture, timing
events, peak memory), one method each, so that `run.measure` can be handed another device (the tests hand it a
CPU-backed one) instead of each call being patched where it is made.

Each method is one call (or one short sequence the CUDA docs prescribe, for graph capture); the run's logic stays
in run.py, where the CPU tests exercise it."""

from __future__ import annotations

import time

from llmsize.measure import preflight


class CudaGpu:
    """CUDA device `index` through torch (and NVML for the card's record). `dtype`: the model's on a GPU."""

    def __init__(self, torch, index: int):
        self.torch, self.index = torch, index
        self.device = torch.device("cuda", index)
        self.dtype = torch.bfloat16

    def require(self, triton: bool) -> None:
        """A CUDA build of torch that sees card `index` (and triton for the NVFP4 kernels): else one line."""
        preflight.require_cuda(self.torch, self.index)
        if triton:
            preflight.require_triton()

    def open(self) -> None:
        self.torch.cuda.set_device(self.device)

    def card(self):
        from llmsize.measure.card import read_card

        return read_card(self.index)

    def clocks(self) -> dict:
        from llmsize.measure.card import current_clocks

        return current_clocks(self.index)

    def free_bytes(self) -> int:
        return self.torch.cuda.mem_get_info(self.device)[0]

    def probe(self, buffer_bytes: int) -> tuple[float, str]:
        """Read bandwidth (GB/s) and how it was probed (probe.py)."""
        from llmsize.measure.probe import probe_read_bandwidth_gb_s

        return probe_read_bandwidth_gb_s(self.device, buffer_bytes)

    def synchronize(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def capture(self, step):
        """`step` captured in a CUDA graph (after one real call on a side stream, as the CUDA-graph docs
        advise); returns its replay."""
        return capture_step(self.torch, step, self.device)

    def event(self):
        """A timing event: .record(), .synchronize(), .elapsed_time(end) in ms."""
        return self.torch.cuda.Event(enable_timing=True)

    def peak_memory_bytes(self) -> int:
        return self.torch.cuda.max_memory_allocated(self.device)

    def capability(self) -> str:
        return ".".join(map(str, self.torch.cuda.get_device_capability(self.device)))


def capture_step(torch, step, device):
    """One call of `step` captured in a CUDA graph on `device`; returns its replay."""
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        step()  # one more real step on the capture stream, as the CUDA-graph docs advise
    torch.cuda.current_stream(device).wait_stream(side)
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def timed_s(gpu: CudaGpu | None, fn) -> float:
    """Seconds `fn` takes: between two of the card's events, or by the wall clock without a card (gpu None)."""
    if gpu is None:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t
    gpu.synchronize()
    a, b = gpu.event(), gpu.event()
    a.record()
    fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / 1e3
