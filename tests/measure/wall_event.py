"""A stand-in for torch.cuda.Event in CPU tests: the wall clock, the same three methods."""

import time


class WallEvent:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        """Milliseconds from this event to `end`, as torch.cuda.Event.elapsed_time."""
        return (end.t - self.t) * 1e3
