"""The tied lm_head of a batch-1 decode step in one Triton kernel: bf16 GEMV, soft-cap and greedy token.

The eager step ends with F.linear (cuBLAS, 2 GB of bf16 embedding for Gemma 4 12B: a quarter of the bytes a
token reads), then .float(), / cap, tanh, * cap, argmax, a copy into the token and pos += 1: six small kernels
after the biggest matrix, none of which can take part in programmatic dependent launch (launch.py), so the
GEMV cannot stream its first weights while the down projection before it finishes.

Here each program takes BLOCK_N vocabulary rows: their dot products with h (fp32 accumulation, rounded to
h's dtype as F.linear's output is), cap * tanh(y / cap) stored as fp32 logits, and its best row offered to
one 64-bit atomic max whose key is the rounded logit made unsigned-ordered above the row's complement (the
largest logit wins and, among equal ones, the first row, as torch.argmax). The last program to finish (a
counter, acq_rel) swaps the key for zero, writes the token and advances the position; key and counter are
left zeroed for the next call. tanh is monotonic, so the argmax of the rounded logits is the argmax of the
capped ones (distinct bf16 logits stay distinct through the cap below ~200).

`llmsize measure` does not ship it: on the H200 it has not yet been timed against cuBLAS's GEMV followed by
llmsize.measure.logits.cap_argmax (the soft-cap and token in one kernel), which is what the measured step ends
with. It is kept here so that benchmarks/gemv_bench.py and step_variants.py can time it (`choose` times it
against cuBLAS and the eager ops, both from a CUDA graph), proved against the eager ops by `lm_head_ok`.
"""

from __future__ import annotations

import torch

from llmsize.measure import scratch
from llmsize.measure.gpu import capture_step
from llmsize.measure.launch import launch_opts, pdl_mode, prefetch_bytes
from llmsize.measure.selfcheck import once_per_device

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

if triton is not None:
    from llmsize.measure.launch import pdl_entry, pdl_exit, prefetch_l2
    from llmsize.measure.acts import tanh
    from llmsize.measure.logits import argmax_key

    @triton.jit
    def _lm_head_kernel(h_ptr, w_ptr, logits_ptr, key_ptr, cnt_ptr, tok_ptr, pos_ptr, V, K, cap, prefetch,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr, EVEN: tl.constexpr,
                        ADVANCE: tl.constexpr, PDL: tl.constexpr):
        pid = tl.program_id(0)
        row0 = pid * BLOCK_N
        rows = row0 + tl.arange(0, BLOCK_N)
        row_ok = rows < V
        if PDL == 2:  # the start of this program's rows towards L2 (the embedding does not depend on the kernel
            if prefetch > 0:  # before), then wait for that kernel; the next one is let in after the loop
                nbytes = tl.minimum(prefetch, tl.minimum(BLOCK_N, V - row0) * K * 2) // 16 * 16
                prefetch_l2(w_ptr + row0 * K, nbytes)
        pdl_entry(PDL, False)
        kk = tl.arange(0, BLOCK_K)
        acc = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
        for k0 in tl.range(0, K, BLOCK_K, num_stages=STAGES):
            k = k0 + kk
            if EVEN:
                w = tl.load(w_ptr + rows[:, None] * K + k[None, :], eviction_policy="evict_first")
                x = tl.load(h_ptr + k)
            else:
                w = tl.load(w_ptr + rows[:, None] * K + k[None, :], mask=row_ok[:, None] & (k < K)[None, :],
                            other=0.0, eviction_policy="evict_first")
                x = tl.load(h_ptr + k, mask=k < K, other=0.0)
            acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
        pdl_exit(PDL)
        y = tl.sum(acc, 1).to(h_ptr.dtype.element_ty).to(tl.float32)  # F.linear's output dtype
        tl.store(logits_ptr + rows, cap * tanh(y / cap), mask=row_ok)
        # one 64-bit key per row (_key: the largest key is the largest logit, among equal ones the first row);
        # the block's largest into a single atomic max
        tl.atomic_max(key_ptr, tl.max(tl.where(row_ok, argmax_key(y, rows), 0), 0), sem="relaxed")
        if tl.atomic_add(cnt_ptr, 1, sem="acq_rel") == tl.num_programs(0) - 1:
            # the last program: every block's max is in; take it and leave the key and the counter zeroed
            best = tl.atomic_xchg(key_ptr, tl.zeros([], dtype=tl.uint64), sem="acq_rel")
            tl.store(tok_ptr, (0xFFFFFFFF - (best & 0xFFFFFFFF)).to(tok_ptr.dtype.element_ty))
            if ADVANCE:
                tl.store(pos_ptr, tl.load(pos_ptr) + 1)
            tl.atomic_xchg(cnt_ptr, 0, sem="relaxed")


