"""Charts: the data (roofline points, KV curves, crossover) and what is drawn (terminal, PNG, SVG)."""

import json

import pytest

from llmsize.estimate.charts import contexts_up_to, crossover_tokens, kv_curves, roofline
from llmsize.estimate.plan import PlanInputs


def test_roofline_points_are_the_plan_steps(catalog):
    m, g = catalog.model("gemma-4-12b"), catalog.gpu("rtx5060ti")
    r = roofline(m, g, PlanInputs(), max_batch=64)
    labels = [p.label for p in r.points]
    assert labels[:7] == [f"decode b={b}" for b in (1, 2, 4, 8, 16, 32, 64)] and labels[-1] == "prefill of 4,096 tokens"
    b1 = r.points[0]
    # batch-1 decode: attainable FLOP/s = FLOPs / (bytes / bandwidth) = intensity x bandwidth (memory-bound)
    assert b1.bound == "memory"
    assert b1.flop_per_s == pytest.approx(b1.intensity_flop_per_byte * 448e9)
    assert r.ridge_flop_per_byte == pytest.approx(379.7e12 / 448e9)
    # never above the roof
    for p in r.points:
        assert p.flop_per_s <= min(r.peak_flop_per_s, r.bandwidth_bytes_per_s * p.intensity_flop_per_byte) * 1.0001


def test_roofline_marks_the_batches_whose_cache_the_card_does_not_hold(catalog):
    """A numbers pass (2026-12-06): the roofline of Llama 3.1 8B on an H100 plotted decode at batch 1,024, whose
    cache at 4,096 tokens (1,024 x 0.537 GB) is seven times the card, unmarked. Each point says whether the card
    holds its batch (the plan's max_sequences: 111 here); the summary and the image say which do not."""
    from llmsize.render.charts import roofline_text

    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("h100")
    r = roofline(m, g, PlanInputs(), max_batch=1024)
    assert r.max_sequences == 111
    dec = {p.label: p.fits for p in r.points if p.label.startswith("decode")}
    assert dec["decode b=64"] and not dec["decode b=128"] and not dec["decode b=1024"]
    text = " ".join(roofline_text("Llama 3.1 8B", [r]).split())
    assert "decode b=1024 at 31.1 FLOP/byte (memory; beyond the 111 sequences whose cache fits)" in text
    assert "decode b=64 at 22.2 FLOP/byte (memory)," in text


def test_kv_crossover_matches_seed_002(catalog):
    """Seed 002: Llama-3-8B fp16, 0.13 MB of KV per token and ~16 GB of weights: one sequence's cache
    reaches the weights near 16 GB / 131,072 B = ~122K tokens (Llama 3.1's 128K window)."""
    m = catalog.model("llama-3.1-8b")
    from llmsize.estimate.quant import quant_format
    from llmsize.estimate.weights import weight_bytes
    w = weight_bytes(m, quant_format("bf16"), "all").bytes_total
    t = crossover_tokens(m, "fp16", w)
    assert t == pytest.approx(w / 131072, abs=1)
    assert crossover_tokens(m, "fp16", w, users=32) == pytest.approx(w / 131072 / 32, abs=1)
    assert crossover_tokens(m, "nvfp4", w) is None  # 9/32 of the bytes: past 128K


def test_kv_curves_scale_with_users_and_dtype(catalog):
    m = catalog.model("llama-3-8b")
    ctx = contexts_up_to(8192)
    assert ctx == [256, 512, 1024, 2048, 4096, 8192]
    one, many = kv_curves(m, ctx), kv_curves(m, ctx, users=4)
    bf = next(c for c in one if c.dtype == "bf16")
    assert bf.bytes_per_sequence[-1] == 8192 * 131072  # 32 layers x 2 x 8 x 128 x 2 B per token
    assert next(c for c in many if c.dtype == "bf16").bytes_per_sequence[-1] == 4 * 8192 * 131072


def test_terminal_charts_fit_and_label(run_cli):
    code, out, err = run_cli("roofline", "gemma-4-12b", "--gpu", "rtx5060ti", "--gpu", "h200")
    assert code == 0, err
    assert "arithmetic intensity (FLOP/byte)" in out and "attainable performance (TFLOP/s)" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    # a card named twice, once by an alias, is drawn once
    code, twice, err = run_cli("roofline", "gemma-4-12b", "--gpu", "rtx5060ti", "--gpu", "h200", "--gpu", "h200-sxm")
    assert code == 0 and twice == out
    code, out, err = run_cli("kv", "llama-3-8b", "--users", "32")
    assert code == 0 and "KV cache of 32 sequences (GB = 10^9 B)" in out
    assert "outweighs the weights from: fp32: 1,915 tokens; bf16: 3,830 tokens" in out
    assert "runs past" not in out
    # beyond the model's positions, said in the text and the JSON
    code, out, err = run_cli("kv", "llama-3-8b", "--users", "32", "--max-context", "32768")
    assert code == 0 and "runs past Llama 3 8B's 8,192 positions" in " ".join(out.split())
    code, out, err = run_cli("kv", "llama-3-8b", "--max-context", "32768", "--json")
    assert code == 0 and json.loads(out)["max_position_embeddings"] == 8192 and json.loads(out)["beyond_positions"]


