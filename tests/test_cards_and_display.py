"""Cards as a process sees them, one memory rule for every card, and reports that print what they mean."""

import json

import pytest
from stfiles import tiny_llama_folder


def test_mi250x_is_the_device_one_process_sees(catalog):
    """A package is two GCDs, each its own device (ROCm docs): 64 GiB and 1,638.4 GB/s each. Sized as the
    package, a single-process plan doubled the decode ceiling that published single-process runs see."""
    g = catalog.gpu("mi250x")
    assert g.bandwidth_gb_s == pytest.approx(3276.8 / 2) and g.memory_size == 64
    assert g.dense_tflops.bf16 == pytest.approx(383.0 / 2)
    assert g.bus_width_bits / 8 * g.data_rate_gbps == pytest.approx(g.bandwidth_gb_s)


@pytest.mark.parametrize("card", ["m2-ultra", "m3-max", "m4-max"])
def test_apple_cards_have_a_time_to_first_token(run_cli, card):
    code, out, _ = run_cli("plan", "llama-3.1-8b", "--gpu", card, "--json")
    d = json.loads(out)
    assert code == 0 and d["prefill"]["ttft_s"] is not None and d["prefill"]["ttft_s"] > 0


def test_compare_sizes_every_card_by_one_memory_rule(run_cli):
    """Cards with a driver-reported total used it while others read the vendor's GB as GiB: two bases in one
    table. Now every card is its vendor capacity read as GiB, and the table says so."""
    code, out, _ = run_cli("compare", "llama-3.1-8b", "--gpus", "rtx5090,rtx5080,h100", "--format", "json")
    rows = {r["gpu"]: r for r in json.loads(out)["rows"]}
    assert rows["rtx5090"]["memory_gib"] == 32.0  # its driver reports 31.84 GiB
    assert rows["h100-sxm"]["memory_gib"] == 80.0 and rows["rtx5080"]["memory_gib"] == 16.0
    code, out, _ = run_cli("compare", "llama-3.1-8b", "--gpus", "rtx5090,rtx5080")
    assert "vendor capacity read the same way" in " ".join(out.split())


def test_the_driver_shortfall_compare_quotes_is_the_catalogs(catalog, run_cli):
    """compare says drivers report up to 6.3% less: the largest gap between a sourced driver total and the
    nominal capacity, on the cards whose ECC takes 1/16 (A10, L4, L40S, T4); the others are within 0.5%."""
    gaps = {g.id: 1 - g.memory_reported_bytes / g.memory_nominal_bytes for g in catalog.hardware.all()
            if g.memory_reported_bytes}
    assert round(100 * max(gaps.values()), 1) == 6.3
    assert {i for i, gap in gaps.items() if gap > 0.01} == {"a10", "l4", "l40s", "t4"}
    code, out, _ = run_cli("compare", "llama-3.1-8b", "--gpus", "t4")
    assert "up to 6.3% less, ECC's share on an A10, L4, L40S or T4" in " ".join(out.split())


def test_kv_table_prints_exact_bytes_per_token_and_one_unit_per_column(run_cli):
    """It printed "0.13 MB" per token (the exact bytes only in JSON), and mixed KB and MB in one column."""
    code, out, _ = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti")
    block = out.split("KV cache (bf16)")[1].split("Memory budget")[0]
    # full layers: 8 x 2 (K, V) x 1 kv head x 512 x 2 B = 16,384 B; sliding: 40 x 2 x 8 x 256 x 2 B = 327,680 B
    assert "16,384 B" in block and "327,680 B (to window)" in block
    per_sequence = [line.split()[-2:] for line in block.splitlines() if line.strip().startswith(("full", "sliding",
                                                                                                 "growing"))]
    assert {unit for _, unit in per_sequence} == {"GB"}
    assert ["0.067", "GB"] in per_sequence  # 16,384 B x 4,096 tokens = 67.1 MB


def test_folder_plan_keeps_the_dtype_line_apart_from_the_kv_heading(run_cli, tmp_path):
    folder = tiny_llama_folder(tmp_path / "m")
    code, out, err = run_cli("plan", str(folder), "--gpu", "h100", "--context", "128")
    assert code == 0, err
    lines = out.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith(" by dtype"))
    assert lines[i + 1] == "" and lines[i + 2].startswith("KV cache")


def test_models_never_folds_a_cell_mid_word(run_cli):
    code, out, _ = run_cli("models")
    rows = [line for line in out.splitlines() if line.startswith(" ") and "B " in line]
    assert all(len(line) <= 100 for line in out.splitlines())
    assert any("full+sliding" in line for line in rows) and not any(line.rstrip().endswith("slidi") for line in rows)
    assert "…" not in out and " layers " in out and any("dense+moe" in line for line in rows)  # 100 columns: no cell
    # or header cut (rich cut "laye…" and "dense+m…" with an ellipsis, 2026-12-05); kimi-k2: 1,026B, 131K tokens
    kimi = next(line.split() for line in rows if line.split()[0] == "kimi-k2")
    assert kimi[1] == "1,026B" and kimi[-1] == "131K"


def test_the_gpus_table_prints_vram_in_the_unit_its_header_names(run_cli):
    """The VRAM column printed the vendor's "192 GB" beside a footnote saying it meant GiB: one figure, two units.
    It prints GiB, as plan and compare size with (a 24 GB RTX 4090 holds 24 GiB; B200 180)."""
    code, out, err = run_cli("gpus", "--vendor", "nvidia")
    assert code == 0, err
    assert "VRAM GiB" in out and "GiB (2^30 B)" in " ".join(out.split())
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(" ") and "NVIDIA" in line}
    assert rows["b200"][2] == "180" and rows["rtx4090"][2] == "24"
    assert not any(cell == "GB" for r in rows.values() for cell in r)
