"""plan --spec (llmsize/estimate/speculative.py): speculative decoding's batch-1 ceiling, memory and expected speed,
and its row in plan --levers."""

from __future__ import annotations

import json
import math
import re

import pytest

E_K4_A07 = (1 - 0.7 ** 5) / (1 - 0.7)  # (1 - 0.16807) / 0.3 = 2.77310 tokens a verify pass


def _plan(run_cli, *args):
    code, out, err = run_cli("plan", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_a_draft_model_by_hand(run_cli):
    """Llama 3.1 8B BF16 on an RTX 4090 (1,008 GB/s) at 4,096 tokens with a Llama 3.2 1B draft, k = 4, a = 0.7: a
    dense verify pass of 5 tokens reads what one step reads (15.547 GB: weights 15.010 + cache 0.537), each draft step
    what the draft's own plan reads (its batch-1 ceiling), and a pass yields 2.773 tokens:
        ceiling = 2.7731 / (15.547 GB / 1,008 GB/s + 4 x draft step) ~ 107.6 tok/s (x1.66).
    The draft's weights (2.47 GB) leave that much less for the cache, and each sequence holds the draft's cache too
    (16 layers x 8 heads x 64 x 2 x 2 B = 32,768 B a token, 134,217,728 B at 4,096 tokens)."""
    d = _plan(run_cli, "llama-3.1-8b", "--gpu", "rtx4090", "--spec", "draft=llama-3.2-1b,k=4,accept=0.7")
    draft = _plan(run_cli, "llama-3.2-1b", "--gpu", "rtx4090")
    s = d["speculative"]
    assert s["spec"] == "draft=llama-3.2-1b,k=4,accept=0.7"
    assert s["tokens_per_pass"] == pytest.approx(E_K4_A07, abs=1e-4)
    verify = d["decode"]["bytes_read_per_token"] / 1008e9
    assert s["verify_time_s"] == pytest.approx(verify, rel=1e-6)
    assert s["draft_step_time_s"] == pytest.approx(1 / draft["decode"]["ceiling_tok_s"], rel=1e-5)
    ceiling = E_K4_A07 / (verify + 4 / draft["decode"]["ceiling_tok_s"])
    assert s["ceiling_tok_s"] == pytest.approx(ceiling, rel=1e-5) == pytest.approx(107.6, abs=0.05)
    assert s["gain"] == pytest.approx(ceiling / d["decode"]["ceiling_tok_s"], rel=1e-4)
    assert s["draft_weight_bytes"] == draft["weights"]["bytes_total"]
    assert s["draft_kv_bytes_per_sequence"] == 16 * 8 * 64 * 2 * 2 * 4096 == 134_217_728
    assert s["kv_budget_bytes"] == d["capacity"]["kv_budget_bytes"] - s["draft_weight_bytes"]
    per_seq = d["kv"]["bytes_per_sequence"] + s["draft_kv_bytes_per_sequence"]
    assert s["max_concurrent_sequences"] == s["kv_budget_bytes"] // per_seq < d["capacity"]["max_concurrent_sequences"]
    assert d["decode"]["ceiling_tok_s"] == pytest.approx(64.8, abs=0.05)  # the plain ceiling stays what it was


def test_mtp_reads_more_experts_in_its_verify_pass(run_cli):
    """DeepSeek-V3 FP8 on 8 x H200 with its MTP module (mtp=1, a = 0.85, DeepSeek-V3 technical report section 5.4.3:
    85-90% for the second token): a pass yields 1.85 tokens, but verifying 2 tokens routes to up to 2 x 8 experts a
    layer, so the pass reads more than a step and the ceiling gains less than 1.85x. The module (14B parameters, not
    loaded by plain decoding) brings its own layer, eh_proj and norms, 11,610,068,224 parameters counted from
    config.json (the embedding and output head copies beside them vLLM's drafter takes from the target): x 1 B / 8
    cards = 1,451,258,528 B a card; and its one layer's cache (512 + 64) x 2 B = 1,152 B a token, 4,718,592 B at
    4,096 tokens."""
    d = _plan(run_cli, "deepseek-v3", "--gpu", "h200", "--tp", "8", "--quant", "fp8", "--spec", "mtp=1,accept=0.85")
    s = d["speculative"]
    assert s["tokens_per_pass"] == pytest.approx(1.85) and s["draft"] is None
    assert s["draft_weight_bytes"] == 11_610_068_224 // 8 and s["draft_kv_bytes_per_sequence"] == 1152 * 4096
    assert s["verify_time_s"] > 1 / d["decode"]["ceiling_tok_s"]  # more experts than one token's
    assert 1.0 < s["gain"] < 1.85


def test_a_hybrids_mtp_layer_caches_what_one_attention_layer_does(run_cli):
    """Qwen3.5-27B BF16 on an H100 with its MTP layer (a gated full-attention layer, vllm qwen3_5_mtp.py): 64 layers,
    of which 16 cache keys and values (4 KV heads x 256 x 2 x 2 B = 4,096 B a token, 16,777,216 B at 4,096 tokens)
    and 48 hold a fixed recurrent state (153,944,064 B in all); the draft caches one attention layer's 16,777,216 B,
    not the mean over all 64 ((16 x 16,777,216 + 153,944,064) / 64 = 6,599,680 B, 2.5x less here, 4x less as the
    context grows). Its weights, 424,699,392 BF16
    parameters the engines leave out of plain decoding, come in: 849,398,784 B."""
    d = _plan(run_cli, "qwen3.5-27b", "--gpu", "h100", "--spec", "mtp=1")
    s = d["speculative"]
    assert s["draft_kv_bytes_per_sequence"] == 4 * 256 * 2 * 2 * 4096 == 16_777_216
    assert s["draft_weight_bytes"] == 424_699_392 * 2
    long = _plan(run_cli, "qwen3.5-27b", "--gpu", "h100", "--spec", "mtp=1", "--context", "65536")["speculative"]
    assert long["draft_kv_bytes_per_sequence"] == 4096 * 65536
    # four tokens a pass from its one layer (vLLM reuses it: spec_step_idx % num_mtp_layers): one layer's cache still
    four = _plan(run_cli, "qwen3.5-27b", "--gpu", "h100", "--spec", "mtp=4")["speculative"]
    assert four["draft_kv_bytes_per_sequence"] == 16_777_216 and four["draft_weight_bytes"] == 424_699_392 * 2


def test_glm_mtp_draft_brings_its_layer_not_a_second_embedding(run_cli):
    """GLM-4.5-Air BF16 with --spec mtp=1: the checkpoint's MTP layer holds 3,616,573,568 parameters, of which its
    embedding and output head copies (1,241,513,984) vLLM's drafter takes from the target; the draft adds the other
    2,375,059,584 x 2 B = 4,750,119,168 B."""
    s = _plan(run_cli, "glm-4.5-air", "--gpu", "h200", "--quant", "bf16", "--spec", "mtp=1")["speculative"]
    assert s["draft_weight_bytes"] == 2_375_059_584 * 2


def test_the_expected_speed_with_a_draft(run_cli):
    """The runtime's step-time model prices the verify pass and the draft's steps (their fixed costs too): the
    expected speed with --spec sits between the plain expected speed and the speculative ceiling."""
    d = _plan(run_cli, "llama-3.1-8b", "--gpu", "rtx4090", "--spec", "draft=llama-3.2-1b,k=4,accept=0.7")
    e = d["expected"]
    assert e["tok_s"] < e["spec_tok_s"] <= d["speculative"]["ceiling_tok_s"]
    assert e["spec_tok_s_low"] < e["spec_tok_s"] < e["spec_tok_s_high"]
    plain = _plan(run_cli, "llama-3.1-8b", "--gpu", "rtx4090")
    assert plain["speculative"] is None and plain["expected"]["spec_tok_s"] is None


def test_a_perfect_draft_at_zero_cost_would_give_k_plus_one(catalog):
    """Hand check of the pass arithmetic: accept 1 gives k + 1 tokens a pass; with a free draft the time per token is
    the verify pass / (k + 1); accept 0 gives one token a pass (the verify's own)."""
    from llmsize.estimate.speculative import Spec, time_per_token_s

    assert Spec(4, 1.0).tokens_per_pass() == 5 and Spec(4, 0.0).tokens_per_pass() == pytest.approx(1.0)
    assert time_per_token_s(0.010, 0.0, Spec(4, 1.0)) == pytest.approx(0.002)
    assert time_per_token_s(0.010, 0.001, Spec(4, 0.0)) == pytest.approx(0.014)


@pytest.mark.parametrize("args, needle", [
    (("llama-3.1-8b", "--spec", "mtp=1,accept=0.8"), "no multi-token-prediction module"),
    (("llama-3.2-1b", "--spec", "draft=llama-3.1-8b,accept=0.7"), "is not smaller"),
    (("llama-3.1-8b", "--spec", "draft=qwen3-0.6b,accept=0.7"), "share the target's tokenizer"),
    (("llama-3.1-8b", "--spec", "draft=llama-3.1-8b,accept=0.7"), "the target model itself"),
    (("llama-3.1-8b", "--spec", "draft=llama-3.2-1b,accept=2"), "accept 2 is not in [0, 1]"),
    (("llama-3.1-8b", "--spec", "draft=llama-3.2-1b,k=0,accept=0.5"), "k 0 is not from 1 to 16"),
    (("deepseek-v3", "--spec", "mtp=0"), "mtp 0 is not from 1 to 16"),
    (("llama-3.1-8b", "--spec", "draft"), "key=value"),
    (("deepseek-v3", "--spec", "mtp=1,k=3,accept=0.8"), "k is a draft model's"),
    (("llama-3.1-8b", "--spec", "draft=llama-3.2-1b,draft=tinyllama-1.1b,accept=0.7"), "given twice"),
])
def test_bad_spec_on_plan_is_one_line(run_cli, args, needle):
    code, out, err = run_cli("plan", *args, "--gpu", "rtx4090")
    assert code == 2 and out == "" and needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2


def test_the_lever_row_is_the_spec_plan(run_cli):
    """plan --levers proposes the family's smallest draft (a fifth of the parameters at most, same vocabulary) at the
    stated acceptance, or the model's own MTP module; its "after" is the speculative ceiling of its command."""
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "2", "--levers", "--json")
    assert code == 0, err
    row = next(r for r in json.loads(out)["levers"] if r["name"].startswith("speculative decoding"))
    assert "--spec draft=llama-3.2-1b,k=4,accept=0.7" in row["command"] and "assumed, not measured" in row["caveat"]
    assert row["figure"] == "tok_s" and row["after"] > row["before"]
    code, out, err = run_cli("plan", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--levers", "--json")
    assert code == 0, err
    row = next(r for r in json.loads(out)["levers"] if r["name"].startswith("speculative decoding"))
    assert "--spec mtp=1,accept=0.85" in row["command"] and "DeepSeek-V3" in row["caveat"]
    assert math.isfinite(row["after"]) and row["after"] > row["before"]


def test_an_mtp_draft_reads_the_lm_head_beside_its_block(catalog):
    """A numbers pass (2026-12-06): an MTP draft step was 1 / 61 of DeepSeek-V3's step, 0.02 ms on 8 x H200, where
    the module must also run the target's lm_head it shares to draft a token. By hand (FP8 release, batch 1):
    37.67 GB read a token, of which the BF16 lm_head 1.85 GB (129,280 x 7,168 x 2 B = 1.853 GB); a mean block
    (37.67 - 1.85) / 61 = 0.587 GB; the draft reads 0.587 + 1.853 = 2.44 GB, 6.5% of the step (1 / 61 was 1.6%)."""
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.speculative import mtp_step_s

    m = catalog.model("deepseek-v3")
    p = make_plan(m, catalog.gpu("h200"), PlanInputs(tp=8), search_fit=False)
    head = p.weights.read_bytes_per_token["lm_head"]
    assert head == pytest.approx(129_280 * 7_168 * 2, rel=1e-6)
    total = p.weights.bytes_read_per_token
    assert mtp_step_s(1.0, m, p.weights) == pytest.approx(((total - head) / 61 + head) / total)
    assert mtp_step_s(1.0, m, p.weights) == pytest.approx(0.065, abs=0.001)
    assert mtp_step_s(1.0, m) == pytest.approx(1 / 61)  # without the weights: a mean layer


def test_an_mtp_draft_step_reads_its_block_in_the_bits_the_module_is_stored_in(catalog):
    """Beside NVFP4 weights the module is BF16 (module_bits), so its draft step reads its block at 16 bits a weight,
    not the target's 4.5: by hand, (mean block x 16 / 4.5 + lm_head) / the step's read; beside FP8 weights the module
    is FP8 and the step is the mean block's, as before."""
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.quant import quant_format
    from llmsize.estimate.speculative import mtp_step_s

    m = catalog.model("qwen3.6-35b-a3b")
    nvfp4 = quant_format("nvfp4")
    p = make_plan(m, catalog.gpu("rtx5090"), PlanInputs(quant="nvfp4"), search_fit=False)
    total, head = p.weights.bytes_read_per_token, p.weights.read_bytes_per_token["lm_head"]
    block = (total - head) / m.num_layers
    wide = mtp_step_s(1.0, m, p.weights, nvfp4)
    assert wide == pytest.approx((block * 16 / 4.5 + head) / total)
    # the BF16 lm_head (248,320 x 2,048 x 2 B = 1.02 GB) is most of a draft step's read: 0.43 of the target's step
    # with the mean NVFP4 block, 0.47 with it in BF16
    assert mtp_step_s(1.0, m, p.weights) == pytest.approx(0.435, abs=0.002)
    assert wide == pytest.approx(0.472, abs=0.002)
    fp8 = make_plan(m, catalog.gpu("h100"), PlanInputs(quant="fp8"), search_fit=False)
    assert mtp_step_s(1.0, m, fp8.weights, quant_format("fp8")) == pytest.approx(mtp_step_s(1.0, m, fp8.weights))


def test_the_launch_line_carries_the_speculative_decoding_it_was_sized_with(run_cli):
    """plan --spec ... --emit gives the engine's own flags for it (vLLM's --speculative-config, SGLang's EAGLE chain,
    as fleet --emit does; a new user's pass found them dropped) and, as the most sequences, what the cache holds
    beside the draft (the speculative section's count, not the plain plan's), where vLLM's own ledger holds as many
    (from 0.15 a Gated DeltaNet group keeps a state page for each drafted token too: engines.py, vllm_release)."""
    for engine, flag in (("vllm", '--speculative-config \'{"method": "mtp", "num_speculative_tokens": 1}\''),
                         ("sglang", "--speculative-algorithm EAGLE --speculative-num-steps 1")):
        code, out, err = run_cli("plan", "qwen3.5-27b", "--gpu", "h100", "--spec", "mtp=1", "--emit", engine)
        assert code == 0, err
        assert flag in out
    seqs = _plan(run_cli, "qwen3.5-27b", "--gpu", "h100", "--spec", "mtp=1")["speculative"]["max_concurrent_sequences"]
    plain = _plan(run_cli, "qwen3.5-27b", "--gpu", "h100")["capacity"]["max_concurrent_sequences"]
    def held(*extra):  # vLLM's own ledger at the line's length
        e = _plan(run_cli, "qwen3.5-27b", "--gpu", "h100", "--engine", "vllm", "--max-model-len", "4096", *extra)
        return int(e["engine"]["max_concurrency"])

    code, out, err = run_cli("plan", "qwen3.5-27b", "--gpu", "h100", "--spec", "mtp=1", "--emit", "vllm")
    spec_held = held("--spec", "mtp=1")
    assert re.search(rf"--max-num-seqs {min(seqs, spec_held)}\b", out) and seqs < plain
    code, out, err = run_cli("plan", "qwen3.5-27b", "--gpu", "h100", "--emit", "vllm")
    assert "--speculative-config" not in out and re.search(rf"--max-num-seqs {min(plain, held())}\b", out)
    assert spec_held < held()  # a page more in each Gated DeltaNet group for the drafted token


def test_the_diagnosis_offers_speculative_decoding_only_where_it_is_not_given(run_cli):
    """A memory-bound plan's diagnosis lists speculative decoding among its levers; with --spec, whose section
    prices it, it does not offer it again (a new user's pass found it did)."""
    lever = "Speculative decoding: several tokens per pass over the weights."
    assert lever in " ".join(_plan(run_cli, "qwen3.5-27b", "--gpu", "h100")["diagnosis"]["levers"])
    given = _plan(run_cli, "qwen3.5-27b", "--gpu", "h100", "--spec", "mtp=1")
    assert lever not in " ".join(given["diagnosis"]["levers"])


def test_an_mtp_module_beside_4_bit_weights_stays_in_16_bits(run_cli):
    """NVIDIA's NVFP4 exports keep the MTP layer in BF16 (their hf_quant_config.json excludes "mtp*"), so
    Qwen3.6-35B-A3B in NVFP4 drafts with 844,640,768 x 2 B = 1,689,281,536 B of module, not 4.5 bits a weight (a new
    user's pass found 0.475 GB); beside FP8 weights the module is FP8, as DeepSeek-V3's checkpoint stores it."""
    nvfp4 = _plan(run_cli, "qwen3.6-35b-a3b", "--gpu", "rtx5090", "--quant", "nvfp4", "--spec", "mtp=1")
    assert nvfp4["speculative"]["draft_weight_bytes"] == 844_640_768 * 2
    fp8 = _plan(run_cli, "qwen3.6-35b-a3b", "--gpu", "h100", "--quant", "fp8", "--spec", "mtp=1")
    assert fp8["speculative"]["draft_weight_bytes"] == 844_640_768
    # a GGUF keeping the MTP tensors holds them in its file type (llama.cpp's --spec-type draft-mtp drafts with them)
    gguf = _plan(run_cli, "qwen3.6-27b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--spec", "mtp=1")
    assert gguf["speculative"]["draft_weight_bytes"] == 424_699_392 * 4.5 / 8


def test_llama_server_line_drafts_as_the_plan_was_sized(run_cli):
    """plan --spec --emit llama-server: the model's MTP tensors with --spec-type draft-mtp --spec-draft-n-max k
    (llama.cpp PR #22673), saying the GGUF must have kept them; a draft model's GGUF with -md."""
    code, out, err = run_cli("plan", "qwen3.6-27b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--spec", "mtp=2",
                             "--emit", "llama-server")
    assert code == 0, err
    assert "--spec-type draft-mtp --spec-draft-n-max 2" in out and "kept the MTP tensors" in out
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--spec",
                             "draft=llama-3.2-1b,k=4,accept=0.7", "--emit", "llama-server")
    assert code == 0, err
    assert "-md llama-3.2-1b-Q4_K_M.gguf --spec-type draft-simple --spec-draft-n-max 4" in out


