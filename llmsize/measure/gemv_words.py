"""The word GEMV: NVFP4 x activations at batch 1 with two weights per fp16x2 instruction.

The packed codes are read as 32-bit words of eight (code i of a word in bits 4i..4i+3, the even column in the
low nibble). Marlin's unpack (vllm csrc/quantization/marlin/dequant.h), written for fp16 halves,
(q & 0x80008000) | ((q & 0x70007000) >> 3), puts a code into the high byte of an fp16 half as value x 2^-14;
applied with byte masks (0x80808080, 0x70707070) it does so for the high-nibble codes of all four bytes in
three instructions, and one and (bytes 1, 3) or one prmt (bytes 0, 2) makes each fp16x2 pair; q << 4 does the
same for the low nibbles. Each pair is scaled by 2^14 (exact, the subnormal codes 0 and 0.5 included) and
multiplied into an fp16x2 accumulator with one PTX fma.rn.f16x2 against the matching activations, prepacked
as fp16 pairs (pack_x_pairs; the fused kernels can write them in that layout directly). The two words of a
16-column block share one accumulator (eight products per fp16 lane: about 4e-4 relative error, a quarter of
bf16's output rounding), whose lanes go to fp32 and are scaled once per block (the E4M3 scale converted by
the hardware where it can). The compiled sm_90 loop spends 3.3-3.6 instructions per weight
(benchmarks/kernel_sass.py), under the ~3.9 an H200 SM can afford per weight at full bandwidth (the byte
kernel of gemv.py: ~9). Triton's CPU interpreter runs no PTX: there the same
arithmetic runs lane by lane in plain Triton (USE_ASM false), which is what the CPU tests check.
"""
from __future__ import annotations

import torch

from llmsize.measure import scratch
from llmsize.measure.launch import interpreter_rows, launch_opts, pdl_mode, prefetch_bytes
from llmsize.measure.nvfp4 import BLOCK, Nvfp4Weight
from llmsize.measure.tuner import Tuning

try:  # triton is optional on the CPU (as in gemv.py)
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

