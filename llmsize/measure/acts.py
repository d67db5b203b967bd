"""Triton helpers for the activations between the GEMVs, shared by the fused kernels (fused.py) and the word
GEMV's epilogues (gemv_words.py): the word kernel's packed input layout, the GeGLU arithmetic, and the residual
add + RMSNorm of one row, each rounding where the eager step rounds."""

from __future__ import annotations

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

if triton is not None:

    @triton.jit
    def store_act(out_ptr, pack_ptr, i, y, ok, PACK: tl.constexpr):
        """Store an activation row y[i] in the output dtype, or (PACK) as fp16 pairs in the word GEMV's input
        layout: column 8j + c goes to fp16 slot 2 (4 j + 3 - c % 4) + c // 4 (gemv_words.pack_x_pairs), clamped
        to the fp16 range. The kernels before a word GEMV store their outputs so."""
        if PACK:
            c = i % 8
            slot = 2 * (4 * (i // 8) + 3 - c % 4) + c // 4
            tl.store(pack_ptr + slot, tl.minimum(tl.maximum(y, -65504.0), 65504.0).to(tl.float16), mask=ok)
        else:
            tl.store(out_ptr + i, y.to(out_ptr.dtype.element_ty), mask=ok)

    @triton.jit
    def tanh(z):
        """tanh(z) in fp32 through exp, saturating cleanly at +-1."""
        return 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)

    @triton.jit
    def gelu_tanh_mul(g, u, dt: tl.constexpr):
        """gelu_tanh(g) * u in fp32, rounded to dt where the eager step rounds (F.gelu's output, the product)."""
        t = tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))  # sqrt(2 / pi)
        act = (0.5 * g * (1.0 + t)).to(dt).to(tl.float32)
        return (act * u).to(dt).to(tl.float32)

    @triton.jit
    def residual_norm_row(x_ptr, o_ptr, w1_ptr, s_ptr, w2_ptr, x_out_ptr, h_out_ptr, pack_ptr, D, eps,
                          BLOCK: tl.constexpr, HAS_O: tl.constexpr, HAS_S: tl.constexpr, PACK: tl.constexpr,
                          L2: tl.constexpr):
        """One row: x' = (x + rmsnorm(o) * w1) [* s], stored; h = rmsnorm(x') * w2, stored (PACK: in the word
        GEMV's input layout). HAS_O false: x' = x. L2: read x and o from L2 (.cg), for a caller that reads what
        other programs of the same kernel have just written (its L1 may hold older lines of those buffers)."""
        d = tl.arange(0, BLOCK)
        ok = d < D
        if L2:
            x = tl.load(x_ptr + d, mask=ok, other=0.0, cache_modifier=".cg").to(tl.float32)
        else:
            x = tl.load(x_ptr + d, mask=ok, other=0.0).to(tl.float32)
        dt = x_out_ptr.dtype.element_ty
        if HAS_O:
            if L2:
                o = tl.load(o_ptr + d, mask=ok, other=0.0, cache_modifier=".cg").to(tl.float32)
            else:
                o = tl.load(o_ptr + d, mask=ok, other=0.0).to(tl.float32)
            r = 1.0 / tl.sqrt(tl.sum(o * o, 0) / D + eps)
            y = (o * r * tl.load(w1_ptr + d, mask=ok, other=0.0)).to(dt).to(tl.float32)  # rms_norm's output dtype
            x = (x + y).to(dt).to(tl.float32)
            if HAS_S:
                x = (x * tl.load(s_ptr).to(tl.float32)).to(dt).to(tl.float32)
            tl.store(x_out_ptr + d, x.to(dt), mask=ok)
        norm_row_store(x, d, ok, D, eps, w2_ptr, h_out_ptr, pack_ptr, dt, PACK)

    @triton.jit
    def norm_row_store(x, d, ok, D, eps, w2_ptr, h_out_ptr, pack_ptr, dt: tl.constexpr, PACK: tl.constexpr):
        """h = rmsnorm(x) * w2 of one row x (fp32, columns d), rounded to dt, stored (PACK: packed)."""
        r2 = 1.0 / tl.sqrt(tl.sum(x * x, 0) / D + eps)
        h = (x * r2 * tl.load(w2_ptr + d, mask=ok, other=0.0)).to(dt).to(tl.float32)
        store_act(h_out_ptr, pack_ptr, d, h, ok, PACK)
