"""Invariants over the whole catalog: properties every model and card must satisfy."""

import pytest

from llmsize.catalog.loader import Catalog
from llmsize.catalog.schema import CompressedAttention, FullAttention, MlaAttention, SlidingAttention
from llmsize.estimate.decode import DecodeModel
from llmsize.estimate.gguf_blocks import FILE_TYPES
from llmsize.estimate.kv import kv_bytes
from llmsize.estimate.plan import PlanInputs, make_plan
from llmsize.estimate.quant import FORMATS, KV_DTYPE_BYTES, quant_format
from llmsize.estimate.weights import weight_bytes

CAT = Catalog()
MODELS = CAT.models.all()
GPUS = CAT.hardware.all()
CONTEXTS = [0, 1, 127, 128, 129, 1000, 1024, 1025, 2047, 4096, 4097, 32768, 131072]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.id)
def test_kv_never_shrinks_as_context_grows(model):
    for dtype in KV_DTYPE_BYTES:
        sizes = [kv_bytes(model, L, dtype).bytes_per_sequence for L in CONTEXTS]
        assert sizes == sorted(sizes)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.id)
def test_sliding_groups_flat_past_window_and_states_constant(model):
    windows = [g.mixer.sliding_window for g in model.layer_groups if isinstance(g.mixer, SlidingAttention)]
    for w in windows:
        at = kv_bytes(model, w, "bf16").bytes_by_kind["sliding"]
        assert kv_bytes(model, w * 3, "bf16").bytes_by_kind["sliding"] == at
    for kind in ("ssm", "linear"):
        assert kv_bytes(model, 1, "bf16").bytes_by_kind[kind] == kv_bytes(model, 100_000, "bf16").bytes_by_kind[kind]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.id)
def test_gqa_with_all_heads_equals_mha(model):
    # MHA formula (Vaswani et al. 2017; seed 002): 2 * layers * heads * head_dim * L * bytes
    groups = []
    for g in model.layer_groups:
        if isinstance(g.mixer, (FullAttention, SlidingAttention)):
            g = g.model_copy(update={"mixer": g.mixer.model_copy(
                update={"num_key_value_heads": g.mixer.num_attention_heads})})
        groups.append(g)
    mha = model.model_copy(update={"layer_groups": groups})
    L = 3000
    expected = shared = 0  # a layer that shares an earlier layer's cache (Gemma 4 E) holds none, reads it again
    for g in mha.layer_groups:
        if isinstance(g.mixer, (FullAttention, SlidingAttention)):
            cached = min(L, g.mixer.sliding_window) if isinstance(g.mixer, SlidingAttention) else L
            b = 2 * g.count * g.mixer.num_attention_heads * g.mixer.head_dim * cached * 2
            shared, expected = (shared + b, expected) if g.mixer.kv_shared else (shared, expected + b)
        elif isinstance(g.mixer, CompressedAttention):  # DeepSeek-V4's windows, one K = V row a token, count as sliding
            expected += g.count * min(L, g.mixer.sliding_window) * g.mixer.head_dim * 2
    got = kv_bytes(mha, L, "bf16")
    assert got.bytes_by_kind["full"] + got.bytes_by_kind["sliding"] == expected
    sparse = (MlaAttention, CompressedAttention)
    if not any(isinstance(g.mixer, sparse) and g.mixer.indexer for g in model.layer_groups):
        assert got.read_bytes == got.bytes_per_sequence + shared


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.id)
def test_fewer_bits_never_more_bytes(model):
    # among formats that keep the unquantized tensors at the same precision (16-bit for checkpoints,
    # f32 vectors for GGUF), fewer bits per weight never stores more bytes
    for keep in (16, 32):
        # equal bits per weight (nvfp4 and bnb-nf4: 4.5) are ordered by their per-tensor scale bytes
        ordered = sorted((f for f in FORMATS.values() if f.keep_bits == keep and not f.mix),
                         key=lambda f: (f.bits_per_weight, f.per_tensor_bytes))
        for scope in ("linear", "experts", "mlp", "all"):
            sizes = [weight_bytes(model, f, scope).bytes_total for f in ordered]
            assert sizes == sorted(sizes)


