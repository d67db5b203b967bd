"""The work between the GEMVs of one Gemma 4 decode step, in four Triton kernels instead of ~100 small ones.

Per layer the eager step runs norms, RoPE, cache writes, a masked softmax attention, residual adds and the
GeGLU as separate torch ops: about a hundred kernels, each a few microseconds of launch and tail, where the
four GEMVs of a sliding layer move their bytes in ~30 us on an H200 (shared/reference/fast-decode-notes.md:
"few kernels per layer"). Here a layer is
    qkv GEMV -> attention (split over the cache) -> combine -> o GEMV -> residual_norm
    -> gate_up GEMV -> geglu -> down GEMV -> residual_norm (which also applies the next layer's input norm)
Each kernel reads its operands once and rounds where the eager step rounds (to the activation dtype after a
norm, after an add), so on float32 weights it matches the eager step to float32 rounding.

- attention: one program per (sequence, KV head, slice of the cache). From the raw qkv projection it applies
  RMSNorm with q_norm to the group's query heads and RoPE (rotate-half, the position's cos/sin row read from
  the device position, no host sync); the program whose slice holds this position's slot also norms and
  rotates K, v_norms V, writes both there and uses them from registers (no other program reads that slot).
  Then the query heads, padded to 16 rows, against BLOCK_S cache rows at a time on the tensor cores, online
  softmax in fp32, partial (max, sum, weighted V) written out; combine folds the slices per query head
  (flash-decoding). Scale 1.0 (Gemma 4). Where a KV head's partials are small (sliding layers: 64 KiB), the
  last of its slices to finish does the combine itself (a counter per KV head) and no combine kernel runs.
- residual_norm: x = (x + rmsnorm(o) * w_post) * scalar, then h = rmsnorm(x) * w_next, one program per row.
- geglu: gelu_tanh(gate) * up.
- embed_norm: the step's first kernel, x = embedding[token] * sqrt(hidden) and the first layer's input norm.
With the word GEMV at batch 1, residual_norm and geglu are not launched: the o and down GEMVs apply the
residual norm in their epilogue (its last program, acts.residual_norm_row) and the gate | up GEMV the GeGLU
(gemv_words, norm= and glu=True): five kernels per sliding layer (one of them here), six per full layer (two),
and with embed_norm, the lm_head GEMM (cuBLAS) and the soft-cap and token kernel (logits.py) 251 per Gemma 4 12B
token.
"""
from __future__ import annotations

import torch

from llmsize.measure import scratch
from llmsize.measure.launch import PDL_EARLY, launch_opts, pdl_mode

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

if triton is not None:
    from llmsize.measure.acts import gelu_tanh_mul, norm_row_store, residual_norm_row, store_act
    from llmsize.measure.launch import pdl_entry, prefetch_l2

ATTN_BLOCK_S = 32  # cache rows per tensor-core step
ATTN_PROGRAMS = 256  # cache slices aimed at per attention call under the interpreter (GPU: attn_programs)
FOLD_COMBINE_BYTES = 128 * 1024  # a group's partials the last slice combines itself (attention's fold_combine)
ATTN_WARPS = 8  # sm_90: 128 registers (sliding) / 255 (full, no spills) a thread; sliding at 4: 229
# (python tests/measure/compile_kernels.py --registers)


def available() -> bool:
    return triton is not None


