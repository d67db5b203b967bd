"""llmsize/estimate/runtime_model.py: a runtime that runs a model otherwise than its definition is costed as it runs
it (mlx-lm's Gemma 2: no sliding window, unfused broadcast GQA attention), by hand arithmetic and through the CLI."""

from __future__ import annotations

import json

import pytest

from llmsize.estimate.runtime_model import departure, kv_read_factor, run_model

# Gemma 2 9B (models/gemma-2-9b.yaml): 42 layers, 16 query heads on 8 KV heads of 256 values, every other layer a
# 4,096-token window. A token's K and V in one layer at 2 B a value: 8 x 256 x 2 x 2 = 8,192 B.
LAYER_TOKEN_BYTES = 8 * 256 * 2 * 2
CONTEXT = 32768


def _plan(run_cli, runtime: str, *more: str) -> dict:
    code, out, err = run_cli("plan", "gemma-2-9b", "--gpu", "m3-ultra", "--runtime", runtime, "--context",
                             str(CONTEXT), "--json", *more)
    assert code == 0, err
    return json.loads(out)


def test_mlx_runs_gemma_2_without_its_window_and_reads_its_cache_once_per_query_head(run_cli):
    mlx, cpp = _plan(run_cli, "mlx"), _plan(run_cli, "llamacpp")
    # llama.cpp keeps the window: 21 full layers x 32,768 tokens + 21 sliding layers x 4,096 = 6,341,787,648 B
    assert cpp["kv"]["bytes_per_sequence"] == 21 * LAYER_TOKEN_BYTES * (CONTEXT + 4096) == 6_341_787_648
    # mlx-lm keeps every layer's whole context: 42 x 8,192 x 32,768 = 11,274,289,152 B
    assert mlx["kv"]["bytes_per_token"] == 42 * LAYER_TOKEN_BYTES == 344_064
    assert mlx["kv"]["bytes_per_sequence"] == 42 * LAYER_TOKEN_BYTES * CONTEXT == 11_274_289_152
    assert mlx["kv"]["bytes_per_token_by_kind"]["sliding"] == 0
    # a decode step reads the weights once and the cache twice (16 / 8 query heads a KV head); llama.cpp once
    weights = mlx["decode"]["bytes_read_per_token"] - 2 * 11_274_289_152
    assert weights == cpp["decode"]["bytes_read_per_token"] - 6_341_787_648 == mlx["weights"]["bytes_total"]
    assert mlx["decode"]["ceiling_tok_s"] < cpp["decode"]["ceiling_tok_s"]
    said = [n for n in mlx["notes"] if "mlx-lm runs Gemma 2" in n]
    assert len(said) == 1 and "once per query head" in said[0]
    assert not any("mlx-lm" in n for n in cpp["notes"])
    # the card holds fewer such sequences: its pool counts 344,064 B a token
    assert mlx["capacity"]["kv_pool_tokens"] == mlx["capacity"]["kv_budget_bytes"] // 344_064
    assert mlx["capacity"]["max_concurrent_sequences"] < cpp["capacity"]["max_concurrent_sequences"]


def test_only_the_named_runtime_and_family_depart(catalog):
    g2, g3 = catalog.model("gemma-2-9b"), catalog.model("gemma-3-12b")
    assert departure("mlx", g2) is not None
    for rt in ("llamacpp", "vllm", "sglang"):
        assert departure(rt, g2) is None and run_model(g2, None) is g2
    assert departure("mlx", g3) is None  # mlx-lm's Gemma 3 keeps its window (RotatingKVCache)
    assert kv_read_factor(g2, departure("mlx", g2), 4096, "bf16") == 2.0
    assert kv_read_factor(g2, None, 4096, "bf16") == 1.0
    # the model run is one object per model (what is kept per model object is found again), weights untouched
    d = departure("mlx", g2)
    run = run_model(g2, d)
    assert run is run_model(g2, d) and run is not g2
    assert all(g.mixer.kind == "full" for g in run.layer_groups if g.mixer is not None)
    assert [g.count for g in run.layer_groups] == [g.count for g in g2.layer_groups]
    assert [g.mlp for g in run.layer_groups] == [g.mlp for g in g2.layer_groups]


def test_the_expected_decode_pays_for_the_bytes_the_runtime_reads(run_cli, catalog):
    """The step-time model's cache term under mlx-lm is the doubled read at the runtime's fitted cache fraction: at
    32,768 tokens 2 x 11,274,289,152 B / (819 GB/s x eta_kv, runtimes/mlx.yaml), ~30.5 ms, more than the 18.5 GB of
    bf16 weights take; and the expected figure stays under the ceiling costed on the same bytes."""
    from llmsize.estimate.runtimes import constants

    eta_kv = constants(next(r for r in catalog.runtimes.all() if r.id == "mlx"), "metal").eta_kv
    d = _plan(run_cli, "mlx")
    terms = d["expected"]["step_terms_s"]
    assert terms["kv"] == pytest.approx(2 * 11_274_289_152 / (819e9 * eta_kv), rel=1e-9)
    assert terms["kv"] > terms["weights"]
    assert 0 < d["expected"]["tok_s"] <= d["decode"]["ceiling_tok_s"]


