"""The decode loop of a small Gemma-4-shaped model against a plain float32 full-sequence forward.

Same structure as Gemma 4 12B (5:1 -> here 2:1 sliding/full, one period: GQA on sliding, MQA with K = V on full
layers, proportional RoPE, soft-cap), small dims and a window of 4, decoded for more than twice the window so
the ring buffer wraps and the full layer keeps growing.
"""

import dataclasses

import pytest
import torch

from llmsize.measure import gemma4, gemv_tc, reference
from llmsize.measure.gemv import triton_available

CFG = gemma4.GEMMA4_TINY
WINDOW = CFG.sliding_window
# one sliding and one full layer, for the batch tests of the fused step: each row against its own solo decode,
# where a layer kind's every step is what is tested, not two layers of one kind (the tests above and
# test_fused_decode_step_matches_reference keep those)
TWO_LAYERS = dataclasses.replace(CFG, layer_types=(gemma4.SLIDING, gemma4.FULL))


def _weights(quant="nvfp4", seed=0, cfg=CFG):
    return gemma4.build_random(cfg, device="cpu", dtype=torch.float32, quant=quant, seed=seed)


def _decode(weights, prompt, steps, gemv="torch", fused=False, cap_argmax=False):
    dec = gemma4.Gemma4Decoder(weights, batch=1, max_positions=len(prompt) + steps + 1, gemv=gemv, fused=fused,
                               cap_argmax=cap_argmax)
    logits = [dec.prefill(torch.tensor([prompt]))[0]]
    tokens = list(prompt)
    for _ in range(steps):
        tokens.append(int(dec.token[0]))
        logits.append(dec.decode_step()[0])
    tokens.append(int(dec.token[0]))
    return tokens, torch.stack(logits)


@pytest.mark.parametrize("quant", ["nvfp4", "bf16"])
@pytest.mark.parametrize("prompt_len", [3, 2 * WINDOW - 3])  # short prompt; prompt longer than the window
def test_decode_matches_full_sequence_reference(quant, prompt_len):
    w = _weights(quant)
    prompt = [(7 * i + 3) % CFG.vocab_size for i in range(prompt_len)]
    steps = 2 * WINDOW + 5
    tokens, got = _decode(w, prompt, steps)
    want = reference.forward(w, tokens[:-1])[prompt_len - 1:]  # logits at every position decoded
    assert got.shape == want.shape == (steps + 1, CFG.vocab_size)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)
    # greedy: each fed token is the argmax of the reference logits at the previous position
    assert tokens[prompt_len:] == want.argmax(-1).tolist()
    # random weights, not a degenerate model: the logits move with the position (the greedy tokens of a small
    # random model may fall into a short cycle, so they are not the measure): here 0.63-0.91 of their spread
    assert len(set(tokens[prompt_len:])) > 1 and got.std(0).mean() > 0.3 * got.std()


def test_prefill_then_decode_equals_decoding_from_the_first_token():
    w = _weights()
    prompt = [11, 42, 5, 99, 250, 3, 77, 18, 64, 120, 9, 301]  # longer than the window
    _, long_prefill = _decode(w, prompt, 4)
    # feed the same prompt one token at a time through decode_step
    dec = gemma4.Gemma4Decoder(w, batch=1, max_positions=len(prompt) + 8)
    dec.prefill(torch.tensor([prompt[:1]]))
    for tok in prompt[1:]:
        dec.token.fill_(tok)
        last = dec.decode_step()
    torch.testing.assert_close(last[0], long_prefill[0], rtol=1e-4, atol=1e-3)


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_decode_through_the_triton_kernel_matches_reference():
    """The byte kernel's place in the decoder: a few steps (the cache's ring buffer is the torch path's tests'
    business), every linear through it, float32 math."""
    w = _weights(seed=1)
    prompt = [5]  # one-row prefill: every linear goes through the batch-1 CUDA-core kernel (float32 math)
    steps = 3
    tokens, got = _decode(w, prompt, steps, gemv="triton")
    want = reference.forward(w, tokens[:-1])[len(prompt) - 1:]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)


