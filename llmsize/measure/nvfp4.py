"""NVFP4 weights: E2M1 codes, one FP8 E4M3 scale per 16 elements, one FP32 scale per tensor.

Facts (shared/reference/nvfp4-format.md, nvfp4-checkpoints.md):
- E2M1 codes 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign (ModelOpt nvfp4_tensor.py e2m1_values;
  compressed-tensors fp4_quantized.py FLOAT_TO_E2M1).
- Rounding is round-to-nearest-even on the E2M1 grid: a tie goes to the even code (compressed-tensors
  FP4_E2M1_DATA.cast_to_fp4: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4).
- Per-tensor scale: ModelOpt stores a multiplier weight_scale_2 = amax / (6 * 448); compressed-tensors stores
  its reciprocal weight_global_scale = 448 * 6 / amax (the official converter maps one to the other by 1/x).
- Block scale = block_amax / (6 * weight_scale_2), cast to float8_e4m3fn; value = e2m1 * fp32(block scale)
  * weight_scale_2.
- Packing: two codes per byte, the even column in the low nibble, the odd column in the high nibble.

Internally a tensor keeps the multiplier convention, as a per-row fp32 vector so that fused projections
(q/k/v, gate/up) stay exact even when their parts were quantized with different per-tensor scales.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from llmsize.measure import scratch

BLOCK = 16
E2M1_MAX = 6.0
E4M3_MAX = 448.0

# Code -> value, codes 0..15 (bit 3 = sign).
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
# Midpoints between consecutive magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
_BOUNDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def e2m1_codes(x: torch.Tensor) -> torch.Tensor:
    """Round float values (already divided by their scale) to E2M1 codes (uint8, 0..15), nearest-even, saturating."""
    x = x.float()
    mag = x.abs().clamp(max=E2M1_MAX)
    bounds = torch.tensor(_BOUNDS, dtype=torch.float32, device=x.device)
    down = torch.bucketize(mag, bounds, right=False, out_int32=True)  # a tie stays in the lower bucket
    up = torch.bucketize(mag, bounds, right=True, out_int32=True)  # a tie moves to the upper bucket
    code = torch.where(down % 2 == 0, down, up)  # equal unless tied; on a tie, the even code
    sign = (x < 0) & (code != 0)  # -0 is stored as +0, as both reference quantizers do
    return (code | (sign.to(code.dtype) << 3)).to(torch.uint8)


def e2m1_values(codes: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Codes (uint8 0..15) -> values, through a table made once per device (scratch.constant)."""
    return scratch.constant("e2m1", codes.device, E2M1_VALUES, dtype)[codes.long()]


