"""Parameter counts by component, from the layer groups.

Every tensor of the model becomes a Piece: which component it belongs to, how many parameters, whether
it is a 2-D matrix (which a weight format may quantize) or a vector (norm weights, biases, SSM constants),
and whether it is a routed expert (read per token only when routed to).
Shapes follow the Hugging Face implementations named in each function.
"""

from __future__ import annotations

import re
import weakref
from collections import defaultdict
from dataclasses import dataclass, replace

from llmsize.catalog.schema import (
    AttentionBase,
    CompressedAttention,
    DenseMlp,
    LayerGroup,
    LinearAttention,
    Mamba2Mixer,
    MlaAttention,
    ModelSpec,
    MoeMlp,
    ShortConvMixer,
)

COMPONENTS = (
    "embedding", "per_layer_embedding", "lm_head", "attention", "mlp", "experts", "shared_experts", "router", "ssm",
    "norms", "extra", "other",
)
# tables a token gathers one row of, never multiplies: the input embedding and Gemma 4 E models' per-layer one
GATHERED = ("embedding", "per_layer_embedding")


@dataclass(frozen=True)
class Piece:
    component: str
    params: int  # summed over the group's layers
    matrix: bool  # a 2-D weight a format may quantize
    tensors: int = 1  # how many tensors (per-tensor scales)
    routed: tuple[int, int] | None = None  # (top-k, experts) for routed expert weights
    stored: bool = True  # False for a tied lm_head: read per token, stored once as the embedding
    read: bool = True  # False for the embedding table (one row gathered) and extras (vision tower)
    # a part finer than the component that a recipe may name (catalog/recipe.py): "attention_out", the attention
    # output projection, which nvidia's DeepSeek NVFP4 exports quantize where they keep the rest of attention in BF16
    part: str | None = None


def attention_vectors(m: AttentionBase, hidden: int) -> int:
    """An attention layer's 1-D parameters: q/k/v (and output) biases, one sink per head."""
    q_out = m.num_attention_heads * m.head_dim * (2 if m.output_gate else 1)
    kv_out = m.num_key_value_heads * m.head_dim
    vectors = 0
    if m.bias in ("qkv", "all"):
        vectors += q_out + kv_out + (0 if m.k_eq_v else kv_out)
    if m.bias == "all":
        vectors += hidden
    if m.sinks:
        vectors += m.num_attention_heads
    return vectors


def _attention(m: AttentionBase, hidden: int) -> list[Piece]:
    # transformers LlamaAttention / Gemma4 / GptOss / Qwen3Next: q, k, v, o projections. A layer sharing an
    # earlier layer's cache keeps its k/v projections and k norm in Google's Gemma 4 E releases (all 35 of E2B's
    # layers in its safetensors header), and llama.cpp and vLLM before PR #54917 load them, unused: stored, not read.
    q_out = m.num_attention_heads * m.head_dim * (2 if m.output_gate else 1)
    kv_out = m.num_key_value_heads * m.head_dim
    o_in = m.num_attention_heads * m.head_dim
    kv_mats = hidden * kv_out * (1 if m.k_eq_v else 2)
    n_kv = 1 if m.k_eq_v else 2
    vectors = attention_vectors(m, hidden)
    if m.kv_shared:
        pieces = [Piece("attention", hidden * q_out, True, 1), Piece("attention", kv_mats, True, n_kv, read=False)]
    else:
        pieces = [Piece("attention", hidden * q_out + kv_mats, True, 1 + n_kv)]
    pieces.append(Piece("attention", o_in * hidden, True, 1, part="attention_out"))
    if vectors:
        pieces.append(Piece("attention", vectors, False, 0))
    if m.qk_norm:
        pieces.append(Piece("norms", m.head_dim, False, 0))
        pieces.append(Piece("norms", m.head_dim, False, 0, read=not m.kv_shared))
    return pieces


