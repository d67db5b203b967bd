"""Write safetensors files by hand (header JSON + zero data), torch-free: the importer tests' checkpoints."""

import json
import struct
from math import prod
from pathlib import Path

BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F16": 16, "BF16": 16, "I32": 32, "F32": 32,
        "I64": 64}


def write_safetensors(path: Path, tensors: dict, metadata=None) -> Path:
    """tensors: {name: (dtype, shape)}."""
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
}


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
