"""How much the word kernel's fp16 lanes cost in accuracy, on the CPU through Triton's interpreter (no GPU):

    TRITON_INTERPRET=1 python benchmarks/words_accuracy.py

1. One GEMV row of Gemma 4 12B's width (K = 3,840): the kernel (eight products per fp16 lane, then fp32) against
   the float32 reference of the same fp16 activations, beside what rounding the exact result to bf16 costs.
2. The toy model decoded past twice its window, fused step against eager step, both through the word kernel:
   the per-step logit drift that selfcheck.fused_step_ok's bound for Triton GEMVs is set against.
"""

from __future__ import annotations

import torch

from llmsize.measure import gemma4, gemv, gemv_words, nvfp4


def gemv_rows() -> None:
    print("GEMV, 64 x 3840, mean |error| / mean |result|")
    print(f"{'activations':22s} {'word kernel':>12s} {'bf16 rounding':>14s}")
    for name, make in (("normal", lambda g: torch.randn(1, 3840, generator=g)),
                       ("heavy tails", lambda g: torch.randn(1, 3840, generator=g)
                        * torch.exp(torch.randn(1, 3840, generator=g))),
                       ("normal x 30", lambda g: 30 * torch.randn(1, 3840, generator=g))):
        errs, bf = [], []
        for seed in range(3):
            g = torch.Generator().manual_seed(seed)
            w = nvfp4.quantize(torch.randn(64, 3840, generator=g) * 0.02)
            x = make(g).to(torch.float16).float()
            want = gemv.nvfp4_linear_reference(x, w)
            got = gemv_words.nvfp4_gemv_words(x, w, block_n=32, block_w=16)
            errs.append(((got - want).abs().mean() / want.abs().mean()).item())
            bf.append(((want.to(torch.bfloat16).float() - want).abs().mean() / want.abs().mean()).item())
        print(f"{name:22s} {sum(errs) / 3:12.2e} {sum(bf) / 3:14.2e}")


def fused_drift() -> None:
    cfg = gemma4.GEMMA4_TINY
    w = gemma4.build_random(cfg, device="cpu", dtype=torch.float32, seed=0)
    steps = 2 * cfg.sliding_window + 3
    outs, tokens = [], []
    for fused in (False, True):
        dec = gemma4.Gemma4Decoder(w, batch=1, max_positions=steps + 4, gemv="words", fused=fused)
        dec.prefill(torch.tensor([[3, 1, 4]]))
        got, tok = [], []
        for _ in range(steps):
            tok.append(int(dec.token[0]))
            got.append(dec.decode_step()[0].clone())
        outs.append(torch.stack(got))
        tokens.append(tok)
    d = (outs[0] - outs[1]).abs()
    print(f"\ntoy model, {steps} steps, fused vs eager through the word kernel: same greedy tokens: "
          f"{tokens[0] == tokens[1]}; mean |logit| {outs[0].abs().mean().item():.3f}")
    print("max |logit difference| per step: " + " ".join(f"{v:.3f}" for v in d.max(1).values.tolist()))
    print(f"mean |difference| {d.mean().item():.4f}")


if __name__ == "__main__":
    gemv_rows()
    fused_drift()