def test_weights_are_never_zero_or_constant():
    w = _weights()
    layer = w.layers[0]
    for name in ("qkv", "o", "gate_up", "down"):
        deq = getattr(layer, name).dequantize()
        assert deq.std() > 0 and (deq != 0).float().mean() > 0.5, name
    for t in (layer.input_norm, layer.q_norm, w.final_norm, w.embed):
        assert t.std() > 0


def test_twelve_b_config_matches_the_catalog_entry(catalog):
    m = catalog.model("gemma-4-12b")
    cfg = gemma4.GEMMA4_12B
    assert (cfg.vocab_size, cfg.hidden_size) == (m.vocab_size, m.hidden_size)
    sliding, full = m.layer_groups
    assert cfg.layer_types.count("sliding") == sliding.count == 40
    assert cfg.layer_types.count("full") == full.count == 8
    assert cfg.layer_types[5::6] == ("full",) * 8  # full attention at layers 5, 11, ..., 47
    assert (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.sliding_window) == (
        sliding.mixer.num_attention_heads, sliding.mixer.num_key_value_heads, sliding.mixer.head_dim,
        sliding.mixer.sliding_window)
    assert (cfg.num_global_kv_heads, cfg.global_head_dim) == (full.mixer.num_key_value_heads, full.mixer.head_dim)
    assert cfg.intermediate_size == sliding.mlp.intermediate_size == full.mlp.intermediate_size


def test_proportional_rope_rotates_a_quarter_of_the_full_layer_dims():
    inv = gemma4.rope_inv_freq(gemma4.GEMMA4_12B, "full")
    assert inv.shape == (256,)
    assert (inv[:64] > 0).all() and (inv[64:] == 0).all()  # int(0.25 * 512 // 2) = 64 rotated pairs
    assert inv[1].item() == pytest.approx(1e6 ** (-2 / 512))


def test_prefill_attention_in_query_chunks_matches_reference(monkeypatch):
    monkeypatch.setattr(gemma4, "QUERY_CHUNK", 4)  # 13-token prompt -> chunks of 4, 4, 4, 1
    w = _weights(seed=5)
    prompt = list(range(20, 33))
    tokens, got = _decode(w, prompt, 3)
    want = reference.forward(w, tokens[:-1])[len(prompt) - 1:]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("gemv, seed, prompts, steps, tol", [
    ("torch", 3, ([1, 2, 3, 4], [9, 8, 7, 6]), 12, (1e-4, 1e-3)),  # dequantize + matmul, float32
    # batch 2 through the dot kernel (one pass over the weights for both rows): fp16 operands, so a looser
    # tolerance and fewer steps for the rounding to drift over
    pytest.param("triton", 4, ([1, 2, 3], [9, 8, 7]), 4, (1e-2, 2e-2),
                 marks=pytest.mark.skipif(not triton_available(), reason="triton not installed")),
    # 3 rows through the word family's batch path (gemv_tc's tensor-core kernel on the CPU; one-token prompts,
    # so the prefill's 3 rows take it too): the dot kernel's numerics (fp16 operands, exact products, fp32 sums)
    pytest.param("words", 5, ([1], [9], [4]), 4, (1e-2, 2e-2),
                 marks=pytest.mark.skipif(not triton_available(), reason="triton not installed")),
])
def test_batch_rows_match_their_solo_decode(gemv, seed, prompts, steps, tol):
    """Each row of a batch decodes as it would alone (through the float32 reference path)."""
    w = _weights(seed=seed)
    dec = gemma4.Gemma4Decoder(w, batch=len(prompts), max_positions=len(prompts[0]) + steps + 8, gemv=gemv)
    dec.prefill(torch.tensor(list(prompts)))
    both = [dec.decode_step() for _ in range(steps)]
    for row, prompt in enumerate(prompts):
        _, solo = _decode(w, prompt, steps, gemv="torch")
        torch.testing.assert_close(torch.stack([s[row] for s in both]), solo[1:], rtol=tol[0], atol=tol[1])


