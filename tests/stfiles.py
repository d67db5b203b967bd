"""Write safetensors files by hand (header JSON + zero data), torch-free: the importer tests' checkpoints."""

import json
import struct
from math import prod
from pathlib import Path

BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F16": 16, "BF16": 16, "I32": 32, "F32": 32,
        "I64": 64}


def write_safetensors(path: Path, tensors: dict, metadata=None, sparse: bool = False) -> Path:
    """tensors: {name: (dtype, shape)}; `sparse`: the data left as a hole (a real model's size, no disk)."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = (prod(shape) * BITS[dtype] + 7) // 8
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    if metadata:
        header["__metadata__"] = metadata
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        if sparse:
            f.truncate(8 + len(blob) + offset)
        else:
            f.write(b"\0" * offset)
    return path


TINY = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 256,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
LINEARS = {"self_attn.q_proj": (64, 64), "self_attn.k_proj": (32, 64), "self_attn.v_proj": (32, 64),
           "self_attn.o_proj": (64, 64), "mlp.gate_proj": (128, 64), "mlp.up_proj": (128, 64),
           "mlp.down_proj": (64, 128)}


def tiny_llama_tensors(layout: str = "bf16") -> dict:
    """A 2-layer Llama with real names and shapes in one of: bf16, ct-nvfp4, modelopt-nvfp4, fp8, gptq."""
    t = {"model.embed_tokens.weight": ("BF16", (100, 64)), "lm_head.weight": ("BF16", (100, 64)),
         "model.norm.weight": ("BF16", (64,))}
    for i in range(2):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = ("BF16", (64,))
        t[p + "post_attention_layernorm.weight"] = ("BF16", (64,))
        for lin, (n, k) in LINEARS.items():
            base = p + lin
            if layout == "bf16":
                t[base + ".weight"] = ("BF16", (n, k))
            elif layout == "ct-nvfp4":
                t[base + ".weight_packed"] = ("U8", (n, k // 2))
                t[base + ".weight_scale"] = ("F8_E4M3", (n, k // 16))
                t[base + ".weight_global_scale"] = ("F32", (1,))
            elif layout == "modelopt-nvfp4":
                t[base + ".weight"] = ("U8", (n, k // 2))
                t[base + ".weight_scale"] = ("F8_E4M3", (n, k // 16))
                t[base + ".weight_scale_2"] = ("F32", ())
            elif layout == "fp8":
                t[base + ".weight"] = ("F8_E4M3", (n, k))
                t[base + ".weight_scale"] = ("F32", (1,))
            elif layout == "ct-int4":  # compressed-tensors pack-quantized, group 128 (K=64 here: one group)
                t[base + ".weight_packed"] = ("I32", (n, k // 8))
                t[base + ".weight_scale"] = ("BF16", (n, max(k // 128, 1)))
                t[base + ".weight_shape"] = ("I64", (2,))
            elif layout == "awq":
                t[base + ".qweight"] = ("I32", (k, n // 8))
                t[base + ".scales"] = ("F16", (max(k // 128, 1), n))
                t[base + ".qzeros"] = ("I32", (max(k // 128, 1), n // 8))
            elif layout == "bnb-nf4":  # bitsandbytes Params4bit: packed uint8 [N*K/2, 1] + absmax per 64
                t[base + ".weight"] = ("U8", (n * k // 2, 1))
                t[base + ".weight.absmax"] = ("F32", (n * k // 64,))
                t[base + ".weight.quant_map"] = ("F32", (16,))
                t[base + ".weight.quant_state.bitsandbytes__nf4"] = ("U8", (100,))
            elif layout == "gptq":
                t[base + ".qweight"] = ("I32", (k // 8, n))
                t[base + ".scales"] = ("F16", (k // 128 or 1, n))
                t[base + ".qzeros"] = ("I32", (k // 128 or 1, n // 8))
                t[base + ".g_idx"] = ("I32", (k,))
    return t


QUANT_CONFIGS = {
    "bf16": None,
    "ct-nvfp4": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
                 "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float",
                                                                                  "group_size": 16}}},
                 "ignore": ["lm_head"]},
    "fp8": {"quant_method": "compressed-tensors", "format": "float-quantized",
            "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": "tensor"}}},
            "ignore": ["lm_head"]},
    "gptq": {"quant_method": "gptq", "bits": 4, "group_size": 128},
    "awq": {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"},
    "ct-int4": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 128,
                                                          "symmetric": True}}}, "ignore": ["lm_head"]},
    "bnb-nf4": {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
}

GPT_OSS = {"model_type": "gpt_oss", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 64, "num_local_experts": 4,
           "num_experts_per_tok": 2, "vocab_size": 100, "sliding_window": 8, "max_position_embeddings": 512,
           "layer_types": ["sliding_attention", "full_attention"], "tie_word_embeddings": False,
           "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
               "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}


def tiny_gpt_oss_folder(folder: Path) -> Path:
    """gpt-oss naming: MXFP4 experts as *_blocks [E, N, K/32, 16] uint8 + *_scales [E, N, K/32] (E8M0)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(GPT_OSS))
    h, e, i = 64, 4, 64
    t = {"model.embed_tokens.weight": ("BF16", (100, h)), "lm_head.weight": ("BF16", (100, h)),
         "model.norm.weight": ("BF16", (h,))}
    for layer in range(2):
        p = f"model.layers.{layer}."
        for nm, (n, k) in {"q_proj": (64, h), "k_proj": (32, h), "v_proj": (32, h), "o_proj": (h, 64)}.items():
            t[p + f"self_attn.{nm}.weight"] = ("BF16", (n, k))
            t[p + f"self_attn.{nm}.bias"] = ("BF16", (n,))
        t[p + "self_attn.sinks"] = ("BF16", (4,))
        t[p + "mlp.router.weight"] = ("BF16", (e, h))
        t[p + "mlp.router.bias"] = ("BF16", (e,))
        t[p + "mlp.experts.gate_up_proj_blocks"] = ("U8", (e, 2 * i, h // 32, 16))
        t[p + "mlp.experts.gate_up_proj_scales"] = ("U8", (e, 2 * i, h // 32))
        t[p + "mlp.experts.gate_up_proj_bias"] = ("BF16", (e, 2 * i))
        t[p + "mlp.experts.down_proj_blocks"] = ("U8", (e, h, i // 32, 16))
        t[p + "mlp.experts.down_proj_scales"] = ("U8", (e, h, i // 32))
        t[p + "mlp.experts.down_proj_bias"] = ("BF16", (e, h))
        t[p + "input_layernorm.weight"] = ("BF16", (h,))
        t[p + "post_attention_layernorm.weight"] = ("BF16", (h,))
    write_safetensors(folder / "model.safetensors", t)
    return folder


def tiny_llama_folder(folder: Path, layout: str = "bf16", shards: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cfg = dict(TINY)
    if layout == "modelopt-nvfp4":
        (folder / "hf_quant_config.json").write_text(json.dumps(
            {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16,
                                                                 "exclude_modules": ["lm_head"]}}))
    elif QUANT_CONFIGS.get(layout):
        cfg["quantization_config"] = QUANT_CONFIGS[layout]
    (folder / "config.json").write_text(json.dumps(cfg))
    tensors = tiny_llama_tensors(layout)
    if shards == 1:
        write_safetensors(folder / "model.safetensors", tensors)
    else:
        names = sorted(tensors)
        weight_map = {}
        for s in range(shards):
            part = {n: tensors[n] for n in names[s::shards]}
            fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            write_safetensors(folder / fname, part)
            weight_map.update({n: fname for n in part})
        (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder
