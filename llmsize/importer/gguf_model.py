"""A GGUF file -> the model it holds (a ModelSpec `plan` can use) and its exact bytes per component.

The structure comes from the tensors themselves, layer by layer (what a layer stores is what it is: attn_q/k/v or
a fused attn_qkv, MLA's attn_kv_a_mqa / attn_kv_b, ssm_in, ffn_*_exps routed experts, ffn_*_shexp shared ones,
ffn_up / ffn_gate), and the counts the shapes cannot give from the metadata, by llama.cpp's keys
(gguf-py/gguf/constants.py Keys: `{arch}.attention.head_count`, `.head_count_kv` (a number or one per layer),
`.key_length`, `.value_length`, `.sliding_window`, `.kv_lora_rank`, `.q_lora_rank`, `{arch}.rope.dimension_count`,
`{arch}.expert_used_count`, `{arch}.expert_shared_count`, `{arch}.context_length`, and for recurrent layers
`{arch}.ssm.conv_kernel`, `.inner_size`, `.state_size`, `.time_step_rank`, `.group_count`).

Which layers use the sliding window: the per-layer `{arch}.attention.sliding_window_pattern` when the file has it,
else llama.cpp's fixed pattern for the architecture (src/llama-model.cpp `hparams.set_swa_pattern(n)`: layer il
slides when il % n < n - 1): gemma2 2, gemma3 6, gpt-oss 2, cohere2 4.
"""

from __future__ import annotations

import re
from collections import defaultdict

from llmsize.importer.exact import ExactWeights
from llmsize.importer.gguf_file import GgufError, GgufFile

SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "gpt-oss": 2, "cohere2": 4}
# llama.cpp's gemma3n: hparams.n_layer_kv_from_start = 20, hard-coded (its GGUFs carry no shared_kv_layers key)
GEMMA3N_KV_LAYERS = 20
# ssm_* tensors holding a gated delta-net, not Mamba-2 (gguf-py constants.py MODEL_TENSORS: QWEN3NEXT, QWEN35,
# QWEN35MOE); their current layout fuses its input in attn_qkv + attn_gate (+ ssm_beta, ssm_alpha), with no ssm_in
LINEAR_ATTENTION_ARCHS = ("qwen3next", "qwen35", "qwen35moe")
MAMBA1_ARCHS = ("mamba", "jamba", "falcon-mamba")
MAX_LAYERS = 4096  # a model GGUF's block_count; beyond it the header is damaged (the largest models have ~200)
LAYER = re.compile(r"^blk\.(\d+)\.(.+)$")
COMPONENTS = [  # GGUF tensor name (without blk.N.) -> llmsize component; first match wins
    ("router", re.compile(r"^ffn_gate_inp|^exp_probs_b|^ffn_gate_inp_shexp|^ffn_gate_tid2eid")),
    ("shared_experts", re.compile(r"_shexp\.")),
    ("experts", re.compile(r"_exps\.")),
    ("norms", re.compile(r"norm")),
    ("ssm", re.compile(r"^ssm_|^shortconv\.")),
    ("attention", re.compile(r"^attn_|^indexer")),
    ("other", re.compile(r"^hc_")),  # DeepSeek-V4's hyper-connections (params.hyper_connection_params)
    ("mlp", re.compile(r"^ffn_")),
]


def component(name: str, n_layer: int, kda: frozenset[int] = frozenset()) -> str:
    """`kda`: the layers holding Kimi Delta Attention, whose attn_q/k/v/output are the recurrent mixer's (ssm), not
    attention."""
    m = LAYER.match(name)
    if m and int(m.group(1)) in kda and m.group(2).startswith("attn_") and "norm" not in m.group(2):
        return "ssm"
    return _component(name, n_layer)


def _component(name: str, n_layer: int) -> str:
    if name == "token_embd.weight":
        return "embedding"
    if name == "per_layer_token_embd.weight":
        return "per_layer_embedding"
    if name == "output.weight":
        return "lm_head"
    m = LAYER.match(name)
    if not m:
        return "norms" if "norm" in name else "other"
    if int(m.group(1)) >= n_layer:  # DeepSeek's MTP layers sit past block_count
        return "extra"
    for comp, rx in COMPONENTS:
        if rx.search(m.group(2)):
            return comp
    return "other"


