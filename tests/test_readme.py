"""The README shows `llmsize plan gemma-4-12b --gpu rtx5060ti` and its lever table as they print (100 columns)."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).parent.parent / "README.md").read_text()


def _block_after(marker: str) -> str:
    start = README.index("```text\n", README.index(marker)) + len("```text\n")
    return README[start:README.index("```\n", start)]


def test_the_seed_plan_as_it_prints(run_cli):
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti")
    assert code == 0, err
    block = _block_after("`llmsize plan gemma-4-12b --gpu rtx5060ti` (the seed article's card")
    assert block == out.rstrip("\n") + "\n", "README.md's plan block is stale: paste this output (COLUMNS=100)"


def test_the_lever_table_as_it_prints(run_cli):
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--levers")
    assert code == 0, err
    table = out[out.index("Levers (what"):]
    start = README.index("```text\nLevers (what") + len("```text\n")
    assert README[start:README.index("```\n", start)] == table.rstrip("\n") + "\n"
    # the prose's ratios are the 8-card row's
    m = re.search(r"8 cards \(tensor parallel\)\s+([\d.]+) tok/s -> ([\d.]+) tok/s; expected ([\d.]+) -> "
                  r"([\d.]+)", table)
    ceil, exp = float(m[2]) / float(m[1]), float(m[4]) / float(m[3])
    assert f"ceiling by {ceil:.1f}, the expected speed by {exp:.1f})" in README.replace("\n", " ")


def test_the_llama_cpp_ledger_as_it_prints(run_cli):
    code, out, err = run_cli("plan", "qwen3-30b-a3b", "--gpu", "rtx4080", "--quant", "gguf-q4_k_m", "--engine",
                             "llamacpp", "--gpu-layers", "30")
    assert code == 0, err
    section = out[out.index("llama.cpp start-up ledger"):]
    title, body = section.split("\n\n", 2)[:2]  # the title, a blank line, the ledger up to the next blank line
    assert _block_after("llmsize plan ./model.gguf --gpu rtx4080 --gpu-layers 30 --emit ollama") == \
        f"{title}\n\n{body}\n", "README.md's llama.cpp ledger block is stale: paste the command's ledger (COLUMNS=100)"


def test_the_compare_table_as_it_prints(run_cli):
    """The compare example's expected column moves with every refit: it had gone stale in all 18 rows."""
    code, out, err = run_cli("compare", "gemma-4-12b", "--vendor", "nvidia", "--segment", "consumer", "--users", "8")
    assert code == 0, err
    start = README.index("```text\nllmsize compare: Gemma 4 12B, nvfp4") + len("```text\n")
    assert README[start:README.index("```\n", start)] == out.rstrip("\n") + "\n", \
        "README.md's compare block is stale: paste `llmsize compare gemma-4-12b --vendor nvidia --segment consumer " \
        "--users 8` (COLUMNS=100)"


