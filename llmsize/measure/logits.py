"""The end of a decode step after the lm_head's GEMM (cuBLAS): the soft-cap and the greedy token of each row in one
kernel, `cap_argmax`, over the [B, V] logits (B from 1 to 256), in place of the eager ops' .float(), / cap, tanh,
* cap, argmax, copy and += 1.

Programs over rows x vocabulary blocks; each stores cap * tanh(y / cap) as fp32 and offers its block's best to
one 64-bit atomic max per row, whose key is the logit made unsigned-ordered above the row's complement
(`argmax_key`: the largest logit wins and, among equal ones, the first row, as torch.argmax). The last program
(a counter, acq_rel) takes the B keys, leaving them zeroed, writes the tokens and advances the position. tanh
is monotonic, so the argmax of the logits is the argmax of the capped ones (distinct bf16 logits stay distinct
through the cap below ~200). For Gemma 4's 262,144-entry vocabulary the eager chain moves ~9.4 MB per row
(2 bytes written by the GEMM, then 4-byte passes), the kernel ~1.6 MB (the bf16 logits read, the fp32 capped
ones written), and five launches fewer. Its self-check is selfcheck.cap_argmax_ok.
"""

from __future__ import annotations

import torch

from llmsize.measure import scratch

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

if triton is not None:
    from llmsize.measure.acts import tanh

    @triton.jit
    def argmax_key(y, rows):
        """The 64-bit argmax key of logits y at rows: the value's bits made unsigned-ordered (sign bit flipped
        for positives, all bits for negatives; -0 as +0) above the row's complement, so the largest key is the
        largest logit and, among equal ones, the first row."""
        bits = tl.where(y == 0.0, 0.0, y).to(tl.uint32, bitcast=True)
        # (bits ^ all ones is ~bits; Triton 3.6's interpreter cannot build ~ on uint32 under NumPy 2)
        ordered = tl.where((bits >> 31) == 0, bits | 0x80000000, bits ^ 0xFFFFFFFF)
        return (ordered.to(tl.uint64) << 32) | (0xFFFFFFFF - rows.to(tl.uint32)).to(tl.uint64)

    @triton.jit
    def _cap_argmax_kernel(y_ptr, logits_ptr, key_ptr, cnt_ptr, tok_ptr, pos_ptr, B, V, stride_y, cap,
                           BLOCK: tl.constexpr, BLOCK_B: tl.constexpr, ADVANCE: tl.constexpr):
        """Program (v, b): logits row b, entries [v BLOCK, (v + 1) BLOCK): cap * tanh(y / cap) stored as fp32,
        the block's best key into row b's atomic max; the last program of the grid takes the B keys (leaving
        them zeroed), writes the tokens and advances the position."""
        pid_v = tl.program_id(0)
        b = tl.program_id(1)
        rows = pid_v * BLOCK + tl.arange(0, BLOCK)
        ok = rows < V
        y = tl.load(y_ptr + b * stride_y + rows, mask=ok, other=0.0).to(tl.float32)
        tl.store(logits_ptr + b * V + rows, cap * tanh(y / cap), mask=ok)
        tl.atomic_max(key_ptr + b, tl.max(tl.where(ok, argmax_key(y, rows), 0), 0), sem="relaxed")
        if tl.atomic_add(cnt_ptr, 1, sem="acq_rel") == tl.num_programs(0) * tl.num_programs(1) - 1:
            bs = tl.arange(0, BLOCK_B)
            best = tl.atomic_xchg(key_ptr + bs, tl.zeros([BLOCK_B], dtype=tl.uint64), mask=bs < B, sem="acq_rel")
            tl.store(tok_ptr + bs, (0xFFFFFFFF - (best & 0xFFFFFFFF)).to(tok_ptr.dtype.element_ty), mask=bs < B)
            if ADVANCE:
                tl.store(pos_ptr, tl.load(pos_ptr) + 1)
            tl.atomic_xchg(cnt_ptr, 0, sem="relaxed")


CAP_BLOCK = 2048  # vocabulary entries a program: 128 programs a row for Gemma 4's 262,144
MAX_CAP_ROWS = 256


def cap_argmax(y: torch.Tensor, cap: float, token: torch.Tensor, pos: torch.Tensor | None = None,
               block: int = CAP_BLOCK) -> torch.Tensor:
    """y [B, V] (the lm_head GEMM's logits, any float dtype) -> cap * tanh(y / cap) [B, V] fp32; the greedy
    token of each row (the first of equal maxima, as torch.argmax) into token[:B] and, with pos, pos[0] += 1."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    if y.dim() != 2 or not 1 <= y.shape[0] <= MAX_CAP_ROWS or y.stride(1) != 1:
        raise ValueError(f"y must be [1 <= B <= {MAX_CAP_ROWS}, V] with contiguous rows, got {tuple(y.shape)}")
    b, v = y.shape
    logits = torch.empty((b, v), dtype=torch.float32, device=y.device)
    best = scratch.zeroed("cap_argmax keys", y.device, (MAX_CAP_ROWS,), torch.int64)
    cnt = scratch.zeroed("cap_argmax counter", y.device, (1,), torch.int32)
    _cap_argmax_kernel[(triton.cdiv(v, block), b)](
        y, logits, best.view(torch.uint64), cnt, token, pos if pos is not None else token, b, v, y.stride(0),
        float(cap), BLOCK=block, BLOCK_B=max(16, triton.next_power_of_2(b)), ADVANCE=pos is not None, num_warps=4)
    return logits
