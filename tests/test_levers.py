"""plan --levers (llmsize/estimate/levers.py): every row is the plan its command gives."""

from __future__ import annotations

import json
import shlex

import pytest

def _fleet_mode(d, mode):
    """A fleet JSON's output tok/s per card in `mode` (its row or the other mode beside it)."""
    rows = [r for row in d["rows"] for r in (row, row.get("other")) if r and r["mode"] == mode]
    return rows[0]["output_tok_s_per_gpu"]


FIGURE_KEYS = {"kv_budget_gb": lambda d: d["capacity"]["kv_budget_bytes"] / 1e9,
               "sequences": lambda d: d["capacity"]["max_concurrent_sequences"],
               # with --spec, the batch-1 ceiling is speculative decoding's
               "tok_s": lambda d: (d["speculative"] or d["decode"])["ceiling_tok_s"],
               "aggregate_tok_s": lambda d: d["decode"]["aggregate_tok_s"],
               "offload_tok_s": lambda d: (d["engine"]["offload"] or {}).get("decode_ceiling_tok_s"),
               "fleet_tok_s_per_gpu": lambda d: _fleet_mode(d, "disaggregated")}
# the runtime's expected value of a decode figure (levers.expected_of), with --spec speculative decoding's
EXPECTED_KEYS = {"tok_s": lambda d: d["expected"].get("spec_tok_s") or d["expected"]["tok_s"],
                 "aggregate_tok_s": lambda d: d["expected"]["aggregate_tok_s"]}
# the rows whose "before" is not a figure of the plan itself: the offload's (the model does not run: none) and the
# fleet's (its aggregated mode)
BEFORE_KEYS = {"offload_tok_s": lambda d: None, "fleet_tok_s_per_gpu": lambda d: _fleet_mode(d, "aggregated")}


def _same(a, b) -> bool:
    return a is None and b is None or (a is not None and b is not None and a == pytest.approx(b, rel=1e-6, abs=1e-3))


def _levers(run_cli, *args):
    code, out, err = run_cli("plan", *args, "--levers", "--json")
    assert code == 0, err
    return json.loads(out)["levers"]


def test_the_seed_card_levers_as_printed(run_cli):
    """Gemma 4 12B NVFP4 on the RTX 5060 Ti (seed 000's run): decode is bandwidth-bound, so the batch-1 ceiling
    binds (52.4 tok/s); batching, more cards, smaller weights and a smaller cache each raise a figure, and the
    first row is the diagnosis. The weight formats are those of the runtime the plan's expected speed is for (vLLM
    by default here: 4-bit weight-only and MXFP4 below NVFP4's 4.5 bits; GGUF files with --runtime llamacpp)."""
    rows = _levers(run_cli, "gemma-4-12b", "--gpu", "rtx5060ti")
    head = rows[0]
    assert head["name"] == "diagnosis: bandwidth" and head["figure"] == "tok_s" and head["command"] is None
    assert head["before"] == head["after"] == pytest.approx(52.4, abs=0.05)
    names = [r["name"] for r in rows[1:]]
    assert {"KV cache in fp8", "2 cards (tensor parallel)", "weights in int4-g128", "weights in mxfp4"} <= set(names)
    assert not any(n.startswith("weights in gguf") for n in names)
    gguf = {r["name"] for r in _levers(run_cli, "gemma-4-12b", "--gpu", "rtx5060ti", "--runtime", "llamacpp")}
    assert {"weights in gguf-q3_k_m", "weights in gguf-q2_k"} <= gguf and "weights in mxfp4" not in gguf
    assert any(n.startswith("batch ") for n in names)
    for r in rows[1:]:
        assert set(r) >= {"name", "resource", "figure", "before", "after", "caveat", "command"}
        own = "(another model)" not in r["name"]
        verb = "fleet" if r["figure"] == "fleet_tok_s_per_gpu" else "plan"
        assert r["after"] is not None and r["caveat"]
        assert r["command"].startswith(f"llmsize {verb} gemma-4-12b ") == own


