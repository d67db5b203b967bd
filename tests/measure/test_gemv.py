"""The Triton NVFP4 GEMV, run by Triton's interpreter on the CPU, against the float32 torch reference."""

import pytest
import torch

from llmsize.measure import gemv, nvfp4

pytestmark = pytest.mark.skipif(not gemv.triton_available(), reason="triton not installed")


@pytest.mark.parametrize("n, k, batch, block_n, block_k", [
    (32, 256, 1, 32, 256),    # exact tiles
    (37, 48, 1, 16, 32),      # N and K not multiples of the tile
    (130, 272, 2, 32, 64),    # K = 17 blocks of 16, ragged last tile; batch 2
    (5, 16, 3, 8, 128),       # one block of K, tile bigger than the matrix
])
def test_kernel_matches_reference(n, k, batch, block_n, block_k):
    torch.manual_seed(n * 1000 + k)
    w = nvfp4.quantize(torch.randn(n, k) * 0.05)
    x = torch.randn(batch, k)
    want = gemv.nvfp4_linear_reference(x, w)
    got = gemv.nvfp4_gemv(x, w, block_n=block_n, block_k=block_k)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_kernel_decodes_every_code_and_subnormal_scales():
    # every E2M1 code in a row, with scales down to E4M3 subnormals (< 2^-6) and up to 448
    codes = torch.arange(16, dtype=torch.uint8).repeat(1, 4)  # [1, 64]
    scale_vals = torch.tensor([[448.0, 1.0, 2.0 ** -7, 2.0 ** -9]])
    w = nvfp4.Nvfp4Weight(nvfp4.pack(codes), scale_vals.to(torch.float8_e4m3fn), torch.tensor([0.5]))
    x = torch.zeros(1, 64)
    for j in range(64):
        x.zero_()
        x[0, j] = 1.0
        got = gemv.nvfp4_gemv(x, w, block_n=8, block_k=32)
        want = nvfp4.E2M1_VALUES[j % 16] * scale_vals[0, j // 16].item() * 0.5
        assert got.item() == want, (j, got.item(), want)


def test_bf16_input_and_output():
    torch.manual_seed(3)
    w = nvfp4.quantize(torch.randn(24, 96))
    x = torch.randn(1, 96).to(torch.bfloat16)
    got = gemv.nvfp4_gemv(x, w, block_n=16, block_k=64)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), gemv.nvfp4_linear_reference(x.float(), w), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("n, k, batch", [(40, 48, 1), (130, 272, 4), (64, 128, 16)])
def test_dot_kernel_matches_reference_for_batches(n, k, batch):
    """The tensor-core variant: one pass over the weights for up to 16 sequences; code x scale is exact in
    fp16 (<= 6 significant bits), activations are rounded to fp16."""
    torch.manual_seed(n + k + batch)
    w = nvfp4.quantize(torch.randn(n, k) * 0.05)
    x = torch.randn(batch, k).to(torch.float16).float()  # fp16-representable: the kernel's operand dtype
    got = gemv.nvfp4_gemv_dot(x, w, block_n=32, block_k=32)
    torch.testing.assert_close(got, gemv.nvfp4_linear_reference(x, w), rtol=1e-5, atol=1e-5)
