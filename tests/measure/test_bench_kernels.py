"""The kernels under benchmarks/kernels (not shipped: timed on a card against the shipped ones), run by Triton's
interpreter on the CPU against the float reference, so that what gemv_bench.py and step_variants.py time is
right: the tensor-core dot and pairs GEMVs, the 2-4-row word GEMV, and the lm_head kernel (GEMV, soft-cap,
greedy token, pos += 1 in one launch) against the eager ops cap * tanh(F.linear(h, E).float() / cap), argmax,
pos + 1."""

import sys
from pathlib import Path

import pytest
import torch

from llmsize.measure import gemv, gemv_words, nvfp4

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.kernels import gemv_dot, gemv_rows, lm_head  # noqa: E402

pytestmark = pytest.mark.skipif(not gemv.triton_available(), reason="triton not installed")


def _run(h, embed, config=None, pos=7):
    tok = torch.full((1,), -1, dtype=torch.long)
    p = torch.tensor([pos])
    logits = lm_head.lm_head_greedy(h, embed, 30.0, tok, p, config=config)
    return logits, int(tok), int(p)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("v, k, config", [
    (1000, 96, None),           # the interpreter's default tile; V and K multiples of no tile
    (300, 64, (16, 32, 4, 2)),  # exact tiles, pipelined loop
    (301, 32, (2, 32, 1, 1)),   # 151 programs offering their best, the last one half empty
])
def test_kernel_matches_the_eager_ops(dtype, v, k, config):
    torch.manual_seed(v + k)
    embed = (torch.randn(v, k) * 0.05).to(dtype)
    h = torch.randn(1, k).to(dtype)
    got, tok, pos = _run(h, embed, config)
    want = lm_head.lm_head_reference(h, embed, 30.0)
    # float32: accumulation order only. bf16: the logit rounded to bf16 as F.linear's output (0.0078 = one
    # bf16 step at |y| in [1, 2), times tanh' <= 1), when the two sums round to neighbouring bf16 values
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5 if dtype == torch.float32 else 0.02)
    assert tok == int(got.argmax(-1))  # the token is its own logits' argmax, first of equals ...
    assert tok == int(want.argmax(-1))  # ... and here the eager ops' token too (random rows, no near-ties)
    assert pos == 8


def test_equal_best_rows_give_the_first_as_torch_argmax():
    torch.manual_seed(3)
    embed = torch.randn(80, 64) * 0.05
    h = torch.randn(1, 64)
    best = int((embed @ h[0]).argmax())
    for copy_to in (best - 1, best + 1, best - 20, best + 20, 0, 79):  # the same program or another one
        copy_to = copy_to % 80
        e = embed.clone()
        e[copy_to] = e[best]
        _, tok, _ = _run(h, e, config=(2, 64, 1, 1))  # 40 programs of two rows
        assert tok == min(best, copy_to)


def test_negative_logits_and_signed_zeros_order_as_torch():
    """The key orders negative logits by their value (all bits flipped), and zeros above them, equal ones by row."""
    torch.manual_seed(5)
    h = torch.rand(1, 64) + 0.1
    embed = -(torch.rand(200, 64) + 0.1)  # every logit negative
    got, tok, _ = _run(h, embed, config=(8, 64, 4, 1))
    assert (got < 0).all() and tok == int(got.argmax(-1))
    zeros = torch.zeros(200, 64)
    zeros[:50] = embed[:50]  # rows 50-199 give 0, all equal and above the negative ones: the first of them wins
    _, tok, _ = _run(h, zeros, config=(8, 64, 4, 1))
    assert tok == 50


def test_key_and_counter_are_left_zeroed_for_the_next_call_and_pos_optional():
    """A CUDA graph replays the kernel with the same workspace: each call's last program re-zeroes the key
    and the counter. Without pos, the position is left alone (the kernel writes only the token)."""
    torch.manual_seed(4)
    embed = torch.randn(500, 64) * 0.05
    for i in range(3):
        h = torch.randn(1, 64)
        tok = torch.zeros(1, dtype=torch.long)
        lm_head.lm_head_greedy(h, embed, 30.0, tok, None, config=(16, 64, 4, 1))
        assert int(tok) == int((embed @ h[0]).argmax()), i
    key, cnt = lm_head._workspace(torch.device("cpu"))
    assert int(key) == 0 and int(cnt) == 0