SCALAR_KEYS = ("block_count", "embedding_length", "context_length", "expert_used_count")  # never per layer


def _int(g: GgufFile, key: str, layer: int | None = None, required: bool = True, low: int = 0,
         high: int = 2**40) -> int | None:
    v = g.get(key)
    if isinstance(v, list) and key in SCALAR_KEYS:  # llama.cpp reads these with get_key, one value, not an array
        raise GgufError(f"{g.files[0]}: metadata `{g.arch}.{key}` is an array of {len(v):,}; llama.cpp reads one "
                        "integer there and refuses the file.", "The file's metadata is damaged: convert it again "
                        "with llama.cpp's tools.")
    if isinstance(v, list):
        if layer is None or not v:
            v = v[0] if v else None
        else:
            v = v[layer] if layer < len(v) else None
    if v is None:
        if required:
            raise GgufError(f"{g.files[0]}: metadata key `{g.arch}.{key}` is missing.",
                            "The file's metadata is incomplete: convert it again with llama.cpp's tools.")
        return None
    # an integer type only: llama.cpp reads these keys as integers and refuses a file that stores them otherwise
    # (llama-model-loader's get_key: "key ... has wrong type")
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        typed = "" if isinstance(v, int) and not isinstance(v, bool) else \
            f" (stored as {type(v).__name__}: llama.cpp reads it as an integer and refuses the file)"
        raise GgufError(f"{g.files[0]}: metadata `{g.arch}.{key}` is {str(v)[:40]!r}, not a whole count from {low} "
                        f"to {high:,}{typed}.", "The file's metadata is damaged: convert it again with llama.cpp's "
                        "tools.")
    return int(v)


def _sliding(g: GgufFile, n_layer: int) -> list[bool]:
    window = g.get("attention.sliding_window")
    if not window:
        return [False] * n_layer
    pat = g.get("attention.sliding_window_pattern")
    if isinstance(pat, list) and len(pat) == n_layer:
        return [bool(x) for x in pat]
    n = SWA_PATTERN.get(g.arch)
    if n is None:
        return [True] * n_layer  # a window and no pattern: llama.cpp applies it to every layer
    return [il % n < n - 1 for il in range(n_layer)]