# (BLOCK_N, BLOCK_K, warps, STAGES): what the first call per shape times on a GPU. 262,144 rows of 3,840 bf16
# (7.5 KB): 16 rows are 16,384 programs of 123 KB, ~124 a SM, each with 8-16 KB of loads in flight per step.
LM_HEAD_CONFIGS = ((16, 256, 4, 1), (16, 512, 8, 1), (32, 256, 8, 1), (8, 512, 4, 1), (16, 256, 4, 3),
                   (32, 128, 4, 3), (64, 128, 8, 2), (8, 256, 4, 4))


def _workspace(device) -> tuple[torch.Tensor, torch.Tensor]:
    """The running best key (uint64, stored as int64) and the arrival counter (scratch: left zeroed by each
    call's last program)."""
    return (scratch.zeroed("lm_head best key", device, (1,), torch.int64),
            scratch.zeroed("lm_head counter", device, (1,), torch.int32))


def lm_head_greedy(h: torch.Tensor, embed: torch.Tensor, cap: float, token: torch.Tensor,
                   pos: torch.Tensor | None = None, config: tuple[int, int, int, int] | None = None,
                   tuning=None) -> torch.Tensor:
    """h [1, K] (the final-normed hidden state), embed [V, K] -> soft-capped logits [1, V] fp32; the greedy
    token written into token[0] and, with pos, pos[0] += 1. On a GPU without a config the first call per shape
    times LM_HEAD_CONFIGS (CUDA events, outside any graph capture) and `tuning` (a tuner.Tuning) keeps the
    fastest."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    v, k = embed.shape
    if h.dim() != 2 or tuple(h.shape) != (1, k):
        raise ValueError(f"h must be [1, {k}], got {tuple(h.shape)}")
    if not (h.is_contiguous() and embed.is_contiguous()):
        raise ValueError("h and embed must be contiguous")
    logits = torch.empty((1, v), dtype=torch.float32, device=h.device)
    mode = pdl_mode(h.device)
    opts = launch_opts(mode)
    # the bulk L2 prefetch wants 16-byte aligned starts: every row start is when the base is and a row is a
    # multiple of 16 bytes
    aligned = embed.data_ptr() % 16 == 0 and (k * embed.element_size()) % 16 == 0 and embed.element_size() == 2
    pf = prefetch_bytes(h.device) if aligned else 0

    def launch(bn, bk, warps, stages, mats=(embed,), out=(token, pos)):
        best, cnt = _workspace(h.device)
        tok, ps = out
        _lm_head_kernel[(triton.cdiv(v, bn),)](h, mats[0], logits, best.view(torch.uint64), cnt, tok,
                                               ps if ps is not None else tok, v, k, float(cap), pf, BLOCK_N=bn,
                                               BLOCK_K=bk, STAGES=stages, EVEN=v % bn == 0 and k % bk == 0,
                                               ADVANCE=ps is not None, num_warps=warps, **opts)

    if config is not None:
        launch(*config)
    elif h.device.type != "cuda":  # the interpreter: few, big programs (its cost is per operation)
        launch(64, min(256, triton.next_power_of_2(k)), 4, 1)
    else:
        from llmsize.measure.tuner import Tuning

        # timed on a spare token and position: the real ones must not move while configs are tried
        spare = (token.clone(), None if pos is None else pos.clone())
        configs = [c for c in LM_HEAD_CONFIGS if c[1] <= triton.next_power_of_2(k)]
        launch(*(tuning or Tuning()).best(("lm_head", v, k, embed.dtype),
                                          lambda *c, mats: launch(*c, mats=mats, out=spare), configs, (embed,)))
    return logits


def lm_head_reference(h: torch.Tensor, embed: torch.Tensor, cap: float) -> torch.Tensor:
    """The eager step's arithmetic: cap * tanh(F.linear(h, embed).float() / cap)."""
    return cap * torch.tanh(torch.nn.functional.linear(h, embed).float() / cap)


_checked: dict[str, bool] = {}


