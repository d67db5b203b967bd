"""config.json mappers of hybrid decoders, recurrent mixers beside attention: NVIDIA's Nemotron-H and IBM's Granite
4.0-H (Mamba-2), Qwen3-Next / Qwen3.5 (Gated DeltaNet), Kimi Linear (Kimi Delta Attention beside MLA) and Liquid AI's
LFM2 (gated short convolutions)."""

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
    mtp_notes,
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


def _kda_layers(c: ConfigReader, layers: int) -> tuple[dict, set[int]]:
    """linear_attn_config: the KDA layers' heads, head_dim and conv kernel, and which layers (0-based) they are; its
    kda_layers and full_attn_layers count from 1 (vLLM kimi_linear.py: `(layer_idx + 1) in kda_layers`; the
    checkpoint's KDA tensors sit on layers 0-2, 4-6, ... of Kimi-Linear-48B-A3B, whose kda_layers start 1, 2, 3, 5)."""
    lac = c.get("linear_attn_config")
    if not isinstance(lac, dict):
        raise ConfigError(f"{c.where}: linear_attn_config is {shown(repr(lac), 30)}, not an object giving the KDA "
                          "layers (model_type 'kimi_linear').", "Fix the config.json.")
    sizes = [lac.get(k) for k in ("num_heads", "head_dim", "short_conv_kernel_size")]
    if any(isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= 2**16 for v in sizes):
        raise ConfigError(f"{c.where}: linear_attn_config's num_heads, head_dim and short_conv_kernel_size are "
                          f"{shown(repr(sizes), 60)}, not whole counts from 1 to 65,536.", "Fix the config.json.")
    split = {}
    for name in ("kda_layers", "full_attn_layers"):
        v = lac.get(name)
        if not isinstance(v, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= layers
                                          for i in v) or len(set(v)) != len(v):
            raise ConfigError(f"{c.where}: linear_attn_config's {name} is {shown(repr(v), 40)}, not layer numbers "
                              f"from 1 to {layers} (num_hidden_layers), each once.", "Fix the config.json.")
        split[name] = {i - 1 for i in v}
    if split["kda_layers"] & split["full_attn_layers"] or \
            len(split["kda_layers"]) + len(split["full_attn_layers"]) != layers:
        raise ConfigError(f"{c.where}: linear_attn_config's kda_layers ({len(split['kda_layers'])}) and "
                          f"full_attn_layers ({len(split['full_attn_layers'])}) do not name each of the "
                          f"{layers} layers once.", "Fix the config.json.")
    heads, hd, conv = sizes
    full_gate = lac.get("use_full_rank_gate")
    if full_gate not in (None, True, False):
        raise ConfigError(f"{c.where}: linear_attn_config's use_full_rank_gate is {shown(repr(full_gate), 20)}; "
                          "expected true or false.", "Fix the config.json.")
    kda = {"kind": "linear", "num_key_heads": heads, "num_value_heads": heads, "key_head_dim": hd,
           "value_head_dim": hd, "conv_kernel": conv, "state_dtype": "fp32", "variant": "kda", "gate_rank": hd}
    if full_gate:
        kda["gate_full_rank"] = True
    return kda, split["kda_layers"]


