"""The tensors a GGUF conversion of a model holds, by llama.cpp's names and shapes, so a llama-quantize file
type can be costed tensor by tensor (llmsize.estimate.gguf_mix).

Names and layouts follow llama.cpp's GGUF conventions (gguf-py/gguf/constants.py MODEL_TENSOR names;
convert_hf_to_gguf.py): `ne0` is the row length (the matmul's input width), `ne1` the rows, `ne2` the experts of a
stacked expert tensor. What the converter keeps in F32 (convert_hf_to_gguf.py `prepare_tensors`: 1-D tensors,
norms, the MoE router `ffn_gate_inp`, SSM conv kernels) is marked so; every other matrix starts in 16 bits.

Layers are numbered in the order of the model's layer groups: where a model interleaves groups (Gemma's sliding
and global layers), the per-layer choices llama-quantize makes by layer index fall on other layers than in the
real file; for groups of the same shapes the total is the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import (
    AttentionBase,
    CompressedAttention,
    LinearAttention,
    Mamba2Mixer,
    MlaAttention,
    ModelSpec,
    ShortConvMixer,
)
from llmsize.estimate.params import attention_vectors


@dataclass(frozen=True)
class GgufTensor:
    name: str
    ne0: int  # row length
    ne1: int = 1
    ne2: int = 1  # experts stacked in one tensor
    component: str = "other"  # llmsize.estimate.params.COMPONENTS
    f32: bool = False  # the converter keeps it in F32; llama-quantize leaves it alone
    routed: tuple[int, int] | None = None  # (top-k, experts) for routed expert tensors
    read: bool = True  # False: loaded, never read (a shared-cache layer's k/v projections)

    @property
    def elements(self) -> int:
        return self.ne0 * self.ne1 * self.ne2


# Families whose Gated DeltaNet projections llama.cpp's converter writes apart (qwen35, qwen35moe): in_proj_qkv as
# attn_qkv, in_proj_z as attn_gate, in_proj_b and in_proj_a as ssm_beta and ssm_alpha (a Qwen3.5-4B GGUF's tensor
# list: Thireus/GGUF-Tool-Suite models/Qwen3.5-4B/group0/tensors.bf16.map @ b30e638, blk.24.attn_qkv.weight (2560,
# 8192), attn_gate (2560, 4096), ssm_alpha and ssm_beta (2560, 32)); Qwen3-Next (qwen3next) keeps them fused as
# ssm_in (q, k, v, z) and ssm_ba. The split matters to llama-quantize: attn_qkv takes attn_v's rule (gguf_mix: Q6_K
# on half the layers at Q4_K_M and Q5_K_M), ssm_in the file type's block
SPLIT_LINEAR_FAMILIES = ("qwen3_5_text", "qwen3_5_moe_text")


def _attention(i: int, m, h: int, split_linear: bool = False) -> list[GgufTensor]:
    p = f"blk.{i}."
    if isinstance(m, AttentionBase):
        q_out = m.num_attention_heads * m.head_dim * (2 if m.output_gate else 1)
        kv = m.num_key_value_heads * m.head_dim
        used = not m.kv_shared  # a shared-cache layer's k/v: converted as the checkpoint has them, never read
        out = [GgufTensor(p + "attn_q.weight", h, q_out, component="attention"),
               GgufTensor(p + "attn_k.weight", h, kv, component="attention", read=used)]
        if not m.k_eq_v:
            out.append(GgufTensor(p + "attn_v.weight", h, kv, component="attention", read=used))
        out.append(GgufTensor(p + "attn_output.weight", m.num_attention_heads * m.head_dim, h,
                              component="attention"))
        vec = attention_vectors(m, h) + (m.head_dim if m.qk_norm else 0)
        if vec:
            out.append(GgufTensor(p + "attn_vectors", vec, component="attention", f32=True))
        if m.qk_norm:
            out.append(GgufTensor(p + "attn_k_norm.weight", m.head_dim, component="norms", f32=True, read=used))
        return out
    if isinstance(m, MlaAttention):
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        out = []
        if m.q_lora_rank:
            out += [GgufTensor(p + "attn_q_a.weight", h, m.q_lora_rank, component="attention"),
                    GgufTensor(p + "attn_q_a_norm.weight", m.q_lora_rank, component="norms", f32=True),
                    GgufTensor(p + "attn_q_b.weight", m.q_lora_rank, m.num_attention_heads * qk,
                               component="attention")]
        else:
            out.append(GgufTensor(p + "attn_q.weight", h, m.num_attention_heads * qk, component="attention"))
        out += [GgufTensor(p + "attn_kv_a_mqa.weight", h, m.kv_lora_rank + m.qk_rope_head_dim,
                           component="attention"),
                GgufTensor(p + "attn_kv_a_norm.weight", m.kv_lora_rank, component="norms", f32=True),
                GgufTensor(p + "attn_kv_b.weight", m.kv_lora_rank,
                           m.num_attention_heads * (m.qk_nope_head_dim + m.v_head_dim), component="attention"),
                GgufTensor(p + "attn_output.weight", m.num_attention_heads * m.v_head_dim, h,
                           component="attention")]
        if m.output_gate:  # Kimi K3's g_proj; no llama.cpp architecture names it yet: its shape, a name of ours
            out.append(GgufTensor(p + "attn_gate.weight", h, m.num_attention_heads * m.v_head_dim,
                                  component="attention"))
        return out
    if isinstance(m, CompressedAttention):
        return _compressed(p, m, h)
    if isinstance(m, Mamba2Mixer):
        d_inner = m.num_heads * m.head_dim
        conv = d_inner + 2 * m.n_groups * m.state_size
        return [GgufTensor(p + "ssm_in.weight", h, d_inner + conv + m.num_heads, component="ssm"),
                GgufTensor(p + "ssm_conv1d.weight", m.conv_kernel, conv, component="ssm", f32=True),
                GgufTensor(p + "ssm_vectors", (conv if m.conv_bias else 0) + 3 * m.num_heads + d_inner,
                           component="ssm", f32=True),
                GgufTensor(p + "ssm_out.weight", d_inner, h, component="ssm")]
    if isinstance(m, ShortConvMixer):
        # llama.cpp's lfm2 (gguf-py 0.19.0 MODEL_TENSORS[LFM2]): shortconv.in_proj, shortconv.conv, shortconv.out_proj
        return [GgufTensor(p + "shortconv.in_proj.weight", h, 3 * m.conv_dim, component="ssm"),
                GgufTensor(p + "shortconv.conv.weight", m.conv_kernel, m.conv_dim, component="ssm", f32=True),
                *([GgufTensor(p + "shortconv_vectors", 4 * m.conv_dim + h, component="ssm", f32=True)] if m.bias
                  else []),
                GgufTensor(p + "shortconv.out_proj.weight", m.conv_dim, h, component="ssm")]
    if isinstance(m, LinearAttention) and m.variant == "kda":
        # llama.cpp's kimi-linear (gguf-py 0.19.0 constants.py MODEL_TENSORS[KIMI_LINEAR], tensor_mapping.py): KDA's
        # q/k/v_proj and o_proj as attn_q/k/v and attn_output, its convs as ssm_conv1d_q/k/v, f_a/f_b, g_a/g_b and
        # b_proj as ssm_f_a/ssm_f_b, ssm_g_a/ssm_g_b and ssm_beta; A_log, dt_bias and o_norm as ssm_a, ssm_dt, ssm_norm
        kd, vd, r = m.num_key_heads * m.key_head_dim, m.num_value_heads * m.value_head_dim, m.gate_rank
        return [GgufTensor(p + "attn_q.weight", h, kd, component="ssm"),
                GgufTensor(p + "attn_k.weight", h, kd, component="ssm"),
                GgufTensor(p + "attn_v.weight", h, vd, component="ssm"),
                *(GgufTensor(p + f"ssm_conv1d_{x}.weight", m.conv_kernel, n, component="ssm", f32=True)
                  for x, n in (("q", kd), ("k", kd), ("v", vd))),
                GgufTensor(p + "ssm_f_a.weight", h, r, component="ssm"),
                GgufTensor(p + "ssm_f_b.weight", r, kd, component="ssm"),
                *([GgufTensor(p + "ssm_g.weight", h, vd, component="ssm")] if m.gate_full_rank else  # Kimi K3's,
                  [GgufTensor(p + "ssm_g_a.weight", h, r, component="ssm"),  # a name of ours (as attn_gate above)
                   GgufTensor(p + "ssm_g_b.weight", r, vd, component="ssm")]),
                GgufTensor(p + "ssm_beta.weight", h, m.num_value_heads, component="ssm"),
                GgufTensor(p + "ssm_vectors", m.num_value_heads + kd + m.value_head_dim, component="ssm", f32=True),
                GgufTensor(p + "attn_output.weight", vd, h, component="ssm")]
    if isinstance(m, LinearAttention):
        kd, vd = m.num_key_heads * m.key_head_dim, m.num_value_heads * m.value_head_dim
        proj = ([GgufTensor(p + "attn_qkv.weight", h, 2 * kd + vd, component="ssm"),
                 GgufTensor(p + "attn_gate.weight", h, vd, component="ssm"),
                 GgufTensor(p + "ssm_beta.weight", h, m.num_value_heads, component="ssm"),
                 GgufTensor(p + "ssm_alpha.weight", h, m.num_value_heads, component="ssm")] if split_linear else
                [GgufTensor(p + "ssm_in.weight", h, 2 * kd + 2 * vd, component="ssm"),
                 GgufTensor(p + "ssm_ba.weight", h, 2 * m.num_value_heads, component="ssm")])
        return proj + [
                GgufTensor(p + "ssm_conv1d.weight", m.conv_kernel, 2 * kd + vd, component="ssm", f32=True),
                GgufTensor(p + "ssm_vectors", 2 * m.num_value_heads + m.value_head_dim, component="ssm", f32=True),
                GgufTensor(p + "ssm_out.weight", vd, h, component="ssm")]
    return []


def _compressed(p: str, m: CompressedAttention, h: int) -> list[GgufTensor]:
    """A DeepSeek-V4 layer's tensors as the DeepSeek-V4 GGUFs name them (antirez/ds4 ds4.c weights_bind and
    weights_validate_layout @8d57664; params._compressed counts the same shapes)."""
    hd, ql, low = m.head_dim, m.q_lora_rank, m.o_groups * m.o_lora_rank
    out = [GgufTensor(p + "attn_q_a.weight", h, ql, component="attention"),
           GgufTensor(p + "attn_q_a_norm.weight", ql, component="norms", f32=True),
           GgufTensor(p + "attn_q_b.weight", ql, m.num_attention_heads * hd, component="attention"),
           GgufTensor(p + "attn_kv.weight", h, hd, component="attention"),
           GgufTensor(p + "attn_kv_a_norm.weight", hd, component="norms", f32=True),
           GgufTensor(p + "attn_sinks.weight", m.num_attention_heads, component="attention", f32=True),
           GgufTensor(p + "attn_output_a.weight", hd * m.num_attention_heads // m.o_groups, low, component="attention"),
           GgufTensor(p + "attn_output_b.weight", low, h, component="attention")]
    if m.compress_ratio is None:
        return out
    widen = 2 if m.compress_overlap else 1
    for name, width, ix in (("attn_compressor", hd, False), ("indexer_compressor", 0, True)):
        if ix:
            if m.indexer is None or m.indexer.shared:
                break
            width = m.indexer.head_dim
            out += [GgufTensor(p + "indexer.attn_q_b.weight", ql, m.indexer.n_heads * width, component="attention"),
                    GgufTensor(p + "indexer.proj.weight", h, m.indexer.n_heads, component="attention")]
        out += [GgufTensor(p + f"{name}_ape.weight", widen * width, m.compress_ratio, component="attention", f32=True),
                GgufTensor(p + f"{name}_kv.weight", h, widen * width, component="attention"),
                GgufTensor(p + f"{name}_gate.weight", h, widen * width, component="attention"),
                GgufTensor(p + f"{name}_norm.weight", width, component="norms", f32=True)]
    return out


def _hyper_connections(model: ModelSpec) -> list[GgufTensor]:
    """DeepSeek-V4's hyper-connection tensors (params.hyper_connection_params), left unquantized: counted in F32,
    as their bases and scales are (ds4's files keep each fn in F16: 68 MB of DeepSeek-V4-Flash's at F32 here)."""
    n, h = model.hyper_connections, model.hidden_size
    if not n:
        return []
    mix, out = 2 * n + n * n, []
    for i in range(model.num_layers):
        for part in ("attn", "ffn"):
            out += [GgufTensor(f"blk.{i}.hc_{part}_fn.weight", n * h, mix, f32=True),
                    GgufTensor(f"blk.{i}.hc_{part}_vectors", mix + 3, f32=True)]
    return out + [GgufTensor("output_hc_fn.weight", n * h, n, f32=True),
                  GgufTensor("output_hc_vectors", n + 1, f32=True)]


def _mlp(i: int, m, h: int) -> list[GgufTensor]:
    p = f"blk.{i}."
    if m is None:
        return []
    if m.kind == "dense":
        ff = m.intermediate_size
        out = ([GgufTensor(p + "ffn_gate.weight", h, ff, component="mlp")] if m.gated else [])
        out += [GgufTensor(p + "ffn_up.weight", h, ff, component="mlp"),
                GgufTensor(p + "ffn_down.weight", ff, h, component="mlp")]
        if m.bias:
            out.append(GgufTensor(p + "ffn_vectors", (2 if m.gated else 1) * ff + h, component="mlp", f32=True))
        return out
    e, ff, route = m.num_experts, m.moe_intermediate_size, (m.experts_per_token, m.num_experts)
    w = m.latent_size or h  # LatentMoE: llama.cpp's ffn_latent_down {n_embd, moe_n_embd} and ffn_latent_up
    out = [GgufTensor(p + "ffn_gate_inp.weight", h, e, component="router", f32=True)]
    if m.latent_size:
        out += [GgufTensor(p + "ffn_latent_down.weight", h, w, component="mlp"),
                GgufTensor(p + "ffn_latent_up.weight", w, h, component="mlp")]
        if m.latent_norm:  # Kimi K3's routed_expert_norm (a name of ours)
            out.append(GgufTensor(p + "ffn_latent_norm.weight", w, component="norms", f32=True))
    if m.gated:
        out.append(GgufTensor(p + "ffn_gate_exps.weight", w, ff, e, component="experts", routed=route))
    out += [GgufTensor(p + "ffn_up_exps.weight", w, ff, e, component="experts", routed=route),
            GgufTensor(p + "ffn_down_exps.weight", ff, w, e, component="experts", routed=route)]
    vec = (e if m.router_bias else 0) + (h if m.shared_expert_gate else 0)
    if m.bias:
        vec += e * ((2 if m.gated else 1) * ff + w)
    if vec:
        out.append(GgufTensor(p + "ffn_vectors", vec, component="router", f32=True))
    if m.num_shared_experts:
        fs = (m.shared_intermediate_size or ff) * m.num_shared_experts
        if m.gated:
            out.append(GgufTensor(p + "ffn_gate_shexp.weight", h, fs, component="shared_experts"))
        out += [GgufTensor(p + "ffn_up_shexp.weight", h, fs, component="shared_experts"),
                GgufTensor(p + "ffn_down_shexp.weight", fs, h, component="shared_experts")]
    return out


def gguf_tensors(model: ModelSpec) -> list[GgufTensor]:
    """Every tensor of the text model in a GGUF conversion, in file order (embedding, layers, output)."""
    h = model.hidden_size
    out = [GgufTensor("token_embd.weight", h, model.vocab_size, component="embedding")]
    ple = model.per_layer_input
    if ple is not None:  # llama.cpp's gemma3n/gemma4 names (gguf-py constants.py MODEL_TENSOR.PER_LAYER_*)
        w = ple.hidden_size * model.num_layers
        out += [GgufTensor("per_layer_token_embd.weight", w, ple.vocab_size, component="per_layer_embedding"),
                GgufTensor("per_layer_model_proj.weight", h, w),
                GgufTensor("per_layer_proj_norm.weight", ple.hidden_size, component="norms", f32=True)]
    alt, rank = model.altup.num_inputs if model.altup else 0, model.laurel_rank
    if alt:  # Gemma 3n (llama-model.cpp LLM_ARCH_GEMMA3N): {n_embd, n_embd, n_altup - 1}
        out += [GgufTensor("altup_proj.weight", h, h, alt - 1), GgufTensor("altup_unembd_proj.weight", h, h, alt - 1)]
    for i, g in enumerate(model.layer_stack()):
        out += _attention(i, g.mixer, h, model.family in SPLIT_LINEAR_FAMILIES)
        out += _mlp(i, g.mlp, h)
        if ple is not None:
            out += [GgufTensor(f"blk.{i}.inp_gate.weight", h, ple.hidden_size),
                    GgufTensor(f"blk.{i}.proj.weight", ple.hidden_size, h),
                    GgufTensor(f"blk.{i}.post_norm.weight", h, component="norms", f32=True)]
        if alt:
            out += [GgufTensor(f"blk.{i}.altup_correct_coef.weight", alt, alt),
                    GgufTensor(f"blk.{i}.altup_predict_coef.weight", alt, alt * alt),
                    GgufTensor(f"blk.{i}.altup_router.weight", h, alt),
                    GgufTensor(f"blk.{i}.altup_router_norm.weight", h, component="norms", f32=True),
                    GgufTensor(f"blk.{i}.altup_correct_scale.weight", h, f32=True)]
        if rank:
            out += [GgufTensor(f"blk.{i}.laurel_l.weight", h, rank), GgufTensor(f"blk.{i}.laurel_r.weight", rank, h),
                    GgufTensor(f"blk.{i}.laurel_post_norm.weight", h, component="norms", f32=True)]
        small = g.norms * h + g.extra_params
        if small:
            out.append(GgufTensor(f"blk.{i}.norm_vectors", small, component="norms", f32=True))
    out += _hyper_connections(model)
    if model.final_norms:
        out.append(GgufTensor("output_norm.weight", model.final_norms * h, component="norms", f32=True))
    if not model.tie_word_embeddings:
        out.append(GgufTensor("output.weight", h, model.vocab_size, component="lm_head"))
    return out