# llama-quantize's k-quant file types
K_LADDER = ["gguf-q2_k", "gguf-q3_k_s", "gguf-q3_k_m", "gguf-q3_k_l", "gguf-q4_k_s", "gguf-q4_k_m", "gguf-q5_k_s",
            "gguf-q5_k_m", "gguf-q6_k", "gguf-q8_0"]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.id)
def test_gguf_file_types_grow_along_the_k_ladder(model):
    size = {f: weight_bytes(model, FORMATS[f], "all").bytes_total for f in K_LADDER}
    # within a family S <= M <= L; across families only far rungs are ordered (Q4_K_M's Q6_K bumps can outweigh
    # Q5_K_S where ffn_down is most of the model, and rows that fall back to IQ4_NL blur Q2_K and Q3_K_S)
    for chain in (["gguf-q3_k_s", "gguf-q3_k_m", "gguf-q3_k_l"], ["gguf-q4_k_s", "gguf-q4_k_m"],
                  ["gguf-q5_k_s", "gguf-q5_k_m"], ["gguf-q2_k", "gguf-q4_k_m", "gguf-q6_k", "gguf-q8_0"]):
        assert [size[f] for f in chain] == sorted(size[f] for f in chain), size
    # and a file type never stores less than its own block type in every matrix (a model released with MXFP4
    # experts keeps them in MXFP4 whatever the file type: no such floor)
    for f in K_LADDER if model.release.quant != "mxfp4" else ():
        base = FORMATS["ggml-" + FORMATS[f].mix.split("_")[0] + "_" + FORMATS[f].mix.split("_")[1]]
        pure = weight_bytes(model, base, "all")
        text_only = pure.bytes_total - pure.stored_bytes["extra"]  # a GGUF holds no vision tower (its mmproj file does)
        assert weight_bytes(model, FORMATS[f], "all").bytes_total >= 0.99 * text_only


# llama-quantize's i-quant file types, two ladders of growing bits (IQ2_S writes IQ2_XS's blocks with IQ3_S lifts,
# IQ2_M IQ2_S's; IQ3_XS mixes IQ3_S with IQ3_XXS, IQ3_M lifts IQ3_S's attn_v and first ffn_down to Q4_K)
I_LADDERS = (["gguf-iq1_s", "gguf-iq1_m", "gguf-iq2_xxs", "gguf-iq2_xs", "gguf-iq2_s", "gguf-iq2_m"],
             ["gguf-iq3_xxs", "gguf-iq3_xs", "gguf-iq3_s", "gguf-iq3_m"])


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.id)
def test_gguf_i_quant_file_types_grow_along_their_ladders(model):
    """Never smaller up a ladder (equal where a model's rows are no multiple of 256 and every i-quant falls back to
    IQ4_NL alike: gpt-oss's 2,880), and never below the file type's own block type in every matrix, but for IQ3_XS and
    IQ3_XXS, whose rules move attn_q and attn_k (and IQ3_XS's middle ffn_gate/ffn_up) a type down."""
    for ladder in I_LADDERS:
        sizes = [weight_bytes(model, FORMATS[f], "all").bytes_total for f in ladder]
        assert sizes == sorted(sizes), dict(zip(ladder, sizes))
    for f in (f for ladder in I_LADDERS for f in ladder if f not in ("gguf-iq3_xs", "gguf-iq3_xxs")):
        pure = weight_bytes(model, FORMATS["ggml-" + FILE_TYPES[f.removeprefix("gguf-")]], "all")
        text_only = pure.bytes_total - pure.stored_bytes["extra"]
        assert weight_bytes(model, FORMATS[f], "all").bytes_total >= 0.99 * text_only, f


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.id)
def test_an_nvfp4_gguf_holds_the_plans_nvfp4_weights(model):
    """The GGUF llama.cpp's converter writes of an NVFP4 checkpoint (llamacpp_memory, tensor by tensor, as its
    ledger loads them) and the plan's NVFP4 weights of the text model (weights.py, component by component) are the
    same bytes within 0.5% (the plan counts a 4-byte second-level scale a tensor, the file's blocks none)."""
    from llmsize.estimate.llamacpp_memory import gguf_file_tensors
    from llmsize.estimate.runtime_model import text_model

    for scope in ("linear", "all"):
        file_bytes = sum(b for _, b in gguf_file_tensors(model, "nvfp4", scope))
        planned = weight_bytes(text_model(model), FORMATS["nvfp4"], scope).bytes_total
        assert file_bytes == pytest.approx(planned, rel=0.005), scope


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.id)
def test_ceiling_scales_linearly_with_bandwidth(model):
    g = CAT.gpu("h100-sxm")
    fast = g.model_copy(update={"bandwidth_gb_s": g.bandwidth_gb_s * 2.5})
    fmt = quant_format(model.release.quant)
    base = DecodeModel(model, g, fmt, model.release.scope, "bf16", 4096, None).ceiling_tok_s()
    assert DecodeModel(model, fast, fmt, model.release.scope, "bf16", 4096, None).ceiling_tok_s() == \
        pytest.approx(base * 2.5, rel=1e-12)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.id)
