"""The word GEMV for a few sequences at once (batch 2-4): each word of codes unpacked once, then multiplied
into every row's fp16x2 accumulator.

gemv_words.py decodes a word in 11 integer instructions and 4 fp16x2 multiplies (x 2^14, its unpack_word), then
spends 4 fp16x2 fma per row of activations (fma2_x4); at batch B its one-row kernel would pay the decode B times
(one weight pass per row), and gemv.py's tensor-core kernels cost ~9-10 instructions per weight whatever the
batch. Here the decode is paid once per weight pass: 4.3 SASS instructions per weight for 2 rows, 6.4 for 4
(benchmarks/kernel_sass.py; the x loads and per-row block sums cost more than the fma alone). Same arithmetic
as the one-row kernel, in the same order, so each row's result is bit-identical to it (tested).
"""
from __future__ import annotations

import torch

from llmsize.measure.gemv_words import (
    check_rows,
    e4m3_cvt,
    pack_x_pairs,
    word_operands,
)
from llmsize.measure.nvfp4 import Nvfp4Weight
from llmsize.measure.tuner import Tuning

try:  # triton is optional on the CPU (as in gemv.py)
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

MAX_ROWS = 4  # beyond, the tensor-core kernels (gemv.py) cost about as much: 4 fp16x2 fma per row and word add up