def _mla(m: MlaAttention, hidden: int) -> list[Piece]:
    # DeepseekV2Attention / DeepseekV3Attention (modeling_deepseek.py).
    qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
    q_out = m.num_attention_heads * qk_head
    if m.q_lora_rank:
        q = hidden * m.q_lora_rank + m.q_lora_rank * q_out  # q_a_proj, q_b_proj
        norms = m.q_lora_rank  # q_a_layernorm
        n = 2
    else:
        q, norms, n = hidden * q_out, 0, 1
    kv_a = hidden * (m.kv_lora_rank + m.qk_rope_head_dim)  # kv_a_proj_with_mqa
    kv_b = m.kv_lora_rank * m.num_attention_heads * (m.qk_nope_head_dim + m.v_head_dim)
    o = m.num_attention_heads * m.v_head_dim * hidden
    if m.output_gate:  # Kimi K3's g_proj (models/kimi_k3 in vLLM 0.34 and SGLang 0.5.23): hidden -> heads x v
        q, n = q + hidden * m.num_attention_heads * m.v_head_dim, n + 1
    pieces = [
        Piece("attention", q + kv_a + kv_b, True, n + 2),
        Piece("attention", o, True, 1, part="attention_out"),
        Piece("norms", norms + m.kv_lora_rank, False, 0),  # + kv_a_layernorm
    ]
    ix = m.indexer
    if ix is not None and not ix.shared:  # DeepSeek-V3.2's Indexer (inference/model.py): wq_b from the query
        # latent, wk and weights_proj from the hidden state, k_norm a LayerNorm (weight and bias); none in a layer
        # that reuses another's top-k
        q_in = m.q_lora_rank or hidden
        pieces += [Piece("attention", q_in * ix.n_heads * ix.head_dim + hidden * ix.head_dim + hidden * ix.n_heads,
                         True, 3),
                   Piece("norms", 2 * ix.head_dim, False, 0)]
    return pieces