def test_the_fitted_figures_the_readme_quotes_are_the_fits():
    """The README's prose quotes fitted constants (SGLang's cost a step beyond vLLM's, the routed experts' read cost
    in vLLM and SGLang, the kernel floors): a refit that moves them must move the README too."""
    import yaml

    def group(rt, be="cuda"):
        return yaml.safe_load((Path(__file__).parent.parent / "runtimes" / f"{rt}.yaml").read_text())["backends"][be]

    step_ms = [(group("sglang", be)["t_step_s"] - group("vllm", be)["t_step_s"]) * 1000 for be in ("cuda", "rocm")]
    assert "SGLang pays {:.2f} ms more a step on CUDA, {:.2f} on ROCm".format(*step_ms) in README
    assert f"in a grouped kernel: {group('vllm')['expert_read_cost']:.2f}\nof their time" in README
    floors = {rt: group(rt, be)["t_layer_floor_s"] * 1e6 for rt, be in
              (("mlx", "metal"), ("llamacpp", "rocm"), ("trtllm", "cuda"))}
    # a hybrid's recurrent layer (speed.StepInputs.recurrent_layers), fitted where hybrids' rows pin it
    assert (f"state's bytes: {group('llamacpp', 'rocm')['t_recurrent_layer_s'] * 1e6:.0f} us in llama.cpp on ROCm"
            in README.replace("\n", " "))
    assert f"{group('mlx', 'metal')['t_recurrent_layer_s'] * 1e6:.0f} us in MLX" in README.replace("\n", " ")
    assert f"{group('llamacpp', 'metal')['t_recurrent_layer_s'] * 1e6:.0f} us in llama.cpp on Metal" in README.replace(
        "\n", " ")
    assert group("llamacpp")["t_recurrent_layer_s"] == 0.0 and group("llamacpp")["hybrid_rows_decode"] == 56
    # a MoE layer's shared expert in llama.cpp (speed.StepInputs.shared_expert_layers), by backend
    backends = ("cuda", "metal", "rocm", "vulkan")
    shexp = [group("llamacpp", be)["t_shared_expert_layer_s"] * 1e6 for be in backends]
    rows = [group("llamacpp", be)["shared_expert_rows_decode"] for be in backends]
    assert ("{:.0f} us on CUDA, {:.0f} us on Metal, {:.0f} us on ROCm, {:.0f} us on Vulkan, ".format(*shexp)
            + "fitted on {}, {}, {} and {} rows".format(*rows)) in README.replace("\n", " ")
    assert group("vllm")["t_recurrent_layer_s"] == group("sglang")["t_recurrent_layer_s"] == 0.0
    assert (f"{floors['mlx']:.0f} us in MLX, {floors['llamacpp']:.0f} us for llama.cpp on ROCm, "
            f"{floors['trtllm']:.0f} us for TensorRT-LLM") in README.replace("\n", " ")
    # a runtime with constants of its own enough that borrows its kin's pool, which holds its rows out better
    gf = group("gpt-fast")["borrowed"].replace("\n", " ")
    said = re.search(r"\(([\d.]+%) / ([\d.]+%) median / p90, the pool's ([\d.]+%) / ([\d.]+%)\)", gf).groups()
    assert (f"gpt-fast on NVIDIA cards: {said[0]} / {said[1]} on its own, {said[2]} / {said[3]} in the pool" in
            README.replace("\n", " "))
    # vLLM and SGLang on AMD cards: the pool's further streaming cost there, CDNA's and RDNA's
    amd, nv = group("vllm", "rocm")["eta_weights_default"], group("vllm")["eta_weights_default"]
    rdna = group("vllm", "rocm")["rdna"]["eta_weights_default"]
    assert (f"reach {amd:.2f} of an AMD Instinct (CDNA) card's bandwidth and {rdna:.2f} of an RDNA card's, fitted on "
            f"a Strix Halo's rows, where they reach {nv:.2f} of an NVIDIA card's") in README.replace("\n", " ")
    # SGLang's further cost a routed-expert layer on AMD cards (fit_speed.moe_backend_holds), beside vLLM's none
    moe_ms = (group("sglang", "rocm")["t_moe_layer_s"] - group("vllm", "rocm")["t_moe_layer_s"]) * 1000
    assert f"pays {moe_ms:.3f} ms more a routed-expert layer on AMD cards" in README.replace("\n", " ")
    # SGLang 0.5.7-0.5.13 without its overlap scheduler (expected.without_overlap) pays the fitted wait a step
    assert (f"pays vLLM and SGLang's fitted {group('sglang')['t_step_v0_s'] * 1000:.1f} ms; plans are for current"
            in README.replace("\n", " "))
    # llama.cpp's older builds' cost a step (the engine_v0 covariate), on CUDA and Metal
    old = (group("llamacpp")["t_step_v0_s"] * 1000, group("llamacpp", "metal")["t_step_v0_s"] * 1000)
    assert f"{old[0]:.1f} ms on CUDA, {old[1]:.1f} ms on Metal" in README.replace("\n", " ")
    # an older engine's per-expert kernels, a launch each
    assert f"{group('vllm')['t_expert_launch_s'] * 1e6:.1f} us a launch in vLLM and SGLang on CUDA" in \
        README.replace("\n", " ")
    # vLLM and SGLang's cost per sequence on AMD cards
    assert f"vLLM and SGLang on AMD cards, {group('vllm', 'rocm')['t_seq_s'] * 1e6:.0f} us" in README.replace("\n", " ")
    assert f"and on NVIDIA cards {group('vllm')['t_seq_s'] * 1e6:.0f} us)" in README.replace("\n", " ")
    # a routed expert's FLOP in a prompt, and llama.cpp's read of the experts per ubatch
    moe = {k: f"{group(*k)['moe_matmul_cost']:g}" for k in (("vllm",), ("sglang",), ("trtllm",), ("llamacpp",),
                                                             ("llamacpp", "rocm"), ("llamacpp", "metal"),
                                                             ("mlx", "metal"))}
    assert moe[("vllm",)] == moe[("sglang",)] == moe[("trtllm",)] and moe[("llamacpp", "metal")] == moe[("mlx", "metal")]
    assert (f"{moe[('vllm',)]} in vLLM, SGLang and TensorRT-LLM, {moe[('llamacpp',)]} in llama.cpp on CUDA, "
            f"{moe[('llamacpp', 'rocm')]} on ROCm, {moe[('llamacpp', 'metal')]} on Metal and in MLX") in \
        README.replace("\n", " ")
    assert (f"streams the routed experts again, at {group('llamacpp')['prefill_expert_read_cost']:.1f} times their "
            "full-bandwidth time on CUDA") in README.replace("\n", " ")
    # a consumer card's prompt fraction in the serving engines
    assert group("vllm")["prefill_consumer_factor"] == group("sglang")["prefill_consumer_factor"]
    assert (f"at {group('vllm')['prefill_consumer_factor']:g} times that fraction in vLLM and SGLang"
            in README.replace("\n", " "))