def test_mtp_under_a_runtime_that_cannot_draft_with_it_is_refused(run_cli):
    """mlx-lm drops a model's MTP layers as it loads (its sanitize filters "mtp."; mlx-lm @d78bf58e) and drafts only
    with --draft-model; llama.cpp's converter drops DeepSeek-V3's MTP layer (conversion/deepseek.py skip_mtp), so
    no GGUF runtime has one to draft with; gpt-fast takes a draft checkpoint only. Each refusal names the runtime
    and what to do; vLLM drafts with both."""
    for model, gpu, extra, runtime, words in (
            ("qwen3.6-27b", "h100", ["--quant", "mlx-4bit"], "mlx", "mlx-lm drops the model's MTP layers"),
            ("deepseek-v3", "h200", ["--tp", "8", "--quant", "gguf-q4_k_m"], "llamacpp",
             "converter drops DeepSeek-V3's MTP layer"),
            ("deepseek-v3", "h200", ["--tp", "8", "--quant", "gguf-q4_k_m"], "ollama",
             "converter drops DeepSeek-V3's MTP layer"),
            # gpt-fast drafts with --draft_checkpoint_path alone (generate.py, pytorch-labs/gpt-fast @0055c42d)
            ("qwen3.5-27b", "h100", [], "gpt-fast", "gpt-fast drafts only with a separate model")):
        code, out, err = run_cli("plan", model, "--gpu", gpu, *extra, "--runtime", runtime, "--spec", "mtp=1")
        assert code == 2 and out == "", (runtime, err)
        assert f"--spec mtp=1,accept=0.85 under {runtime}: " in err and words in err, err
        assert "--spec draft=MODEL" in err and "Traceback" not in err
    assert _plan(run_cli, "deepseek-v3", "--gpu", "h200", "--tp", "8", "--runtime", "vllm", "--spec", "mtp=1")[
        "speculative"]["tokens_per_pass"] > 1


