"""A plain float32 Gemma 4 forward over a whole sequence: no cache, no fusion, one head at a time.

The yardstick for the decode loop's tests. It shares only the weights (dequantized to float32) and the
config with llmsize.measure.gemma4; the math is written out again from shared/reference/gemma-architecture.md.
"""

from __future__ import annotations

import math

import torch

from llmsize.measure import nvfp4
from llmsize.measure.gemma4 import FULL, SLIDING, Gemma4Weights, apply_rope, qkv_sizes, rms_norm


def _f32(w) -> torch.Tensor:
    return w.dequantize(torch.float32) if isinstance(w, nvfp4.Nvfp4Weight) else w.float()


def _norm(x, w, eps):
    y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    return y if w is None else y * w.float()


def _rope(x, pos, inv_freq):
    """x [T, d]; rotate pairs (i, i + d/2) by pos * inv_freq[i]."""
    half = x.shape[-1] // 2
    ang = pos[:, None].double() * inv_freq[None, :].double()
    c, s = torch.cos(ang).float(), torch.sin(ang).float()
    a, b = x[:, :half], x[:, half:]
    return torch.cat([a * c - b * s, b * c + a * s], dim=-1)


def _inv_freq(cfg, kind):
    hd = cfg.hd(kind)
    j = torch.arange(hd // 2, dtype=torch.float64)
    if kind == SLIDING:
        return 1.0 / cfg.rope_theta_sliding ** (2 * j / hd)
    inv = 1.0 / cfg.rope_theta_full ** (2 * j / hd)
    inv[int(cfg.partial_rotary_full * hd) // 2:] = 0.0  # proportional RoPE: a quarter of the dims rotate
    return inv


def forward(weights: Gemma4Weights, tokens: list[int]) -> torch.Tensor:
    """Logits [T, vocab] (float32, soft-capped) for every position of one sequence."""
    cfg = weights.config
    eps = cfg.rms_eps
    t = len(tokens)
    pos = torch.arange(t)
    embed = weights.embed.float()
    scale = torch.tensor(math.sqrt(cfg.hidden_size), dtype=weights.embed.dtype).float()
    x = embed[torch.tensor(tokens)] * scale
    for layer in weights.layers:
        kind = layer.kind
        hd, kvh, nh = cfg.hd(kind), cfg.kv_heads(kind), cfg.num_heads
        h = _norm(x, layer.input_norm, eps)
        proj = h @ _f32(layer.qkv).T
        sizes = qkv_sizes(cfg, kind)
        q_all, k_all = proj[:, :sizes[0]], proj[:, sizes[0]:sizes[0] + sizes[1]]
        v_all = k_all if kind == FULL else proj[:, sizes[0] + sizes[1]:]
        inv = _inv_freq(cfg, kind)
        heads = []
        for head in range(nh):
            g = head // (nh // kvh)  # the kv head this query head reads
            q = _rope(_norm(q_all[:, head * hd:(head + 1) * hd], layer.q_norm, eps), pos, inv)
            k = _rope(_norm(k_all[:, g * hd:(g + 1) * hd], layer.k_norm, eps), pos, inv)
            v = _norm(v_all[:, g * hd:(g + 1) * hd], None, eps)
            scores = q @ k.T  # attention scale 1.0
            allowed = pos[None, :] <= pos[:, None]
            if kind == SLIDING:
                allowed &= (pos[:, None] - pos[None, :]) < cfg.sliding_window
            scores = scores.masked_fill(~allowed, float("-inf"))
            heads.append(torch.softmax(scores, dim=-1) @ v)
        attn = torch.cat(heads, dim=-1) @ _f32(layer.o).T
        x = x + _norm(attn, layer.post_attn_norm, eps)
        h = _norm(x, layer.pre_ffn_norm, eps)
        gu = h @ _f32(layer.gate_up).T
        gate, up = gu[:, :cfg.intermediate_size], gu[:, cfg.intermediate_size:]
        gelu = 0.5 * gate * (1 + torch.tanh(math.sqrt(2 / math.pi) * (gate + 0.044715 * gate ** 3)))
        m = (gelu * up) @ _f32(layer.down).T
        x = (x + _norm(m, layer.post_ffn_norm, eps)) * layer.layer_scalar.float()
    logits = _norm(x, weights.final_norm, eps) @ embed.T
    return cfg.final_softcap * torch.tanh(logits / cfg.final_softcap)


def attention_reference(qkv, q_norm, k_norm, cos, sin, pos: int, kc, vc, num_heads, k_off, v_off, eps):
    """What `attention` computes, in the eager step's ops (rms_norm, apply_rope, a masked softmax in fp32):
    the caches with this position's K and V written (copies) and the output [B, heads * hd] in fp32."""
    b, kvh, slots, hd = kc.shape
    q = apply_rope(rms_norm(qkv[:, :k_off].view(b, num_heads, hd), q_norm, eps), cos[pos], sin[pos])
    kc, vc = kc.clone(), vc.clone()
    kc[:, :, pos % slots] = apply_rope(rms_norm(qkv[:, k_off:k_off + kvh * hd].view(b, kvh, hd), k_norm, eps),
                                       cos[pos], sin[pos])
    vc[:, :, pos % slots] = rms_norm(qkv[:, v_off:v_off + kvh * hd].view(b, kvh, hd), None, eps)
    qg = q.view(b, kvh, num_heads // kvh, hd).float()
    sc = torch.einsum("bgqd,bgsd->bgqs", qg, kc.float())
    sc = sc.masked_fill(torch.arange(slots, device=kc.device) > pos, float("-inf"))  # slots past pos: empty
    out = torch.einsum("bgqs,bgsd->bgqd", torch.softmax(sc, -1), vc.float()).reshape(b, num_heads * hd)
    return kc, vc, out
