"""Unified memory: the GPU's share of a Mac's or a Spark's RAM (llmsize/estimate/unified.py)."""

from __future__ import annotations

import json
import math
import re

import pytest

from llmsize.errors import InvalidValueError
from llmsize.estimate.unified import usable_memory
from llmsize.units import GiB


def test_metal_working_set_follows_the_published_logs(catalog):
    """recommendedMaxWorkingSetSize in llama.cpp logs of macOS 13-15 (MiB printed as "MB"): 10922.67 on a 16 GB
    M1 (2/3), 49152.00 on a 64 GB M1 Max (llama.cpp#1870, 3/4), 73728 on a 96 GB M2 Max (llama.cpp#3213, 3/4)."""
    for gpu, mib in (("m1", 10922.67), ("m1-max", 49152.0), ("m2-max", 73728.0)):
        u = usable_memory(catalog.gpu(gpu))
        assert u.unified and u.bytes / 2**20 == pytest.approx(mib, abs=0.01)
    assert usable_memory(catalog.gpu("m1-max"), 56 * GiB).bytes == 56 * GiB  # --wired-limit-gb
    with pytest.raises(InvalidValueError, match="more than"):
        usable_memory(catalog.gpu("m1-max"), 80 * GiB)
    with pytest.raises(InvalidValueError, match="own VRAM"):
        usable_memory(catalog.gpu("rtx4090"), 10 * GiB)
    d = usable_memory(catalog.gpu("rtx4090"))
    assert not d.unified and d.bytes == catalog.gpu("rtx4090").memory_bytes


def test_a_mac_plan_budgets_the_working_set_and_says_how_to_raise_it(run_cli):
    # Qwen3-235B-A22B in Q3_K_M: 112.4 GB of weights, above an M4 Max's 96 GiB working set, within its 128 GiB
    base = ("plan", "qwen3-235b-a22b", "--gpu", "m4-max", "--quant", "gguf-q3_k_m", "--json")
    code, out, err = run_cli(*base)
    assert code == 0, err
    d = json.loads(out)
    assert d["diagnosis"]["saturates"] == "weights"
    lever = next(x for x in d["diagnosis"]["levers"] if "iogpu.wired_limit_mb" in x)
    assert "--wired-limit-gb" in lever
    assert not any(x.startswith("Offload with llama.cpp") for x in d["diagnosis"]["levers"])
    assert any("Metal's working set" in a for a in d["assumptions"])
    # the limit the lever names holds one sequence of --context (it had rounded 118.84 GiB down to 118.8, where
    # 0 sequences of 4,096 tokens fit); --wired-limit-gb is in GB (10^9 B), the sysctl in MiB, at least as much
    gb = re.search(r"--wired-limit-gb (\d+\.\d)", lever).group(1)
    code, out, err = run_cli(*base, "--wired-limit-gb", gb)
    assert code == 0, err
    d = json.loads(out)
    assert d["diagnosis"]["saturates"] != "weights" and d["capacity"]["max_concurrent_sequences"] >= 1
    mib = int(re.search(r"iogpu.wired_limit_mb=(\d+)", lever).group(1))
    assert mib == math.ceil(float(gb) * 1e9 / 2**20) and mib * 2**20 >= float(gb) * 1e9


def test_a_mac_model_that_a_raised_limit_would_starve_macos_is_still_flagged(run_cli):
    """Llama 3.1 70B in Q6_K (57.9 GB) at 16,384 tokens (5.4 GB of cache) on a 64 GiB M4 Pro: above the 48 GiB
    working set, within the RAM, but the limit that would hold it leaves macOS under 8 GiB: no sysctl line, and a
    lever that says it pages every token as is and why the limit is no way out (it said nothing of the working
    set). At 4,096 tokens llama.cpp's own buffers (the token embedding in host memory) need 59.8 GB: a limit that
    leaves macOS 8.3 GiB, which the lever then names."""
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "m4-pro", "--quant", "gguf-q6_k", "--context",
                             "16384", "--json")
    assert code == 0, err
    levers = json.loads(out)["diagnosis"]["levers"]
    lever = next(x for x in levers if "Metal's working set" in x)
    assert "pages every token" in lever and "under 8 GiB of the 64 GiB" in lever
    assert not any("iogpu.wired_limit_mb" in x for x in levers)
    # the bigger card beside the smallest of its kind: a Mac user is told of a Mac too
    bigger = next(x for x in levers if x.startswith("Bigger card"))
    mac = re.search(r"of Apple's machines, (\S+) \((\d+) GB", bigger)
    assert mac and int(mac.group(2)) > 64, bigger


