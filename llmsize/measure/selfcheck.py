"""The self-checks that run on the card before `llmsize measure` trusts a kernel: each compares a shipped Triton
kernel (or the fused step around it) with the plain reference on small random data, once per device. The GEMVs'
and the fused step's modules hold no checks of their own, so nothing below them imports the decoder.
"""

from __future__ import annotations

import torch

from llmsize.measure import fused, gemma4, gemv_tc, gemv_words, logits
from llmsize.measure.gemv import nvfp4_linear_reference
from llmsize.measure.gemv_words import BATCH_FEATURES, WIDE_FEATURES
from llmsize.measure.gpu import capture_step
from llmsize.measure.nvfp4 import quantize
from llmsize.measure.reference import attention_reference

_words_checked: dict[str, bool] = {}
_paths_checked: dict[tuple[str, str], bool] = {}  # (device, path) -> passed, for the optional paths checked so far


def words_kernel_check(device, batch: int = 1) -> tuple[bool, frozenset[str]]:
    """Whether the word kernel's PTX computes what the reference does on this GPU (checked once per device on a
    small random matrix: every code, real scales), and which of its optional paths a run of this batch uses fail
    (pipelined, split over K, activations in 4-byte loads; with batch > 1 also the tensor-core one in gemv_tc;
    above 16 rows its row blocks; each checked once per device). gemv_words.WORDS_FEATURES names them."""
    key = str(device)
    _last_why[key] = ""  # this check says no more than which paths failed
    try:
        gen = torch.Generator(device=device).manual_seed(0)
        w = quantize(torch.randn(256, 512, device=device, generator=gen) * 0.05)
        x = torch.randn(1, 512, device=device, generator=gen).to(torch.bfloat16)
        x16 = torch.randn(16, 512, device=device, generator=gen).to(torch.bfloat16)
        want = nvfp4_linear_reference(x.float(), w)

        def close(got, ref=want):
            return bool(torch.allclose(got.float(), ref, rtol=2e-2, atol=2e-2))

        def tc_ok():
            def geglu_ref(r):  # w as gate | up (128 + 128 rows)
                y = nvfp4_linear_reference(x16[:r].float(), w)
                return torch.nn.functional.gelu(y[:, :128], approximate="tanh") * y[:, 128:]
            return all(close(gemv_tc.nvfp4_gemv_tc(x16[:r], w, block_n=bn, block_w=16, split_k=split),
                             nvfp4_linear_reference(x16[:r].float(), w))
                       for r in (2, 5, 16) for bn in (64, 128) for split in (1, 4, 4)) and all(  # (twice: zeroed)
                close(gemv_tc.nvfp4_gemv_tc(x16[:r], w, block_n=64, block_w=16, split_k=split, glu=True), geglu_ref(r))
                for r in (2, 16) for split in (1, 4))

        def wide_ok():  # 40 rows: two row blocks of 32 (the second ragged) or one of 64, 128 (mostly padding)
            x40 = torch.randn(40, 512, device=device, generator=gen).to(torch.bfloat16)
            want40 = nvfp4_linear_reference(x40.float(), w)
            y = gemv_tc.nvfp4_gemv_tc(x40, w, block_n=64, block_w=16, glu=True, block_b=32)
            glu40 = torch.nn.functional.gelu(want40[:, :128], approximate="tanh") * want40[:, 128:]
            return close(y, glu40) and all(
                close(gemv_tc.nvfp4_gemv_tc(x40, w, block_n=bn, block_w=16, split_k=split, block_b=bb, num_warps=warps),
                      want40)
                for bn, bb, warps in ((64, 32, 4), (128, 64, 8), (128, 128, 8)) for split in (1, 4, 4))

        if key not in _words_checked:
            _words_checked[key] = close(gemv_words.nvfp4_gemv_words(x, w, block_n=32, block_w=16))
        paths = {"stages": lambda: close(gemv_words.nvfp4_gemv_words(x, w, block_n=32, block_w=16, stages=3)),
                 # twice: the split path must leave its workspace zeroed
                 "split": lambda: all(close(gemv_words.nvfp4_gemv_words(x, w, block_n=32, block_w=16, split_k=4))
                                      for _ in range(2)),
                 "x4": lambda: close(gemv_words.nvfp4_gemv_words(x, w, block_n=32, block_w=16, x_wide=False)),
                 "tc": tc_ok, "wide": wide_ok}
        for name, check in paths.items():
            if (key, name) in _paths_checked or (name in BATCH_FEATURES and batch < 2) or (
                    name in WIDE_FEATURES and batch <= 16):
                continue
            try:
                _paths_checked[key, name] = bool(_words_checked[key] and check())
            except Exception:  # a path that fails to build or launch here fails its check
                _paths_checked[key, name] = False
    except Exception:  # PTX the card's driver refuses, say
        _words_checked[key] = False
    used = [n for n in gemv_words.WORDS_FEATURES
            if (batch > 1 or n not in BATCH_FEATURES) and (batch > 16 or n not in WIDE_FEATURES)]
    return _words_checked[key], frozenset(n for n in used if not _paths_checked.get((key, n), True))