def map_kimi_linear(c: ConfigReader, model_type: str) -> Mapped:
    """Kimi Linear (vLLM model_executor/models/kimi_linear.py @01d99586, layers/kda.py @01a7e5d9): Kimi Delta
    Attention on linear_attn_config's kda_layers, MLA on the others, without RoPE (mla_use_nope; qk_rope_head_dim
    still sizes q and the cached key); from first_k_dense_replace on, every moe_layer_freq-th layer routes
    num_experts_per_token of num_experts experts of moe_intermediate_size (the router with its e_score_correction_bias)
    beside num_shared_experts of that width, the others a dense MLP of intermediate_size. The config's top-level
    head_dim (hidden / heads) sizes nothing.
    Kimi K3's text model (SGLang 0.5.23 models/kimi_k3.py, vLLM 0.34 models/kimi_k3): its MLA takes a query LoRA
    (q_lora_rank) and an output gate (mla_use_output_gate: g_proj hidden -> heads x v_head_dim); its KDA a full-rank
    output gate (use_full_rank_gate); its routed experts work in a latent of routed_expert_hidden_size (down and up
    projections at the hidden size, an RMSNorm of the latent where latent_moe_use_norm); attention residuals
    (attn_res_block_size) add two norms and two [1, hidden] projections a layer and one of each at the top."""
    layers, heads = c.need("num_hidden_layers", "num_attention_heads")
    kda, kda_at = _kda_layers(c, layers)
    kv_rank, nope, rope, v = c.need("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    mla = {"kind": "mla", "num_attention_heads": heads, "kv_lora_rank": kv_rank, "qk_nope_head_dim": nope,
           "qk_rope_head_dim": rope, "v_head_dim": v}
    if c.get("q_lora_rank"):
        mla["q_lora_rank"] = c.count("q_lora_rank")
    if c.flag("mla_use_output_gate", False):
        mla["output_gate"] = True
    experts, k, inter = c.need("num_experts", "num_experts_per_token", "moe_intermediate_size")
    moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter,
           "router_bias": True}
    if c.get("num_shared_experts"):
        moe["num_shared_experts"] = c.get("num_shared_experts")
    if c.get("routed_expert_hidden_size") is not None:
        moe["latent_size"] = c.count("routed_expert_hidden_size")
        if c.flag("latent_moe_use_norm", False):
            moe["latent_norm"] = True
    dense = {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0]}
    first, freq = c.get("first_k_dense_replace") or 0, c.get("moe_layer_freq") or 1
    residuals = c.get("attn_res_block_size") is not None
    if residuals:
        c.count("attn_res_block_size")  # a whole count, or a one-line error
    extra = {"extra_params": 2 * c.need("hidden_size")[0]} if residuals else {}  # the two [1, hidden] projections
    specs = [{"mixer": kda if i in kda_at else mla, "mlp": moe if i >= first and i % freq == 0 else dense,
              **({"norms": 4, **extra} if residuals else {})} for i in range(layers)]
    notes, given = [], {}
    if "max_position_embeddings" not in c.raw:
        # its config carries model_max_length (1,048,576: the README's 1M context) and no max_position_embeddings;
        # vLLM takes a model's context from either (ModelConfig's max-length keys include model_max_length). Its
        # configuration class is the repository's, not transformers': no default to fall back on
        longest = c.raw.get("model_max_length")
        if type(longest) is not int or not 0 < longest <= 2**31 - 1:
            raise ConfigError(f"{c.where}: model_max_length is {shown(repr(longest), 20)} and there is no "
                              "max_position_embeddings: the model's context length is not given.",
                              "Fix the config.json.")
        notes.append(f"context length {longest:,} from model_max_length (no max_position_embeddings)")
        given["max_position_embeddings"] = longest
    notes += mtp_notes(c.get("num_nextn_predict_layers"))
    top = {"final_norms": 3} if residuals else {}  # norm, output_attn_res_norm and output_attn_res_proj [1, hidden]
    return Mapped({**common_fields(c.with_fields(**given), False), **top, **layer_stack_fields(specs)}, notes)


GRANITE_LAYERS = ("mamba", "attention")


