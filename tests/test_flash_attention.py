"""plan --no-flash-attn (llmsize/estimate/prefill.py): the attention score matrix an unfused prefill holds and moves,
against FlashAttention (Dao et al. 2022), which keeps it in on-chip tiles."""

from __future__ import annotations

import json

import pytest


def _plan(run_cli, *args):
    code, out, err = run_cli("plan", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_the_score_matrix_by_hand(run_cli):
    """Llama 3.1 8B, a 4,096-token prompt in one pass: one layer's scores are 32 heads x 4,096 x 4,096 x 4 B (FP32)
    = 2,147,483,648 B. With FlashAttention (the default) none is held; --no-flash-attn takes it from the cache's
    memory and adds the kernels' traffic, 32 layers x 32 heads x 4,096^2 x 20 B = 343,597,383,680 B, to the
    prompt's bytes."""
    fa = _plan(run_cli, "llama-3.1-8b", "--gpu", "rtx4090")
    no = _plan(run_cli, "llama-3.1-8b", "--gpu", "rtx4090", "--no-flash-attn")
    scores = 32 * 4096 * 4096 * 4
    assert fa["prefill"]["unfused_scores_bytes"] == no["prefill"]["unfused_scores_bytes"] == scores == 2_147_483_648
    assert fa["prefill"]["flash_attn"] and not no["prefill"]["flash_attn"]
    assert fa["capacity"]["scores_bytes"] == 0 and no["capacity"]["scores_bytes"] == scores
    assert fa["capacity"]["kv_budget_bytes"] - no["capacity"]["kv_budget_bytes"] == pytest.approx(scores, abs=2)
    assert no["prefill"]["bytes"] - fa["prefill"]["bytes"] == pytest.approx(32 * 32 * 4096 ** 2 * 20, abs=2)
    assert no["capacity"]["max_concurrent_sequences"] < fa["capacity"]["max_concurrent_sequences"]


def test_tensor_parallel_cards_hold_their_heads(run_cli):
    """With --tp 2 each card computes 16 of the 32 heads: half the matrix a card."""
    d = _plan(run_cli, "llama-3.1-8b", "--gpu", "rtx4090", "--tp", "2", "--no-flash-attn")
    assert d["capacity"]["scores_bytes"] == 16 * 4096 * 4096 * 4


def test_the_quadratic_term_names_itself_in_the_diagnosis(run_cli):
    """At 16,384 tokens the matrix is 34.4 GB, more than a 24 GB card: the diagnosis says the scores took the cache's
    memory and names FlashAttention first; the lever row without --no-flash-attn is the plan its command gives."""
    d = _plan(run_cli, "llama-3.1-8b", "--gpu", "rtx4090", "--context", "16384", "--no-flash-attn", "--levers")
    assert d["capacity"]["scores_bytes"] == 32 * 16384 ** 2 * 4 and d["capacity"]["max_concurrent_sequences"] == 0
    assert "Without FlashAttention" in d["diagnosis"]["summary"] and d["diagnosis"]["levers"][0].startswith(
        "FlashAttention")
    row = next(r for r in d["levers"] if r["name"] == "FlashAttention")
    assert "--no-flash-attn" not in row["command"] and row["before"] == 0 and row["after"] >= 1
    assert not any(r["figure"] == "fleet_tok_s_per_gpu" for r in d["levers"])  # engines fleet sizes fuse attention


def test_engines_and_the_expected_speed(run_cli):
    """llama.cpp's ledger runs with -fa off under --no-flash-attn (its compute buffer holds the ubatch's scores);
    a serving engine's expected speed says it fuses attention regardless; --flash-attn on with --no-flash-attn is one
    line and exit 2."""
    d = _plan(run_cli, "llama-3.1-8b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--engine", "llamacpp",
              "--no-flash-attn")
    assert d["engine"]["settings"]["flash_attn"] is False
    d = _plan(run_cli, "llama-3.1-8b", "--gpu", "rtx4090", "--no-flash-attn")
    assert any("fused attention kernels only" in n for n in d["expected"]["notes"])
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--no-flash-attn", "--flash-attn", "on")
    assert code == 2 and out == "" and "--flash-attn on" in err and "Traceback" not in err