if triton is not None:
    from llmsize.measure.acts import gelu_tanh_mul, residual_norm_row, store_act
    from llmsize.measure.launch import pdl_entry, pdl_exit, prefetch_l2, prefetch_l2_each

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
    def unpack_word(q, USE_ASM: tl.constexpr):
        """A word's four fp16x2 pairs of codes, columns (3, 7), (2, 6), (1, 5), (0, 4). On the GPU as exact fp16
        values: three integer ops make the fp16 high bytes of the four high-nibble codes (sign | magnitude >> 3
        of Marlin's unpack, vllm csrc/quantization/marlin/dequant.h, on all four bytes at once), one and / one
        prmt split them into the pairs (3, 7) and (1, 5), q << 4 and the same for (2, 6) and (0, 4); each pair
        x 2^14 (exact, the subnormal codes included). Under the interpreter as value x 2^-14 (fma2_x4 scales)."""
        if USE_ASM:
            return tl.inline_asm_elementwise(
                asm="""{
                .reg .b32 r, t, q4, s;
                mov.b32 s, 0x74007400;
                and.b32 r, $4, 0x70707070;
                shr.b32 r, r, 3;
                and.b32 t, $4, 0x80808080;
                or.b32 t, t, r;
                and.b32 $0, t, 0xFF00FF00;
                mul.rn.f16x2 $0, $0, s;
                prmt.b32 $2, t, 0, 0x2404;
                mul.rn.f16x2 $2, $2, s;
                shl.b32 q4, $4, 4;
                and.b32 r, q4, 0x70707070;
                shr.b32 r, r, 3;
                and.b32 t, q4, 0x80808080;
                or.b32 t, t, r;
                and.b32 $1, t, 0xFF00FF00;
                mul.rn.f16x2 $1, $1, s;
                prmt.b32 $3, t, 0, 0x2404;
                mul.rn.f16x2 $3, $3, s;
                }""",
                constraints="=r,=r,=r,=r,r", args=[q], dtype=(tl.uint32, tl.uint32, tl.uint32, tl.uint32),
                is_pure=True, pack=1)
        else:  # the same bits in plain Triton for the CPU interpreter (which runs no PTX), each code as its E2M1
            # value x 2^-14: per byte the high-nibble code becomes the fp16 high byte sign | (magnitude << 1),
            # Marlin's (q & 0x80..) | ((q & 0x70..) >> 3) for all four bytes at once; masking bytes 1, 3 (or moving
            # bytes 0, 2 up, the GPU's prmt) gives the pairs of columns (3, 7) and (1, 5); q << 4 does the same for
            # the low nibbles, (2, 6) and (0, 4)
            t_hi = (q & 0x80808080) | ((q & 0x70707070) >> 3)
            q4 = q << 4
            t_lo = (q4 & 0x80808080) | ((q4 & 0x70707070) >> 3)
            return (t_hi & 0xFF00FF00, t_lo & 0xFF00FF00, (t_hi << 8) & 0xFF00FF00, (t_lo << 8) & 0xFF00FF00)

    @triton.jit
    def _fma2(p, x2, acc):
        """acc += p * x2 in two fp16 lanes: one fma.rn.f16x2."""
        return tl.inline_asm_elementwise(asm="fma.rn.f16x2 $0, $1, $2, $3;", constraints="=r,r,r,r",
                                         args=[p, x2, acc], dtype=tl.uint32, is_pure=True, pack=1)

    @triton.jit
    def fma2_x4(p37, p15, p26, p04, x0, x2, x1, x3, acc, USE_ASM: tl.constexpr):
        """acc += p37 x0, then p15 x2, p26 x1, p04 x3 (p from unpack_word, x from x_pairs): four fma.rn.f16x2 in
        two fp16 lanes. Under the interpreter the same roundings lane by lane (x 2^14 exact, then fp16), the
        accumulator's lanes unpacked once for the four and in one call: each @triton.jit call costs the
        interpreter a re-patch of triton.language, and with a call and an unpack per product
        `python -m pytest -n 0 tests/measure/test_gemv.py -k words` took 40.3 s against 32.4 s (2026-12-02)."""
        if USE_ASM:
            acc = _fma2(p37, x0, acc)
            acc = _fma2(p15, x2, acc)
            acc = _fma2(p26, x1, acc)
            return _fma2(p04, x3, acc)
        else:
            a_lo = (acc & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
            a_hi = (acc >> 16).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
            ps, xs = (p37, p15, p26, p04), (x0, x2, x1, x3)
            for k in tl.static_range(4):
                t, xx = ps[k], xs[k]
                v_lo = (t & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32) * 16384.0
                v_hi = (t >> 16).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32) * 16384.0
                x_lo = (xx & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
                x_hi = (xx >> 16).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
                a_lo = (v_lo * x_lo + a_lo).to(tl.float16).to(tl.float32)
                a_hi = (v_hi * x_hi + a_hi).to(tl.float16).to(tl.float32)
            return (a_lo.to(tl.float16).to(tl.uint16, bitcast=True).to(tl.uint32)
                    | (a_hi.to(tl.float16).to(tl.uint16, bitcast=True).to(tl.uint32) << 16))

    @triton.jit
    def _word_fma(q, x0, x1, x2, x3, acc, USE_ASM: tl.constexpr):
        """acc += the eight codes of word q times their activations, in two fp16 lanes: x_p holds the fp16 pair
        of columns (3 - p, 7 - p) (pack_x_pairs). About 19 instructions per eight weights once ptxas has
        scheduled the two asm blocks together (the same SASS as one block)."""
        p37, p26, p15, p04 = unpack_word(q, USE_ASM)
        return fma2_x4(p37, p15, p26, p04, x0, x2, x1, x3, acc, USE_ASM)

    @triton.jit
    def x_pairs(xrow, w0, lim, BLOCK_W: tl.constexpr, MASKED: tl.constexpr, WIDE: tl.constexpr):
        """The packed activations of words w0 .. w0 + BLOCK_W (four fp16 pairs a word, pack_x_pairs' layout), split
        into the even words' pairs xe0..xe3 and the odd words' xo0..xo3, each [BLOCK_W / 2] (MASKED: words >= lim
        read as 0). WIDE: one 16-byte load per word, split in registers; its layout is not the codes' one, so the
        pairs reach the threads that multiply them through shared memory (at 64 rows and 8 warps, 10 barriers a loop
        iteration in the sm_90 SASS, 4 at 32 rows and 4 warps). Else eight 4-byte loads, each already in the
        codes' layout; with the block scales loaded per word (_words_body), the loop has no barrier at all, for
        12-21 more instructions (benchmarks/kernel_sass.py, "x4" rows). Which is faster depends on whether the loop
        waits on shared memory or issues instructions: the tuner times both."""
        if WIDE:
            word = w0 + 2 * tl.arange(0, BLOCK_W // 2)[:, None, None] + tl.arange(0, 2)[None, :, None]
            ptrs = xrow + 4 * word + tl.arange(0, 4)[None, None, :]  # [BLOCK_W / 2, even | odd, pair]
            if MASKED:
                xx = tl.load(ptrs, mask=word < lim, other=0)
            else:
                xx = tl.load(ptrs)
            xa, xb = tl.split(tl.reshape(xx.to(tl.uint32, bitcast=True), [BLOCK_W // 2, 2, 2, 2]))  # pairs 0, 2 | 1, 3
            x0, x2 = tl.split(xa)
            x1, x3 = tl.split(xb)
            xe0, xo0 = tl.split(x0)
            xe1, xo1 = tl.split(x1)
            xe2, xo2 = tl.split(x2)
            xe3, xo3 = tl.split(x3)
            return xe0, xe1, xe2, xe3, xo0, xo1, xo2, xo3
        else:
            we = w0 + 2 * tl.arange(0, BLOCK_W // 2)  # the even words; word we + 1 is the odd one beside
            pe = xrow + 4 * we
            me, mo = we < lim, we + 1 < lim
            return (_pair(pe, me, MASKED), _pair(pe + 1, me, MASKED), _pair(pe + 2, me, MASKED),
                    _pair(pe + 3, me, MASKED), _pair(pe + 4, mo, MASKED), _pair(pe + 5, mo, MASKED),
                    _pair(pe + 6, mo, MASKED), _pair(pe + 7, mo, MASKED))

    @triton.jit
    def _pair(ptrs, ok, MASKED: tl.constexpr):
        """One activation pair per pointer as uint32 (x_pairs' 4-byte loads); MASKED: where `ok` is false, 0."""
        if MASKED:
            return tl.load(ptrs, mask=ok, other=0).to(tl.uint32, bitcast=True)
        else:
            return tl.load(ptrs).to(tl.uint32, bitcast=True)

    @triton.jit
    def block_scales(s, E4M3_CVT: tl.constexpr):
        """E4M3 block scales (bytes) as fp32. E4M3_CVT: the hardware's e4m3x2 -> f16x2 conversion (sm_89 and up,
        and the interpreter; one instruction per two scales, exact for every E4M3 value; 21 SASS instructions
        fewer a loop than the bits). Else (sm_80) the bits moved into an fp16, sign | exponent-mantissa >> 1:
        the value x 2^-8 exactly, subnormals included; the caller multiplies its result by 2^8."""
        if E4M3_CVT:
            return s.to(tl.float8e4nv, bitcast=True).to(tl.float32)
        else:
            bits = ((s & 0x80).to(tl.uint16) << 8) | ((s & 0x7F).to(tl.uint16) << 7)
            return bits.to(tl.float16, bitcast=True).to(tl.float32)

    @triton.jit
    def half2_sum(acc, USE_ASM: tl.constexpr):
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

    @triton.jit
    def _prefetch_rows(packed_ptr, scale_ptr, row0, nrows, kw, nblk, nbytes):
        """The first nbytes of rows row0.. (nrows of kw words, contiguous) and their scales towards L2. The bulk
        prefetch wants a 16-byte aligned start and a multiple of 16 bytes: the start is rounded down to 16 bytes
        from the (aligned) base, a few bytes of the row before at most."""
        w_at = row0 * kw // 4 * 4  # int32 words: 4 per 16 bytes
        wbytes = tl.minimum(nbytes, (row0 * kw - w_at + nrows * kw) * 4) // 16 * 16
        if wbytes > 0:
            prefetch_l2(packed_ptr + w_at, wbytes)
        s_at = row0 * nblk // 16 * 16  # bytes
        sbytes = tl.minimum(nbytes // 8, row0 * nblk - s_at + nrows * nblk) // 16 * 16  # the same rows' scales
        if sbytes > 0:
            prefetch_l2(scale_ptr + s_at, sbytes)

    @triton.jit
    def prefetch_block(packed_ptr, scale_ptr, pid_n, BLOCK_N: tl.constexpr, N, kw, nblk, nbytes):
        """Program pid_n's block of BLOCK_N whole rows (the last one shorter) towards L2."""
        row0 = pid_n * BLOCK_N
        _prefetch_rows(packed_ptr, scale_ptr, row0, tl.minimum(BLOCK_N, N - row0), kw, nblk, nbytes)

    @triton.jit
    def _prefetch_row_segments(packed_ptr, scale_ptr, rows, k_lo, nwords, kw, nblk, nbytes):
        """Split-K programs read a segment of each of their rows: each row's segment (up to nbytes) and its
        scales towards L2, one bulk prefetch per row, the starts rounded down to 16 bytes."""
        w_at = (rows * kw + k_lo) // 4 * 4
        prefetch_l2_each(packed_ptr + w_at, tl.minimum(nbytes, (rows * kw + k_lo - w_at + nwords) * 4) // 16 * 16)
        s_at = (rows * nblk + k_lo // 2) // 16 * 16
        prefetch_l2_each(scale_ptr + s_at, (rows * nblk + k_lo // 2 - s_at + nwords // 2) // 16 * 16)

    @triton.jit
    def tile_rows(pid_n, N, inter, BLOCK_N: tl.constexpr, GLU: tl.constexpr):
        """A row-block program's weight rows, which of them exist, and its first output row: BLOCK_N rows from
        pid_n * BLOCK_N, or (GLU, gate | up with N = 2 inter) BLOCK_N / 2 gate rows from i0 interleaved with
        the matching up rows."""
        r = tl.arange(0, BLOCK_N)
        i0 = pid_n * (BLOCK_N // 2)
        if GLU:
            rows = i0 + r // 2 + (r % 2) * inter  # gate row i, then up row i
            row_ok = i0 + r // 2 < inter
        else:
            rows = pid_n * BLOCK_N + r
            row_ok = rows < N
        return rows, row_ok, i0

    @triton.jit
    def prefetch_tile(packed_ptr, scale_ptr, pid_n, rows, row_ok, i0, N, inter, k_lo, k_hi, kw, nblk, prefetch,
                       BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, GLU: tl.constexpr):
        """Before the PDL wait (launch.py): the start of this program's weights towards L2 (they do not depend
        on the kernel before): each row's K segment (SPLIT), the gate and up row ranges (GLU), or the block."""
        if SPLIT:
            _prefetch_row_segments(packed_ptr, scale_ptr, tl.where(row_ok, rows, 0), k_lo, k_hi - k_lo, kw,
                                   nblk, prefetch // BLOCK_N)
        elif GLU:
            nrows = tl.minimum(BLOCK_N // 2, inter - i0)
            _prefetch_rows(packed_ptr, scale_ptr, i0, nrows, kw, nblk, prefetch // 2)
            _prefetch_rows(packed_ptr, scale_ptr, inter + i0, nrows, kw, nblk, prefetch // 2)
        else:
            prefetch_block(packed_ptr, scale_ptr, pid_n, BLOCK_N, N, kw, nblk, prefetch)

    @triton.jit
    def _epilogue(y, y_ptr, pack_ptr, b, rows, row_ok, i0, N, inter, stride_yb, BLOCK_N: tl.constexpr,
                  GLU: tl.constexpr, PACK: tl.constexpr):
        dt = y_ptr.dtype.element_ty
        if GLU:  # rounded as the GEMV's output is, then the GeGLU kernel's arithmetic
            g, u = tl.split(tl.reshape(y.to(dt).to(tl.float32), [BLOCK_N // 2, 2]))
            i = i0 + tl.arange(0, BLOCK_N // 2)
            store_act(y_ptr + b * stride_yb, pack_ptr + b * inter, i, gelu_tanh_mul(g, u, dt), i < inter, PACK)
        else:
            store_act(y_ptr + b * stride_yb, pack_ptr + b * N, rows, y.to(dt).to(tl.float32), row_ok, PACK)

    @triton.jit
    def _norm_after(y_ptr, b, N, stride_yb, nx_ptr, w1_ptr, sc_ptr, w2_ptr, xo_ptr, h_ptr, hp_ptr, gcnt_ptr, eps,
                    BLOCK_D: tl.constexpr, HAS_S: tl.constexpr, NPACK: tl.constexpr):
        """After a program has stored its rows of y: the last row block of batch row b to get here (a counter
        per row, acq_rel, re-zeroed) has the whole row and applies the residual add + RMSNorm to it (the
        residual_norm kernel's arithmetic), reading y from L2."""
        tl.debug_barrier()  # every thread's stores of y before the counter's release
        g = gcnt_ptr + b
        if tl.atomic_add(g, 1, sem="acq_rel") == tl.num_programs(0) - 1:
            residual_norm_row(nx_ptr + b * N, y_ptr + b * stride_yb, w1_ptr, sc_ptr, w2_ptr, xo_ptr + b * N,
                              h_ptr + b * N, hp_ptr + b * N, N, eps, BLOCK_D, True, HAS_S, NPACK, True)
            tl.atomic_xchg(g, 0, sem="relaxed")

    def _words_body(x2_ptr, packed_ptr, scale_ptr, row_scale_ptr, y_ptr, pack_ptr, ws_ptr, cnt_ptr, nx_ptr, w1_ptr,
                    sc_ptr, w2_ptr, xo_ptr, h_ptr, hp_ptr, gcnt_ptr, N, kw, nblk, stride_yb, prefetch, inter,
                    kw_split, eps, BLOCK_N: tl.constexpr, BLOCK_W: tl.constexpr, EVEN: tl.constexpr,
                    USE_ASM: tl.constexpr, E4M3_CVT: tl.constexpr, GLU: tl.constexpr, PACK: tl.constexpr,
                    STAGES: tl.constexpr, X_WIDE: tl.constexpr,
                    SPLIT_K: tl.constexpr, NORM: tl.constexpr, HAS_S: tl.constexpr, NPACK: tl.constexpr,
                    BLOCK_D: tl.constexpr, PDL: tl.constexpr):
        """Batch-1 CUDA-core GEMV on 32-bit words (_word_fma: 19 instructions per eight weights), the two words
        of a 16-column block in one fp16x2 accumulator, then fp32 and the block's scale; x comes prepacked as
        fp16 pairs (pack_x_pairs). 3.3-3.6 instructions per weight in the sm_90 SASS (kernel_sass.py).

        STAGES > 1: the loop's loads pipelined through shared memory (cp.async), more bytes in flight per
        program. SPLIT_K > 1: program (n, b, z) covers K words [z kw_split, (z + 1) kw_split) of its rows and
        adds its partial sums into the fp32 workspace ws (atomics); the last of the SPLIT_K programs of a row
        block (a counter per row block, acq_rel) takes the sums, zeroes ws and the counter for the next call,
        and runs the epilogue. For the GEMVs with few rows (o, down: 3,840), where 120 programs of whole rows
        cannot keep enough loads in flight to fill the H200's bandwidth.

        GLU: the weight is gate | up (N = 2 inter rows); a program takes BLOCK_N / 2 gate rows and the matching
        up rows, interleaved, and writes gelu_tanh(gate) * up ([B, inter]; PACK: in this kernel's input layout,
        for the down projection), the GeGLU kernel folded into this one's epilogue.

        NORM (o and down projections): once the whole output row is stored, its last program applies the
        residual add + RMSNorm of the row (x' = x + rmsnorm(y) * w1 [* s] into xo, h = rmsnorm(x') * w2 into h,
        or packed into hp for the next word GEMV): the residual_norm kernel folded into this one."""
        pid_n = tl.program_id(0)
        b = tl.program_id(1)
        kz = tl.program_id(2)
        rows, row_ok, i0 = tile_rows(pid_n, N, inter, BLOCK_N, GLU)
        k_lo = kz * kw_split
        k_hi = tl.minimum(kw, k_lo + kw_split)
        if PDL == 2:  # see launch.py: weights towards L2, then (pdl_entry) wait for the kernel before; the next
            # kernel is let in after the loop
            prefetch_tile(packed_ptr, scale_ptr, pid_n, rows, row_ok, i0, N, inter, k_lo, k_hi, kw, nblk, prefetch,
                           BLOCK_N, SPLIT_K > 1, GLU)
        pdl_entry(PDL, False)
        jj = tl.arange(0, BLOCK_W)
        jb = tl.arange(0, BLOCK_W // 2)
        acc = tl.zeros([BLOCK_N, BLOCK_W // 2], dtype=tl.float32)
        xrow = x2_ptr + b * kw * 4
        for w0 in tl.range(k_lo, k_hi, BLOCK_W, num_stages=STAGES):
            j = w0 + jj
            blk = w0 // 2 + jb
            # X_WIDE false: each word's block scale loaded beside it (the two words of a block read the same byte,
            # out of L1) and split as the words are, so that it lands in the block sums' layout: with x_pairs'
            # 4-byte loads, no shared memory and no barrier in the loop (kernel_sass.py)
            s_ptrs = scale_ptr + rows[:, None] * nblk + (blk[None, :] if X_WIDE else (j // 2)[None, :])
            if EVEN:  # weights are read once per step: first out of L2, before activations and the cache
                q = tl.load(packed_ptr + rows[:, None] * kw + j[None, :], eviction_policy="evict_first")
                s = tl.load(s_ptrs, eviction_policy="evict_first")
                xe0, xe1, xe2, xe3, xo0, xo1, xo2, xo3 = x_pairs(xrow, w0, k_hi, BLOCK_W, False, X_WIDE)
            else:
                m = row_ok[:, None] & (j < k_hi)[None, :]
                q = tl.load(packed_ptr + rows[:, None] * kw + j[None, :], mask=m, other=0,
                            eviction_policy="evict_first")
                s = tl.load(s_ptrs, mask=row_ok[:, None] & (2 * blk < k_hi)[None, :] if X_WIDE else m, other=0,
                            eviction_policy="evict_first")
                xe0, xe1, xe2, xe3, xo0, xo1, xo2, xo3 = x_pairs(xrow, w0, k_hi, BLOCK_W, True, X_WIDE)
            if not X_WIDE:
                s, _ = tl.split(tl.reshape(s, [BLOCK_N, BLOCK_W // 2, 2]))
            # the two words of a 16-column block in one fp16x2 accumulator (eight products per lane), then fp32
            qe, qo = tl.split(tl.reshape(q.to(tl.uint32, bitcast=True), [BLOCK_N, BLOCK_W // 2, 2]))
            h = _word_fma(qe, xe0[None, :], xe1[None, :], xe2[None, :], xe3[None, :],
                          tl.zeros([BLOCK_N, BLOCK_W // 2], dtype=tl.uint32), USE_ASM)
            h = _word_fma(qo, xo0[None, :], xo1[None, :], xo2[None, :], xo3[None, :], h, USE_ASM)
            ws = half2_sum(h, USE_ASM)  # per block
            acc += ws * block_scales(s, E4M3_CVT)
        pdl_exit(PDL)  # this program's weights are read: the next kernel may start
        rs = tl.load(row_scale_ptr + rows, mask=row_ok, other=0.0)
        y = tl.sum(acc, axis=1) * (rs if E4M3_CVT else rs * 256.0)  # (see block_scales)
        if SPLIT_K > 1:
            slot = ws_ptr + b * N + rows
            tl.atomic_add(slot, y, mask=row_ok, sem="relaxed")
            tl.debug_barrier()  # every thread's adds before the counter's release
            cnt = cnt_ptr + b * tl.num_programs(0) + pid_n
            if tl.atomic_add(cnt, 1, sem="acq_rel") == SPLIT_K - 1:  # the last of this row block's programs
                y = tl.atomic_add(slot, tl.zeros_like(y), mask=row_ok, sem="acq_rel")  # the sums, read in L2
                y = tl.where(row_ok, y, 0.0)  # (what a masked atomic returns is undefined: no GeGLU of garbage)
                tl.store(slot, tl.zeros_like(y), mask=row_ok)  # and left zeroed for the next call
                tl.atomic_xchg(cnt, 0, sem="relaxed")
                _epilogue(y, y_ptr, pack_ptr, b, rows, row_ok, i0, N, inter, stride_yb, BLOCK_N, GLU, PACK)
                if NORM:
                    _norm_after(y_ptr, b, N, stride_yb, nx_ptr, w1_ptr, sc_ptr, w2_ptr, xo_ptr, h_ptr, hp_ptr,
                                gcnt_ptr, eps, BLOCK_D, HAS_S, NPACK)
        else:
            _epilogue(y, y_ptr, pack_ptr, b, rows, row_ok, i0, N, inter, stride_yb, BLOCK_N, GLU, PACK)
            if NORM:
                _norm_after(y_ptr, b, N, stride_yb, nx_ptr, w1_ptr, sc_ptr, w2_ptr, xo_ptr, h_ptr, hp_ptr, gcnt_ptr,
                            eps, BLOCK_D, HAS_S, NPACK)

    _gemv_words = triton.jit(_words_body)


# (BLOCK_N, BLOCK_W, warps, STAGES, SPLIT_K): what the per-shape timing chooses among, for the configs that
# divide the shape. Stage 1 / no split for the wide GEMVs (gate_up: 960 programs); pipelined loads and K split
# for the narrow ones (o, down: 3,840 rows, 120 programs of 32 whole rows) to keep enough bytes in flight: on
# the H200 a plain Triton read needed ~16 programs per SM to reach 90% (shared/reference/h200-measurements.md:
# 47-90% over 2-16). Splits chosen to divide Gemma 4 12B's K: 480 words (3,840), 512 / 1,024 (o), 1,920 (down).
# The 128-row tiles (16 KB of codes a step, three steps in flight through shared memory) since the first H200
# run (2026-12-04): at 8 KB a step the kernel read 11-28% of the bandwidth and issued a quarter of the
# instructions the SMs could (benchmarks/RESULTS.md); more bytes in flight is the first remedy to time (the
# `ncu` stage of measure_gpu.sh says whether it waits on memory).
# The last field (X_WIDE): each word's activations in one 16-byte load (True) or in four 4-byte loads with the block
# scales loaded per word (False, the one-stage tiles only: there the wide load costs 4-10 barriers a loop
# iteration, x_pairs, where the narrow loop has none; with stages the loads pass through shared memory either way).
# The one-stage 64-row tile was the fastest gate | up tile under ncu on 2026-12-04 (35.5 us, 40.9% of DRAM
# bandwidth, issue slots 48% busy) and has 10 of those barriers.
# The one-stage splits of 5 and 15 (K = 3,840: 480 words, 3 loop iterations a program or 1): the small GEMVs took
# ~15 us more than their bytes on the H200 (qkv, 17.7 MB, 19.5 us; 2026-12-04), about what 15 dependent iterations
# of one program per SM cost (64x32 w8 s3 k1 was kept there: 128 programs); the splits the tiles offered K = 3,840
# before were 1 and 3 (a split must divide the words by whole tiles).
WORDS_CONFIGS = ((32, 32, 4, 1, 1, True), (64, 32, 8, 1, 1, True), (32, 32, 4, 1, 1, False), (64, 32, 8, 1, 1, False),
                 (32, 32, 4, 3, 1, True), (64, 32, 8, 3, 1, True), (32, 32, 4, 3, 3, True), (32, 32, 4, 3, 4, True),
                 (32, 64, 4, 3, 2, True), (32, 32, 4, 3, 8, True), (32, 32, 4, 3, 12, True), (16, 32, 4, 3, 4, True),
                 (128, 32, 8, 3, 1, True), (128, 32, 8, 3, 4, True), (32, 32, 4, 1, 5, True), (32, 32, 4, 1, 15, True))


def split_workspace(device, b: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The fp32 partial sums [B, N] and row-block counters of the split-K GEMV (scratch: left zeroed by each
    call's last programs; shared by the GEMVs of the same B and N, which the step runs one after another)."""
    return (scratch.zeroed("split-K sums", device, (b, n), torch.float32),
            scratch.zeroed("split-K counters", device, (b, triton.cdiv(n, 16)), torch.int32))


def check_rows(x: torch.Tensor, w: Nvfp4Weight, lo: int, hi: int) -> None:
    """What a batched word-kernel launcher refuses: no triton, K not whole blocks, x not [lo..hi rows, K]."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    k = w.shape[1]
    if k % BLOCK:
        raise ValueError(f"K must be a multiple of {BLOCK}, got {k}")
    if x.dim() != 2 or x.shape[1] != k or not lo <= x.shape[0] <= hi:
        raise ValueError(f"x must be [{lo} <= B <= {hi}, {k}], got {tuple(x.shape)}")


def word_operands(w: Nvfp4Weight, device) -> tuple:
    """What the word kernels' launchers share: K in words and in blocks, the codes as int32 words, the scales as
    bytes, whether to run the PTX (on a GPU; the interpreter runs its plain-Triton stand-ins), the PDL launch
    options, and the L2 prefetch per program (the bulk prefetch wants 16-byte aligned bases: the kernels round
    each program's start down to 16 bytes from the base; fresh allocations are aligned, a view may not be)."""
    k = w.shape[1]
    words, scales = w.packed.view(torch.int32), w.scales.view(torch.uint8)
    pf = prefetch_bytes(device) if words.data_ptr() % 16 == 0 and scales.data_ptr() % 16 == 0 else 0
    return k // 8, k // 16, words, scales, device.type == "cuda", launch_opts(pdl_mode(device)), pf


def e4m3_cvt(device) -> bool:
    """Whether the word kernels convert block scales with the e4m3 conversion instruction (block_scales): on
    GPUs of compute capability 8.9 and up, and under the interpreter."""
    return device.type != "cuda" or torch.cuda.get_device_capability(device) >= (8, 9)


def pack_x_pairs(x: torch.Tensor) -> torch.Tensor:
    """x [B, K] -> [B, K/8, 4] uint32 (as int32): the fp16 pairs the word kernel multiplies its codes by."""
    b, k = x.shape
    out = torch.empty((b, k // 8, 4), dtype=torch.int32, device=x.device)
    _pack_x_kernel[(b, triton.cdiv(k // 8, 256))](x, out, k, x.stride(0), BLOCK=256)
    return out


def nvfp4_gemv_words(x: torch.Tensor | None, w: Nvfp4Weight, out: torch.Tensor | None = None,
                     block_n: int | None = None, block_w: int | None = None, num_warps: int = 4,
                     x2: torch.Tensor | None = None, out_dtype: torch.dtype | None = None, glu: bool = False,
                     pack: bool = False, stages: int = 1, split_k: int = 1, norm: tuple | None = None,
                     off: frozenset[str] = frozenset(), tuning: Tuning | None = None, x_wide: bool = True):
    """Batch-1 CUDA-core GEMV that decodes two codes per instruction (fp16x2 PTX on the GPU, the same arithmetic
    in plain Triton under the CPU interpreter); one weight pass per batch row. x [B, K] -> [B, N]; or x None and
    x2 the activations already packed ([B, K/8, 4], pack_x_pairs' layout, as the fused kernels can write them).

    glu: w is gate | up and the result gelu_tanh(gate) * up [B, N / 2], as Gemma's MLP computes it. pack: the
    result in the packed input layout ([B, N' / 8, 4] int32) instead, for a word GEMV after this one.

    norm = (x, w_post, w_next, eps, scalar, pack_h): the output y then feeds the residual add + RMSNorm of
    fused.residual_norm inside this kernel, and the result is (x' [B, N], h) with h [B, N] or, pack_h, packed.

    On a GPU without tiles given, the first call per shape times the configurations that divide it and `tuning`
    (the run's, tuner.Tuning) keeps the fastest (CUDA events, outside any graph capture); `off` names the
    optional paths ("stages", "split", "x4") whose configurations are not to be timed (their self-check failed on the
    card). With tiles given, x_wide False loads the activations 4 bytes at a time (x_pairs)."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    n, k = w.shape
    if k % BLOCK:
        raise ValueError(f"K must be a multiple of {BLOCK}, got {k}")
    if glu and n % 2:
        raise ValueError(f"a gate | up weight has an even number of rows, got {n}")
    n_out = n // 2 if glu else n
    if pack and n_out % 8:
        raise ValueError(f"a packed output needs a multiple of 8 columns, got {n_out}")
    if norm is not None and (glu or pack):
        raise ValueError("the residual norm follows a plain GEMV output (not glu, not pack)")
    if x2 is None:
        if x is None or x.dim() != 2 or x.shape[1] != k:
            raise ValueError(f"x must be [B, {k}], got {None if x is None else tuple(x.shape)}")
        x2 = pack_x_pairs(x.contiguous())
    elif tuple(x2.shape[1:]) != (k // 8, 4):
        raise ValueError(f"x2 must be [B, {k // 8}, 4], got {tuple(x2.shape)}")
    b = x2.shape[0]
    if out is None:
        out = torch.empty((b, n_out), dtype=out_dtype or (x.dtype if x is not None else torch.bfloat16),
                          device=x2.device)
    packed_out = torch.empty((b, n_out // 8, 4), dtype=torch.int32, device=x2.device) if pack else None
    pack_view = packed_out.view(torch.float16) if pack else out
    kw, nblk, words, scales, use_asm, opts, pf = word_operands(w, x2.device)
    cvt = e4m3_cvt(x2.device)
    if norm is not None:
        nx, w_post, w_next, eps, scalar, pack_h = norm
        x_out, h = torch.empty_like(nx), torch.empty_like(nx)
        h_packed = torch.empty((b, n // 8, 4), dtype=torch.int32, device=x2.device) if pack_h else None
        gcnt = _norm_counters(x2.device, b)
        norm_args = (nx, w_post, scalar if scalar is not None else w_post, w_next, x_out, h,
                     h_packed.view(torch.float16) if pack_h else h, gcnt)
        norm_consts = dict(NORM=True, HAS_S=scalar is not None, NPACK=bool(pack_h), BLOCK_D=triton.next_power_of_2(n))
    else:
        eps = 0.0
        norm_args = (out,) * 8
        norm_consts = dict(NORM=False, HAS_S=False, NPACK=False, BLOCK_D=16)


    def launch(bn, bw, warps, stages, split, x_wide=True, mats=(words, scales, w.row_scale)):
        rows = n_out if glu else n  # gate | up: a program takes bn / 2 of each
        per = bn // 2 if glu else bn
        kw_split = triton.cdiv(triton.cdiv(kw, split), bw) * bw  # whole tiles per split, the last one shorter
        split = triton.cdiv(kw, kw_split)
        even = rows % per == 0 and kw % kw_split == 0 and kw_split % bw == 0
        ws, cnt = split_workspace(x2.device, b, n) if split > 1 else (out, out)
        _gemv_words[(triton.cdiv(rows, per), b, split)](
            x2, *mats, out, pack_view, ws, cnt, *norm_args, n, kw, nblk, out.stride(0), pf, n_out, kw_split, eps,
            BLOCK_N=bn, BLOCK_W=bw, EVEN=even, USE_ASM=use_asm, E4M3_CVT=cvt, GLU=glu, PACK=pack, STAGES=stages,
            X_WIDE=x_wide, SPLIT_K=split, **norm_consts, num_warps=warps, **opts)

    if block_n is not None or block_w is not None or not use_asm:
        # the GPU's fallback tile; under the interpreter one program (its cost is per program and operation)
        bn = block_n or (32 if use_asm else interpreter_rows(n))
        bw = block_w or (16 if use_asm else min(64, max(2, triton.next_power_of_2(kw))))
        if bw % 2 or bw < 2:
            raise ValueError("block_w must be an even number of words")
        if split_k < 1 or stages < 1:
            raise ValueError("split_k and stages must be at least 1")
        launch(bn, bw, num_warps, stages, split_k, x_wide)
    else:
        key = ("words", n, k, b, glu, pack, norm is not None, "stages" in off, "split" in off, "x4" in off)
        per = (lambda c: c[0] // 2) if glu else (lambda c: c[0])
        configs = [c for c in WORDS_CONFIGS if n_out % per(c) == 0 and kw % (c[1] * c[4]) == 0
                   and not (c[3] > 1 and "stages" in off) and not (c[4] > 1 and "split" in off)
                   and not (not c[5] and "x4" in off)]
        launch(*(tuning or Tuning()).best(key, launch, configs or [(32, 16, 4, 1, 1, True)],
                                          (words, scales, w.row_scale)))
    if norm is not None:
        return x_out, (h_packed if norm[5] else h)
    return packed_out if pack else out


def chosen_tiles(tuning: Tuning) -> dict[str, str]:
    """Per weight shape ("N x K"; "GeGLU" where the gate | up epilogue ran, "norm" where the residual norm did), the
    tile the run's tuning chose for the batch-1 word kernel: weight rows, words a step, warps, load stages, K
    splits, and "x4" where the activations came in 4-byte loads."""
    out = {}
    for (n, k, b, glu, _pack, norm, *_off), (bn, bw, warps, stages, split, x_wide) in tuning.chosen("words").items():
        if b == 1:
            out[f"{n}x{k}" + (" GeGLU" if glu else "") + (" norm" if norm else "")] = (
                f"words {bn}x{bw} w{warps} s{stages} k{split}" + ("" if x_wide else " x4"))
    return out


def _norm_counters(device, b: int) -> torch.Tensor:
    """One counter per batch row for the residual-norm epilogue (scratch: re-zeroed by each call)."""
    return scratch.zeroed("residual-norm counters", device, (b,), torch.int32)


# the word kernel's optional paths, each self-checked on the card (llmsize.measure.selfcheck.words_kernel_check);
# with --fallback one that fails there is left out (`off`: its configurations not timed, or for the batch's rows the
# byte kernel instead of the tensor-core one) instead of giving up the whole kernel
WORDS_FEATURES = {"stages": "pipelined loads", "split": "split over K", "x4": "activations in 4-byte loads",
                  "tc": "2-16 rows on the tensor cores",
                  "wide": "17-256 rows on the tensor cores"}
BATCH_FEATURES = ("tc", "wide")  # used only at 2 rows and more: checked only when a run decodes a batch
WIDE_FEATURES = ("wide",)  # used only above 16 rows: checked only when a run decodes such a batch
