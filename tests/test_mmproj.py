"""--mmproj: a model's vision tower as the mmproj file llama.cpp loads beside the GGUF, its weights and its encoder's
compute buffer in the ledger on the first GPU (estimate/mmproj.py). Published figures are llama.cpp's log lines as
printed, with their source."""

from __future__ import annotations

import json

import pytest

from llmsize.catalog.schema import VisionEncoder
from llmsize.estimate.mmproj import encoder_compute_bytes, projector, warmup_patches

MiB = 2**20


def _enc(catalog, model_id):
    return next(x.encoder for x in catalog.model(model_id).extra if x.encoder is not None)


def test_warm_up_images_as_clip_cpp_picks_them(catalog):
    """SigLIP at its native 896 px in patches of 14: 64^2 = 4,096; Qwen at 46 x 46 tokens of 2 x 2 patches: 8,464
    (its log: "warmup with image size = 1472 x 1472" = 92 patches of 16 a side); Gemma 4 at 256 tokens of 3 x 3
    patches: 2,304; Llama 4 at 336 px in patches of 14 with its class token: 24^2 + 1 = 577 (llama.cpp#19308's
    flash-attention warning prints ne = [88 16 577 1])."""
    assert warmup_patches(_enc(catalog, "gemma-3-4b")) == 4096
    assert warmup_patches(_enc(catalog, "qwen3.6-27b")) == 8464 == (1472 // 16) ** 2
    assert warmup_patches(_enc(catalog, "gemma-4-26b-a4b")) == 2304
    assert warmup_patches(_enc(catalog, "llama-4-scout")) == 577


def test_the_encoder_buffer_against_llama_cpps_logs(catalog):
    """n x 4 B x (I + 3h), + n^2 x heads x 4 B without flash attention. Gemma 3 (h 1152, I 4304), 4,096 patches:
    4,096 x 4 x 7,760 = 127,139,840 B = 121.25 MiB, as llama.cpp PR #22790's log prints ("CUDA0 compute buffer size =
    121.25 MiB", flash attention enabled), the figure the 3 was read from; without flash attention + 4,096^2 x 16 x 4
    = 1,024 MiB: 1,145.25 MiB where PR #16837 (Gemma 3 12B on Metal, before flash attention in clip) printed
    1,132.00. Checks the rule was not fitted on: Qwen3.5-4B (h 1024, I 4096), 8,464 x 4 x 7,168 = 231.44 MiB where
    PR #22673's thread prints 223.30; a 27B Qwen3.5/3.6 tower (h 1152, I 4304; "projection_dim 5120") 250.55 where
    ollama#17482 prints 248.10 with flash attention."""
    gemma = _enc(catalog, "gemma-3-4b")
    assert encoder_compute_bytes(gemma, True) == 127_139_840 == 121.25 * MiB
    no_fa = encoder_compute_bytes(gemma, False)
    assert no_fa == 127_139_840 + 4096**2 * 16 * 4
    assert no_fa / MiB == pytest.approx(1132.00, rel=0.015)
    assert encoder_compute_bytes(_enc(catalog, "qwen3.5-4b"), True) / MiB == pytest.approx(223.30, rel=0.04)
    assert encoder_compute_bytes(_enc(catalog, "qwen3.6-27b"), True) / MiB == pytest.approx(248.10, rel=0.015)


def test_mmproj_weights_against_the_sizes_llama_cpp_prints(catalog):
    """The tower's parameters x 2 B in F16: Gemma 3 4B's 419,816,304 -> 800.74 MiB where llama.cpp prints "model
    size: 811.79 MiB" (PR #22790); Qwen3.5-4B's 333,514,240 -> 636.13 where it prints 644.26 (PR #22673's thread):
    1-1.5% low, the F32 vectors and position table the converter keeps; Q8_0 at 8.5 bits, F32 at 32."""
    g = projector(catalog.model("gemma-3-4b"), "f16", True)
    assert g.weight_bytes == 419_816_304 * 2
    assert g.weight_bytes / MiB == pytest.approx(811.79, rel=0.015) and g.weight_bytes / MiB < 811.79
    q = projector(catalog.model("qwen3.5-4b"), "bf16", True)
    assert q.weight_bytes / MiB == pytest.approx(644.26, rel=0.015) and q.weight_bytes / MiB < 644.26
    assert projector(catalog.model("gemma-3-4b"), "q8_0", True).weight_bytes == int(419_816_304 * 8.5 / 8)
    assert projector(catalog.model("gemma-3-4b"), "F32", True).weight_bytes == 419_816_304 * 4
    # the MTP layer is no part of the mmproj: Qwen3.5-4B's tower alone
    assert q.params == 333_514_240


def test_a_tower_without_a_catalogued_shape_leaves_the_buffer_unknown(catalog):
    """Gemma 3n's MobileNet and audio towers have no encoder shape here: their compute buffer is None (said so),
    never a guess; the weights are still counted."""
    p = projector(catalog.model("gemma-3n-e4b"), "f16", True)
    assert p.compute_bytes is None and p.total_bytes == p.weight_bytes > 0


def test_the_rows_of_a_tower_without_its_encoder_say_its_weights_alone(run_cli):
    """Gemma 4 12B's embedders have no encoder shape here: the budget's and the ledger's mmproj rows hold its F16
    weights alone (0.05 B parameters x 2 B, 99.91 MiB), and say so where they said "its encoder's buffer" too."""
    code, out, err = run_cli("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--quant", "gguf-q4_k_m", "--mmproj", "f16")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "CUDA0 mmproj 99.91 MiB (F16: its weights alone: its encoder's buffer is not counted" in flat
    assert "- mmproj (--mmproj) 0.10 GB (its weights alone: its encoder's buffer is not counted" in flat
    assert "its weights and its encoder's buffer" not in flat


def test_an_encoder_of_native_size_needs_its_image_size():
    with pytest.raises(ValueError, match="siglip encoder needs image_size"):
        VisionEncoder(kind="siglip", hidden_size=1152, intermediate_size=4304, num_heads=16, patch_size=14)


def _plan(run_cli, *args):
    code, out, err = run_cli("plan", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_the_ledger_holds_the_mmproj_on_the_first_gpu(run_cli, catalog):
    """Qwen3.6-27B Q4_K_M on an RTX 4090 with a BF16 mmproj: CUDA0 holds 460,730,096 x 2 B of tower and the
    encoder's 262,722,560 B buffer beside the model; the cache's budget is less by exactly that (llama-server's --fit
    adds it to its margin on that device, PR #21489), and the longest context shrinks."""
    base = ("qwen3.6-27b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m")
    plain, with_mm = _plan(run_cli, *base, "--engine", "llamacpp"), _plan(run_cli, *base, "--mmproj", "bf16")
    total = 460_730_096 * 2 + 262_722_560
    assert with_mm["engine"]["mmproj_bytes"] == {"CUDA0": total, "CPU": 0}
    assert with_mm["engine"]["mmproj"] == "BF16"
    assert with_mm["capacity"]["engine_mmproj_bytes"] == total
    assert plain["capacity"]["kv_budget_bytes"] - with_mm["capacity"]["kv_budget_bytes"] == pytest.approx(total, abs=2)
    assert with_mm["capacity"]["max_context_tokens"] < plain["capacity"]["max_context_tokens"]
    assert with_mm["engine"]["gpu_total_bytes"] - plain["engine"]["gpu_total_bytes"] == total
    notes = " ".join(with_mm["notes"])
    assert "the mmproj file in BF16, 0.92 GB" in notes and "8,464 patches, with flash attention" in notes
    code, out, err = run_cli("plan", *base, "--mmproj", "bf16")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "CUDA0 mmproj" in out and "(BF16: its weights and its encoder's buffer" in flat
    assert "- mmproj (--mmproj)" in out


def test_ollama_keeps_the_projector_on_the_host_under_an_explicit_partial_offload(run_cli):
    """Ollama passes --no-mmproj-offload where num_gpu is set below the model's layers (shouldDisableMMProjOffload,
    llm/llama_server.go, ollama @fb307609): the projector's bytes move to the host's side of the ledger and the
    card's budget keeps them; its own placement (num_gpu unset) keeps the projector on the GPU, even where it leaves
    layers off the card, and --emit ollama then leaves num_gpu to it (a num_gpu below the layers would move it)."""
    base = ("gemma-4-26b-a4b", "--gpu", "rtx5060ti", "--quant", "gguf-q4_k_m", "--engine", "ollama")
    given = _plan(run_cli, *base, "--gpu-layers", "10", "--mmproj", "f16")
    plain = _plan(run_cli, *base, "--gpu-layers", "10")
    assert given["engine"]["mmproj_bytes"]["CUDA0"] == 0 and given["engine"]["mmproj_bytes"]["CPU"] > 0
    assert given["capacity"]["engine_mmproj_bytes"] == 0
    assert given["capacity"]["kv_budget_bytes"] == plain["capacity"]["kv_budget_bytes"]
    assert "in the ledger on the CPU" in " ".join(given["notes"])
    auto = _plan(run_cli, *base, "--mmproj", "f16")
    assert auto["engine"]["settings"]["gpu_layers"] < 31  # Ollama's own split leaves layers off the card
    assert auto["engine"]["mmproj_bytes"]["CUDA0"] > 0 and auto["engine"]["mmproj_bytes"]["CPU"] == 0
    code, out, err = run_cli("plan", "gemma-4-26b-a4b", "--gpu", "rtx5060ti", "--quant", "gguf-q4_k_m", "--mmproj",
                             "f16", "--emit", "ollama")
    assert code == 0, err
    assert not any(line.startswith("PARAMETER num_gpu") for line in out.splitlines())
    assert "# num_gpu left to Ollama" in out


def test_ollamas_fit_target_holds_the_projectors_weights(run_cli):
    """Ollama sets llama-server's --fit-target to the projector's weights and 1 GiB, in MiB rounded up
    (LLAMA_ARG_FIT_TARGET, llm/llama_server.go mmprojFitTargetMiB), beside the room llama-server keeps for the
    projector itself: Gemma 4 26B-A4B's F16 tower, 572,792,112 x 2 B, makes a margin of ceil((1,145,584,224 +
    1,073,741,824) / 2^20) = 2,117 MiB, and Ollama's own placement puts fewer layers on a 16 GB card than without
    it; llama-server's margin stays 1,024 MiB."""
    base = ("gemma-4-26b-a4b", "--gpu", "rtx5060ti", "--quant", "gguf-q4_k_m")
    ollama = _plan(run_cli, *base, "--engine", "ollama", "--mmproj", "f16")
    assert ollama["capacity"]["engine_margin_bytes"] == 2117 * MiB == -(-(572_792_112 * 2 + 1024 * MiB) // MiB) * MiB
    plain = _plan(run_cli, *base, "--engine", "ollama")
    assert ollama["engine"]["settings"]["gpu_layers"] < plain["engine"]["settings"]["gpu_layers"]
    assert _plan(run_cli, *base, "--mmproj", "f16")["capacity"]["engine_margin_bytes"] == 1024 * MiB


def test_runtime_ollama_with_llama_options_plans_ollamas_ledger(run_cli):
    """--runtime ollama beside a llama.cpp option (--mmproj) plans Ollama's ledger, so the budget, the ledger and
    the expected speed take one engine's defaults (a new user's pass found llama.cpp's ledger beside Ollama's
    budget, the projector's buffer sized two ways)."""
    out = _plan(run_cli, "gemma-3-4b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--mmproj", "f16", "--runtime",
                "ollama")
    assert out["engine"]["name"] == "ollama"
    assert out["capacity"]["engine_mmproj_bytes"] == out["engine"]["mmproj_bytes"]["CUDA0"]


def test_llama_options_beside_a_split_are_refused_in_their_own_terms(run_cli):
    code, out, err = run_cli("plan", "qwen3.6-27b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--mmproj", "f16",
                             "--tp", "2")
    assert code == 2 and out == ""
    assert "--mmproj is a llama.cpp option, and llama.cpp's plan is one GPU" in err and "drop --mmproj" in err
    assert "--engine vllm" not in err


def test_lever_rows_carry_the_llama_options_they_were_sized_with(run_cli):
    """Each lever row's command gives its row: --mmproj and --parallel travel with it (with -c, not the slot's
    share), and no card-split row is offered beside llama.cpp's one-GPU options (its command would be refused)."""
    code, out, err = run_cli("plan", "qwen3.5-9b", "--gpu", "rtx4060ti-8gb", "--quant", "gguf-q4_k_m", "--mmproj",
                             "f16", "--parallel", "2", "--context", "32768", "--levers", "--json")
    assert code == 0, err
    rows = json.loads(out)["levers"]
    assert not any("cards" in r["name"] for r in rows)
    row = next(r for r in rows if r["name"] == "weights in gguf-q2_k")
    cmd = row["command"].split()
    assert cmd[cmd.index("--mmproj") + 1] == "f16" and cmd[cmd.index("--parallel") + 1] == "2"
    assert cmd[cmd.index("--context") + 1] == "32768"
    code, again, err = run_cli(*cmd[1:], "--json")
    assert code == 0, err
    figure = {"sequences": ("capacity", "max_concurrent_sequences"), "tok_s": ("decode", "ceiling_tok_s")}
    section, key = figure[row["figure"]]
    assert json.loads(again)[section][key] == pytest.approx(row["after"], rel=1e-3)


def test_mmproj_refusals(run_cli):
    for args, words in ((("qwen3.6-27b", "--mmproj", "fp16"), "--mmproj `fp16` is not one of f16, bf16, f32, q8_0"),
                        (("llama-3.1-8b", "--mmproj", "f16"), "Llama 3.1 8B has no vision or audio tower"),
                        (("qwen3.6-27b", "--runtime", "vllm", "--mmproj", "f16"), "--runtime vllm")):
        code, out, err = run_cli("plan", *args, "--gpu", "rtx4090", "--quant", "gguf-q4_k_m")
        assert code == 2 and out == "" and words in err and "Traceback" not in err, err


def test_the_launch_line_loads_the_mmproj_it_was_sized_with(run_cli):
    code, out, err = run_cli("plan", "gemma-3-4b", "--gpu", "rtx4060ti-8gb", "--quant", "gguf-q4_k_m", "--mmproj",
                             "f16", "--emit", "llama-server")
    assert code == 0, err
    assert "--mmproj mmproj-gemma-3-4b-F16.gguf" in out.splitlines()[-1]
    assert "# mmproj-gemma-3-4b-F16.gguf: put the path of the model's mmproj file in F16 here" in out
    # Ollama: a second FROM, which `ollama create` takes as the projector (server/create.go isProjectorGGUF)
    code, out, err = run_cli("plan", "gemma-3-4b", "--gpu", "rtx4060ti-8gb", "--quant", "gguf-q4_k_m", "--mmproj",
                             "f16", "--emit", "ollama")
    assert code == 0, err
    assert [line for line in out.splitlines() if line.startswith("FROM ")] == [
        "FROM gemma-3-4b-Q4_K_M.gguf", "FROM mmproj-gemma-3-4b-F16.gguf"]


@pytest.mark.parametrize("config,model_id", [("Qwen__Qwen3.5-27B", "qwen3.5-27b"),
                                             ("Qwen__Qwen3.6-35B-A3B", "qwen3.6-35b-a3b"),
                                             ("google__gemma-3-27b-it", "gemma-3-27b"),
                                             ("google__gemma-4-26B-A4B", "gemma-4-26b-a4b"),
                                             ("nvidia__Gemma-4-31B-IT-NVFP4", "gemma-4-31b-nvfp4")])
def test_import_reads_the_encoder_the_catalog_has(run_cli, catalog, config, model_id):
    """`llmsize import` writes each tower's encoder shape from vision_config; the catalog's entries carry the same."""
    from pathlib import Path

    import yaml

    code, out, err = run_cli("import", str(Path(__file__).parent / "data" / "hf-configs" / f"{config}.json"))
    assert code == 0, err
    entry = yaml.safe_load(out)
    imported = next(x["encoder"] for x in entry["extra"] if "encoder" in x)
    assert VisionEncoder(**imported) == _enc(catalog, model_id)


def _mmproj_file(path, projector_type="gemma3", keys=None, arch="clip"):
    """A small mmproj GGUF as convert_hf_to_gguf.py --mmproj lays one out: clip keys, F16 matrices, F32 vectors."""
    import numpy as np
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), arch)
    w.add_string("clip.projector_type", projector_type)
    for k, v in (keys if keys is not None else {"clip.vision.embedding_length": 1152,
                                                "clip.vision.feed_forward_length": 4304,
                                                "clip.vision.attention.head_count": 16,
                                                "clip.vision.patch_size": 14, "clip.vision.image_size": 896}).items():
        w.add_uint32(k, v)
    w.add_tensor("v.blk.0.attn_q.weight", np.zeros((64, 32), dtype=np.float16))  # 4,096 B
    w.add_tensor("v.blk.0.ffn_up.weight", np.zeros((128, 32), dtype=np.float16))  # 8,192 B
    w.add_tensor("v.blk.0.ln1.weight", np.zeros((32,), dtype=np.float32))  # 128 B
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_an_mmproj_files_header_gives_its_bytes_and_encoder(tmp_path):
    """--mmproj FILE: the tensors' bytes exactly (4,096 + 8,192 + 128 B), the matrices' type, and the encoder from
    the clip keys (Gemma 3's SigLIP at 896 px: 4,096 patches, its buffer as the rule gives it); a projector type the
    rule does not know, or a key missing, leaves the buffer unknown."""
    from llmsize.estimate.mmproj import projector
    from llmsize.importer.mmproj_file import read_mmproj

    f = read_mmproj(_mmproj_file(tmp_path / "mmproj-F16.gguf"))
    assert (f.weight_bytes, f.params, f.file_type) == (4096 + 8192 + 128, 2048 + 4096 + 32, "f16")
    assert f.encoder == VisionEncoder(kind="siglip", hidden_size=1152, intermediate_size=4304, num_heads=16,
                                      patch_size=14, image_size=896)
    p = projector(None, f, True)
    assert p.compute_bytes == 127_139_840 and p.total_bytes == 12_416 + 127_139_840
    other = read_mmproj(_mmproj_file(tmp_path / "pixtral.gguf", "pixtral"))
    assert other.encoder is None and projector(None, other, True).compute_bytes is None
    partial = read_mmproj(_mmproj_file(tmp_path / "q.gguf", "qwen3vl_merger"))  # no spatial_merge_size
    assert partial.encoder is None


def test_plan_with_an_mmproj_file(run_cli, tmp_path):
    """The ledger holds the file's own bytes and its encoder's buffer; --emit llama-server loads that file."""
    path = _mmproj_file(tmp_path / "mmproj-F16.gguf")
    out = _plan(run_cli, "qwen3.6-27b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--mmproj", str(path))
    assert out["engine"]["mmproj_bytes"]["CUDA0"] == 12_416 + 127_139_840
    assert out["engine"]["mmproj"] == "mmproj-F16.gguf, F16"
    code, text, err = run_cli("plan", "qwen3.6-27b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--mmproj",
                              str(path), "--emit", "llama-server")
    assert code == 0, err
    assert text.splitlines()[-1].endswith(f"--mmproj {path}")
    # a downloaded pair: the model's GGUF (which holds no tower) and its mmproj file
    from test_gguf_file import llama

    model = llama().write(tmp_path / "tiny.gguf")
    pair = _plan(run_cli, str(model), "--gpu", "rtx4090", "--mmproj", str(path))
    assert pair["engine"]["mmproj_bytes"]["CUDA0"] == 12_416 + 127_139_840
    # a type beside a GGUF file: the file holds no tower to size, and the hint is the mmproj file, not "drop it"
    code, out, err = run_cli("plan", str(model), "--gpu", "rtx4090", "--mmproj", "f16")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "--mmproj f16" in err and "GGUF file, which holds the text model alone" in err
    assert "Give its mmproj file" in err


def test_an_mmproj_file_that_is_not_one_is_refused(run_cli, tmp_path):
    for path, words in ((tmp_path / "missing.gguf", "no such file"),
                        (_mmproj_file(tmp_path / "model.gguf", arch="llama"), "general.architecture is 'llama', "
                                                                               "not 'clip'")):
        code, out, err = run_cli("plan", "qwen3.6-27b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--mmproj",
                                 str(path))
        assert code == 2 and out == "" and words in err and "Traceback" not in err, err
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    code, out, err = run_cli("plan", "qwen3.6-27b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--mmproj",
                             str(junk))
    assert code == 2 and out == "" and "junk.gguf" in err and "Traceback" not in err, err


def test_an_mmproj_file_of_another_model_is_refused(run_cli, tmp_path):
    """A file whose clip.vision.projection_dim is not the model's hidden size feeds another text model: refused,
    naming both widths. The reader's own refusals say --mmproj and its hint."""
    import numpy as np
    from gguf import GGUFWriter

    path = tmp_path / "other.gguf"
    w = GGUFWriter(str(path), "clip")
    w.add_uint32("clip.vision.projection_dim", 2560)  # Gemma 3 4B's width; Qwen3.6-27B's is 5120
    w.add_tensor("v.blk.0.attn_q.weight", np.zeros((8, 8), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    code, out, err = run_cli("plan", "qwen3.6-27b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--mmproj",
                             str(path))
    assert code == 2 and out == ""
    assert "feeds a text model 2,560 wide" in err and "hidden size is 5,120" in err, err
    empty = tmp_path / "empty.gguf"
    w = GGUFWriter(str(empty), "clip")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    huge = _mmproj_file(tmp_path / "huge.gguf", keys={"clip.vision.embedding_length": 1152,
                                                      "clip.vision.feed_forward_length": 4304,
                                                      "clip.vision.attention.head_count": 16,
                                                      "clip.vision.patch_size": 14, "clip.vision.image_size": 100000})
    for bad, words in ((empty, "holds no tensors"), (tmp_path, "a folder, not a file"),
                       (huge, "clip.vision.image_size is 100,000, beyond any vision encoder's")):
        code, out, err = run_cli("plan", "qwen3.6-27b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--mmproj",
                                 str(bad))
        assert code == 2 and out == "" and "--mmproj" in err and words in err, err
        assert "a type (--mmproj f16)" in err


def test_every_logged_mmproj_figure_within_its_tolerance(catalog):
    """Each figure of tests/data/mmproj_logs.yaml (llama.cpp logs, as printed) beside the prediction: the weights
    within 1.5% below (the F32 tensors the converter keeps), the compute buffer within 4% (the 3 x width read off
    Gemma 3's 121.25 MiB, which it meets exactly); each log's lines carry the figure it is compared with."""
    import sys
    from pathlib import Path

    import yaml

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from mmproj_ledger import LOGS, rows

    logs = {log["id"]: log for log in yaml.safe_load(LOGS.read_text())}
    got = rows(catalog)
    assert len(got) == 4
    for log_id, figure, logged, predicted in got:
        assert any(f"{logged:.2f} MiB" in line for line in logs[log_id]["lines"]), (log_id, figure)
        if figure == "weights":
            assert -0.015 <= predicted / logged - 1 < 0, (log_id, predicted, logged)
        else:
            assert abs(predicted / logged - 1) <= 0.04, (log_id, predicted, logged)
    assert next(p for i, f, _, p in got if i == "gemma-3-12b-metal-fa") == 121.25


def test_ollama_with_a_projector_offloads_as_ollama_would(run_cli):
    """The offload lever and its row take the plan's projector and engine: under Ollama whole layers (no
    --n-cpu-moe, which Ollama lacks), the projector's margin, and the row's command gives the row (a new user's pass
    found the lever sized without the projector, under llama.cpp's margin)."""
    base = ("gemma-3-27b", "--gpu", "rtx4060ti16", "--quant", "gguf-q4_k_m", "--engine", "ollama", "--mmproj", "f16",
            "--host-memory", "DDR5-6000x2")
    code, out, err = run_cli("plan", *base, "--levers", "--json")
    assert code == 0, err
    d = json.loads(out)
    row = next(r for r in d["levers"] if r["name"].startswith("partial offload"))
    assert "--gpu-layers" in row["name"] and "--engine ollama" in row["command"] and "--fit" not in row["command"]
    cmd = row["command"].split()
    code, again, err = run_cli(*cmd[1:], "--json")
    assert code == 0, err
    placed = json.loads(again)["engine"]
    assert f"--gpu-layers {placed['settings']['gpu_layers']}" in row["name"]
    assert placed["offload"]["decode_ceiling_tok_s"] == pytest.approx(row["after"], rel=1e-6)
    code, text, err = run_cli("plan", *base)
    # Gemma 3 27B's F16 tower, 423,060,336 x 2 B, and 1 GiB: ceil(1,919,862,496 / 2^20) = 1,831 MiB
    assert "fit (1,831 MiB margin)" in text and "with --fit's 1.79 GiB margin" in " ".join(text.split())
    assert "the --fit-target Ollama sets" in " ".join(text.split())
    moe = ("gemma-4-26b-a4b", "--gpu", "rtx4060ti16", "--quant", "gguf-q4_k_m", "--engine", "ollama",
           "--host-memory", "DDR5-6000x2", "--levers", "--json")
    code, out, err = run_cli("plan", *moe)
    assert code == 0, err
    assert not any("--n-cpu-moe" in r["name"] for r in json.loads(out)["levers"])


def test_the_launch_line_keeps_the_projector_where_the_plan_put_it(run_cli):
    """Under Ollama with --gpu-layers below the layers the projector is on the CPU: llama-server's line says
    --no-mmproj-offload, as Ollama passes it."""
    code, out, err = run_cli("plan", "gemma-3-27b", "--gpu", "rtx4060ti16", "--quant", "gguf-q4_k_m", "--engine",
                             "ollama", "--mmproj", "f16", "--gpu-layers", "30", "--emit", "llama-server")
    assert code == 0, err
    assert out.splitlines()[-1].endswith("--mmproj mmproj-gemma-3-27b-F16.gguf --no-mmproj-offload")



def test_fit_sizes_each_tower_beside_its_model(run_cli, tmp_path):
    """fit --mmproj f16: a model with a vision tower fits with its mmproj on the card (its row says +mmproj and
    carries the bytes, as plan --mmproj sizes them), so it holds less context than without; a model without one is
    unchanged; a file, or a runtime that loads no mmproj, is refused in one line."""
    def rows(*extra):
        code, out, err = run_cli("fit", "--gpu", "rtx4060ti16", "--all-formats", *extra, "--json")
        assert code == 0, err
        return {(r["model"], r["format"]): r for r in json.loads(out)["rows"]}

    plain, with_mm = rows(), rows("--mmproj", "f16")
    gemma = with_mm["gemma-3-4b", "gguf-q8_0"]
    assert gemma["mmproj_bytes"] == 419_816_304 * 2 + 127_139_840  # its F16 tower and SigLIP's warm-up buffer
    assert gemma["context_tokens"] <= plain["gemma-3-4b", "gguf-q8_0"]["context_tokens"]
    assert with_mm["llama-3.2-3b", "gguf-q8_0"] == plain["llama-3.2-3b", "gguf-q8_0"]
    code, out, err = run_cli("fit", "--gpu", "rtx4060ti16", "--mmproj", "f16")
    assert code == 0 and "gemma-3-4b +mmproj" in out, err
    for args, words in ((("--mmproj", str(_mmproj_file(tmp_path / "mmproj-F16.gguf"))), "a file is one model's"),
                        (("--runtime", "vllm", "--mmproj", "f16"), "sized for vLLM")):
        code, out, err = run_cli("fit", "--gpu", "rtx4090", *args)
        assert code == 2 and out == "" and words in err, err


def test_the_tower_left_out_points_to_mmproj(run_cli):
    """Under a GGUF runtime the plan's note on the tower it leaves out says how to size it (a new user's pass)."""
    for runtime in ("llamacpp", "ollama", "lmstudio"):
        code, out, err = run_cli("plan", "gemma-3-4b", "--gpu", "rtx4090", "--quant", "gguf-q4_k_m", "--runtime",
                                 runtime, "--json")
        assert code == 0, err
        assert any("not in the weights above" in n and "--mmproj f16" in n for n in json.loads(out)["notes"]), runtime


def test_sglang_serves_llama_4_text_only_by_default(run_cli):
    """SGLang builds Llama 4's vision model only with --enable-multimodal, which it turns off for this architecture
    by default (srt/models/mllama4.py, srt/configs/model_config.py): its plan holds the text model and says why;
    vLLM's holds the tower (0.87 B parameters, 871,932,416 x 2 B in BF16)."""
    sglang = _plan(run_cli, "llama-4-scout", "--gpu", "h200", "--runtime", "sglang")
    vllm = _plan(run_cli, "llama-4-scout", "--gpu", "h200", "--runtime", "vllm")
    assert vllm["weights"]["bytes_by_component"]["extra"] == 871_932_416 * 2
    assert sglang["weights"]["bytes_by_component"]["extra"] == 0
    assert any("--enable-multimodal" in n for n in sglang["notes"])


def test_sglang_keeps_gemma_3s_tower(run_cli):
    """Gemma 3 is in SGLang's mm_disabled_models too, but srt/models/gemma3_mm.py (@017f5d47) builds and loads its
    SigLIP tower either way: the plan keeps it (423,060,336 parameters x 2 B in BF16) and says nothing of
    --enable-multimodal."""
    sglang = _plan(run_cli, "gemma-3-27b", "--gpu", "h200", "--runtime", "sglang")
    assert sglang["weights"]["bytes_by_component"]["extra"] == 423_060_336 * 2
    assert not any("--enable-multimodal" in n for n in sglang["notes"])


def test_a_modelfile_path_it_cannot_carry_is_refused(run_cli, tmp_path):
    """A Modelfile's FROM line takes a path quoted where it has a space; one holding a double quote was written as
    `FROM a"b.gguf`, and one with a line break across two lines: refused, naming the path."""
    from test_gguf_file import llama

    model = llama().write(tmp_path / 'a"b.gguf')
    code, out, err = run_cli("plan", str(model), "--gpu", "rtx4090", "--emit", "ollama")
    assert code == 2 and out == "" and "holds a double quote or a line break" in err
    spaced = llama().write(tmp_path / "a b.gguf")
    code, out, err = run_cli("plan", str(spaced), "--gpu", "rtx4090", "--emit", "ollama")
    assert code == 0 and f'FROM "{spaced}"' in out, err