def map_granite_hybrid(c: ConfigReader, model_type: str) -> Mapped:
    """IBM Granite 4.0 (transformers GraniteMoeHybridConfig / modeling_granitemoehybrid.py @1c0ff25f; vLLM
    granitemoehybrid.py @0195c9ec): layer_types says which layers are Mamba-2 (in_proj to 2 x expand x hidden + 2
    groups x state + heads, a conv with mamba_conv_bias, a gated norm) and which attention (heads of hidden / heads,
    no positional encoding unless position_embedding_type is rope, which costs nothing). Every layer, of either
    kind, then runs num_experts_per_tok of num_local_experts SwiGLU experts of intermediate_size (a router without
    bias) and one SwiGLU shared MLP of shared_intermediate_size added to them without a gate; with no experts
    (granite-4.0-h-micro, -micro) the shared MLP is the layer's dense MLP. Granite 4.0-micro is this type with every
    layer attention, its unused mamba_* fields left in."""
    layers, heads, kv = c.need("num_hidden_layers", "num_attention_heads", "num_key_value_heads")
    types = c.get("layer_types") or c.get("layers_block_type")
    if types is None:
        types = ["mamba"] * layers  # the class's layers_block_type when layer_types is unset
    if not isinstance(types, list) or len(types) != layers or any(t not in GRANITE_LAYERS for t in types):
        raise ConfigError(f"{c.where}: layer_types is {shown(repr(types), 40)}, not one of {', '.join(GRANITE_LAYERS)} "
                          f"for each of the {layers} layers (num_hidden_layers).", "Fix the config.json.")
    hidden = c.need("hidden_size")[0]
    attention = attention_entry("full", heads, kv, hidden // heads,
                                bias="all" if c.flag("attention_bias", False) else "none")
    notes = []
    if "mamba" in types:
        nh, state, groups, conv, expand = c.need("mamba_n_heads", "mamba_d_state", "mamba_n_groups", "mamba_d_conv",
                                                 "mamba_expand")
        inner = int(expand * hidden)
        d_head = c.get("mamba_d_head")
        d_head = inner // nh if d_head in (None, "auto") else d_head
        if not isinstance(d_head, int) or isinstance(d_head, bool) or d_head * nh != inner:
            raise ConfigError(f"{c.where}: mamba_d_head {shown(repr(d_head), 20)} x mamba_n_heads {nh} is not "
                              f"mamba_expand x hidden_size ({inner:,}), as transformers requires.",
                              "Fix the config.json.")
        if nh % groups:
            raise ConfigError(f"{c.where}: mamba_n_heads {nh} is not a multiple of mamba_n_groups {groups}.",
                              "Fix the config.json.")
        mamba = {"kind": "ssm", "num_heads": nh, "head_dim": d_head, "state_size": state, "n_groups": groups,
                 "conv_kernel": conv, "conv_bias": c.flag("mamba_conv_bias", True), "state_dtype": "bf16"}
        if c.flag("mamba_proj_bias", False):
            notes.append("mamba_proj_bias: the Mamba layers' in_proj and out_proj biases not counted")
    # both given in every Granite 4.0 config (0 experts in the dense ones); absent, the class would fill in its own
    experts, shared = (c.count(key, low=0) for key in ("num_local_experts", "shared_intermediate_size"))
    if experts:
        k, inter = c.need("num_experts_per_tok", "intermediate_size")
        mlp = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter}
        if shared:
            mlp.update(num_shared_experts=1, shared_intermediate_size=shared)
    else:
        mlp = {"kind": "dense", "intermediate_size": shared or c.need("intermediate_size")[0]}
    specs = [{"mixer": mamba if t == "mamba" else attention, "mlp": mlp} for t in types]
    # GraniteMoeHybridConfig's tie_word_embeddings defaults to false; Granite 4.0's configs set it true
    return Mapped({**common_fields(c, False), **layer_stack_fields(specs)}, notes)