def test_the_hybrid_prompt_ranges_the_readme_quotes_are_the_plans():
    """The README says how wide a hybrid's time-to-first-token band is: expected.RECURRENT_PREFILL_RANGE, which the
    speed tests hold to the published rows."""
    from llmsize.estimate.expected import RECURRENT_PREFILL_RANGE as r

    text = README.replace("\n", " ")
    assert (f"{r['serving'][0]:.1f}-{r['serving'][1]:.1f}x the figure in vLLM and SGLang, "
            f"{r['llamacpp'][0]:.1f}-{r['llamacpp'][1]:.1f}x in llama.cpp "
            f"({r['llamacpp-vulkan'][0]:.1f}-{r['llamacpp-vulkan'][1]:.1f}x on Vulkan)") in text


def test_the_offload_figure_the_readme_quotes_is_the_plans(run_cli):
    """The README quotes gpt-oss-20b with --cpu-moe on an RX 7900 XT over DDR4-3200 beside a published ~20 tok/s:
    a refit that moves the plan's figure must move the README's."""
    import json

    code, out, err = run_cli("plan", "gpt-oss-20b", "--gpu", "rx7900xt", "--quant", "gguf-mxfp4_moe", "--engine",
                             "llamacpp", "--cpu-moe", "--host-memory", "DDR4-3200x2", "--json")
    assert code == 0, err
    tok_s = json.loads(out)["expected"]["tok_s"]
    assert f"is expected at {tok_s:.1f} tok/s" in README.replace("\n", " ")


def test_the_expected_block_as_it_prints(run_cli):
    """The README's "Expected in llama.cpp" block is the one its command prints (100 columns)."""
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--batch", "8")
    assert code == 0, err
    start = out.index("Expected in llama.cpp")
    end = out.find("\n\n", start)
    block = out[start:end if end >= 0 else len(out.rstrip("\n"))] + "\n"
    assert _block_after("`llmsize plan llama-3.1-8b --gpu rtx4090 --quant gguf-q4_k_m --batch 8`") == block
