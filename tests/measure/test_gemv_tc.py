"""The tensor-core word GEMV (llmsize.measure.gemv_tc), run by Triton's interpreter on the CPU (its plain-Triton
emulation of the inline PTX), against the float32 reference; and the batch dispatcher in front of it."""

import pytest
import torch

from llmsize.measure import gemv, gemv_tc, gemv_words, nvfp4

SCALES = [448.0, 1.0, 2.0 ** -7, 2.0 ** -9, 6.0, 0.5, 2.0 ** -6, 3.5]  # the largest E4M3, subnormals, in between


@pytest.mark.parametrize("n, k, batch, block_n, block_w, block_b", [
    (32, 128, 1, 32, 16, None),     # one exact tile (the EVEN path), one row
    (40, 48, 3, 16, 4, None),       # N ragged, K = 6 words: a tile of 4 words, then 2 masked
    (130, 272, 4, 32, 16, None),    # K = 34 words: a ragged last step; 4 rows
    (64, 512, 16, 64, 32, None),    # 16 rows, two steps of 32 words
    (64, 256, 5, 32, 8, None),      # 5 rows, 4 steps of 8 words
    (40, 48, 40, 16, 4, 32),        # above 16 rows: two row blocks of 32, the second ragged (8 rows)
    (64, 256, 70, 32, 8, 64),       # 70 rows in blocks of 64: 2 x 2 programs, the last row block 6 rows
    (32, 128, 17, 32, 16, None),    # 17 rows: the default row block above 16 (64, mostly padding)
    (16, 64, 33, 16, 4, 16),        # 33 rows in 3 blocks of 16
])
def test_tc_kernel_matches_reference(n, k, batch, block_n, block_w, block_b):
    """fp16 weights times fp16 activations, exact products summed in fp32: to the reference's rounding, for any
    mix-up of codes, pairs, words, block scales, the activations' permutation or their row blocks would be
    O(1) here."""
    torch.manual_seed(n + 5 * k + batch)
    w = nvfp4.quantize(torch.randn(n, k) * 0.05)
    x = torch.randn(batch, k).to(torch.float16).float()  # fp16-representable: the kernel's operand dtype
    got = gemv_tc.nvfp4_gemv_tc(x, w, block_n=block_n, block_w=block_w, block_b=block_b)
    torch.testing.assert_close(got, gemv.nvfp4_linear_reference(x, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n, k, batch, block_n, block_w, split_k, block_b", [
    (64, 512, 4, 32, 8, 4, None),     # 64 words in 4 splits of 16: exact tiles
    (40, 272, 3, 16, 4, 3, None),     # 34 words in splits of 12, 12, 10: ragged rows and a ragged last split
    (130, 256, 16, 64, 16, 2, None),  # 16 rows, 3 row blocks (the last ragged), 2 splits
    (130, 256, 40, 64, 16, 2, 32),    # 40 rows: 3 weight blocks x 2 row blocks, each with its counter, 2 splits
])
def test_tc_split_k_equals_one_pass(n, k, batch, block_n, block_w, split_k, block_b):
    """Split over K: the partial sums meet in the fp32 workspace and the last program of each row block stores
    them; twice in a row, so a call that left the workspace or a counter dirty would show in the second."""
    torch.manual_seed(n + k + split_k)
    w = nvfp4.quantize(torch.randn(n, k) * 0.05)
    x = torch.randn(batch, k).to(torch.float16).float()
    want = gemv.nvfp4_linear_reference(x, w)
    for _ in range(2):
        got = gemv_tc.nvfp4_gemv_tc(x, w, block_n=block_n, block_w=block_w, split_k=split_k, block_b=block_b)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    ws, cnt = gemv_words.split_workspace(torch.device("cpu"), batch, n)
    assert not ws.any() and not cnt.any()


