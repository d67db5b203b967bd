"""config.json mappers of hybrid decoders, recurrent mixers beside attention: NVIDIA's Nemotron-H (Mamba-2) and
Qwen3-Next / Qwen3.5 (Gated DeltaNet)."""

from __future__ import annotations

from llmsize.errors import shown
from llmsize.importer.config_fields import (
    ConfigError,
    ConfigReader,
    Mapped,
    attention_entry,
    common_fields,
    head_width,
    layer_stack_fields,
)
from llmsize.importer.extras import mtp_layers

# transformers' NemotronHConfig (5.x) lists layers_block_type, one word a layer, where older configs wrote
# hybrid_override_pattern, one character a layer (Nemotron 3 Ultra and 3.5 Lightning's configs carry only the list)
BLOCK_TYPES = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def _nemotron_pattern(c: ConfigReader) -> str:
    pattern, blocks = c.get("hybrid_override_pattern"), c.get("layers_block_type")
    if pattern is None and blocks is not None:
        if not isinstance(blocks, list):
            raise ConfigError(f"{c.where}: layers_block_type is {shown(repr(blocks), 20)}, not a list of one word "
                              f"a layer ({', '.join(BLOCK_TYPES)}).", "Fix the config.json.")
        odd = [b for b in blocks if b not in BLOCK_TYPES]
        if odd:
            raise ConfigError(f"{c.where}: layers_block_type holds {shown(repr(odd[0]), 20)}, not one of "
                              f"{', '.join(BLOCK_TYPES)}.", "Fix the config.json.")
        return "".join(BLOCK_TYPES[b] for b in blocks)
    if pattern is None:
        raise ConfigError(f"{c.where}: neither hybrid_override_pattern nor layers_block_type says what each layer "
                          "holds (model_type 'nemotron_h').", "Fix the config.json.")
    if not isinstance(pattern, str):
        raise ConfigError(f"{c.where}: hybrid_override_pattern is not a string of layer letters.",
                          "Fix the config.json.")
    return pattern


def map_nemotron_h(c: ConfigReader, model_type: str) -> Mapped:
    """NemotronH: hybrid_override_pattern, one character per layer: M Mamba2, * attention, - MLP, E MoE (or
    layers_block_type, one word a layer); routed experts in a latent of moe_latent_size where it is set (LatentMoE:
    Nemotron 3 Super and Ultra)."""
    pattern = _nemotron_pattern(c)
    layers = c.get("num_hidden_layers") or len(pattern)
    if len(pattern) != layers:
        raise ConfigError(f"{c.where}: hybrid_override_pattern has {len(pattern)} layers, num_hidden_layers "
                          f"{layers}.")
    specs = []
    for ch in pattern:
        if ch == "M":
            nh, mhd, state, groups, conv = c.need("mamba_num_heads", "mamba_head_dim", "ssm_state_size",
                                                  "n_groups", "conv_kernel")
            dtype = {"float32": "fp32", "float16": "fp16"}.get(c.get("mamba_ssm_cache_dtype"), "bf16")
            specs.append({"mixer": {"kind": "ssm", "num_heads": nh, "head_dim": mhd, "state_size": state,
                                    "n_groups": groups, "conv_kernel": conv,
                                    "conv_bias": bool(c.get("use_conv_bias", True)), "state_dtype": dtype},
                          "norms": 1})
        elif ch == "*":
            heads, kv = c.need("num_attention_heads", "num_key_value_heads")
            hd = head_width(c, heads, "attention_head_dim")
            specs.append({"mixer": attention_entry("full", heads, kv, hd), "norms": 1})
        elif ch == "-":
            specs.append({"mlp": {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0],
                                  "gated": False}, "norms": 1})
        elif ch == "E":
            experts, k, inter = c.need("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")
            moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter,
                   "gated": False, "router_bias": True}
            if c.get("moe_latent_size"):
                moe["latent_size"] = c.get("moe_latent_size")
            if c.get("n_shared_experts"):
                moe["num_shared_experts"] = c.get("n_shared_experts")
                moe["shared_intermediate_size"] = c.get("moe_shared_expert_intermediate_size") or inter
            specs.append({"mlp": moe, "norms": 1})
        else:
            raise ConfigError(f"{c.where}: hybrid_override_pattern has an unknown layer {ch!r}.",
                              "Known: M (Mamba2), * (attention), - (MLP), E (MoE).")
    return Mapped({**common_fields(c, False), **layer_stack_fields(specs)})


def map_qwen3_hybrid(c: ConfigReader, model_type: str) -> Mapped:
    """Qwen3-Next and Qwen3.5/3.6 (transformers Qwen3NextConfig, Qwen3_5TextConfig, Qwen3_5MoeTextConfig): gated
    delta-net layers (`linear_*` sizes) and, one in `full_attention_interval`, gated full attention with q/k norms,
    as `layer_types` lists them; a dense MLP, or routed experts with one gated shared expert."""
    layers, heads, kv = c.need("num_hidden_layers", "num_attention_heads", "num_key_value_heads")
    types = c.layer_types(layers, ("linear_attention", "full_attention"))
    if types is None:
        every = c.get("full_attention_interval") or 4
        types = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)]
    kh, vh, kd, vd, conv = c.need("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                                  "linear_value_head_dim", "linear_conv_kernel_dim")
    state = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}.get(c.get("mamba_ssm_dtype"), "fp32")
    linear = {"kind": "linear", "num_key_heads": kh, "num_value_heads": vh, "key_head_dim": kd, "value_head_dim": vd,
              "conv_kernel": conv, "state_dtype": state}
    hd = head_width(c, heads)
    full = attention_entry("full", heads, kv, hd, qk_norm=True, output_gate=bool(c.get("attn_output_gate", True)))
    if c.get("num_experts"):
        experts, k, inter = c.need("num_experts", "num_experts_per_tok", "moe_intermediate_size")
        mlp = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter}
        shared = c.get("shared_expert_intermediate_size")
        if shared:
            mlp.update(num_shared_experts=1, shared_expert_gate=True)
            if shared != inter:
                mlp["shared_intermediate_size"] = shared
    else:
        mlp = {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0]}
    specs = [{"mixer": linear if t == "linear_attention" else full, "mlp": mlp} for t in types]
    fields = {**common_fields(c, False), **layer_stack_fields(specs)}
    mtp = mtp_layers(c.get("mtp_num_hidden_layers"), fields["hidden_size"], {"mixer": full, "mlp": mlp})
    notes = ["the multi-token-prediction layers' own embedding (mtp_use_dedicated_embeddings) not counted"] \
        if mtp and c.get("mtp_use_dedicated_embeddings") is True else []
    return Mapped({**fields, "extra": [mtp]} if mtp else fields, notes)
