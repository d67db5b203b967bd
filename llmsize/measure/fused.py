"""The work between the GEMVs of one Gemma 4 decode step, in five Triton kernels instead of ~100 small ones.

Per layer the eager step runs norms, RoPE, cache writes, a masked softmax attention, residual adds and the
GeGLU as separate torch ops: about a hundred kernels, each a few microseconds of launch and tail, where the
four GEMVs of a sliding layer move their bytes in ~30 us on an H200 (shared/reference/fast-decode-notes.md:
"few kernels per layer"). Here a layer is
    qkv GEMV -> qk_prep -> attention (split over the cache) -> combine -> o GEMV -> residual_norm
    -> gate_up GEMV -> geglu -> down GEMV -> residual_norm (which also applies the next layer's input norm)
Each kernel reads its operands once and rounds where the eager step rounds (to the activation dtype after a
norm, after an add), so on float32 weights it matches the eager step to float32 rounding.

- qk_prep: one program per (sequence, head): RMSNorm with q_norm / k_norm, RoPE (rotate-half, the position's
  cos/sin row read from the device position, no host sync), v_norm; K and V written into their cache slot.
- attention: one program per (sequence, KV head, slice of the cache): the query heads of the group padded to
  16 rows against BLOCK_S cache rows at a time on the tensor cores, online softmax in fp32, partial (max, sum,
  weighted V) written out; combine folds the slices per query head (flash-decoding). Scale 1.0 (Gemma 4).
- residual_norm: x = (x + rmsnorm(o) * w_post) * scalar, then h = rmsnorm(x) * w_next, one program per row.
- geglu: gelu_tanh(gate) * up; with the word GEMV at batch 1 the gate | up pass applies it in its epilogue
  (gemv_words, glu=True) and this kernel is not launched: nine kernels per layer.
"""

from __future__ import annotations

import torch

from llmsize.measure.launch import PDL_EARLY, launch_opts, pdl_mode

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

if triton is not None:
    from llmsize.measure.gemv_words import gelu_tanh_mul, store_act
    from llmsize.measure.launch import pdl_entry, prefetch_l2

ATTN_BLOCK_S = 32  # cache rows per tensor-core step
ATTN_PROGRAMS = 256  # cache slices aimed at per attention call: ~2 per SM of an H100/H200 (132 SMs)


def available() -> bool:
    return triton is not None


_step_checked: dict[str, bool] = {}


def fused_step_ok(device) -> bool:
    """Whether the fused step reproduces the eager one on this device: a Gemma-4-shaped toy model in float32
    decoded past twice its window both ways (the GEMVs as plain matmuls, so only these kernels differ), once per
    device, before `llmsize measure` uses the fused step by default."""
    key = str(device)
    if key not in _step_checked:
        try:
            _step_checked[key] = _fused_matches_eager(device)
        except Exception:  # a kernel that fails to build or launch here: the eager step it is
            _step_checked[key] = False
    return _step_checked[key]