_step_checked: dict[tuple, bool] = {}


def fused_step_ok(device, gemv: str = "torch", fold: bool = True) -> bool:
    """Whether the fused step reproduces the eager one on this device with this NVFP4 kernel: a Gemma-4-shaped
    toy model in float32 decoded past twice its window both ways, once per device and kernel, before `llmsize
    measure` uses the fused step by default. With "torch" (the GEMVs as plain matmuls) only these kernels
    differ; with a Triton GEMV the same kernel runs in both steps, so what is checked as well is how the fused
    step feeds it (the word kernel's inputs packed by these kernels; with `fold`, its GeGLU and residual-norm
    epilogues)."""
    return once_per_device(_step_checked, device, _fused_matches_eager, gemv, fold)


_attn_checked: dict[tuple, bool] = {}


def attention_ok(device, fold_combine: bool) -> bool:
    """Whether `attention` over several cache slices matches the eager ops on this device, with the combine in
    its own kernel or folded into the last slice of each KV head: the fused-step check's toy model has one
    slice per layer (a 4-slot window; slices are 32 rows at least), so neither combine path would be exercised
    there. Two sequences, a 100-slot cache in four slices of one block (GQA) or two of two blocks (K = V), the
    last partly past the position, five positions in a row through the same counters; once per device and
    path."""
    return once_per_device(_attn_checked, device, _attention_matches_eager, fold_combine)


def _attention_matches_eager(device, fold: bool) -> bool | tuple[bool, str]:
    dt = torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    gen = torch.Generator(device=device).manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, device=device, generator=gen)

    b, slots, hd, eps = 2, 100, 64, 1e-6
    inv = 1.0 / 10000 ** (torch.arange(0, hd, 2, device=device) / hd)
    ang = torch.arange(128, device=device)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    qn, kn = rand(hd).abs() + 0.5, rand(hd).abs() + 0.5
    for kvh, nh, k_eq_v in ((2, 4, False), (1, 8, True)):
        k_off = nh * hd
        v_off = k_off if k_eq_v else k_off + kvh * hd
        for pos in (0, 31, 32, 70, 99):
            kc, vc = rand(b, kvh, slots, hd).to(dt), rand(b, kvh, slots, hd).to(dt)
            want_kc, want_vc = kc.clone(), vc.clone()
            qkv = rand(b, v_off + kvh * hd).to(dt)
            p = torch.tensor([pos], device=device)
            # slices of 32 (one block; GQA) or 64 (two blocks, the second read in the kernel's loop; K = V)
            got = fused.attention(qkv, qn, kn, cos, sin, p, kc, vc, nh, k_off, v_off, eps, split=32 * (1 + k_eq_v),
                            fold_combine=fold)
            want_kc, want_vc, want = attention_reference(qkv, qn, kn, cos, sin, pos, want_kc, want_vc, nh, k_off,
                                                         v_off, eps)
            tol = 2e-2 if dt == torch.bfloat16 else 1e-4  # bf16: the probabilities rounded for the PV dot
            for name, a, w in (("K cache", kc, want_kc), ("V cache", vc, want_vc), ("output", got, want)):
                if not torch.allclose(a.float(), w.float(), rtol=tol, atol=tol):
                    off = (a.float() - w.float()).abs().max().item()
                    return False, (f"{name} off by {off:.3g} at most ({kvh} KV heads, position {pos}, {dt}); "
                                   f"allowed {tol:g} + {tol:g} |value|")
    return True