def pack(codes: torch.Tensor) -> torch.Tensor:
    """[..., K] codes -> [..., K/2] bytes: even element in the low nibble, odd element in the high nibble."""
    if codes.shape[-1] % 2:
        raise ValueError(f"cannot pack an odd number of columns ({codes.shape[-1]})")
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """[..., K/2] bytes -> [..., K] codes (inverse of pack)."""
    low, high = packed & 0x0F, packed >> 4
    return torch.stack((low, high), dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


@dataclass
class Nvfp4Weight:
    """A [N, K] matrix in NVFP4: packed codes, block scales, and the per-tensor multiplier for each row."""

    packed: torch.Tensor  # uint8 [N, K/2]
    scales: torch.Tensor  # float8_e4m3fn [N, K/16]
    row_scale: torch.Tensor  # float32 [N]: the per-tensor multiplier (ModelOpt weight_scale_2) of each row

    @property
    def shape(self) -> tuple[int, int]:
        return (self.packed.shape[0], self.packed.shape[1] * 2)

    @property
    def packed_bytes(self) -> int:
        return self.packed.numel() * self.packed.element_size()

    @property
    def scale_bytes(self) -> int:
        return self.scales.numel() * self.scales.element_size() + self.row_scale.numel() * 4

    def dequantize(self, dtype: torch.dtype = torch.float32, rows_per_chunk: int = 2048) -> torch.Tensor:
        """The dense matrix, built a slice of rows at a time so the transient stays small (prefill
        dequantizes Gemma's 30720 x 3840 gate|up: whole, its int64 lookup indices alone would be ~1 GB)."""
        n, k = self.shape
        out = torch.empty((n, k), dtype=dtype, device=self.packed.device)
        for r in range(0, n, rows_per_chunk):
            rr = slice(r, min(n, r + rows_per_chunk))
            m = out[rr].shape[0]
            codes = e2m1_values(unpack(self.packed[rr])).view(m, k // BLOCK, BLOCK)
            w = codes * self.scales[rr].float().view(m, k // BLOCK, 1) * self.row_scale[rr].float().view(m, 1, 1)
            out[rr] = w.view(m, k).to(dtype)
        return out

    def to(self, device) -> Nvfp4Weight:
        return Nvfp4Weight(self.packed.to(device), self.scales.to(device), self.row_scale.to(device))


def global_multiplier(w: torch.Tensor) -> torch.Tensor:
    """ModelOpt's weight_scale_2 = amax / (6 * 448), fp32 scalar tensor (1.0 for an all-zero tensor)."""
    amax = w.detach().abs().max().float()
    return torch.where(amax > 0, amax / (E2M1_MAX * E4M3_MAX), torch.ones_like(amax))


def quantize(w: torch.Tensor, multiplier: torch.Tensor | None = None, rows_per_chunk: int = 2048) -> Nvfp4Weight:
    """Quantize a [N, K] matrix (K a multiple of 16) to NVFP4 with the ModelOpt recipe.

    `multiplier` overrides the per-tensor scale (to share one across fused projections, as vLLM expects).
    """
    if w.dim() != 2 or w.shape[1] % BLOCK:
        raise ValueError(f"NVFP4 needs a [N, K] matrix with K a multiple of {BLOCK}, got {tuple(w.shape)}")
    n, k = w.shape
    s2 = global_multiplier(w) if multiplier is None else multiplier.float().reshape(())
    packed = torch.empty((n, k // 2), dtype=torch.uint8, device=w.device)
    scales = torch.empty((n, k // BLOCK), dtype=torch.float8_e4m3fn, device=w.device)
    for r in range(0, n, rows_per_chunk):  # a slice of rows at a time: the fp32 temporaries stay small
        rr = slice(r, min(n, r + rows_per_chunk))
        blocks = w[rr].detach().float().view(-1, k // BLOCK, BLOCK)
        block_amax = blocks.abs().amax(dim=-1)
        scale = (block_amax / (E2M1_MAX * s2)).clamp(max=E4M3_MAX)
        scale = torch.where(block_amax > 0, scale, torch.ones_like(scale))  # all-zero block: any, as ModelOpt
        scale_fp8 = scale.to(torch.float8_e4m3fn)
        eff = scale_fp8.float() * s2
        packed[rr] = pack(e2m1_codes(blocks / eff.unsqueeze(-1)).view(-1, k))
        scales[rr] = scale_fp8
    return Nvfp4Weight(packed, scales, s2.expand(n).contiguous())


def concat_rows(parts: list[Nvfp4Weight]) -> Nvfp4Weight:
    """Stack several NVFP4 matrices with the same K into one (a fused projection); exact, row scales kept."""
    return Nvfp4Weight(torch.cat([p.packed for p in parts]), torch.cat([p.scales for p in parts]),
                       torch.cat([p.row_scale for p in parts]))


def split_rows(w: Nvfp4Weight, sizes: list[int]) -> list[Nvfp4Weight]:
    """Inverse of concat_rows."""
    return [Nvfp4Weight(p, s, r) for p, s, r in zip(torch.split(w.packed, sizes), torch.split(w.scales, sizes),
                                                    torch.split(w.row_scale, sizes))]