def test_architectures_the_model_lacks_are_other_models(run_cli):
    """Llama 3.1 8B has GQA but no MLA, window, recurrent state or experts: each comes as the catalog's model
    nearest in total parameters that has it, labelled as another model, planned with the same options; Gemma 4
    12B has windows, so no window row."""
    rows = _levers(run_cli, "llama-3.1-8b", "--gpu", "rtx4090", "--context", "32768")
    other = {r["name"].split(":")[0]: r for r in rows if "(another model)" in r["name"]}
    assert set(other) == {"MLA", "a sliding window", "SSM / linear-attention layers", "MoE"}
    for r in other.values():
        assert "a different model" in r["caveat"] and not r["command"].startswith("llmsize plan llama-3.1-8b ")
        assert r["command"].endswith("--gpu rtx4090 --context 32768")
    names = [r["name"] for r in _levers(run_cli, "gemma-4-12b", "--gpu", "rtx4090")]
    assert not any(n.startswith(("a sliding window:", "GQA:")) for n in names)


def test_an_experts_only_scope_leaves_a_dense_model_its_formats_own(run_cli):
    """Qwen3.6 35B-A3B with FP8 experts: the nearest windowed model (Gemma 4 31B, dense) has no experts to take
    that scope, so its row plans it in FP8 at the format's own scope rather than being dropped."""
    rows = _levers(run_cli, "qwen3.6-35b-a3b", "--gpu", "h100-sxm", "--quant", "fp8", "--scope", "experts")
    other = {r["name"].split(":")[0]: r for r in rows if "(another model)" in r["name"]}
    assert "a sliding window" in other
    assert other["a sliding window"]["command"].endswith("--quant fp8")
    assert other["MLA"]["command"].endswith("--quant fp8 --scope experts")  # GLM-4.7-Flash has experts


def test_a_model_that_does_not_fit_binds_on_memory(run_cli):
    """Llama 3.1 70B in BF16 on a 24 GB card: the weights (141 GB) leave a negative budget, the figure is the
    memory left for the cache, and 4-bit weights (vLLM's, the default runtime for BF16 weights) or 8 cards are the
    rows that help; the cache rows do not apply."""
    rows = _levers(run_cli, "llama-3.1-70b", "--gpu", "rtx4090")
    assert rows[0]["name"] == "diagnosis: weights" and rows[0]["figure"] == "kv_budget_gb" and rows[0]["after"] < 0
    assert not any(r["name"].startswith(("KV ", "batch")) for r in rows)
    assert {"weights in int4-g128", "weights in nvfp4", "8 cards (tensor parallel)"} <= {r["name"] for r in rows}


@pytest.mark.parametrize("args", [
    ("llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "2", "--gpu-util", "0.85", "--overhead-gib", "2", "--prompt", "1000",
     "--kv-dtype", "fp8", "--context", "16384"),
    ("llama-3.1-405b", "--gpu", "h100-sxm", "--tp", "8", "--nodes", "2", "--node-link-gb-s", "25"),
    ("qwen3-30b-a3b", "--gpu", "m4-max", "--wired-limit-gb", "100", "--kv-policy", "budget:2048", "--batch", "2"),
    ("llama-3.1-8b", "--gpu", "rtx4090", "--context", "8192", "--no-flash-attn"),
])
def test_a_row_keeps_the_plans_own_options(run_cli, args):
    """A row's command carries every option of the plan it changes (split, nodes and their link, memory budget,
    unified limit, prompt, cache dtype and policy, batch), so it reproduces the row's "after"."""
    rows = _levers(run_cli, *args)
    assert len(rows) > 2
    for row in rows[1:]:
        argv = shlex.split(row["command"])
        for opt in args[3::2]:
            if opt == "--no-flash-attn" and row["name"] == "FlashAttention":
                continue  # the lever that drops it
            if opt not in ("--tp", "--kv-dtype", "--kv-policy", "--batch") or "(another model)" in row["name"]:
                assert opt in argv, (opt, row["command"])
        code, out, err = run_cli(*argv[1:], "--json")
        assert code == 0, (row["command"], err)
        assert _same(FIGURE_KEYS[row["figure"]](json.loads(out)), row["after"]), row["command"]


@pytest.mark.parametrize("args", [
    # a review (2026-12-05): Ollama's KV lever printed --flash-attn on beside --no-flash-attn; a --pp lever from a
    # plan with llama.cpp cache types was refused as llama.cpp's one-GPU ledger
    ("qwen3-8b", "--gpu", "rtx4090", "--engine", "ollama"),
    ("qwen3-8b", "--gpu", "rtx4090", "--runtime", "llamacpp", "--cache-type-k", "q8_0", "--cache-type-v", "q8_0",
     "--flash-attn", "on"),
])
def test_a_llama_cpp_plans_lever_commands_run(run_cli, args):
    rows = _levers(run_cli, *args)
    assert len(rows) > 2
    for row in rows[1:]:
        if row["command"]:
            code, _, err = run_cli(*shlex.split(row["command"])[1:], "--json")
            assert code == 0, (row["command"], err)


