"""Two tensor-core NVFP4 GEMVs the tool does not ship, kept to be timed against the shipped ones
(benchmarks/gemv_bench.py) and proved against the float reference (tests/measure/test_bench_kernels.py).

- dot: each code unpacked on its own (~40 SASS instructions per weight, benchmarks/kernel_sass.py), the tile
  dequantized to fp16 and multiplied on the tensor cores against up to 16 activation rows;
- pairs: two codes per integer op (Marlin's FP4 unpack), 9-19 instructions per weight.

Both are slower than the word kernels `llmsize measure` runs (llmsize/measure/gemv_words.py at batch 1,
gemv_tc.py for 2-256 rows: 3.1-3.4 instructions per weight), which is why they live here.
"""

from __future__ import annotations

import torch

from llmsize.measure.nvfp4 import BLOCK, Nvfp4Weight

try:  # triton is Linux-only and optional on the CPU
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

if triton is not None:

    def _dot_body(x_ptr, packed_ptr, scale_ptr, row_scale_ptr, y_ptr, B, N, K, stride_xb, stride_yb,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_B: tl.constexpr, DOT_DTYPE: tl.constexpr):
        """Batch 1..16 in one pass over the weights: the W tile dequantized to fp16 (code x block scale has at
        most 6 significant bits and lies in [2^-10, 2688]: exact), times the activations rounded to fp16
        [BLOCK_K, BLOCK_B], on the tensor cores with fp32 accumulation. fp16 rather than bf16: more mantissa
        for the activations, and Triton's CPU interpreter computes bf16 dots wrongly (checked with 3.9)."""
        pid_n = tl.program_id(0)
        rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < N
        half_k = K // 2
        nblk = K // 16
        bs = tl.arange(0, BLOCK_B)
        acc = tl.zeros([BLOCK_N, BLOCK_B], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + tl.arange(0, BLOCK_K)
            k_ok = kk < K
            p = tl.load(packed_ptr + rows[:, None] * half_k + (kk // 2)[None, :],
                        mask=row_ok[:, None] & k_ok[None, :], other=0)  # each byte loaded for both its codes
            c = tl.where((kk % 2 == 0)[None, :], p & 0x0F, p >> 4)
            bits = ((c & 7).to(tl.uint16) << 9) | ((c & 8).to(tl.uint16) << 12)
            v = bits.to(tl.float16, bitcast=True).to(tl.float32) * 16384.0  # exact E2M1 value
            s = tl.load(scale_ptr + rows[:, None] * nblk + (kk // 16)[None, :],
                        mask=row_ok[:, None] & k_ok[None, :], other=0)
            s_bits = ((s & 0x80).to(tl.uint16) << 8) | ((s & 0x7F).to(tl.uint16) << 7)
            sv = s_bits.to(tl.float16, bitcast=True).to(tl.float32) * 256.0  # exact E4M3 value
            w = (v * sv).to(DOT_DTYPE)
            xt = tl.load(x_ptr + bs[None, :] * stride_xb + kk[:, None], mask=k_ok[:, None] & (bs < B)[None, :],
                         other=0.0).to(tl.float32)
            xt = tl.minimum(tl.maximum(xt, -65504.0), 65504.0).to(DOT_DTYPE)  # [BLOCK_K, BLOCK_B], fp16 range
            acc += tl.dot(w, xt)
        rs = tl.load(row_scale_ptr + rows, mask=row_ok, other=0.0)
        y = acc * rs[:, None]
        tl.store(y_ptr + bs[None, :] * stride_yb + rows[:, None], y.to(y_ptr.dtype.element_ty),
                 mask=row_ok[:, None] & (bs < B)[None, :])

    def _pairs_body(x_ptr, packed_ptr, scale_ptr, row_scale_ptr, y_ptr, B, N, K, stride_xb, stride_yb,
                    BLOCK_N: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_B: tl.constexpr):
        """Two codes per integer op (Marlin's FP4 unpack, vllm csrc/quantization/marlin/dequant.h, written for
        fp16 halves): a 32-bit word holds the 8 codes of columns 8j..8j+7, code i in bits 4i..4i+3.
        (q & 0x80008000) | ((q & 0x70007000) >> 3) puts the codes of columns 8j+3 and 8j+7 into the two fp16
        halves as value x 2^-14; q <<= 4 brings the next pair (8j+2, 8j+6), and so on. Each half is scaled in
        fp16 (x 2^14, then x the E4M3 block scale: both exact, the product has <= 6 significant bits) and the
        four pairs go through the tensor cores against the matching columns of x, fp32 accumulation; x is
        rounded to fp16. About 3 integer/fp16 operations per weight instead of ~9 for the per-byte kernels."""
        pid_n = tl.program_id(0)
        rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < N
        kw = K // 8  # words per row
        nblk = K // 16
        jj = tl.arange(0, BLOCK_W)
        bs = tl.arange(0, BLOCK_B)
        b_ok = bs < B
        acc = tl.zeros([BLOCK_N, BLOCK_B], dtype=tl.float32)
        for w0 in range(0, kw, BLOCK_W):
            j = w0 + jj
            j_ok = j < kw
            m = row_ok[:, None] & j_ok[None, :]
            q = tl.load(packed_ptr + rows[:, None] * kw + j[None, :], mask=m, other=0).to(tl.uint32, bitcast=True)
            s = tl.load(scale_ptr + rows[:, None] * nblk + (j // 2)[None, :], mask=m, other=0)  # a word's block
            s_bits = ((s & 0x80).to(tl.uint16) << 8) | ((s & 0x7F).to(tl.uint16) << 7)
            sv = s_bits.to(tl.float16, bitcast=True) * 256.0  # the E4M3 scale, exact in fp16
            xm = j_ok[:, None] & b_ok[None, :]
            xrow = x_ptr + bs[None, :] * stride_xb + 8 * j[:, None]
            for p in tl.static_range(4):
                t = (q & 0x80008000) | ((q & 0x70007000) >> 3)
                lo = (t & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True)  # column 8j + 3 - p
                hi = (t >> 16).to(tl.uint16).to(tl.float16, bitcast=True)  # column 8j + 7 - p
                w_lo = (lo * 16384.0) * sv
                w_hi = (hi * 16384.0) * sv
                x_lo = tl.load(xrow + (3 - p), mask=xm, other=0.0).to(tl.float32)
                x_hi = tl.load(xrow + (7 - p), mask=xm, other=0.0).to(tl.float32)
                x_lo = tl.minimum(tl.maximum(x_lo, -65504.0), 65504.0).to(tl.float16)
                x_hi = tl.minimum(tl.maximum(x_hi, -65504.0), 65504.0).to(tl.float16)
                acc += tl.dot(w_lo, x_lo)
                acc += tl.dot(w_hi, x_hi)
                q = q << 4
        rs = tl.load(row_scale_ptr + rows, mask=row_ok, other=0.0)
        y = acc * rs[:, None]
        tl.store(y_ptr + bs[None, :] * stride_yb + rows[:, None], y.to(y_ptr.dtype.element_ty),
                 mask=row_ok[:, None] & b_ok[None, :])

    _gemv_pairs = triton.jit(_pairs_body)
    _gemv_pairs_tuned = triton.autotune(
        configs=[triton.Config({"BLOCK_N": bn, "BLOCK_W": bw}, num_warps=w)
                 for bn, bw, w in ((64, 16, 4), (32, 32, 4), (128, 16, 4), (64, 32, 8), (16, 64, 4), (32, 64, 4))],
        key=["N", "K"],
    )(triton.jit(_pairs_body))
    _gemv_dot = triton.jit(_dot_body)
    _gemv_dot_tuned = triton.autotune(
        configs=[triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w)
                 for bn, bk, w in ((64, 128, 4), (32, 256, 4), (128, 64, 4), (64, 256, 8), (16, 512, 4))],
        key=["N", "K"],
    )(triton.jit(_dot_body))


def _batch_input(x: torch.Tensor, w: Nvfp4Weight, out: torch.Tensor | None, whole_blocks: bool = False):
    """Checks for the tensor-core kernels (1 to 16 rows of K): x made contiguous, the output allocated."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    n, k = w.shape
    b = x.shape[0]
    if x.dim() != 2 or x.shape[1] != k or not 1 <= b <= 16:
        raise ValueError(f"x must be [1..16, {k}], got {tuple(x.shape)}")
    if whole_blocks and k % BLOCK:
        raise ValueError(f"K must be a multiple of {BLOCK}, got {k}")
    x = x.contiguous()
    if out is None:
        out = torch.empty((b, n), dtype=x.dtype, device=x.device)
    return x, out, n, k, b


def nvfp4_gemv_dot(x: torch.Tensor, w: Nvfp4Weight, out: torch.Tensor | None = None, block_n: int | None = None,
                   block_k: int | None = None) -> torch.Tensor:
    """Batch 1-16 with one pass over the packed weights (tensor-core dot); x [B, K] -> [B, N]. Autotuned on a
    GPU unless tiles are given; fixed 64 x 128 tiles under the CPU interpreter."""
    x, out, n, k, b = _batch_input(x, w, out)
    args = (x, w.packed, w.scales.view(torch.uint8), w.row_scale, out, b, n, k, x.stride(0), out.stride(0))
    if x.device.type == "cuda" and block_n is None and block_k is None:
        def grid(meta):
            return (triton.cdiv(n, meta["BLOCK_N"]),)
        _gemv_dot_tuned[grid](*args, BLOCK_B=16, DOT_DTYPE=tl.float16)
    else:
        bn, bk = block_n or 64, block_k or 128
        if bk % 16 or bk < 16 or bn < 16:
            raise ValueError("block_k must be a multiple of 16, tiles at least 16")
        _gemv_dot[(triton.cdiv(n, bn),)](*args, BLOCK_N=bn, BLOCK_K=bk, BLOCK_B=16, DOT_DTYPE=tl.float16)
    return out


def nvfp4_gemv_pairs(x: torch.Tensor, w: Nvfp4Weight, out: torch.Tensor | None = None, block_n: int | None = None,
                     block_w: int | None = None) -> torch.Tensor:
    """Batch 1-16, two codes decoded per integer op, tensor-core dot; x [B, K] -> [B, N]. Autotuned on a GPU
    unless tiles are given (block_w = 32-bit words of 8 codes per row and step, at least 16); fixed 32 x 16
    tiles under the CPU interpreter."""
    x, out, n, k, b = _batch_input(x, w, out, whole_blocks=True)
    words = w.packed.view(torch.int32)  # [N, K/8], little-endian: byte 0 (columns 0, 1) in bits 0..7
    args = (x, words, w.scales.view(torch.uint8), w.row_scale, out, b, n, k, x.stride(0), out.stride(0))
    if x.device.type == "cuda" and block_n is None and block_w is None:
        def grid(meta):
            return (triton.cdiv(n, meta["BLOCK_N"]),)
        _gemv_pairs_tuned[grid](*args, BLOCK_B=16)
    else:
        bn, bw = block_n or 32, block_w or 16
        if bn < 16 or bw < 16:
            raise ValueError("tiles must be at least 16 rows and 16 words")
        _gemv_pairs[(triton.cdiv(n, bn),)](*args, BLOCK_N=bn, BLOCK_W=bw, BLOCK_B=16)
    return out
