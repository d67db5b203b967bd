"""Device buffers the decode kernels keep from call to call: arrival counters and partial sums, zeroed once and
left zeroed by each call's last program, so a CUDA graph replays them as they are.

One buffer per purpose, device, shape and dtype, shared by every call of that purpose: a decode step runs those
calls one after another, each finishing before the next one starts (launch.py: every kernel waits for the one
before it before touching memory).
"""

from __future__ import annotations

import torch

_buffers: dict[tuple, torch.Tensor] = {}


def zeroed(purpose: str, device, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """The buffer for `purpose` on `device`, zeros when first made; its kernels keep it so."""
    key = (purpose, str(device), tuple(shape), dtype)
    if key not in _buffers:
        _buffers[key] = torch.zeros(shape, dtype=dtype, device=device)
    return _buffers[key]