def test_plan_for_every_card_completes(model):
    for gpu in GPUS:
        p = make_plan(model, gpu, PlanInputs(batch=8), candidates=GPUS)
        assert p.decode_ceiling_tok_s > 0
        assert p.diagnosis.saturates in ("weights", "kv_cache", "bandwidth", "compute")
        if p.budget.weights_fit:
            assert p.max_context.tokens >= 0 and p.max_sequences >= 0
        else:
            assert p.diagnosis.levers  # says what would fit


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.id)
def test_batch_never_slower_in_aggregate(model):
    dm = DecodeModel(model, CAT.gpu("h200"), quant_format(model.release.quant), model.release.scope, "bf16", 2048,
                     989.4e12)
    rates = [dm.step(b).tok_s for b in (1, 2, 8, 64, 512)]
    assert rates == sorted(rates)


def test_a_context_beyond_the_model_limit_is_not_called_a_full_kv_cache():
    """--context above max_position_embeddings caps the longest context at the model's limit, not the memory's:
    with 17 sequences of 300,000 tokens in an MI300X's memory and one asked, the KV cache does not saturate first
    (the plan's note says the figures extrapolate); one sequence more than memory holds still does."""
    m, g = CAT.model("qwen3.5-4b"), CAT.gpu("mi300x")
    p = make_plan(m, g, PlanInputs(context_tokens=300_000), search_fit=False)
    assert p.max_context.limited_by == "model" and p.max_context.tokens == 262_144 and p.max_sequences >= 2
    assert p.diagnosis.saturates == "bandwidth"
    full = make_plan(m, g, PlanInputs(context_tokens=300_000, batch=p.max_sequences + 1), search_fit=False)
    assert full.diagnosis.saturates == "kv_cache"


def test_a_kv_lever_says_what_it_holds_where_the_asked_context_still_does_not_fit():
    """Qwen3.5 4B in FP8 on an 8 GB card at 100,000 tokens: not one sequence fits with a BF16 cache (37,426 tokens
    at most), nor with an FP8 one; the lever says the longest context FP8 holds (twice as many tokens: the full
    attention layers' cache halves, the recurrent state is fixed) instead of "holds 0 sequences", and the
    architecture lever does not offer GQA to a model that uses it."""
    p = make_plan(CAT.model("qwen3.5-4b"), CAT.gpu("rtx4060ti8"), PlanInputs(quant="fp8", context_tokens=100_000),
                  search_fit=False)
    assert p.diagnosis.saturates == "kv_cache" and p.max_sequences == 0
    kv = [lv for lv in p.diagnosis.levers if lv.startswith("Smaller KV dtype")]
    assert len(kv) == 1 and "holds one sequence of" in kv[0] and "(not 100,000)" in kv[0] and "0 sequences" not in kv[0]
    longest = int(kv[0].split("holds one sequence of ")[1].split(" tokens")[0].replace(",", ""))
    assert 1.9 * p.max_context.tokens < longest < 100_000
    arch = next(lv for lv in p.diagnosis.levers if lv.startswith("Architecture"))
    assert "already uses constant-state layers, GQA" in arch and "a model with GQA" not in arch
    mha = make_plan(CAT.model("llama-2-7b"), CAT.gpu("rtx4090"), PlanInputs(context_tokens=4096, batch=64),
                    search_fit=False)
    assert mha.diagnosis.saturates == "kv_cache"
    assert any("plain multi-head attention; a model with GQA" in lv for lv in mha.diagnosis.levers)


