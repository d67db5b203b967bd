"""Checkpoint loading: compressed-tensors and ModelOpt NVFP4 layouts, dense quantized while loading, errors."""

import json

import pytest
import torch

from llmsize.measure import checkpoint, gemma4
from llmsize.measure.checkpoint import CheckpointError

from .ckpt import CT_QCONFIG, config_json, write

pytest.importorskip("safetensors")
CFG = gemma4.GEMMA4_TINY


def _decode_logits(weights, prompt=(3, 1, 4, 1, 5), steps=2 * CFG.sliding_window + 2):
    dec = gemma4.Gemma4Decoder(weights, batch=1, max_positions=len(prompt) + steps + 1)
    out = [dec.prefill(torch.tensor([list(prompt)]))[0]]
    out += [dec.decode_step()[0] for _ in range(steps)]
    return torch.stack(out)


def _in_memory(seed=0):
    """The same weights as the written checkpoint, built in memory (same generator, same recipe)."""
    from .ckpt import random_checkpoint_tensors
    dense, quant, small = random_checkpoint_tensors(CFG, seed)
    w = gemma4.Gemma4Weights(CFG, dense["embed_tokens.weight"], small["norm.weight"])
    for i, kind in enumerate(CFG.layer_types):
        mats = {n: quant[f"layers.{i}.{checkpoint.LINEAR_PREFIX[n]}{n}"] for n in gemma4.layer_shapes(CFG, kind)}
        sm = {a: small[f"layers.{i}.{n}"].reshape(-1) for a, n in checkpoint.SMALL.items()}
        w.layers.append(gemma4.LayerWeights(kind=kind, **gemma4.fuse(CFG, kind, mats, "nvfp4"), **sm))
    return w


def test_compressed_tensors_checkpoint_decodes_to_the_same_logits_as_memory(tmp_path):
    folder = write(tmp_path / "ct", CFG, "compressed-tensors")
    loaded = checkpoint.load(folder, dtype=torch.float32)
    assert loaded.config.layer_types == CFG.layer_types
    torch.testing.assert_close(_decode_logits(loaded), _decode_logits(_in_memory()), rtol=1e-5, atol=1e-4)


def test_both_global_scale_conventions_load_to_the_same_weights(tmp_path):
    ct = checkpoint.load(write(tmp_path / "ct", CFG, "compressed-tensors"), dtype=torch.float32)
    mo = checkpoint.load(write(tmp_path / "mo", CFG, "modelopt"), dtype=torch.float32)
    for a, b in zip(ct.layers, mo.layers):
        for name in ("qkv", "o", "gate_up", "down"):
            wa, wb = getattr(a, name), getattr(b, name)
            assert torch.equal(wa.packed, wb.packed) and torch.equal(wa.scales.view(torch.uint8),
                                                                      wb.scales.view(torch.uint8))
            # 1/(1/x) in fp32 is x within one ulp
            torch.testing.assert_close(wa.dequantize(), wb.dequantize(), rtol=2e-7, atol=0)


def test_dense_checkpoint_is_quantized_while_loading(tmp_path):
    folder = write(tmp_path / "dense", CFG, "dense")
    loaded = checkpoint.load(folder, dtype=torch.float32, quant="nvfp4")
    mem = _in_memory()
    for a, b in zip(loaded.layers, mem.layers):
        assert torch.equal(a.qkv.packed, b.qkv.packed) and torch.equal(a.down.row_scale, b.down.row_scale)
    baseline = checkpoint.load(folder, dtype=torch.float32, quant="bf16")
    assert isinstance(baseline.layers[0].qkv, torch.Tensor)


def test_not_gemma4_names_the_file(tmp_path):
    folder = write(tmp_path / "x", CFG, "dense")
    raw = config_json(CFG)
    raw["text_config"]["model_type"] = "llama"
    raw["model_type"] = "llama"
    (folder / "config.json").write_text(json.dumps(raw))
    with pytest.raises(CheckpointError, match=r"config\.json: model_type 'llama' is not Gemma 4"):
        checkpoint.load(folder)


@pytest.mark.parametrize("qc, match", [
    ({"quant_method": "compressed-tensors", "format": "float-quantized"}, "not nvfp4-pack-quantized"),
    ({"quant_method": "awq", "bits": 4}, "quantization 'awq' is not NVFP4"),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, "quant_algo 'FP8' is not NVFP4"),
])
def test_other_quantizations_are_refused(tmp_path, qc, match):
    folder = write(tmp_path / "q", CFG, "dense")
    (folder / "config.json").write_text(json.dumps(config_json(CFG, qc)))
    with pytest.raises(CheckpointError, match=match):
        checkpoint.load(folder)


def test_nvfp4_checkpoint_cannot_be_the_bf16_baseline(tmp_path):
    folder = write(tmp_path / "ct", CFG, "compressed-tensors")
    with pytest.raises(CheckpointError, match="cannot run the bf16 baseline"):
        checkpoint.load(folder, quant="bf16")


def test_missing_folder_and_files(tmp_path):
    with pytest.raises(CheckpointError, match="not a folder"):
        checkpoint.load(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="config.json`: not found"):
        checkpoint.load(tmp_path / "empty")
    (tmp_path / "empty" / "config.json").write_text(json.dumps(config_json(CFG, CT_QCONFIG)))
    with pytest.raises(CheckpointError, match="no \\*.safetensors files"):
        checkpoint.load(tmp_path / "empty")