@pytest.mark.parametrize("cmd, name", [(["roofline", "llama-3.1-8b", "--gpu", "h100"], "r"),
                                       (["kv", "gemma-4-12b"], "k")])
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_images_are_written_with_their_labels(run_cli, tmp_path, cmd, name, suffix):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"{name}{suffix}"
    code, _, err = run_cli(*cmd, "-o", str(out))
    assert code == 0, err
    assert out.stat().st_size > 5000
    assert not list(tmp_path.glob("*.partial*"))
    if suffix == ".svg":
        text = out.read_text()
        labels = ("arithmetic intensity (FLOP/byte)", "attainable performance (TFLOP/s)") if name == "r" else \
            ("context (tokens)", "KV cache per sequence (GB = 10^9 B)")
        for label in labels:
            assert label in text
    else:
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, needle", [
    (["roofline", "gemma-4-12b"], "Missing option --gpu"),
    (["roofline", "gemma-4-12b", "--gpu", "h100", "-o", "x.pdf"], "must end in .png or .svg"),
    # `-o ''` (read as the current folder: "-o `.` must end in .png or .svg" before)
    (["kv", "gemma-4-12b", "-o", ""], "-o names no file"),
    # an extension alone (pathlib's dot file, suffix ''): "-o `.svg` must end in .png or .svg" before
    (["kv", "llama-3.1-8b", "-o", ".svg"], "-o `.svg` names no file before .svg"),
    (["roofline", "gemma-4-12b", "--gpu", "h100", "-o", "sub/.PNG"], "-o `sub/.PNG` names no file before .PNG"),
    (["kv", "gemma-4-12b", "--users", "0"], "'--users': `0` is not an integer from 1"),
])
def test_chart_errors(run_cli, args, needle):
    code, out, err = run_cli(*args)
    assert code == 2 and needle in err


def test_image_without_matplotlib_is_one_line_with_the_hint(tmp_path):
    from conftest import cli_without
    out = tmp_path / "r.png"
    p = cli_without(["matplotlib"], ["kv", "gemma-4-12b", "-o", str(out)])
    assert p.returncode == 2 and not out.exists()
    assert "Image output needs matplotlib" in p.stderr and "pip install '.[charts]' in the llmsize checkout" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_roofline_takes_cards_as_compare_does(run_cli):
    """`roofline --gpus h100,h200` (compare's spelling) was refused as no such option; --gpu repeated stands, and a
    comma list may be given to either; an empty name in the list is one line."""
    code, comma, err = run_cli("roofline", "llama-3.1-8b", "--gpus", "h100,h200")
    assert code == 0, err
    code, repeated, err = run_cli("roofline", "llama-3.1-8b", "--gpu", "h100", "--gpu", "h200")
    assert code == 0 and comma == repeated and "h200-sxm:" in comma
    code, out, err = run_cli("roofline", "llama-3.1-8b", "--gpus", "h100,,h200")
    assert code == 2 and "names an empty card" in err and out == ""


def test_roofline_and_kv_print_their_data_as_json(run_cli):
    """`kv` and `roofline` had no --json where every other command has one: the points (with whether the card
    holds the batch), the curves and the crossovers a script would read; one output a command (--json or -o)."""
    import json

    code, out, err = run_cli("roofline", "llama-3.1-8b", "--gpus", "h100", "--json")
    assert code == 0, err
    card = json.loads(out)["cards"][0]
    assert card["id"] == "h100-sxm" and card["max_sequences"] == 111
    points = {p["label"]: p for p in card["points"]}
    assert points["decode b=64"]["fits"] and not points["decode b=1024"]["fits"]
    assert points["decode b=1"]["tflop_per_s"] == pytest.approx(points["decode b=1"]["intensity_flop_per_byte"] * 3.35)
    code, out, err = run_cli("kv", "llama-3.1-8b", "--json")
    assert code == 0, err
    d = json.loads(out)
    # bf16: 131,072 B a token against 16.06 GB of weights: the crossover near 122.5K tokens (seed 002)
    assert d["crossover_tokens"]["bf16"] == pytest.approx(d["weights"]["bytes"] / 131072, abs=1)
    bf16 = next(c for c in d["curves"] if c["kv_dtype"] == "bf16")
    assert bf16["kv_bytes"][0] == bf16["context_tokens"][0] * 131072
    for cmd in (("kv", "llama-3.1-8b"), ("roofline", "llama-3.1-8b", "--gpu", "h100")):
        code, out, err = run_cli(*cmd, "--json", "-o", "x.png")
        assert code == 2 and "--json and -o ask for two outputs" in err and out == ""


def test_roofline_takes_a_short_models_own_context_as_plan_does(run_cli):
    """Falcon 7B takes 2,048 tokens: roofline's default context is the model's, as plan's and compare's are (its
    sequences at 2,048, not 4,096), and a longer --context is said to be beyond its positions."""
    code, out, err = run_cli("roofline", "falcon-7b", "--gpu", "h100-sxm", "--json")
    assert code == 0, err
    roof = json.loads(out)
    code, out, err = run_cli("plan", "falcon-7b", "--gpu", "h100-sxm", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert roof["context_tokens"] == plan["inputs"]["context_tokens"] == 2048
    assert roof["cards"][0]["max_sequences"] == plan["capacity"]["max_concurrent_sequences"] == 3686
    assert "defaults to the model's 2,048 tokens" in roof["notes"][0]
    code, out, err = run_cli("roofline", "falcon-7b", "--gpu", "h100-sxm", "--context", "8192")
    assert code == 0 and "beyond the model's max_position_embeddings 2,048" in out
