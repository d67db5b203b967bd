"""config.json mapper of DeepSeek-V4 (model_type deepseek_v4; DeepSeek-V4-Flash and -Pro): every layer the
compressed attention of schema.CompressedAttention and a MoE MLP, hyper-connections around both.

Read from the config (deepseek-ai/DeepSeek-V4-Flash's config.json; the tensor layout antirez/ds4 ds4.c
weights_validate_layout checks @8d57664, as llama.cpp's LLM_ARCH_DEEPSEEK4 creates it): compress_ratios gives each
layer's ratio (0: the window alone) and,
past num_hidden_layers, the multi-token-prediction layer's; a layer of ratio 4 carries the indexer (index_n_heads x
index_head_dim, top index_topk) and overlapping compressor windows (ds4.c's, llama.cpp's and vLLM's `coff` of 2 at
ratio 4);
the first num_hash_layers layers route by a token-id table (tid2eid, an int32 table of top-k experts a vocabulary
entry, not a parameter) and their router has no e_score_correction_bias; every layer has n_shared_experts of
moe_intermediate_size beside n_routed_experts.
"""

from __future__ import annotations

from llmsize.importer.config_fields import ConfigError, ConfigReader, Mapped, common_fields, layer_stack_fields

REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "head_dim", "qk_rope_head_dim",
            "q_lora_rank", "o_groups", "o_lora_rank", "sliding_window", "compress_ratios", "n_routed_experts",
            "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts", "num_hash_layers", "hc_mult")
INT32_MAX = 2**31 - 1
INDEXED_RATIO = 4  # the ratio whose layers select entries through an indexer, over overlapping windows


def _ratios(c: ConfigReader, layers: int, extra: int) -> list[int]:
    ratios = c.get("compress_ratios")
    if not (isinstance(ratios, list) and len(ratios) == layers + extra
            and all(type(r) is int and (r == 0 or 2 <= r <= 2**20) for r in ratios)):
        raise ConfigError(f"{c.where}: compress_ratios is not one ratio (0, or 2 and more) for each of the {layers} "
                          f"layers{f' and {extra} multi-token-prediction layer(s)' if extra else ''}.",
                          "Fix the config.json.")
    return ratios


def _mixer(c: ConfigReader, ratio: int) -> dict:
    heads, hd, rope, q_rank, groups, o_rank = (c.count(k, high=2**16) for k in (
        "num_attention_heads", "head_dim", "qk_rope_head_dim", "q_lora_rank", "o_groups", "o_lora_rank"))
    window = c.count("sliding_window", high=INT32_MAX)
    if heads % groups:
        raise ConfigError(f"{c.where}: o_groups {groups} does not divide num_attention_heads {heads} (each output "
                          "group takes as many heads).", "Fix the config.json.")
    if rope > hd:
        raise ConfigError(f"{c.where}: qk_rope_head_dim {rope} is wider than head_dim {hd} (RoPE takes the head's "
                          "last qk_rope_head_dim values).", "Fix the config.json.")
    mixer = {"kind": "compressed", "num_attention_heads": heads, "head_dim": hd, "qk_rope_head_dim": rope,
             "q_lora_rank": q_rank, "o_groups": groups, "o_lora_rank": o_rank, "sliding_window": window}
    if ratio:
        mixer["compress_ratio"] = ratio
    if ratio == INDEXED_RATIO:
        c.need("index_n_heads", "index_head_dim", "index_topk")
        n, d = (c.count(k, high=2**16) for k in ("index_n_heads", "index_head_dim"))
        mixer.update(compress_overlap=True, indexer={"n_heads": n, "head_dim": d,
                                                     "topk": c.count("index_topk", high=INT32_MAX)})
    return mixer


def _moe(c: ConfigReader, hashed: bool) -> dict:
    experts, k, inter = (c.count(key, high=2**24) for key in ("n_routed_experts", "num_experts_per_tok",
                                                               "moe_intermediate_size"))
    if k > experts:
        raise ConfigError(f"{c.where}: num_experts_per_tok {k} is more than n_routed_experts {experts}.",
                          "Fix the config.json.")
    moe = {"kind": "moe", "num_experts": experts, "experts_per_token": k, "moe_intermediate_size": inter}
    shared = c.count("n_shared_experts", low=0, high=2**10)
    if shared:
        moe["num_shared_experts"] = shared
    if not hashed and c.get("topk_method") == "noaux_tc":  # exp_probs_b beside the router's weight
        moe["router_bias"] = True
    return moe


def map_deepseek_v4(c: ConfigReader, model_type: str) -> Mapped:
    layers = c.count("num_hidden_layers", high=2**16)
    kv_heads = c.get("num_key_value_heads", 1)
    if kv_heads != 1:
        raise ConfigError(f"{c.where}: num_key_value_heads {kv_heads!r}: DeepSeek-V4's attention caches one KV head "
                          "(K = V), which is what llmsize models.", "Fix the config.json.")
    mtp = c.count("num_nextn_predict_layers", low=0, high=64, default=0)
    ratios = _ratios(c, layers, mtp)
    hashed = c.count("num_hash_layers", low=0, high=layers)
    specs = []
    for i in range(layers):
        spec = {"mixer": _mixer(c, ratios[i]), "mlp": _moe(c, i < hashed)}
        if i < hashed:
            spec["note"] = "routed by a token-id table (num_hash_layers)"
        specs.append(spec)
    fields = {**common_fields(c, False), **layer_stack_fields(specs),
              "hyper_connections": c.count("hc_mult", low=2, high=64)}
    notes = [f"the first {hashed} layers route by a token-id table (tid2eid: top-{c.get('num_experts_per_tok')} "
             "expert ids a vocabulary entry, int32, not counted as parameters)"] if hashed else []
    extra = _mtp(c, mtp, fields, ratios[layers:layers + mtp])
    if extra:
        fields["extra"] = [extra]
    return Mapped(fields, notes)


def _mtp(c: ConfigReader, count: int, fields: dict, ratios: list[int]) -> dict | None:
    """The multi-token-prediction layers past the decoder (mtp.N in the checkpoint; ds4.c mtp_weights_bind): each a
    layer of the model's kind at its own compress ratio with its hyper-connections, e_proj and h_proj [h -> h],
    enorm, hnorm and norm, and a hyper-connection head; the embedding and output head are the model's."""
    if not count:
        return None
    from llmsize.estimate.params import hyper_connection_params
    from llmsize.importer.extras import layer_params

    h, streams = fields["hidden_size"], fields["hyper_connections"]
    own = sum(layer_params({"mixer": _mixer(c, r), "mlp": _moe(c, False)}, h) for r in ratios)
    own += count * (2 * h * h + 3 * h) + hyper_connection_params(streams, h, count) \
        + (count - 1) * (streams * h * streams + streams + 1)  # a head a layer
    return {"name": f"multi-token-prediction layers (num_nextn_predict_layers {count})", "params": own,
            "in_official_count": False, "loaded": False, **({"layers": count} if count > 1 else {}),
            "note": "counted from config.json: a decoder layer each (its compress ratio from compress_ratios), e_proj "
                    "and h_proj [h -> h], three norms, hyper-connections; the embedding and output head are the "
                    "model's; loaded for speculative decoding"}