def _compressed(m: CompressedAttention, hidden: int) -> list[Piece]:
    # DeepSeek-V4's attention (schema.CompressedAttention; tensors as antirez/ds4 ds4.c weights_validate_layout
    # checks them @8d57664): wq_a [hidden -> q_lora], wq_b [q_lora -> heads x head_dim], wkv [hidden -> head_dim];
    # wo_a [heads / groups x head_dim -> o_lora] a group and wo_b [groups x o_lora -> hidden]; q and kv norms, one
    # sink a head. A compressing layer's compressor: wkv and wgate [hidden -> w] (w = head_dim, twice it where the
    # windows overlap), ape [r x w], a norm of head_dim; its indexer's: wq_b [q_lora -> heads x head_dim],
    # weights_proj [hidden -> heads] and a compressor of its own at the indexer's head_dim. DeepSeek-V4-Flash's
    # layer of ratio 4: 126,098,624 parameters of attention, its norms included, of which the indexer's 10,749,056
    # (tests/test_deepseek_v4.py).
    q_out, o_in = m.num_attention_heads * m.head_dim, m.num_attention_heads * m.head_dim
    o_low = m.o_groups * m.o_lora_rank
    pieces = [Piece("attention", hidden * m.q_lora_rank + m.q_lora_rank * q_out + hidden * m.head_dim, True, 3),
              Piece("attention", o_in // m.o_groups * o_low + o_low * hidden, True, 2, part="attention_out"),
              Piece("attention", m.num_attention_heads, False, 0),
              Piece("norms", m.q_lora_rank + m.head_dim, False, 0)]
    r, widen = m.compress_ratio, 2 if m.compress_overlap else 1
    if r is None:
        return pieces
    pieces += [Piece("attention", 2 * hidden * widen * m.head_dim, True, 2),
               Piece("attention", r * widen * m.head_dim, False, 0),
               Piece("norms", m.head_dim, False, 0)]
    ix = m.indexer
    if ix is not None and not ix.shared:
        pieces += [Piece("attention", m.q_lora_rank * ix.n_heads * ix.head_dim + hidden * ix.n_heads
                         + 2 * hidden * widen * ix.head_dim, True, 4),
                   Piece("attention", r * widen * ix.head_dim, False, 0),
                   Piece("norms", ix.head_dim, False, 0)]
    return pieces


def _mamba2(m: Mamba2Mixer, hidden: int) -> list[Piece]:
    # transformers NemotronHMamba2Mixer: in_proj -> [z, x, B, C, dt]; depthwise conv1d over [x, B, C].
    d_inner = m.num_heads * m.head_dim
    conv_dim = d_inner + 2 * m.n_groups * m.state_size
    in_proj = hidden * (d_inner + conv_dim + m.num_heads)
    out_proj = d_inner * hidden
    small = conv_dim * m.conv_kernel + (conv_dim if m.conv_bias else 0) + 3 * m.num_heads  # dt_bias, A_log, D
    return [
        Piece("ssm", in_proj + out_proj, True, 2),
        Piece("ssm", small, False, 0),
        Piece("norms", d_inner, False, 0),  # gated RMSNorm
    ]


def _linear(m: LinearAttention, hidden: int) -> list[Piece]:
    # transformers Qwen3NextGatedDeltaNet: in_proj_qkvz, in_proj_ba, conv1d (no bias), dt_bias, A_log,
    # norm over value_head_dim, out_proj.
    key_dim = m.num_key_heads * m.key_head_dim
    value_dim = m.num_value_heads * m.value_head_dim
    conv_dim = 2 * key_dim + value_dim
    if m.variant == "kda":
        # vLLM layers/kda.py KimiDeltaAttention: q/k/v_proj, q/k/v_conv1d (depthwise, no bias), f_a_proj (hidden ->
        # gate_rank) and f_b_proj (-> key_dim, the forget gate a key channel), g_a/g_b_proj likewise (-> value_dim,
        # the output gate), b_proj (hidden -> one beta a head), A_log a head, dt_bias a key channel, o_norm over
        # value_head_dim, o_proj. Kimi-Linear-48B-A3B, hidden 2304, 32 heads of 128, rank 128: 39,514,272 a layer.
        # A full-rank output gate (Kimi K3: SGLang 0.5.23 models/kimi_k3.py KimiK3DeltaAttention) is one g_proj
        # hidden -> value_dim; f_a/f_b stay: hidden 7168, 96 heads of 128, rank 128: 443,740,384 a layer.
        r = m.gate_rank
        gates = r * (hidden + key_dim) + (hidden * value_dim if m.gate_full_rank else r * (hidden + value_dim))
        mats = hidden * conv_dim + gates + hidden * m.num_value_heads + value_dim * hidden
        return [Piece("ssm", mats, True, 8 if m.gate_full_rank else 9),
                Piece("ssm", conv_dim * m.conv_kernel + m.num_value_heads + key_dim, False, 0),
                Piece("norms", m.value_head_dim, False, 0)]
    mats = hidden * (2 * key_dim + 2 * value_dim) + hidden * 2 * m.num_value_heads + value_dim * hidden
    small = conv_dim * m.conv_kernel + 2 * m.num_value_heads
    return [
        Piece("ssm", mats, True, 3),
        Piece("ssm", small, False, 0),
        Piece("norms", m.value_head_dim, False, 0),
    ]


def _short_conv(m: ShortConvMixer, hidden: int) -> list[Piece]:
    # transformers Lfm2ShortConv: in_proj (hidden -> 3 x conv_dim), a depthwise conv of conv_kernel taps, out_proj;
    # LFM2-1.2B's 10 conv layers: 4 x 2048^2 + 3 x 2048 = 16,783,360 each
    pieces = [Piece("ssm", hidden * 3 * m.conv_dim + m.conv_dim * hidden, True, 2),
              Piece("ssm", m.conv_dim * m.conv_kernel, False, 0)]
    if m.bias:
        pieces.append(Piece("ssm", 3 * m.conv_dim + m.conv_dim + hidden, False, 0))
    return pieces


def _dense_mlp(m: DenseMlp, hidden: int) -> list[Piece]:
    n = 3 if m.gated else 2
    pieces = [Piece("mlp", n * hidden * m.intermediate_size, True, n)]
    if m.bias:
        pieces.append(Piece("mlp", (n - 1) * m.intermediate_size + hidden, False, 0))
    return pieces


def _moe(m: MoeMlp, hidden: int) -> list[Piece]:
    n = 3 if m.gated else 2
    e = m.num_experts
    route = (m.experts_per_token, e)
    width = m.latent_size or hidden  # LatentMoE's experts read and write the latent
    pieces = [Piece("experts", e * n * width * m.moe_intermediate_size, True, e * n, routed=route)]
    if m.bias:
        pieces.append(Piece("experts", e * ((n - 1) * m.moe_intermediate_size + width), False, 0, routed=route))
    if m.latent_size:  # fc1_latent_proj and fc2_latent_proj, run by every token (no bias: mlp_bias false)
        pieces.append(Piece("mlp", 2 * hidden * m.latent_size, True, 2))
        if m.latent_norm:
            pieces.append(Piece("norms", m.latent_size, False, 0))
    router = hidden * e + (e if m.router_bias else 0) + (hidden if m.shared_expert_gate else 0)
    pieces.append(Piece("router", router, False, 0))  # routers stay 16-bit in every checkpoint we know
    if m.num_shared_experts:
        inter = m.shared_intermediate_size or m.moe_intermediate_size
        pieces.append(Piece("shared_experts", m.num_shared_experts * n * hidden * inter, True, n))
    return pieces


def layer_pieces(group: LayerGroup, hidden: int) -> list[Piece]:
    """Pieces of one layer of the group."""
    pieces: list[Piece] = []
    mixer = group.mixer
    if isinstance(mixer, AttentionBase):
        pieces += _attention(mixer, hidden)
    elif isinstance(mixer, MlaAttention):
        pieces += _mla(mixer, hidden)
    elif isinstance(mixer, CompressedAttention):
        pieces += _compressed(mixer, hidden)
    elif isinstance(mixer, Mamba2Mixer):
        pieces += _mamba2(mixer, hidden)
    elif isinstance(mixer, LinearAttention):
        pieces += _linear(mixer, hidden)
    elif isinstance(mixer, ShortConvMixer):
        pieces += _short_conv(mixer, hidden)
    if isinstance(group.mlp, DenseMlp):
        pieces += _dense_mlp(group.mlp, hidden)
    elif isinstance(group.mlp, MoeMlp):
        pieces += _moe(group.mlp, hidden)
    small = group.norms * hidden + group.extra_params
    if small:
        pieces.append(Piece("norms", small, False, 0))
    return pieces


_PIECES: dict[int, tuple] = {}  # id(model) -> (a weak reference to it, its pieces): models are frozen


def model_pieces(model: ModelSpec) -> list[Piece]:
    """Every tensor of the model, layer pieces multiplied by their group's count (computed once a model: fleet and
    the fits ask for them tens of thousands of times)."""
    hit = _PIECES.get(id(model))
    if hit is not None and hit[0]() is model:
        return list(hit[1])
    pieces = _model_pieces(model)
    if len(_PIECES) > 4096:
        _PIECES.clear()
    _PIECES[id(model)] = (weakref.ref(model), tuple(pieces))
    return pieces


def _model_pieces(model: ModelSpec) -> list[Piece]:
    h = model.hidden_size
    embed = model.vocab_size * h
    pieces = [Piece("embedding", embed, True, 1, read=False)]
    # lm_head: read every decoded token; when tied it is the embedding matrix, stored once.
    pieces.append(Piece("lm_head", embed, True, 1, stored=not model.tie_word_embeddings))
    pieces += _per_layer_input(model) + _altup_laurel(model) + _hyper_connections(model)
    for g in model.layer_groups:
        for p in layer_pieces(g, h):
            pieces.append(replace(p, params=p.params * g.count, tensors=p.tensors * g.count))
    if model.final_norms:
        pieces.append(Piece("norms", model.final_norms * h, False, 0))
    for x in model.extra:
        pieces.append(Piece("extra", x.params, False, 0, stored=x.loaded, read=False))
    return pieces


def _per_layer_input(model: ModelSpec) -> list[Piece]:
    """Per-layer embeddings (schema.PerLayerInput; transformers modeling_gemma4.py Gemma4TextModel and
    Gemma4TextDecoderLayer): the table embed_tokens_per_layer [vocab, layers x width], gathered a row a token;
    per_layer_model_projection [layers x width, hidden] and per_layer_projection_norm [width] once; in each layer
    per_layer_input_gate [width, hidden], per_layer_projection [hidden, width] and post_per_layer_input_norm
    [hidden]. The projections are nn.Linear (a format may quantize them): component `other`, as the checkpoint's
    tensor names fall there."""
    ple = model.per_layer_input
    if ple is None:
        return []
    n, w, h = model.num_layers, ple.hidden_size, model.hidden_size
    return [Piece("per_layer_embedding", ple.vocab_size * n * w, True, 1, read=False),
            Piece("other", n * w * h, True, 1),
            Piece("other", n * 2 * w * h, True, 2 * n),
            Piece("norms", w + n * h, False, 0)]


def _altup_laurel(model: ModelSpec) -> list[Piece]:
    """Gemma 3n's AltUp (schema.AltUp) and LAuReL (laurel_rank) tensors, every one of them run by every token
    (transformers modeling_gemma3n.py Gemma3nAltUp, Gemma3nLaurelBlock, Gemma3nTextModel). The projections into and
    out of the streams and LAuReL's two are nn.Linear matrices a format may quantize (llama-quantize keeps them as
    converted: gguf_mix); each layer's coefficients, router and scale are counted with the vectors."""
    n_layer, h, out = model.num_layers, model.hidden_size, []
    if model.altup is not None:
        k = model.altup.num_inputs
        out += [Piece("other", 2 * (k - 1) * h * h, True, 2 * (k - 1)),  # altup_projections, _unembed_projections
                Piece("other", n_layer * (k * k + k * k * k + k * h + h), False, 0),  # coefs, router, output scale
                Piece("norms", n_layer * h, False, 0)]  # router_norm
    if model.laurel_rank:
        out += [Piece("other", n_layer * 2 * model.laurel_rank * h, True, 2 * n_layer),
                Piece("norms", n_layer * h, False, 0)]
    return out


def hyper_connection_params(streams: int, hidden: int, layers: int) -> int:
    """DeepSeek-V4's hyper-connection tensors (schema.ModelSpec.hyper_connections): each layer's two mixes (before
    attention, before the MLP), fn [streams x hidden, 2 streams + streams^2], base and a scale of 3; the head's fn
    [streams x hidden, streams], base [streams], a scale. DeepSeek-V4-Flash (4 streams, 4,096 wide, 43 layers):
    43 x 2 x (16,384 x 24 + 24 + 3) + 16,384 x 4 + 4 + 1 = 33,884,439."""
    mix = 2 * streams + streams * streams
    return layers * 2 * (streams * hidden * mix + mix + 3) + streams * hidden * streams + streams + 1


def _hyper_connections(model: ModelSpec) -> list[Piece]:
    """The hyper-connections' tensors, run by every token; small mixing weights no format quantizes (the releases
    keep them in FP32: counted with the vectors, at the format's unquantized width)."""
    if not model.hyper_connections:
        return []
    return [Piece("other", hyper_connection_params(model.hyper_connections, model.hidden_size, model.num_layers),
                  False, 0)]


def shared_cache_layers(model: ModelSpec) -> set[int]:
    """Indices of the layers that read an earlier layer's cache (schema AttentionBase.kv_shared)."""
    return {i for i, g in enumerate(model.layer_stack()) if getattr(g.mixer, "kv_shared", False)}


# a layer's k/v projections and norms (safetensors and GGUF names): unused in a layer that shares another's cache
KV_WEIGHTS = re.compile(r"(?:layers|blk)\.(\d+)\.(?:self_attn\.)?(?:k_proj|v_proj|k_norm|v_norm|attn_k|attn_v|"
                        r"attn_k_norm)\.")


def unused_kv_weight(name: str, shared: set[int]) -> bool:
    """Whether the tensor is a k/v weight of a shared-cache layer: stored (Google's Gemma 4 E checkpoints keep
    them in every layer), never read."""
    m = KV_WEIGHTS.search(name.lower()) if shared else None
    return bool(m) and int(m.group(1)) in shared


def params_by_component(model: ModelSpec) -> dict[str, int]:
    """Stored parameters per component (a tied lm_head counts zero: it is the embedding)."""
    out: dict[str, int] = defaultdict(int)
    for p in model_pieces(model):
        if p.stored:
            out[p.component] += p.params
    return {c: out.get(c, 0) for c in COMPONENTS}


def params_total(model: ModelSpec) -> int:
    """Parameters an engine loads: the decoder stack plus the extras it loads (vision towers)."""
    return sum(p.params for p in model_pieces(model) if p.stored)


def params_comparable_to_official(model: ModelSpec) -> int:
    """Our count of exactly what the official figure covers (see each entry's `extra`)."""
    decoder = sum(p.params for p in model_pieces(model) if p.stored and p.component != "extra")
    return decoder + sum(x.params for x in model.extra if x.in_official_count)


ACTIVE_DEFINITION = ("input embedding excluded, lm_head included (OpenAI, DeepSeek and NVIDIA count it so: a token "
                     "gathers one embedding row but multiplies the whole lm_head)")


def _active(model: ModelSpec, with_embedding: bool) -> int:
    active = 0.0
    for p in model_pieces(model):
        if p.component == "extra" or not (p.read or p.component in GATHERED):
            continue  # the extras, and weights stored but unused (a shared-cache layer's k/v projections)
        if p.component == "embedding" and not with_embedding and not model.tie_word_embeddings:
            continue
        if p.component == "per_layer_embedding" and not with_embedding:
            continue  # gathered like the input embedding, and never the lm_head
        if p.component == "lm_head" and not p.stored:
            continue  # tied: the one matrix is counted once, as the embedding piece
        active += p.params * routed_fraction(p, batch=1)
    return int(round(active))


def params_active(model: ModelSpec) -> int:
    """Parameters one token uses, the input embedding table excluded (ACTIVE_DEFINITION): every piece but the
    routed experts it is not sent to, the extras and what no token uses (a shared-cache layer's k/v projections,
    Gemma 4 E models' per-layer embedding table). A tied embedding is the lm_head, so it counts once.

    Vendors differ (tests/test_params_active.py holds each catalog MoE model's stated figure): OpenAI's gpt-oss
    card says "Unembedding parameters are counted towards active, but not embeddings" (3.61B / 5.13B), DeepSeek's
    corrected README_WEIGHTS gives V3 "36.6B (including 0.9B for the output Head)", NVIDIA's Nemotron 3 Nano
    report "3.2B ... (3.6B including embeddings)"; Mistral's 12.9B for Mixtral and Qwen's 3.3B for Qwen3-30B-A3B
    count the embedding too: params_active_with_embedding.
    """
    return _active(model, with_embedding=False)


def params_active_with_embedding(model: ModelSpec) -> int:
    """params_active plus the input embedding table (Mistral's and Qwen's convention); equal for a tied model."""
    return _active(model, with_embedding=True)


def routed_fraction(piece: Piece, batch: int) -> float:
    """Expected share of a piece read by one step of `batch` tokens.

    Routed experts under uniform routing: an expert is untouched by one token with probability
    1 - k/E, by B independent tokens with (1 - k/E)^B, so the share read is 1 - (1 - k/E)^B.
    Everything else: 1.
    """
    if piece.routed is None:
        return 1.0
    k, e = piece.routed
    return touched_share(k / e, batch)


def touched_share(share: float, tokens: int) -> float:
    """Expected share of a routed tensor's experts that `tokens` tokens use, each choosing top-k of E experts
    (share = k / E) under uniform routing: 1 - (1 - k/E)^tokens."""
    return 1.0 - (1.0 - share) ** tokens