@pytest.mark.parametrize("per_pass", [1, 2])
def test_prefill_in_passes_of_sequences_equals_one_pass(monkeypatch, per_pass):
    """Five prompts longer than the window, prefilled one pass at a time of `per_pass` sequences (the last pass
    short when 2): the same logits, caches (ring buffer and full layers, every sequence's rows), position and
    greedy tokens as one pass over all five, and the next decode step agrees too."""
    w = _weights(seed=21)
    t = WINDOW + 3
    prompts = torch.tensor([[(7 * i + 3 * j) % CFG.vocab_size for j in range(t)] for i in range(5)])

    def run():
        dec = gemma4.Gemma4Decoder(w, batch=5, max_positions=t + 4)
        return dec, dec.prefill(prompts)
    whole, ref = run()
    monkeypatch.setattr(gemma4, "PREFILL_TOKENS", per_pass * t)
    assert gemma4.prefill_rows(5, t) == per_pass
    parts, got = run()
    # float32 through matmuls of other shapes: the same sums in another order, ~1e-5 of logits ~1
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=2e-4)
    for (kc, vc), (kr, vr) in zip(parts.caches, whole.caches):
        torch.testing.assert_close(kc, kr, rtol=1e-4, atol=2e-4)
        torch.testing.assert_close(vc, vr, rtol=1e-4, atol=2e-4)
    assert int(parts.pos) == int(whole.pos) == t and torch.equal(parts.token, whole.token)
    torch.testing.assert_close(parts.decode_step(), whole.decode_step(), rtol=1e-4, atol=2e-4)