def test_a_gguf_runtime_says_how_it_is_told_to_draft_with_mtp(run_cli):
    """llama-server needs --spec-type draft-mtp, Ollama PARAMETER draft_num_predict (docs/modelfile.mdx: "embedded
    MTP tensors require setting this parameter"), LM Studio MTP turned on at load: each plan says its own, with the
    plan's k; a family llama.cpp builds no MTP graph for is said to be unchecked, not refused."""
    for runtime, words in (("llamacpp", "--spec-type draft-mtp --spec-draft-n-max 2"),
                           ("ollama", "PARAMETER draft_num_predict 2"),
                           ("lmstudio", "MTP is turned on as the model loads")):
        notes = " ".join(_plan(run_cli, "qwen3.6-27b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--runtime",
                               runtime, "--spec", "mtp=2")["notes"])
        assert words in notes, (runtime, notes)
        assert "the file must have kept them" in notes
    vllm = " ".join(_plan(run_cli, "qwen3.6-27b", "--gpu", "h100", "--runtime", "vllm", "--spec", "mtp=2")["notes"])
    assert "draft-mtp" not in vllm and "draft_num_predict" not in vllm


def test_the_lever_table_offers_mtp_only_where_the_runtime_drafts_with_it(run_cli):
    """Under mlx-lm the lever table does not try the MTP module (its plan would be refused); under vLLM it does."""
    def spec_rows(*args):
        code, out, err = run_cli("plan", "qwen3.6-27b", "--gpu", "h100", *args, "--levers", "--json")
        assert code == 0, err
        return [r["name"] for r in json.loads(out)["levers"] if r["name"].startswith("speculative decoding")]

    assert spec_rows("--runtime", "vllm") == ["speculative decoding (mtp=1,accept=0.85)"]
    assert not any("mtp=" in name for name in spec_rows("--quant", "mlx-4bit", "--runtime", "mlx"))