def test_bad_h_is_refused_with_the_shape():
    with pytest.raises(ValueError, match=r"h must be \[1, 64\], got \(2, 64\)"):
        lm_head.lm_head_greedy(torch.zeros(2, 64), torch.zeros(10, 64), 30.0, torch.zeros(1, dtype=torch.long))


def test_self_check_passes_and_catches_a_wrong_token(monkeypatch):
    """The check measure runs before using the kernel: passes as built; fails on a kernel whose logits are
    right but whose token is not their argmax (so a fold or a tie-break gone wrong on a card is caught)."""
    monkeypatch.setattr(lm_head, "_checked", {})
    assert lm_head.lm_head_ok(torch.device("cpu"))
    real = lm_head.lm_head_greedy

    def off_by_one(h, embed, cap, token, pos=None, config=None):
        out = real(h, embed, cap, token, pos, config)
        token.add_(1)
        return out
    monkeypatch.setattr(lm_head, "lm_head_greedy", off_by_one)
    monkeypatch.setattr(lm_head, "_checked", {})
    assert not lm_head.lm_head_ok(torch.device("cpu"))


def test_choice_falls_back_to_the_eager_ops_when_timing_fails():
    """choose() times both ways from CUDA graphs; where that cannot run (here: no GPU) it keeps the eager ops
    and says why, rather than stopping `llmsize measure` with a traceback."""
    pick = lm_head.choose(torch.randn(300, 64).to(torch.bfloat16), 30.0)
    assert pick["kernel"] == "cublas" and pick["error"]


@pytest.mark.parametrize("n, k, batch", [(40, 48, 1), (130, 272, 4), (64, 128, 16)])
def test_dot_kernel_matches_reference_for_batches(n, k, batch):
    """The tensor-core variant: one pass over the weights for up to 16 sequences; code x scale is exact in
    fp16 (<= 6 significant bits), activations are rounded to fp16."""
    torch.manual_seed(n + k + batch)
    w = nvfp4.quantize(torch.randn(n, k) * 0.05)
    x = torch.randn(batch, k).to(torch.float16).float()  # fp16-representable: the kernel's operand dtype
    got = gemv_dot.nvfp4_gemv_dot(x, w, block_n=32, block_k=32)
    torch.testing.assert_close(got, gemv.nvfp4_linear_reference(x, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n, k, batch, block_n, block_w", [
    (32, 128, 1, 16, 16),     # one exact tile
    (40, 48, 1, 16, 16),      # N ragged, K = 6 words: the tile's word tail masked
    (130, 272, 4, 32, 16),    # K = 34 words: a ragged last step; batch 4
    (64, 512, 16, 64, 32),    # batch 16, two steps of 32 words
])
def test_pairs_kernel_matches_reference(n, k, batch, block_n, block_w):
    """Two codes per integer op: the word decode puts columns 8j+3-p and 8j+7-p into fp16 halves; any mix-up of
    columns, nibbles or block scales shows here against the float32 reference."""
    torch.manual_seed(n + 7 * k + batch)
    w = nvfp4.quantize(torch.randn(n, k) * 0.05)
    x = torch.randn(batch, k).to(torch.float16).float()  # fp16-representable: the kernel's operand dtype
    got = gemv_dot.nvfp4_gemv_pairs(x, w, block_n=block_n, block_w=block_w)
    torch.testing.assert_close(got, gemv.nvfp4_linear_reference(x, w), rtol=1e-5, atol=1e-5)


