"""Device buffers the decode kernels keep from call to call: arrival counters and partial sums, zeroed once and
left zeroed by each call's last program, so a CUDA graph replays them as they are; and small constant tables,
made once, since a host-to-device copy inside a CUDA graph capture is refused.

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


def constant(purpose: str, device, values: tuple[float, ...], dtype: torch.dtype) -> torch.Tensor:
    """`values` as a tensor on `device`, made on the first call for `purpose` there and reused after (nvfp4's E2M1
    table: the fused step's self-check dequantizes inside its captured steps)."""
    key = (purpose, str(device), (len(values),), dtype)
    if key not in _buffers:
        _buffers[key] = torch.tensor(values, dtype=dtype, device=device)
    return _buffers[key]
