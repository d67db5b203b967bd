"""NVFP4 format: codes, rounding, packing, quantization against a float reference.

Facts from shared/reference/nvfp4-format.md (ModelOpt nvfp4_tensor.py, compressed-tensors fp4_quantized.py).
"""

import pytest
import torch

from llmsize.measure import nvfp4

# ModelOpt e2m1_values / compressed-tensors FLOAT_TO_E2M1: codes 0..15, bit 3 = sign.
EXPECTED = [0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6]


def test_every_code_round_trips():
    codes = torch.arange(16, dtype=torch.uint8)
    values = nvfp4.e2m1_values(codes)
    assert values.tolist() == EXPECTED
    back = nvfp4.e2m1_codes(values)
    # -0 (code 8) is written as +0 (code 0); every other code comes back as itself.
    assert back.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11, 12, 13, 14, 15]


@pytest.mark.parametrize("x, want", [
    # compressed-tensors cast_to_fp4: ties go to the even code (round-half-to-even on the E2M1 grid).
    (0.25, 0.0), (0.75, 1.0), (1.25, 1.0), (1.75, 2.0), (2.5, 2.0), (3.5, 4.0), (5.0, 4.0),
    # just off a tie: nearest wins
    (0.2500001, 0.5), (0.7499999, 0.5), (2.5000002, 3.0), (4.9999995, 4.0), (5.0000005, 6.0),
    # saturation at 6, and signs
    (7.0, 6.0), (1e9, 6.0), (-0.75, -1.0), (-5.5, -6.0), (-0.1, 0.0),
])
def test_rounding_is_nearest_even_and_saturates(x, want):
    code = nvfp4.e2m1_codes(torch.tensor([x]))
    assert nvfp4.e2m1_values(code).item() == want


def test_rounding_matches_brute_force_nearest():
    x = torch.linspace(-7, 7, 20001)
    got = nvfp4.e2m1_values(nvfp4.e2m1_codes(x))
    grid = torch.tensor(EXPECTED[:8])
    d = (x.abs().clamp(max=6)[:, None] - grid[None, :]).abs()
    best = grid[d.argmin(dim=1)]
    dist_got = (x.abs().clamp(max=6) - got.abs()).abs()
    dist_best = (x.abs().clamp(max=6) - best).abs()
    assert torch.equal(dist_got, dist_best)  # always a nearest grid point (ties checked above)


def test_packing_order_even_column_in_low_nibble():
    codes = torch.tensor([[1, 2, 3, 15]], dtype=torch.uint8)
    packed = nvfp4.pack(codes)
    # NeMo/ModelOpt: packed = (q[..., 1::2] << 4) | q[..., 0::2]
    assert packed.tolist() == [[0x21, 0xF3]]
    assert torch.equal(nvfp4.unpack(packed), codes)


