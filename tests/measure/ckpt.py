"""Write tiny Gemma 4 checkpoints in the three layouts the loader reads (test helper, not a product)."""

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from llmsize.measure import gemma4
from llmsize.measure.checkpoint import LINEAR_PREFIX, SMALL

PREFIX = "model.language_model."


def config_json(cfg: gemma4.Gemma4Config, quantization_config=None) -> dict:
    text = {
        "model_type": "gemma4_unified_text", "vocab_size": cfg.vocab_size, "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size, "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads, "head_dim": cfg.head_dim,
        "num_global_key_value_heads": cfg.num_global_kv_heads, "global_head_dim": cfg.global_head_dim,
        "sliding_window": cfg.sliding_window, "rms_norm_eps": cfg.rms_eps,
        "final_logit_softcapping": cfg.final_softcap, "attention_k_eq_v": True, "tie_word_embeddings": True,
        "layer_types": ["full_attention" if t == "full" else "sliding_attention" for t in cfg.layer_types],
        "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1e6,
                                               "rope_type": "proportional"},
                            "sliding_attention": {"rope_theta": 1e4, "rope_type": "default"}},
    }
    raw = {"model_type": "gemma4_unified", "architectures": ["Gemma4UnifiedForConditionalGeneration"],
           "text_config": text}
    if quantization_config:
        raw["quantization_config"] = quantization_config
    return raw


CT_QCONFIG = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
              "quantization_status": "compressed",
              "config_groups": {"group_0": {"targets": ["Linear"], "format": "nvfp4-pack-quantized",
                                            "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                                                        "group_size": 16, "symmetric": True, "dynamic": False},
                                            "input_activations": None}},
              "ignore": ["lm_head"]}


def random_checkpoint_tensors(cfg, seed=0):
    """Unfused float32 weights with checkpoint names: (dense tensors, nvfp4 per linear, small tensors)."""
    gen = torch.Generator().manual_seed(seed)
    dense, quant, small = {}, {}, {}
    dense["embed_tokens.weight"] = torch.randn(cfg.vocab_size, cfg.hidden_size, generator=gen) / cfg.hidden_size ** .5
    small["norm.weight"] = torch.randn(cfg.hidden_size, generator=gen) * 0.1 + 1
    for i, kind in enumerate(cfg.layer_types):
        mats, sm = gemma4.random_layer(cfg, kind, gen, "cpu", torch.float32)
        q = gemma4.quantize_layer(cfg, kind, mats)
        for name, m in mats.items():
            key = f"layers.{i}.{LINEAR_PREFIX[name]}{name}"
            dense[key] = m
            quant[key] = q[name]
        for attr, name in SMALL.items():
            small[f"layers.{i}.{name}"] = sm[attr]
    return dense, quant, small


def write(folder: Path, cfg, layout: str, seed=0, dtype=torch.float32) -> Path:
    """layout: 'compressed-tensors', 'modelopt' or 'dense'. Returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    dense, quant, small = random_checkpoint_tensors(cfg, seed)
    tensors = {PREFIX + k: v.to(dtype) for k, v in small.items()}
    tensors[PREFIX + "embed_tokens.weight"] = dense["embed_tokens.weight"].to(dtype)
    qconfig = None
    for key, q in quant.items():
        if layout == "dense":
            tensors[PREFIX + key + ".weight"] = dense[key].to(dtype)
        elif layout == "compressed-tensors":
            tensors[PREFIX + key + ".weight_packed"] = q.packed
            tensors[PREFIX + key + ".weight_scale"] = q.scales
            tensors[PREFIX + key + ".weight_global_scale"] = (1.0 / q.row_scale[:1]).float()
        else:  # modelopt
            tensors[PREFIX + key + ".weight"] = q.packed
            tensors[PREFIX + key + ".weight_scale"] = q.scales
            tensors[PREFIX + key + ".weight_scale_2"] = q.row_scale[0].clone()
    if layout == "compressed-tensors":
        qconfig = CT_QCONFIG
    if layout == "modelopt":
        (folder / "hf_quant_config.json").write_text(json.dumps(
            {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16,
                                                                 "exclude_modules": ["lm_head"]}}))
    (folder / "config.json").write_text(json.dumps(config_json(cfg, qconfig)))
    # split into two shards, as real checkpoints are
    keys = sorted(tensors)
    half = len(keys) // 2
    save_file({k: tensors[k].contiguous() for k in keys[:half]}, str(folder / "model-00001-of-00002.safetensors"))
    save_file({k: tensors[k].contiguous() for k in keys[half:]}, str(folder / "model-00002-of-00002.safetensors"))
    return folder
