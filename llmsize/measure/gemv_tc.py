"""The tensor-core word GEMV: NVFP4 x 2-256 activation rows in one pass over the weights, for batched decode.

The batch-1 word kernel (gemv_words.py) multiplies on the CUDA cores: an fp16x2 fma per two weights and row, so
a several-row version costs more with each row (4.3 SASS instructions per weight at 2 rows, 6.4 at 4: the
benchmarks/kernels/gemv_rows.py kernel), and tensor-core kernels that decode codes one fp16 at a time spend
9-40 per weight (benchmarks/kernels/gemv_dot.py). Here each 32-bit word of eight
codes is decoded as in the word kernels (Marlin's unpack, vllm csrc/quantization/marlin/dequant.h: three
integer ops make the fp16 high bytes of four codes, one prmt picks a pair) straight into fp16x2 pairs of the
tensor-core operand, scaled by the block scale with one fp16x2 multiply per pair, and the dot runs on the
tensor cores (wgmma on Hopper) against up to 16 activation rows: 3.1-3.4 instructions per weight (128-256
rows a program; 4.3-4.4 at 64) whatever the batch (benchmarks/kernel_sass.py), under the ~3.9 an H200 SM
affords at full bandwidth.

The dot's K order is the decode's, not the columns': the tensor-core fragment gives each thread pairs of
consecutive k, so k = 32a + 8p + 2t + i (a tile of BLOCK_W words in groups of four) is code i of pair p
(columns p and p + 4) of word 4a + t, so that a thread decodes all four pairs of the words it holds. The
activations are loaded in column order and permuted to match in registers (reshape and permute, no gather).

Exactness: a code's fp16 bits are its value x 2^-14 (codes 0.5 and 0 land on fp16 subnormals); times the
E4M3 scale x 2^7 (exact in fp16: at most 448 x 128 = 57,344), the product value x scale x 2^-7 has at most
six significant bits and its lowest at or above 2^-17, so it is exact in fp16; the 2^7 goes back in the
per-tensor fp32 multiplier. Activations are rounded to fp16 (saturating at +-65,504), products are exact in
the fp32 accumulator. Every inline-asm operand is one element (pack=1) or an elementwise conversion, so the
result does not depend on the register layout Triton picks; under Triton's CPU interpreter the same bits are
computed in plain Triton (USE_ASM false), which is what the CPU tests check.
"""
from __future__ import annotations

import torch

from llmsize.measure.gemv import nvfp4_gemv
from llmsize.measure.gemv_words import (
    check_rows,
    e4m3_cvt,
    split_workspace,
    word_operands,
)
from llmsize.measure.launch import interpreter_rows
from llmsize.measure.nvfp4 import Nvfp4Weight
from llmsize.measure.tuner import Tuning

try:  # triton is optional on the CPU (as in gemv.py)
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