def test_mlx_gemma_2_prompt_moves_its_score_matrices_through_memory(run_cli):
    """mlx-lm feeds a prompt 2,048 tokens at a time and its Gemma 2 attention moves 24 B a score. By hand, 4,096
    tokens: per head and layer 2,048 x 2,048 + 2,048 x 4,096 = 12,582,912 scores (no padding, no window), x 16 heads
    x 42 layers x 24 B = 202,937,204,736 B, 202.9 GB; llama.cpp with flash attention moves none."""
    def expected(runtime: str) -> dict:
        code, out, err = run_cli("plan", "gemma-2-9b", "--gpu", "m3-ultra", "--runtime", runtime, "--context", "4096",
                                 "--json")
        assert code == 0, err
        return json.loads(out)["expected"]

    mlx = expected("mlx")
    said = [n for n in mlx["notes"] if "attention scores" in n]
    assert mlx["runtime_why"] == "asked for" and len(said) == 1
    assert said[0].startswith(f"MLX's unfused attention for this model: the prompt's attention scores, "
                              f"{202_937_204_736 / 1e9:,.1f} GB, are written and read in memory, ")
    assert said[0].endswith(" s of its time to first token")
    assert not any("attention scores" in n for n in expected("llamacpp")["notes"])  # flash attention by default


def test_a_hybrids_recurrent_state_is_read_once(catalog):
    """Were a runtime to read a hybrid's cache once per query head, its attention layers' reads would multiply by
    their group size and its recurrent state's would not: Qwen3-Next (16 query heads on 2 KV heads in its
    attention layers, gated delta-net state in the others) comes out strictly between 1 and 8, and the factor at a
    longer context (a larger attention share) is closer to 8."""
    from llmsize.estimate.runtime_model import Departure

    d = Departure(keeps_window=True, kv_read_per_query_head=True, note="a what-if")
    m = catalog.model("qwen3-next-80b-a3b")
    short, long = kv_read_factor(m, d, 1024, "bf16"), kv_read_factor(m, d, 131072, "bf16")
    assert 1.0 < short < long < 8.0
    assert kv_read_factor(catalog.model("llama-3.1-8b"), d, 4096, "bf16") == 32 / 8


def test_the_assumptions_do_not_claim_a_window_the_runtime_does_not_keep(run_cli):
    mlx, cpp = _plan(run_cli, "mlx"), _plan(run_cli, "llamacpp")
    window = "Sliding-window layers cache min(context, window) tokens (ring buffer)."
    assert window in cpp["assumptions"] and window not in mlx["assumptions"]


def test_llama_cpp_and_mlx_run_the_text_model_their_vision_tower_out_of_memory(run_cli):
    """Qwen3.5-27B in BF16: vLLM loads its 460,730,096-parameter vision tower (921,460,192 B beside the decoder);
    llama.cpp runs a GGUF, which holds the text model (the tower is a separate mmproj file, loaded with --mmproj),
    and mlx-lm builds the language model alone, so theirs are the decoder's weights and the plan says where the tower
    went. None loads the MTP layer."""
    def weights(runtime):
        code, out, err = run_cli("plan", "qwen3.5-27b", "--gpu", "h200", "--quant", "bf16", "--runtime", runtime,
                                 "--json")
        assert code == 0, err
        d = json.loads(out)
        return d["weights"]["bytes_by_component"], " ".join(d["notes"])
    vllm, vllm_notes = weights("vllm")
    cpp, cpp_notes = weights("llamacpp")
    mlx, mlx_notes = weights("mlx")  # mlx-lm's wrapper drops the tower's weights as it loads (TEXT_ONLY)
    assert vllm["extra"] == 460_730_096 * 2 and cpp["extra"] == 0 and mlx["extra"] == 0
    assert sum(vllm.values()) - sum(cpp.values()) == 460_730_096 * 2
    assert "not in the weights above: vision tower" in cpp_notes and "mmproj" in cpp_notes
    assert "not in the weights above: vision tower" in mlx_notes and "mlx-lm" in mlx_notes
    assert "not in the weights above: vision" not in vllm_notes and "--language-model-only" in vllm_notes
    assert "--language-model-only" not in cpp_notes
    assert all("not loaded: multi-token-prediction" in n for n in (cpp_notes, vllm_notes, mlx_notes))


def test_the_towers_vllm_loads_are_all_named(run_cli):
    """Gemma 4 E4B under vLLM: the extra row holds its audio tower (308,757,248 parameters) and its vision tower
    (169,331,136), 0.48 B; the note named the vision tower's 0.17 B alone, as if --language-model-only freed a third
    of the row. --language-model-only sets every modality's limit to 0 and loads none of them."""
    code, out, err = run_cli("plan", "gemma-4-e4b", "--gpu", "rtx4090", "--runtime", "vllm", "--json")
    assert code == 0, err
    d = json.loads(out)
    note = next(n for n in d["notes"] if n.startswith("loaded: "))
    assert "audio tower" in note and "vision tower" in note and "(0.48 B parameters" in note
    assert d["weights"]["bytes_by_component"]["extra"] == (308_757_248 + 169_331_136) * 2
