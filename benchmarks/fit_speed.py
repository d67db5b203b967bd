"""Fit the expected-speed constants (llmsize/estimate/speed.py) on the published measurements under measurements/,
print the held-out error table, and (with --write) write runtimes/*.yaml.

    python benchmarks/fit_speed.py            # fit, print the held-out table
    python benchmarks/fit_speed.py --write    # ... and write runtimes/*.yaml
    python benchmarks/fit_speed.py --check    # exit 1 if runtimes/*.yaml differ from a fresh fit
    python benchmarks/fit_speed.py --sources llamacpp:rocm   # ... and its held-out rows, by source and one by one

Method. For one runtime on one backend, a decode row's step time is linear in the unknowns
    t = base + sum_c v_c x W/BW [class c] + v_kv x KV/BW + t_layer x layers + t_step + t_moe x moe_layers
          + sum_k alpha_k x collectives [link k] + t_seq x (batch - 1) + the terms of speed.decode_step_time_s,
(t_seq only where rows at batch >= SEQ_BATCH come from MIN_SOURCES_CLASS sources), with base = (W + KV)/BW + comm
bytes/link (the ceiling's step) + layers x max(0, floor - W/(BW x eta)/layers) (a layer's kernels last at least the
floor, which overlaps their read) and v = 1/eta - 1 >= 0, every unknown >= 0 (so the expected figure never beats
the ceiling). The floor is not linear: it is chosen on a grid (FLOORS_S), the fit
of least error kept, then refitted once with its fractions inside the max. The fit minimises the squared relative
error sum ((t_hat - t)/t)^2 with a small ridge (1% of each column's scale) over the box of bounds (nnls: an
active-set Newton method, then coordinate descent; deterministic).
Prefill: t = (FLOPs + (moe_matmul_cost - 1) x routed expert FLOPs)/(peak x eta_p[class]) + the decode fit's fixed
terms (+ a serving engine's cost a layer of PrefillInputs.launch_layers, on the rows a serving engine ran: vLLM's and
SGLang's eager forward counted in kernel launches, estimate/launches.py) + llama.cpp's
prefill_expert_read_cost x the experts' bytes its forwards stream (one read per ubatch) / bandwidth, one eta per
class by least squares, the expert FLOPs' cost and llama.cpp's read cost chosen on grids (fit_prefill). The peak is
the rate the runtime's matmuls run at: llama.cpp's on an NVIDIA card its INT8 rate (kernels.LLAMACPP_CUDA_PRECISION);
a serving engine's attention FLOPs over a 16-bit cache at the 16-bit rate where its weights' rate is higher (FP8, FP4
weights: expected.attention_rate, speed.flop_time_at_peak_s).
The FLOPs' cost also floors a decode step at large batches, where the routed experts' matmuls are compute-bound.
A pool of rows from several backends (a ROCm group fitted with its kin's CUDA and ROCm rows) adds one unknown per
backend beside CUDA, v_be >= 0 on the bytes (weights and cache) its rows stream: the backend's kernels' further
cost, every other term shared; its constants are the pool's with v + v_be. An engine with MoE rows enough on such a
backend (MIN_ROWS_CLASS from MIN_SOURCES_CLASS sources) adds t_moe_be >= 0 a routed-expert layer there, its own
fused-MoE kernels' further cost: its constants' t_moe_layer_s is the pool's plus its t_moe_be.
Held out: each source (one post, comment or table) is left out in turn and its rows predicted by a fit of the
others; the error is |predicted - measured| / measured; the band is the p5..p95 of measured/predicted (BAND_Q).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import operator
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fit_host import fit_host  # noqa: E402

from llmsize.catalog.loader import Catalog  # noqa: E402
from llmsize.catalog.measurement import load_dataset  # noqa: E402
from llmsize.errors import LlmsizeError  # noqa: E402
from llmsize.estimate.observed import Observed, card_of, llamacpp_flash_attn, observe  # noqa: E402
from llmsize.estimate.runtimes import RUNTIME_NAMES  # noqa: E402
from llmsize.estimate.speed import (  # noqa: E402
    CLASS_WORDS,
    Constants,
    attention_time_s,
    ceiling_step_s,
    decode_step_time_s,
    dequant_time_s,
    flop_time_at_peak_s,
    pipeline_factor,
    prefill_time_s,
    score_time_s,
    tile_time_s,
    weight_bytes_by_class,
)

RIDGE = 0.01
# The band: p5 to p95 of the held-out ratios measured / predicted, 90% of a runtime's held-out rows inside it.
# It was p10-p90 until 2026-12-03; the seed's own run (45 tok/s, Gemma 4 12B NVFP4 under vLLM on an RTX 5060 Ti)
# sits at the 93rd percentile of vLLM's held-out ratios and fell outside it (tests/test_speed.py).
BAND_Q = 0.05
SWEEPS = 3000
MIN_ROWS_GROUP = 8  # fewer decode rows on a backend: no constants at all
# a runtime fits constants of its own on a backend from this many decode rows and sources (unless its kin's pool
# holds them out better, median plus p90, and its prompt rows no worse, median plus p90: own_and_pooled; gpt-fast's
# 62 CUDA rows from 3 cards held out at 12.1% / 34.2% on their own, 7.5% / 28.9% in the pool, at 95aa6c2; the sum,
# not each, since a p90 of 20-odd rows is one or two of them: SGLang's 22 AMD rows from three sources, at 9c81a7a,
# held out at 20.4% / 35.7% on their own, 15.3% / 36.8% in the pool, and the pool predicts new rows better
# where its median is five points lower and its p90 one higher); below, it borrows its
# kin's rows (BORROW) where it has kin: seven constants are not pinned by a handful of rows from one or two posts
# and cards: vLLM's 20 ROCm rows of 2025-26 were an MI300X's (405B and gpt-oss) and a Strix Halo's, and a fit of
# them and SGLang's held out at 52.4% median, its prompts at 760.7% (this script at c220c67): too few cards to tell
# the card from the engine
MIN_ROWS_OWN, MIN_SOURCES_OWN, MIN_CARDS_OWN = 20, 3, 3
SEQ_BATCH = 16  # decode rows at this batch or more pin a cost per sequence (DecodeSystem)
MIN_ROWS_CLASS = 6  # fewer rows (or one source) of a format class: it takes the group's default fraction
# format classes whose kernels are unlike the rest (the i-quants' codebook lookups: on an RTX 3090 under Vulkan an
# IQ1_S file decodes at 0.38 of the k-quants' pricing, an IQ2_M one at 0.58; RESULTS.md 2026-12-07): with fewer rows
# than a fraction of their own needs they stay out of the fit (separate_classes) rather than move the default
SEPARATE_CLASSES = ("iquant",)
MIN_SOURCES_CLASS = 2
ETA_MIN = 0.1
LINKS = ("nvlink", "xgmi", "pcie", "network")
BACKEND_WORDS = {"cuda": "CUDA", "rocm": "ROCm", "metal": "Metal", "vulkan": "Vulkan"}
# Runtimes whose batch-1 decode attention runs on the vector units (llama.cpp's fattn-vec / kernel_flash_attn_ext_vec,
# MLX's sdpa_vector): their attention FLOPs cost time beyond the cache's bytes. The CUDA-graph runtimes decode with
# FlashAttention / FlashInfer / FlashMLA kernels on the tensor cores, bound by the cache's bytes except where their
# padded tile's FLOPs outlast the read (speed.attention_excess_s, costed at mm_cost in the mm column).
VECTOR_ATTENTION = ("llamacpp", "mlx")
# The serving engines' extra cost per layer of an eager prefill forward (speed.SERVING_RUNTIMES) is fitted on the
# rows those engines ran, whichever group borrows them, and paid by their plans only. An intercept per request (the
# HTTP path) was tried first: on the SGLang Cookbook's TTFT rows it held out at 65.0% median against 41.1% for
# this per-layer term (a joint fit of both puts the weight on the per-layer term)
# Runtimes fitted together: vLLM and SGLang both capture decode in CUDA graphs and call the same attention
# (FlashInfer, FlashAttention) and GEMM (CUTLASS, Marlin) kernels; the dataset holds few rows of each.
POOLED = {"vllm": ("vllm", "sglang"), "sglang": ("vllm", "sglang")}
# A runtime with too few rows on a backend is fitted on its kin's rows, and its constants say so.
GRAPH_RUNTIMES = ("vllm", "sglang", "trtllm", "gpt-fast")
_GRAPH = "fitted with the other CUDA-graph runtimes' rows (vLLM, SGLang, TensorRT-LLM, gpt-fast)"
BORROW = {
    **{rt: [(GRAPH_RUNTIMES, ("cuda",), _GRAPH + " on NVIDIA cards"),
            (GRAPH_RUNTIMES, ("cuda", "rocm"), _GRAPH + " on NVIDIA and AMD cards")] for rt in GRAPH_RUNTIMES},
    "llamacpp": [(("llamacpp",), ("cuda", "rocm"), "fitted with llama.cpp's CUDA and ROCm rows together"),
                 (("llamacpp",), ("cuda", "rocm", "vulkan"), "fitted with llama.cpp's CUDA, ROCm and Vulkan rows "
                                                             "together")],
}


# ----------------------------------------------------------------------------------------------------- data

def class_bw_s(x) -> dict[str, float]:
    """The step's weight bytes by kernel class (speed.weight_bytes_by_class), in seconds at full bandwidth."""
    return {c: b / x.bandwidth_bytes_per_s for c, b in weight_bytes_by_class(x).items()}


@dataclass(frozen=True)
class StepTerms:
    """A decode row's terms that no fit changes, in seconds: weights, cache and each kernel class's weights at full
    bandwidth, and the speed model's terms per unit of their constants (dequantisation per op a weight, attention per
    attn_cost, tile padding per tile_cost, the step's matmuls at the peak per mm_cost), and the ceiling's step."""
    w_bw_s: float
    kv_bw_s: float
    class_bw_s: dict[str, float]
    dequant_s: float
    attention_s: float
    tile_s: float
    mm_s: float
    ceiling_s: float
    context_tokens: int  # the row's (a property of its dataset row, read by every decode system built)


_STEP_TERMS: dict[int, tuple[Observed, StepTerms]] = {}  # by the row's id, the row kept with them


def step_terms(o: Observed) -> StepTerms:
    """The row's StepTerms, worked out once (the held-out loops build hundreds of decode systems from the same
    rows)."""
    if id(o) not in _STEP_TERMS:
        x = o.step
        _STEP_TERMS[id(o)] = (o, StepTerms(
            x.weight_bytes / x.bandwidth_bytes_per_s, x.kv_bytes / x.bandwidth_bytes_per_s, class_bw_s(x),
            dequant_time_s(x, UNIT_COSTS), attention_time_s(x, UNIT_COSTS), tile_time_s(x, UNIT_COSTS),
            tile_time_s(x, UNIT_MM), ceiling_step_s(x), o.row.context_tokens))
    return _STEP_TERMS[id(o)][1]


