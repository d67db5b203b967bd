"""On a CUDA GPU only (skipped elsewhere): the compiled Triton kernel on Gemma 4 12B shapes, and the tiny
model's CUDA-graph decode, each against the float32 reference. Run by benchmarks/measure_gpu.sh."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("n, k", [(8192, 3840), (3840, 4096), (30720, 3840), (3840, 15360), (1000, 272)])
def test_kernel_on_gemma_shapes(n, k):
    from llmsize.measure import gemv, nvfp4
    torch.manual_seed(0)
    w = nvfp4.quantize(torch.randn(n, k, device="cuda") / k ** 0.5)
    x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    want = gemv.nvfp4_linear_reference(x.float(), w)
    got = gemv.nvfp4_gemv(x, w).float()
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("fused, kernel, pdl, cap_argmax", [
    (False, "triton", "2", False), (True, "triton", "2", False), (True, "words", "2", False),
    (True, "words", "2", True), (True, "words", "1", True), (True, "words", "0", True)])
def test_tiny_decode_in_a_cuda_graph_matches_reference(fused, kernel, pdl, cap_argmax, monkeypatch):
    """Every PDL mode of launch.py (2: early trigger and L2 prefetch; 1: wait first; 0: off, the default), the
    step ending in cuBLAS + torch ops or in the soft-cap and token kernel (which also writes the token and the
    position the next replay reads)."""
    import dataclasses
    monkeypatch.setenv("LLMSIZE_PDL", pdl)

    from llmsize.measure import gemma4, nvfp4, reference
    cfg = gemma4.GEMMA4_TINY
    w = gemma4.build_random(cfg, device="cuda", dtype=torch.float32, seed=0)
    prompt = [3]  # one-row prefill: every linear goes through the batch-1 kernel (float32 math)
    steps = 2 * cfg.sliding_window + 3
    dec = gemma4.Gemma4Decoder(w, batch=1, max_positions=len(prompt) + steps + 4, gemv=kernel, fused=fused,
                               cap_argmax=cap_argmax)
    seq = list(prompt)
    seq.append(int(dec.prefill(torch.tensor([prompt], device="cuda")).argmax(-1)[0]))
    got = [dec.decode_step()[0].clone()]  # eager: compiles the kernels
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got.append(dec.decode_step()[0].clone())
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = dec.decode_step()
    for _ in range(steps):
        g.replay()
        got.append(out[0].clone())
    torch.cuda.synchronize()
    seq += [int(lg.argmax()) for lg in got[:-1]]  # each step fed the previous step's greedy token

    def cpu(x):
        return x.to("cpu") if isinstance(x, (torch.Tensor, nvfp4.Nvfp4Weight)) else x
    layers = [type(lw)(**{f.name: cpu(getattr(lw, f.name)) for f in dataclasses.fields(lw)}) for lw in w.layers]
    w_cpu = gemma4.Gemma4Weights(cfg, w.embed.cpu(), w.final_norm.cpu(), layers)
    want = reference.forward(w_cpu, seq)[len(prompt):]
    if kernel == "words":  # fp16 lanes: the CPU test's bound (tests/measure/test_gemma4_decode.py)
        err = (torch.stack(got).cpu() - want).abs()
        assert err.mean() < 0.02 * want.abs().mean() and err.max() < 0.1
    else:
        torch.testing.assert_close(torch.stack(got).cpu(), want, rtol=1e-3, atol=5e-3)


def test_fused_step_self_check_for_the_bf16_baseline():
    """The check `llmsize measure --quant bf16` runs before its fused step (GEMVs as torch matmuls over
    dequantized weights, the last steps captured in a CUDA graph). It failed on an H200 on 2026-12-04: the E2M1
    table was copied from the host inside the capture (tests/measure/test_nvfp4.py)."""
    from llmsize.measure import selfcheck
    selfcheck._step_checked.clear()
    ok = selfcheck.fused_step_ok(torch.device("cuda"), "torch")
    assert ok, selfcheck.last_failure(torch.device("cuda"))


def test_fused_bf16_step_close_to_the_eager_one():
    """Gemma 4 12B widths in bf16 on the GPU (the cache read through bf16 tensor-core dots): the fused step's
    logits against the eager step's for the same weights and prompt, a few steps in. Two layers, one of each
    kind: through all 48 random layers the two steps' bf16 roundings drift apart by the size of the logits
    (1.10 on average, 7.3 at most, on an H200 on 2026-12-04), as the eager step's own bf16 and fp32 runs do
    (tests/measure/test_gemma4_decode.py::test_rounding_grows_with_depth_in_a_random_model): only a shallow
    model tells a wrong kernel (off by the logits) from rounding."""
    import dataclasses
    from llmsize.measure import gemma4
    cfg = dataclasses.replace(gemma4.GEMMA4_12B, layer_types=(gemma4.SLIDING, gemma4.FULL))
    w = gemma4.build_random(cfg, device="cuda", dtype=torch.bfloat16, quant="nvfp4", seed=0)
    prompt = torch.randint(0, cfg.vocab_size, (1, 1100), device="cuda")  # past the 1,024-token window
    outs = []
    for fused in (False, True):
        dec = gemma4.Gemma4Decoder(w, batch=1, max_positions=1200, gemv="triton", fused=fused)
        dec.prefill(prompt)
        outs.append(torch.stack([dec.decode_step()[0].float() for _ in range(4)]))
    err = (outs[0] - outs[1]).abs()
    assert err.mean() < 0.1 * outs[0].abs().mean() and err.max() < 1.0, (err.mean().item(), err.max().item())


@pytest.mark.parametrize("n, k", [(8192, 3840), (3840, 15360), (30720, 3840), (1000, 272)])
def test_words_kernel_on_gemma_shapes(n, k):
    """The fp16x2 PTX of the word kernel (its CPU tests run a lane-by-lane emulation) against the reference,
    the autotuned path included."""
    from llmsize.measure import gemv, gemv_words, nvfp4, selfcheck
    torch.manual_seed(n)
    w = nvfp4.quantize(torch.randn(n, k, device="cuda") / k ** 0.5)
    x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    want = gemv.nvfp4_linear_reference(x.float(), w)
    torch.testing.assert_close(gemv_words.nvfp4_gemv_words(x, w).float(), want, rtol=2e-2, atol=2e-2)
    assert selfcheck.words_kernel_check(torch.device("cuda")) == (True, frozenset())


def test_word_family_self_checks_pass_on_the_card():
    """What `llmsize measure` checks before using the word kernels: the one-row kernel and every optional path
    (pipelined, split over K, tensor cores, their row blocks above 16 rows); none may be left out
    on a Hopper card."""
    from llmsize.measure import gemv_words, selfcheck
    assert selfcheck.words_kernel_check(torch.device("cuda"), batch=64) == (True, frozenset())
    assert {name for _, name in selfcheck._paths_checked} == set(gemv_words.WORDS_FEATURES)


def test_words_kernel_decodes_every_code_on_the_gpu():
    from llmsize.measure import gemv_words, nvfp4
    codes = torch.roll(torch.arange(16, dtype=torch.uint8, device="cuda").repeat(16, 8), shifts=5, dims=1)
    scale_vals = torch.tensor([448.0, 1.0, 2.0 ** -7, 2.0 ** -9, 6.0, 0.5, 2.0 ** -6, 3.5], device="cuda").repeat(16, 1)
    w = nvfp4.Nvfp4Weight(nvfp4.pack(codes), scale_vals.to(torch.float8_e4m3fn), torch.full((16,), 0.5, device="cuda"))
    for col in range(128):
        x = torch.zeros(1, 128, device="cuda")
        x[0, col] = 1.0
        got = gemv_words.nvfp4_gemv_words(x, w, block_n=16, block_w=16)[0, 0].item()
        assert got == nvfp4.E2M1_VALUES[int(codes[0, col])] * scale_vals[0, col // 16].item() * 0.5, col


@pytest.mark.parametrize("n, k", [(3840, 15360), (3840, 4096), (30720, 3840)])
@pytest.mark.parametrize("stages, split", [(1, 1), (3, 1), (3, 3), (3, 4)])
def test_words_kernel_every_configuration(n, k, stages, split):
    """Each pipelining depth and K split the per-shape timing may pick, against the reference, three calls in a
    row (the split path's workspace left zeroed by each); gate | up with the GeGLU for the widest shape."""
    from llmsize.measure import gemv, gemv_words, nvfp4
    torch.manual_seed(k + split)
    w = nvfp4.quantize(torch.randn(n, k, device="cuda") / k ** 0.5)
    x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    ref = gemv.nvfp4_linear_reference(x.float(), w)
    glu = n == 30720
    if glu:
        ref = torch.nn.functional.gelu(ref[:, :n // 2], approximate="tanh") * ref[:, n // 2:]
    for _ in range(3):
        got = gemv_words.nvfp4_gemv_words(x, w, block_n=32, block_w=32, num_warps=4, stages=stages, split_k=split,
                                          glu=glu).float()
        torch.testing.assert_close(got, ref, rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("n, k", [(8192, 3840), (3840, 15360), (1000, 272)])
@pytest.mark.parametrize("rows", [1, 2, 4, 16, 40, 256])
def test_tc_kernel_on_gemma_shapes(n, k, rows):
    """The tensor-core word kernel's PTX (autotuned path, every configuration that divides the shape, and the
    ragged one) against the float32 reference."""
    from llmsize.measure import gemv, gemv_tc, nvfp4
    torch.manual_seed(n + rows)
    w = nvfp4.quantize(torch.randn(n, k, device="cuda") / k ** 0.5)
    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    want = gemv.nvfp4_linear_reference(x.float(), w)
    torch.testing.assert_close(gemv_tc.nvfp4_gemv_tc(x, w).float(), want, rtol=2e-2, atol=2e-2)
    for bn, bw, warps, split, bb in gemv_tc.configs_for(rows):
        for _ in range(2):  # twice: a split run must leave its workspace and counters zeroed
            got = gemv_tc.nvfp4_gemv_tc(x, w, block_n=bn, block_w=bw, num_warps=warps, split_k=split,
                                        block_b=bb).float()
            torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("rows", [2, 16, 100])
def test_tc_geglu_epilogue_on_the_gemma_gate_up(rows):
    """The gate | up pass with the GeGLU folded in (autotuned) against the float32 reference's GEMV then
    gelu_tanh(gate) * up, on Gemma 4 12B's 2 x 15,360 x 3,840."""
    import torch.nn.functional as F

    from llmsize.measure import gemv, gemv_tc, nvfp4
    torch.manual_seed(rows)
    w = nvfp4.quantize(torch.randn(30720, 3840, device="cuda") / 62)
    x = torch.randn(rows, 3840, device="cuda", dtype=torch.bfloat16)
    y = gemv.nvfp4_linear_reference(x.float(), w)
    want = F.gelu(y[:, :15360], approximate="tanh") * y[:, 15360:]
    torch.testing.assert_close(gemv_tc.nvfp4_gemv_tc(x, w, glu=True).float(), want, rtol=2e-2, atol=2e-2)


def test_tc_kernel_decodes_every_code_and_scale_on_the_gpu(monkeypatch):
    """Every code at every position of a word, E4M3 subnormal and largest scales, exactly; also through the
    sm_80 scale path (bits, x 2^15), which this card can run too."""
    from llmsize.measure import gemv_tc, nvfp4
    codes = torch.roll(torch.arange(16, dtype=torch.uint8, device="cuda").repeat(16, 8), shifts=3, dims=1)
    vals = [448.0, 1.0, 2.0 ** -7, 2.0 ** -9, 6.0, 0.5, 2.0 ** -6, 3.5]
    scale_vals = torch.tensor(vals, device="cuda").repeat(16, 1)
    w = nvfp4.Nvfp4Weight(nvfp4.pack(codes), scale_vals.to(torch.float8_e4m3fn),
                          torch.full((16,), 0.5, device="cuda"))
    want = torch.stack([torch.tensor([nvfp4.E2M1_VALUES[int(codes[0, c])] * vals[c // 16] * 0.5
                                      for c in range(s, s + 16)]) for s in range(0, 128, 16)])
    for cvt in (True, False):
        monkeypatch.setattr(gemv_tc, "e4m3_cvt", lambda device, cvt=cvt: cvt)
        got = torch.stack([gemv_tc.nvfp4_gemv_tc(torch.eye(128, device="cuda")[s:s + 16], w, block_n=16,
                                                 block_w=16)[:, 0].cpu() for s in range(0, 128, 16)])
        assert torch.equal(got, want), cvt


@pytest.mark.parametrize("rows", [2, 4, 16, 64])
def test_batch_dispatch_on_the_gpu(rows):
    """nvfp4_gemv_batch through the tensor-core kernel, its tile timed once per shape into the run's tuning: the
    reference's result, the tile recorded."""
    from llmsize.measure import gemv, gemv_tc, nvfp4, tuner
    torch.manual_seed(rows)
    w = nvfp4.quantize(torch.randn(3840, 4096, device="cuda") / 64)
    x = torch.randn(rows, 4096, device="cuda", dtype=torch.bfloat16)
    tuning = tuner.Tuning()
    got = gemv_tc.nvfp4_gemv_batch(x, w, tuning=tuning).float()
    assert list(gemv_tc.chosen_kernels(tuning, rows)) == ["3840x4096"]
    torch.testing.assert_close(got, gemv.nvfp4_linear_reference(x.float(), w), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("rows", [1, 16, 256])
def test_cap_argmax_on_the_gemma_4_vocabulary(rows):
    """The step's tail (soft-cap and greedy tokens after cuBLAS's GEMM) on 262,144-entry bf16 logits: its
    self-check on this card, the logits as torch's soft-cap gives them, each token its row's argmax."""
    from llmsize.measure import logits, selfcheck
    assert selfcheck.cap_argmax_ok(torch.device("cuda"))
    torch.manual_seed(rows)
    y = (torch.randn(rows, 262144, device="cuda") * 5).to(torch.bfloat16)
    tok = torch.zeros(rows, dtype=torch.long, device="cuda")
    pos = torch.tensor([5], device="cuda")
    got = logits.cap_argmax(y, 30.0, tok, pos)
    want = 30.0 * torch.tanh(y.float() / 30.0)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert torch.equal(tok, want.argmax(-1)) and int(pos) == 6


def test_attention_combine_folded_on_a_sliding_layer():
    """Gemma 4 12B's sliding layer (8 KV heads x 256, 1,024 slots: 32 slices per head, 64 KiB of partials a
    group): the combine folded into the split kernel's last slice gives the combine kernel's output bit for bit,
    call after call (its counters re-zeroed); and measure's self-checks for both paths pass on this card."""
    from llmsize.measure import fused, selfcheck
    assert selfcheck.attention_ok(torch.device("cuda"), False) and selfcheck.attention_ok(torch.device("cuda"), True)
    torch.manual_seed(0)
    nh, kvh, hd, slots = 16, 8, 256, 1024
    qkv = torch.randn(1, (nh + 2 * kvh) * hd, device="cuda").to(torch.bfloat16)
    kc = torch.randn(1, kvh, slots, hd, device="cuda").to(torch.bfloat16)
    vc = torch.randn_like(kc)
    qn, kn = torch.rand(hd, device="cuda") + 0.5, torch.rand(hd, device="cuda") + 0.5
    ang = torch.arange(4096, device="cuda")[:, None] * (1.0 / 10000 ** (torch.arange(0, hd, 2, device="cuda") / hd))
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    for pos in (700, 1500, 3000):
        p = torch.tensor([pos], device="cuda")
        outs = [fused.attention(qkv, qn, kn, cos, sin, p, kc, vc, nh, nh * hd, (nh + kvh) * hd, 1e-6, pack=pack,
                                fold_combine=fold) for fold in (False, True, True) for pack in (False, True)]
        assert all(torch.equal(outs[i], outs[i + 2]) for i in range(4)), pos
