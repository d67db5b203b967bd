"""The lm_head kernel (GEMV, soft-cap, greedy token, pos += 1 in one launch), and at batch > 1 the soft-cap and
tokens after cuBLAS's GEMM (cap_argmax), run by Triton's interpreter on the CPU, against the eager ops they
replace: cap * tanh(F.linear(h, E).float() / cap), argmax, pos + 1."""

import pytest
import torch

from llmsize.measure import gemv, lm_head, scratch

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
    embed = torch.randn(300, 64) * 0.05
    h = torch.randn(1, 64)
    best = int((embed @ h[0]).argmax())
    for copy_to in (best - 1, best + 1, best - 40, best + 40, 0, 299):  # the same program or another one
        copy_to = copy_to % 300
        e = embed.clone()
        e[copy_to] = e[best]
        _, tok, _ = _run(h, e, config=(2, 64, 1, 1))  # 150 programs of two rows
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


@pytest.mark.parametrize("b, v, block, dtype", [
    (1, 300, 128, torch.float32),    # one row, a ragged last block
    (5, 1000, 256, torch.bfloat16),  # bf16 logits (as cuBLAS's GEMM gives them on a GPU)
    (20, 513, 512, torch.float32),   # 20 rows, one entry past a block
])
def test_cap_argmax_matches_the_eager_ops(b, v, block, dtype):
    """The batch tail: cap * tanh(y / cap) in fp32 and each row's first argmax, as the eager step computes them;
    ties planted across a block boundary and within a block, in two rows; twice (keys and counter left zeroed);
    the position advanced once per call."""
    torch.manual_seed(b + v)
    y = (torch.randn(b, v) * 10).to(dtype)
    best = y.float().argmax(-1)
    if b > 1:
        y[0, block - 1] = y[0, block] = y[0].max() + 1  # a tie across the first block boundary
        y[b - 1, 3] = y[b - 1, 7] = y[b - 1].max() + 1  # a tie inside a block
    want = 30.0 * torch.tanh(y.float() / 30.0)
    pos = torch.tensor([7])
    for call in range(2):
        tok = torch.full((b,), -1, dtype=torch.long)
        got = lm_head.cap_argmax(y, 30.0, tok, pos, block=block)
        assert got.dtype == torch.float32 and got.shape == (b, v)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        assert torch.equal(tok, want.argmax(-1)) and int(pos) == 8 + call
    if b > 1:
        assert int(tok[0]) == block - 1 and int(tok[b - 1]) == 3
    else:
        assert int(tok[0]) == int(best[0])
    keys = scratch.zeroed("cap_argmax keys", torch.device("cpu"), (lm_head.MAX_CAP_ROWS,), torch.int64)
    cnt = scratch.zeroed("cap_argmax counter", torch.device("cpu"), (1,), torch.int32)
    assert not keys.any() and not cnt.any()


def test_cap_argmax_negative_logits_and_refusals():
    """All logits negative (the key's order for negative values): the largest, i.e. the least negative, wins;
    a 1-D input or more rows than the key workspace holds are refused."""
    y = -torch.rand(3, 400) - 0.5
    y[1, 250] = -0.01
    tok = torch.zeros(3, dtype=torch.long)
    got = lm_head.cap_argmax(y, 30.0, tok, block=128)
    assert torch.equal(tok, got.argmax(-1)) and int(tok[1]) == 250
    for bad in (torch.zeros(400), torch.zeros(257, 8)):
        with pytest.raises(ValueError, match="y must be"):
            lm_head.cap_argmax(bad, 30.0, torch.zeros(257, dtype=torch.long))


def test_cap_argmax_self_check_passes_and_catches_a_wrong_token(monkeypatch):
    """What measure runs before using the tail kernel at batch > 1: passes as built; a kernel whose keys lose
    the first-row rule (tokens off by one on ties) fails it."""
    monkeypatch.setattr(lm_head, "_cap_checked", {})
    assert lm_head.cap_argmax_ok(torch.device("cpu"))
    real = lm_head.cap_argmax

    def last_of_ties(y, cap, token, pos=None, block=lm_head.CAP_BLOCK):
        out = real(y, cap, token, pos, block=block)
        flipped = out.flip(-1).argmax(-1)
        token.copy_(out.shape[1] - 1 - flipped)  # the last of equal maxima instead of the first
        return out
    monkeypatch.setattr(lm_head, "cap_argmax", last_of_ties)
    monkeypatch.setattr(lm_head, "_cap_checked", {})
    assert not lm_head.cap_argmax_ok(torch.device("cpu"))
