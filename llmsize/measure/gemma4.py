"""Gemma 4 (text decoder) for measuring decode: configs, weights, static KV cache, prefill and one decode step.

Architecture exactly as shared/reference/gemma-architecture.md (transformers modeling_gemma4_unified.py):
- RMSNorm y = x * (mean(x^2) + eps)^-1/2 * weight (plain weight, fp32 math); v_norm has no weight;
- embedding x = E[tok] * sqrt(hidden) (the scale cast to the weight dtype), tied lm_head, soft-cap 30;
- per layer: attention with q_norm/k_norm, RoPE after the norms, scale 1.0; sliding layers GQA 16q/8kv x 256
  with a 1024-token window, full layers 16q/1kv x 512 with K = V (V is v_norm of the K projection, unrotated)
  and proportional RoPE on a quarter of the dims; post-attention norm, MLP down(gelu_tanh(gate) * up) with
  pre/post norms, then x *= layer_scalar.
KV cache: full layers keep every position; sliding layers a ring buffer of `window` slots (slot = pos % window).
Linear weights are either Nvfp4Weight (q|k|v and gate|up fused) or plain bf16 tensors (the baseline).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from llmsize.measure import gemv_tc, nvfp4
from llmsize.measure.gemv import nvfp4_gemv, nvfp4_linear_reference
from llmsize.measure.gemv_tc import nvfp4_gemv_batch, nvfp4_gemv_tc
from llmsize.measure.gemv_words import nvfp4_gemv_words
from llmsize.measure.tuner import Tuning

SLIDING, FULL = "sliding", "full"
QUERY_CHUNK = 512  # prefill attention is computed this many queries at a time
PREFILL_TOKENS = 16384  # prefill goes through the batch this many prompt tokens a pass (one prompt at least)


def prefill_rows(batch: int, context: int) -> int:
    """Sequences per prefill pass: as many whole prompts as PREFILL_TOKENS holds, at least one, at most all."""
    return max(1, min(batch, PREFILL_TOKENS // max(context, 1)))


@dataclass(frozen=True)
class Gemma4Config:
    name: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    layer_types: tuple[str, ...]
    num_heads: int
    num_kv_heads: int  # sliding layers
    head_dim: int  # sliding layers
    num_global_kv_heads: int  # full layers
    global_head_dim: int  # full layers
    sliding_window: int
    rope_theta_sliding: float = 1e4
    rope_theta_full: float = 1e6
    partial_rotary_full: float = 0.25
    rms_eps: float = 1e-6
    final_softcap: float = 30.0

    @property
    def num_layers(self) -> int:
        return len(self.layer_types)

    def kv_heads(self, kind: str) -> int:
        return self.num_kv_heads if kind == SLIDING else self.num_global_kv_heads

    def hd(self, kind: str) -> int:
        return self.head_dim if kind == SLIDING else self.global_head_dim


# google/gemma-4-12B text_config (gemma-architecture.md): full attention at layers 5, 11, ..., 47.
GEMMA4_12B = Gemma4Config(
    name="gemma-4-12b", vocab_size=262144, hidden_size=3840, intermediate_size=15360,
    layer_types=((SLIDING,) * 5 + (FULL,)) * 8, num_heads=16, num_kv_heads=8, head_dim=256,
    num_global_kv_heads=1, global_head_dim=512, sliding_window=1024,
)

# Same structure, small dims, one period of the layer pattern (two sliding layers, so a cache mixed up between
# layers of one kind shows, then a full one) and a short window (a decode wraps its ring buffer after 4 steps):
# what `--device cpu`, the self-checks and the tests run.
GEMMA4_TINY = Gemma4Config(
    name="gemma-4-tiny", vocab_size=512, hidden_size=128, intermediate_size=256,
    layer_types=(SLIDING, SLIDING, FULL), num_heads=4, num_kv_heads=2, head_dim=32,
    num_global_kv_heads=1, global_head_dim=64, sliding_window=4,
)


@dataclass
class LayerWeights:
    kind: str
    qkv: object  # Nvfp4Weight or a [q+k(+v), hidden] tensor
    o: object
    gate_up: object
    down: object
    q_norm: torch.Tensor
    k_norm: torch.Tensor
    input_norm: torch.Tensor
    post_attn_norm: torch.Tensor
    pre_ffn_norm: torch.Tensor
    post_ffn_norm: torch.Tensor
    layer_scalar: torch.Tensor  # [1]


@dataclass
class Gemma4Weights:
    config: Gemma4Config
    embed: torch.Tensor  # [vocab, hidden], tied lm_head
    final_norm: torch.Tensor
    layers: list[LayerWeights] = field(default_factory=list)
    quant: str = "nvfp4"


def qkv_sizes(cfg: Gemma4Config, kind: str) -> list[int]:
    q = cfg.num_heads * cfg.hd(kind)
    kv = cfg.kv_heads(kind) * cfg.hd(kind)
    return [q, kv] if kind == FULL else [q, kv, kv]


def layer_shapes(cfg: Gemma4Config, kind: str) -> dict[str, tuple[int, int]]:
    """[out, in] of each linear in one layer (torch Linear convention), unfused, checkpoint names."""
    d, i = cfg.hidden_size, cfg.intermediate_size
    sizes = qkv_sizes(cfg, kind)
    shapes = {"q_proj": (sizes[0], d), "k_proj": (sizes[1], d)}
    if kind == SLIDING:
        shapes["v_proj"] = (sizes[2], d)
    shapes.update({"o_proj": (d, sizes[0]), "gate_proj": (i, d), "up_proj": (i, d), "down_proj": (d, i)})
    return shapes


def fuse(cfg: Gemma4Config, kind: str, mats: dict[str, object], quant: str) -> dict[str, object]:
    """Checkpoint-named linears -> the fused qkv / gate_up the decode step runs."""
    names = ["q_proj", "k_proj"] + (["v_proj"] if kind == SLIDING else [])
    if quant == "nvfp4":
        cat = nvfp4.concat_rows
    else:
        def cat(parts):
            return torch.cat(parts)
    return {"qkv": cat([mats[n] for n in names]), "o": mats["o_proj"],
            "gate_up": cat([mats["gate_proj"], mats["up_proj"]]), "down": mats["down_proj"]}


def quantize_group(mats: list[torch.Tensor]) -> list[nvfp4.Nvfp4Weight]:
    """Quantize projections that are fused at run time with one shared per-tensor scale, as exporters do
    (ModelOpt preprocess_linear_fusion; llm-compressor FUSED_LAYER_NAMES)."""
    shared = torch.stack([nvfp4.global_multiplier(m) for m in mats]).max()
    return [nvfp4.quantize(m, multiplier=shared) for m in mats]


def quantize_layer(cfg: Gemma4Config, kind: str, mats: dict[str, torch.Tensor]) -> dict[str, nvfp4.Nvfp4Weight]:
    qkv_names = ["q_proj", "k_proj"] + (["v_proj"] if kind == SLIDING else [])
    out = dict(zip(qkv_names, quantize_group([mats[n] for n in qkv_names])))
    out.update(zip(["gate_proj", "up_proj"], quantize_group([mats["gate_proj"], mats["up_proj"]])))
    out["o_proj"] = nvfp4.quantize(mats["o_proj"])
    out["down_proj"] = nvfp4.quantize(mats["down_proj"])
    return out


def random_layer(cfg: Gemma4Config, kind: str, gen: torch.Generator, device, dtype) -> tuple[dict, dict]:
    """One layer of weights drawn like a trained model's: linears N(0, 1/fan_in), norms around 1 with spread,
    a layer scalar below 1. Never zeros, never constants. Returns (linears, small tensors)."""
    def normal(shape, std, mean=0.0):
        return (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * std + mean).to(dtype)

    mats = {n: normal(s, 1.0 / math.sqrt(s[1])) for n, s in layer_shapes(cfg, kind).items()}
    hd, d = cfg.hd(kind), cfg.hidden_size
    small = {"q_norm": normal((hd,), 0.1, 1.0), "k_norm": normal((hd,), 0.1, 1.0),
             "input_norm": normal((d,), 0.1, 1.0), "post_attn_norm": normal((d,), 0.1, 1.0),
             "pre_ffn_norm": normal((d,), 0.1, 1.0), "post_ffn_norm": normal((d,), 0.1, 1.0),
             "layer_scalar": (torch.rand((1,), generator=gen, device=device) * 0.5 + 0.5).to(dtype)}
    return mats, small


def build_layer(cfg, kind, mats, small, quant) -> LayerWeights:
    if quant == "nvfp4":
        mats = quantize_layer(cfg, kind, mats)
    fused = fuse(cfg, kind, mats, quant)
    return LayerWeights(kind=kind, **fused, **small)


def build_random(cfg: Gemma4Config, device="cpu", dtype=torch.bfloat16, quant: str = "nvfp4", seed: int = 0,
                 on_layer=None) -> Gemma4Weights:
    """Random weights of the exact shapes, built and quantized one layer at a time so that peak memory stays
    near the final footprint (one layer of bf16 at most beside it)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    d = cfg.hidden_size
    embed = torch.empty((cfg.vocab_size, d), device=device, dtype=dtype)
    for r in range(0, cfg.vocab_size, 16384):  # in slices: no full-size fp32 copy (4 GB for Gemma 4 12B)
        rows = min(16384, cfg.vocab_size - r)
        embed[r:r + rows] = torch.randn((rows, d), generator=gen, device=device) / math.sqrt(d)
    final_norm = (torch.randn((d,), generator=gen, device=device) * 0.1 + 1.0).to(dtype)
    w = Gemma4Weights(cfg, embed, final_norm, quant=quant)
    for idx, kind in enumerate(cfg.layer_types):
        mats, small = random_layer(cfg, kind, gen, device, dtype)
        w.layers.append(build_layer(cfg, kind, mats, small, quant))
        del mats
        if on_layer:
            on_layer(idx)
    return w