def _ssm(g: GgufFile, il: int, t: dict[str, tuple[int, ...]]) -> dict:
    """A recurrent layer from llama.cpp's `{arch}.ssm.*` keys (gguf-py Keys.SSM: conv_kernel, inner_size,
    state_size, time_step_rank, group_count). Qwen3-Next's gated delta-net: key heads = group_count of
    state_size, value heads = time_step_rank of inner_size / time_step_rank. Mamba2 (mamba2, nemotron_h,
    granitehybrid, falcon-h1): heads = time_step_rank of inner_size / heads, state_size, group_count groups.
    llama.cpp keeps the recurrent state in F32. Mamba (v1) has no head structure llmsize models."""
    if g.arch in MAMBA1_ARCHS:
        raise GgufError(f"{g.files[0]}: layer {il} is a Mamba-1 layer ({g.arch}); llmsize models Mamba-2 and "
                        "gated delta-net layers only.", "Plan the model's catalog entry if it has one.")
    conv = _int(g, "ssm.conv_kernel", low=1, high=1024)
    d_state = _int(g, "ssm.state_size", low=1, high=2**16)
    heads = _int(g, "ssm.time_step_rank", low=1, high=2**16)
    d_inner = _int(g, "ssm.inner_size", low=1, high=2**24)
    groups = _int(g, "ssm.group_count", required=False, low=1, high=2**16) or 1
    if d_inner % heads:
        raise GgufError(f"{g.files[0]}: {g.arch}.ssm.inner_size {d_inner} is not a multiple of its "
                        f"ssm.time_step_rank {heads}.", "The file's metadata is damaged.")
    if g.arch in LINEAR_ATTENTION_ARCHS:
        return {"kind": "linear", "num_key_heads": groups, "num_value_heads": heads, "key_head_dim": d_state,
                "value_head_dim": d_inner // heads, "conv_kernel": conv}
    return {"kind": "ssm", "num_heads": heads, "head_dim": d_inner // heads, "state_size": d_state,
            "n_groups": groups, "conv_kernel": conv, "conv_bias": "ssm_conv1d.bias" in t, "state_dtype": "fp32"}


def _short_conv(g: GgufFile, il: int, t: dict[str, tuple[int, ...]], hidden: int) -> dict:
    """LFM2's short conv from its tensors as llama.cpp creates them (src/llama-model.cpp, LLM_ARCH_LFM2):
    shortconv.in_proj {n_embd, 3 x channels}, shortconv.conv {L_cache, channels}, shortconv.out_proj {channels,
    n_embd}; `{arch}.shortconv.l_cache`, where the file has it, must be the conv's taps."""
    inp, conv, out = (t.get(f"shortconv.{n}.weight") for n in ("in_proj", "conv", "out_proj"))
    dim = inp[1] // 3 if inp is not None and len(inp) == 2 else None
    if (dim is None or inp[0] != hidden or inp[1] % 3 or conv is None or len(conv) != 2 or conv[1] != dim
            or out is None or tuple(out) != (dim, hidden)):
        shapes = ", ".join(f"shortconv.{n} {list(s) if s is not None else 'missing'}"
                           for n, s in (("in_proj", inp), ("conv", conv), ("out_proj", out)))
        raise GgufError(f"{g.files[0]}: layer {il}'s short conv has {shapes}: not {{{hidden}, 3 x channels}}, "
                        f"{{taps, channels}} and {{channels, {hidden}}}.", "The file is damaged: convert it again "
                        "with llama.cpp's tools.")
    taps = conv[0]
    given = _int(g, "shortconv.l_cache", required=False, low=1, high=1024)
    if given is not None and given != taps or not 2 <= taps <= 1024:
        said = f"where {g.arch}.shortconv.l_cache says {given}" if given is not None else "not 2 to 1,024"
        raise GgufError(f"{g.files[0]}: layer {il}'s shortconv.conv has {taps} taps, {said}.",
                        "The file is damaged: convert it again with llama.cpp's tools.")
    return {"kind": "conv", "conv_dim": dim, "conv_kernel": taps, "bias": "shortconv.in_proj.bias" in t}


def _kda(g: GgufFile, il: int, t: dict[str, tuple[int, ...]]) -> dict:
    """A Kimi Delta Attention layer (kimi-linear; gguf-py constants.py MODEL_TENSORS[KIMI_LINEAR]) from its tensors:
    heads = ssm_beta's rows (one beta a head), the heads' width = attn_k's rows / heads (or `{arch}.kda.head_dim`),
    the gates' rank = ssm_f_a's rows, the conv kernel = `{arch}.ssm.conv_kernel` or ssm_conv1d_q's shortest side."""
    need = ("attn_k.weight", "attn_v.weight", "ssm_beta.weight", "ssm_conv1d_q.weight", "ssm_conv1d_k.weight",
            "ssm_conv1d_v.weight")
    missing = [n for n in need if n not in t or not 1 <= len(t[n]) <= 3]
    if missing or len(t["ssm_f_a.weight"]) != 2:
        raise GgufError(f"{g.files[0]}: layer {il} holds ssm_f_a (a Kimi Delta Attention layer) without "
                        f"{', '.join(missing) or 'a two-dimensional ssm_f_a'}.", "The file is damaged: convert it "
                        "again with llama.cpp's tools.")
    heads, key_dim, value_dim = t["ssm_beta.weight"][-1], t["attn_k.weight"][-1], t["attn_v.weight"][-1]
    hd = _int(g, "kda.head_dim", required=False, low=1, high=2**16) or key_dim // max(heads, 1)
    if heads * hd != key_dim or heads * hd != value_dim:
        raise GgufError(f"{g.files[0]}: layer {il}'s attn_k ({key_dim:,} rows) and attn_v ({value_dim:,}) are not "
                        f"its {heads} heads (ssm_beta) x {hd}.", "The file is damaged: convert it again with "
                        "llama.cpp's tools.")
    convs = [t[f"ssm_conv1d_{x}.weight"] for x in "qkv"]
    conv = convs[0][0]
    given = _int(g, "ssm.conv_kernel", required=False, low=1, high=1024)
    if any(s[0] != conv or s[-1] != key_dim for s in convs) or not 2 <= conv <= 1024 or given not in (None, conv):
        raise GgufError(f"{g.files[0]}: layer {il}'s ssm_conv1d_q/k/v are {[list(s) for s in convs]} where a conv of "
                        f"{given or 'its'} taps over its {key_dim:,} channels was expected.", "The file is damaged: "
                        "convert it again with llama.cpp's tools.")
    return {"kind": "linear", "num_key_heads": heads, "num_value_heads": heads, "key_head_dim": hd,
            "value_head_dim": hd, "conv_kernel": conv, "state_dtype": "fp32", "variant": "kda",
            "gate_rank": t["ssm_f_a.weight"][1]}


def _compressed(g: GgufFile, il: int, t: dict[str, tuple[int, ...]], heads: int) -> dict:
    """A DeepSeek-V4 layer (deepseek4; src/llama-model.cpp's LLM_ARCH_DEEPSEEK4 tensors, gguf-py MODEL_TENSORS): the
    KV head's width from attn_kv, the q rank from attn_q_a, the output groups and their rank from
    `{arch}.attention.output_group_count` and attn_output_b, the window from `.attention.sliding_window`, the layer's
    ratio from `.attention.compress_ratios` (0: the window alone), the compressor's overlap from its width (twice the
    head's), an indexer's heads and key width from indexer.proj and indexer_compressor_norm and its top-k from
    `.attention.indexer.top_k`."""
    hd = t["attn_kv.weight"][1]
    groups = _int(g, "attention.output_group_count", low=1, high=2**16)
    low = t["attn_output_b.weight"][0]
    ratios = g.get("attention.compress_ratios")
    if isinstance(ratios, list) and len(ratios) <= il:
        raise GgufError(f"{g.files[0]}: metadata `{g.arch}.attention.compress_ratios` has {len(ratios)} entries for "
                        f"{_int(g, 'block_count')} layers.", "The file's metadata is damaged: convert it again with "
                        "llama.cpp's tools.")
    ratio = _int(g, "attention.compress_ratios", il, low=0, high=2**20)
    kv_heads = _int(g, "attention.head_count_kv", il, required=False)
    if kv_heads not in (None, 1):
        raise GgufError(f"{g.files[0]}: layer {il} is a DeepSeek-V4 layer (attn_kv, attn_output_b) with "
                        f"{g.arch}.attention.head_count_kv {kv_heads}: its attention caches one KV head.",
                        "The file's metadata is damaged: convert it again with llama.cpp's tools.")
    if heads % groups or low % groups or ratio == 1:
        raise GgufError(f"{g.files[0]}: layer {il}: {heads} heads, {groups} output groups (output_group_count), "
                        f"attn_output_b of {low} rows and compress ratio {ratio} do not make a DeepSeek-V4 layer.",
                        "The file's metadata is damaged: convert it again with llama.cpp's tools.")
    mixer = {"kind": "compressed", "num_attention_heads": heads, "head_dim": hd,
             "qk_rope_head_dim": _int(g, "rope.dimension_count", low=1, high=hd),
             "q_lora_rank": t["attn_q_a.weight"][1],
             "o_groups": groups, "o_lora_rank": low // groups,
             "sliding_window": _int(g, "attention.sliding_window", low=1, high=2**31 - 1)}
    if ratio:
        kv, ape = t.get("attn_compressor_kv.weight"), t.get("attn_compressor_ape.weight")
        if kv is None or len(kv) != 2 or kv[1] not in (hd, 2 * hd) or ape is None or tuple(ape) != (kv[1], ratio):
            raise GgufError(f"{g.files[0]}: layer {il} has compress ratio {ratio} and attn_compressor_kv "
                            f"{list(kv) if kv else 'missing'}, attn_compressor_ape {list(ape) if ape else 'missing'}: "
                            f"not {hd} or {2 * hd} rows, and an ape of those rows by {ratio}.",
                            "The file is damaged: convert it again with llama.cpp's tools.")
        mixer.update(compress_ratio=ratio, compress_overlap=kv[1] == 2 * hd)
    if any(n.startswith("indexer") for n in t):
        norm = t.get("indexer_compressor_norm.weight")
        if not ratio or norm is None or len(t.get("indexer.proj.weight", ())) != 2:
            raise GgufError(f"{g.files[0]}: layer {il} holds an indexer without a compress ratio or its compressor.",
                            "The file is damaged: convert it again with llama.cpp's tools.")
        mixer["indexer"] = {"n_heads": t["indexer.proj.weight"][1], "head_dim": norm[0],
                            "topk": _int(g, "attention.indexer.top_k", low=1, high=2**31 - 1)}
    return mixer


# the layer's matrices whose second dimension (rows) sizes what a plan costs: a damaged file can store one flat
MATRICES = ("attn_kv_a_mqa.weight", "attn_q_a.weight", "attn_kv.weight", "attn_output_b.weight", "attn_k.weight",
            "attn_q.weight", "ffn_up_shexp.weight", "ffn_up.weight")


def _layer(g: GgufFile, il: int, t: dict[str, tuple[int, ...]], hidden: int, swa: bool) -> dict:
    flat = next((n for n in MATRICES if n in t and len(t[n]) < 2), None)
    if flat is not None:
        raise GgufError(f"{g.files[0]}: layer {il}'s {flat} has shape {list(t[flat])}, not a matrix's two "
                        "dimensions.", "The file is damaged: download it again, or convert it again with llama.cpp's "
                        "tools.")
    spec: dict = {}
    norms = sum(1 for n, s in t.items() if "norm" in n and len(s) == 1 and s[0] == hidden
                and not (n == "post_norm.weight" and "inp_gate.weight" in t)  # the per-layer input's own norm
                and not n.startswith(("altup_", "laurel_")))  # Gemma 3n's AltUp and LAuReL norms
    spec["norms"] = norms
    heads = None
    # a recurrent layer (Mamba-2, a gated delta-net) has a conv state; a gated delta-net's attn_qkv is its input, not
    # attention (a Falcon-H1 layer holds attention beside its Mamba: its attn_q says so)
    recurrent = "ssm_in.weight" in t or "ssm_conv1d.weight" in t
    kda = "ssm_f_a.weight" in t  # Kimi Delta Attention: its q/k/v projections are attn_q/k/v, not attention
    if any(n.startswith("shortconv.") for n in t):  # LFM2's gated short conv (gguf-py MODEL_TENSORS[LFM2])
        spec["mixer"] = _short_conv(g, il, t, hidden)
    if any(n.startswith(("attn_q", "attn_kv_a_mqa")) for n in t) and not kda:
        heads = _int(g, "attention.head_count", il, low=1)
    if "mixer" in spec:
        pass
    elif kda:
        spec["mixer"] = _kda(g, il, t)
    elif "attn_kv.weight" in t and "attn_output_b.weight" in t and "attn_q_a.weight" in t:  # DeepSeek-V4
        spec["mixer"] = _compressed(g, il, t, heads)
    elif "attn_kv_a_mqa.weight" in t:  # MLA
        rope = _int(g, "rope.dimension_count")
        kv_rank = _int(g, "attention.kv_lora_rank", required=False) or t["attn_kv_a_mqa.weight"][1] - rope
        # llama.cpp's MLA layout (PR #12801: attn_k_b / attn_v_b) keeps the latent's widths in key_length (kv_lora_rank
        # + rope) and value_length (kv_lora_rank), a head's in key_length_mla and value_length_mla
        key_len = _int(g, "attention.key_length_mla", required=False) or _int(g, "attention.key_length")
        v_len = _int(g, "attention.value_length_mla", required=False) or _int(g, "attention.value_length")
        mixer = {"kind": "mla", "num_attention_heads": heads, "kv_lora_rank": kv_rank,
                 "qk_nope_head_dim": key_len - rope, "qk_rope_head_dim": rope, "v_head_dim": v_len}
        if "attn_q_a.weight" in t:
            mixer["q_lora_rank"] = t["attn_q_a.weight"][1]
        spec["mixer"] = mixer
    elif "attn_q.weight" in t or ("attn_qkv.weight" in t and not recurrent):
        kv_given = _int(g, "attention.head_count_kv", il, required=False)
        kv = kv_given or heads  # none given: as many as the query heads (0 is a layer without attention)
        given = ((_int(g, "attention.key_length_swa", required=False, low=1) if swa else None)  # Gemma's sliding
                 or _int(g, "attention.key_length", required=False, low=1))
        hd = given or hidden // heads
        if not hd:
            raise GgufError(f"{g.files[0]}: {g.arch}.embedding_length {hidden} is smaller than its {heads} heads.",
                            "The file's metadata is damaged.")
        if "attn_k.weight" in t and t["attn_k.weight"][1] != kv * hd:  # the cache's width is the tensor's
            width = (f"key_length {hd}" if given else
                     f"a head's width {hd} (embedding_length {hidden} / head_count {heads}: no key_length)")
            heads_kv = (f"{g.arch}.attention.head_count_kv {kv_given}" if kv_given is not None else
                        f"{g.arch}.attention.head_count {heads} (no head_count_kv)")
            raise GgufError(f"{g.files[0]}: layer {il}'s attn_k.weight has {t['attn_k.weight'][1]:,} rows, not "
                            f"{heads_kv} x {width}.", "The file's metadata is damaged (llama.cpp refuses it too).")
        mixer = {"kind": "sliding" if swa else "full", "num_attention_heads": heads, "num_key_value_heads": kv,
                 "head_dim": hd}
        if swa:
            mixer["sliding_window"] = _int(g, "attention.sliding_window")
        if "attn_q.weight" in t and t["attn_q.weight"][1] == 2 * heads * hd:
            mixer["output_gate"] = True
        if "attn_q.weight" in t and "attn_v.weight" not in t:
            mixer["k_eq_v"] = True
        if "attn_q_norm.weight" in t:
            mixer["qk_norm"] = True
        if "attn_q.bias" in t or "attn_qkv.bias" in t:
            mixer["bias"] = "all" if "attn_output.bias" in t else "qkv"
        if "attn_sinks.weight" in t or "attn_sinks" in t:
            mixer["sinks"] = True
        spec["mixer"] = mixer
    elif recurrent:
        spec["mixer"] = _ssm(g, il, t)
    if "ffn_up_exps.weight" in t:
        ne0, inter, experts = (t["ffn_up_exps.weight"] + (1, 1))[:3]
        used = _int(g, "expert_used_count", low=1)
        if used > experts:
            raise GgufError(f"{g.files[0]}: metadata `{g.arch}.expert_used_count` {used} is more than layer {il}'s "
                            f"{experts} experts (ffn_up_exps).", "The file's metadata is damaged: convert it again "
                            "with llama.cpp's tools.")
        moe = {"kind": "moe", "num_experts": experts, "experts_per_token": used,
               "moe_intermediate_size": inter, "gated": "ffn_gate_exps.weight" in t}
        if "ffn_latent_down.weight" in t:  # LatentMoE (Nemotron 3 Super, Ultra): experts at the latent's width
            moe["latent_size"] = ne0
        if "ffn_up_shexp.weight" in t:
            n_sh = _int(g, "expert_shared_count", required=False) or 1
            moe["num_shared_experts"] = n_sh
            if t["ffn_up_shexp.weight"][1] // n_sh != inter:
                moe["shared_intermediate_size"] = t["ffn_up_shexp.weight"][1] // n_sh
        if "exp_probs_b.bias" in t or "ffn_gate_inp.bias" in t:
            moe["router_bias"] = True
        if "ffn_up_exps.bias" in t:
            moe["bias"] = True
        spec["mlp"] = moe
    elif "ffn_up.weight" in t:
        inter = t["ffn_up.weight"][1]
        gated = "ffn_gate.weight" in t
        if not gated and "ffn_down.weight" in t and t["ffn_down.weight"][0] * 2 == inter:
            inter, gated = inter // 2, True  # Phi-3 stores gate and up in one ffn_up
        spec["mlp"] = {"kind": "dense", "intermediate_size": inter, "gated": gated}
        if "ffn_up.bias" in t:
            spec["mlp"]["bias"] = True
    return spec


def model_fields(g: GgufFile) -> tuple[dict, list[str]]:
    """ModelSpec fields (vocab, hidden, layer groups, ...) from the file, and notes."""
    from llmsize.importer.config_fields import layer_stack_fields

    if not g.arch:
        raise GgufError(f"{g.files[0]}: no general.architecture in the metadata.", "The file is not a model GGUF.")
    if g.arch == "clip" or g.get("general.type") == "mmproj":
        raise GgufError(f"{g.files[0]}: a multimodal projector (mmproj, architecture {g.arch}), not a language model.",
                        "Plan the model's own GGUF file (llama.cpp loads the projector beside it with --mmproj).")
    n_layer = _int(g, "block_count", low=1, high=MAX_LAYERS)
    hidden = _int(g, "embedding_length", low=1, high=2**20)
    emb = g.tensors.get("token_embd.weight")
    if emb is None or len(emb.shape) != 2:
        raise GgufError(f"{g.files[0]}: no 2-D token_embd.weight tensor.", "The file is not a complete model GGUF.")
    by_layer: dict[int, dict[str, tuple[int, ...]]] = defaultdict(dict)
    for name, t in g.tensors.items():
        m = LAYER.match(name)
        if m and int(m.group(1)) < n_layer:
            by_layer[int(m.group(1))][m.group(2)] = t.shape
    swa = _sliding(g, n_layer)
    specs = [_layer(g, il, by_layer.get(il, {}), hidden, swa[il]) for il in range(n_layer)]
    # Gemma 4 E models: the last `attention.shared_kv_layers` layers read an earlier layer's cache (llama.cpp
    # n_layer_kv_from_start = n_layer - shared_kv_layers)
    shared = _int(g, "attention.shared_kv_layers", required=False, high=n_layer) or (
        max(0, n_layer - GEMMA3N_KV_LAYERS) if g.arch == "gemma3n" else 0)
    for s in specs[n_layer - shared:] if shared < n_layer else []:
        if s.get("mixer", {}).get("kind") in ("full", "sliding"):
            s["mixer"]["kv_shared"] = True
            s["mixer"].pop("k_eq_v", None)  # a file made without the shared layers' unused k/v is not K = V
    for s in specs:
        if s.get("norms") == 2:
            s.pop("norms")  # the schema's default
    notes = []
    if not all(("mixer" in s or "mlp" in s) for s in specs):
        empty = next(i for i, s in enumerate(specs) if "mixer" not in s and "mlp" not in s)
        raise GgufError(f"{g.files[0]}: layer {empty} holds no attention or MLP tensor llmsize knows "
                        f"(architecture {g.arch}).", "Plan the model's Hugging Face folder or its catalog entry.")
    extra_layers = sorted({int(m.group(1)) for n in g.tensors if (m := LAYER.match(n)) and int(m.group(1)) >= n_layer})
    if len(extra_layers) > (_int(g, "nextn_predict_layers", required=False, high=MAX_LAYERS) or 0):
        # more than its multi-token-prediction layers: the header and the tensors disagree (llama.cpp's loader
        # refuses such a file, "wrong number of tensors"); planned, it would read a fraction of the weights
        raise GgufError(f"{g.files[0]}: tensors of {len(extra_layers)} layer(s) past its block_count ({n_layer}), "
                        "which the header does not declare as multi-token-prediction layers "
                        f"({g.arch}.nextn_predict_layers).", "The file is damaged: convert or download it again.")
    if extra_layers:
        notes.append(f"{len(extra_layers)} layer(s) past block_count (multi-token prediction): stored, not read by "
                     "plain decoding")
    if any(s.get("mixer", {}).get("kind") == "mla" for s in specs) and g.get("attention.key_length_mla") is None:
        notes.append("MLA in the file's older layout (attn_kv_b, no key_length_mla): llama.cpp caches each head's "
                     "K and V for it, not the latent the plan and the ledger size; convert it again (llama.cpp PR "
                     "#12801's attn_k_b / attn_v_b) for the latent cache")
    tied = "output.weight" not in g.tensors
    ple = g.tensors.get("per_layer_token_embd.weight")
    per_layer = {}
    if ple is not None:
        if len(ple.shape) != 2 or ple.shape[0] % n_layer:
            raise GgufError(f"{g.files[0]}: per_layer_token_embd.weight {list(ple.shape)} is not a table of "
                            f"{n_layer} layers' vectors per token.", "The file's metadata is damaged.")
        per_layer = {"per_layer_input": {"hidden_size": ple.shape[0] // n_layer, "vocab_size": ple.shape[1]}}
    altup, laurel = g.tensors.get("altup_proj.weight"), g.tensors.get("blk.0.laurel_l.weight")
    if altup is not None:  # {n_embd, n_embd, n_altup - 1}
        per_layer["altup"] = {"num_inputs": (altup.shape[2] if len(altup.shape) > 2 else 1) + 1}
    if laurel is not None and len(laurel.shape) == 2:  # {n_embd, laurel_rank}
        per_layer["laurel_rank"] = laurel.shape[1]
    base = g.tensors.get("blk.0.hc_attn_base.weight")
    streams = _int(g, "hyper_connection.count", required=base is not None, low=2, high=64)
    if streams:  # DeepSeek-V4's hyper-connections (their tensors hc_*: params.hyper_connection_params)
        if base is None or tuple(base.shape) != (2 * streams + streams * streams,):
            raise GgufError(f"{g.files[0]}: {g.arch}.hyper_connection.count {streams} and blk.0.hc_attn_base "
                            f"{list(base.shape) if base is not None else 'missing'}: not its 2n + n^2 = "
                            f"{2 * streams + streams * streams} mixing weights.", "The file is damaged: convert it "
                            "again with llama.cpp's tools.")
        per_layer["hyper_connections"] = streams
    fields = {"vocab_size": emb.shape[1], "hidden_size": hidden, "tie_word_embeddings": tied,
              "max_position_embeddings": _int(g, "context_length", low=1, high=2**31 - 1), **layer_stack_fields(specs),
              "final_norms": 1 if "output_norm.weight" in g.tensors else 0, **per_layer}
    return fields, notes


def exact_from_gguf(g: GgufFile, n_layer: int, tied: bool, experts_share,
                    shared: set[int] | frozenset[int] = frozenset()) -> ExactWeights:
    """The file's bytes and parameters by component; `shared`: the layers that read an earlier layer's cache, whose
    k/v tensors (kept where the checkpoint had them) are stored and never read."""
    from llmsize.estimate.params import unused_kv_weight

    unused: dict[str, int] = defaultdict(int)
    by_comp: dict[str, int] = defaultdict(int)
    by_type: dict[str, int] = defaultdict(int)
    params: dict[str, int] = defaultdict(int)
    q_bytes = q_elements = 0
    kda = frozenset(int(m.group(1)) for m in map(LAYER.match, g.tensors) if m and m.group(2) == "ssm_f_a.weight")
    for name, t in g.tensors.items():
        c = component(name, n_layer, kda)
        by_comp[c] += t.nbytes
        by_type[t.ggml_type.upper()] += t.nbytes
        params[c] += t.numel
        if unused_kv_weight(name, shared):
            unused[c] += t.nbytes
        if t.ggml_type.lower() not in ("f32", "f16", "bf16", "f64"):  # as weights.py's mix counts them
            q_bytes, q_elements = q_bytes + t.nbytes, q_elements + t.numel
    notes = []
    other = sorted(n for n in g.tensors if component(n, n_layer, kda) == "other" and "hc_" not in n)
    if other:  # DeepSeek-V4's hyper-connections (hc_*, output_hc_*) are known, counted as `other`
        notes.append(f"{len(other)} tensor(s) of no known component (e.g. {other[0][:60]}), counted as read per token")
    top = sorted(by_type.items(), key=lambda kv: -kv[1])
    return ExactWeights([str(p) for p in g.files], dict(by_comp), dict(by_type), dict(params),
                        [k.lower() for k, _ in top], tied, experts_share, notes, source="GGUF tensor infos",
                        tensors=tuple((name, t.nbytes) for name, t in g.tensors.items()),
                        quantized_bits=8 * q_bytes / q_elements if q_elements else None, unused_bytes=dict(unused))