@pytest.mark.parametrize("inter, k, batch, block_n, block_w, split_k, dtype", [
    (32, 128, 3, 32, 16, 1, torch.float32),    # 2 programs of 16 gate + 16 up rows (EVEN)
    (40, 272, 5, 32, 8, 3, torch.bfloat16),    # ragged: 40 outputs in blocks of 16, 34 words in 3 splits; bf16
    (24, 64, 16, 16, 4, 2, torch.float32),     # 16 rows
    (24, 64, 33, 16, 4, 2, torch.float32),     # 33 rows in row blocks of 64 (the default above 16)
])
def test_tc_glu_epilogue_equals_gemv_then_geglu(inter, k, batch, block_n, block_w, split_k, dtype):
    """gate | up with the GeGLU in the epilogue (a program: half gate rows, half the matching up rows) gives what
    the plain kernel followed by the fused step's geglu kernel gives: the same roundings, and the same sums up
    to their order (a row sits elsewhere in the dot's tile, and the interpreter's float32 matmul may sum it
    otherwise: ~1e-7 relative)."""
    from llmsize.measure import fused
    torch.manual_seed(inter + k + batch)
    w = nvfp4.quantize(torch.randn(2 * inter, k) * 0.1)
    x = torch.randn(batch, k).to(dtype)
    for _ in range(2):  # (split: the workspace left zeroed)
        got = gemv_tc.nvfp4_gemv_tc(x, w, block_n=block_n, block_w=block_w, split_k=split_k, glu=True)
        plain = gemv_tc.nvfp4_gemv_tc(x, w, block_n=block_n, block_w=block_w, split_k=split_k)
        assert got.shape == (batch, inter) and got.dtype == dtype
        tol = (1e-5, 1e-6) if dtype == torch.float32 else (8e-3, 1e-3)  # bf16: one rounding step at most
        torch.testing.assert_close(got.float(), fused.geglu(plain).float(), rtol=tol[0], atol=tol[1])


def test_tc_kernel_decodes_every_code_and_subnormal_scales():
    """One-hot rows pick one column each: every code at every position of a word and of the K tile, every kind
    of E4M3 scale, exactly (the products are exact in fp16 and nothing else is added)."""
    codes = torch.roll(torch.arange(16, dtype=torch.uint8).repeat(16, 8), shifts=3, dims=1)  # [16, 128]
    scale_vals = torch.tensor(SCALES).repeat(16, 1)
    w = nvfp4.Nvfp4Weight(nvfp4.pack(codes), scale_vals.to(torch.float8_e4m3fn), torch.full((16,), 0.5))
    for start in range(0, 128, 16):
        xs = torch.eye(128)[start:start + 16]  # 16 rows: row b picks column start + b
        got = gemv_tc.nvfp4_gemv_tc(xs, w, block_n=16, block_w=16)  # [16 rows of x, 16 rows of W]
        for b in range(16):
            col = start + b
            want = nvfp4.E2M1_VALUES[int(codes[0, col])] * scale_vals[0, col // 16].item() * 0.5
            assert got[b, 0].item() == want, (col, got[b, 0].item(), want)


def test_tc_scales_by_bits_equal_the_conversion(monkeypatch):
    """Ampere (sm_80) has no e4m3 conversion instruction: there the scale's fp16 bits are built (value x 2^-8)
    and multiplied by 2^15; the same bits as the conversion x 2^7 for every E4M3 scale."""
    torch.manual_seed(11)
    codes = torch.randint(0, 16, (32, 256), dtype=torch.uint8)
    w = nvfp4.Nvfp4Weight(nvfp4.pack(codes), torch.tensor(SCALES).repeat(32, 2).to(torch.float8_e4m3fn),
                          torch.rand(32) + 0.5)
    x = torch.randn(3, 256).to(torch.float16).float()
    native = gemv_tc.nvfp4_gemv_tc(x, w, block_n=32, block_w=16)
    monkeypatch.setattr(gemv_tc, "e4m3_cvt", lambda device: False)
    assert torch.equal(gemv_tc.nvfp4_gemv_tc(x, w, block_n=32, block_w=16), native)
    torch.testing.assert_close(native, gemv.nvfp4_linear_reference(x, w), rtol=1e-4, atol=1e-4)  # fp32 sums


def test_tc_kernel_bf16_io_and_fp16_saturation():
    """bf16 in and out; an activation beyond fp16's range is taken as +-65,504 (saturated, not infinite)."""
    torch.manual_seed(5)
    w = nvfp4.quantize(torch.randn(48, 256))
    x = torch.randn(2, 256).to(torch.bfloat16)
    got = gemv_tc.nvfp4_gemv_tc(x, w, block_n=16, block_w=16)
    assert got.dtype == torch.bfloat16 and got.shape == (2, 48)
    torch.testing.assert_close(got.float(), gemv.nvfp4_linear_reference(x.float(), w), rtol=2e-2, atol=2e-2)
    big = torch.zeros(1, 256)
    big[0, 7], big[0, 100] = 1e6, -3e5
    clamped = big.clamp(-65504, 65504)
    got = gemv_tc.nvfp4_gemv_tc(big, w, block_n=16, block_w=16)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, gemv.nvfp4_linear_reference(clamped, w), rtol=1e-5, atol=1e-3)