def source_key(stem: str, f, row) -> str:
    """The unit left out together: the file's source (a post, a README, a thread: its tables, sections and columns
    are one source, however its rows' `where` tell them apart), or a row's own post where the row links it (`url`:
    another author's comment in the thread). `stem` names the source: the first of the files that cite its page."""
    return f"{stem}::{row.url}" if row.url else stem


def source_names(data: dict) -> dict[str, str]:
    """Each file's source name: files citing one page (one per engine or card of the same post) are one source, left
    out together, so that a page's vLLM rows never validate a fit of vLLM and SGLang that saw its SGLang rows."""
    first: dict[str, str] = {}
    for stem, f in sorted(data.items()):
        first.setdefault(f.source.url, stem)
    return {stem: first[f.source.url] for stem, f in data.items()}


def observations(cat: Catalog) -> tuple[list[Observed], list[tuple[str, str]], dict]:
    data = load_dataset(ROOT / "measurements")
    names = source_names(data)
    out, skipped = [], []
    for stem, f in data.items():
        for i, row in enumerate(f.rows):
            if not (row.card_id or row.card_any_of) or not (row.model_id or row.shape_of):
                skipped.append((f"{stem}#{i}", "card or model not in the catalog"))
                continue
            try:
                gpu, model = card_of(row, cat), cat.model(row.model_id or row.shape_of)
            except LlmsizeError as e:
                skipped.append((f"{stem}#{i}", e.message))
                continue
            if isinstance(gpu, str):
                skipped.append((f"{stem}#{i}", gpu))
                continue
            published = str(f.source.published) if f.source.published else None
            o = observe(row, f.runtime, source_key(names[stem], f, row), model, gpu, published=published)
            if isinstance(o, str):
                skipped.append((f"{stem}#{i}", o))
            else:
                out.append((f"{stem}#{i}", o))
    return separate_classes(out, skipped), skipped, data


def separate_classes(obs: list[tuple[str, Observed]], skipped: list[tuple[str, str]]) -> list[Observed]:
    """The rows of a class whose kernels are unlike every other's (SEPARATE_CLASSES) stay out of a group where they
    are too few for a fraction of their own (MIN_ROWS_CLASS from MIN_SOURCES_CLASS sources, decode and prompts
    apart): pooled, they would move the fraction the group's other formats share. Appended to `skipped`."""
    def key(o: Observed) -> tuple:
        return o.runtime, o.backend, o.row.kind, (o.step or o.prefill).format_class

    counts, sources = defaultdict(int), defaultdict(set)
    for _, o in obs:
        counts[key(o)] += 1
        sources[key(o)].add(o.source_key)
    out = []
    for row_id, o in obs:
        k = key(o)
        if k[3] in SEPARATE_CLASSES and (counts[k] < MIN_ROWS_CLASS or len(sources[k]) < MIN_SOURCES_CLASS):
            skipped.append((row_id, f"{CLASS_WORDS[k[3]]} {k[2]} rows on {o.backend} ({len(sources[k])} "
                                    f"source(s)): too few for a fraction of their own"))
        else:
            out.append(o)
    return out


# ----------------------------------------------------------------------------------------------------- fit

def gram(a, ridge: float):
    """A^T A with the ridge on its diagonal (ridge x each column's squared norm)."""
    a = np.asarray(a, dtype=float)
    g = a.T @ a
    d = np.diag(g).copy()
    g[np.diag_indices_from(g)] += ridge * np.where(d != 0, d, 1.0)
    return g


def nnls(a, b, ridge: float, upper: list[float] | None = None, g=None, x0: list[float] | None = None) -> list[float]:
    """argmin ||A x - b||^2 + ridge x sum (s_j x_j)^2 over 0 <= x <= upper, s_j the rms of column j (g: gram(a,
    ridge), when already computed). A strictly convex quadratic over a box: an active-set Newton method finds
    its minimum in a few linear solves (box_newton), then coordinate descent polishes it to the same fixed point
    as descent from x0 alone would reach (deterministic either way)."""
    a = np.asarray(a, dtype=float)
    n = a.shape[1] if a.size else 0
    g = np.asarray(g if g is not None else gram(a, ridge), dtype=float)
    h = a.T @ np.asarray(b, dtype=float)
    hi = list(upper) if upper else [math.inf] * n
    x = box_newton(g, h, hi, x0)
    rows, hl = g.tolist(), h.tolist()  # the sweeps in plain floats: one coordinate at a time
    for _ in range(SWEEPS):
        delta = 0.0
        for i in range(n):
            gi = rows[i]
            if gi[i] <= 0:
                continue
            grad = sum(map(operator.mul, gi, x)) - hl[i]
            new = min(max(0.0, x[i] - grad / gi[i]), hi[i])
            delta = max(delta, abs(new - x[i]))
            x[i] = new
        if delta < 1e-12:
            break
    return x


def box_newton(g, h, hi: list[float], x0: list[float] | None) -> list[float]:
    """min x'Gx/2 - h'x over 0 <= x <= hi (G positive definite), by a primal active-set method: the variables on
    a bound are held there and the rest take the Newton point of the free ones; a step that would leave the box
    stops at the first bound it meets, which holds that variable; at the Newton point, the held variable whose
    gradient pulls it inward the most is freed; none: the point is the minimum (each bound's multiplier has the
    right sign). Finite for a strictly convex quadratic (the objective falls at every change of the held set)."""
    G, hv, up = np.array(g, dtype=float), np.array(h, dtype=float), np.array(hi, dtype=float)
    x = np.clip(np.array(x0, dtype=float) if x0 is not None else np.zeros(len(hv)), 0.0, up)
    held = (x <= 0.0) | (x >= up)
    for _ in range(20 * len(hv) + 20):
        free = np.flatnonzero(~held)
        target = x.copy()
        if len(free):
            rows = G[free]
            target[free] = np.linalg.solve(rows[:, free], hv[free] - rows[:, held] @ x[held])
        step = target - x
        down = free[step[free] < 0]  # the first bound the step meets, on the free variables
        rise = free[(step[free] > 0) & np.isfinite(up[free])]
        t_down, t_rise = -x[down] / step[down], (up[rise] - x[rise]) / step[rise]
        t = min(1.0, float(np.min(t_down, initial=1.0)), float(np.min(t_rise, initial=1.0)))
        if t < 1.0:  # stop on the bound and hold it
            x = np.clip(x + t * step, 0.0, up)
            hit = np.concatenate([down[t_down <= t], rise[t_rise <= t]])
            x[down[t_down <= t]] = 0.0
            x[rise[t_rise <= t]] = up[rise[t_rise <= t]]
            held[hit] = True
            continue
        x = np.clip(target, 0.0, up)
        grad = G @ x - hv  # a held variable's multiplier: the gradient's pull inward (down from 0, up from hi)
        pull = np.where(held & (x <= 0.0), -grad, 0.0) + np.where(held & (x >= up), grad, 0.0)
        if not np.any(pull > 0):
            break
        held[int(np.argmax(pull))] = False
    return [float(v) for v in x]


