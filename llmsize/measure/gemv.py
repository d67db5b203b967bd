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

from llmsize.measure.nvfp4 import BLOCK, Nvfp4Weight, quantize

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

    @triton.jit
    def _pack_x_kernel(x_ptr, out_ptr, K, stride_xb, BLOCK: tl.constexpr):
        """x [B, K] -> [B, K/8, 4] uint32: fp16 pairs (x[8j+3-p], x[8j+7-p]) for p = 0..3, the order in which
        the word kernel's unpack yields its codes; clamped to the fp16 range."""
        b = tl.program_id(0)
        j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        ok = j < K // 8
        for p in tl.static_range(4):
            lo = tl.load(x_ptr + b * stride_xb + 8 * j + 3 - p, mask=ok, other=0.0).to(tl.float32)
            hi = tl.load(x_ptr + b * stride_xb + 8 * j + 7 - p, mask=ok, other=0.0).to(tl.float32)
            lo = tl.minimum(tl.maximum(lo, -65504.0), 65504.0).to(tl.float16).to(tl.uint16, bitcast=True)
            hi = tl.minimum(tl.maximum(hi, -65504.0), 65504.0).to(tl.float16).to(tl.uint16, bitcast=True)
            tl.store(out_ptr + (b * (K // 8) + j) * 4 + p, lo.to(tl.uint32) | (hi.to(tl.uint32) << 16), mask=ok)

    @triton.jit
    def _pair_fma(q, x2, acc, USE_ASM: tl.constexpr):
        """acc += (the codes at nibbles 3 and 7 of q, as fp16 values) * x2, two lanes of fp16 in 32-bit words.
        Marlin's unpack (vllm csrc/quantization/marlin/dequant.h) for fp16: (q & 0x80008000) | ((q & 0x70007000)
        >> 3) is value x 2^-14 in each half; x 2^14 (exact, subnormal codes included) then one fused
        multiply-add per two weights."""
        if USE_ASM:
            return tl.inline_asm_elementwise(
                asm="""{
                .reg .b32 t, u, s;
                and.b32 t, $1, 0x70007000;
                shr.b32 t, t, 3;
                and.b32 u, $1, 0x80008000;
                or.b32 t, t, u;
                mov.b32 s, 0x74007400;
                mul.rn.f16x2 t, t, s;
                fma.rn.f16x2 $0, t, $2, $3;
                }""",
                constraints="=r,r,r,r", args=[q, x2, acc], dtype=tl.uint32, is_pure=True, pack=1)
        else:  # the same arithmetic lane by lane, for Triton's CPU interpreter (which runs no PTX)
            t = (q & 0x80008000) | ((q & 0x70007000) >> 3)
            v_lo = (t & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32) * 16384.0
            v_hi = (t >> 16).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32) * 16384.0
            x_lo = (x2 & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
            x_hi = (x2 >> 16).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
            a_lo = (acc & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
            a_hi = (acc >> 16).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
            r_lo = (v_lo * x_lo + a_lo).to(tl.float16).to(tl.uint16, bitcast=True).to(tl.uint32)
            r_hi = (v_hi * x_hi + a_hi).to(tl.float16).to(tl.uint16, bitcast=True).to(tl.uint32)
            return r_lo | (r_hi << 16)

    @triton.jit
    def _half2_sum(acc, USE_ASM: tl.constexpr):
        """The two fp16 lanes of each 32-bit word, converted and added in fp32."""
        if USE_ASM:
            return tl.inline_asm_elementwise(
                asm="""{
                .reg .b16 l, h;
                .reg .f32 a, b;
                mov.b32 {l, h}, $1;
                cvt.f32.f16 a, l;
                cvt.f32.f16 b, h;
                add.f32 $0, a, b;
                }""",
                constraints="=f,r", args=[acc], dtype=tl.float32, is_pure=True, pack=1)
        else:
            lo = (acc & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
            hi = (acc >> 16).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
            return lo + hi

    def _words_body(x2_ptr, packed_ptr, scale_ptr, row_scale_ptr, y_ptr, N, kw, nblk, stride_yb,
                    BLOCK_N: tl.constexpr, BLOCK_W: tl.constexpr, EVEN: tl.constexpr, USE_ASM: tl.constexpr):
        """Batch-1 CUDA-core GEMV on 32-bit words: per word, four unpack + fp16x2 multiply-add steps (two codes
        each, fp16 accumulation of four products per lane), then the two lanes summed in fp32 and the pair of
        words of a 16-column block scaled once; x comes prepacked as fp16 pairs (_pack_x_kernel). About 4-5
        instructions per weight in the sm_90 SASS (benchmarks/kernel_sass.py) against ~14 for the byte kernel."""
        pid_n = tl.program_id(0)
        b = tl.program_id(1)
        rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        jj = tl.arange(0, BLOCK_W)
        jb = tl.arange(0, BLOCK_W // 2)
        acc = tl.zeros([BLOCK_N, BLOCK_W // 2], dtype=tl.float32)
        xrow = x2_ptr + b * kw * 4
        for w0 in range(0, kw, BLOCK_W):
            j = w0 + jj
            blk = w0 // 2 + jb
            if EVEN:
                q = tl.load(packed_ptr + rows[:, None] * kw + j[None, :])
                s = tl.load(scale_ptr + rows[:, None] * nblk + blk[None, :])
                x0 = tl.load(xrow + 4 * j)
                x1 = tl.load(xrow + 4 * j + 1)
                x2 = tl.load(xrow + 4 * j + 2)
                x3 = tl.load(xrow + 4 * j + 3)
            else:
                m = (rows < N)[:, None] & (j < kw)[None, :]
                q = tl.load(packed_ptr + rows[:, None] * kw + j[None, :], mask=m, other=0)
                s = tl.load(scale_ptr + rows[:, None] * nblk + blk[None, :],
                            mask=(rows < N)[:, None] & (blk < nblk)[None, :], other=0)
                x0 = tl.load(xrow + 4 * j, mask=j < kw, other=0)
                x1 = tl.load(xrow + 4 * j + 1, mask=j < kw, other=0)
                x2 = tl.load(xrow + 4 * j + 2, mask=j < kw, other=0)
                x3 = tl.load(xrow + 4 * j + 3, mask=j < kw, other=0)
            q = q.to(tl.uint32, bitcast=True)
            h = _pair_fma(q, x0[None, :].to(tl.uint32, bitcast=True), tl.zeros([BLOCK_N, BLOCK_W], dtype=tl.uint32),
                          USE_ASM)
            q = q << 4
            h = _pair_fma(q, x1[None, :].to(tl.uint32, bitcast=True), h, USE_ASM)
            q = q << 4
            h = _pair_fma(q, x2[None, :].to(tl.uint32, bitcast=True), h, USE_ASM)
            q = q << 4
            h = _pair_fma(q, x3[None, :].to(tl.uint32, bitcast=True), h, USE_ASM)
            ws = tl.sum(tl.reshape(_half2_sum(h, USE_ASM), [BLOCK_N, BLOCK_W // 2, 2]), axis=2)  # per block
            s_bits = ((s & 0x80).to(tl.uint16) << 8) | ((s & 0x7F).to(tl.uint16) << 7)
            acc += ws * s_bits.to(tl.float16, bitcast=True).to(tl.float32)
        rs = tl.load(row_scale_ptr + rows, mask=rows < N, other=0.0)
        y = tl.sum(acc, axis=1) * (rs * 256.0)  # 2^8: the E4M3 bit pattern read as fp16
        tl.store(y_ptr + b * stride_yb + rows, y.to(y_ptr.dtype.element_ty), mask=rows < N)

    _gemv_words = triton.jit(_words_body)
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
    _gemv_fixed = triton.jit(_body)
    _gemv_tuned = triton.autotune(
        configs=[triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w)
                 for bn, bk, w in ((16, 256, 4), (32, 256, 4), (32, 128, 4), (64, 128, 8), (16, 512, 8),
                                   (8, 512, 4))],
        key=["N", "K"],
    )(triton.jit(_body))


def triton_available() -> bool:
    return triton is not None


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


WORDS_CONFIGS = ((64, 32, 8), (32, 32, 4), (128, 32, 8), (64, 16, 4), (32, 64, 4), (64, 64, 8))  # BN, BW, warps
_words_best: dict[tuple[int, int], tuple[int, int, int]] = {}


def pack_x_pairs(x: torch.Tensor) -> torch.Tensor:
    """x [B, K] -> [B, K/8, 4] uint32 (as int32): the fp16 pairs the word kernel multiplies its codes by."""
    b, k = x.shape
    out = torch.empty((b, k // 8, 4), dtype=torch.int32, device=x.device)
    _pack_x_kernel[(b, triton.cdiv(k // 8, 256))](x, out, k, x.stride(0), BLOCK=256)
    return out


def nvfp4_gemv_words(x: torch.Tensor | None, w: Nvfp4Weight, out: torch.Tensor | None = None,
                     block_n: int | None = None, block_w: int | None = None, num_warps: int = 4,
                     x2: torch.Tensor | None = None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Batch-1 CUDA-core GEMV that decodes two codes per instruction (fp16x2 PTX on the GPU, the same arithmetic
    in plain Triton under the CPU interpreter); one weight pass per batch row. x [B, K] -> [B, N]; or x None and
    x2 the activations already packed ([B, K/8, 4], pack_x_pairs' layout, as the fused kernels can write them).

    On a GPU without tiles given, the first call per shape times the configurations that divide it and keeps the
    fastest (CUDA events, outside any graph capture)."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    n, k = w.shape
    if k % BLOCK:
        raise ValueError(f"K must be a multiple of {BLOCK}, got {k}")
    if x2 is None:
        if x is None or x.dim() != 2 or x.shape[1] != k:
            raise ValueError(f"x must be [B, {k}], got {None if x is None else tuple(x.shape)}")
        x2 = pack_x_pairs(x.contiguous())
    elif tuple(x2.shape[1:]) != (k // 8, 4):
        raise ValueError(f"x2 must be [B, {k // 8}, 4], got {tuple(x2.shape)}")
    b = x2.shape[0]
    if out is None:
        out = torch.empty((b, n), dtype=out_dtype or (x.dtype if x is not None else torch.bfloat16),
                          device=x2.device)
    kw, nblk = k // 8, k // 16
    words = w.packed.view(torch.int32)
    use_asm = x2.device.type == "cuda"

    def launch(bn, bw, warps):
        even = n % bn == 0 and kw % bw == 0
        _gemv_words[(triton.cdiv(n, bn), b)](x2, words, w.scales.view(torch.uint8), w.row_scale, out, n, kw, nblk,
                                             out.stride(0), BLOCK_N=bn, BLOCK_W=bw, EVEN=even, USE_ASM=use_asm,
                                             num_warps=warps)

    if block_n is not None or block_w is not None or not use_asm:
        bn, bw = block_n or 32, block_w or 16
        if bw % 2 or bw < 2:
            raise ValueError("block_w must be an even number of words")
        launch(bn, bw, num_warps)
        return out
    key = (n, k)
    if key not in _words_best:
        _words_best[key] = _time_configs(launch, [c for c in WORDS_CONFIGS if n % c[0] == 0 and kw % c[1] == 0]
                                         or [(32, 16, 4)])
    launch(*_words_best[key])
    return out


_words_checked: dict[str, bool] = {}


def words_kernel_ok(device) -> bool:
    """Whether the word kernel's PTX computes what the reference does on this GPU: checked once per device on a
    small random matrix (every code, real scales) before `--gemv auto` trusts it for batch 1."""
    key = str(device)
    if key not in _words_checked:
        gen = torch.Generator(device=device).manual_seed(0)
        w = quantize(torch.randn(256, 512, device=device, generator=gen) * 0.05)
        x = torch.randn(1, 512, device=device, generator=gen).to(torch.bfloat16)
        want = nvfp4_linear_reference(x.float(), w)
        got = nvfp4_gemv_words(x, w, block_n=32, block_w=16).float()
        _words_checked[key] = bool(torch.allclose(got, want, rtol=2e-2, atol=2e-2))
    return _words_checked[key]


def _time_configs(launch, configs):
    """Fastest of `configs` by CUDA events (a few launches each); called once per shape, before capture."""
    best, best_t = configs[0], float("inf")
    for cfg in configs:
        for _ in range(3):
            launch(*cfg)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            launch(*cfg)
        end.record()
        end.synchronize()
        t = start.elapsed_time(end)
        if t < best_t:
            best, best_t = cfg, t
    return best


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
    if x.device.type != "cuda" and block_n is None and block_k is None:
        block_n, block_k = 32, 256
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