# ---------------------------------------------------------------------------------------------- math pieces

def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """y = x / sqrt(mean(x^2) + eps) * weight, in fp32, cast back (torch's fused rms_norm when it has one)."""
    xf = x.float()
    if hasattr(F, "rms_norm"):  # torch >= 2.4: one op instead of five
        w = None if weight is None else weight.float()
        return F.rms_norm(xf, (x.shape[-1],), w, eps).to(x.dtype)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.float()
    return y.to(x.dtype)


def rope_inv_freq(cfg: Gemma4Config, kind: str) -> torch.Tensor:
    """Sliding: default RoPE over all head dims. Full: proportional, the first int(0.25*512/2) = 64 of 256
    frequencies of a 512-dim base, the rest zero (dims left unrotated)."""
    hd = cfg.hd(kind)
    j = torch.arange(hd // 2, dtype=torch.float64)
    if kind == SLIDING:
        return (1.0 / cfg.rope_theta_sliding ** (2 * j / hd)).float()
    n_rot = int(cfg.partial_rotary_full * hd // 2)
    inv = 1.0 / cfg.rope_theta_full ** (2 * j / hd)
    inv[n_rot:] = 0.0
    return inv.float()


def rope_tables(cfg: Gemma4Config, kind: str, max_pos: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    inv = rope_inv_freq(cfg, kind).to(device)
    ang = torch.arange(max_pos, device=device, dtype=torch.float32)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """rotate_half convention (pairs i, i + d/2). x [..., T, d] or [..., d]; cos/sin broadcastable."""
    half = x.shape[-1] // 2
    xf = x.float()
    rot = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
    return (xf * cos + rot * sin).to(x.dtype)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


# ---------------------------------------------------------------------------------------------- the model

class Gemma4Decoder:
    """Static-cache Gemma 4 decoder over given weights: prefill(tokens), then decode_step() repeatedly.

    All state lives in fixed device tensors (caches, position, current token), so one decode step can be
    captured in a CUDA graph and replayed. `gemv` picks the NVFP4 decode path: "words" (the fp16x2 CUDA-core
    kernel at batch 1; 2-256 rows through gemv_tc.nvfp4_gemv_batch, the tensor-core word kernel), "triton" (the
    byte kernel, one weight pass per row: the readable fallback) or "torch" (dequantize + matmul, the
    reference; what the CPU uses by default). `tuning` keeps the kernels' launch settings (tuner.Tuning: timed
    at each shape's first call, then frozen by the run).
    """

    GEMVS = ("torch", "triton", "words")

    def __init__(self, weights: Gemma4Weights, batch: int, max_positions: int, gemv: str = "torch",
                 fused: bool = False, fold: bool = True, cap_argmax: bool = False, fold_combine: bool = True,
                 attn_split: dict | None = None, off: frozenset[str] = frozenset(), tuning: Tuning | None = None):
        cfg = weights.config
        self.cfg, self.w, self.batch, self.max_positions, self.gemv = cfg, weights, batch, max_positions, gemv
        self.fused = fused  # decode_step through llmsize.measure.fused: 2-5 Triton kernels between the GEMVs
        self.off = frozenset(off)  # the word family's paths left out (kernel_plan.KernelPlan.off)
        self.fold = fold  # fused step, word GEMV at batch 1: GeGLU and residual norms in the GEMVs' epilogues
        # fused step: the attention combine in the split kernel's last slice where its partials are small
        # (fused.attention's fold_combine); off with fold=False too
        self.fold_combine = fold_combine
        # fused step: cache rows per attention slice by layer kind ({"full": 32}, say), else fused.attn_split's
        self.attn_split = attn_split or {}
        if gemv not in self.GEMVS:
            raise ValueError(f"gemv must be one of {', '.join(self.GEMVS)}, got {gemv!r}")
        # fused step: after cuBLAS's lm_head GEMM, logits.cap_argmax (soft-cap and the B tokens in one kernel)
        self.cap_argmax = cap_argmax
        self.tuning = tuning if tuning is not None else Tuning()
        dev, dt = weights.embed.device, weights.embed.dtype
        self.device, self.dtype = dev, dt
        self.caches = []
        for kind in cfg.layer_types:
            slots = min(cfg.sliding_window, max_positions) if kind == SLIDING else max_positions
            shape = (batch, cfg.kv_heads(kind), slots, cfg.hd(kind))
            self.caches.append((torch.zeros(shape, device=dev, dtype=dt), torch.zeros(shape, device=dev, dtype=dt)))
        self.rope = {k: rope_tables(cfg, k, max_positions, dev) for k in (SLIDING, FULL)}
        self.slot_ids = {SLIDING: torch.arange(min(cfg.sliding_window, max_positions), device=dev),
                         FULL: torch.arange(max_positions, device=dev)}
        self.pos = torch.zeros((1,), dtype=torch.long, device=dev)  # position of the token being decoded
        self.token = torch.zeros((batch,), dtype=torch.long, device=dev)  # the token fed to the next step
        # norm weights in fp32 once (rms_norm computes in fp32; a bf16 weight would be converted every call)
        self._f32 = {id(t): t.float() for lw in weights.layers
                     for t in (lw.q_norm, lw.k_norm, lw.input_norm, lw.post_attn_norm, lw.pre_ffn_norm,
                               lw.post_ffn_norm)}
        self._f32[id(weights.final_norm)] = weights.final_norm.float()
        # HF casts sqrt(hidden) to the weight dtype first (bf16: 61.9677 -> 62.0)
        self.embed_scale = float(torch.tensor(math.sqrt(cfg.hidden_size), dtype=dt))

    # -- linears
    def _linear(self, x: torch.Tensor, w) -> torch.Tensor:
        if isinstance(w, nvfp4.Nvfp4Weight):
            if self.gemv == "words" and x.shape[0] <= max(self.batch, gemv_tc.ROW_BLOCK):  # a step's 1-256 rows
                # in one weight pass; a longer prompt is a prefill: the dense path below
                return (nvfp4_gemv_words(x, w, off=self.off, tuning=self.tuning) if x.shape[0] == 1
                        else nvfp4_gemv_batch(x, w, off=self.off, tuning=self.tuning))
            if self.gemv == "triton" and x.shape[0] <= 16:
                return nvfp4_gemv(x, w)
            if x.shape[0] <= 16:
                return nvfp4_linear_reference(x, w)
            return F.linear(x, w.dequantize(x.dtype))  # prefill: a transient dense copy, one matrix at a time
        return F.linear(x, w)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        h = rms_norm(x, self._f32[id(self.w.final_norm)], self.cfg.rms_eps)
        logits = F.linear(h, self.w.embed).float()
        cap = self.cfg.final_softcap
        return cap * torch.tanh(logits / cap)

    def _mlp(self, layer: LayerWeights, x: torch.Tensor) -> torch.Tensor:
        eps = self.cfg.rms_eps
        h = rms_norm(x, self._f32[id(layer.pre_ffn_norm)], eps)
        gu = self._linear(h, layer.gate_up)
        g, u = gu.split(self.cfg.intermediate_size, dim=-1)
        m = self._linear(gelu_tanh(g) * u, layer.down)
        return x + rms_norm(m, self._f32[id(layer.post_ffn_norm)], eps)

    def _qkv(self, layer: LayerWeights, x: torch.Tensor):
        """x [N, hidden] -> q [N, H, hd] normed, k [N, kvh, hd] normed, v [N, kvh, hd] (unrotated)."""
        cfg, kind = self.cfg, layer.kind
        hd, kvh = cfg.hd(kind), cfg.kv_heads(kind)
        h = rms_norm(x, self._f32[id(layer.input_norm)], cfg.rms_eps)
        parts = self._linear(h, layer.qkv).split(qkv_sizes(cfg, kind), dim=-1)
        q = rms_norm(parts[0].view(-1, cfg.num_heads, hd), self._f32[id(layer.q_norm)], cfg.rms_eps)
        k_raw = parts[1].view(-1, kvh, hd)
        v_raw = k_raw if kind == FULL else parts[2].view(-1, kvh, hd)  # K = V on full layers
        k = rms_norm(k_raw, self._f32[id(layer.k_norm)], cfg.rms_eps)
        v = rms_norm(v_raw, None, cfg.rms_eps)
        return q, k, v

    def _attend(self, q, k, v, mask):
        """q [B, H, Tq, d], k/v [B, kvh, Tk, d], mask [Tq, Tk] bool (True = attend). Scale 1.0 (Gemma 4).

        The cache is read once, in its own dtype: scores come out of the matmul in that dtype (fp32
        accumulation inside, as HF's eager attention), softmax runs in fp32 on the small score tensor. Casting
        the cache to fp32 instead would move three times its bytes every step."""
        b, h, tq, d = q.shape
        kvh = k.shape[1]
        qg = q.reshape(b, kvh, h // kvh * tq, d).to(k.dtype)
        s = (qg @ k.transpose(-1, -2)).float()  # [B, kvh, g*Tq, Tk]
        s = s.view(b, kvh, h // kvh, tq, -1).masked_fill(~mask, float("-inf"))
        p = torch.softmax(s, dim=-1).view(b, kvh, h // kvh * tq, -1).to(v.dtype)
        return (p @ v).view(b, h, tq, d).to(q.dtype)

    # -- prefill: the whole prompt at once, filling the caches, a few sequences per pass
    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, T] -> logits of the last position [B, vocab]; sets pos = T and token = argmax.

        Sequences are independent, so they go through in passes of prefill_rows(B, T) of them (at most
        PREFILL_TOKENS tokens a pass): the activations of one pass, not of the whole batch, are what the prefill
        adds to memory (run.transient_bytes), and a large batch of long prompts still fits beside its KV cache."""
        b, t = tokens.shape
        if t < 1 or t >= self.max_positions:
            raise ValueError(f"prompt of {t} tokens does not fit {self.max_positions} positions")
        if b != self.batch:
            raise ValueError(f"prompt of {b} sequences for a decoder of batch {self.batch}")
        rows = prefill_rows(b, t)
        logits = torch.cat([self._prefill_rows(tokens[s:s + rows], s) for s in range(0, b, rows)])
        self.pos.fill_(t)
        self.token.copy_(logits.argmax(-1))
        return logits

    def _prefill_rows(self, tokens: torch.Tensor, first: int) -> torch.Tensor:
        """Sequences first.. first + len(tokens) - 1 of the batch: their caches filled, last-position logits."""
        cfg = self.cfg
        b, t = tokens.shape
        seqs = slice(first, first + b)
        x = (self.w.embed[tokens] * self.embed_scale).view(b * t, -1)
        ids = torch.arange(t, device=self.device)
        causal = ids[None, :] <= ids[:, None]
        for layer, (kc, vc) in zip(self.w.layers, self.caches):
            kind, hd = layer.kind, cfg.hd(layer.kind)
            q, k, v = self._qkv(layer, x)
            cos, sin = (tab[:t, None, :] for tab in self.rope[kind])  # [T, 1, d] against [B*T, heads, d]
            q = apply_rope(q.view(b, t, -1, hd), cos, sin)
            k = apply_rope(k.view(b, t, -1, hd), cos, sin)
            v = v.view(b, t, -1, hd)
            mask = causal & (ids[:, None] - ids[None, :] < cfg.sliding_window) if kind == SLIDING else causal
            qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            # queries in chunks so the score matrix stays small (16 heads x 512 x T floats at most)
            a = torch.cat([self._attend(qt[:, :, c:c + QUERY_CHUNK], kt, vt, mask[c:c + QUERY_CHUNK])
                           for c in range(0, t, QUERY_CHUNK)], dim=2)
            if kind == SLIDING:
                keep = ids[-min(t, kc.shape[2]):]
                kc[seqs, :, keep % kc.shape[2]] = kt[:, :, keep]
                vc[seqs, :, keep % kc.shape[2]] = vt[:, :, keep]
            else:
                kc[seqs, :, :t] = kt
                vc[seqs, :, :t] = vt
            o = self._linear(a.transpose(1, 2).reshape(b * t, -1), layer.o)
            x = x + rms_norm(o, self._f32[id(layer.post_attn_norm)], cfg.rms_eps)
            x = self._mlp(layer, x) * layer.layer_scalar
        return self._logits(x.view(b, t, -1)[:, -1])

    # -- one decode step: the token in self.token at position self.pos
    def decode_step(self) -> torch.Tensor:
        """Consumes self.token at self.pos, returns logits [B, vocab], writes the greedy next token into
        self.token and advances self.pos. No host sync: safe to capture in a CUDA graph."""
        if self.fused:
            return self._decode_step_fused()
        cfg = self.cfg
        x = self.w.embed.index_select(0, self.token) * self.embed_scale
        # what depends on the position only, once per step rather than once per layer (fewer kernels)
        per_kind = {}
        for kind in (SLIDING, FULL):
            cos, sin = (tab.index_select(0, self.pos) for tab in self.rope[kind])  # [1, d]
            slots = self.slot_ids[kind].shape[0]
            slot = self.pos % slots if kind == SLIDING else self.pos
            mask = (self.slot_ids[kind] <= self.pos)[None, :]  # ring slots past pos are still empty
            per_kind[kind] = (cos, sin, slot, mask)
        for layer, (kc, vc) in zip(self.w.layers, self.caches):
            q, k, v = self._qkv(layer, x)
            cos, sin, slot, mask = per_kind[layer.kind]
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            kc.index_copy_(2, slot, k.unsqueeze(2))
            vc.index_copy_(2, slot, v.unsqueeze(2))
            a = self._attend(q.unsqueeze(2), kc, vc, mask)
            o = self._linear(a.reshape(self.batch, -1), layer.o)
            x = x + rms_norm(o, self._f32[id(layer.post_attn_norm)], cfg.rms_eps)
            x = self._mlp(layer, x) * layer.layer_scalar
        logits = self._logits(x)
        self.token.copy_(logits.argmax(-1))
        self.pos.add_(1)
        return logits

    def _decode_step_fused(self) -> torch.Tensor:
        """The same step with the work between the GEMVs in llmsize.measure.fused's kernels: per layer four
        GEMVs and five small kernels (attention split, which also norms, rotates and caches q, k, v; combine;
        two residual_norms; geglu). With the word GEMV at batch 1 two: the gate | up pass applies the GeGLU, the
        o and down passes the residual norms, so a layer is six kernels, five where the attention folds its
        combine (sliding layers); the step starts with embed_norm and ends with cuBLAS's lm_head GEMM, then (with
        cap_argmax) one kernel for the soft-cap and the tokens. With the word family at batch
        2-256 the tensor-core gate | up pass applies the GeGLU (no geglu kernel)."""
        from llmsize.measure import fused

        cfg, eps, f32 = self.cfg, self.cfg.rms_eps, self._f32
        layers = self.w.layers
        # the word GEMV reads its input as fp16 pairs: the kernels before it write them so, no packing kernel
        pk = self.gemv == "words" and self.batch == 1 and isinstance(layers[0].qkv, nvfp4.Nvfp4Weight)

        fold = pk and self.fold
        # batch 2-256 with the word family: the GeGLU in the tensor-core gate | up pass (no geglu kernel)
        tc_glu = (self.gemv == "words" and 1 < self.batch <= gemv_tc.MAX_ROWS
                  and isinstance(layers[0].gate_up, nvfp4.Nvfp4Weight) and "tc" not in self.off
                  and (self.batch <= gemv_tc.ROW_BLOCK or "wide" not in self.off))

        def lin(inp, w):
            return (nvfp4_gemv_words(None, w, x2=inp, out_dtype=x.dtype, off=self.off, tuning=self.tuning) if pk
                    else self._linear(inp, w))

        x, h = fused.embed_norm(self.w.embed, self.token, self.embed_scale, f32[id(layers[0].input_norm)], eps,
                                pack=pk)
        for i, (layer, (kc, vc)) in enumerate(zip(layers, self.caches)):
            kind = layer.kind
            sizes = qkv_sizes(cfg, kind)
            qkv = lin(h, layer.qkv)
            cos, sin = self.rope[kind]
            att = fused.attention(qkv, f32[id(layer.q_norm)], f32[id(layer.k_norm)], cos, sin, self.pos, kc, vc,
                                  cfg.num_heads, sizes[0], sizes[0] + (sizes[1] if kind == SLIDING else 0), eps,
                                  pack=pk, fold_combine=None if self.fold and self.fold_combine else False,
                                  split=self.attn_split.get(kind))
            post, pre = f32[id(layer.post_attn_norm)], f32[id(layer.pre_ffn_norm)]
            if fold:  # the residual norm in the o GEMV's epilogue (its last program), h packed for gate | up
                x, h = nvfp4_gemv_words(None, layer.o, x2=att, out_dtype=x.dtype, norm=(x, post, pre, eps, None, True),
                                        off=self.off, tuning=self.tuning)
            else:
                x, h = fused.residual_norm(x, lin(att, layer.o), post, pre, eps, pack=pk)
            last = i + 1 == len(layers)
            post, nxt = f32[id(layer.post_ffn_norm)], f32[id(self.w.final_norm if last else layers[i + 1].input_norm)]
            if fold:  # GeGLU in the gate | up epilogue, the residual norm in the down one (h plain for the lm_head)
                a = nvfp4_gemv_words(None, layer.gate_up, x2=h, out_dtype=x.dtype, glu=True, pack=True, off=self.off,
                                     tuning=self.tuning)
                x, h = nvfp4_gemv_words(None, layer.down, x2=a, out_dtype=x.dtype,
                                        norm=(x, post, nxt, eps, layer.layer_scalar, not last), off=self.off,
                                        tuning=self.tuning)
            else:
                a = (nvfp4_gemv_tc(h, layer.gate_up, glu=True, tuning=self.tuning) if tc_glu
                     else fused.geglu(lin(h, layer.gate_up), pack=pk))
                x, h = fused.residual_norm(x, lin(a, layer.down), post, nxt, eps, layer.layer_scalar,
                                           pack=pk and not last)
        return self._head(h)

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        """The fused step's end: h (final-normed) through the tied lm_head (cuBLAS), soft-capped; the greedy
        tokens into self.token and the position advanced, by logits.cap_argmax in one kernel where the run
        checked it, else by the eager ops. The capped logits [B, vocab] fp32."""
        cap = self.cfg.final_softcap
        if self.cap_argmax:
            from llmsize.measure.logits import cap_argmax
            return cap_argmax(F.linear(h, self.w.embed), cap, self.token, self.pos)
        logits = cap * torch.tanh(F.linear(h, self.w.embed).float() / cap)
        self.token.copy_(logits.argmax(-1))
        self.pos.add_(1)
        return logits