def test_the_ollama_modelfile_carries_the_speculative_decoding_it_was_sized_with(run_cli):
    """--emit ollama with --spec mtp=k: PARAMETER draft_num_predict k (the MTP tensors are drafted with only when it
    is set). A separate draft model is refused: Ollama runs a DRAFT file as an MTP (or DFlash) head, `--spec-type
    draft-mtp` to llama-server (llm/llama_server.go externalDraftType, ollama @fb307609); the Modelfile had carried
    `DRAFT llama-3.2-1b-Q4_K_M.gguf`, which Ollama would have loaded as Llama 3.1 8B's MTP head."""
    from conftest import assert_one_line_error

    code, out, err = run_cli("plan", "qwen3.6-27b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--spec", "mtp=2",
                             "--emit", "ollama")
    assert code == 0, err
    assert "PARAMETER draft_num_predict 2" in out.splitlines() and "DRAFT" not in out
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--spec",
                             "draft=llama-3.2-1b,k=4,accept=0.7", "--emit", "ollama")
    assert_one_line_error(code, err)
    assert "--spec draft=llama-3.2-1b: Ollama runs a Modelfile's DRAFT file as the model's MTP" in err
    assert "--emit llama-server" in err and out == ""
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--spec",
                             "draft=llama-3.2-1b,k=4,accept=0.7", "--emit", "llama-server")
    assert code == 0, err
    assert "-md llama-3.2-1b-Q4_K_M.gguf --spec-type draft-simple --spec-draft-n-max 4" in out


