"""Load a local Gemma 4 checkpoint (safetensors) for the decode loop, one layer at a time.

Three layouts (shared/reference/nvfp4-checkpoints.md):
- compressed-tensors `nvfp4-pack-quantized` (llm-compressor): `<m>.weight_packed` uint8 [N, K/2],
  `<m>.weight_scale` float8_e4m3fn [N, K/16], `<m>.weight_global_scale` fp32 [1] = 448*6/amax (a divisor);
- ModelOpt NVFP4: `<m>.weight` uint8 [N, K/2], `<m>.weight_scale` fp8 [N, K/16], `<m>.weight_scale_2` fp32
  = amax/(6*448) (a multiplier); announced by hf_quant_config.json or quantization_config.quant_method "modelopt";
- unquantized bf16/fp16/fp32: quantized to NVFP4 while loading (or kept bf16 for the baseline).
The two NVFP4 layouts hold the same nibbles and block scales; only the per-tensor scale is inverted (the
official compressed-tensors converter maps weight_scale_2 -> weight_global_scale = 1/x).
Embedding (tied lm_head) and norms are read as they are; vision and audio towers are skipped.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from llmsize.errors import LlmsizeError
from llmsize.measure import gemma4, nvfp4

GEMMA4_TYPES = {"gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text"}
SMALL = {"q_norm": "self_attn.q_norm.weight", "k_norm": "self_attn.k_norm.weight",
         "input_norm": "input_layernorm.weight", "post_attn_norm": "post_attention_layernorm.weight",
         "pre_ffn_norm": "pre_feedforward_layernorm.weight", "post_ffn_norm": "post_feedforward_layernorm.weight",
         "layer_scalar": "layer_scalar"}
LINEAR_PREFIX = {"q_proj": "self_attn.", "k_proj": "self_attn.", "v_proj": "self_attn.", "o_proj": "self_attn.",
                 "gate_proj": "mlp.", "up_proj": "mlp.", "down_proj": "mlp."}


class CheckpointError(LlmsizeError):
    """A checkpoint that is not a Gemma 4, not NVFP4 (nor plain floats), or is missing tensors."""

    default_hint = "Give --checkpoint a Gemma 4 12B folder in NVFP4 or plain floats (config.json and its .safetensors)."


def _read_json(path: Path) -> dict:
    """config.json through llmsize.files: a regular file, size-capped, never a blocking FIFO or a device."""
    from llmsize.files import FileError, read_json

    try:
        raw = read_json(path, "--checkpoint config")
    except FileError as e:
        raise CheckpointError(e.message, e.hint or "Point --checkpoint at a folder with config.json and "
                              "*.safetensors.") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path}: the top level is not a JSON object.")
    return raw


def read_config(folder: Path) -> tuple[gemma4.Gemma4Config, str]:
    """config.json -> (Gemma4Config, layout) with layout one of 'compressed-tensors', 'modelopt', 'dense'."""
    cfg_path = folder / "config.json"
    raw = _read_json(cfg_path)
    text = raw.get("text_config") or raw
    if not isinstance(text, dict):
        raise CheckpointError(f"{cfg_path}: text_config is not a JSON object.")
    model_type = text.get("model_type") or raw.get("model_type")
    if model_type not in GEMMA4_TYPES and raw.get("model_type") not in GEMMA4_TYPES:
        raise CheckpointError(f"{cfg_path}: model_type {model_type!r} is not Gemma 4.",
                              f"measure runs Gemma 4 only ({', '.join(sorted(GEMMA4_TYPES))}).")
    try:
        rope = text.get("rope_parameters") or {}
        full_rope, sliding_rope = rope.get("full_attention") or {}, rope.get("sliding_attention") or {}
        cfg = gemma4.Gemma4Config(
            name=raw.get("_name_or_path") or folder.name,
            vocab_size=text["vocab_size"], hidden_size=text["hidden_size"],
            intermediate_size=text["intermediate_size"],
            layer_types=tuple("full" if t == "full_attention" else "sliding" for t in text["layer_types"]),
            num_heads=text["num_attention_heads"], num_kv_heads=text["num_key_value_heads"],
            head_dim=text["head_dim"], num_global_kv_heads=text.get("num_global_key_value_heads", 1),
            global_head_dim=text.get("global_head_dim", 512), sliding_window=text["sliding_window"],
            rms_eps=text.get("rms_norm_eps", 1e-6),
            final_softcap=text.get("final_logit_softcapping") or 30.0,
            rope_theta_sliding=sliding_rope.get("rope_theta", 1e4), rope_theta_full=full_rope.get("rope_theta", 1e6),
            partial_rotary_full=full_rope.get("partial_rotary_factor", 0.25),
        )
    except KeyError as e:
        raise CheckpointError(f"{cfg_path}: missing text_config field {e}.") from None
    except (TypeError, AttributeError, ValueError) as e:  # a field of the wrong shape (rope_parameters: 3)
        raise CheckpointError(f"{cfg_path}: a field has an unexpected value ({e.__class__.__name__}).") from None
    _check_sizes(cfg, cfg_path)
    return cfg, _layout(folder, raw)


SIZE_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_heads", "num_kv_heads", "head_dim",
               "num_global_kv_heads", "global_head_dim", "sliding_window")
SIZE_CAP = 2**24


def _check_sizes(cfg, where: Path) -> None:
    """Every size a positive integer within bounds, every constant a finite number: nothing downstream then
    multiplies a string or allocates a 10^400-element tensor."""
    import math

    for name in SIZE_FIELDS:
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= SIZE_CAP:
            raise CheckpointError(f"{where}: {name} is {str(v)[:40]!r}; expected an integer from 1 to {SIZE_CAP:,}.")
    if not 1 <= len(cfg.layer_types) <= 1024:
        raise CheckpointError(f"{where}: {len(cfg.layer_types)} layers; expected 1 to 1,024.")
    for name in ("rms_eps", "final_softcap", "rope_theta_sliding", "rope_theta_full", "partial_rotary_full"):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise CheckpointError(f"{where}: {name} is {str(v)[:40]!r}; expected a finite positive number.")


def _layout(folder: Path, raw: dict) -> str:
    qc = raw.get("quantization_config") or (raw.get("text_config") or {}).get("quantization_config")
    if qc is not None and not isinstance(qc, dict):
        raise CheckpointError(f"{folder / 'config.json'}: quantization_config is not a JSON object.")
    hf_quant = folder / "hf_quant_config.json"
    if os.path.lexists(hf_quant):
        quantization = _read_json(hf_quant).get("quantization") or {}
        algo = quantization.get("quant_algo") if isinstance(quantization, dict) else None
        if algo != "NVFP4":
            raise CheckpointError(f"{hf_quant}: quant_algo {algo!r} is not NVFP4.",
                                  "Use an NVFP4 ModelOpt export, an nvfp4-pack-quantized one, or a bf16 checkpoint.")
        return "modelopt"
    if not qc:
        return "dense"
    method = qc.get("quant_method")
    if method == "modelopt":
        if qc.get("quant_algo") != "NVFP4":
            raise CheckpointError(f"{folder / 'config.json'}: ModelOpt quant_algo {qc.get('quant_algo')!r} is "
                                  "not NVFP4.")
        return "modelopt"
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        if not isinstance(groups, dict) or not all(isinstance(g, dict) for g in groups.values()):
            raise CheckpointError(f"{folder / 'config.json'}: config_groups is not a mapping of groups.")
        formats = {str(f) for f in [qc.get("format")] + [g.get("format") for g in groups.values()] if f is not None}
        if formats != {"nvfp4-pack-quantized"}:
            raise CheckpointError(f"{folder / 'config.json'}: compressed-tensors format {sorted(formats)} is "
                                  "not nvfp4-pack-quantized.")
        return "compressed-tensors"
    raise CheckpointError(f"{folder / 'config.json'}: quantization {method!r} is not NVFP4.",
                          "Use an NVFP4 (compressed-tensors or ModelOpt) or an unquantized checkpoint.")


class TensorIndex:
    """Tensor name -> safetensors file, over every shard in the folder; reads one tensor at a time."""

    def __init__(self, folder: Path, device):
        from safetensors import safe_open

        files = sorted(folder.glob("*.safetensors"))
        if not files:
            raise CheckpointError(f"{folder}: no *.safetensors files.")
        self.device, self.where, self._open = str(device), {}, {}
        from llmsize.files import FileError, require_regular

        for f in files:
            try:
                require_regular(f, "--checkpoint shard")  # safetensors would block on a FIFO, mmap a device
            except FileError as e:
                raise CheckpointError(e.message, e.hint) from None
            try:
                h = safe_open(str(f), framework="pt", device=self.device)
            except Exception as e:  # safetensors raises its own error types
                raise CheckpointError(f"{f}: not a readable safetensors file ({e}).") from None
            self._open[f] = h
            for k in h.keys():
                self.where[k] = f
        self.prefix = self._find_prefix()

    def _find_prefix(self) -> str:
        for k in self.where:
            i = k.find("layers.0.self_attn.q_proj.")
            if i >= 0 and "vision" not in k and "audio" not in k:
                return k[:i]
        raise CheckpointError(f"{next(iter(self._open))}: no layers.0.self_attn.q_proj tensor.",
                              "Is this a Gemma 4 language-model checkpoint?")

    def has(self, name: str) -> bool:
        return self.prefix + name in self.where

    def get(self, name: str) -> torch.Tensor:
        key = self.prefix + name
        if key not in self.where:
            raise CheckpointError(f"{next(iter(self._open)).parent}: tensor {key!r} is missing.")
        return self._open[self.where[key]].get_tensor(key)


def _linear(idx: TensorIndex, base: str, layout: str, shape: tuple[int, int]):
    """One projection: Nvfp4Weight for NVFP4 layouts, a float tensor for dense checkpoints."""
    n, k = shape
    if layout == "compressed-tensors":
        packed, scale = idx.get(base + ".weight_packed"), idx.get(base + ".weight_scale")
        row = (1.0 / idx.get(base + ".weight_global_scale").float().reshape(-1)[0]).expand(n)
    elif layout == "modelopt":
        packed, scale = idx.get(base + ".weight"), idx.get(base + ".weight_scale")
        row = idx.get(base + ".weight_scale_2").float().reshape(-1)[0].expand(n)
    else:
        w = idx.get(base + ".weight")
        if tuple(w.shape) != shape:
            raise CheckpointError(f"{base}.weight has shape {tuple(w.shape)}, config says {shape}.")
        return w
    if tuple(packed.shape) != (n, k // 2) or tuple(scale.shape) != (n, k // 16):
        raise CheckpointError(f"{base}: packed {tuple(packed.shape)} / scale {tuple(scale.shape)} do not match "
                              f"the NVFP4 shapes {(n, k // 2)} / {(n, k // 16)} of a {shape} weight.")
    if packed.dtype != torch.uint8:
        raise CheckpointError(f"{base}: packed weight is {packed.dtype}, NVFP4 packs into uint8.")
    return nvfp4.Nvfp4Weight(packed, scale.view(torch.float8_e4m3fn) if scale.dtype == torch.uint8 else
                             scale.to(torch.float8_e4m3fn), row.contiguous())


def load(folder: Path | str, device="cpu", dtype=torch.bfloat16, quant: str = "nvfp4",
         on_layer=None) -> gemma4.Gemma4Weights:
    """Read a checkpoint layer by layer. quant 'nvfp4': NVFP4 layouts as stored, dense ones quantized while
    loading; quant 'bf16': dense weights as they are (an NVFP4 checkpoint is refused: no lossless way back)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: not a folder.", "Point --checkpoint at a checkpoint folder.")
    cfg, layout = read_config(folder)
    if quant == "bf16" and layout != "dense":
        raise CheckpointError(f"{folder}: a {layout} NVFP4 checkpoint cannot run the bf16 baseline.",
                              "Use --quant nvfp4, or a bf16 checkpoint for --quant bf16.")
    idx = TensorIndex(folder, device)
    embed = idx.get("embed_tokens.weight").to(dtype)
    if tuple(embed.shape) != (cfg.vocab_size, cfg.hidden_size):
        raise CheckpointError(f"{folder}: embed_tokens is {tuple(embed.shape)}, config says "
                              f"{(cfg.vocab_size, cfg.hidden_size)}.")
    w = gemma4.Gemma4Weights(cfg, embed, idx.get("norm.weight").to(dtype), quant=quant)
    for i, kind in enumerate(cfg.layer_types):
        base = f"layers.{i}."
        mats = {name: _linear(idx, base + LINEAR_PREFIX[name] + name, layout, shape)
                for name, shape in gemma4.layer_shapes(cfg, kind).items()}
        if layout == "dense":
            mats = {k: v.to(dtype) for k, v in mats.items()}
            if quant == "nvfp4":
                mats = gemma4.quantize_layer(cfg, kind, mats)
        small = {attr: idx.get(base + name).to(dtype).reshape(-1) for attr, name in SMALL.items()}
        w.layers.append(gemma4.LayerWeights(kind=kind, **gemma4.fuse(cfg, kind, mats, quant), **small))
        if on_layer:
            on_layer(i)
    return w