def test_fit_on_a_mac_lists_no_offloaded_placements(run_cli):
    code, out, err = run_cli("fit", "--gpu", "m4-max", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert rows and all(r["placement"] == "full" for r in rows)
    assert all(r["weights_bytes"] < 96 * GiB for r in rows)


def test_strix_halo_starts_from_amdgpus_default_gtt(catalog, run_cli):
    """amdgpu's default GTT is max(3 GiB, half the RAM): 64 GiB of a 128 GiB Strix Halo (a 128 GB machine logs
    "63968M of GTT memory ready", antirez/ds4#475). Qwen3-235B-A22B's Q2_K file (85.7 GB) does not fit it; the
    lever gives the ttm.pages_limit (GiB x 262144 pages) that would, and with that --wired-limit-gb it fits.
    (gpt-oss-120b's ~63 GB of MXFP4 was the case until llama.cpp plans took the whole card rather than vLLM's 0.9:
    it fits the default GTT now.)"""
    u = usable_memory(catalog.gpu("strix-halo"))
    assert u.unified and u.bytes == 64 * GiB and "GTT" in u.basis
    base = ("plan", "qwen3-235b-a22b", "--gpu", "strix-halo", "--quant", "gguf-q2_k", "--json")
    code, out, err = run_cli(*base)
    assert code == 0, err
    d = json.loads(out)
    lever = next(x for x in d["diagnosis"]["levers"] if "ttm.pages_limit" in x)
    gib = int(re.search(r"\((\d+) GiB\)", lever).group(1))
    gb = lever.split("--wired-limit-gb ")[1].split(":")[0]  # GB, at most the GiB the kernel is given
    assert f"ttm.pages_limit={gib * 262144}" in lever and gib * 2**30 - 1e7 < float(gb) * 1e9 <= gib * 2**30
    code, out, err = run_cli(*base, "--wired-limit-gb", gb)
    assert json.loads(out)["diagnosis"]["saturates"] != "weights"


def test_suggestions_stay_on_cards_the_runtime_runs_on(run_cli):
    """A GGUF plan on a Mac that does not fit names a bigger card llama.cpp runs on (a review saw Intel's Gaudi 3,
    which it does not, suggested for a GGUF file), and `fit` refuses a named runtime the card cannot run."""
    code, out, err = run_cli("plan", "qwen3-235b-a22b", "--gpu", "m4-max", "--quant", "gguf-q3_k_m", "--json")
    assert code == 0, err
    bigger = next(x for x in json.loads(out)["diagnosis"]["levers"] if x.startswith("Bigger card"))
    assert "gaudi" not in bigger
    code, out, err = run_cli("fit", "--gpu", "m4-max", "--runtime", "trtllm")
    assert code == 2 and "TensorRT-LLM runs on NVIDIA cards only" in err and out == ""


def test_the_share_of_the_card_follows_the_runtime_and_the_machine(run_cli):
    """Under llama.cpp a discrete card's plan budgets the whole VRAM, but a DGX Spark's budget is its whole RAM, so
    the OS keeps the 20% NVIDIA's Spark playbooks leave it under vLLM (--gpu-memory-utilization 0.8; it was vLLM's
    0.9 default, beside a note that cited 0.8), and its vLLM launch line passes that 0.8; a vLLM launch line from a
    GGUF plan leaves the share to vLLM's own default (a review saw llama.cpp's 1.0 emitted); a Mac
    planned with --wired-limit-gb that does not fit names a bigger card (the search had applied the Mac's limit to
    discrete cards and refused)."""
    code, out, err = run_cli("plan", "qwen3-235b-a22b", "--gpu", "dgx-spark", "--quant", "gguf-q3_k_m", "--json")
    assert code == 0, err
    assert json.loads(out)["inputs"]["gpu_util"] == 0.8
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "dgx-spark", "--runtime", "vllm", "--json")
    assert json.loads(out)["inputs"]["gpu_util"] == 0.8
    # the llama.cpp ledger takes the same share, so it and the plan agree (it said "fits" beside a plan that did not)
    code, out, err = run_cli("plan", "qwen3-235b-a22b", "--gpu", "dgx-spark", "--quant", "gguf-q3_k_m", "--engine",
                             "llamacpp", "--json")
    d = json.loads(out)
    assert d["engine"]["card_bytes"] == int(128 * GiB * 0.8)
    assert d["engine"]["fits"] is False and d["diagnosis"]["saturates"] == "weights"
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--json")
    assert json.loads(out)["inputs"]["gpu_util"] == 1.0
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--emit", "vllm")
    assert code == 0 and "--gpu-memory-utilization" not in out, out
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "dgx-spark", "--emit", "vllm")
    assert code == 0 and "--gpu-memory-utilization 0.8 " in out, out
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "m4-pro", "--wired-limit-gb", "40", "--json")
    assert code == 0, err
    assert any(x.startswith("Bigger card") for x in json.loads(out)["diagnosis"]["levers"])


def test_compare_rows_say_the_share_each_budgets(run_cli):
    """compare's JSON echoes no --gpu-util when none was given; each row says the share its card's runtime budgets
    (vLLM's 0.9 on an RTX 4090 for BF16 weights, the whole working set under llama.cpp on a Mac)."""
    code, out, err = run_cli("compare", "llama-3.1-8b", "--gpus", "rtx4090,m4-max", "--format", "json")
    assert code == 0, err
    util = {r["gpu"]: r["gpu_util"] for r in json.loads(out)["rows"]}
    assert util == {"rtx4090": 0.9, "m4-max": 1.0}