def test_fleet_refuses_mtp_where_plan_does(run_cli):
    """fleet --spec mtp takes the same refusals as plan: mlx-lm drops the module; DeepSeek-V3's GGUFs have none
    (under llama.cpp, and from a GGUF's weights under vLLM too: the file is what lacks it)."""
    for args, words in ((("qwen3.5-9b", "--gpus", "m4-max", "--quant", "mlx-4bit", "--runtime", "mlx",
                          "--spec", "mtp=2"), "mlx-lm drops the model's MTP layers"),
                        (("deepseek-v3", "--gpus", "h200", "--quant", "gguf-q4_k_m", "--runtime", "llamacpp",
                          "--spec", "mtp=1"), "converter drops DeepSeek-V3's MTP layer")):
        code, out, err = run_cli("fleet", args[0], "--users", "10", *args[1:])
        assert code == 2 and out == "" and words in err and "Traceback" not in err, err
    code, out, err = run_cli("plan", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--quant", "gguf-q4_k_m", "--spec",
                             "mtp=1", "--runtime", "vllm")
    assert code == 2 and "under a GGUF's weights" in err and "drop --quant gguf-*" in err, err



def test_spec_parsing_names_what_is_missing(catalog):
    """A draft model without accept= is told that accept is missing (it was told "accept must be a number", of a
    value never given); a bare `mtp` is mtp=1, as the README and the messages name it."""
    from llmsize.errors import InvalidValueError
    from llmsize.estimate.speculative import MTP_ACCEPT, parse_spec

    for text in ("draft=llama-3.2-1b", "draft=llama-3.2-1b,k=3"):
        with pytest.raises(InvalidValueError, match="a draft model needs accept=A") as e:
            parse_spec(text, catalog)
        assert "must be a number" not in str(e.value)
    with pytest.raises(InvalidValueError, match="accept must be a number"):
        parse_spec("draft=llama-3.2-1b,accept=x", catalog)
    bare, given = parse_spec("mtp", catalog), parse_spec("mtp=1", catalog)
    assert (bare.k, bare.accept, bare.draft) == (given.k, given.accept, given.draft) == (1, MTP_ACCEPT, None)
    assert parse_spec("mtp,accept=0.6", catalog).accept == 0.6