@pytest.mark.parametrize("card,every", [("rtx5060ti", 1), ("h100-sxm", 4)])
def test_every_row_is_the_plan_its_command_gives(catalog, run_cli, card, every):
    """Over the whole catalog at 32,768 tokens on a 16 GB card (every fourth model on an H100, for the rows that
    differ there: models that fit, more batching): each lever's command, run as a user would, gives the row's
    "after" (its figure read from that plan's JSON, which rounds tok/s to 3 decimals), and its "before" is the plan's
    own (or, for the fleet's row, the fleet's aggregated mode)."""
    ran = {}  # a command several models' rows share (the same other model) is run once
    for m in catalog.models.all()[::every]:
        code, out, err = run_cli("plan", m.id, "--gpu", card, "--context", "32768", "--levers", "--json")
        assert code == 0, (m.id, err)
        d = json.loads(out)
        for row in d["levers"]:
            if row["figure"] not in BEFORE_KEYS:
                assert _same(row["before"], FIGURE_KEYS[row["figure"]](d)), (m.id, row["name"])
            if row["command"] is None:
                continue
            argv = shlex.split(row["command"])
            assert argv[1] in ("plan", "fleet") and argv[2] == (m.id if "(another model)" not in row["name"]
                                                                else argv[2])
            if row["command"] not in ran:
                code, out, err = run_cli(*argv[1:], "--json")
                assert code == 0, (m.id, row["command"], err)
                ran[row["command"]] = json.loads(out)
            assert _same(FIGURE_KEYS[row["figure"]](ran[row["command"]]), row["after"]), (m.id, row["command"])
            if row["expected_after"] is not None:  # the runtime's expected figure, the command's and the plan's
                assert _same(EXPECTED_KEYS[row["figure"]](ran[row["command"]]), row["expected_after"]), row["command"]
                assert _same(EXPECTED_KEYS[row["figure"]](d), row["expected_before"]), (m.id, row["name"])
            if argv[1] == "plan" and row["figure"] != "offload_tok_s":  # the TTFT beside it, the command's too
                assert _same(ran[row["command"]]["prefill"]["ttft_s"], row["ttft_after_s"]), (m.id, row["command"])
                assert _same(d["prefill"]["ttft_s"], row["ttft_before_s"]), (m.id, row["name"])
            if row["figure"] in BEFORE_KEYS:
                assert _same(BEFORE_KEYS[row["figure"]](ran[row["command"]]), row["before"]), (m.id, row["command"])


def test_partial_offload_row_is_the_fit_plan(run_cli):
    """Qwen3 30B-A3B in GGUF Q4_K_M (18.6 GB) on a 16 GB RTX 4080 Super does not fit: llama.cpp's --fit split keeps
    the experts of some layers in host RAM (--n-cpu-moe), and the row's "after" is that split's batch-1 ceiling with
    DDR5-6000 x 2 (96 GB/s) behind it, as `--engine llamacpp --fit --host-memory` plans it; before, the model does
    not run (no figure). Without --host-memory the row says what to add and has no figure."""
    args = ("qwen3-30b-a3b", "--gpu", "rtx4080super", "--quant", "gguf-q4_k_m")
    row = next(r for r in _levers(run_cli, *args, "--host-memory", "DDR5-6000x2") if r["name"].startswith("partial"))
    assert row["figure"] == "offload_tok_s" and row["before"] is None and row["after"] > 0
    assert row["name"] == "partial offload (--n-cpu-moe 8)"
    argv = shlex.split(row["command"])
    assert argv[-5:] == ["--engine", "llamacpp", "--fit", "--host-memory", "DDR5-6000x2"]
    code, out, err = run_cli(*argv[1:], "--json")
    assert code == 0, err
    assert json.loads(out)["engine"]["offload"]["decode_ceiling_tok_s"] == pytest.approx(row["after"], rel=1e-9)
    bare = next(r for r in _levers(run_cli, *args) if r["name"].startswith("partial"))
    assert bare["after"] is None and "--host-memory" in bare["caveat"]