@dataclass
class GroupFit:
    runtime: str
    backend: str
    classes: list[str]
    links: list[str]
    v: dict[str, float]
    v_default: float
    v_kv: float
    t_layer_s: float
    t_step_s: float
    t_moe_layer_s: float
    alpha_s: dict[str, float]
    eta_prefill: dict[str, float]
    eta_prefill_default: float | None
    alu_ops_per_weight: float = 0.0
    attn_cost: float = 0.0
    tile_cost: float = 0.0
    t_step_v0_s: float = 0.0
    t_expert_launch_s: float = 0.0
    mm_cost: float = 0.0
    t_prefill_layer_s: float = 0.0
    prefill_consumer_factor: float = 1.0
    moe_matmul_cost: float = 1.0
    prefill_expert_read_cost: float = 0.0
    expert_read_cost: float = 0.0
    t_layer_floor_s: float = 0.0
    t_act_quant_layer_s: float = 0.0
    t_seq_s: float = 0.0
    t_recurrent_layer_s: float = 0.0
    t_shared_expert_layer_s: float = 0.0
    borrowed_terms: tuple[str, ...] = ()  # the terms taken from a pool fit (fit_group, unpinned)
    # a pool of several engines' rows: each engine with rows enough its own fixed costs (t_layer_s, t_step_s)
    fixed_by_runtime: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    # a pool of several backends' rows: each backend's extra streaming cost beside CUDA's (v added to every class),
    # on AMD cards by GPU family (expected.stream_family); `family` the one this fit's constants stream at
    v_backend: dict[str, float] = dataclasses.field(default_factory=dict)
    family: str | None = None
    # and each engine's further cost a routed-expert layer on a backend but CUDA (runtime, backend): its own
    t_moe_backend: dict[tuple[str, str], float] = dataclasses.field(default_factory=dict)

    def eta(self, v: float) -> float:
        """A fraction of the bandwidth from its v, on this group's backend."""
        return 1 / (1 + v + self.v_backend.get(self.family or self.backend, 0.0))

    def fixed_of(self, runtime: str) -> tuple[float, float]:
        """(t_layer_s, t_step_s) of an engine's rows: its own where the pool fitted them, else the pool's."""
        return self.fixed_by_runtime.get(runtime, (self.t_layer_s, self.t_step_s))

    def constants(self, band=(1.0, 1.0), prefill_band=None) -> Constants:
        t_layer_s, t_step_s = self.fixed_of(self.runtime)
        return Constants(
            runtime=self.runtime, backend=self.backend,
            eta_weights={c: self.eta(self.v[c]) for c in self.classes}, eta_weights_default=self.eta(self.v_default),
            eta_kv=self.eta(self.v_kv), t_layer_s=t_layer_s, t_step_s=t_step_s,
            t_moe_layer_s=self.t_moe_layer_s + self.t_moe_backend.get((self.runtime, self.backend), 0.0),
            alpha_s=dict(self.alpha_s), eta_prefill=dict(self.eta_prefill),
            eta_prefill_default=self.eta_prefill_default, band_low=band[0], band_high=band[1], rows_decode=0,
            rows_prefill=0, cards=0, basis="", fitted_classes=tuple(self.classes),
            prefill_band_low=prefill_band[0] if prefill_band else None,
            prefill_band_high=prefill_band[1] if prefill_band else None, alu_ops_per_weight=self.alu_ops_per_weight,
            attn_cost=self.attn_cost, tile_cost=self.tile_cost, t_step_v0_s=self.t_step_v0_s,
            t_expert_launch_s=self.t_expert_launch_s,
            mm_cost=self.mm_cost,
            t_prefill_layer_s=self.t_prefill_layer_s, prefill_consumer_factor=self.prefill_consumer_factor,
            moe_matmul_cost=self.moe_matmul_cost,
            prefill_expert_read_cost=self.prefill_expert_read_cost,
            expert_read_cost=self.expert_read_cost, t_layer_floor_s=self.t_layer_floor_s,
            t_act_quant_layer_s=self.t_act_quant_layer_s, t_seq_s=self.t_seq_s,
            t_recurrent_layer_s=self.t_recurrent_layer_s, t_shared_expert_layer_s=self.t_shared_expert_layer_s)


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return (s[(n - 1) // 2] + s[n // 2]) / 2 if n else float("nan")


# the dequantizing, attention and tile terms per unit of their constants (1 op per weight, costs 1): fit columns
UNIT_COSTS = Constants(runtime="", backend="", eta_weights={}, eta_weights_default=1.0, eta_kv=1.0, t_layer_s=0.0,
                     t_step_s=0.0, t_moe_layer_s=0.0, alpha_s={}, eta_prefill={}, eta_prefill_default=None,
                     band_low=1.0, band_high=1.0, rows_decode=0, rows_prefill=0, cards=0, basis="",
                     alu_ops_per_weight=1.0, attn_cost=1.0, tile_cost=1.0)
# the tile term's other half per unit of its constant: the step's own matmul FLOPs (mm_cost)
UNIT_MM = dataclasses.replace(UNIT_COSTS, tile_cost=0.0, mm_cost=1.0)


# the per-layer kernel floor is chosen on this grid (seconds): 0 to 150 us
FLOORS_S = tuple(k * 1e-5 for k in range(16))
_DECODE_FITS: dict = {}  # groups that share their decode rows (vLLM and SGLang; the borrowed pools) fit them once


TERM_WORDS = {"tile": "the tile cost", "moe": "the routed experts' costs", "prefill": "the prefill constants",
              "prefill_moe": "a routed expert's prompt cost",
              "prefill_classes": "the prompt fraction of the format classes its prompts lack (scaled as the rest)",
              "alpha": "the latency per collective",
              "attn": "the attention cost at depth (its CUDA rows' where the pool has them)",
              "rec": "a recurrent layer's cost", "shexp": "a shared expert's cost"}
DEEP_TOKENS = 2048  # a decode row this deep in its context exercises the attention term


def unpinned(rows: list[Observed]) -> dict[str, bool]:
    """The terms a group's own rows cannot pin, each for want of MIN_ROWS_CLASS rows that exercise it: the tile cost
    (decode rows where it would be 5% of the time at unit cost: cards of a low dense rate beside their bandwidth,
    batches), the routed experts' per-layer and read costs (MoE decode rows), the prefill constants (prompt rows from
    MIN_SOURCES_CLASS sources and MIN_CARDS_OWN cards: vLLM and SGLang's nine ROCm prompts, all on an MI300X and six of
    them one 2024 vLLM's Llama 405B 5-25 times slower than the pool predicts, set the ROCm prefill fraction to 0.049
    where the pool's is 0.458, measurements/pending/README.md), the latency per collective (unless one source ran one
    model on one card over two numbers of cards: rows over a single split would charge their cards' every other
    difference to the hand-offs), and the vector-unit attention's cost (rows DEEP_TOKENS or more into their context on a
    card whose FP32 rate is known, from MIN_SOURCES_CLASS sources: llama.cpp's ROCm rows had three, from two sources,
    and a fit leaving one out priced attention from the other two alone), and a routed expert's cost in a prompt
    (MoE prompt rows: TensorRT-LLM's two, DeepSeek-R1 on B200s, set it to 1 where its kin's rows set 4; its
    max-throughput tables, tests/test_serving_defaults.py, held at 21.2% median with 1, 19.1% with the pool's 4, dataset
    a88dd99), and a recurrent layer's cost (a group with hybrids' rows, but fewer than MIN_ROWS_CLASS or from one
    source: llama.cpp's Vulkan fold without the Strix Halo toolboxes kept 5 and priced its Qwen3.6 rows with none,
    Vulkan held out 13.1% / 32.2% -> 11.8% / 31.6% with the pool's, dataset c0e947d)."""
    dec = [o for o in rows if o.step is not None]
    tiles = sum(1 for o in dec if tile_time_s(o.step, UNIT_COSTS) >= 0.05 * o.measured_s)
    splits = defaultdict(set)
    for o in dec:
        splits[(o.source_key, o.plan.model.id, o.plan.gpu.id)].add(o.step.collectives)
    deep = [o for o in dec if o.row.context_tokens >= DEEP_TOKENS and attention_time_s(o.step, UNIT_COSTS) > 0]
    hybrid = [o for o in dec if o.step.recurrent_layers]
    shared = [o for o in dec if o.step.shared_expert_layers]
    vector = all(o.runtime in VECTOR_ATTENTION for o in dec)
    prompts = [o for o in rows if o.prefill is not None and o.prefill.peak_flop_per_s]
    return {"tile": tiles < MIN_ROWS_CLASS and not vector,  # theirs is 0
            "prefill_moe": not pins_moe_prompts(prompts),
            "attn": vector and (len(deep) < MIN_ROWS_CLASS or len({o.source_key for o in deep}) < MIN_SOURCES_CLASS),
            "moe": sum(1 for o in dec if o.step.moe_layers) < MIN_ROWS_CLASS,
            # hybrids' rows too few to pin a recurrent layer's cost (DecodeSystem leaves it at 0 then): the pool's
            "rec": 0 < len(hybrid) and (len(hybrid) < MIN_ROWS_CLASS
                                        or len({o.source_key for o in hybrid}) < MIN_SOURCES_CLASS),
            # and a shared expert's, where the rows do not pin it apart from a MoE layer's (pins_shared_expert)
            "shexp": 0 < len(shared) and not pins_shared_expert(dec),
            "prefill": len(prompts) < MIN_ROWS_CLASS or len({o.source_key for o in prompts}) < MIN_SOURCES_CLASS
            or len({o.plan.gpu.id for o in prompts}) < MIN_CARDS_OWN,
            "alpha": any(o.step.collectives for o in dec) and not any(len(c) > 1 for c in splits.values())}


def pins_shared_expert(dec: list[Observed]) -> bool:
    """Whether decode rows pin a shared expert's cost apart from a MoE layer's: MIN_ROWS_CLASS rows from
    MIN_SOURCES_CLASS sources of MoE models with a shared expert, and as many of MoE models without one."""
    moe = [o for o in dec if o.step.moe_layers]
    sides = ([o for o in moe if o.step.shared_expert_layers], [o for o in moe if not o.step.shared_expert_layers])
    return all(len(s) >= MIN_ROWS_CLASS and len({o.source_key for o in s}) >= MIN_SOURCES_CLASS for s in sides)


def pins_moe_prompts(prompts: list[Observed]) -> bool:
    """Whether prompt rows pin a routed expert's cost (MIN_ROWS_CLASS MoE prompts)."""
    return sum(1 for o in prompts if o.prefill.expert_flops > 0 and o.prefill.peak_flop_per_s) >= MIN_ROWS_CLASS


def pins_consumer_factor(prompts: list[Observed]) -> bool:
    """Whether prompt rows pin the consumer cards' factor: MIN_ROWS_CLASS rows from MIN_SOURCES_CLASS sources on
    GeForce cards (PrefillInputs.consumer, expected.geforce) and as many on the others."""
    peaked = [o for o in prompts if o.prefill.peak_flop_per_s]
    return all(sum(1 for o in peaked if o.prefill.consumer == flag) >= MIN_ROWS_CLASS
               and len({o.source_key for o in peaked if o.prefill.consumer == flag}) >= MIN_SOURCES_CLASS
               for flag in (True, False))


_GROUP_FITS: dict = {}  # fit_group's fits by their arguments: the held-out loops and the borrowing decisions fit
# the same rows again (RESULTS.md, "The fit's time")


def fit_group(runtime: str, be: str, rows: list[Observed], pool: list[Observed] | None = None,
              pool_prefill: bool = False, hold: tuple[tuple[str, float], ...] = ()) -> GroupFit:
    """_fit_group, once for each set of arguments; a copy, which the caller may change."""
    key = (runtime, be, tuple(map(id, rows)), tuple(map(id, pool)) if pool else None, pool_prefill, hold)
    if key not in _GROUP_FITS:  # the rows are kept with their fit: their ids cannot be reused while it is cached
        _GROUP_FITS[key] = (tuple(rows), tuple(pool or ()), _fit_group(runtime, be, rows, pool, pool_prefill, hold))
    return copy.deepcopy(_GROUP_FITS[key][2])


def _fit_group(runtime: str, be: str, rows: list[Observed], pool: list[Observed] | None = None,
               pool_prefill: bool = False, hold: tuple[tuple[str, float], ...] = ()) -> GroupFit:
    """The decode constants (fit_decode, the kernel floor chosen on FLOORS_S), then prefill's (fit_prefill). With
    `pool` (its kin's rows, BORROW), the terms its own rows cannot pin (unpinned) are the pool fit's, held fixed, and
    with `pool_prefill` the prefill constants too (run() picks that by held-out error); `hold`: unknowns held at a
    value (moe_backend_holds)."""
    dec = [o for o in rows if o.step is not None]
    donor = fit_group(runtime, be, pool) if pool else None
    need = unpinned(rows) if donor else {}
    if donor and pool_prefill:
        need["prefill"] = True
    fixed = dict(hold)
    if need.get("tile"):
        fixed.update({"tile": donor.tile_cost, "mm": donor.mm_cost})
    if need.get("attn"):  # from the pool's CUDA rows where it has them: the same kernels, pinned by deep rows
        # (the CUDA and ROCm pool's own fit, its Strix Halo rows of no citable FP32 rate reading depth as a slow
        # cache, priced it 0: runtimes/llamacpp.yaml at 5c13f51)
        kin = [o for o in pool if o.backend == "cuda"] if be != "cuda" else []
        fixed["attn"] = fit_group(runtime, "cuda", kin).attn_cost if kin else donor.attn_cost
        # and the cache's streaming fraction, which the same deep rows pin: the pool's on this backend (two rows of
        # one depth pair, an RTX 5090's Vulkan runs at 512 and 8,192 tokens, otherwise fit it alone: 0.1 of the
        # bandwidth, and Vulkan runs at 32K-64K tokens held out at 2-7x the speed predicted)
        fixed["v_kv"] = donor.v_kv + donor.v_backend.get(be, 0.0)
    if need.get("moe"):
        fixed.update({"t_moe": donor.t_moe_layer_s, "expert": donor.expert_read_cost})
    if need.get("rec"):
        fixed["t_rec"] = donor.t_recurrent_layer_s
    if need.get("shexp"):
        fixed["t_shexp"] = donor.t_shared_expert_layer_s
    if need.get("alpha"):  # each link the rows cross at the pool's latency (its slowest fitted one if it has none)
        fixed.update({f"alpha:{k}": donor.alpha_s.get(k, max(donor.alpha_s.values(), default=0.0))
                      for k in {o.step.link for o in dec if o.step.collectives and o.step.link}})
    key = (tuple(id(o) for o in dec), runtime in VECTOR_ATTENTION, tuple(sorted(fixed.items())))
    if key not in _DECODE_FITS:  # the rows are kept with their fit: their ids cannot be reused while it is cached
        _DECODE_FITS[key] = (tuple(dec), fit_decode(runtime, be, dec, fixed))
    fit = dataclasses.replace(_DECODE_FITS[key][1], runtime=runtime, backend=be)
    if need.get("prefill"):
        take_prefill(fit, donor)
        need["prefill_moe"] = False  # in the prefill constants
    else:
        same_backend = donor is not None and {o.backend for o in pool} == {be}
        need["prefill_classes"] = fit_prefill(fit, [o for o in rows if o.prefill is not None], donor,
                                              donor if same_backend else None)
    fit.borrowed_terms = tuple(k for k, v in need.items() if v)
    return fit


def fit_decode(runtime: str, be: str, dec: list[Observed], fixed: dict[str, float] | None = None) -> GroupFit:
    """The linear fit at each kernel floor of the grid, the floor of least error kept; then once more at that
    floor with the fitted fractions inside the max (the grid's fits take each layer's read at full bandwidth).
    The floor moves only the target (the ceiling's step plus what the floor adds), so the system's Gram matrix is
    built once and each fit starts from the previous one's solution."""
    sys_ = DecodeSystem(runtime, dec, fixed)
    best, x = None, None
    for floor_s in FLOORS_S:
        x, err = sys_.solve(floor_s, None, x)
        if best is None or err < best[0] - 1e-12:
            best = (err, floor_s, x)
    _, floor_s, x = best
    eta_of = sys_.fit(runtime, be, x, floor_s).constants().eta_w
    x, _ = sys_.solve(floor_s, eta_of, x)
    return sys_.fit(runtime, be, x, floor_s)


# the kernels each CUDA-graph engine decodes with: vLLM and SGLang call the same attention (FlashInfer, FlashAttention)
# and GEMM (CUTLASS, Marlin) kernels; TensorRT-LLM its own; gpt-fast what torch.compile (Inductor) generates
KERNELS = {"vllm": "flashinfer-cutlass", "sglang": "flashinfer-cutlass"}


def _own(dec: list[Observed], key, keep_largest: bool = False) -> list:
    """The keys (engines, kernel families) of a pool with rows enough for a cost of their own: MIN_ROWS_CLASS rows
    from MIN_SOURCES_CLASS sources, the largest aside (the pool's shared terms are its, and those of the rest) unless
    keep_largest (a further cost beside a shared one the rows outside `dec` pin)."""
    rows, sources = defaultdict(int), defaultdict(set)
    for o in dec:
        rows[key(o)] += 1
        sources[key(o)].add(o.source_key)
    largest = max(rows, key=lambda k: (rows[k], k)) if rows else None
    return sorted(k for k, n in rows.items() if (keep_largest or k != largest) and n >= MIN_ROWS_CLASS
                  and len(sources[k]) >= MIN_SOURCES_CLASS)


def moe_backend_keys(dec: list[Observed]) -> list[tuple[str, str]]:
    """(engine, backend) of a pool of several backends whose MoE decode rows on a backend but CUDA may pin a
    routed-expert layer's further cost there (DecodeSystem's t_moe_be): MIN_ROWS_CLASS rows from MIN_SOURCES_CLASS
    sources."""
    if len({o.backend for o in dec}) < 2:
        return []
    return _own([o for o in dec if o.step.moe_layers and o.backend != "cuda"],
                lambda o: (o.runtime, o.backend), keep_largest=True)


def moe_backend_holds(rows: list[Observed]) -> tuple[tuple[str, float], ...]:
    """The engines' further routed-expert costs (moe_backend_keys) a pool does without, each held at 0: those whose
    engine's MoE rows on that backend, each of their sources left out, hold out no better with it (median and p90
    both lower to keep it). SGLang's ROCm rows keep theirs; vLLM's do not: its one source of gpt-oss-20b on an
    MI300X (2025-08-29, at 0.33-0.46) priced the term, and its gpt-oss-120b over 8 MI300X then held out at 3.13-3.23
    times the speed predicted (experiments/no_moe_backend_holds.patch at e802285)."""
    dec = [o for o in rows if o.step is not None]
    holds = []
    for rt, be in moe_backend_keys(dec):
        name = f"t_moe_be:{rt}:{be}"
        test = [o for o in dec if o.runtime == rt and o.backend == be and o.step.moe_layers]
        summary = {}
        for hold in ((), ((name, 0.0),)):
            ho = HeldOut([], [], [], [], [], [])
            for k in sorted({o.source_key for o in test}):
                scored(fit_group(rt, be, [o for o in rows if o.source_key != k], hold=hold),
                       [o for o in test if o.source_key == k], ho)
            summary[hold] = (median(ho.errors), quantile(ho.errors, 0.9, "high"))
        (med, p90), (med0, p90_0) = summary[()], summary[((name, 0.0),)]
        if not (med < med0 and p90 < p90_0):
            holds.append((name, 0.0))
    return tuple(holds)


class DecodeSystem:
    """A decode fit's linear system: per row, its terms per unit of each unknown over the measured time."""

    def __init__(self, runtime: str, dec: list[Observed], fixed: dict[str, float] | None = None):
        """`fixed`: unknowns held at another fit's values (their columns move to the target)."""
        counts, sources = defaultdict(int), defaultdict(set)
        for o in dec:
            counts[o.step.format_class] += 1
            sources[o.step.format_class].add(o.source_key)
        self.classes = sorted(c for c, n in counts.items()
                              if n >= MIN_ROWS_CLASS and len(sources[c]) >= MIN_SOURCES_CLASS)
        self.links = sorted({o.step.link for o in dec if o.step.collectives and o.step.link})
        # engines pooled (the CUDA-graph runtimes) keep their own cost a step (scheduling, sampling: each engine's
        # loop) and, where their kernels differ (KERNELS), their own cost a layer, each where it has rows enough
        # (MIN_ROWS_CLASS from MIN_SOURCES_CLASS sources); the largest and those with too few share the pool's
        self.own_fixed = _own(dec, lambda o: o.runtime)
        self.own_kernels = _own(dec, lambda o: KERNELS.get(o.runtime, o.runtime))
        # rows of several backends (a borrowed pool): each backend but CUDA streams its bytes at a further cost of
        # its own (ROCm's kernels reach less of their cards' peak), the rest of the fit shared; on AMD cards, each
        # GPU family its own (expected.stream_family: CDNA's and RDNA's kernels are written apart)
        self.backends = sorted({o.family for o in dec} - {"cuda"}) if len(
            {o.backend for o in dec}) > 1 else []
        # and each engine's routed-expert layers there a further cost of their own (t_moe_be), where it has MoE rows
        # enough on that backend: fused-MoE kernels are written per engine and vendor (without it SGLang's DeepSeek
        # on an MI300X or MI325X holds out at 0.36-0.93 of the pool's speed and its Gemma 4 26B-A4B at 0.50, its dense
        # Gemma 4 31B at 0.68-0.93, vLLM's gpt-oss-120b at 0.78-1.03: experiments/no_moe_backend_cost.patch at e802285)
        self.moe_backends = moe_backend_keys(dec)
        self.names = [f"v:{c}" for c in self.classes] + ["v:other", "v_kv", "t_layer", "t_step", "t_moe"] + \
            [f"alpha:{k}" for k in self.links] + ["alu", "attn", "tile", "v0", "expert", "act_quant", "t_seq", "mm",
                                                  "launch", "t_rec", "t_shexp"] + \
            [f"t_layer:{k}" for k in self.own_kernels] + [f"t_step:{r}" for r in self.own_fixed] + \
            [f"v_be:{b}" for b in self.backends] + [f"t_moe_be:{r}:{b}" for r, b in self.moe_backends]
        self.dec, rows_a = dec, []
        all_terms = [step_terms(o) for o in dec]
        for o, terms in zip(dec, all_terms):
            x, t = o.step, o.measured_s
            w_bw, kv_bw = terms.w_bw_s, terms.kv_bw_s
            # the format's bytes at their class's fraction, those the scope leaves in 16 bits at the f16 class's and a
            # recipe's other formats at theirs (speed.weights_time_s); a class without a column of its own streams at
            # v:other
            parts = terms.class_bw_s
            row = [parts.get(c, 0.0) for c in self.classes]
            row.append(sum(v for c, v in parts.items() if c not in self.classes))
            kern = KERNELS.get(o.runtime, o.runtime)  # the pool's fixed costs, or its engine's own (below)
            row += [kv_bw, 0.0 if kern in self.own_kernels else x.layers, 0.0 if o.runtime in self.own_fixed else 1.0,
                    x.moe_layers]
            row += [x.collectives if x.link == k else 0.0 for k in self.links]
            row.append(terms.dequant_s)  # seconds per unit of ops per weight
            row.append(terms.attention_s if runtime in VECTOR_ATTENTION else 0.0)  # per attn_cost
            # per unit of tile_cost: the tile's padding (zero for vector kernels, and for an older generation's,
            # which costs mm_cost and is in the mm column below)
            row.append(terms.tile_s)
            row.append(1.0 if x.engine_v0 else 0.0)  # a wait for the CPU a step (vLLM V0, llama.cpp < b6327, SGLang
            # 0.5.7-0.5.13 on a hybrid, without its overlap scheduler: expected.without_overlap)
            row.append(x.expert_weight_bytes / x.bandwidth_bytes_per_s)  # per unit of expert_read_cost
            row.append(x.layers if x.tensor_core_native else 0.0)  # per second of t_act_quant_layer_s
            row.append(x.batch - 1.0)  # per second of t_seq_s: each sequence of the step beyond the first
            row.append(terms.mm_s)  # per unit of mm_cost: the step's own matmul FLOPs at the peak
            row.append(x.expert_launches)  # per second of t_expert_launch_s: an older engine's per-expert kernels
            row.append(x.recurrent_layers)  # per second of t_recurrent_layer_s: a hybrid's SSM / linear layers
            row.append(x.shared_expert_layers)  # per second of t_shared_expert_layer_s: MoE layers with a shared expert
            row += [x.layers if kern == k else 0.0 for k in self.own_kernels]
            row += [1.0 if o.runtime == r else 0.0 for r in self.own_fixed]
            row += [w_bw + kv_bw if o.family == b else 0.0 for b in self.backends]
            row += [x.moe_layers if (o.runtime, o.backend) == k else 0.0 for k in self.moe_backends]
            rows_a.append([r / t for r in row])
        # fractions stay >= ETA_MIN (v <= 1/ETA_MIN - 1): a term the rows cannot pin must not swallow the others
        self.upper = [1 / ETA_MIN - 1 if n.startswith("v") else math.inf for n in self.names]  # v_be: too
        # the cache's own fraction is fitted only where one source measured the same run at two depths >= 2K
        # apart, and only for the runtimes whose decode attention runs on the vector units; else the cache streams
        # like the weights (tied in fit). The CUDA-graph runtimes' split-KV kernels are bound by the cache's bytes
        # (see VECTOR_ATTENTION): their only depth pairs are the SGLang Cookbook's GLM-4.7-Flash (MLA, 20 heads; its
        # step grows ~0.5 us per token of context, ~80x its latent's bytes) and Qwen3-235B (flat), and a fraction
        # fitted to the first (0.10) would cost a GQA cache at 10x its bytes: a kernel of one model, not how caches
        # stream.
        by_source = defaultdict(set)
        for o in dec:
            by_source[(o.source_key, o.plan.model.id, o.plan.gpu.id)].add(step_terms(o).context_tokens)
        self.depth = runtime in VECTOR_ATTENTION and any(max(c) - min(c) >= 2048 for c in by_source.values())
        if not self.depth:
            self.upper[self.names.index("v_kv")] = 0.0
        # a cost per sequence only where rows at large batches (SEQ_BATCH or more) come from MIN_SOURCES_CLASS
        # sources: fewer, and the tile term's growth with the batch and a cost per sequence cannot be told apart
        if len({o.source_key for o in dec if o.row.batch >= SEQ_BATCH}) < MIN_SOURCES_CLASS:
            self.upper[self.names.index("t_seq")] = 0.0
        # a launch of an older engine's per-expert MoE kernel (observed.expert_launches), only where rows ran one;
        # from a single source too: leaving one of two out, the other's rows alone price the launch, which is the
        # test that the cost carries from one model, card and engine to another
        if not any(o.step.expert_launches for o in dec):
            self.upper[self.names.index("launch")] = 0.0
        # a recurrent layer's fixed cost only where hybrids' rows (MIN_ROWS_CLASS from MIN_SOURCES_CLASS sources)
        # pin it; elsewhere a recurrent layer costs what any block does, and its state's bytes
        hybrid = [o for o in dec if o.step.recurrent_layers]
        if len(hybrid) < MIN_ROWS_CLASS or len({o.source_key for o in hybrid}) < MIN_SOURCES_CLASS:
            self.upper[self.names.index("t_rec")] = 0.0
        # a shared expert's alike, where rows of MoE models with one and rows of MoE models without one pin it apart
        # from the routed experts' cost a layer (with one side only, the two columns are one)
        if not pins_shared_expert(dec):
            self.upper[self.names.index("t_shexp")] = 0.0
        # (a term held where a left-out source's rows took away what pinned it is not in this system at all)
        self.fixed = {k: v for k, v in (fixed or {}).items() if k in self.names}
        for name in self.fixed:
            self.upper[self.names.index(name)] = 0.0
        self.A = np.array(rows_a, dtype=float).reshape(len(rows_a), len(self.names))
        self.gram = gram(self.A, RIDGE)
        # per row: the ceiling's step, the weights' time at full bandwidth, layers, measured time (target's inputs)
        self.base_s = np.array([terms.ceiling_s for terms in all_terms])
        self.w_bw_s = np.array([terms.w_bw_s for terms in all_terms])
        # per class, each row's weight bytes its kernels stream, in seconds at full bandwidth
        by_row = [terms.class_bw_s for terms in all_terms]
        self.class_bw_s = {c: np.array([p.get(c, 0.0) for p in by_row]) for c in sorted({c for p in by_row for c in p})}
        self.layers = np.array([float(o.step.layers) for o in dec])
        self.t_s = np.array([o.measured_s for o in dec])

    def target(self, floor_s: float, eta_of) -> np.ndarray:
        """1 - (the ceiling's step + what the kernel floor adds) / measured, per row."""
        base = self.base_s
        if floor_s:
            read = sum(bw / (eta_of(c) if eta_of else 1.0) for c, bw in self.class_bw_s.items())
            per_layer = np.divide(read, self.layers, out=np.zeros_like(self.layers), where=self.layers > 0)
            base = base + self.layers * np.maximum(0.0, floor_s - per_layer)
        b = 1 - base / self.t_s
        for name, value in self.fixed.items():  # a held term's share of each row's time, out of the target
            b = b - self.A[:, self.names.index(name)] * value
        return b

    def solve(self, floor_s: float, eta_of, x0: list[float] | None) -> tuple[list[float], float]:
        """The unknowns at this floor and their squared relative error (without the ridge)."""
        b = self.target(floor_s, eta_of)
        x = nnls(self.A, b, RIDGE, self.upper, g=self.gram, x0=x0) if len(self.A) else [0.0] * len(self.names)
        err = float(np.sum((self.A @ np.array(x) - b) ** 2)) if len(self.A) else 0.0
        return x, err

    def fit(self, runtime: str, be: str, x: list[float], floor_s: float) -> GroupFit:
        theta = {**dict(zip(self.names, x)), **self.fixed}
        v = {c: theta[f"v:{c}"] for c in self.classes}
        # a format class without enough rows streams like 16-bit weights where those were measured, else like
        # the median fitted class
        v_default = v.get("f16", median(list(v.values())) if v else theta["v:other"])
        v_kv = theta["v_kv"] if self.depth or "v_kv" in self.fixed else v_default
        fit = GroupFit(runtime, be, self.classes, self.links, v, v_default, v_kv, theta["t_layer"],
                       theta["t_step"], theta["t_moe"], {k: theta[f"alpha:{k}"] for k in self.links}, {}, None,
                       theta["alu"], theta["attn"], theta["tile"], theta["v0"])
        fit.expert_read_cost = theta["expert"]
        fit.t_act_quant_layer_s = theta["act_quant"]
        fit.t_seq_s = theta["t_seq"]
        fit.mm_cost = theta["mm"]
        fit.t_expert_launch_s = theta["launch"]
        fit.t_recurrent_layer_s = theta["t_rec"]
        fit.t_shared_expert_layer_s = theta["t_shexp"]
        fit.t_layer_floor_s = floor_s
        fit.fixed_by_runtime = {
            r: (theta.get(f"t_layer:{KERNELS.get(r, r)}", theta["t_layer"]), theta.get(f"t_step:{r}", theta["t_step"]))
            for r in {o.runtime for o in self.dec}}
        fit.v_backend = {b: theta[f"v_be:{b}"] for b in self.backends}
        fit.t_moe_backend = {k: theta[f"t_moe_be:{k[0]}:{k[1]}"] for k in self.moe_backends}
        return fit


MOE_MATMUL_COSTS = (1.0, 1.5, 2.0, 3.0, 4.0)  # the grid a routed expert FLOP's cost (in dense FLOPs) is chosen on
# and the grid of a prompt's routed-expert byte's cost (in its full-bandwidth time), for the runtimes that cut a prompt
# into forwards (llama.cpp's ubatches, each reading the experts again): the ubatch sweeps of llama.cpp PRs #22298
# (gemma4 26B.A4B on an RTX 3090: pp2048 at 3,488 t/s with 512-token ubatches, 5,172 with 2,048) and #15631 show its
# MoE prompts paying per forward; the serving engines run a prompt as one forward, and a second MoE constant chosen
# on their few MoE prompt rows held out worse (vLLM CUDA prompts 19.9% -> 32.9% median, 2026-12-03)
EXPERT_READ_COSTS = {"llamacpp": (0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0)}
# and the grid of a GeForce card's prompt fraction over the other cards' (speed.py: GeForce cards run above the boost
# clock their rated peak assumes), chosen where a group's prompt rows pin it (pins_consumer_factor)
CONSUMER_FACTORS = (1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6)


def fit_prefill(fit: GroupFit, pre: list[Observed], donor: GroupFit | None = None,
                classes_from: GroupFit | None = None) -> bool:
    """One eta per format class, for a serving engine one extra cost per layer of a prefill forward (a layer of
    its launch_layers), the cost of a routed expert's FLOP against a dense one (grouped GEMMs, each expert a few rows
    of the prompt), and a consumer card's factor on eta (f; 1 on other cards):
        t = (FLOPs + (moe_matmul_cost - 1) x expert FLOPs) / (peak x eta[class] x f) + fixed
            + launch_layers x t_prefill_layer,
    u = 1/eta (>= 1) and t_prefill_layer (>= 0) by weighted least squares (weights 1/t^2: relative error),
    alternating the closed forms of each (a convex problem: it converges), at each point of the grid of
    moe_matmul_cost and f, keeping the one of least weighted error. Where the rows hold fewer than MIN_ROWS_CLASS MoE
    prompts, the expert's cost is the donor's (the pool a group borrows from), else 1; where they do not pin the
    consumer factor (pins_consumer_factor), it is 1 (the pool's factor, borrowed by TensorRT-LLM, whose one consumer
    source runs a 0.5B model's short prompts far below its long ones' rate, trades its prompts' p90 for their median
    and lowers its own 16-bit fraction: benchmarks/experiments/borrowed_consumer_factor.patch, RESULTS.md). The
    prediction caps eta x f at 1 (speed.prefill_fraction), the fit does not: they differ where it exceeds 1 (the serving engines' 16-bit prompts
    on consumer cards, 1.02). A class with too few rows takes, from `classes_from` (a donor of the group's own
    backend), the donor's fraction scaled by the median ratio of the classes both fit, else the median of its own
    classes; with too few rows of any one class, one fraction for all. (TensorRT-LLM has no FP4 prompt rows of its
    own: the median of its 8-bit and 16-bit fractions puts its FP4 prompts above its FP8 ones, and MLPerf's 405B
    Offline results then imply a B200 prompt 1.37x the H200's, 1.04x with the pool's relation; a donor of two
    backends lends none: llama.cpp's CUDA prompts hold out at 13.3% / 38.9% with its CUDA and ROCm pool's classes,
    13.0% / 32.0% without. benchmarks/experiments/no_class_lending.patch and classes_from_any_pool.patch, RESULTS.md.
    Returns whether a class was lent.)"""
    best = None
    reads = EXPERT_READ_COSTS.get(fit.runtime, (0.0,))
    grid = ([(c, r) for r in reads for c in MOE_MATMUL_COSTS] if pins_moe_prompts(pre)
            else [(donor.moe_matmul_cost, donor.prefill_expert_read_cost)] if donor else [(1.0, 0.0)])
    factors = CONSUMER_FACTORS if pins_consumer_factor(pre) else (1.0,)
    grid = [(c, r, f) for c, r in grid for f in factors]
    for err, point in _fit_prefill_grid(PrefillTable.of(fit, pre), grid):
        if best is None or err < best[0] - 1e-12:
            best = (err, point)
    for name, value in best[1].items():
        setattr(fit, name, value)
    lender = classes_from.eta_prefill if classes_from else {}
    shared = [c for c in fit.eta_prefill if c in lender]
    if not shared:
        return False
    # a class its rows cannot pin: the lender's fraction, scaled as the classes both fit
    scale = median([fit.eta_prefill[c] / lender[c] for c in shared])
    lent = [c for c in lender if c not in fit.eta_prefill]
    for c in lent:
        fit.eta_prefill[c] = min(1.0, lender[c] * scale)
    return bool(lent)


PREFILL_TERMS = ("eta_prefill_default", "t_prefill_layer_s", "prefill_consumer_factor", "moe_matmul_cost",
                 "prefill_expert_read_cost")


def take_prefill(fit: GroupFit, source: GroupFit) -> None:
    """`source`'s prompt constants into `fit` (a borrowed group's donor)."""
    fit.eta_prefill = dict(source.eta_prefill)
    for name in PREFILL_TERMS:
        setattr(fit, name, getattr(source, name))


@dataclass(frozen=True)
class PrefillTable:
    """The prompt rows' terms that the grid of fit_prefill does not change, one array entry per row (rows whose
    card has a rate), by format class: measured time (a pipelined prompt's through its stages one after the other:
    speed.pipeline_factor), fixed time (per layer, per step, unfused attention's score bytes at the decode fit's
    cache fraction), a serving engine's launch_layers (0 for other runtimes' rows), dense and routed
    FLOP time at eta 1, routed-expert read at full bandwidth."""
    by_class: dict[str, dict[str, np.ndarray]]
    serving_rows: int

    @staticmethod
    def of(fit: GroupFit, pre: list[Observed]) -> PrefillTable:
        kc = fit.constants()
        by_class = defaultdict(list)
        for o in pre:
            if o.prefill.peak_flop_per_s:
                by_class[o.prefill.format_class].append(o)
        cols = {}
        for c, obs in by_class.items():
            x = [o.prefill for o in obs]
            cols[c] = {k: np.array(v, dtype=float) for k, v in (
                ("meas", [o.measured_s / pipeline_factor(o.prefill) for o in obs]),
                ("fixed", [p.layers * fit.fixed_of(o.runtime)[0] + fit.fixed_of(o.runtime)[1] + score_time_s(p, kc)
                           for o, p in zip(obs, x)]),
                ("layers", [p.launch_layers for p in x]),
                ("consumer", [1.0 if p.consumer else 0.0 for p in x]),
                ("dense", [flop_time_at_peak_s(p) for p in x]),
                ("expert", [p.expert_flops / p.peak_flop_per_s for p in x]),
                ("read", [p.expert_read_bytes / p.bandwidth_bytes_per_s for p in x]))}
        return PrefillTable(cols, sum(1 for obs in by_class.values() for o in obs if o.prefill.serving))


def _fit_prefill_grid(table: PrefillTable, grid: list[tuple[float, float, float]]) -> list[tuple[float, dict]]:
    """fit_prefill at each (moe_matmul_cost, prefill_expert_read_cost, consumer factor) of the grid: per point, the
    weighted squared error of the rows it fitted and the prompt constants (PREFILL_TERMS and eta_prefill). The
    rows' terms at every point are one array (a row per point), so each sum is one reduction over the grid."""
    costs, reads, factors = (np.array(v, dtype=float)[:, None] for v in zip(*grid))
    counts = {c: len(t["meas"]) for c, t in table.by_class.items()}
    pooled = not any(n >= MIN_ROWS_CLASS for n in counts.values())
    # per class and point: measured, fixed (the expert read at the point included), layers, FLOP time at eta 1
    rows = {c: (t["meas"], t["fixed"] + reads * t["read"], t["layers"],
                (t["dense"] + (costs - 1) * t["expert"]) / (1 + (factors - 1) * t["consumer"]))
            for c, t in table.by_class.items()}
    if pooled and rows:
        rows = {"*": tuple(np.concatenate(cols, axis=-1) for cols in zip(*rows.values()))}
    serving = table.serving_rows >= MIN_ROWS_CLASS
    # the alternation's sums, which do not change from one round to the next: per class (A, B, D) with
    # num_c = A - t_pl x B and den_c = D; for t_pl, num = P - sum_c u_c x B_c and den = Q
    sums = {c: tuple(np.sum(v, axis=-1).tolist() for v in (
        area * (meas - fixed) / meas**2, area * layers / meas**2, area ** 2 / meas**2))
        for c, (meas, fixed, layers, area) in rows.items()}
    p_sums = [np.sum(layers * (meas - fixed) / meas**2, axis=-1).tolist() for meas, fixed, layers, _ in rows.values()]
    q_sum = sum(float(np.sum(layers ** 2 / meas**2)) for meas, _, layers, _ in rows.values())
    points = [_alternate([(c, a_c[g], b_c[g], d_c[g]) for c, (a_c, b_c, d_c) in sums.items()],
                         sum(p[g] for p in p_sums), q_sum, serving) for g in range(len(grid))]
    errs = {c: _prefill_errors(rows[c], [u[c] for u, _ in points], [t_pl for _, t_pl in points]) for c in rows}
    out = []
    for g, ((cost, read, factor), (u, t_pl)) in enumerate(zip(grid, points)):
        etas = {c: 1 / v for c, v in u.items() if math.isfinite(v)}
        if pooled:
            eta_prefill = {}
            default = etas.get("*") if sum(counts.values()) >= MIN_ROWS_CLASS else None
        else:
            eta_prefill = {c: e for c, e in etas.items() if counts[c] >= MIN_ROWS_CLASS}
            default = median(list(eta_prefill.values())) if eta_prefill else None
        out.append((sum(errs[c][g] for c in rows), {
            "moe_matmul_cost": cost, "prefill_expert_read_cost": read, "prefill_consumer_factor": factor,
            "t_prefill_layer_s": t_pl, "eta_prefill": eta_prefill, "eta_prefill_default": default}))
    return out


def _alternate(terms: list[tuple[str, float, float, float]], p_sum: float, q_sum: float,
               serving: bool) -> tuple[dict[str, float], float]:
    """One grid point's closed forms, alternated: each class's u = max(1, (A - t_pl x B) / D) (infinite where the
    rows cannot fit it), then, for a serving engine, t_pl = max(0, (P - sum_c u_c x B_c) / Q), until t_pl stands
    still (at most 200 rounds). `terms`: (class, A, B, D)."""
    u, t_pl = {c: 1.0 for c, *_ in terms}, 0.0
    for _ in range(200 if serving else 1):
        fitted = True
        for c, a_c, b_c, d_c in terms:
            num = a_c - t_pl * b_c
            u[c] = max(1.0, num / d_c) if d_c > 0 and num > 0 else math.inf
            fitted = fitted and not math.isinf(u[c])
        if serving:
            if not fitted:
                t_pl = 0.0  # a class the rows cannot fit: no per-layer cost from them
            else:
                num = p_sum - sum([u[c] * b_c for c, _, b_c, _ in terms])
                before, t_pl = t_pl, max(0.0, num / q_sum) if q_sum > 0 else 0.0
                if t_pl == before:  # a fixed point: every further round would give the same u and t_pl
                    break
    return u, t_pl


def _prefill_errors(cols: tuple, u: list[float], t_pl: list[float]) -> list[float]:
    """One class's weighted squared error at each grid point (its fraction 1/u and per-layer cost there); a class
    the rows cannot fit (u infinite) counts 1 a row."""
    meas, fixed, layers, area = cols
    finite = [math.isfinite(v) for v in u]
    u_col = np.array([v if f else 0.0 for v, f in zip(u, finite)])[:, None]
    t_col = np.array(t_pl)[:, None]
    err = np.sum(((meas - fixed - t_col * layers - area * u_col) / meas) ** 2, axis=-1).tolist()
    return [e if f else float(len(meas)) for e, f in zip(err, finite)]


def predict(fit: GroupFit, o: Observed) -> float | None:
    """A row's time under the fit, with its own engine's fixed costs where the pool fitted them, and its own
    backend's streaming cost where the pool spans several."""
    c = dataclasses.replace(fit, runtime=o.runtime, backend=o.backend,
                            family=o.family).constants()
    if o.step is not None:
        return decode_step_time_s(o.step, c)
    return prefill_time_s(o.prefill, c)


# ----------------------------------------------------------------------------------------------------- held out

def quantile(xs: list[float], q: float, side: str) -> float:
    """Conservative order statistic: the low side rounds down, the high side up (the band covers >= 1 - 2q)."""
    s = sorted(xs)
    if not s:
        return 1.0
    k = q * (len(s) - 1)
    return s[math.floor(k)] if side == "low" else s[math.ceil(k)]


@dataclass
class HeldOut:
    errors: list[float]  # |pred - meas| / meas, as rates (tok/s)
    ratios: list[float]  # measured rate / predicted rate
    segments: list[str] = dataclasses.field(default_factory=list)  # each row's card segment (consumer, ...)
    groups: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # each row's runtime and backend
    sources: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # each row's source key and card
    labels: list[str] = dataclasses.field(default_factory=list)  # each row's model, format, cards, batch, context

    def of(self, runtime: str, be: str) -> HeldOut:
        """The rows `runtime` ran on backend `be`, of a fit that pooled or borrowed others'."""
        keep = [i for i, g in enumerate(self.groups) if g == (runtime, be)]
        return HeldOut(*([xs[i] for i in keep]
                         for xs in (self.errors, self.ratios, self.segments, self.groups, self.sources, self.labels)))

    def summary(self, band) -> dict:
        cov = sum(band[0] <= r <= band[1] for r in self.ratios) / len(self.ratios) if self.ratios else 0.0
        return {"rows": len(self.errors), "median_abs_error": round(median(self.errors), 4) if self.errors else 0.0,
                "p90_abs_error": round(quantile(self.errors, 0.9, "high"), 4) if self.errors else 0.0,
                "band_coverage": round(cov, 4)}


def held_out(runtime: str, be: str, rows: list[Observed], kind: str, pool: list[Observed] | None = None,
             pool_prefill: bool = False, hold: tuple[tuple[str, float], ...] = ()) -> HeldOut:
    """Leave one source out: fit on the others (and on the pool's other sources where the group borrows terms),
    predict the source's rows."""
    keys = sorted({o.source_key for o in rows})
    ho = HeldOut([], [], [], [], [], [])
    for k in keys:
        train = [o for o in rows if o.source_key != k]
        test = [o for o in rows if o.source_key == k and (o.step is not None) == (kind == "decode")]
        if not test or not [o for o in train if (o.step is not None) == (kind == "decode")]:
            continue
        fit = fit_group(runtime, be, train, [o for o in pool if o.source_key != k] if pool else None, pool_prefill,
                        hold)
        scored(fit, test, ho)
    return ho


def scored(fit: GroupFit, rows: list[Observed], into: HeldOut | None = None) -> HeldOut:
    """The fit's errors on rows it did not see."""
    ho = into if into is not None else HeldOut([], [], [], [], [], [])
    for o in rows:
        t_hat = predict(fit, o)
        if t_hat is None:
            continue
        ratio = t_hat / o.measured_s  # measured rate / predicted rate
        ho.ratios.append(ratio)
        ho.errors.append(abs(1 / ratio - 1))
        ho.segments.append(o.plan.gpu.segment)
        ho.groups.append((o.runtime, o.backend))
        ho.sources.append((o.source_key.split("::")[0], o.plan.gpu.id))
        ho.labels.append(f"{o.plan.model.id} {o.plan.fmt.id} {o.row.gpus} x {o.plan.gpu.id} batch {o.row.batch} "
                         + (f"context {o.row.context_tokens:,}" if o.step is not None
                            else f"prompt {o.row.context_tokens:,}"))
    return ho


# ----------------------------------------------------------------------------------------------------- output

def dataset_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %cs", "--", "measurements"],
                              capture_output=True, text=True, timeout=30).stdout.strip() or "uncommitted"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def r4(x: float) -> float:
    return float(f"{x:.4g}")


def group_yaml(fit: GroupFit, rows: list[Observed], band, pband, ho_d: HeldOut, ho_p: HeldOut) -> dict:
    """The group's constants as runtimes/*.yaml keeps them (the row counts its own; a borrowed term says so): the
    decode terms as GroupFit.constants() gives them to predict(), so the shipped ones are those held out."""
    dec = [o for o in rows if o.step is not None]
    pre = [o for o in rows if o.prefill is not None]
    c = fit.constants()
    g = {
        "eta_weights": {k: r4(e) for k, e in c.eta_weights.items()},
        "eta_weights_default": r4(c.eta_weights_default),
        "eta_kv": r4(c.eta_kv),
        "t_layer_s": r4(c.t_layer_s), "t_step_s": r4(c.t_step_s),
        "t_moe_layer_s": r4(c.t_moe_layer_s),
        "alu_ops_per_weight": r4(fit.alu_ops_per_weight), "attn_cost": r4(fit.attn_cost),
        "tile_cost": r4(fit.tile_cost), "mm_cost": r4(fit.mm_cost),
        "t_step_v0_s": r4(fit.t_step_v0_s), "t_expert_launch_s": r4(fit.t_expert_launch_s),
        "t_prefill_layer_s": r4(fit.t_prefill_layer_s), "prefill_consumer_factor": r4(fit.prefill_consumer_factor),
        "expert_read_cost": r4(fit.expert_read_cost),
        "t_layer_floor_s": r4(fit.t_layer_floor_s),
        "t_act_quant_layer_s": r4(fit.t_act_quant_layer_s), "t_seq_s": r4(fit.t_seq_s),
        "t_recurrent_layer_s": r4(fit.t_recurrent_layer_s),
        "t_shared_expert_layer_s": r4(fit.t_shared_expert_layer_s),
        "moe_matmul_cost": fit.moe_matmul_cost,
        "prefill_expert_read_cost": fit.prefill_expert_read_cost,
        "alpha_s": {k: r4(v) for k, v in fit.alpha_s.items()},
        "eta_prefill": {c: r4(e) for c, e in fit.eta_prefill.items()},
        "eta_prefill_default": r4(fit.eta_prefill_default) if fit.eta_prefill_default else None,
        "band": [r4(band[0]), r4(band[1])],
        "prefill_band": [r4(pband[0]), r4(pband[1])] if pband else None,
        "rows_decode": len(dec), "hybrid_rows_decode": sum(1 for o in dec if o.step.recurrent_layers),
        "shared_expert_rows_decode": sum(1 for o in dec if o.step.shared_expert_layers),
        "rows_prefill": len(pre),
        "cards": sorted({o.plan.gpu.id for o in rows}),
        "row_backends": sorted({o.backend for o in rows}),
        "decode_held_out": ho_d.summary(band) if ho_d.errors else None,
        "prefill_held_out": ho_p.summary(pband) if ho_p.errors and pband else None,
    }
    if fit.backend == "rocm" and "rdna" in fit.v_backend:  # RDNA cards' own streaming cost (stream_family)
        r = dataclasses.replace(fit, family="rdna").constants()
        rd = [o for o in dec if o.family == "rdna"]
        g["rdna"] = {"eta_weights": {k: r4(e) for k, e in r.eta_weights.items()},
                     "eta_weights_default": r4(r.eta_weights_default), "eta_kv": r4(r.eta_kv),
                     "rows_decode": len(rd), "sources": len({o.source_key for o in rd}),
                     "cards": sorted({o.plan.gpu.id for o in rd})}
    own_moe = fit.t_moe_backend.get((fit.runtime, fit.backend), 0.0)
    if own_moe > 0:  # the engine's own further cost a routed-expert layer on this backend (t_moe_be), as the shipped
        # constants give it: its t_moe_layer_s less the others', each rounded as written
        own_moe = r4(fit.t_moe_layer_s + own_moe) - r4(fit.t_moe_layer_s)
        models = Counter(o.plan.model.name for o in dec if o.runtime == fit.runtime
                         and o.backend == fit.backend and o.step.moe_layers)
        g["own_moe"] = (f"{RUNTIME_NAMES[fit.runtime]}'s MoE layers on {BACKEND_WORDS[fit.backend]} cost "
                        f"{own_moe * 1e3:.3f} ms more each than the other engines', fitted on its own MoE decode rows "
                        "there (" + ", ".join(f"{m} x {n}" for m, n in models.most_common()) + ")")
    return g


def band_of(ho: HeldOut):
    if len(ho.ratios) < 5:
        return None
    lo, hi = quantile(ho.ratios, BAND_Q, "low"), quantile(ho.ratios, 1 - BAND_Q, "high")
    return min(lo, 1.0), max(hi, 1.0)


def runtime_band(own: HeldOut, fit_rows: HeldOut):
    """The band of a runtime whose fit used others' rows too: its own rows' from MIN_ROWS_OWN of them; from fewer,
    the wider of theirs (under 5, their extremes) and the fit's: a handful of rows cannot narrow it, but where they
    lie outside it they widen it; none of its own, the fit's."""
    mine, theirs = band_of(own), band_of(fit_rows)
    if own is fit_rows or len(own.ratios) >= MIN_ROWS_OWN or theirs is None:
        return mine or theirs
    if mine is None and own.ratios:
        mine = (min(min(own.ratios), 1.0), max(max(own.ratios), 1.0))
    return (min(mine[0], theirs[0]), max(mine[1], theirs[1])) if mine else theirs


def print_sources(rt: str, be: str, ho: HeldOut, kind: str = "decode") -> None:
    """Per source and card, the held-out rows' (decode or prefill) measured / predicted (median, lowest, highest),
    then each row."""
    if not ho.ratios:
        return
    by = defaultdict(list)
    for key, ratio in zip(ho.sources, ho.ratios):
        by[key].append(ratio)  # measured rate / predicted rate
    print(f"\nHeld out by source ({rt} on {BACKEND_WORDS[be]}, {kind}): rows, measured / predicted median, lowest, "
          "highest")
    for (src, card), xs in sorted(by.items(), key=lambda kv: (median(kv[1]), kv[0])):
        print(f"{len(xs):4d} {median(xs):6.2f} {min(xs):6.2f} {max(xs):6.2f}   {src} ({card})")
    print(f"\nHeld out row by row ({rt} on {BACKEND_WORDS[be]}, {kind}): measured / predicted, source, row")
    for ratio, (src, _), label in sorted(zip(ho.ratios, ho.sources, ho.labels)):
        print(f"{ratio:6.2f}   {src}   {label}")


def print_by_runtime(by_runtime: dict[str, list[tuple[str, HeldOut, tuple[float, float]]]]) -> None:
    """Each runtime's own decode rows over all its backends (the unit the targets name: a runtime), each row
    predicted by its backend's fit, held out as in the table, and judged against that fit's band."""
    print("\nHeld out by runtime, all backends (its own decode rows): rows, median, p90, band coverage")
    for rt, parts in by_runtime.items():
        errors = [e for _, ho, _ in parts for e in ho.errors]
        inside = sum(lo <= r <= hi for _, ho, (lo, hi) in parts for r in ho.ratios)
        print(f"{rt:10} {len(errors):>6} {median(errors):>7.1%} {quantile(errors, 0.9, 'high'):>7.1%} "
              f"{inside / len(errors):>8.0%}   backends {', '.join(sorted(be for be, _, _ in parts))}")


def own_and_pooled(rt: str, be: str, rows: list[Observed], pool: list[Observed]) -> tuple[tuple, tuple]:
    """(median, p90) held out on the runtime's own decode rows on the backend, then on its own prompt rows (None
    where it has none): of its own group's fit (its kin pool lending the terms its rows cannot pin, and its prompts'
    constants the better of its own and the pool's, as run() fits it), and of the pool's it would borrow."""
    def mp(ho):
        h = ho.of(rt, be)
        return (median(h.errors), quantile(h.errors, 0.9, "high")) if h.errors else None

    hold = moe_backend_holds(pool)
    own_p = [mp(held_out(rt, be, rows, "prefill", pool, flag)) for flag in (False, True)]
    own_p = min((x for x in own_p if x), default=None)
    return ((mp(held_out(rt, be, rows, "decode", pool)), own_p),
            (mp(held_out(rt, be, pool, "decode", hold=hold)), mp(held_out(rt, be, pool, "prefill", hold=hold))))


def run(write: bool, check: bool, sources: str | None = None, observed: tuple | None = None) -> int:
    """The fit, printed; `observed`: observations(Catalog())'s result where the caller has it already (the test
    suite's own), else read here."""
    import yaml

    cat = Catalog()
    obs, skipped, data = observed if observed is not None else observations(cat)
    groups = defaultdict(list)
    for o in obs:
        be = o.backend
        if be:
            for rt in {o.runtime, *[r for r, pool in POOLED.items() if o.runtime in pool]}:
                groups[(rt, be)].append(o)
    borrowed, decided = {}, set()
    for key in list(groups) + [(rt, be) for rt in GRAPH_RUNTIMES for be in ("cuda", "rocm")]:
        rt, be = key
        if rt == "trtllm" and be != "cuda":
            groups.pop(key, None)
            continue  # TensorRT-LLM runs on NVIDIA cards only
        if rt not in BORROW or key in decided:
            continue
        decided.add(key)
        own = [o for o in groups.get(key, []) if o.step is not None and o.runtime == rt]
        enough = (len(own) >= MIN_ROWS_OWN and len({o.source_key for o in own}) >= MIN_SOURCES_OWN
                  and len({o.plan.gpu.id for o in own}) >= MIN_CARDS_OWN)
        for pool_rts, pool_bes, why in BORROW[rt]:
            if be not in pool_bes:  # a pool with the backend's own rows (and its streaming cost, v_be)
                continue
            rows = [o for o in obs if o.runtime in pool_rts and o.backend in pool_bes]
            if len([o for o in rows if o.step is not None]) < MIN_ROWS_GROUP:
                continue
            n_src, n_card = len({o.source_key for o in own}), len({o.plan.gpu.id for o in own})
            if enough:  # rows enough for constants of its own: kept unless the pool's hold its rows out better,
                # its decode rows at median plus p90 and its prompt rows no worse (where it has them)
                (a, a_p), (b, b_p) = own_and_pooled(rt, be, groups[key], rows)
                if not (sum(b) < sum(a) and (a_p is None or (b_p and sum(b_p) <= sum(a_p)))):
                    break
                short = (f"its own held out worse on them ({a[0]:.1%} / {a[1]:.1%} median / p90, the pool's "
                         f"{b[0]:.1%} / {b[1]:.1%})")
            else:
                short = (f"short of constants of its own ({MIN_ROWS_OWN} rows, {MIN_SOURCES_OWN} sources, "
                         f"{MIN_CARDS_OWN} cards)")
            groups[key] = rows
            borrowed[key] = (f"{len(own)} decode row{'s' if len(own) != 1 else ''} of its own on "
                             f"{BACKEND_WORDS[be]} from {n_src} source{'s' if n_src != 1 else ''} and {n_card} "
                             f"card{'s' if n_card != 1 else ''}, {short}: {why}")
            break
    table, specs, by_segment, per_source, by_runtime = [], defaultdict(dict), [], None, defaultdict(list)
    holds = {}  # a borrowed pool of several backends: the engines' MoE costs there it does without, once per pool
    for (rt, be), rows in sorted(groups.items()):
        dec = [o for o in rows if o.step is not None]
        if len(dec) < MIN_ROWS_GROUP:
            table.append((rt, be, len(dec), None, None, None, None, "too few decode rows: no constants"))
            continue
        hold = ()
        if (rt, be) in borrowed:
            key = tuple(id(o) for o in rows)
            if key not in holds:
                holds[key] = moe_backend_holds(rows)
            hold = holds[key]
        # a group of its own rows takes from its kin's pool (BORROW) the terms those rows cannot pin
        pool, why = None, None
        if (rt, be) not in borrowed:
            pool, why = next(((p, w) for p, w in (  # a pool of its own backend's rows and its kin's
                ([o for o in obs if o.runtime in rts and o.backend in bes], w)
                for rts, bes, w in BORROW.get(rt, ()) if be in bes)
                if sum(1 for o in p if o.step is not None) >= MIN_ROWS_GROUP), (None, None))
        # prompts fitted on its own rows, or taken from the pool where that predicts its own prompt rows better
        # (median and p90 both, each of their sources left out)
        pool_prefill, ho_p, choice = False, None, None
        if pool is not None and not unpinned(rows)["prefill"]:
            own_p, pooled_p = (held_out(rt, be, rows, "prefill", pool, flag) for flag in (False, True))
            if own_p.errors and pooled_p.errors:
                a, b = own_p.summary((1.0, 1.0)), pooled_p.summary((1.0, 1.0))
                pool_prefill = (b["median_abs_error"] < a["median_abs_error"]
                                and b["p90_abs_error"] <= a["p90_abs_error"])
                whose = "the pool's" if pool_prefill else "its own"
                choice = (f"prompt constants: {whose} (held out: its own "
                          f"{a['median_abs_error']:.1%} / {a['p90_abs_error']:.1%}, the pool's "
                          f"{b['median_abs_error']:.1%} / {b['p90_abs_error']:.1%})")
            ho_p = pooled_p if pool_prefill else own_p  # its own prompt rows' errors either way
        fit = fit_group(rt, be, rows, pool, pool_prefill, hold)
        ho_d = held_out(rt, be, rows, "decode", pool, pool_prefill, hold)
        pre_rows = pool if "prefill" in fit.borrowed_terms else rows
        if ho_p is None:  # a prefill taken for want of prompt rows of its own: the pool's held-out error
            ho_p = held_out(rt, be, pre_rows, "prefill", hold=hold if pre_rows is rows else ())
        # a fit on others' rows too (pooled, borrowed) is judged on the rows this runtime ran: its table line and,
        # from MIN_ROWS_OWN of them, its band are theirs
        mixed = {(o.runtime, o.backend) for o in rows} != {(rt, be)}
        own_d, own_p = (ho.of(rt, be) if mixed else ho for ho in (ho_d, ho_p))
        if (rt, be) in borrowed:  # its own rows, outside the pool it borrowed, are held out by construction
            unseen = [o for o in obs if o.runtime == rt and o.backend == be and o not in rows]
            own_d = scored(fit, [o for o in unseen if o.step is not None], own_d)
            own_p = scored(fit, [o for o in unseen if o.prefill is not None], own_p)
        band = runtime_band(own_d, ho_d) or (0.7, 1.3)
        pband = runtime_band(own_p, ho_p)
        specs[rt][be] = group_yaml(fit, rows, band, pband, ho_d, ho_p)
        if mixed:
            specs[rt][be]["runtimes"] = sorted({o.runtime for o in rows}, key=list(RUNTIME_NAMES).index)
            specs[rt][be]["own_decode_held_out"] = own_d.summary(band) if own_d.errors else None
        if (rt, be) in borrowed:
            specs[rt][be]["borrowed"] = borrowed[(rt, be)]
        elif fit.borrowed_terms:
            why_not = ("its own rows cannot pin them" if not pool_prefill else
                       "they predict its own prompts better, median and p90, each source left out"
                       if fit.borrowed_terms == ("prefill",)
                       else "its own rows cannot pin them, and the pool's prefill predicts its prompts better")
            specs[rt][be]["borrowed"] = f"{', '.join(TERM_WORDS[t] for t in fit.borrowed_terms)} {why} ({why_not})"
        shown_d = own_d if own_d.errors else ho_d  # a runtime without rows of its own: the pool's
        shown_p = own_p if own_p.errors else ho_p
        sd, sp = shown_d.summary(band), shown_p.summary(pband) if pband and shown_p.errors else None
        by_segment.append((rt, be, shown_d, shown_p))
        if own_d.errors:  # the runtime's own rows on this backend, each against its group's band
            by_runtime[rt].append((be, own_d, band))
        if sources == f"{rt}:{be}":
            per_source = (rt, be, shown_d, shown_p)
        unscored = sum(1 for o in dec if o.runtime == rt and o.backend == be) - len(own_d.errors)
        note = f"cards {len({o.plan.gpu.id for o in rows})}, sources {len({o.source_key for o in rows})}"
        if mixed:
            g = ho_d.summary(band)
            note += (f"; fit on {g['rows']} rows of {', '.join(sorted({o.runtime for o in rows}))}: "
                     f"{g['median_abs_error']:.1%} / {g['p90_abs_error']:.1%}"
                     + ("" if own_d.errors else f"; none of {rt}'s own on {be}: the fit's rows shown"))
        if sp and (rt, be) not in shown_p.groups:  # its prompt figures rest on others' rows: say whose they are
            note += f"; prompts: none of {rt}'s own on {be}, its kin's rows shown"
        if choice:
            note += f"; {choice}"
        if unscored > 0:
            note += f"; {unscored} decode rows unscored (without their source the group has < {MIN_ROWS_GROUP} rows)"
        table.append((rt, be, sd["rows"], sd["median_abs_error"], sd["p90_abs_error"], sd["band_coverage"], sp, note))
    print(f"Held-out error (leave one source out), dataset {dataset_commit()}, {len(obs)} rows used, "
          f"{len(skipped)} skipped\n")
    print(f"{'runtime':10} {'backend':7} {'decode rows':>11} {'median':>7} {'p90':>7} {'band cov':>8}   "
          f"{'prefill rows':>12} {'median':>7} {'p90':>7}   notes")
    for rt, be, n, med, p90, cov, sp, note in table:
        if med is None:
            print(f"{rt:10} {be:7} {n:>11} {'-':>7} {'-':>7} {'-':>8}   {'-':>12} {'-':>7} {'-':>7}   {note}")
            continue
        pre = (f"{sp['rows']:>12} {sp['median_abs_error']:>7.1%} {sp['p90_abs_error']:>7.1%}" if sp
               else f"{'-':>12} {'-':>7} {'-':>7}")
        print(f"{rt:10} {be:7} {n:>11} {med:>7.1%} {p90:>7.1%} {cov:>8.0%}   {pre}   {note}")
    print_by_runtime(by_runtime)
    print("\nHeld out by card segment (the same leave-one-source-out predictions): rows, median, p90")
    print(f"{'runtime':10} {'backend':7} {'segment':12} {'decode':>22}   {'prefill':>22}")
    for rt, be, ho_d, ho_p in by_segment:
        for seg in sorted(set(ho_d.segments) | set(ho_p.segments)):
            cells = []
            for ho in (ho_d, ho_p):
                e = [x for x, s in zip(ho.errors, ho.segments) if s == seg]
                cells.append(f"{len(e):>6} {median(e):>7.1%} {quantile(e, 0.9, 'high'):>7.1%}" if e else f"{'-':>22}")
            print(f"{rt:10} {be:7} {seg:12} {cells[0]}   {cells[1]}")
    fa = Counter()
    for o in obs:
        if o.runtime == "llamacpp" and o.prefill is not None:
            pub = data[o.source_key.split("::")[0]].source.published
            fa[llamacpp_flash_attn(o.row, str(pub) if pub else None)] += 1
    print(f"\nllama.cpp prefill rows by attention (observed.llamacpp_flash_attn): {fa[False]} unfused, {fa[True]} "
          f"flash attention, {fa[None]} not told (costed as flash attention)")
    reasons = defaultdict(int)
    for _, why in skipped:
        reasons[why.split(":")[0]] += 1
    print("\nSkipped rows by reason: " + "; ".join(f"{n} {w}" for w, n in sorted(reasons.items(), key=lambda x: -x[1])))
    if per_source is not None:
        rt, be, ho_d, ho_p = per_source
        print_sources(rt, be, ho_d)
        print_sources(rt, be, ho_p, "prefill")
    elif sources:
        print(f"\n--sources {sources}: no such group (RUNTIME:BACKEND of the table above)")
    host = fit_host(cat)
    if host is not None:
        print(f"\nHost side of an offload (benchmarks/fit_host.py): {host['eta_bandwidth']:.3f} of the memory's peak, "
              f"{host['rows']} rows, {len(host['sources'])} sources; held out {host['held_out']['median_abs_error']:.1%}"
              f" / {host['held_out']['p90_abs_error']:.1%}")
    out_dir = ROOT / "runtimes"
    stale = []
    for rt in sorted(specs):
        files = sorted({stem for stem, f in data.items() if f.runtime == rt})
        doc = {"id": rt, "name": RUNTIME_NAMES[rt],
               "aliases": ["ollama", "lmstudio"] if rt == "llamacpp" else [],
               "backends": specs[rt],
               "fitted": f"benchmarks/fit_speed.py on measurements/ at {dataset_commit()}",
               "sources": [f"measurements/{s}.yaml" for s in files]}
        if rt == "llamacpp" and host is not None:  # the host side of a partial offload (benchmarks/fit_host.py)
            doc["host"] = host | {"sources": [f"measurements/host/{s}.yaml" for s in host["sources"]]}
        text = ("# Fitted by `python benchmarks/fit_speed.py --write`; do not edit by hand.\n"
                "# Units: eta_* fractions of the card's peak (bandwidth, dense FLOPS); t_*_s and alpha_s seconds.\n"
                + yaml.safe_dump(doc, sort_keys=False, width=110))
        path = out_dir / f"{rt}.yaml"
        if check:
            old = path.read_text() if path.exists() else ""
            if _strip(old) != _strip(text):
                stale.append(path.name)
        if write:
            out_dir.mkdir(exist_ok=True)
            path.write_text(text)
    if check and stale:
        print(f"\nStale: {', '.join(stale)} differ from a fresh fit; run with --write.")
        return 1
    return 0


def _strip(text: str) -> str:
    """The fit without its dataset-commit line (a commit of the data itself changes it)."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("fitted:"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write runtimes/*.yaml")
    ap.add_argument("--check", action="store_true", help="exit 1 if runtimes/*.yaml differ from a fresh fit")
    ap.add_argument("--sources", metavar="RUNTIME:BACKEND", help="also print that group's held-out decode rows "
                    "by source and card, then row by row (e.g. llamacpp:rocm)")
    a = ap.parse_args()
    return run(a.write, a.check, a.sources)


if __name__ == "__main__":
    raise SystemExit(main())