def _fused_matches_eager(device, gemv: str, fold: bool) -> tuple[bool, str]:
    cfg = gemma4.GEMMA4_TINY
    w = gemma4.build_random(cfg, device=device, dtype=torch.float32, seed=0)
    prompt = torch.tensor([[3, 1, 4]], device=device)
    steps = 2 * cfg.sliding_window + 3
    outs = []
    for use_fused in (False, True):
        dec = gemma4.Gemma4Decoder(w, batch=1, max_positions=steps + 4, gemv=gemv, fused=use_fused, fold=fold)
        dec.prefill(prompt)
        got = [dec.decode_step()[0].clone() for _ in range(steps - 3)]
        if use_fused and device.type == "cuda":  # the last steps replayed from a CUDA graph, as measure runs them
            outs_ = []  # the warm-up step's logits, then the captured step's output buffer
            replay = capture_step(torch, lambda: outs_.append(dec.decode_step()), device)
            got.append(outs_[0][0].clone())
            for _ in range(2):
                replay()
                got.append(outs_[1][0].clone())
        else:
            got += [dec.decode_step()[0].clone() for _ in range(3)]
        outs.append(torch.stack(got))
    err = (outs[0] - outs[1]).abs()
    found = (f"logits off by {err.mean().item():.3g} on average and {err.max().item():.3g} at most over "
             f"{len(outs[0])} steps (mean |logit| {outs[0].abs().mean().item():.3g})")
    if gemv == "torch":  # float32 both ways: equal to float32 rounding
        return bool(torch.allclose(outs[0], outs[1], rtol=1e-3, atol=5e-3)), found + "; allowed 5e-3 + 1e-3 |logit|"
    # a Triton GEMV rounds its inputs to fp16 (the word kernel) or its operands (the others): the two steps'
    # float32 activations differ in the last bits, which moves an fp16 rounding now and then and drifts the
    # logits by ~0.1 over the run (0.003-0.1 per step for a mean |logit| of 0.8 under the interpreter:
    # benchmarks/words_accuracy.py). A wrong packing or epilogue is off by the size of the logits themselves.
    return (bool(err.mean() < 0.02 * outs[0].abs().mean() and err.max() < 0.25),
            found + "; allowed 2% of the mean |logit| on average, 0.25 at most")


_cap_checked: dict[tuple, bool] = {}


def cap_argmax_ok(device) -> bool:
    """Whether logits.cap_argmax computes what the eager ops do on this device (once per device): random bf16
    logits of 5 x 5,003 (a multiple of no block) and 20 x 262,144 (Gemma 4's vocabulary), each twice (keys and
    counter left zeroed), then a tie planted in every row (its best copied to a neighbour: the first wins),
    then all logits negative."""
    return once_per_device(_cap_checked, device, _cap_argmax_matches)


_why: dict[tuple, str] = {}  # (check, device, arguments) -> why that check failed, in words
_last_why: dict[str, str] = {}  # device -> why the last check asked for there failed ("" if it passed)


def once_per_device(cache: dict, device, check, *args) -> bool:
    """check(device, *args), once per device and arguments (cached in `cache`); a kernel that fails to build or
    launch there fails its check. A check returns passed, or (passed, what it found); why it failed (what it
    found, or the exception's first line) is kept for last_failure."""
    key = (str(device), *args)
    if key not in cache:
        try:
            got = check(device, *args)
            ok, found = got if isinstance(got, tuple) else (bool(got), "")
        except Exception as e:  # noqa: BLE001 - any failure to build, launch or run is the check's failure
            first = (str(e).strip().splitlines() or [""])[0][:200]
            ok, found = False, f"{type(e).__name__}: {first}" if first else type(e).__name__
        cache[key] = bool(ok)
        _why[(check.__name__, *key)] = "" if ok else found
    _last_why[str(device)] = _why.get((check.__name__, *key), "")
    return cache[key]


def last_failure(device) -> str:
    """Why the last check asked for on this device failed, in words ("" if it passed or said nothing)."""
    return _last_why.get(str(device), "")


def _cap_argmax_matches(device) -> bool:
    gen = torch.Generator(device=device).manual_seed(0)
    shapes = ((5, 5003), (20, 262144)) if torch.device(device).type == "cuda" else ((5, 5003), (3, 700))
    block = logits.CAP_BLOCK if torch.device(device).type == "cuda" else 512
    for b, v in shapes:
        y = (torch.randn(b, v, device=device, generator=gen) * 8).to(torch.bfloat16)
        for case in ("plain", "again", "tie", "negative"):
            if case == "tie":  # each row's best copied to its neighbour
                best = y.float().argmax(-1)
                twin = torch.where(best + 1 < v, best + 1, best - 1)
                y[torch.arange(b, device=device), twin] = y[torch.arange(b, device=device), best]
            if case == "negative":
                y = -y.abs() - 1
            tok = torch.full((b,), -1, dtype=torch.long, device=device)
            pos = torch.full((1,), 41, dtype=torch.long, device=device)
            got = logits.cap_argmax(y, 30.0, tok, pos, block=block)
            want = 30.0 * torch.tanh(y.float() / 30.0)
            if not (torch.allclose(got, want, rtol=1e-5, atol=1e-5) and torch.equal(tok, want.argmax(-1))
                    and int(pos) == 42):
                return False
    return True