if triton is not None:
    from llmsize.measure.gemv_words import block_scales, fma2_x4, half2_sum, prefetch_block, unpack_word, x_pairs
    from llmsize.measure.launch import pdl_entry, pdl_exit

    @triton.jit
    def _row_block(xrow, w0, lim, e37, e26, e15, e04, o37, o26, o15, o04, BLOCK_N: tl.constexpr,
                   BLOCK_W: tl.constexpr, USE_ASM: tl.constexpr):
        """One activation row against a tile's decoded words w0 .. w0 + BLOCK_W: the one-row kernel's fma order
        (even word (3, 7), (1, 5), (2, 6), (0, 4), then the odd word), per 16-column block in fp32. Words >= lim
        read as 0."""
        xe0, xe1, xe2, xe3, xo0, xo1, xo2, xo3 = x_pairs(xrow, w0, lim, BLOCK_W, True, True)
        h = fma2_x4(e37, e15, e26, e04, xe0[None, :], xe2[None, :], xe1[None, :], xe3[None, :],
                    tl.zeros([BLOCK_N, BLOCK_W // 2], tl.uint32), USE_ASM)
        h = fma2_x4(o37, o15, o26, o04, xo0[None, :], xo2[None, :], xo1[None, :], xo3[None, :], h, USE_ASM)
        return half2_sum(h, USE_ASM)

    @triton.jit
    def _store_row(y_ptr, r, B, N, stride_yb, rows, acc, rs, E4M3_CVT: tl.constexpr):
        y = tl.sum(acc, axis=1) * (rs if E4M3_CVT else rs * 256.0)  # (see gemv_words.block_scales)
        tl.store(y_ptr + r * stride_yb + rows, y.to(y_ptr.dtype.element_ty), mask=rows < tl.where(r < B, N, 0))

    @triton.jit
    def _gemv_rows(x2_ptr, packed_ptr, scale_ptr, row_scale_ptr, y_ptr, B, N, kw, nblk, stride_yb, prefetch,
                   BLOCK_N: tl.constexpr, BLOCK_W: tl.constexpr, ROWS: tl.constexpr, EVEN: tl.constexpr,
                   USE_ASM: tl.constexpr, E4M3_CVT: tl.constexpr, STAGES: tl.constexpr, PDL: tl.constexpr):
        """ROWS (2 or 4) activation rows, each with its own accumulator of the one-row kernel's shape, so that
        the decoded words are used by every row in the layout they were made in (a [rows, N, K] tensor would
        make Triton move them through shared memory, ~25 barriers per iteration in the sm_90 build)."""
        pid_n = tl.program_id(0)
        rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < N
        if PDL == 2:  # as the one-row kernel (launch.py): weights towards L2, then wait for the kernel before
            prefetch_block(packed_ptr, scale_ptr, pid_n, BLOCK_N, N, kw, nblk, prefetch)
        pdl_entry(PDL, False)
        jj = tl.arange(0, BLOCK_W)
        jb = tl.arange(0, BLOCK_W // 2)
        acc0 = tl.zeros([BLOCK_N, BLOCK_W // 2], dtype=tl.float32)
        acc1 = tl.zeros([BLOCK_N, BLOCK_W // 2], dtype=tl.float32)
        acc2 = tl.zeros([BLOCK_N, BLOCK_W // 2], dtype=tl.float32)
        acc3 = tl.zeros([BLOCK_N, BLOCK_W // 2], dtype=tl.float32)
        for w0 in tl.range(0, kw, BLOCK_W, num_stages=STAGES):
            j = w0 + jj
            blk = w0 // 2 + jb
            if EVEN:
                q = tl.load(packed_ptr + rows[:, None] * kw + j[None, :], eviction_policy="evict_first")
                s = tl.load(scale_ptr + rows[:, None] * nblk + blk[None, :], eviction_policy="evict_first")
            else:
                q = tl.load(packed_ptr + rows[:, None] * kw + j[None, :], mask=row_ok[:, None] & (j < kw)[None, :],
                            other=0, eviction_policy="evict_first")
                s = tl.load(scale_ptr + rows[:, None] * nblk + blk[None, :],
                            mask=row_ok[:, None] & (blk < nblk)[None, :], other=0, eviction_policy="evict_first")
            qe, qo = tl.split(tl.reshape(q.to(tl.uint32, bitcast=True), [BLOCK_N, BLOCK_W // 2, 2]))
            e37, e26, e15, e04 = unpack_word(qe, USE_ASM)
            o37, o26, o15, o04 = unpack_word(qo, USE_ASM)
            sf = block_scales(s, E4M3_CVT)
            acc0 += sf * _row_block(x2_ptr, w0, kw, e37, e26, e15, e04, o37, o26, o15, o04, BLOCK_N, BLOCK_W,
                                    USE_ASM)
            acc1 += sf * _row_block(x2_ptr + kw * 4, w0, tl.where(1 < B, kw, 0), e37, e26, e15, e04, o37, o26, o15, o04,
                                    BLOCK_N, BLOCK_W, USE_ASM)
            if ROWS > 2:
                acc2 += sf * _row_block(x2_ptr + 2 * kw * 4, w0, tl.where(2 < B, kw, 0), e37, e26, e15, e04, o37, o26,
                                        o15, o04, BLOCK_N, BLOCK_W, USE_ASM)
                acc3 += sf * _row_block(x2_ptr + 3 * kw * 4, w0, tl.where(3 < B, kw, 0), e37, e26, e15, e04, o37, o26,
                                        o15, o04, BLOCK_N, BLOCK_W, USE_ASM)
        pdl_exit(PDL)
        rs = tl.load(row_scale_ptr + rows, mask=row_ok, other=0.0)
        _store_row(y_ptr, 0, B, N, stride_yb, rows, acc0, rs, E4M3_CVT)
        _store_row(y_ptr, 1, B, N, stride_yb, rows, acc1, rs, E4M3_CVT)
        if ROWS > 2:
            _store_row(y_ptr, 2, B, N, stride_yb, rows, acc2, rs, E4M3_CVT)
            _store_row(y_ptr, 3, B, N, stride_yb, rows, acc3, rs, E4M3_CVT)


ROWS_CONFIGS = ((32, 32, 4, 1), (64, 32, 8, 1), (32, 32, 4, 3), (16, 32, 4, 3))  # BLOCK_N, BLOCK_W, warps, stages


def nvfp4_gemv_rows(x: torch.Tensor, w: Nvfp4Weight, out: torch.Tensor | None = None, block_n: int | None = None,
                    block_w: int | None = None, num_warps: int = 4, stages: int = 1,
                    tuning: Tuning | None = None) -> torch.Tensor:
    """x [B, K] (B from 2 to MAX_ROWS) -> [B, N], one pass over the packed weights for all rows. On a GPU without
    tiles given, the first call per shape times the configurations that divide it, kept by `tuning` (as
    nvfp4_gemv_words)."""
    check_rows(x, w, 2, MAX_ROWS)
    n, k = w.shape
    b = x.shape[0]
    x2 = pack_x_pairs(x.contiguous())
    if out is None:
        out = torch.empty((b, n), dtype=x.dtype, device=x.device)
    kw, nblk, words, scales, use_asm, opts, pf = word_operands(w, x.device)

    def launch(bn, bw, warps, st, mats=(words, scales, w.row_scale)):
        _gemv_rows[(triton.cdiv(n, bn),)](x2, *mats, out, b, n, kw, nblk, out.stride(0), pf, BLOCK_N=bn, BLOCK_W=bw,
                                          ROWS=2 if b <= 2 else 4, EVEN=n % bn == 0 and kw % bw == 0,
                                          USE_ASM=use_asm, E4M3_CVT=e4m3_cvt(x.device), STAGES=st,
                                          num_warps=warps, **opts)

    if block_n is not None or block_w is not None or not use_asm:
        # the GPU's fallback tile; under the interpreter big tiles (fewer programs: its cost is per operation)
        bw = block_w or (16 if use_asm else min(64, max(2, triton.next_power_of_2(kw))))
        if bw % 2 or bw < 2:
            raise ValueError("block_w must be an even number of words")
        launch(block_n or (32 if use_asm else 128), bw, num_warps, stages)
    else:
        configs = [c for c in ROWS_CONFIGS if n % c[0] == 0 and kw % c[1] == 0]
        launch(*(tuning or Tuning()).best(("rows", n, k, b), launch, configs or [(32, 16, 4, 1)],
                                          (words, scales, w.row_scale)))
    return out