def _float_reference_quantize(w: torch.Tensor):
    """Element by element, in float64, from the recipe in nvfp4-format.md (ModelOpt)."""
    n, k = w.shape
    s2 = w.abs().max().item() / (6 * 448)
    out = torch.empty(n, k, dtype=torch.float64)
    grid = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    for r in range(n):
        for b in range(k // 16):
            blk = w[r, 16 * b:16 * b + 16].double()
            scale = torch.tensor(blk.abs().max().item() / (6 * s2)).float().to(torch.float8_e4m3fn).double().item()
            for j in range(16):
                v = blk[j].item() / (scale * torch.tensor(s2, dtype=torch.float32).double().item())
                m = min(abs(v), 6.0)
                best = min(grid, key=lambda g: (abs(m - g), grid.index(g) % 2))  # nearest, tie -> even code
                out[r, 16 * b + j] = (best if v >= 0 else -best) * scale * s2
    return out


def test_quantize_matches_float_reference():
    torch.manual_seed(0)
    w = torch.randn(6, 64) * 0.02
    q = nvfp4.quantize(w)
    ref = _float_reference_quantize(w)
    torch.testing.assert_close(q.dequantize(torch.float64), ref, rtol=1e-6, atol=0)


def test_quantize_shapes_bytes_and_error():
    torch.manual_seed(1)
    w = torch.randn(32, 128)
    q = nvfp4.quantize(w)
    assert q.packed.shape == (32, 64) and q.packed.dtype == torch.uint8
    assert q.scales.shape == (32, 8) and q.scales.dtype == torch.float8_e4m3fn
    assert q.shape == (32, 128)
    # 4.5 bits per weight + 4 B per row multiplier: (32*128*4 + 32*8*8)/8 + 32*4
    assert q.packed_bytes + q.scale_bytes == 32 * 128 // 2 + 32 * 8 + 32 * 4
    err = (q.dequantize() - w).abs() / w.abs().max()
    # E2M1's coarsest step is 2 (between 4 and 6): half a step at the block max = 1/6 of it.
    assert err.max() <= 1 / 6 + 1e-6
    rel = ((q.dequantize() - w).norm() / w.norm()).item()
    assert 0.02 < rel < 0.15  # a real 4-bit quantization: neither lossless nor broken


def test_block_max_hits_the_top_code_and_scale():
    w = torch.zeros(1, 32)
    w[0, 3] = -2.0
    w[0, 20] = 0.5
    q = nvfp4.quantize(w)
    codes = nvfp4.unpack(q.packed)[0]
    assert codes[3].item() == 15 and codes[20].item() == 7  # each block's max maps to +-6
    torch.testing.assert_close(q.dequantize()[0, [3, 20]], torch.tensor([-2.0, 0.5]), rtol=2e-2, atol=0)


def test_rejects_k_not_multiple_of_16():
    with pytest.raises(ValueError, match="multiple of 16"):
        nvfp4.quantize(torch.randn(4, 40))


def test_fused_rows_keep_each_part_exact():
    torch.manual_seed(2)
    a, b = torch.randn(8, 32), torch.randn(4, 32) * 100
    qa, qb = nvfp4.quantize(a), nvfp4.quantize(b)
    fused = nvfp4.concat_rows([qa, qb])
    torch.testing.assert_close(fused.dequantize(), torch.cat([qa.dequantize(), qb.dequantize()]), rtol=0, atol=0)
    sa, sb = nvfp4.split_rows(fused, [8, 4])
    assert torch.equal(sa.packed, qa.packed) and torch.equal(sb.row_scale, qb.row_scale)


def test_dequantize_in_row_chunks_is_the_same():
    torch.manual_seed(5)
    q = nvfp4.quantize(torch.randn(37, 64))
    torch.testing.assert_close(q.dequantize(rows_per_chunk=5), q.dequantize(rows_per_chunk=1000), rtol=0, atol=0)


def test_dequantize_copies_nothing_from_the_host_once_warm(monkeypatch):
    """A CUDA graph capture refuses a host-to-device copy, and the fused step's self-check dequantizes inside
    its captured steps (gemv "torch", `llmsize measure --quant bf16`): on an H200 on 2026-12-04 the check failed
    with "Cannot copy between CPU and CUDA tensors during CUDA graph capture", because the E2M1 table was made
    from a Python tuple on every call. Once made, the table is reused: a second dequantize with torch.tensor
    forbidden gives the same matrix."""
    torch.manual_seed(7)
    q = nvfp4.quantize(torch.randn(8, 32))
    want = q.dequantize()

    def no_host_data(*a, **k):
        raise AssertionError("torch.tensor called: a host-to-device copy under a CUDA graph capture")

    monkeypatch.setattr(nvfp4.torch, "tensor", no_host_data)
    torch.testing.assert_close(q.dequantize(), want, rtol=0, atol=0)


def test_quantize_in_row_chunks_is_the_same():
    torch.manual_seed(6)
    w = torch.randn(37, 64)
    a, b = nvfp4.quantize(w, rows_per_chunk=4), nvfp4.quantize(w, rows_per_chunk=4096)
    assert torch.equal(a.packed, b.packed) and torch.equal(a.scales.view(torch.uint8), b.scales.view(torch.uint8))
    assert torch.equal(a.row_scale, b.row_scale)