def test_disaggregation_row_is_the_fleet_for_the_plans_sequences(run_cli):
    """A serving engine's plan gets the fleet's two modes on its card for its sequences (--prompt in, the rest of the
    context out, as many users as the card holds): output tok/s per card aggregated before, disaggregated after;
    a llama.cpp plan (no P/D split there) gets no such row."""
    rows = _levers(run_cli, "llama-3.1-8b", "--gpu", "h100-sxm", "--context", "8192", "--prompt", "6000")
    row = next(r for r in rows if r["figure"] == "fleet_tok_s_per_gpu")
    argv = shlex.split(row["command"])
    assert argv[1:3] == ["fleet", "llama-3.1-8b"] and argv[argv.index("--isl") + 1] == "6000"
    assert argv[argv.index("--osl") + 1] == "2192" and argv[argv.index("--gpus") + 1] == "h100-sxm"
    code, out, err = run_cli(*argv[1:], "--json")
    assert code == 0, err
    d = json.loads(out)
    assert row["before"] == pytest.approx(_fleet_mode(d, "aggregated")) and row["after"] == pytest.approx(
        _fleet_mode(d, "disaggregated"))
    names = [r["name"] for r in _levers(run_cli, "llama-3.1-8b", "--gpu", "h100-sxm", "--runtime", "llamacpp")]
    assert not any("disaggregated" in n for n in names)


def test_the_seeds_quantization_divides_the_weights_by_2_to_4(run_cli):
    """Seed 002's map: "quantification: /2 a /4 sur les poids". Llama 3.1 8B in BF16 at a 1-token context (the
    cache negligible), bandwidth-bound: the FP8 row multiplies the batch-1 ceiling by a little under 2 (embedding and
    lm_head stay 16-bit), the 4-bit rows by a little under 4 (their group scales, the 16-bit lm_head)."""
    rows = {r["name"]: r for r in _levers(run_cli, "llama-3.1-8b", "--gpu", "h100-sxm", "--context", "1")}
    gain = {n: r["after"] / r["before"] for n, r in rows.items() if n.startswith("weights in ")}
    assert 1.8 < gain["weights in fp8"] < 2.0
    assert all(3.0 < gain[f"weights in {f}"] < 4.0 for f in ("nvfp4", "mxfp4", "int4-g128"))


def test_a_bf16_model_that_does_not_fit_is_offered_a_gguf_offload(run_cli):
    """Llama 3.1 70B in BF16 (141 GB) on a 24 GB card: the offload row is llama.cpp's, with the Q4_K_M file its
    --fit split places (layers on the card, the rest in DDR5-6000 x 2), and its command gives that row's figure."""
    row = next(r for r in _levers(run_cli, "llama-3.1-70b", "--gpu", "rtx4090", "--host-memory", "DDR5-6000x2")
               if r["figure"] == "offload_tok_s")
    assert row["name"].startswith("partial offload (gguf-q4_k_m, --gpu-layers ") and row["before"] is None
    argv = shlex.split(row["command"])
    assert argv[argv.index("--quant") + 1] == "gguf-q4_k_m" and "--fit" in argv
    code, out, err = run_cli(*argv[1:], "--json")
    assert code == 0, err
    assert json.loads(out)["engine"]["offload"]["decode_ceiling_tok_s"] == pytest.approx(row["after"], rel=1e-9)
    assert 1 < row["after"] < 10  # a host share at 96 GB/s: a few tokens a second