def test_prefill_refuses_a_batch_other_than_the_decoders():
    dec = gemma4.Gemma4Decoder(_weights(seed=2), batch=2, max_positions=8)
    with pytest.raises(ValueError, match="prompt of 3 sequences for a decoder of batch 2"):
        dec.prefill(torch.tensor([[1, 2], [3, 4], [5, 6]]))


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_fused_batch_step_through_the_tensor_core_kernel(monkeypatch):
    """Three sequences through the fused step with the word family: the fused kernels between the GEMVs at
    batch 3, the GEMVs through gemv_tc, the GeGLU in its gate | up pass; each row as it decodes alone through
    the float32 reference path, past the sliding window (its ring buffer and the full layers)."""
    glu_calls = []
    real = gemma4.nvfp4_gemv_tc

    def counted(x, w, **kw):
        glu_calls.append(kw.get("glu"))
        return real(x, w, **kw)
    monkeypatch.setattr(gemma4, "nvfp4_gemv_tc", counted)
    w = _weights(seed=12, cfg=TWO_LAYERS)
    prompts, steps = ([3], [8], [5]), WINDOW + 2
    dec = gemma4.Gemma4Decoder(w, batch=3, max_positions=steps + 8, gemv="words", fused=True)
    dec.prefill(torch.tensor(list(prompts)))
    both = [dec.decode_step() for _ in range(steps)]
    assert glu_calls == [True] * (steps * TWO_LAYERS.num_layers)  # one gate | up pass with its GeGLU per layer, step
    for row, prompt in enumerate(prompts):
        _, solo = _decode(w, prompt, steps, gemv="torch")
        torch.testing.assert_close(torch.stack([s[row] for s in both]), solo[1:], rtol=1e-2, atol=2e-2)


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_fused_step_above_16_rows_through_the_tensor_core_row_blocks(monkeypatch):
    """Eighteen sequences (above the 16 rows one tensor-core program takes): every GEMV of the fused step goes
    through gemv_tc with all 18 rows (its row blocks), the GeGLU in the gate | up pass; each row as it decodes
    alone through the float32 reference path. The prompts are of one token, so prefill (18 rows) takes the same
    kernel; a prompt longer than the batch would be a prefill through the dense path. The step ends in
    logits.cap_argmax (soft-cap and the 18 greedy tokens in one kernel): a wrong token would send a row's
    next step elsewhere than its solo decode."""
    rows = []
    real = gemv_tc.nvfp4_gemv_tc

    def counted(x, w, **kw):
        rows.append(x.shape[0])
        return real(x, w, **kw)
    monkeypatch.setattr(gemv_tc, "nvfp4_gemv_tc", counted)
    monkeypatch.setattr(gemma4, "nvfp4_gemv_tc", counted)
    w = _weights(seed=13, cfg=TWO_LAYERS)
    prompts, steps = [[(5 * i + 1) % CFG.vocab_size] for i in range(18)], 2
    dec = gemma4.Gemma4Decoder(w, batch=18, max_positions=steps + 4, gemv="words", fused=True, cap_argmax=True)
    dec.prefill(torch.tensor(prompts))
    got = [dec.decode_step() for _ in range(steps)]
    assert int(dec.pos) == 1 + steps  # advanced by the kernel
    # per layer, prefill: q|k|v, o, gate|up, down; a fused step: the same four (the GeGLU in gate | up)
    assert rows == [18] * (4 * TWO_LAYERS.num_layers * (steps + 1))
    for row in (0, 7, 17):
        _, solo = _decode(w, prompts[row], steps, gemv="torch")
        torch.testing.assert_close(torch.stack([s[row] for s in got]), solo[1:], rtol=1e-2, atol=2e-2)


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_fused_decode_step_matches_reference():
    """The decode step with the work between the GEMVs in five Triton kernels (norms, RoPE, cache writes,
    split attention, residuals, GeGLU), run by the interpreter, for more than twice the window: the ring
    buffer wraps, the full layers' caches grow past one attention split; float32 weights, so float32 rounding.
    The step's end in torch ops here; NVFP4 weights through the same step, ending in the soft-cap and token
    kernel, in the next test."""
    w = _weights("bf16", seed=8)
    prompt = [11, 3, 5]
    tokens, got = _decode(w, prompt, 2 * WINDOW + 3, fused=True)
    want = reference.forward(w, tokens[:-1])[len(prompt) - 1:]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_fused_step_ending_in_the_soft_cap_and_token_kernel_matches_reference():
    """The fused step ending in cuBLAS's GEMM then logits.cap_argmax (soft-cap, greedy token and pos += 1 in
    one launch, the step's first kernel gathering the embedding row from the device token): the same logits
    and the same greedy tokens as the float32 reference, past twice the window."""
    w = _weights("nvfp4", seed=8)
    prompt = [11, 3, 5]
    tokens, got = _decode(w, prompt, 2 * WINDOW + 3, fused=True, cap_argmax=True)
    want = reference.forward(w, tokens[:-1])[len(prompt) - 1:]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)
    assert tokens[len(prompt):] == want.argmax(-1).tolist()
    assert len(set(tokens[len(prompt):])) > 1  # the tokens fed back change along the run


def test_decoder_refuses_an_unknown_gemv():
    with pytest.raises(ValueError, match="gemv must be one of torch, triton, words, got 'pairs'"):
        gemma4.Gemma4Decoder(_weights(seed=2), batch=1, max_positions=8, gemv="pairs")


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
@pytest.mark.parametrize("k_eq_v, chunk, fold, split", [
    (False, None, False, 16), (True, None, False, 16), (False, 2, False, 16), (False, None, True, 16),
    (True, 2, True, 16), (False, None, False, 32), (True, None, True, 32), (True, None, True, 48)])
