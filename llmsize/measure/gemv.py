"""y = x @ W^T with W in NVFP4, weights kept packed in memory: a Triton GEMV for decode, a torch reference.

Hopper has no FP4 tensor cores (shared/reference/fast-decode-notes.md), so the kernel decodes codes with
integer bit tricks instead of a lookup table:
- E2M1 code c (sign s = bit 3, exponent+mantissa = bits 0..2) -> the float16 bit pattern
  (s << 15) | ((c & 7) << 9) is exactly value * 2^-14 (the exponent bias differs by 14; codes 0 and 1
  land on float16 subnormals, 0 and 2^-15, still exact);
- an FP8 E4M3 scale byte (s eeee mmm, bias 7) -> (s << 15) | ((byte & 0x7F) << 7) is scale * 2^-8 in float16
  (subnormal scales included).
The 2^22 these leave out is folded into the per-row fp32 multiplier once per output. Each 16-element block
is summed first and scaled once, so the per-weight work is unpack, bit-build, convert, multiply-add.
"""

from __future__ import annotations

import torch

from llmsize.measure.launch import interpreter_rows
from llmsize.measure.nvfp4 import BLOCK, Nvfp4Weight

try:  # triton is Linux-only and optional on the CPU: the reference path below needs none of it
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

_BIAS_FIX = float(2 ** 22)  # 2^14 (E2M1 -> fp16 bits) x 2^8 (E4M3 -> fp16 bits)


def nvfp4_linear_reference(x: torch.Tensor, w: Nvfp4Weight) -> torch.Tensor:
    """Plain float32 reference: dequantize the whole matrix, then a matmul."""
    return (x.float() @ w.dequantize(torch.float32).T).to(x.dtype)


if triton is not None:

    def _body(x_ptr, packed_ptr, scale_ptr, row_scale_ptr, y_ptr, N, K, stride_xb, stride_yb,
              BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid_n = tl.program_id(0)
        b = tl.program_id(1)  # one batch row per program column; batch-1 decode is the case that matters
        rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < N
        NB: tl.constexpr = BLOCK_K // 16
        half_k = K // 2
        nblk = K // 16
        jb = tl.arange(0, NB)  # block index inside the tile
        jj = tl.arange(0, 8)  # byte index inside a 16-element block
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            byte = k0 // 2 + jb[:, None] * 8 + jj[None, :]  # [NB, 8]
            k_ok = byte < half_k
            p = tl.load(packed_ptr + rows[:, None, None] * half_k + byte[None, :, :],
                        mask=row_ok[:, None, None] & k_ok[None, :, :], other=0)  # uint8 [BN, NB, 8]
            q = p.to(tl.uint16)  # both codes of the byte are moved into place without extracting them
            lo_bits = ((q & 0x07) << 9) | ((q & 0x08) << 12)  # low nibble: magnitude bits 0-2, sign bit 3
            hi_bits = ((q & 0x70) << 5) | ((q & 0x80) << 8)  # high nibble: magnitude bits 4-6, sign bit 7
            lo_v = lo_bits.to(tl.float16, bitcast=True).to(tl.float32)
            hi_v = hi_bits.to(tl.float16, bitcast=True).to(tl.float32)
            xe = tl.load(x_ptr + b * stride_xb + 2 * byte, mask=k_ok, other=0.0).to(tl.float32)  # even cols
            xo = tl.load(x_ptr + b * stride_xb + 2 * byte + 1, mask=k_ok, other=0.0).to(tl.float32)  # odd
            part = tl.sum(lo_v * xe[None, :, :] + hi_v * xo[None, :, :], axis=2)  # [BN, NB]
            blk = k0 // 16 + jb
            s = tl.load(scale_ptr + rows[:, None] * nblk + blk[None, :],
                        mask=row_ok[:, None] & (blk < nblk)[None, :], other=0)  # uint8 [BN, NB]
            s_bits = ((s & 0x80).to(tl.uint16) << 8) | ((s & 0x7F).to(tl.uint16) << 7)
            s_v = s_bits.to(tl.float16, bitcast=True).to(tl.float32)
            acc += tl.sum(part * s_v, axis=1)
        rs = tl.load(row_scale_ptr + rows, mask=row_ok, other=0.0)
        y = acc * (rs * 4194304.0)  # 2^22, see the module docstring
        tl.store(y_ptr + b * stride_yb + rows, y.to(y_ptr.dtype.element_ty), mask=row_ok)

    _gemv_fixed = triton.jit(_body)
    _gemv_tuned = triton.autotune(
        configs=[triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w)
                 for bn, bk, w in ((16, 256, 4), (32, 256, 4), (32, 128, 4), (64, 128, 8), (16, 512, 8),
                                   (8, 512, 4))],
        key=["N", "K"],
    )(triton.jit(_body))


def triton_available() -> bool:
    return triton is not None


def nvfp4_gemv(x: torch.Tensor, w: Nvfp4Weight, out: torch.Tensor | None = None,
               block_n: int | None = None, block_k: int | None = None) -> torch.Tensor:
    """x [B, K] (bf16/fp16/fp32) -> [B, N] in x's dtype, through the Triton kernel.

    With block_n/block_k given the kernel runs with those tiles (tests); otherwise it is autotuned per shape
    on a GPU, and runs with fixed tiles under Triton's CPU interpreter (which cannot time configs).
    """
    if triton is None:
        raise RuntimeError("triton is not installed")
    n, k = w.shape
    if x.dim() != 2 or x.shape[1] != k:
        raise ValueError(f"x must be [B, {k}], got {tuple(x.shape)}")
    if k % BLOCK:
        raise ValueError(f"K must be a multiple of {BLOCK}, got {k}")
    x = x.contiguous()
    if out is None:
        out = torch.empty((x.shape[0], n), dtype=x.dtype, device=x.device)
    scales_u8 = w.scales.view(torch.uint8)
    if x.device.type != "cuda" and block_n is None and block_k is None:  # the interpreter: one program a row
        block_n, block_k = interpreter_rows(n), 256
    if block_n is not None or block_k is not None:
        bn, bk = block_n or 32, block_k or 256
        if bk % 16:
            raise ValueError("block_k must be a multiple of 16")
        grid = (triton.cdiv(n, bn), x.shape[0])
        _gemv_fixed[grid](x, w.packed, scales_u8, w.row_scale, out, n, k, x.stride(0), out.stride(0),
                          BLOCK_N=bn, BLOCK_K=bk)
    else:
        def grid(meta):
            return (triton.cdiv(n, meta["BLOCK_N"]), x.shape[0])
        _gemv_tuned[grid](x, w.packed, scales_u8, w.row_scale, out, n, k, x.stride(0), out.stride(0))
    return out