def test_tc_kernel_refuses_what_it_cannot_serve():
    w = nvfp4.quantize(torch.randn(16, 64))
    with pytest.raises(ValueError, match="B <= 256"):
        gemv_tc.nvfp4_gemv_tc(torch.randn(257, 64), w)
    for bb in (8, 48):
        with pytest.raises(ValueError, match=f"block_b must be a power of two from 16, got {bb}"):
            gemv_tc.nvfp4_gemv_tc(torch.randn(20, 64), w, block_b=bb)
    with pytest.raises(ValueError, match="multiple of 4 words"):
        gemv_tc.nvfp4_gemv_tc(torch.randn(2, 64), w, block_w=6)
    with pytest.raises(ValueError, match="split_k"):
        gemv_tc.nvfp4_gemv_tc(torch.randn(2, 64), w, block_w=4, split_k=0)
    with pytest.raises(ValueError, match="even number of rows"):
        gemv_tc.nvfp4_gemv_tc(torch.randn(2, 64), nvfp4.quantize(torch.randn(15, 64)), glu=True)


def test_batch_dispatch_skips_kernels_that_failed_their_self_check(monkeypatch):
    """nvfp4_gemv_batch: the tensor-core kernel; where it failed on the card (`off`) it is never called: up to
    16 rows then go to gemv.py's byte kernel."""
    torch.manual_seed(3)
    w = nvfp4.quantize(torch.randn(32, 128) * 0.05)
    calls = []

    def spy(name, fn):
        def wrapped(*a, **kw):
            calls.append(name)
            return fn(*a, **kw)
        return wrapped
    monkeypatch.setattr(gemv_tc, "nvfp4_gemv_tc", spy("tc", gemv_tc.nvfp4_gemv_tc))
    monkeypatch.setattr(gemv_tc, "nvfp4_gemv", spy("byte", gemv.nvfp4_gemv))
    x = torch.randn(6, 128).to(torch.float16).float()
    want = gemv.nvfp4_linear_reference(x, w)
    for off, rows, expected in ((set(), 3, "tc"), ({"tc"}, 3, "byte"), ({"tc"}, 6, "byte"), ({"tc"}, 2, "byte")):
        calls.clear()
        got = gemv_tc.nvfp4_gemv_batch(x[:rows], w, off=frozenset(off))
        assert calls == [expected], (off, rows, calls)
        torch.testing.assert_close(got.float(), want[:rows], rtol=2e-2, atol=2e-2)
    # above 16 rows: the tensor-core kernel's row blocks, unless they (or the kernel) failed on the card; then a
    # dense dequantized copy (the byte kernel takes 16 rows at most here), into `out` when given
    x40 = torch.randn(40, 128).to(torch.float16).float()
    want40 = gemv.nvfp4_linear_reference(x40, w)
    for off, expected in ((set(), ["tc"]), ({"wide"}, []), ({"tc"}, [])):
        calls.clear()
        out = torch.full((40, 32), float("nan"))
        got = gemv_tc.nvfp4_gemv_batch(x40, w, out=out, off=frozenset(off))
        assert calls == expected and got is out, (off, calls)
        torch.testing.assert_close(got, want40, rtol=1e-5, atol=1e-5)
    calls.clear()  # "wide" off: the row blocks are not needed up to 16 rows
    gemv_tc.nvfp4_gemv_batch(x[:6], w, off=frozenset({"wide"}))
    assert calls == ["tc"]


def test_configs_timed_by_rows():
    """Up to 16 rows, the 16-row programs; above, the wide ones, none with more rows a program than the batch
    rounded up to a power of two; every configuration's tiles are what the kernel accepts."""
    assert gemv_tc.configs_for(1) == gemv_tc.configs_for(16) == gemv_tc.TC_CONFIGS
    assert {c[4] for c in gemv_tc.configs_for(17)} == {32}
    assert {c[4] for c in gemv_tc.configs_for(40)} == {32, 64}
    assert gemv_tc.configs_for(256) == gemv_tc.TC_WIDE_CONFIGS
    for bn, bw, warps, split, bb in gemv_tc.TC_CONFIGS + gemv_tc.TC_WIDE_CONFIGS:
        assert bb & (bb - 1) == 0 and bb >= gemv_tc.ROW_BLOCK and bw % 4 == 0 and split >= 1
        assert (bb == gemv_tc.ROW_BLOCK) == ((bn, bw, warps, split, bb) in gemv_tc.TC_CONFIGS)
    from llmsize.measure import run
    assert run.MAX_BATCH == gemv_tc.MAX_ROWS