def test_read_shares_summed_by_group_are_the_pieces_summed_one_by_one():
    """weights._read_shares sums a model's pieces once by key and routing share (a fleet asks for thousands of
    batches): the shares must be what summing every piece's bytes at its routed fraction gives, for every catalog
    model, a primary format, a recipe (experts in nvfp4, attention in fp8) and a GGUF mix (shares by parameters)."""
    from llmsize.estimate.params import model_pieces, routed_fraction
    from llmsize.estimate.quant import UNQUANTIZED
    from llmsize.estimate.weights import expert_read_fraction, piece_bytes, piece_format, read_shares_by_format

    fmts = [(quant_format("fp8"), "experts"), (quant_format("nvfp4"), "linear"),
            (quant_format("experts=nvfp4,attention=fp8"), "linear"), (quant_format("gguf-q4_k_m"), "linear")]
    checked = 0
    for m in Catalog().models.all():
        for fmt, scope in fmts:
            for batch in (1, 7, 64, 4096):
                by_format, routed, total = {}, 0.0, 0.0
                for p in model_pieces(m):
                    if not p.read:
                        continue
                    size = (p.params if fmt.mix else float(piece_bytes(p, fmt, scope))) * routed_fraction(p, batch)
                    f = piece_format(p, fmt, scope)
                    key = None if f is None or f.id in UNQUANTIZED else f.id
                    by_format[key] = by_format.get(key, 0.0) + size
                    routed += size if p.routed is not None else 0.0
                    total += size
                assert expert_read_fraction(m, fmt, scope, batch) == pytest.approx(routed / total, rel=1e-12, abs=1e-15)
                got = read_shares_by_format(m, fmt, scope, batch)
                if fmt.mix or (not fmt.recipe and fmt.bits_per_weight >= fmt.keep_bits):  # one share: its own
                    assert got == {fmt.id: 1.0}
                else:
                    assert got == pytest.approx({k: v / total for k, v in by_format.items()}, rel=1e-12, abs=1e-15)
                    assert sum(got.values()) == pytest.approx(1.0, rel=1e-12)
                checked += 1
    assert checked > 200


def test_attention_tile_flops_by_group_are_each_groups_summed():
    """flops.decode_attention_tile_flops works out each layer group's FLOPs per attended token once: at any context
    and tile it is the groups' count x FLOPs a token x the tokens each attends to (its window or top-k at most),
    and `keep` selects groups."""
    from llmsize.estimate.flops import _attn_flops_per_attended_token, decode_attention_tile_flops

    for m in Catalog().models.all():
        groups = [g for g in m.layer_groups if g.mixer is not None]
        for ctx in (1, 4096, 131072):
            for rows in (1, 16, 64):
                def want(keep=None):
                    total = 0.0
                    for g in groups:
                        if keep is not None and not keep(g.mixer):
                            continue
                        caps = [c for c in (getattr(g.mixer, "sliding_window", None),
                                            getattr(getattr(g.mixer, "indexer", None), "topk", None)) if c]
                        attended = min([ctx, *caps])
                        if isinstance(g.mixer, CompressedAttention):  # its window and the rows it reads, added
                            r, ix = g.mixer.compress_ratio, g.mixer.indexer
                            rows_read = -(-ctx // r) if r else 0
                            attended = min(ctx, g.mixer.sliding_window) + (min(rows_read, ix.topk) if ix else rows_read)
                        total += g.count * _attn_flops_per_attended_token(g.mixer, rows) * attended
                    return total
                assert decode_attention_tile_flops(m, ctx, rows) == pytest.approx(want(), rel=1e-12)
                sliding = lambda mixer: getattr(mixer, "sliding_window", None) is not None  # noqa: E731
                assert decode_attention_tile_flops(m, ctx, rows, keep=sliding) == pytest.approx(want(sliding),
                                                                                                rel=1e-12, abs=0)