def test_speculative_decoding_over_pipeline_stages_where_the_engines_releases_do_not_run_it(run_cli):
    """vLLM releases through 0.29 start neither an MTP drafter nor a draft model across pipeline stages (vllm #52069,
    #57755), SGLang refuses a speculative algorithm with --pp-size above 1 (server_args) and TensorRT-LLM's PyTorch
    executor refuses drafting under pipeline parallel (#9009): fleet had sized DeepSeek-V3 on H100s as tp 8 x pp 2
    with MTP and printed that launch line. fleet now sizes no such replica, saying why; a plan that asks for one
    (with --pp) says so, in its report and above its launch line."""
    from conftest import assert_one_line_error

    for rt, words in (("vllm", "vLLM releases through 0.29 start neither an MTP drafter nor a draft model"),
                      ("sglang", "SGLang refuses a speculative algorithm with --pp-size above 1")):
        code, out, err = run_cli("plan", "deepseek-v3", "--gpu", "h100", "--tp", "8", "--pp", "2", "--spec",
                                 "mtp=1,accept=0.8", "--runtime", rt, "--emit", rt)
        assert code == 0, err
        assert out.startswith(f"# --spec mtp=1,accept=0.8 with --pp 2: {words}")
        code, out, err = run_cli("plan", "deepseek-v3", "--gpu", "h100", "--tp", "8", "--pp", "2", "--spec",
                                 "mtp=1,accept=0.8", "--runtime", rt, "--json")
        assert code == 0, err
        assert any(words in n for n in json.loads(out)["notes"])
    code, out, err = run_cli("plan", "deepseek-v3", "--gpu", "h100", "--tp", "8", "--spec", "mtp=1,accept=0.8",
                             "--json")
    assert code == 0, err
    assert not any("pipeline stages" in n for n in json.loads(out)["notes"])  # one stage: nothing to say
    code, out, err = run_cli("fleet", "deepseek-v3", "--users", "400", "--gpus", "h100", "--spec", "mtp=1,accept=0.8",
                             "--emit", "vllm")
    assert_one_line_error(code, err)
    assert "--spec over pipeline stages: vLLM releases through 0.29" in err and "pipeline-parallel-size" not in out
    assert err.rstrip().endswith("Widen --gpus, lower the load, or drop --spec.")