def test_rows_from_zero_rank_by_what_they_reach_and_more_cards_past_the_plans_tp(run_cli):
    """Llama 3.1 70B on 2 x H100 at 32,768 tokens holds 0 sequences: the rows that lift it rank by the sequences
    they reach (8 cards above an FP8 cache's 1); a split plan still gets the larger splits."""
    rows = _levers(run_cli, "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "2", "--context", "32768")
    seqs = [r["after"] for r in rows[1:] if r["figure"] == "sequences"]
    assert rows[0]["after"] == 0 and seqs == sorted(seqs, reverse=True)
    names = {r["name"] for r in rows}
    assert {"4 cards (tensor parallel)", "8 cards (tensor parallel)"} <= names
    assert "2 cards (tensor parallel)" not in names


def test_a_ternary_model_gets_ternary_files_and_no_serving_rows(run_cli):
    """BitNet b1.58 2B4T (trained ternary): its weight row is llama.cpp's TQ1_0 (1.69 bits against the release's
    2), never an 8- or 4-bit format; no fleet row (no serving engine runs it); other models compared in their own
    release formats."""
    rows = _levers(run_cli, "bitnet-b1.58-2b-4t", "--gpu", "rtx4090", "--quant", "gguf-tq2_0")
    names = [r["name"] for r in rows]
    assert "weights in gguf-tq1_0" in names and not any(n.startswith("weights in") and "tq" not in n for n in names)
    assert not any(r["figure"] == "fleet_tok_s_per_gpu" for r in rows)
    assert all("--quant" not in r["command"] for r in rows if "(another model)" in r["name"])


def test_no_offload_row_where_llama_cpp_holds_the_whole_file(run_cli):
    """Llama 3.1 8B in BF16 does not fit a 12 GB card, but its Q4_K_M file does, whole: that is the weight-format
    row's to say, not an offload row that offloads nothing."""
    rows = _levers(run_cli, "llama-3.1-8b", "--gpu", "rtx3060", "--host-memory", "DDR5-6000x2")
    assert not any(r["figure"] == "offload_tok_s" for r in rows)


@pytest.mark.parametrize("args, needle", [
    (("--levers", "--emit", "vllm"), "one at a time"),
    (("--kv-policy", "budget:2048", "--emit", "vllm"), "what-if no engine runs"),
    (("--kv-dtype", "fp8_ds_mla"), "has none"),
    (("--prompt", "8192"), "longer than --context"),
    (("--kv-policy", "budget:99999999999"), "beyond any context"),
])
def test_contradictions_are_one_line(run_cli, args, needle):
    """What a review found accepted: the lever table and launch lines at once, a what-if in launch lines, vLLM's
    FlashMLA cache on a model without MLA, a prompt longer than its context, an absurd budget."""
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", *args)
    assert code == 2 and out == "" and needle in err and "Traceback" not in err


def test_decode_rows_rank_by_the_runtimes_expected_speed(run_cli):
    """Gemma 4 12B NVFP4 on the RTX 5060 Ti: 8 cards over PCIe multiply the batch-1 ceiling by 7.4 (52.4 ->
    388.0 tok/s) but vLLM's expected speed by 4.3 (36.1 -> 155.7 at 1ff51cd: the all-reduces' latency): each decode row
    carries the expected figure before and after, the rows are in the order of its gain, and a row keeps its
    ceiling beside it."""
    rows = _levers(run_cli, "gemma-4-12b", "--gpu", "rtx5060ti")
    head, rest = rows[0], [r for r in rows[1:] if r["figure"] == "tok_s"]
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--json")
    assert head["expected_before"] == head["expected_after"] == pytest.approx(json.loads(out)["expected"]["tok_s"])
    assert all(r["expected_after"] is not None for r in rest)
    gains = [r["expected_after"] / r["expected_before"] for r in rest]
    assert gains == sorted(gains, reverse=True)
    tp8 = next(r for r in rest if r["name"] == "8 cards (tensor parallel)")
    assert tp8["after"] / tp8["before"] > 7 and tp8["expected_after"] / tp8["expected_before"] < 5
    # no runtime constants for the figure (the memory left): no expected figure, ranked by the figure itself
    mem = _levers(run_cli, "llama-3.1-70b", "--gpu", "h100-sxm")
    assert mem[0]["figure"] == "kv_budget_gb" and all(r["expected_after"] is None for r in mem
                                                      if r["figure"] == "kv_budget_gb")


def test_rows_that_move_the_time_to_first_token_say_so(run_cli):
    """Seed 002's map, at a 131,072-token prompt of Llama 3.1 8B on an H100: StreamingLLM's window prefills through
    the window (TTFT falls), H2O/SnapKV's budget prefills the whole prompt first (it does not), FP8 weights compute the
    prompt at the FP8 rate (about half the time), more cards split it."""
    rows = {r["name"]: r for r in _levers(run_cli, "llama-3.1-8b", "--gpu", "h100-sxm", "--context", "131072")}
    ratio = {n: r["ttft_after_s"] / r["ttft_before_s"] for n, r in rows.items() if r["ttft_after_s"]}
    assert ratio["KV policy streaming:4092+4"] < 0.5 and ratio["KV policy budget:2048"] == pytest.approx(1, abs=0.02)
    assert 0.4 < ratio["weights in fp8"] < 0.6 and ratio["8 cards (tensor parallel)"] < ratio["2 cards (tensor parallel)"]


def test_llamacpp_plans_offer_its_layer_split(run_cli):
    """Under llama.cpp the more-cards rows are its default -sm layer (--pp N), as the diagnosis's lever is, not a
    tensor-parallel split (a review saw --tp rows beside a diagnosis saying --pp 2)."""
    rows = _levers(run_cli, "llama-3.1-70b", "--gpu", "rtx3090", "--quant", "gguf-q4_k_m")
    cards = [r for r in rows if r["resource"] == "cards"]
    assert cards and all("(layer split)" in r["name"] and " --pp " in r["command"] for r in cards)
    assert not any(" --tp " in r["command"] for r in cards)


def test_a_llamacpp_plans_cache_lever_is_its_own_cache_types(run_cli):
    """A GGUF plan (llama.cpp) is offered llama.cpp's 8-bit cache as llama.cpp names it, -ctk q8_0 -ctv q8_0 at its
    8.5 bits a value (it was an `int8` cache costed at 8 bits, with a --kv-dtype the llama.cpp plan refuses), and
    the row's command, run, gives the row's figure."""
    code, out, err = run_cli("plan", "qwen3-8b", "--gpu", "rtx5060ti", "--quant", "gguf-q4_k_m", "--context",
                             "32768", "--levers", "--json")
    assert code == 0, err
    (row,) = [r for r in json.loads(out)["levers"] if r["name"].startswith("KV cache in")]
    assert row["name"] == "KV cache in q8_0/q8_0"
    argv = shlex.split(row["command"])
    assert argv[argv.index("--cache-type-k") + 1] == argv[argv.index("--cache-type-v") + 1] == "q8_0"
    code, out, err = run_cli(*argv[1:], "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["kv"]["dtype"] == "q8_0/q8_0" and _same(FIGURE_KEYS[row["figure"]](d), row["after"])
    assert _same(EXPECTED_KEYS[row["figure"]](d), row["expected_after"])


def test_fp4_weights_through_marlin_is_a_lever_where_the_card_runs_them_native(run_cli):
    """Gemma 4 12B NVFP4 on the RTX 5060 Ti under vLLM: the FP4 tensor cores' kernels read the weights at the FP4
    class's fitted fraction of the bandwidth, Marlin at the 4-bit weight-only class's; the row is the plan of
    `--fp4-kernel marlin`, whose prompt runs at the 16-bit peak (a longer time to first token). An H100 (no FP4
    tensor cores: Marlin already) and llama.cpp (neither kernel) have no such row."""
    rows = {r["name"]: r for r in _levers(run_cli, "gemma-4-12b", "--gpu", "rtx5060ti")}
    row = rows["FP4 weights through Marlin (weight-only)"]
    assert row["command"].endswith("--fp4-kernel marlin") and row["figure"] == "tok_s"
    assert row["before"] == row["after"]  # the same bytes: the ceiling does not move, the expected speed does
    assert row["expected_after"] > row["expected_before"] and row["ttft_after_s"] > 4 * row["ttft_before_s"]
    code, out, err = run_cli(*shlex.split(row["command"])[1:], "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["expected"]["tok_s"] == pytest.approx(row["expected_after"]) and d["inputs"]["fp4_kernel"] == "marlin"
    assert d["prefill"]["ttft_s"] == pytest.approx(row["ttft_after_s"])
    for args in (("llama-3.1-8b", "--gpu", "h100", "--quant", "nvfp4"),
                 ("gemma-4-12b", "--gpu", "rtx5060ti", "--runtime", "llamacpp"),
                 ("gemma-4-12b", "--gpu", "rtx5060ti", "--fp4-kernel", "marlin")):
        assert not any(r["name"].startswith("FP4 weights through") for r in _levers(run_cli, *args)), args


def test_the_launch_line_of_a_plan_through_marlin_asks_vllm_for_it(run_cli):
    """`--emit vllm` of a `--fp4-kernel marlin` plan carries vLLM's own flag (--linear-backend marlin, the launch
    line Rodder5/sm120-quant-bench ran under vLLM 0.26.0); without the option, none."""
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--fp4-kernel", "marlin", "--emit", "vllm")
    assert code == 0 and out.rstrip().endswith("--linear-backend marlin"), err
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--emit", "vllm")
    assert code == 0 and "--linear-backend" not in out


def test_a_lever_worse_than_now_says_so(run_cli):
    """Gemma 4 12B on an RTX 5060 Ti: the nearest hybrid (qwen3.5-9b) decodes slower here (expected 36.2 -> 23.2
    tok/s) and a disaggregated fleet gives less per card than an aggregated one for this workload; their rows were
    listed beside the gains without a word, one ranked above a batch of 13 that gives 9x."""
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--levers")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "23.2 tok/s; roofline TTFT 247 ms -> 1.22 s; worse than now" in flat
    assert "fleet output per card (tok/s); worse than now" in flat
    assert "batch 13 sequences" in flat and "320.4 tok/s; worse" not in flat
    assert "rows of another figure after" in flat