if triton is not None:

    @triton.jit
    def _rms_rope(xa, xb, w_ptr, cos, sin, i, HALF: tl.constexpr, eps, dt: tl.constexpr, HAS_W: tl.constexpr,
                  ROPE: tl.constexpr):
        """RMSNorm of rows split in halves xa, xb [R, HALF] (fp32), times the weight, rounded to dt where the
        eager step rounds; then RoPE (rotate-half) with the position's cos / sin [HALF]."""
        r = 1.0 / tl.sqrt((tl.sum(xa * xa, 1) + tl.sum(xb * xb, 1)) / (2 * HALF) + eps)
        ya, yb = xa * r[:, None], xb * r[:, None]
        if HAS_W:
            ya = ya * tl.load(w_ptr + i)[None, :]
            yb = yb * tl.load(w_ptr + HALF + i)[None, :]
        ya = ya.to(dt).to(tl.float32)
        yb = yb.to(dt).to(tl.float32)
        if ROPE:  # the eager step rounds the norm's output before rotating it
            ya, yb = ya * cos[None, :] - yb * sin[None, :], yb * cos[None, :] + ya * sin[None, :]
            ya = ya.to(dt).to(tl.float32)
            yb = yb.to(dt).to(tl.float32)
        return ya, yb

    @triton.jit
    def _load_block(kc_ptr, vc_ptr, base, s, i, stride_cs, ok, HALF: tl.constexpr):
        """BLOCK_S cache rows s of K and V, in halves, all four loads issued before any is used."""
        kt = kc_ptr + base + s[:, None] * stride_cs + i[None, :]
        vt = vc_ptr + base + s[:, None] * stride_cs + i[None, :]
        k1 = tl.load(kt, mask=ok[:, None], other=0.0)
        k2 = tl.load(kt + HALF, mask=ok[:, None], other=0.0)
        v1 = tl.load(vt, mask=ok[:, None], other=0.0)
        v2 = tl.load(vt + HALF, mask=ok[:, None], other=0.0)
        return k1, k2, v1, v2

    @triton.jit
    def _attend_block(qa, qb, k1, k2, v1, v2, ok, m, lsum, acc_a, acc_b, IEEE: tl.constexpr):
        """One block of the online softmax: scores of the queries (halves qa, qb) against rows k (halves),
        masked where not ok, folded into the running max m, sum lsum and weighted values acc (halves)."""
        dt = k1.dtype
        if IEEE:
            sc = tl.dot(qa, tl.trans(k1), input_precision="ieee") + tl.dot(qb, tl.trans(k2), input_precision="ieee")
        else:
            sc = tl.dot(qa, tl.trans(k1)) + tl.dot(qb, tl.trans(k2))
        sc = tl.where(ok[None, :], sc, float("-inf"))
        m_new = tl.maximum(m, tl.max(sc, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # an all-empty block: no NaN from -inf - -inf
        p = tl.exp(sc - m_use[:, None])
        alpha = tl.exp(m - m_use)
        pd = p.to(dt)
        if IEEE:
            pv1 = tl.dot(pd, v1, input_precision="ieee")
            pv2 = tl.dot(pd, v2, input_precision="ieee")
        else:
            pv1 = tl.dot(pd, v1)
            pv2 = tl.dot(pd, v2)
        return m_new, lsum * alpha + tl.sum(p, 1), acc_a * alpha[:, None] + pv1, acc_b * alpha[:, None] + pv2

    @triton.jit
    def _attn_split_kernel(qkv_ptr, qn_ptr, kn_ptr, cos_ptr, sin_ptr, pos_ptr, kc_ptr, vc_ptr, acc_ptr, ml_ptr,
                           cnt_ptr, out_ptr, pack_ptr, stride_out, stride_qkv, stride_cb, stride_ch, stride_cs, k_off,
                           v_off, slots, nsplit, eps, KVH: tl.constexpr, G: tl.constexpr, HALF: tl.constexpr,
                           SPLIT: tl.constexpr, BLOCK_S: tl.constexpr, IEEE: tl.constexpr, PREFETCH: tl.constexpr,
                           COMBINE: tl.constexpr, CHUNK: tl.constexpr, PACK: tl.constexpr, PDL: tl.constexpr):
        bg = tl.program_id(0)
        sp = tl.program_id(1)
        b = bg // KVH
        g = bg % KVH
        HD: tl.constexpr = 2 * HALF
        dt = kc_ptr.dtype.element_ty
        base = b * stride_cb + g * stride_ch
        i = tl.arange(0, HALF)
        if PREFETCH:  # the slice's cache rows (written by earlier steps) towards L2 while the kernel before runs
            rows = tl.minimum(SPLIT, slots - sp * SPLIT)
            nbytes = rows * stride_cs * (dt.primitive_bitwidth // 8)
            prefetch_l2(kc_ptr + base + sp * SPLIT * stride_cs, nbytes)
            prefetch_l2(vc_ptr + base + sp * SPLIT * stride_cs, nbytes)
        # Before waiting for the kernel before (the qkv GEMV), the slice's first block of K and V into registers:
        # cache rows are written only by this layer's attention, in earlier steps (complete), and in this step
        # only this position's slot, by this kernel, whose row is replaced from registers below; the position
        # itself moves only at the end of a step. A sliding layer's slice is one block, so its whole read is
        # in flight during the wait.
        pos = tl.load(pos_ptr)
        slot = pos % slots
        s = sp * SPLIT + tl.arange(0, BLOCK_S)
        ok = (s < slots) & (s <= pos)  # ring slots past the position are not written yet
        k1, k2, v1, v2 = _load_block(kc_ptr, vc_ptr, base, s, i, stride_cs, ok, HALF)
        pdl_entry(PDL)
        cos = tl.load(cos_ptr + pos * HD + i)  # the second half of the row repeats the first
        sin = tl.load(sin_ptr + pos * HD + i)
        row = qkv_ptr + b * stride_qkv
        # the group's query heads (padded to the 16 rows of a tensor-core tile): q_norm, RoPE, in halves
        gi = tl.arange(0, 16)
        qrow = gi < G
        qp = row + (g * G + gi)[:, None] * HD + i[None, :]
        qa, qb = _rms_rope(tl.load(qp, mask=qrow[:, None], other=0.0).to(tl.float32),
                           tl.load(qp + HALF, mask=qrow[:, None], other=0.0).to(tl.float32),
                           qn_ptr, cos, sin, i, HALF, eps, dt, True, True)
        qa = qa.to(dt)
        qb = qb.to(dt)
        # this position's K (k_norm, RoPE) and V (v_norm): written to its slot by the program whose slice
        # holds it, and used by that program from registers (no program reads the slot from memory this step)
        one = tl.arange(0, 1)
        kp = row + k_off + g * HD + one[:, None] * 0 + i[None, :]
        ka, kb = _rms_rope(tl.load(kp).to(tl.float32), tl.load(kp + HALF).to(tl.float32), kn_ptr, cos, sin, i,
                           HALF, eps, dt, True, True)
        vp = row + v_off + g * HD + one[:, None] * 0 + i[None, :]
        va, vb = _rms_rope(tl.load(vp).to(tl.float32), tl.load(vp + HALF).to(tl.float32), kn_ptr, cos, sin, i,
                           HALF, eps, dt, False, False)
        lim = tl.where((slot >= sp * SPLIT) & (slot < sp * SPLIT + SPLIT), HALF, 0)  # the slot is in my slice
        mine = one[:, None] * 0 + i[None, :] < lim
        at = kc_ptr + base + slot * stride_cs + one[:, None] * 0 + i[None, :]
        tl.store(at, ka.to(dt), mask=mine)
        tl.store(at + HALF, kb.to(dt), mask=mine)
        at = vc_ptr + base + slot * stride_cs + one[:, None] * 0 + i[None, :]
        tl.store(at, va.to(dt), mask=mine)
        tl.store(at + HALF, vb.to(dt), mask=mine)
        ka = ka.to(dt)
        kb = kb.to(dt)
        va = va.to(dt)
        vb = vb.to(dt)
        cur = (s == slot)[:, None]
        m, lsum, acc_a, acc_b = _attend_block(
            qa, qb, tl.where(cur, ka, k1), tl.where(cur, kb, k2), tl.where(cur, va, v1), tl.where(cur, vb, v2), ok,
            tl.full([16], float("-inf"), tl.float32), tl.zeros([16], tl.float32), tl.zeros([16, HALF], tl.float32),
            tl.zeros([16, HALF], tl.float32), IEEE)
        for s0 in range(sp * SPLIT + BLOCK_S, sp * SPLIT + SPLIT, BLOCK_S):  # the slice's other blocks
            s = s0 + tl.arange(0, BLOCK_S)
            ok = (s < slots) & (s <= pos)
            cur = (s == slot)[:, None]
            k1, k2, v1, v2 = _load_block(kc_ptr, vc_ptr, base, s, i, stride_cs, ok, HALF)
            m, lsum, acc_a, acc_b = _attend_block(
                qa, qb, tl.where(cur, ka, k1), tl.where(cur, kb, k2), tl.where(cur, va, v1), tl.where(cur, vb, v2),
                ok, m, lsum, acc_a, acc_b, IEEE)
        part = (bg * nsplit + sp) * G + gi
        tl.store(acc_ptr + part[:, None] * HD + i[None, :], acc_a, mask=qrow[:, None])
        tl.store(acc_ptr + part[:, None] * HD + HALF + i[None, :], acc_b, mask=qrow[:, None])
        tl.store(ml_ptr + 2 * part, m, mask=qrow)
        tl.store(ml_ptr + 2 * part + 1, lsum, mask=qrow)
        if COMBINE:  # the last slice of this (sequence, KV head) to finish folds the group's partials (a counter
            tl.debug_barrier()  # per group, acq_rel, re-zeroed): no combine kernel after this one
            c = cnt_ptr + bg
            if tl.atomic_add(c, 1, sem="acq_rel") == nsplit - 1:
                for j in tl.static_range(G):
                    _combine_head(acc_ptr, ml_ptr, out_ptr, pack_ptr, stride_out, nsplit, b, g * G + j, KVH * G,
                                  KVH, G, 2 * HALF, CHUNK, PACK, True)
                tl.atomic_xchg(c, 0, sem="relaxed")

    @triton.jit
    def _combine_head(acc_ptr, ml_ptr, out_ptr, pack_ptr, stride_out, nsplit, b, h, NH: tl.constexpr,
                      KVH: tl.constexpr, G: tl.constexpr, HD: tl.constexpr, CHUNK: tl.constexpr,
                      PACK: tl.constexpr, L2: tl.constexpr):
        """Fold the slices' partials of query head h of sequence b, CHUNK slices per step loaded at once (a loop
        of one load per slice would chain nsplit L2 round trips, ~0.2 us each, behind one another), and store
        the head's output. L2: read the partials from L2 (.cg), for a program of the kernel that wrote them."""
        g = h // G
        d = tl.arange(0, HD)
        big_m = float("-inf")
        big_l = 0.0
        acc = tl.zeros([HD], tl.float32)
        for c0 in tl.range(0, nsplit, CHUNK, num_stages=1 if L2 else 3):  # the next chunks load during this one
            sp = c0 + tl.arange(0, CHUNK)
            ok = sp < nsplit
            part = ((b * KVH + g) * nsplit + sp) * G + h % G
            if L2:
                m = tl.load(ml_ptr + 2 * part, mask=ok, other=float("-inf"), cache_modifier=".cg")
                lsum = tl.load(ml_ptr + 2 * part + 1, mask=ok, other=0.0, cache_modifier=".cg")
                a = tl.load(acc_ptr + part[:, None] * HD + d[None, :], mask=ok[:, None], other=0.0,
                            cache_modifier=".cg")
            else:
                m = tl.load(ml_ptr + 2 * part, mask=ok, other=float("-inf"))
                lsum = tl.load(ml_ptr + 2 * part + 1, mask=ok, other=0.0)
                a = tl.load(acc_ptr + part[:, None] * HD + d[None, :], mask=ok[:, None], other=0.0)
            m_new = tl.maximum(big_m, tl.max(m, 0))
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # nothing attended yet: no NaN from -inf - -inf
            alpha = tl.exp(big_m - m_use)
            beta = tl.exp(m - m_use)
            acc = acc * alpha + tl.sum(a * beta[:, None], 0)
            big_l = big_l * alpha + tl.sum(lsum * beta, 0)
            big_m = m_new
        y = (acc / big_l).to(out_ptr.dtype.element_ty).to(tl.float32)  # rounded as the eager step rounds
        store_act(out_ptr + b * stride_out, pack_ptr + b * (NH * HD), h * HD + d, y, d < HD, PACK)

    @triton.jit
    def _attn_combine_kernel(acc_ptr, ml_ptr, out_ptr, pack_ptr, stride_out, nsplit, NH: tl.constexpr,
                             KVH: tl.constexpr, G: tl.constexpr, HD: tl.constexpr, CHUNK: tl.constexpr,
                             PACK: tl.constexpr, PDL: tl.constexpr):
        """One program per (sequence, query head): _combine_head."""
        pdl_entry(PDL)
        pid = tl.program_id(0)
        _combine_head(acc_ptr, ml_ptr, out_ptr, pack_ptr, stride_out, nsplit, pid // NH, pid % NH, NH, KVH, G, HD,
                      CHUNK, PACK, False)

    @triton.jit
    def _residual_norm_kernel(x_ptr, o_ptr, w1_ptr, s_ptr, w2_ptr, x_out_ptr, h_out_ptr, pack_ptr, D, eps,
                              BLOCK: tl.constexpr, HAS_O: tl.constexpr, HAS_S: tl.constexpr, PACK: tl.constexpr,
                              PDL: tl.constexpr):
        pdl_entry(PDL)
        b = tl.program_id(0)
        residual_norm_row(x_ptr + b * D, o_ptr + b * D, w1_ptr, s_ptr, w2_ptr, x_out_ptr + b * D, h_out_ptr + b * D,
                          pack_ptr + b * D, D, eps, BLOCK, HAS_O, HAS_S, PACK, False)

    @triton.jit
    def _embed_norm_kernel(tok_ptr, e_ptr, w_ptr, x_out_ptr, h_out_ptr, pack_ptr, D, scale, eps,
                           BLOCK: tl.constexpr, PACK: tl.constexpr, PDL: tl.constexpr):
        pdl_entry(PDL)
        b = tl.program_id(0)
        d = tl.arange(0, BLOCK)
        ok = d < D
        dt = x_out_ptr.dtype.element_ty
        t = tl.load(tok_ptr + b)
        x = (tl.load(e_ptr + t * D + d, mask=ok, other=0.0).to(tl.float32) * scale).to(dt).to(tl.float32)
        tl.store(x_out_ptr + b * D + d, x.to(dt), mask=ok)
        norm_row_store(x, d, ok, D, eps, w_ptr, h_out_ptr + b * D, pack_ptr + b * D, dt, PACK)

    @triton.jit
    def _geglu_kernel(gu_ptr, out_ptr, pack_ptr, inter, stride_gu, stride_out, BLOCK: tl.constexpr,
                      PACK: tl.constexpr, PDL: tl.constexpr):
        pdl_entry(PDL)
        b = tl.program_id(0)
        i = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        ok = i < inter
        g = tl.load(gu_ptr + b * stride_gu + i, mask=ok, other=0.0).to(tl.float32)
        u = tl.load(gu_ptr + b * stride_gu + inter + i, mask=ok, other=0.0).to(tl.float32)
        y = gelu_tanh_mul(g, u, out_ptr.dtype.element_ty)
        store_act(out_ptr + b * stride_out, pack_ptr + b * inter, i, y, ok, PACK)


def attn_programs(device, g: int, hd: int) -> int:
    """The attention programs aimed at per call: on a GPU one wave, its SMs times the programs an SM holds at
    ATTN_WARPS, 2 for a group of up to 2,048 query dims (Gemma 4's sliding layers, 2 x 256: 128 registers a
    thread, 25 KiB of shared memory) and 1 above (its full layers, 16 x 512: 255 registers; 50 KiB;
    `python tests/measure/compile_kernels.py --registers`). One wave: 4,362 full-layer slots in slices of 32 are
    137 programs, five more than an H200's 132 SMs hold at once, so the step would wait a second wave; slices of
    64 are 69. Elsewhere (the interpreter) ATTN_PROGRAMS."""
    if device.type != "cuda":
        return ATTN_PROGRAMS
    return torch.cuda.get_device_properties(device).multi_processor_count * (2 if g * hd <= 2048 else 1)


def attn_split(device, b: int, kvh: int, slots: int, g: int, hd: int, block_s: int = ATTN_BLOCK_S,
               split: int | None = None) -> int:
    """Cache rows per attention slice: `split` if given, else the fewest rows, a multiple of block_s, that keep
    b x kvh x slices within attn_programs (one wave; powers of two, as before, left up to half the wave empty:
    a batch of 16 on the full layers ran 80 programs on 132 SMs, now 128); at least block_s, at most the
    cache."""
    if split is None:
        per = max(1, attn_programs(device, g, hd) // (b * kvh))  # slices a (sequence, KV head) may have
        split = block_s * triton.cdiv(triton.cdiv(slots, per), block_s)
    return max(block_s, min(split, block_s * triton.cdiv(slots, block_s)))


def _rows_prefetchable(kc: torch.Tensor, vc: torch.Tensor) -> bool:
    """Whether a slice of cache rows is one 16-byte aligned run of a multiple of 16 bytes in both caches (what
    the bulk L2 prefetch needs): contiguous caches with rows of a multiple of 16 bytes."""
    return all(c.is_contiguous() and c.data_ptr() % 16 == 0 and (c.shape[-1] * c.element_size()) % 16 == 0
               for c in (kc, vc)) and kc.stride() == vc.stride()


def _packed(b: int, k: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """An activation buffer in the word GEMV's packed layout [B, K/8, 4] (int32) and its fp16 view."""
    buf = torch.empty((b, k // 8, 4), dtype=torch.int32, device=device)
    return buf, buf.view(torch.float16)


def attention(qkv, q_norm, k_norm, cos, sin, pos, kc, vc, num_heads, k_off, v_off, eps, split: int | None = None,
              block_s: int = ATTN_BLOCK_S, pack: bool = False, combine_chunk: int | None = None,
              fold_combine: bool | None = None) -> torch.Tensor:
    """The attention of one decode step from the qkv projection [B, q | k (| v)]: q normed (q_norm) and rotated,
    this position's K (k_norm, RoPE) and V (v_norm; from k's columns when v_off == k_off, Gemma 4's full layers)
    written into slot pos % slots of kc / vc [B, kv_heads, slots, hd], then q against the cache up to pos
    -> [B, heads * hd], or with `pack` the same in the word GEMV's packed input layout [B, heads * hd / 8, 4].

    The cache is cut into slices of `split` rows, by default the smallest power of two that keeps the programs
    within one wave (attn_programs; one decode step reads a few MB per layer: spread over the SMs, not over the
    8 KV heads alone): on an H200 a 1,024-slot window with 8 KV heads in slices of 32 (256 programs), a
    4,362-slot full layer with one KV head in slices of 64 (69). Each program norms and rotates its group's
    queries itself (a few KB from L2), so no kernel runs before it.

    fold_combine: the last slice of each (sequence, KV head) to finish combines the group's partials itself
    instead of a combine kernel after the split one; None: where they are at most FOLD_COMBINE_BYTES (a
    sliding layer of Gemma 4 12B: 32 slices x 2 heads x 256 fp32, 64 KiB; a full layer's 69 x 16 x 512,
    2.3 MB, would keep one SM busy for tens of microseconds: a combine kernel spreads it over 16)."""
    b = qkv.shape[0]
    kvh, slots, hd = kc.shape[1], kc.shape[2], kc.shape[3]
    g = num_heads // kvh
    if g > 16:
        raise ValueError(f"{g} query heads per KV head: the kernel pads a group to 16 rows at most")
    split = attn_split(qkv.device, b, kvh, slots, g, hd, block_s, split)
    nsplit = triton.cdiv(slots, split)
    mode = pdl_mode(qkv.device)
    acc = torch.empty((b * kvh * nsplit * g, hd), device=qkv.device, dtype=torch.float32)
    ml = torch.empty((b * kvh * nsplit * g, 2), device=qkv.device, dtype=torch.float32)
    out = torch.empty((b, num_heads * hd), device=qkv.device, dtype=qkv.dtype)
    buf, view = _packed(b, num_heads * hd, qkv.device) if pack else (out, out)
    # slices folded per step of the combine: <= 8K fp32 partials in registers at once
    chunk = combine_chunk or max(1, min(triton.next_power_of_2(nsplit), 8192 // hd))
    fold = fold_combine if fold_combine is not None else nsplit * g * hd * 4 <= FOLD_COMBINE_BYTES
    cnt = _combine_counters(qkv.device, b * kvh) if fold else ml
    _attn_split_kernel[(b * kvh, nsplit)](qkv, q_norm, k_norm, cos, sin, pos, kc, vc, acc, ml, cnt, out, view,
                                          out.stride(0), qkv.stride(0), kc.stride(0), kc.stride(1), kc.stride(2),
                                          k_off, v_off, slots, nsplit, eps, KVH=kvh, G=g, HALF=hd // 2,
                                          SPLIT=split, BLOCK_S=block_s, IEEE=kc.dtype == torch.float32,
                                          PREFETCH=mode == PDL_EARLY and _rows_prefetchable(kc, vc),
                                          COMBINE=fold, CHUNK=chunk, PACK=pack, num_warps=ATTN_WARPS,
                                          **launch_opts(mode))
    if not fold:
        _attn_combine_kernel[(b * num_heads,)](acc, ml, out, view, out.stride(0), nsplit, NH=num_heads, KVH=kvh,
                                               G=g, HD=hd, CHUNK=chunk, PACK=pack, **launch_opts(mode))
    return buf if pack else out


def _combine_counters(device, n: int) -> torch.Tensor:
    """One arrival counter per (sequence, KV head) for the folded combine (scratch: re-zeroed by each call's
    last slice, shared by the layers)."""
    return scratch.zeroed("attention combine counters", device, (n,), torch.int32)


def residual_norm(x, o, w_post, w_next, eps, scalar=None, pack: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """x' = (x + rmsnorm(o) * w_post) [* scalar]; h = rmsnorm(x') * w_next. o None: x' = x (the first norm).
    With `pack`, h comes in the word GEMV's packed input layout."""
    b, dim = x.shape
    x_out = torch.empty_like(x) if o is not None else x
    h = torch.empty_like(x)
    buf, view = _packed(b, dim, x.device) if pack else (h, h)
    block = triton.next_power_of_2(dim)
    # one program holds the whole row: warps as Triton's layer-norm tutorial sizes them (block / 256, 1 to 8),
    # 8 for Gemma's 3,840 (4 left 152 registers a thread on sm_90 and a longer serial chain)
    _residual_norm_kernel[(b,)](x, o if o is not None else x, w_post if w_post is not None else w_next,
                                scalar if scalar is not None else w_next, w_next, x_out, h, view, dim, eps,
                                BLOCK=block, HAS_O=o is not None, HAS_S=scalar is not None, PACK=pack,
                                num_warps=min(max(block // 256, 1), 8), **launch_opts(pdl_mode(x.device)))
    return x_out, (buf if pack else h)


def embed_norm(embed, token, scale: float, w_next, eps, pack: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """x = embed[token] * scale (rounded to embed's dtype, as the eager step's gather and multiply), h =
    rmsnorm(x) * w_next (packed with `pack`): the step's first three kernels in one, the token read on the
    device."""
    b, dim = token.shape[0], embed.shape[1]
    x = torch.empty((b, dim), device=embed.device, dtype=embed.dtype)
    h = torch.empty_like(x)
    buf, view = _packed(b, dim, x.device) if pack else (h, h)
    block = triton.next_power_of_2(dim)
    _embed_norm_kernel[(b,)](token, embed, w_next, x, h, view, dim, float(scale), eps, BLOCK=block, PACK=pack,
                             num_warps=min(max(block // 256, 1), 8), **launch_opts(pdl_mode(x.device)))
    return x, (buf if pack else h)


def geglu(gu: torch.Tensor, block: int = 1024, pack: bool = False) -> torch.Tensor:
    """[B, 2I] (gate | up) -> gelu_tanh(gate) * up [B, I], or packed for the word GEMV."""
    b, two_i = gu.shape
    inter = two_i // 2
    out = torch.empty((b, inter), device=gu.device, dtype=gu.dtype)
    buf, view = _packed(b, inter, gu.device) if pack else (out, out)
    _geglu_kernel[(b, triton.cdiv(inter, block))](gu, out, view, inter, gu.stride(0), out.stride(0), BLOCK=block,
                                                  PACK=pack, **launch_opts(pdl_mode(gu.device)))
    return buf if pack else out