def test_a_unified_placement_that_loads_is_not_said_to_be_as_if(run_cli):
    """Llama 3.1 70B Q8_0 (75 GB) on a 128 GiB Strix Halo with 40 layers on the GPU: the GPU's share (64 GiB of GTT)
    does not hold the weights, llama.cpp's placement does (the rest of the RAM holds the CPU's layers). Its expected
    figure is an upper bound, not "as if the weights fit: they do not"; a --host-memory given is said to be unused
    (it was dropped without a word)."""
    code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "strix-halo", "--quant", "gguf-q8_0", "--engine",
                             "llamacpp", "--gpu-layers", "40", "--host-memory", "LPDDR5X-8000x4", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["engine"]["fits"]
    assert not any("as if the weights fit" in n for n in d["expected"]["notes"])
    assert any("upper bound" in n for n in d["expected"]["notes"])
    assert any("--host-memory LPDDR5X-8000x4 not used" in n for n in d["engine"]["notes"])


def test_the_wired_limit_is_echoed_and_reproduced_in_gb(run_cli):
    """--wired-limit-gb is in GB (10^9 B): the error quotes the value given (it quoted 931.323, the GiB of 1000 GB),
    and a lever's command carries the same GB (it wrote the GiB: 59.8 GB came back as --wired-limit-gb 55.6929)."""
    from llmsize.estimate.levers import plan_args
    from llmsize.estimate.plan import PlanInputs

    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "m4-pro", "--wired-limit-gb", "1000")
    assert code == 2 and "--wired-limit-gb 1000 (931.3 GiB) is more than the 64 GiB" in err
    args = plan_args(["llama-3.1-8b"], "m4-pro", PlanInputs(wired_limit_bytes=59.8e9))
    assert args[args.index("--wired-limit-gb") + 1] == "59.8"


def test_a_context_beyond_the_model_names_the_model_not_the_card(run_cli):
    """Qwen3-30B-A3B (40,960 positions) at 262,144 tokens on a 64 GiB M4 Pro: no sequence of that length fits, and
    the warning says the model's limit binds (it said the card holds 40,960)."""
    code, out, err = run_cli("plan", "qwen3-30b-a3b", "--gpu", "m4-pro", "--quant", "gguf-q8_0", "--context",
                             "262144", "--json")
    assert code == 0, err
    warns = json.loads(out)["warnings"]
    assert any("beyond the model's own limit, 40,960" in w for w in warns)
    assert not any("this card holds is 40,960" in w for w in warns)


def test_a_macs_ram_is_given_with_memory_gb(run_cli):
    """The catalog's Apple entries are each chip's largest configuration (an M4 Max of 128 GB); a new-user pass
    (2026-12-06) found no way to plan a 48 GB one but --gpu local on that Mac. --memory-gb sets it (GB, as Apple
    sells it, read as GiB as every size is): Metal's working set is 0.75 of 48 GiB, a lever's command reproduces
    it, bandwidth stays the chip's, fit ranks for it; a name that states a size no entry has points at it."""
    def plan(*more):
        code, out, err = run_cli("plan", "llama-3.1-70b", "--gpu", "m4-max", "--quant", "gguf-q4_k_m", *more,
                                 "--json")
        assert code == 0, err
        return json.loads(out)

    full, small = plan(), plan("--memory-gb", "48", "--levers")
    assert small["gpu"]["bandwidth_gb_s"] == full["gpu"]["bandwidth_gb_s"] == 546
    assert (small["gpu"]["memory_bytes"], full["gpu"]["memory_bytes"]) == (48 * 2**30, 128 * 2**30)
    assert small["inputs"]["memory_gb"] == 48 and full["inputs"]["memory_gb"] is None
    # llama.cpp's ledger: Metal's working set, 0.75 of the RAM above 32 GB, where the 70B's 41.9 GB do not fit
    assert small["capacity"]["budget_bytes"] == 0.75 * 48 * 2**30 < full["capacity"]["budget_bytes"]
    assert not small["capacity"]["weights_fit"] and full["capacity"]["weights_fit"]
    commands = [lever["command"] for lever in small["levers"] if lever["command"]]
    assert commands and all("--memory-gb 48" in c for c in commands)
    code, out, err = run_cli("fit", "--gpu", "m4-max", "--memory-gb", "36", "--json")
    code_full, out_full, _ = run_cli("fit", "--gpu", "m4-max", "--json")
    assert code == code_full == 0, err
    assert len(json.loads(out)["rows"]) < len(json.loads(out_full)["rows"])
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "m4 max 48gb")
    assert code == 2 and "For a Mac of that RAM: --gpu m4-max --memory-gb 48" in err
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "m4-max", "--memory-gb", "0")
    assert code == 2 and "--memory-gb" in err and out == ""