def _fused_matches_eager(device) -> bool:
    from llmsize.measure import gemma4

    cfg = gemma4.GEMMA4_TINY
    w = gemma4.build_random(cfg, device=device, dtype=torch.float32, seed=0)
    prompt = torch.tensor([[3, 1, 4]], device=device)
    steps = 2 * cfg.sliding_window + 3
    outs = []
    for fused in (False, True):
        dec = gemma4.Gemma4Decoder(w, batch=1, max_positions=steps + 4, fused=fused)
        dec.prefill(prompt)
        got = [dec.decode_step()[0].clone() for _ in range(steps - 3)]
        if fused and device.type == "cuda":  # the last steps replayed from a CUDA graph, as measure runs them
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                got.append(dec.decode_step()[0].clone())
            torch.cuda.current_stream(device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = dec.decode_step()
            for _ in range(2):
                graph.replay()
                got.append(out[0].clone())
        else:
            got += [dec.decode_step()[0].clone() for _ in range(3)]
        outs.append(torch.stack(got))
    return bool(torch.allclose(outs[0], outs[1], rtol=1e-3, atol=5e-3))


if triton is not None:

    @triton.jit
    def _rms_rope_store(src, w_ptr, dst, cos, sin, i, HALF: tl.constexpr, eps, HAS_W: tl.constexpr,
                        ROPE: tl.constexpr):
        x1 = tl.load(src + i).to(tl.float32)
        x2 = tl.load(src + HALF + i).to(tl.float32)
        r = 1.0 / tl.sqrt((tl.sum(x1 * x1, 0) + tl.sum(x2 * x2, 0)) / (2 * HALF) + eps)
        y1, y2 = x1 * r, x2 * r
        if HAS_W:
            y1 = y1 * tl.load(w_ptr + i)
            y2 = y2 * tl.load(w_ptr + HALF + i)
        if ROPE:  # the eager step rounds the norm's output before rotating it
            y1 = y1.to(dst.dtype.element_ty).to(tl.float32)
            y2 = y2.to(dst.dtype.element_ty).to(tl.float32)
            y1, y2 = y1 * cos - y2 * sin, y2 * cos + y1 * sin
        tl.store(dst + i, y1.to(dst.dtype.element_ty))
        tl.store(dst + HALF + i, y2.to(dst.dtype.element_ty))

    @triton.jit
    def _qk_prep_kernel(qkv_ptr, qn_ptr, kn_ptr, cos_ptr, sin_ptr, pos_ptr, q_ptr, kc_ptr, vc_ptr,
                        stride_qkv, stride_q, stride_cb, stride_ch, stride_cs, k_off, v_off, slots, eps,
                        NH: tl.constexpr, HALF: tl.constexpr, PDL: tl.constexpr):
        pdl_entry(PDL)
        b = tl.program_id(0)
        h = tl.program_id(1)  # 0..NH-1 query heads, then the KV heads
        pos = tl.load(pos_ptr)
        i = tl.arange(0, HALF)
        cos = tl.load(cos_ptr + pos * (2 * HALF) + i)  # the second half of the row repeats the first
        sin = tl.load(sin_ptr + pos * (2 * HALF) + i)
        hd = 2 * HALF
        row = qkv_ptr + b * stride_qkv
        if h < NH:
            _rms_rope_store(row + h * hd, qn_ptr, q_ptr + b * stride_q + h * hd, cos, sin, i, HALF, eps,
                            True, True)
        else:
            g = h - NH
            cache = b * stride_cb + g * stride_ch + (pos % slots) * stride_cs
            _rms_rope_store(row + k_off + g * hd, kn_ptr, kc_ptr + cache, cos, sin, i, HALF, eps, True, True)
            _rms_rope_store(row + v_off + g * hd, kn_ptr, vc_ptr + cache, cos, sin, i, HALF, eps, False, False)

    @triton.jit
    def _attn_split_kernel(q_ptr, kc_ptr, vc_ptr, pos_ptr, acc_ptr, ml_ptr, stride_q, stride_cb, stride_ch,
                           stride_cs, slots, nsplit, KVH: tl.constexpr, G: tl.constexpr, HD: tl.constexpr,
                           SPLIT: tl.constexpr, BLOCK_S: tl.constexpr, IEEE: tl.constexpr, PREFETCH: tl.constexpr,
                           PDL: tl.constexpr):
        bg = tl.program_id(0)
        sp = tl.program_id(1)
        b = bg // KVH
        g = bg % KVH
        if PREFETCH:  # the slice's cache rows (written by earlier steps) towards L2 while the kernel before runs
            rows = tl.minimum(SPLIT, slots - sp * SPLIT)
            nbytes = rows * stride_cs * (kc_ptr.dtype.element_ty.primitive_bitwidth // 8)
            at = b * stride_cb + g * stride_ch + sp * SPLIT * stride_cs
            prefetch_l2(kc_ptr + at, nbytes)
            prefetch_l2(vc_ptr + at, nbytes)
        pdl_entry(PDL)
        pos = tl.load(pos_ptr)
        gi = tl.arange(0, 16)  # the group's query heads, padded to the 16 rows of a tensor-core tile
        d = tl.arange(0, HD)
        qrow = gi < G
        q = tl.load(q_ptr + b * stride_q + (g * G + gi)[:, None] * HD + d[None, :], mask=qrow[:, None], other=0.0)
        base = b * stride_cb + g * stride_ch
        m = tl.full([16], float("-inf"), tl.float32)
        lsum = tl.zeros([16], tl.float32)
        acc = tl.zeros([16, HD], tl.float32)
        for s0 in range(sp * SPLIT, sp * SPLIT + SPLIT, BLOCK_S):
            s = s0 + tl.arange(0, BLOCK_S)
            ok = (s < slots) & (s <= pos)  # ring slots past the position are not written yet
            k = tl.load(kc_ptr + base + s[:, None] * stride_cs + d[None, :], mask=ok[:, None], other=0.0)
            if IEEE:
                sc = tl.dot(q.to(k.dtype), tl.trans(k), input_precision="ieee")
            else:
                sc = tl.dot(q.to(k.dtype), tl.trans(k))
            sc = tl.where(ok[None, :], sc, float("-inf"))
            m_new = tl.maximum(m, tl.max(sc, 1))
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # an all-empty block: no NaN from -inf - -inf
            p = tl.exp(sc - m_use[:, None])
            alpha = tl.exp(m - m_use)
            v = tl.load(vc_ptr + base + s[:, None] * stride_cs + d[None, :], mask=ok[:, None], other=0.0)
            if IEEE:
                pv = tl.dot(p.to(v.dtype), v, input_precision="ieee")
            else:
                pv = tl.dot(p.to(v.dtype), v)
            acc = acc * alpha[:, None] + pv
            lsum = lsum * alpha + tl.sum(p, 1)
            m = m_new
        part = (bg * nsplit + sp) * G + gi
        tl.store(acc_ptr + part[:, None] * HD + d[None, :], acc, mask=qrow[:, None])
        tl.store(ml_ptr + 2 * part, m, mask=qrow)
        tl.store(ml_ptr + 2 * part + 1, lsum, mask=qrow)

    @triton.jit
    def _attn_combine_kernel(acc_ptr, ml_ptr, out_ptr, pack_ptr, stride_out, nsplit, NH: tl.constexpr,
                             KVH: tl.constexpr, G: tl.constexpr, HD: tl.constexpr, PACK: tl.constexpr,
                             PDL: tl.constexpr):
        pdl_entry(PDL)
        pid = tl.program_id(0)
        b = pid // NH
        h = pid % NH
        g = h // G
        d = tl.arange(0, HD)
        big_m = float("-inf")
        big_l = 0.0
        acc = tl.zeros([HD], tl.float32)
        for sp in range(0, nsplit):
            part = ((b * KVH + g) * nsplit + sp) * G + h % G
            m = tl.load(ml_ptr + 2 * part)
            lsum = tl.load(ml_ptr + 2 * part + 1)
            m_new = tl.maximum(big_m, m)
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp(big_m - m_use)
            beta = tl.exp(m - m_use)
            acc = acc * alpha + tl.load(acc_ptr + part * HD + d) * beta
            big_l = big_l * alpha + lsum * beta
            big_m = m_new
        y = (acc / big_l).to(out_ptr.dtype.element_ty).to(tl.float32)  # rounded as the eager step rounds
        store_act(out_ptr + b * stride_out, pack_ptr + b * (NH * HD), h * HD + d, y, d < HD, PACK)

    @triton.jit
    def _residual_norm_kernel(x_ptr, o_ptr, w1_ptr, s_ptr, w2_ptr, x_out_ptr, h_out_ptr, pack_ptr, D, eps,
                              BLOCK: tl.constexpr, HAS_O: tl.constexpr, HAS_S: tl.constexpr, PACK: tl.constexpr,
                              PDL: tl.constexpr):
        pdl_entry(PDL)
        b = tl.program_id(0)
        d = tl.arange(0, BLOCK)
        ok = d < D
        x = tl.load(x_ptr + b * D + d, mask=ok, other=0.0).to(tl.float32)
        dt = x_out_ptr.dtype.element_ty
        if HAS_O:
            o = tl.load(o_ptr + b * D + d, mask=ok, other=0.0).to(tl.float32)
            r = 1.0 / tl.sqrt(tl.sum(o * o, 0) / D + eps)
            y = (o * r * tl.load(w1_ptr + d, mask=ok, other=0.0)).to(dt).to(tl.float32)  # rms_norm's output dtype
            x = (x + y).to(dt).to(tl.float32)
            if HAS_S:
                x = (x * tl.load(s_ptr).to(tl.float32)).to(dt).to(tl.float32)
            tl.store(x_out_ptr + b * D + d, x.to(dt), mask=ok)
        r2 = 1.0 / tl.sqrt(tl.sum(x * x, 0) / D + eps)
        h = (x * r2 * tl.load(w2_ptr + d, mask=ok, other=0.0)).to(dt).to(tl.float32)
        store_act(h_out_ptr + b * D, pack_ptr + b * D, d, h, ok, PACK)

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


def qk_prep(qkv, q_norm, k_norm, cos, sin, pos, kc, vc, num_heads, k_off, v_off, eps) -> torch.Tensor:
    """qkv [B, q + k (+ v)] -> q [B, heads * hd] normed and rotated; K, V normed (K rotated) into slot
    pos % slots of kc / vc [B, kv_heads, slots, hd]."""
    b = qkv.shape[0]
    kvh, slots, hd = kc.shape[1], kc.shape[2], kc.shape[3]
    q = torch.empty((b, num_heads * hd), device=qkv.device, dtype=qkv.dtype)
    _qk_prep_kernel[(b, num_heads + kvh)](qkv, q_norm, k_norm, cos, sin, pos, q, kc, vc, qkv.stride(0), q.stride(0),
                                          kc.stride(0), kc.stride(1), kc.stride(2), k_off, v_off, slots, eps,
                                          NH=num_heads, HALF=hd // 2, **launch_opts(pdl_mode(qkv.device)))
    return q


def _rows_prefetchable(kc: torch.Tensor, vc: torch.Tensor) -> bool:
    """Whether a slice of cache rows is one 16-byte aligned run of a multiple of 16 bytes in both caches (what
    the bulk L2 prefetch needs): contiguous caches with rows of a multiple of 16 bytes."""
    return all(c.is_contiguous() and c.data_ptr() % 16 == 0 and (c.shape[-1] * c.element_size()) % 16 == 0
               for c in (kc, vc)) and kc.stride() == vc.stride()


def _packed(b: int, k: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """An activation buffer in the word GEMV's packed layout [B, K/8, 4] (int32) and its fp16 view."""
    buf = torch.empty((b, k // 8, 4), dtype=torch.int32, device=device)
    return buf, buf.view(torch.float16)


def attention(q, kc, vc, pos, num_heads, split: int | None = None, block_s: int = ATTN_BLOCK_S,
              pack: bool = False) -> torch.Tensor:
    """q [B, heads * hd] against the cache [B, kv_heads, slots, hd] up to position pos -> [B, heads * hd], or
    with `pack` the same in the word GEMV's packed input layout [B, heads * hd / 8, 4].

    The cache is cut into slices of `split` rows, by default small enough for ~ATTN_PROGRAMS programs (one
    decode step reads a few MB per layer: spread over the SMs, not over the 8 KV heads alone): a 1,024-slot
    window with 8 KV heads in slices of 32, a 4,352-slot full layer with one KV head in slices of 32."""
    b = q.shape[0]
    kvh, slots, hd = kc.shape[1], kc.shape[2], kc.shape[3]
    g = num_heads // kvh
    if g > 16:
        raise ValueError(f"{g} query heads per KV head: the kernel pads a group to 16 rows at most")
    if split is None:
        split = triton.next_power_of_2(triton.cdiv(slots * kvh * b, ATTN_PROGRAMS))
    split = max(block_s, min(split, triton.next_power_of_2(slots)))
    nsplit = triton.cdiv(slots, split)
    mode = pdl_mode(q.device)
    acc = torch.empty((b * kvh * nsplit * g, hd), device=q.device, dtype=torch.float32)
    ml = torch.empty((b * kvh * nsplit * g, 2), device=q.device, dtype=torch.float32)
    _attn_split_kernel[(b * kvh, nsplit)](q, kc, vc, pos, acc, ml, q.stride(0), kc.stride(0), kc.stride(1),
                                          kc.stride(2), slots, nsplit, KVH=kvh, G=g, HD=hd, SPLIT=split,
                                          BLOCK_S=block_s, IEEE=kc.dtype == torch.float32,
                                          PREFETCH=mode == PDL_EARLY and _rows_prefetchable(kc, vc),
                                          **launch_opts(mode))
    out = torch.empty_like(q)
    buf, view = _packed(b, num_heads * hd, q.device) if pack else (out, out)
    _attn_combine_kernel[(b * num_heads,)](acc, ml, out, view, out.stride(0), nsplit, NH=num_heads, KVH=kvh, G=g,
                                           HD=hd, PACK=pack, **launch_opts(pdl_mode(q.device)))
    return buf if pack else out


def residual_norm(x, o, w_post, w_next, eps, scalar=None, pack: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """x' = (x + rmsnorm(o) * w_post) [* scalar]; h = rmsnorm(x') * w_next. o None: x' = x (the first norm).
    With `pack`, h comes in the word GEMV's packed input layout."""
    b, dim = x.shape
    x_out = torch.empty_like(x) if o is not None else x
    h = torch.empty_like(x)
    buf, view = _packed(b, dim, x.device) if pack else (h, h)
    _residual_norm_kernel[(b,)](x, o if o is not None else x, w_post if w_post is not None else w_next,
                                scalar if scalar is not None else w_next, w_next, x_out, h, view, dim, eps,
                                BLOCK=triton.next_power_of_2(dim), HAS_O=o is not None, HAS_S=scalar is not None,
                                PACK=pack, **launch_opts(pdl_mode(x.device)))
    return x_out, (buf if pack else h)


def geglu(gu: torch.Tensor, block: int = 1024, pack: bool = False) -> torch.Tensor:
    """[B, 2I] (gate | up) -> gelu_tanh(gate) * up [B, I], or packed for the word GEMV."""
    b, two_i = gu.shape
    inter = two_i // 2
    out = torch.empty((b, inter), device=gu.device, dtype=gu.dtype)
    buf, view = _packed(b, inter, gu.device) if pack else (out, out)
    _geglu_kernel[(b, triton.cdiv(inter, block))](gu, out, view, inter, gu.stride(0), out.stride(0), BLOCK=block,
                                                  PACK=pack, **launch_opts(pdl_mode(gu.device)))
    return buf if pack else out