if triton is not None:
    from llmsize.measure.acts import gelu_tanh_mul
    from llmsize.measure.gemv_words import prefetch_tile, tile_rows
    from llmsize.measure.launch import pdl_entry, pdl_exit

    @triton.jit
    def _half(bits):
        """The low 16 bits of uint32 values as fp16, widened to fp32."""
        return (bits & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)

    @triton.jit
    def _scale_pair(s, USE_ASM: tl.constexpr, E4M3_CVT: tl.constexpr):
        """E4M3 block scales (bytes, as uint32) -> uint32 fp16x2 pairs (scale x 2^7 in both halves). E4M3_CVT:
        the byte doubled by a prmt, one e4m3x2 -> f16x2 conversion (sm_89 and up), x 2^7. Else (sm_80) the
        bits moved into an fp16, sign | exponent-mantissa >> 1 (the value x 2^-8, subnormals included), x 2^15.
        Both exact."""
        if USE_ASM:
            if E4M3_CVT:
                return tl.inline_asm_elementwise(
                    asm="""{
                    .reg .b32 t, c;
                    .reg .b16 l, h;
                    prmt.b32 t, $1, 0, 0x4400;
                    mov.b32 {l, h}, t;
                    cvt.rn.f16x2.e4m3x2 t, l;
                    mov.b32 c, 0x58005800;
                    mul.rn.f16x2 $0, t, c;
                    }""",
                    constraints="=r,r", args=[s], dtype=tl.uint32, is_pure=True, pack=1)
            else:
                return tl.inline_asm_elementwise(
                    asm="""{
                    .reg .b32 t, u, c;
                    and.b32 t, $1, 0x7F;
                    shl.b32 t, t, 7;
                    and.b32 u, $1, 0x80;
                    shl.b32 u, u, 8;
                    or.b32 t, t, u;
                    prmt.b32 t, t, 0, 0x1010;
                    mov.b32 c, 0x78007800;
                    mul.rn.f16x2 $0, t, c;
                    }""",
                    constraints="=r,r", args=[s], dtype=tl.uint32, is_pure=True, pack=1)
        else:
            if E4M3_CVT:
                v = s.to(tl.uint8).to(tl.float8e4nv, bitcast=True).to(tl.float32) * 128.0
            else:
                bits = ((s & 0x80) << 8) | ((s & 0x7F) << 7)
                v = _half(bits) * 32768.0
            h = v.to(tl.float16).to(tl.uint16, bitcast=True).to(tl.uint32)
            return h | (h << 16)

    @triton.jit
    def _code_pair(q, shift, sel, sv, USE_ASM: tl.constexpr):
        """One fp16 pair of word q, as (low half, high half): Marlin's unpack on q << shift (0: the high nibbles,
        4: the low ones) makes the fp16 high bytes of four codes (value x 2^-14), the prmt selector sel keeps
        bytes 1 and 3 (columns 3, 7 or 2, 6) or moves bytes 0 and 2 up (columns 1, 5 or 0, 4), and the pair is
        multiplied by sv (scale x 2^7 in both halves). One element per asm instance."""
        if USE_ASM:
            return tl.inline_asm_elementwise(
                asm="""{
                .reg .b32 r, t, u;
                shl.b32 u, $2, $3;
                and.b32 r, u, 0x70707070;
                shr.b32 r, r, 3;
                and.b32 t, u, 0x80808080;
                or.b32 t, t, r;
                prmt.b32 t, t, 0, $4;
                mul.rn.f16x2 t, t, $5;
                mov.b32 {$0, $1}, t;
                }""",
                constraints="=h,=h,r,r,r,r", args=[q, shift, sel, sv], dtype=(tl.float16, tl.float16),
                is_pure=True, pack=1)
        else:  # the same bits in plain Triton, for the interpreter
            u = q << shift
            t = (u & 0x80808080) | ((u & 0x70707070) >> 3)
            p = tl.where(sel == 0x2404, (t << 8) & 0xFF00FF00, t & 0xFF00FF00)
            # (value x 2^-14) x (scale x 2^7), exact in fp32 and then in fp16 (module docstring)
            return (_half(p) * _half(sv)).to(tl.float16), (_half(p >> 16) * _half(sv >> 16)).to(tl.float16)

    @triton.jit
    def _to_fp16(x, USE_ASM: tl.constexpr):
        """fp32 -> fp16, saturating at +-65,504 (cvt.rn.satfinite, two elements an instruction)."""
        if USE_ASM:
            return tl.inline_asm_elementwise("cvt.rn.satfinite.f16x2.f32 $0, $2, $1;", "=r,r,r", [x],
                                             dtype=tl.float16, is_pure=True, pack=2)
        else:
            return tl.minimum(tl.maximum(x, -65504.0), 65504.0).to(tl.float16)

    @triton.jit
    def _gemv_tc(x_ptr, packed_ptr, scale_ptr, row_scale_ptr, y_ptr, ws_ptr, cnt_ptr, B, N, K, kw, nblk, stride_xb,
                 stride_yb, prefetch, kw_split, inter, BLOCK_N: tl.constexpr, BLOCK_W: tl.constexpr,
                 BLOCK_B: tl.constexpr, EVEN: tl.constexpr, SPLIT: tl.constexpr, GLU: tl.constexpr,
                 USE_ASM: tl.constexpr, E4M3_CVT: tl.constexpr, PDL: tl.constexpr):
        """y[:B, rows] = x[:B] @ W[rows]^T for one block of BLOCK_N rows, BLOCK_W words (8 BLOCK_W columns) a
        step: the tile decoded into the dot's operand (k = 32a + 8p + 2t + i, module docstring), x's tile
        permuted to the same order, one tensor-core dot per step.

        SPLIT: program (n, z) covers words [z kw_split, (z + 1) kw_split) and adds its partial sums into the fp32
        workspace ws [B, N]; the last of a row block's programs (a counter per row block, acq_rel) takes the
        sums, leaves ws and the counter zeroed for the next call, and stores y (the word kernel's split-K, for
        the GEMVs with few rows: 3,840 rows are 30 programs of 128 on a 132-SM card).

        GLU: the weight is gate | up (N = 2 inter rows); a program takes BLOCK_N / 2 gate rows and the matching
        up rows, interleaved, and stores gelu_tanh(gate) * up [B, inter] (the word kernel's GeGLU epilogue,
        the fused step's geglu kernel folded in).

        More than BLOCK_B rows: the row blocks of x are programs too, adjacent on axis 0 (program pid is row
        block pid % nb of weight block pid // nb), so the programs that decode the same weight tile run side by
        side and all but the first read it from L2; only the first prefetches it."""
        pid = tl.program_id(0)
        kz = tl.program_id(1)
        nb = tl.cdiv(B, BLOCK_B)
        pid_n = pid // nb
        pid_b = pid % nb
        rows, row_ok, i0 = tile_rows(pid_n, N, inter, BLOCK_N, GLU)
        k_lo = kz * kw_split
        k_hi = tl.minimum(kw, k_lo + kw_split)
        if PDL == 2:  # as the word kernels (launch.py): weights towards L2, then wait for the kernel before
            if pid_b == 0:
                prefetch_tile(packed_ptr, scale_ptr, pid_n, rows, row_ok, i0, N, inter, k_lo, k_hi, kw, nblk,
                               prefetch, BLOCK_N, SPLIT, GLU)
        pdl_entry(PDL, False)
        A: tl.constexpr = BLOCK_W // 4  # groups of four words
        jj = tl.arange(0, BLOCK_W)
        jb = tl.arange(0, BLOCK_W // 2)
        bs = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
        kk = tl.arange(0, 8 * BLOCK_W)
        pp = tl.arange(0, 4)[None, None, :, None]  # pair p of a word: columns (p, p + 4)
        shift = (4 * (1 - pp % 2)).to(tl.uint32)  # even p: the low nibbles, moved up by q << 4
        sel = tl.where(pp < 2, 0x2404, 0x3414)  # prmt: bytes 0, 2 moved up to 1, 3 (p = 0, 1), or 1, 3 kept
        b_ok = bs < B
        acc = tl.zeros([BLOCK_N, BLOCK_B], dtype=tl.float32)
        for w0 in range(k_lo, k_hi, BLOCK_W):
            j = w0 + jj
            blk = w0 // 2 + jb
            xp = x_ptr + bs[:, None] * stride_xb + 8 * w0 + kk[None, :]
            if EVEN:
                q = tl.load(packed_ptr + rows[:, None] * kw + j[None, :], eviction_policy="evict_first")
                s = tl.load(scale_ptr + rows[:, None] * nblk + blk[None, :], eviction_policy="evict_first")
                xt = tl.load(xp, mask=b_ok[:, None], other=0.0)
            else:
                q = tl.load(packed_ptr + rows[:, None] * kw + j[None, :],
                            mask=row_ok[:, None] & (j < k_hi)[None, :], other=0, eviction_policy="evict_first")
                s = tl.load(scale_ptr + rows[:, None] * nblk + blk[None, :],
                            mask=row_ok[:, None] & (2 * blk < k_hi)[None, :], other=0, eviction_policy="evict_first")
                xt = tl.load(xp, mask=b_ok[:, None] & (8 * w0 + kk < 8 * k_hi)[None, :], other=0.0)
            sv = _scale_pair(s.to(tl.uint32), USE_ASM, E4M3_CVT)  # [BN, BW / 2]: one per block, both words
            sv = tl.reshape(tl.broadcast_to(sv[:, :, None], [BLOCK_N, BLOCK_W // 2, 2]), [BLOCK_N, A, 1, 4])
            q4 = tl.reshape(q.to(tl.uint32, bitcast=True), [BLOCK_N, A, 1, 4])  # word 4a + t at [:, a, 0, t]
            lo, hi = _code_pair(q4, shift, sel, sv, USE_ASM)  # [BN, A, 4 (p), 4 (t)]
            wt = tl.reshape(tl.join(lo, hi), [BLOCK_N, 8 * BLOCK_W])  # k = 32a + 8p + 2t + i
            xh = _to_fp16(xt.to(tl.float32), USE_ASM)  # [BB, 8 BW], column 32a + 8t + 4i + p
            xk = tl.reshape(tl.permute(tl.reshape(xh, [BLOCK_B, A, 4, 2, 4]), (0, 1, 4, 2, 3)),
                            [BLOCK_B, 8 * BLOCK_W])  # in the weights' k order
            acc = tl.dot(wt, tl.trans(xk), acc)
        pdl_exit(PDL)  # this program's weights are read: the next kernel may start
        rs = tl.load(row_scale_ptr + rows, mask=row_ok, other=0.0)
        y = acc * (rs * 128.0)[:, None]  # the 2^7 of the fp16 scales
        m = row_ok[:, None] & b_ok[None, :]
        if SPLIT:
            slot = ws_ptr + bs[None, :] * N + rows[:, None]
            tl.atomic_add(slot, y, mask=m, sem="relaxed")
            tl.debug_barrier()  # every thread's adds before the counter's release
            if tl.atomic_add(cnt_ptr + pid, 1, sem="acq_rel") == tl.num_programs(1) - 1:  # the last of them
                y = tl.atomic_add(slot, tl.zeros_like(y), mask=m, sem="acq_rel")  # the sums, read in L2
                y = tl.where(m, y, 0.0)  # (what a masked atomic returns is undefined: no GeGLU of garbage)
                tl.store(slot, tl.zeros_like(y), mask=m)  # and left zeroed for the next call
                tl.atomic_xchg(cnt_ptr + pid, 0, sem="relaxed")
                _store_y(y, y_ptr, rows, m, bs, b_ok, i0, inter, stride_yb, BLOCK_N, BLOCK_B, GLU)
        else:
            _store_y(y, y_ptr, rows, m, bs, b_ok, i0, inter, stride_yb, BLOCK_N, BLOCK_B, GLU)

    @triton.jit
    def _store_y(y, y_ptr, rows, m, bs, b_ok, i0, inter, stride_yb, BLOCK_N: tl.constexpr, BLOCK_B: tl.constexpr,
                 GLU: tl.constexpr):
        """y [BLOCK_N rows, BLOCK_B] into y_ptr [B, N]; GLU: rounded as the GEMV's output is, then the GeGLU
        kernel's arithmetic on each (gate, up) row pair, into [B, inter]."""
        dt = y_ptr.dtype.element_ty
        if GLU:
            g, u = tl.split(tl.permute(tl.reshape(y.to(dt).to(tl.float32), [BLOCK_N // 2, 2, BLOCK_B]), (0, 2, 1)))
            i = i0 + tl.arange(0, BLOCK_N // 2)
            tl.store(y_ptr + bs[None, :] * stride_yb + i[:, None], gelu_tanh_mul(g, u, dt).to(dt),
                     mask=(i < inter)[:, None] & b_ok[None, :])
        else:
            tl.store(y_ptr + bs[None, :] * stride_yb + rows[:, None], y.to(dt), mask=m)


# BLOCK_N, BLOCK_W, warps, K splits, BLOCK_B (activation rows a program): up to 16 rows (one program's dot
# padded to 16 columns), whole rows, and split over K for the GEMVs with few rows (256 rows a program: half
# the activation re-reads from L2 per weight byte of 128, which matters at 16 rows)
TC_CONFIGS = ((128, 16, 4, 1, 16), (256, 16, 8, 1, 16), (64, 16, 4, 1, 16), (128, 32, 4, 1, 16), (128, 16, 4, 2, 16),
              (64, 16, 4, 2, 16), (128, 16, 4, 4, 16), (64, 16, 4, 4, 16), (256, 16, 8, 8, 16))
# above 16 rows (the batch sweep past plan's ridge): each program decodes its weight tile for BLOCK_B rows, so
# the ~3.3 decode instructions per weight are paid once per BLOCK_B rows; a wider BLOCK_B pays them less often
# but holds more accumulators (BLOCK_N x BLOCK_B fp32 over the threads: 32-64 registers here), and each
# program converts and permutes its BLOCK_B x 128 activations a step (~3.5 instructions an element), which
# 256-row tiles spread over twice the weights (benchmarks/kernel_sass.py: instructions per weight and row
# 0.106 at 256 x 32, 0.060 at 256 x 64, 0.042 at 256 x 128 with 16 warps). For the 3,840-row GEMVs (o, down),
# whose tiles are few (15 of 256 rows), the same tiles split over K: ~120 programs on 132 SMs.
TC_WIDE_CONFIGS = ((128, 16, 4, 1, 32), (256, 16, 8, 1, 32), (128, 16, 4, 4, 32), (256, 16, 8, 8, 32),
                   (128, 16, 8, 1, 64), (256, 16, 8, 1, 64), (128, 16, 8, 2, 64), (128, 16, 8, 4, 64),
                   (128, 16, 8, 1, 128), (256, 16, 16, 1, 128), (128, 16, 8, 2, 128), (256, 16, 16, 4, 128))
MAX_ROWS = 256  # the most activation rows a call takes (the batches `llmsize measure` decodes)
ROW_BLOCK = 16  # up to this many rows, one program's dot takes them all


def configs_for(b: int) -> tuple[tuple[int, int, int, int, int], ...]:
    """The configurations timed for b rows: those of 16-row programs up to 16 rows; beyond, the wide ones whose
    BLOCK_B does not exceed b rounded up to a power of two (no program of rows that are all padding)."""
    if b <= ROW_BLOCK:
        return TC_CONFIGS
    return tuple(c for c in TC_WIDE_CONFIGS if c[4] <= triton.next_power_of_2(b))


def nvfp4_gemv_tc(x: torch.Tensor, w: Nvfp4Weight, out: torch.Tensor | None = None, block_n: int | None = None,
                  block_w: int | None = None, num_warps: int = 4, split_k: int = 1, glu: bool = False,
                  block_b: int | None = None, tuning: Tuning | None = None) -> torch.Tensor:
    """x [B, K] (B from 1 to MAX_ROWS; bf16, fp16 or fp32) -> [B, N] in x's dtype, on the tensor cores: one pass
    over the packed weights for up to block_b rows (16; above 16 rows a program takes 32, 64 or 128), the row
    blocks side by side; glu: w is gate | up, the result gelu_tanh(gate) * up [B, N / 2]. On a GPU without tiles
    given, the first call per shape and batch times configs_for(B) that divide it, kept by `tuning` (as
    nvfp4_gemv_words);
    block_w is a multiple of 4 words, split_k the number of programs sharing a row block's K."""
    check_rows(x, w, 1, MAX_ROWS)
    n, k = w.shape
    if glu and n % 2:
        raise ValueError(f"a gate | up weight has an even number of rows, got {n}")
    b, n_out = x.shape[0], n // 2 if glu else n
    x = x.contiguous()
    if out is None:
        out = torch.empty((b, n_out), dtype=x.dtype, device=x.device)
    kw, nblk, words, scales, use_asm, opts, pf = word_operands(w, x.device)

    def launch(bn, bw, warps, split, bb, mats=(words, scales, w.row_scale)):
        per = bn // 2 if glu else bn  # output rows a program
        kw_split = triton.cdiv(triton.cdiv(kw, split), bw) * bw  # whole tiles per split, the last one shorter
        split = triton.cdiv(kw, kw_split)
        ws, cnt = split_workspace(x.device, b, n) if split > 1 else (out, out)
        _gemv_tc[(triton.cdiv(n_out, per) * triton.cdiv(b, bb), split)](
            x, *mats, out, ws, cnt, b, n, k, kw, nblk, x.stride(0), out.stride(0), pf, kw_split, n // 2,
            BLOCK_N=bn, BLOCK_W=bw, BLOCK_B=bb,
            EVEN=n_out % per == 0 and kw % kw_split == 0 and kw_split % bw == 0, SPLIT=split > 1, GLU=glu,
            USE_ASM=use_asm, E4M3_CVT=e4m3_cvt(x.device), num_warps=warps, **opts)

    if block_n is not None or block_w is not None or block_b is not None or not use_asm:
        bw = block_w or (16 if use_asm else min(64, triton.next_power_of_2(kw)))
        if bw % 4 or bw < 4:
            raise ValueError("block_w must be a multiple of 4 words")
        if split_k < 1:
            raise ValueError("split_k must be at least 1")
        bb = block_b or (ROW_BLOCK if b <= ROW_BLOCK else 64)
        if bb < ROW_BLOCK or bb & (bb - 1):
            raise ValueError(f"block_b must be a power of two from {ROW_BLOCK}, got {bb}")
        launch(block_n or (128 if use_asm else interpreter_rows(n)), bw, num_warps, split_k, bb)
    else:
        fit = [c for c in configs_for(b) if n_out % (c[0] // 2 if glu else c[0]) == 0 and kw % (c[1] * c[3]) == 0]
        launch(*(tuning or Tuning()).best(("tc", n, k, b, glu), launch, fit or [configs_for(b)[0]],
                                          (words, scales, w.row_scale)))
    return out


def nvfp4_gemv_batch(x: torch.Tensor, w: Nvfp4Weight, out: torch.Tensor | None = None,
                     off: frozenset[str] = frozenset(), tuning: Tuning | None = None) -> torch.Tensor:
    """2-256 activation rows, one pass over the weights, on the tensor cores (nvfp4_gemv_tc). Where that
    kernel failed its self-check on the card and the user asked for fallbacks (`off`: "tc"; above 16 rows also
    "wide", the row blocks), up to 16 rows go to gemv.py's byte kernel (a weight pass per row), more to a dense
    dequantized copy (correct, but reading the weights as bf16: `llmsize measure` refuses such a batch before
    it starts)."""
    b = x.shape[0]
    if "tc" not in off and (b <= ROW_BLOCK or "wide" not in off):
        return nvfp4_gemv_tc(x, w, out=out, tuning=tuning)
    if b <= ROW_BLOCK:
        return nvfp4_gemv(x, w, out=out)
    y = torch.nn.functional.linear(x, w.dequantize(x.dtype))
    return y if out is None else out.copy_(y)


def chosen_kernels(tuning: Tuning, batch: int) -> dict[str, str]:
    """Per weight shape ("N x K", "GeGLU" where the gate | up epilogue ran) at this batch, the tile the run's
    tuning chose for the tensor-core kernel: weight rows, words a step, warps, K splits, and above 16 rows the
    activation rows a program ("b64")."""
    out = {}
    for (n, k, b, glu), (bn, bw, warps, split, bb) in tuning.chosen("tc").items():
        if b == batch:
            out[f"{n}x{k}" + (" GeGLU" if glu else "")] = (f"tc {bn}x{bw} w{warps} k{split}"
                                                          + (f" b{bb}" if bb != ROW_BLOCK else ""))
    return out