def lm_head_ok(device) -> bool:
    """Whether the kernel computes what the eager ops do on this device: every config in LM_HEAD_CONFIGS on a
    random bf16 head of 4,096 x 3,840 (Gemma 4's row length, so each config masks its columns as it will on
    the real head; 301 x 64 under the interpreter), then one on 5,003 rows (a multiple of no tile). Logits
    within bf16 rounding of the reference, the token the first argmax of those logits, the position advanced
    by one; each case twice, so a key or counter left non-zero shows; then the best row copied to its
    neighbour, where the first of the two must win; then all logits negative (the key's order for negative
    values). Once per device."""
    return once_per_device(_checked, device, _lm_head_matches)


def _lm_head_matches(device) -> bool:
    gen = torch.Generator(device=device).manual_seed(0)
    if torch.device(device).type == "cuda":
        cases = [((4096, 3840), c) for c in LM_HEAD_CONFIGS] + [((5003, 3840), LM_HEAD_CONFIGS[0])]
    else:  # the interpreter's cost is per program
        cases = [((301, 64), (64, 64, 4, 1)), ((301, 64), (2, 64, 1, 1))]
    for (v, k), cfg in cases:
        embed = (torch.randn(v, k, device=device, generator=gen) * 0.05).to(torch.bfloat16)
        for _ in range(2):
            h = torch.randn(1, k, device=device, generator=gen).to(torch.bfloat16)
            tok = torch.full((1,), -1, dtype=torch.long, device=device)
            pos = torch.full((1,), 41, dtype=torch.long, device=device)
            got = lm_head_greedy(h, embed, 30.0, tok, pos, config=cfg)
            want = lm_head_reference(h, embed, 30.0)
            # the two sums may round to neighbouring bf16 values: one step is 2^-7 of the logit (x tanh' <= 1)
            if not (torch.allclose(got, want, rtol=2 ** -7, atol=0.05) and int(tok) == int(got.argmax(-1))
                    and int(pos) == 42):
                return False
        # a tie (the best row copied to its neighbour, the same program or the next): the first wins
        best = int(tok)
        twin = best ^ 1 if best ^ 1 < v else best - 1
        tied = embed.clone()
        tied[twin] = tied[best]
        lm_head_greedy(h, tied, 30.0, tok, None, config=cfg)
        if int(tok) != min(best, twin):
            return False
        got = lm_head_greedy(h.abs(), -embed.abs(), 30.0, tok, None, config=cfg)
        if not (bool((got < 0).all()) and int(tok) == int(got.argmax(-1))):
            return False
    return True


def _graph_us(fn, device, reps: int = 20) -> float:
    """Mean time of fn replayed from a CUDA graph, after a warm-up (microseconds)."""
    replay = capture_step(torch, fn, device)
    for _ in range(3):
        replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def choose(embed: torch.Tensor, cap: float) -> dict:
    """On a GPU: this kernel or the eager ops (cuBLAS GEMV, soft-cap, argmax, token copy, pos += 1), each timed
    from a CUDA graph on a random h; the kernel when it is no slower. {"kernel": "triton" | "cublas",
    "triton_us", "cublas_us", "config"}, or {"kernel": "cublas", "error"} when the timing itself failed."""
    try:
        return _choose(embed, cap)
    except Exception as e:  # a failure to time (a graph capture the driver refuses, say): the eager ops
        return {"kernel": "cublas", "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}


def _choose(embed: torch.Tensor, cap: float) -> dict:
    device = embed.device
    gen = torch.Generator(device=device).manual_seed(0)
    h = torch.randn(1, embed.shape[1], device=device, generator=gen).to(embed.dtype)
    tok = torch.zeros(1, dtype=torch.long, device=device)
    pos = torch.zeros(1, dtype=torch.long, device=device)
    from llmsize.measure.tuner import Tuning

    tuning = Tuning()
    lm_head_greedy(h, embed, cap, tok, pos, tuning=tuning)  # the first call times the configs

    def eager():
        tok.copy_(lm_head_reference(h, embed, cap).argmax(-1))
        pos.add_(1)

    t_triton = _graph_us(lambda: lm_head_greedy(h, embed, cap, tok, pos, tuning=tuning), device)
    t_cublas = _graph_us(eager, device)
    return {"kernel": "triton" if t_triton <= t_cublas else "cublas", "triton_us": t_triton,
            "cublas_us": t_cublas, "config": list(tuning.chosen("lm_head")[(*embed.shape, embed.dtype)])}