def lfm2_ff(c: ConfigReader) -> int:
    """LFM2's MLP width (transformers modeling_lfm2.py Lfm2MLP @0096ba4f): block_ff_dim where given (it wins over
    intermediate_size, configuration_lfm2.py @05cd1ec1); with block_auto_adjust_ff_dim, int(2/3 of it), times
    block_ffn_dim_multiplier where set and rounded up to block_multiple_of. LFM2-1.2B: 12288 -> 8192; 350M: 6656 ->
    4437 -> 4608; 2.6B (no adjustment): 10752."""
    ff = c.count("block_ff_dim" if "block_ff_dim" in c.raw else "intermediate_size")
    if c.get("block_auto_adjust_ff_dim") is None or c.flag("block_auto_adjust_ff_dim", True):
        ff = int(2 * ff / 3)
        mult, multiple = c.get("block_ffn_dim_multiplier"), c.get("block_multiple_of")
        if mult is not None:
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not 0 < mult <= 64 or \
                    isinstance(multiple, bool) or not isinstance(multiple, int) or not 0 < multiple <= 2**20:
                raise ConfigError(f"{c.where}: block_ffn_dim_multiplier {shown(repr(mult), 20)} or block_multiple_of "
                                  f"{shown(repr(multiple), 20)} cannot size the MLP.", "Fix the config.json.")
            ff = int(mult * ff)
            ff = multiple * ((ff + multiple - 1) // multiple)
    return ff


def map_lfm2(c: ConfigReader, model_type: str) -> Mapped:
    """Liquid AI LFM2 and LFM2-MoE (transformers modeling_lfm2.py @0096ba4f, modeling_lfm2_moe.py @01596202; vLLM
    lfm2.py @055e47c2): layer_types names each layer conv or full_attention (older configs list full_attn_idxs,
    0-based; with neither, transformers makes every layer attention); a conv layer is a gated short convolution of
    conv_dim channels and conv_L_cache taps, an attention layer GQA of hidden / heads with per-head q and k norms;
    every layer then runs its MLP: SwiGLU of lfm2_ff (LFM2), or for LFM2-MoE a dense one of intermediate_size on the
    first num_dense_layers and num_experts_per_tok of num_experts experts of moe_intermediate_size after, with no
    shared expert (expert_bias, a buffer the checkpoint stores, where use_expert_bias). Embeddings tied
    (tie_embedding)."""
    layers, heads, kv = c.need("num_hidden_layers", "num_attention_heads", "num_key_value_heads")
    hidden = c.need("hidden_size")[0]
    types = c.layer_types(layers, ("conv", "full_attention"))
    if types is None:
        idxs = c.raw.get("full_attn_idxs")
        if idxs is None:
            idxs = list(range(layers))
        if not isinstance(idxs, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < layers
                                             for i in idxs):
            raise ConfigError(f"{c.where}: full_attn_idxs is {shown(repr(idxs), 40)}, not layer indices from 0 to "
                              f"{layers - 1}.", "Fix the config.json.")
        types = ["full_attention" if i in idxs else "conv" for i in range(layers)]
    dim, taps = c.count("conv_dim", high=2**20, default=hidden), c.count("conv_L_cache", low=2, high=1024)
    conv = {"kind": "conv", "conv_dim": dim, "conv_kernel": taps, "bias": c.flag("conv_bias", False)}
    attention = attention_entry("full", heads, kv, hidden // heads, qk_norm=True)
    if model_type == "lfm2_moe":
        dense_layers = c.count("num_dense_layers", low=0, high=layers, default=0)
        experts, k, inter = c.need("num_experts", "num_experts_per_tok", "moe_intermediate_size")
        moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter,
               "router_bias": c.flag("use_expert_bias", True)}
        dense = {"kind": "dense", "intermediate_size": c.need("intermediate_size")[0]}
        mlps = [dense if i < dense_layers else moe for i in range(layers)]
    else:
        mlps = [{"kind": "dense", "intermediate_size": lfm2_ff(c)}] * layers
    specs = [{"mixer": conv if t == "conv" else attention, "mlp": mlp} for t, mlp in zip(types, mlps)]
    if "tie_embedding" in c.raw:  # Lfm2Config: tie_word_embeddings = kwargs.get("tie_embedding", ...)
        c = c.with_fields(tie_word_embeddings=c.raw["tie_embedding"])
    return Mapped({**common_fields(c, True), **layer_stack_fields(specs)})