def test_pairs_kernel_decodes_every_code_and_subnormal_scales():
    codes = torch.arange(16, dtype=torch.uint8).repeat(16, 8)  # [16, 128]: every code at every column phase
    codes = torch.roll(codes, shifts=3, dims=1)
    scale_vals = torch.tensor([448.0, 1.0, 2.0 ** -7, 2.0 ** -9, 6.0, 0.5, 2.0 ** -6, 3.5]).repeat(16, 1)
    w = nvfp4.Nvfp4Weight(nvfp4.pack(codes), scale_vals.to(torch.float8_e4m3fn), torch.full((16,), 0.5))
    for start in range(0, 128, 16):
        xs = torch.eye(128)[start:start + 16]  # 16 one-hot rows: batch b picks column start + b
        got = gemv_dot.nvfp4_gemv_pairs(xs, w, block_n=16, block_w=16)  # [16 batch, 16 rows]
        for b in range(16):
            col = start + b
            want = nvfp4.E2M1_VALUES[int(codes[0, col])] * scale_vals[0, col // 16].item() * 0.5
            assert got[b, 0].item() == want, (col, got[b, 0].item(), want)


def test_pairs_kernel_bf16_io():
    torch.manual_seed(5)
    w = nvfp4.quantize(torch.randn(48, 256))
    x = torch.randn(2, 256).to(torch.bfloat16)
    got = gemv_dot.nvfp4_gemv_pairs(x, w, block_n=16, block_w=16)
    assert got.dtype == torch.bfloat16 and got.shape == (2, 48)
    torch.testing.assert_close(got.float(), gemv.nvfp4_linear_reference(x.float(), w), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("n, k, batch, block_n, block_w", [
    (32, 256, 2, 32, 32),     # exact tiles (EVEN)
    (40, 48, 3, 16, 4),       # ragged rows, K = 6 words, 3 rows padded to 4
    (130, 272, 4, 32, 16),    # K = 34 words, 4 rows
])
def test_rows_kernel_equals_the_one_row_kernel_per_row(n, k, batch, block_n, block_w):
    """Batch 2-4 in one weight pass (each word decoded once, then multiplied into every row): each row is
    bit-identical to the one-row word kernel on that row (same arithmetic, same order), and close to the float
    reference."""
    torch.manual_seed(n + k + batch)
    w = nvfp4.quantize(torch.randn(n, k) * 0.05)
    x = torch.randn(batch, k).to(torch.float16).float()
    got = gemv_rows.nvfp4_gemv_rows(x, w, block_n=block_n, block_w=block_w)
    for i in range(batch):
        assert torch.equal(got[i:i + 1], gemv_words.nvfp4_gemv_words(x[i:i + 1], w, block_n=block_n,
                                                                     block_w=block_w)), i
    torch.testing.assert_close(got, gemv.nvfp4_linear_reference(x, w), rtol=2e-3, atol=2e-3)


def test_rows_kernel_refuses_more_rows_than_it_serves():
    w = nvfp4.quantize(torch.randn(16, 32))
    for bad in (1, 5):
        with pytest.raises(ValueError, match="2 <= B <= 4"):
            gemv_rows.nvfp4_gemv_rows(torch.randn(bad, 32), w)



def test_the_lab_decoder_runs_the_benchmark_kernels_in_a_step():
    """benchmarks/kernels/decoder.LabDecoder, what step_variants.py and profile_decode.py time: the toy model
    decoded a few steps through the pairs GEMV, then through the fused step ending in the lm_head kernel (which
    writes the token and advances the position itself), each against the float32 reference."""
    from benchmarks.kernels.decoder import LabDecoder
    from llmsize.measure import gemma4, reference
    w = gemma4.build_random(gemma4.GEMMA4_TINY, device="cpu", dtype=torch.float32, seed=6)
    for settings, tol in (({"gemv": "pairs"}, 0.1), ({"gemv": "torch", "fused": True, "lm_head": "triton"}, 1e-3)):
        dec = LabDecoder(w, batch=1, max_positions=8, **settings)
        tokens = [7]
        got = [dec.prefill(torch.tensor([tokens]))[0]]
        for _ in range(3):
            tokens.append(int(dec.token[0]))
            got.append(dec.decode_step()[0])
        assert int(dec.pos) == 4, settings
        want = reference.forward(w, tokens)
        assert (torch.stack(got) - want).abs().max() < tol, settings
    with pytest.raises(ValueError, match="lm_head must be"):
        LabDecoder(w, batch=1, max_positions=8, lm_head="cublas")
