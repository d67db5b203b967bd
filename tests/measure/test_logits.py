"""The end of the fused decode step after cuBLAS's lm_head GEMM: the soft-cap and greedy tokens in one kernel
(logits.cap_argmax), run by Triton's interpreter on the CPU, against the eager ops it replaces:
cap * tanh(y.float() / cap), argmax, pos + 1."""

import pytest
import torch

from llmsize.measure import gemv, logits, scratch, selfcheck

pytestmark = pytest.mark.skipif(not gemv.triton_available(), reason="triton not installed")


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
        got = logits.cap_argmax(y, 30.0, tok, pos, block=block)
        assert got.dtype == torch.float32 and got.shape == (b, v)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        assert torch.equal(tok, want.argmax(-1)) and int(pos) == 8 + call
    if b > 1:
        assert int(tok[0]) == block - 1 and int(tok[b - 1]) == 3
    else:
        assert int(tok[0]) == int(best[0])
    keys = scratch.zeroed("cap_argmax keys", torch.device("cpu"), (logits.MAX_CAP_ROWS,), torch.int64)
    cnt = scratch.zeroed("cap_argmax counter", torch.device("cpu"), (1,), torch.int32)
    assert not keys.any() and not cnt.any()


def test_cap_argmax_negative_logits_and_refusals():
    """All logits negative (the key's order for negative values): the largest, i.e. the least negative, wins;
    a 1-D input or more rows than the key workspace holds are refused."""
    y = -torch.rand(3, 400) - 0.5
    y[1, 250] = -0.01
    tok = torch.zeros(3, dtype=torch.long)
    got = logits.cap_argmax(y, 30.0, tok, block=128)
    assert torch.equal(tok, got.argmax(-1)) and int(tok[1]) == 250
    for bad in (torch.zeros(400), torch.zeros(257, 8)):
        with pytest.raises(ValueError, match="y must be"):
            logits.cap_argmax(bad, 30.0, torch.zeros(257, dtype=torch.long))


def test_cap_argmax_self_check_passes_and_catches_a_wrong_token(monkeypatch):
    """What measure runs before ending the fused step with the tail kernel: passes as built; a kernel whose keys lose
    the first-row rule (tokens off by one on ties) fails it."""
    monkeypatch.setattr(selfcheck, "_cap_checked", {})
    assert selfcheck.cap_argmax_ok(torch.device("cpu"))
    real = logits.cap_argmax

    def last_of_ties(y, cap, token, pos=None, block=logits.CAP_BLOCK):
        out = real(y, cap, token, pos, block=block)
        flipped = out.flip(-1).argmax(-1)
        token.copy_(out.shape[1] - 1 - flipped)  # the last of equal maxima instead of the first
        return out
    monkeypatch.setattr(logits, "cap_argmax", last_of_ties)
    monkeypatch.setattr(selfcheck, "_cap_checked", {})
    assert not selfcheck.cap_argmax_ok(torch.device("cpu"))