def test_fused_attention_splits_and_batch_rows(k_eq_v, chunk, fold, split):
    """Small splits (16 rows, so a 40-slot cache takes 3 programs per KV head, the last one partly past the
    position; or 32, two blocks of 16 per slice, the first loaded before the kernel's PDL wait and the second
    in its loop; or 48, not a power of two, three blocks, the last past the cache's 40 slots), two sequences,
    the combine folding the slices at once or two at a time, in its own kernel or
    (fold) in the split kernel's last slice per KV head (a counter per group, re-zeroed: five positions in a
    row through the same counters): from the raw qkv
    projection, the kernel norms and rotates q and k, v_norms v (from k's columns when K = V, as Gemma 4's full
    layers), writes this position's K and V into their slot and attends; against the eager ops (rms_norm,
    apply_rope, masked softmax), cache contents included."""
    from llmsize.measure import fused
    torch.manual_seed(1)
    b, kvh, slots, hd, nh, eps = 2, 2, 40, 32, 8, 1e-6
    qn, kn = torch.rand(hd) + 0.5, torch.rand(hd) + 0.5
    k_off = nh * hd
    v_off = k_off if k_eq_v else k_off + kvh * hd
    width = v_off + kvh * hd
    inv = 1.0 / 10000 ** (torch.arange(0, hd, 2) / hd)
    ang = torch.arange(64)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    for pos in (0, 15, 16, 29, 39):
        kc, vc = torch.randn(b, kvh, slots, hd), torch.randn(b, kvh, slots, hd)
        want_kc, want_vc = kc.clone(), vc.clone()
        qkv = torch.randn(b, width)
        p = torch.tensor([pos])
        got = fused.attention(qkv, qn, kn, cos, sin, p, kc, vc, nh, k_off, v_off, eps, split=split, block_s=16,
                              combine_chunk=chunk, fold_combine=fold)  # 2: the three slices in two steps
        want_kc, want_vc, want = reference.attention_reference(qkv, qn, kn, cos, sin, pos, want_kc, want_vc, nh,
                                                               k_off, v_off, eps)
        torch.testing.assert_close(kc, want_kc, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(vc, want_vc, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_attention_self_check_passes_and_catches_an_early_combine(monkeypatch):
    """The check measure runs on the card for the attention over several slices (the fused-step check's toy
    model has one slice a layer): passes both ways; with the folded combine's counters starting at one, a slice
    combines before the last partials are in, and the check says so (the combine kernel path is unaffected). The
    broken counters first: the folded check stops at its first wrong output, and the combine kernel's full pass
    runs once (each full pass is ten attention calls under the interpreter, about 4 s)."""
    from llmsize.measure import fused, selfcheck
    real = fused._combine_counters
    monkeypatch.setattr(selfcheck, "_attn_checked", {})
    monkeypatch.setattr(fused, "_combine_counters", lambda device, n: torch.ones(n, dtype=torch.int32))
    assert not selfcheck.attention_ok(torch.device("cpu"), True)
    assert selfcheck.last_failure(torch.device("cpu")).startswith("output off by ")  # what the check found
    assert selfcheck.attention_ok(torch.device("cpu"), False)
    assert selfcheck.last_failure(torch.device("cpu")) == ""
    monkeypatch.setattr(fused, "_combine_counters", real)
    monkeypatch.setattr(selfcheck, "_attn_checked", {})
    assert selfcheck.attention_ok(torch.device("cpu"), True)


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_decode_through_the_words_kernel_matches_reference():
    """Batch 1 through the fp16x2 word kernel (its emulation here) for a few steps: the kernel's own tests
    cover codes, scales and ragged shapes; this checks its place in the decoder. Four products summed per fp16
    lane before fp32: the logits drift by ~1.0% of their mean size here (the dot kernel, fp32 accumulation of
    fp16 operands: 0.54%; NVFP4 rounding itself moves weights by ~10%); a decoding error would be O(1). The
    prompt's two rows go through the batch path (gemv_tc): its outputs differ from gemv.py's pairs kernel by
    ~5e-7, yet that flips some fp16 roundings of the next layer's activations, and the largest of the 3,072
    logit errors moves between 0.08 and 0.104 with the kernel there (measured): a bound of 0.15."""
    w = _weights(seed=9)
    prompt = [4, 2]
    tokens, got = _decode(w, prompt, 5, gemv="words")
    want = reference.forward(w, tokens[:-1])[len(prompt) - 1:]
    err = (got - want).abs()
    assert err.mean() < 0.02 * want.abs().mean() and err.max() < 0.15


def test_words_self_check_passes_on_the_interpreter(monkeypatch):
    from llmsize.measure import gemv, gemv_tc, selfcheck
    cpu = torch.device("cpu")
    monkeypatch.setattr(selfcheck, "_words_checked", {})
    monkeypatch.setattr(selfcheck, "_paths_checked", {})
    calls = []
    real_tc = gemv_tc.nvfp4_gemv_tc

    def counted(*a, **kw):
        calls.append(1)
        return real_tc(*a, **kw)
    monkeypatch.setattr(gemv_tc, "nvfp4_gemv_tc", counted)
    assert selfcheck.words_kernel_check(cpu) == (True, frozenset())
    assert not calls  # batch 1: the batch kernels are not checked (nor compiled, on a card)
    assert selfcheck.words_kernel_check(cpu, batch=4) == (True, frozenset()) and calls
    # a path that fails on the card is named, not the whole kernel: here the tensor-core one, checked again (the
    # word kernel and its other paths keep their verdicts: re-running them adds ~6 s under the interpreter)
    assert selfcheck._paths_checked.pop(("cpu", "tc")) is True

    def broken(x, w, **kw):
        return torch.zeros(x.shape[0], w.shape[0])
    monkeypatch.setattr(gemv_tc, "nvfp4_gemv_tc", broken)
    assert selfcheck.words_kernel_check(cpu, batch=2) == (True, frozenset({"tc"}))
    assert selfcheck.words_kernel_check(cpu, batch=1) == (True, frozenset())  # batch 1 uses no batch path

    def must_not_run(x, w, **kw):
        raise AssertionError("the tensor-core kernel ran after failing its self-check")
    monkeypatch.setattr(gemv_tc, "nvfp4_gemv_tc", must_not_run)
    byte = []
    real_byte = gemv.nvfp4_gemv
    monkeypatch.setattr(gemv_tc, "nvfp4_gemv", lambda x, w, **kw: byte.append(x.shape[0]) or real_byte(x, w, **kw))
    # the batch kernel left out (what --fallback does with it): gemv.py's byte kernel, two rows a call
    dec = gemma4.Gemma4Decoder(_weights(seed=2), batch=2, max_positions=8, gemv="words", off=frozenset({"tc"}))
    dec.prefill(torch.tensor([[1], [2]]))
    dec.decode_step()
    assert byte and set(byte) == {2}


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_fused_step_feeds_the_word_kernel_packed_inputs():
    """Fused step + word GEMV: the norms, the attention combine and the GeGLU write their outputs straight in
    the word kernel's fp16-pair layout (no packing kernel); against the float32 reference past the window."""
    w = _weights(seed=10)
    prompt = [6]
    tokens, got = _decode(w, prompt, WINDOW + 3, gemv="words", fused=True)
    want = reference.forward(w, tokens[:-1])[len(prompt) - 1:]
    err = (got - want).abs()
    assert err.mean() < 0.02 * want.abs().mean() and err.max() < 0.1


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_packed_outputs_equal_pack_x_pairs():
    from llmsize.measure import fused, gemv_words
    torch.manual_seed(1)
    x, o = torch.randn(2, 64), torch.randn(2, 64)
    w1, w2 = torch.rand(64) + 0.5, torch.rand(64) + 0.5
    _, h = fused.residual_norm(x, o, w1, w2, 1e-6)
    _, hp = fused.residual_norm(x, o, w1, w2, 1e-6, pack=True)
    assert torch.equal(hp, gemv_words.pack_x_pairs(h))
    gu = torch.randn(2, 96)
    assert torch.equal(fused.geglu(gu, block=16, pack=True), gemv_words.pack_x_pairs(fused.geglu(gu, block=16)))


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_fused_step_self_check_passes_on_the_interpreter():
    """The check `llmsize measure` runs before using the fused step by default: eager and fused decodes of the
    toy model agree (here through the interpreter; on a GPU through the compiled kernels)."""
    from llmsize.measure.selfcheck import fused_step_ok
    assert fused_step_ok(torch.device("cpu"))


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_fused_step_self_check_with_the_word_kernel_passes_and_catches_a_wrong_epilogue(monkeypatch):
    """With the word kernel the check also covers how the fused step feeds it (inputs packed by the fused
    kernels, the GeGLU in the gate | up epilogue): it fails when the epilogue is wrong (gate and up swapped), and
    without the folded epilogues passes. That it passes as built is implied by two tests that hold tighter: the
    fused step with the word kernel against the float reference (test_fused_step_feeds_the_word_kernel_packed_
    inputs) and the eager step with it (test_decode_through_the_words_kernel_matches_reference); its own run here
    took 6-8 s of the interpreter (2026-12-03). A two-layer toy model (one sliding, one full) with a 2-token window
    (the check decodes past twice it: 7 steps each way) keeps the interpreter quick."""
    import dataclasses

    from llmsize.measure import gemv_words, nvfp4, selfcheck
    small = dataclasses.replace(gemma4.GEMMA4_TINY, layer_types=(gemma4.SLIDING, gemma4.FULL), sliding_window=2)
    monkeypatch.setattr(gemma4, "GEMMA4_TINY", small)
    real = gemv_words.nvfp4_gemv_words

    def swapped(x, w, *args, glu=False, **kw):  # gelu(up) * gate instead of gelu(gate) * up
        if glu:
            n = w.shape[0] // 2
            w = nvfp4.Nvfp4Weight(torch.cat([w.packed[n:], w.packed[:n]]), torch.cat([w.scales[n:], w.scales[:n]]),
                                  torch.cat([w.row_scale[n:], w.row_scale[:n]]))
        return real(x, w, *args, glu=glu, **kw)
    monkeypatch.setattr(gemma4, "nvfp4_gemv_words", swapped)
    monkeypatch.setattr(selfcheck, "_step_checked", {})
    assert not selfcheck.fused_step_ok(torch.device("cpu"), "words")
    found = selfcheck.last_failure(torch.device("cpu"))  # by how much, against what is allowed
    assert found.startswith("logits off by ") and "allowed 2% of the mean |logit|" in found, found
    # without the folded epilogues the fused step does not use the broken one: what measure falls back to
    assert selfcheck.fused_step_ok(torch.device("cpu"), "words", fold=False)


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_attention_slices_fit_one_wave_of_the_card(monkeypatch):
    """On a GPU the default slices keep the attention programs within one wave: on an H200 (132 SMs, two
    sliding-layer programs or one full-layer program resident per SM) the 1,024-slot window with 8 KV heads in
    slices of 32 (256 programs), the 4,362-slot full layer of `llmsize measure`'s default run (4,096 + 8 warm-up
    + 256 + 2 positions) in slices of 64 (69 programs; 32 would be 137, a second wave for five)."""
    import types

    from llmsize.measure import fused
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(
        multi_processor_count=132))
    gpu = torch.device("cuda", 0)
    assert fused.attn_split(gpu, 1, 8, 1024, 2, 256) == 32
    assert fused.attn_split(gpu, 1, 1, 4362, 16, 512) == 64
    assert fused.attn_split(gpu, 4, 8, 1024, 2, 256) == 128  # batch 4: 4 x 8 x 8 = 256 programs
    # full layers in a batch: 4 x 28 slices of 160 = 112 programs, 16 x 8 of 576 = 128 (powers of two: 72, 80)
    assert fused.attn_split(gpu, 4, 1, 4362, 16, 512) == 160
    assert fused.attn_split(gpu, 16, 1, 4362, 16, 512) == 576
    for b in (1, 2, 3, 4, 8, 16):  # always one wave (unless even one slice each is more), and no smaller slice is
        for kvh, slots, g, hd in ((8, 1024, 2, 256), (1, 4362, 16, 512), (2, 777, 2, 64)):
            split = fused.attn_split(gpu, b, kvh, slots, g, hd)
            programs, wave = b * kvh * -(-slots // split), fused.attn_programs(gpu, g, hd)
            assert split % fused.ATTN_BLOCK_S == 0 and programs <= max(wave, b * kvh), (b, kvh, split)
            smaller = split - fused.ATTN_BLOCK_S
            assert smaller < fused.ATTN_BLOCK_S or b * kvh * -(-slots // smaller) > wave, (b, kvh, split)
    assert fused.attn_split(gpu, 1, 1, 20, 16, 512) == 32  # never below a tensor-core block, nor past the cache
    assert fused.attn_split(gpu, 1, 1, 4362, 16, 512, split=16) == 32
    assert fused.attn_split(torch.device("cpu"), 1, 1, 4362, 16, 512) == 32  # the interpreter: ATTN_PROGRAMS


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
def test_fused_step_kernel_count(monkeypatch):
    """The fused step at batch 1 with the word GEMV, the soft-cap and token kernel and folds: one kernel for the
    embedding row and first norm, per layer four GEMVs (GeGLU and residual norms in their epilogues) and one
    attention kernel (the toy model's partials are small enough everywhere for the folded combine; Gemma 4 12B's
    full layers keep a combine kernel, sized by test_attention_slices_fit_one_wave_of_the_card), then after the
    lm_head's matmul (cuBLAS on a card) one soft-cap and token kernel."""
    import collections

    import triton.runtime.interpreter as interp
    w = _weights(seed=3)
    dec = gemma4.Gemma4Decoder(w, batch=1, max_positions=16, gemv="words", fused=True, cap_argmax=True)
    dec.prefill(torch.tensor([[1, 2, 3]]))
    dec.decode_step()
    launches = collections.Counter()
    run = interp.InterpretedFunction.run

    def counted(self, *args, **kwargs):
        launches[self.fn.__name__] += 1
        return run(self, *args, **kwargs)
    monkeypatch.setattr(interp.InterpretedFunction, "run", counted)
    dec.decode_step()
    n = CFG.num_layers
    assert launches == {"_embed_norm_kernel": 1, "_words_body": 4 * n, "_attn_split_kernel": n,
                        "_cap_argmax_kernel": 1}, launches


def test_rounding_grows_with_depth_in_a_random_model():
    """Why the fused step is checked against the eager one on shallow models: the eager step in bf16 against the
    same weights in float32, four steps decoded. Two layers keep the logits within a few percent; 48 random
    layers (Gemma 4 12B's depth, in its 5:1 pattern) amplify the same rounding to the size of the logits
    themselves, as a wrong kernel would be off."""
    import dataclasses
    s, f = gemma4.SLIDING, gemma4.FULL
    prompt = [(7 * i + 3) % CFG.vocab_size for i in range(8)]
    rel = {}
    for layers in ((s, f), ((s,) * 5 + (f,)) * 8):
        cfg = dataclasses.replace(CFG, layer_types=layers)
        got = []
        for dtype in (torch.float32, torch.bfloat16):
            w = gemma4.build_random(cfg, device="cpu", dtype=dtype, quant="bf16", seed=0)
            dec = gemma4.Gemma4Decoder(w, batch=1, max_positions=40, gemv="torch")
            dec.prefill(torch.tensor([prompt]))
            got.append(torch.stack([dec.decode_step()[0].float() for _ in range(4)]))
        rel[len(layers)] = ((got[0] - got[1]).abs().mean() / got[0].abs().mean()).item()
    assert rel[2] < 0.1 and rel[48] > 0.5, rel
