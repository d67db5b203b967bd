"""Expected speed: a step-time model of one runtime on one card, with constants fitted on published runs.

A decode step of B sequences at context L on runtime R lasts (seconds), each term with its unit:

    t_step = W(B) / (BW x eta_weights[format class])     weight bytes streamed at the fraction of the card's
                                                         bandwidth R reaches for that format (B, B/s, 1); the
                                                         parts other kernels stream (side_bytes: what the scope
                                                         leaves in 16 bits, a recipe's other formats) at their
                                                         own class's fraction instead
           + KV(B, L) / (BW x eta_kv)                    cache and state bytes; eta_kv < eta_weights is what
                                                         makes attention at depth cost more than its bytes
           + layers x t_layer_s + t_step_s               fixed costs: kernel launches, graph replay, sampling
                                                         (s per layer, s per step): small models and fast cards
                                                         are launch-bound
           + layers x max(0, t_layer_floor_s             a layer's kernels last at least the floor (s per
                          - W(B) / (BW x eta) / layers)  layer), which overlaps their read: it adds only where
                                                         a layer reads less than the floor lasts
           + layers x t_act_quant_layer_s [FP8/FP4 GEMM] quantizing the activations before each tensor-core
                                                         GEMM that takes FP8 or FP4 weights as stored (s per layer)
           + moe_layers x t_moe_layer_s                  routing, top-k and expert gather (s per MoE layer)
           + shared_expert_layers x t_shared_expert_layer_s
                                                         a shared expert's kernels beside the routed ones (its
                                                         matmuls, activation, sum; s per MoE layer that has one)
           + W_experts(B) / BW x expert_read_cost        the routed experts' bytes again, in part: each expert's
                                                         small matrices are separate GEMMs of a grouped kernel,
                                                         which stream below a dense matrix (B, B/s, 1)
           + N_w x alu_ops_per_weight / FP32 rate        unpacking quantized weights on the vector units
                                                         (weights, ops per weight, op/s): why a Q2_K or Q3_K
                                                         file decodes slower than its bytes on a weak-ALU card
           + F_attn(B, L) x attn_cost / FP32 rate        attention's FLOPs over the cache (FLOP, 1, FLOP/s):
                                                         at depth, heads sharing a small cache (GQA, MLA) cost
                                                         compute beyond the cache's bytes [vector-kernel runtimes;
                                                         llama.cpp on CUDA: the layers its vector kernel runs,
                                                         kernels.llamacpp_cuda_vector_attention]
           + max(0, F_attn_tile(B, L) / attention rate   the same on the tensor cores, each query group padded
                    - KV(B, L) / BW) x mm_cost           to the kernel's tile (64 on Hopper and Blackwell, else
                                                         16), beyond the cache's read it overlaps (FLOP, FLOP/s,
                                                         B, B/s, 1): an H20 at depth [tensor-core runtimes]
           + F_mm(B) x mm_cost / dense peak              the step's matmuls on the tensor cores, beyond what their
                                                         weights' read hides (FLOP, 1, FLOP/s): the growth with B
           + (F_tile(B) - F_mm(B)) x tile_cost / peak    the rows the batch is padded to, up to the instruction's
                                                         (16): on a card of low dense rate beside its bandwidth
                                                         (H20), what makes batch 1 cost compute beside its bytes;
                                                         an older generation's 64 at mm_cost (a wgmma computes its
                                                         padding rows as it computes the batch's)
           + expert_launches x t_expert_launch_s        an older engine's GPTQ/AWQ experts, one Marlin kernel per
                                                         expert and GEMM (launches, s per launch) [dataset rows only]
           + collectives x alpha_s[link] + comm bytes / link bandwidth
                                                         tensor/pipeline parallel: alpha-beta per collective

and yields B tokens; it cannot be shorter than the step's FLOPs at eta_prefill of the dense peak.
Prefill (time to first token) = FLOPs / (peak x eta_prefill[format class]) + the same fixed terms, or the
weight bytes at eta_weights when that is longer; on a GeForce card the fraction is
min(1, eta_prefill x prefill_consumer_factor): such cards run above the boost clock their rated peak assumes, where
an SXM or workstation part under dense matmuls runs at or below it (SGLang's 28,650-token prompt on an RTX 4090 at
1.3x the fraction an A100 or RTX A6000 reached in the same source); plus, where attention is not fused (llama.cpp
without flash attention), its score matrices' bytes at eta_weights_default; llama.cpp on layer-split cards pipelines
a prompt's ubatches through its stages, which shortens all of it by pipeline_factor (1, no gain, for one ubatch or
one card).
The ceiling (decode.py) is this expression with every eta equal to 1 and every other term 0; the constants are
bounded so that expected <= ceiling always.

Engines fitted together (vLLM and SGLang; the CUDA-graph pool a runtime with few rows borrows from) share every term
but their cost a step (each engine's own loop: scheduling, sampling) and, where their kernels differ (TensorRT-LLM's,
gpt-fast's Inductor code beside vLLM and SGLang's FlashInfer and CUTLASS), their cost a layer.
The constants live in runtimes/R.yaml, one group per backend (cuda, rocm, metal; vulkan for llama.cpp), fitted by
benchmarks/fit_speed.py on the dataset under measurements/; nothing is fitted at run time. The band is the
held-out (leave one source out) ratio measured / predicted, p5 to p95, of the runtime's rows (90% of them
fall inside it; fit_speed.runtime_band).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

RUNTIMES = ("vllm", "sglang", "trtllm", "llamacpp", "mlx", "gpt-fast")
# Serving engines: a prefill forward costs, beyond the decode fit's per-layer cost, the engine's own a layer
# (Constants.t_prefill_layer_s, a layer of PrefillInputs.launch_layers: vLLM's and SGLang's eager forward in kernel
# launches, estimate/launches.py) and, under tensor parallel, its all-reduces' latency; llama-bench, MLX and gpt-fast
# time their own forward and pay no such term.
SERVING_RUNTIMES = ("vllm", "sglang", "trtllm")
# the serving engines whose prefill forward is eager PyTorch, a kernel launch at a time (estimate/launches.py)
EAGER_PREFILL_RUNTIMES = ("vllm", "sglang")
RUNTIME_ALIASES = {"ollama": "llamacpp", "lmstudio": "llamacpp", "lm-studio": "llamacpp", "llama.cpp": "llamacpp",
                   "llama-cpp": "llamacpp", "gptfast": "gpt-fast", "tensorrt-llm": "trtllm", "trt-llm": "trtllm"}
ALIAS_NOTE = {"ollama": "Ollama runs llama.cpp underneath", "lmstudio": "LM Studio runs llama.cpp underneath",
              "lm-studio": "LM Studio runs llama.cpp underneath"}

# weight formats grouped by the kernel family that decodes them
FORMAT_CLASS = {
    "fp32": "f16", "bf16": "f16", "fp16": "f16",
    "fp8": "8bit", "fp8-block128": "8bit", "int8": "8bit", "gguf-q8_0": "8bit", "ggml-q8_0": "8bit",
    **{f"{p}-{t}": "q4_0" for p in ("gguf", "ggml") for t in ("q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl")},
    **{f"ggml-{t}": "kquant" for t in ("q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_xs")},
    **{f"gguf-{t}": "kquant" for t in ("q2_k", "q2_k_s", "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_s",
                                       "q5_k_m", "q6_k", "iq4_xs")},
    # the 1- to 3-bit i-quants: each group of 8 weights an index into a lattice codebook (a table lookup, signs
    # and a scale before the dot product), kernels of their own
    **{f"{p}-{t}": "iquant" for p in ("gguf", "ggml") for t in ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s",
                                                               "iq3_xxs", "iq3_s")},
    **{f"gguf-{t}": "iquant" for t in ("iq2_m", "iq3_xs", "iq3_m")},
    "gguf-mxfp4_moe": "fp4",
    "gptq-int8-g128": "8bit",
    "int4-g128": "int4", "int4-g32": "int4", "int4-g128-zp": "int4", "gptq-int4-g128": "int4", "awq-int4-g128": "int4",
    "bnb-nf4": "int4", "bnb-nf4-dq": "int4", "int4-g32-zp": "int4",
    **{f"mlx-{b}bit": "mlxq" for b in (2, 3, 4, 5, 6)}, "mlx-8bit": "8bit",
    "nvfp4": "fp4", "mxfp4": "fp4", "nvfp4-w4a16": "int4", "mxfp8": "8bit",  # weight-only NVFP4: Marlin's class
    **{f"{p}-{t}": "ternary" for p in ("gguf", "ggml") for t in ("tq1_0", "tq2_0")}, "i2_s": "ternary",
    "bitnet-2bit": "ternary",
}
CLASS_WORDS = {"f16": "16-bit", "8bit": "8-bit", "q4_0": "GGUF legacy 4/5-bit", "kquant": "GGUF k-quant",
               "iquant": "GGUF i-quant (IQ1-IQ3)",
               "int4": "4-bit weight-only (GPTQ, AWQ, FP4 through Marlin)", "mlxq": "MLX 2-6-bit affine",
               "fp4": "FP4 (NVFP4/MXFP4)", "ternary": "ternary (TQ1_0, TQ2_0, I2_S)"}
TERNARY_RUNS = "bitnet.cpp runs I2_S files, llama.cpp TQ1_0 and TQ2_0 (--quant gguf-tq1_0 --runtime llamacpp)"
# Marlin (IST-Austria's mixed-precision GEMM, in vLLM and SGLang) reads 4-bit weights and multiplies in 16 bits:
# NVFP4 weights it runs (vLLM's marlin_utils_fp4.py, apply_fp4_marlin_linear: on cards from sm_80 without FP4
# tensor cores, or where a user asks for it with --moe-backend/--linear-backend marlin) are its kernel family,
# the weight-only 4-bit one, not the FP4 tensor cores'.
MARLIN_CLASS = "int4"
BACKEND_OF_VENDOR = {"NVIDIA": "cuda", "AMD": "rocm", "Apple": "metal"}
# a collective's link: NVLink, AMD's Infinity Fabric (xGMI: its own latency, fitted on MI300X/MI325X rows), PCIe,
# or the network between nodes
LINK_KINDS = ("nvlink", "xgmi", "pcie", "network")


def format_class(format_id: str) -> str:
    """A format's kernel class; a recipe's is its primary part's."""
    if "=" in format_id:
        from llmsize.estimate.quant import quant_format

        format_id = quant_format(format_id).kernel_id
    return FORMAT_CLASS.get(format_id, "f16")


def is_ternary(format_id: str) -> bool:
    """Whether the format stores ternary weights (BitNet b1.58's: TQ1_0, TQ2_0, I2_S, the HF packed release)."""
    return format_class(format_id) == "ternary"


def link_kind(link_name: str | None, crosses_nodes: bool) -> str:
    if crosses_nodes:
        return "network"
    if link_name and link_name.startswith("NVLink"):
        return "nvlink"
    if link_name and link_name.startswith("Infinity"):
        return "xgmi"
    return "pcie"


@dataclass(frozen=True)
class StepInputs:
    """The physical quantities of one step, from a plan (or a dataset row turned into one)."""

    batch: int
    weight_bytes: float  # weights read by the step, one card's share (all stages in turn)
    kv_bytes: float  # cache + state bytes read by the step, all sequences
    bandwidth_bytes_per_s: float
    layers: float  # blocks (expected._layers: a mixer or an MLP alone is half of one)
    moe_layers: int
    collectives: int  # all-reduces and stage hand-offs per step
    link: str | None  # nvlink | pcie | network, None on one card
    comm_time_s: float  # the collectives' bytes over the link (parallel.Comm), no latency
    flops: float  # of the step (all sequences)
    peak_flop_per_s: float | None
    format_class: str
    # the parts of weight_bytes other kernels than format_class's stream, by their class: what the format's scope
    # leaves in 16 bits ("f16": the lm_head; attention and shared experts under an experts-only recipe such as
    # gpt-oss's MXFP4 or nvidia's Qwen3.5 NVFP4), and a recipe's other formats (nvidia's Qwen3.6 NVFP4: FP8
    # attention beside weight-only NVFP4 experts, "8bit")
    side_bytes: tuple[tuple[str, float], ...] = ()
    weight_elements: float = 0.0  # quantized matrix weights the step streams (elements, one card's share)
    vector_flop_per_s: float | None = None  # the card's FP32 (non-tensor) rate, where dequantizing runs
    attention_flops: float = 0.0  # the step's attention over the cache (QK and PV, all sequences, one card)
    tile_matmul_flops: float = 0.0  # the step's matmul FLOPs with the batch rounded up to the tensor-core tile
    # decode attention's FLOPs with each query group rounded up to the kernel's tile (expected.wgmma_rows),
    # and the rate they run at (the cache's precision); zero where attention runs on the vector units
    attention_tile_flops: float = 0.0
    attention_flop_per_s: float | None = None
    # a published run of an older generation whose small-batch GEMMs padded the batch to wgmma's 64 rows
    # (expected.tile_rows, observed.old_tiles): a dataset covariate only, its padding at mm_cost
    old_tiles: bool = False
    # a step that waits for the CPU between GPU steps: a run of an older engine generation, a dataset covariate
    # (vLLM's V0 engine before 0.8, llama.cpp builds before b6327 of 2025-08-31: observed.llamacpp_before), and
    # SGLang 0.5.7-0.5.13 on a hybrid, without its overlap scheduler (expected.without_overlap); plans pay none
    engine_v0: bool = False
    # an older engine's GPTQ/AWQ experts through Marlin one kernel per expert (observed.expert_launches: vLLM up to
    # 0.8.4, SGLang to 0.4.6 calling it): the launches a step makes, a dataset covariate only (plans run the fused
    # kernel)
    expert_launches: float = 0.0
    expert_flops: float = 0.0  # the part of `flops` in routed experts' matmuls
    expert_weight_bytes: float = 0.0  # the part of `weight_bytes` in routed experts (one card's share)
    # the weights go to the tensor cores as stored (FP8 or FP4 on a card with those instructions, under a runtime
    # whose matmuls run on the tensor cores): nothing is unpacked on the vector units
    tensor_core_native: bool = False
    # the layers whose mixer is recurrent (SSM, linear attention: a hybrid's Mamba-2 or Gated DeltaNet layers), each
    # a chain of small kernels (convolution, gates, norms, the state update) beside its bytes
    # (expected.recurrent_layers)
    recurrent_layers: float = 0.0
    # the MoE layers with a shared expert, a dense MLP every token runs beside its routed experts (DeepSeek's, GLM's,
    # Llama 4's, Gemma 4 26B-A4B's dense MLP, Qwen3-Next and Qwen3.5/3.6's sigmoid-gated one): its up, gate and
    # down matmuls, activation and sum are kernels of their own at batch 1 (step_inputs.shared_expert_layers)
    shared_expert_layers: float = 0.0


@dataclass(frozen=True)
class PrefillInputs:
    prompt_tokens: int
    flops: float
    weight_bytes: float
    bandwidth_bytes_per_s: float
    peak_flop_per_s: float | None
    layers: float
    collectives: int
    link: str | None
    comm_time_s: float
    format_class: str
    expert_flops: float = 0.0  # the part of `flops` in routed experts' matmuls
    side_bytes: tuple[tuple[str, float], ...] = ()  # (class, bytes) other kernels stream (StepInputs.side_bytes)
    # the part of `flops` in attention's matmuls, and the rate they run at where it is not peak_flop_per_s: a serving
    # engine multiplies FP8 or FP4 weights on the matching tensor cores, but a prompt's attention at the 16-bit
    # rate, whatever its cache keeps (expected.attention_rate)
    attention_flops: float = 0.0
    attention_flop_per_s: float | None = None
    # the routed experts' bytes the prompt streams: each forward reads the experts its tokens touch, and llama.cpp
    # runs a prompt as ceil(prompt / ubatch) forwards (expected.prefill_inputs)
    expert_read_bytes: float = 0.0
    stages: int = 1  # pipeline stages the prompt crosses
    batch_tokens: int = 0  # a runtime that cuts the prompt into calls of this many tokens (llama.cpp's n_batch)
    ubatch_tokens: int = 0  # and each call into ubatches that flow through the stages together (0: no pipelining)
    score_bytes: float = 0.0  # attention score matrices written and read in memory (unfused attention; 0 fused)
    serving: bool = False  # run by a serving engine (SERVING_RUNTIMES)
    # the layers a serving engine's cost a layer (Constants.t_prefill_layer_s) is paid on: vLLM's and SGLang's eager
    # forward, its kernel launches in layers of a Llama decoder layer's nine (estimate/launches.py); TensorRT-LLM's,
    # its layers; 0 for the runtimes that time their own forward
    launch_layers: float = 0.0
    consumer: bool = False  # a GeForce card (expected.geforce): its matmuls at Constants.prefill_consumer_factor
    peak_name: str = "matmul"  # the precision peak_flop_per_s is of (INT8, FP16/FP32, FP8, ...), for the report


@dataclass(frozen=True)
class Constants:
    """One runtime on one backend. Fractions are of the card's peak; times in seconds."""

    runtime: str
    backend: str
    eta_weights: dict[str, float]  # by format class; a class without rows takes `eta_weights_default`
    eta_weights_default: float
    eta_kv: float
    t_layer_s: float
    t_step_s: float
    t_moe_layer_s: float
    alpha_s: dict[str, float]  # per collective, by link kind
    eta_prefill: dict[str, float]  # by format class, of the plan's dense peak
    eta_prefill_default: float | None
    band_low: float  # held-out measured / predicted, p5
    band_high: float  # p95
    rows_decode: int
    rows_prefill: int
    cards: int
    basis: str  # "N published measurements of R on ... cards"
    fitted_classes: tuple[str, ...] = ()
    prefill_band_low: float | None = None
    prefill_band_high: float | None = None
    cards_seen: tuple[str, ...] = field(default_factory=tuple)
    alu_ops_per_weight: float = 0.0  # vector operations to unpack one quantized weight, at the FP32 rate
    attn_cost: float = 0.0  # FP32-rate FLOPs one attention FLOP costs at decode (1 / its fraction of the rate)
    tile_cost: float = 0.0  # seconds per second of the tile's padding FLOPs at the card's dense peak
    mm_cost: float = 0.0  # seconds per second of the step's own matmul FLOPs at the card's dense peak
    t_step_v0_s: float = 0.0  # a step's wait for the CPU (engine_v0: older generations' rows, plans without overlap)
    t_expert_launch_s: float = 0.0  # a per-expert kernel's launch (expert_launches; fitted on its rows, plans pay none)
    # a serving engine's extra cost per layer of a prefill forward (TTFT only), a layer of PrefillInputs.launch_layers
    t_prefill_layer_s: float = 0.0
    # a consumer card's prompt fraction over the other segments' (PrefillInputs.consumer), at most the rated peak
    prefill_consumer_factor: float = 1.0
    moe_matmul_cost: float = 1.0  # a routed expert FLOP's cost in dense FLOPs (grouped GEMMs of few rows each)
    # a prompt's routed-expert byte, in units of its time at full bandwidth, beyond the FLOPs (prefill_parts_s)
    prefill_expert_read_cost: float = 0.0
    t_seq_s: float = 0.0  # a decode step's cost per sequence beyond the first (scheduling, sampling, per-row work)
    expert_read_cost: float = 0.0  # extra seconds per second of routed-expert bytes at full bandwidth (small matrices)
    t_layer_floor_s: float = 0.0  # the least time one layer's kernels take, however few bytes they read (s)
    t_act_quant_layer_s: float = 0.0  # per layer, quantizing activations for FP8/FP4 tensor-core GEMMs (s)
    t_recurrent_layer_s: float = 0.0  # per recurrent (SSM, linear-attention) layer, its kernels' fixed cost (s)
    t_shared_expert_layer_s: float = 0.0  # per MoE layer with a shared expert, that expert's kernels' fixed cost (s)
    # llama.cpp: the share of the host memory's peak a CPU decode reaches (the host side of a partial offload), and
    # what it was fitted on; 1.0 and "" where nothing was fitted (the host side at its peak)
    eta_host: float = 1.0
    host_basis: str = ""
    moe_basis: str = ""  # where t_moe_layer_s holds the runtime's own further cost on this backend: what fitted it
    host_band_low: float = 1.0  # the host fit's held-out measured / predicted, lowest and highest
    host_band_high: float = 1.0

    def eta_w(self, cls: str) -> float:
        return self.eta_weights.get(cls, self.eta_weights_default)

    def eta_p(self, cls: str) -> float | None:
        return self.eta_prefill.get(cls, self.eta_prefill_default)


def _alpha(c: Constants, link: str | None) -> float:
    """Latency per collective on this link; a link without fitted rows takes the slowest fitted one."""
    return c.alpha_s.get(link, max(c.alpha_s.values(), default=0.0))


def _unpacks(x: StepInputs, c: Constants) -> bool:
    """Quantized weights the tensor cores do not take as stored, under a runtime whose fit prices unpacking them."""
    return x.format_class != "f16" and not x.tensor_core_native and bool(c.alu_ops_per_weight)


def _attends(x: StepInputs, c: Constants) -> bool:
    """Attention over the cache under a runtime whose fit prices it on the vector units."""
    return bool(c.attn_cost and x.attention_flops)


def vector_terms_apply(x: StepInputs, c: Constants) -> bool:
    """Whether the step costs time on the card's vector units, at its FP32 rate (dequant_time_s, attention_time_s)."""
    return _unpacks(x, c) or _attends(x, c)


def dequant_time_s(x: StepInputs, c: Constants) -> float:
    """Unpacking quantized weights on the vector units: ops per weight x weights / the FP32 rate. Zero for 16-bit
    weights, for weights the tensor cores take as stored (an FP8 or NVFP4 GEMM on a card with those instructions
    scales blocks in its epilogue, it unpacks nothing) and where the card's FP32 rate is unknown."""
    if not x.vector_flop_per_s or not _unpacks(x, c):
        return 0.0
    return c.alu_ops_per_weight * x.weight_elements / x.vector_flop_per_s


def attention_time_s(x: StepInputs, c: Constants) -> float:
    """Attention over the cache at the vector units: its FLOPs x attn_cost / the FP32 rate. Beside the cache's
    bytes, this is what makes depth costly where many query heads share a small cache (GQA, most of all MLA)."""
    if not x.vector_flop_per_s or not _attends(x, c):
        return 0.0
    return c.attn_cost * x.attention_flops / x.vector_flop_per_s


def tile_time_s(x: StepInputs, c: Constants) -> float:
    """The matmuls as the tensor cores run them: the step's own FLOPs at mm_cost, and the rows the batch is padded
    to (expected.tile_rows: 16) at tile_cost, so that on a card whose dense rate is low beside its bandwidth (an
    H20: 148 TFLOPS, 4 TB/s) batch 1 costs compute beside its bytes. An older generation's padding to wgmma's 64
    rows (old_tiles) costs what the step's own FLOPs cost, mm_cost: the instruction computes every row of its tile
    alike (fitted apart, on SGLang 0.4.6's rows alone, it came out at 0.62 beside mm_cost's 0.63). Zero where the
    runtime's batch-1 kernels are vector kernels."""
    attention = c.mm_cost * attention_excess_s(x)
    if not x.peak_flop_per_s or not x.tile_matmul_flops:
        return attention
    matmul = max(0.0, x.flops - x.attention_flops)
    pad = c.mm_cost if x.old_tiles else c.tile_cost
    return attention + (pad * max(0.0, x.tile_matmul_flops - matmul) + c.mm_cost * matmul) / x.peak_flop_per_s


def attention_excess_s(x: StepInputs) -> float:
    """What decode attention's tensor-core FLOPs, each query group padded to the kernel's tile, take at the rate
    the cache's precision runs at beyond the cache's read at the full bandwidth (s): the kernel lasts the longer
    of the two. A 64-row tile over a 16-bit cache does 64 FLOPs a byte read (MLA's shared latent ~120): beyond
    an H20's ridge (148 TFLOPS / 4 TB/s = 37), far below an H100's (295); 16 rows stay below the ridge of every
    catalog card these runtimes run on."""
    if not x.attention_flop_per_s:
        return 0.0
    return max(0.0, x.attention_tile_flops / x.attention_flop_per_s - x.kv_bytes / x.bandwidth_bytes_per_s)


def act_quant_time_s(x: StepInputs, c: Constants) -> float:
    """A GEMM that takes FP8 or FP4 weights on the tensor cores takes its activations in that format too: a kernel
    quantizes them before each one (vLLM's scaled_fp8_quant, scaled_fp4_quant), a fixed cost per layer (s)."""
    return x.layers * c.t_act_quant_layer_s if x.tensor_core_native else 0.0


def weights_time_s(x: StepInputs | PrefillInputs, c: Constants) -> float:
    """The step's weight bytes at the fractions of the bandwidth their kernels reach: the format class's bytes at
    its fraction, each side part (x.side_bytes: what the scope leaves in 16 bits, a recipe's other formats) at its
    class's. One fraction for every byte charged the 16-bit kernels' bytes at the FP4 kernels' fraction, where most
    of what an experts-only checkpoint reads a token is BF16 (gpt-oss-20b's MXFP4 release: 66%; nvidia's
    Qwen3.5-397B NVFP4: 80%)."""
    return sum(b / c.eta_w(cls) for cls, b in weight_bytes_by_class(x).items()) / x.bandwidth_bytes_per_s


def weight_bytes_by_class(x: StepInputs | PrefillInputs) -> dict[str, float]:
    """The step's weight bytes by the class of the kernels that stream them: the format class's, less its side
    parts (x.side_bytes), each at its own."""
    out = {x.format_class: x.weight_bytes - sum(b for _, b in x.side_bytes)}
    for cls, b in x.side_bytes:
        out[cls] = out.get(cls, 0.0) + b
    return out


def weight_streams(x: StepInputs, c: Constants) -> tuple[tuple[str, float, float], ...]:
    """The step's weight bytes by kernel class, each with the fraction of the bandwidth its kernels reach (the fit's
    eta_weights), the most bytes first: what the weights term of the step is made of."""
    parts = sorted(weight_bytes_by_class(x).items(), key=lambda kv: -kv[1])
    return tuple((cls, c.eta_w(cls), b) for cls, b in parts if b > 0)


def scaled_side(side: tuple[tuple[str, float], ...], factor: float) -> tuple[tuple[str, float], ...]:
    return tuple((cls, b * factor) for cls, b in side)


def floor_time_s(x: StepInputs, c: Constants) -> float:
    """What the layers' kernel floor adds to their weights' read: layers x max(0, floor - read per layer), the
    read being the step's weight bytes at the runtime's fraction of the bandwidth, shared evenly by the layers."""
    if not c.t_layer_floor_s or not x.layers:
        return 0.0
    per_layer = weights_time_s(x, c) / x.layers
    return x.layers * max(0.0, c.t_layer_floor_s - per_layer)


def ceiling_step_s(x: StepInputs) -> float:
    """The ceiling's step (decode.py): the step's weight and cache bytes at the card's full bandwidth, and its
    collectives' bytes over the link; every other term of decode_step_time_s at zero."""
    bw = x.bandwidth_bytes_per_s
    return x.weight_bytes / bw + x.kv_bytes / bw + (x.comm_time_s if x.collectives else 0.0)


def decode_step_time_s(x: StepInputs, c: Constants) -> float:
    """Seconds for one decode step of x.batch sequences: the sum of its terms (decode_terms_s), floored by compute."""
    t = sum(decode_terms_s(x, c).values())
    eta_p = c.eta_p(x.format_class)
    if x.peak_flop_per_s and eta_p:
        t = max(t, (x.flops + (c.moe_matmul_cost - 1) * x.expert_flops) / (x.peak_flop_per_s * eta_p))
    return t


def pipeline_factor(x: PrefillInputs) -> float:
    """The prompt's time through pipelined stages over its time through them one after the other. llama.cpp with
    its layers split over s cards (ggml-org/llama.cpp PR #6017, "pipeline parallelism"; on when every layer and
    the cache are on the cards) cuts each llama_decode call of up to n_batch tokens into ubatches of n_ubatch that
    flow through the stages together: a call of m ubatches takes (m + s - 1) stage-times, a stage-time being 1/s
    of one ubatch through the whole model, where the stages one after the other take m x s. A prompt of one
    ubatch gains nothing; 4,096 tokens at n_batch 2,048 and n_ubatch 512 on 4 cards take (4 + 3) / (4 x 4) of
    the time, twice, a factor 0.44. 1 where the runtime does not pipeline a prompt (ubatch_tokens 0)."""
    s, b, u = x.stages, x.batch_tokens, x.ubatch_tokens
    if s <= 1 or u <= 0 or b <= 0 or x.prompt_tokens <= 0:
        return 1.0
    serial = piped = 0
    left = x.prompt_tokens
    while left > 0:  # one llama_decode call after another
        m = -(-min(b, left) // u)
        serial += m * s
        piped += m + s - 1
        left -= b
    return piped / serial


def score_time_s(x: PrefillInputs, c: Constants) -> float:
    """Attention without flash attention: each ubatch's score matrix (heads x its tokens x the cache cells in
    view, per layer) is written by one kernel and read by the next, streamed as contiguous 16-bit tensors are, at the
    weights' default fraction of the bandwidth (bytes, B/s): not at eta_kv, the decode attention kernel's reading of
    the cache (with it, llama.cpp's CUDA prompts held out at 14.8% median where they hold out at 11.1%, once the
    tensor-core decode attention left the cache's fraction to price depth alone: RESULTS.md, 2026-12-06). It grows
    with the square of the prompt: zero where attention is fused."""
    if not x.score_bytes:
        return 0.0
    return x.score_bytes / (x.bandwidth_bytes_per_s * c.eta_weights_default)


def at_file_bytes(x: StepInputs | PrefillInputs, factor: float) -> StepInputs | PrefillInputs:
    """A step or prompt whose weights are `factor` times the estimate's bytes (a run's own file: its model size,
    or a calibrating run's weights); a prompt's per-forward expert read scales with them."""
    if isinstance(x, PrefillInputs):
        return replace(x, weight_bytes=x.weight_bytes * factor, expert_read_bytes=x.expert_read_bytes * factor,
                       side_bytes=scaled_side(x.side_bytes, factor))
    return replace(x, weight_bytes=x.weight_bytes * factor, side_bytes=scaled_side(x.side_bytes, factor))


def prefill_missing(x: PrefillInputs, c: Constants) -> str | None:
    """Why a prompt has no time here (None: it has one): the card's dense rate or the runtime's prefill
    fraction missing."""
    if not x.peak_flop_per_s:
        return (f"the catalog has no dense {x.peak_name} rate for this card (no citable figure), the rate this "
                "runtime's prompt matmuls run at; --calibrate with a run of yours on this card that times a prompt "
                "(llama-bench's pp lines, a TTFT) gives it one")
    if not c.eta_p(x.format_class):
        return "no published prompt measurements of this runtime on this card's backend to fit its share of the peak"
    return None


def flop_time_at_peak_s(x: PrefillInputs) -> float:
    """The prompt's FLOPs in seconds at the card's full rates: the matmuls at peak_flop_per_s, attention at its own
    rate where it has one (attention_flop_per_s)."""
    if not x.attention_flop_per_s:
        return x.flops / x.peak_flop_per_s
    return (x.flops - x.attention_flops) / x.peak_flop_per_s + x.attention_flops / x.attention_flop_per_s


def prefill_fraction(x: PrefillInputs, c: Constants) -> float:
    """The fraction of the card's peak the prompt's matmuls run at: the runtime's for the format class, on a
    GeForce card times prefill_consumer_factor, at most 1 (the plan's prefill, and the ceiling's, is the prompt at
    the rated peak)."""
    eta = c.eta_p(x.format_class)
    return min(1.0, eta * c.prefill_consumer_factor) if x.consumer else eta


def prefill_parts_s(x: PrefillInputs, c: Constants) -> tuple[float, float, float] | None:
    """The prompt's compute (FLOPs at the runtime's fraction of the peak), its weights' read, and the forward's
    fixed costs (per layer, per step, the collectives), in seconds, each shortened by the pipeline where the
    runtime pipelines the prompt over its stages (pipeline_factor); None when the card's peak or the runtime's
    prefill constant is unknown."""
    if prefill_missing(x, c):
        return None
    eta = prefill_fraction(x, c)
    compute = (flop_time_at_peak_s(x) + (c.moe_matmul_cost - 1) * x.expert_flops / x.peak_flop_per_s) / eta
    compute += score_time_s(x, c)
    weights = weights_time_s(x, c)
    fixed = x.layers * c.t_layer_s + x.launch_layers * c.t_prefill_layer_s + c.t_step_s
    if x.collectives and x.link:
        fixed += x.collectives * _alpha(c, x.link) + x.comm_time_s
    # each forward's expert weights, streamed as many small matrices, do not hide under the matmuls: llama.cpp's
    # MoE prompt on an RTX 3090 (gemma4 26B.A4B, llama.cpp PR #22298) runs pp2048 at 3,488 t/s with 512-token
    # ubatches and 5,172 with one 2,048-token ubatch, while dense models' prompts barely move with the ubatch
    fixed += c.prefill_expert_read_cost * x.expert_read_bytes / x.bandwidth_bytes_per_s
    f = pipeline_factor(x)
    return compute * f, weights * f, fixed * f


def prefill_comm_s(x: PrefillInputs) -> float:
    """The part of prefill_parts_s's fixed costs that grows with the prompt's tokens: its tensor-parallel
    all-reduces' bytes over the link (x.comm_time_s, no latency), shortened by the pipeline as the rest. Seconds."""
    return x.comm_time_s * pipeline_factor(x) if x.collectives and x.link else 0.0


def prefill_time_s(x: PrefillInputs, c: Constants, prompts_per_forward: int = 1) -> float | None:
    """Seconds one prompt costs, prefilled in a forward with prompts_per_forward - 1 others of its length, which
    share the weights' read and the fixed costs: max(compute, weights / k) + fixed / k (k = 1: the prompt alone,
    its time to first token)."""
    parts = prefill_parts_s(x, c)
    if parts is None:
        return None
    compute, weights, fixed = parts
    k = max(1, prompts_per_forward)
    return max(compute, weights / k) + fixed / k


def decode_terms_s(x: StepInputs, c: Constants) -> dict[str, float]:
    """The step's terms one by one (seconds), which decode_step_time_s sums: the fixed costs hold the cost per
    sequence beyond the first (zero at batch 1) and a step's wait for the CPU (engine_v0)."""
    bw = x.bandwidth_bytes_per_s
    return {
        "weights": weights_time_s(x, c),
        "kv": x.kv_bytes / (bw * c.eta_kv),
        "fixed": x.layers * c.t_layer_s + c.t_step_s + floor_time_s(x, c) + act_quant_time_s(x, c)
        + c.t_seq_s * (x.batch - 1) + (c.t_step_v0_s if x.engine_v0 else 0.0)
        + x.recurrent_layers * c.t_recurrent_layer_s,
        "moe": x.moe_layers * c.t_moe_layer_s + x.shared_expert_layers * c.t_shared_expert_layer_s
        + c.expert_read_cost * x.expert_weight_bytes / bw + c.t_expert_launch_s * x.expert_launches,
        "dequant": dequant_time_s(x, c),
        "attention": attention_time_s(x, c),
        "tile": tile_time_s(x, c),
        "comm": (x.collectives * _alpha(c, x.link) + x.comm_time_s) if x.collectives and x.link else 0.0,
    }


@dataclass(frozen=True)
class Calibration:
    """A user's own run: measured / predicted for that run, applied to every figure of this runtime."""

    factor: float  # measured tok/s over the model's prediction for the same run
    source: str  # the file, what it measured
    extrapolation: str  # how far the plan is from the calibrating run
    prefill_factor: float | None = None
    # a run on a card whose matmul rate the catalog lacks: the rate (peak x fraction, FLOP/s) its prompt ran at, and
    # the card, whose plans take it as their prompt's rate (expected.calibrated_prompt)
    prefill_rate_flop_s: float | None = None
    card_id: str | None = None


@dataclass(frozen=True)
class Expected:
    runtime: str
    backend: str
    tok_s: float  # batch 1, per sequence
    tok_s_low: float
    tok_s_high: float
    batch: int
    aggregate_tok_s: float | None  # at --batch, all sequences (None: not estimated, e.g. a partial offload)
    aggregate_tok_s_low: float | None
    aggregate_tok_s_high: float | None
    ttft_s: float | None
    ttft_s_low: float | None
    ttft_s_high: float | None
    basis: str
    terms_s: dict[str, float]
    notes: tuple[str, ...] = ()
    spec_tok_s: float | None = None  # batch 1 with the plan's speculative decoding (--spec), and its band
    spec_tok_s_low: float | None = None
    spec_tok_s_high: float | None = None
    ceiling_tok_s: float | None = None  # batch 1's ceiling: the plan's, or a partial offload's
    ttft_reason: str | None = None  # why there is no time to first token, where there is none
    calibrated_step_s: float | None = None  # a --calibrate run's batch-1 step (terms_s stay the fit's, before it)
    # the batch-1 step's weights by the kernels that stream them: (kernel class, fraction of the card's bandwidth
    # the fit gives them, bytes a card reads), the most bytes first
    weight_streams: tuple[tuple[str, float, float], ...] = ()
    # the short end of the decode band as a multiple of the figure, where published runs outside the fit put it
    # lower than the fit's band (the i-quants': expected.iquant_decode_floor); a figure made from this one (an
    # offload's) keeps it
    decode_floor: float | None = None


def expected_speed(step1: StepInputs, stepb: StepInputs, pre: PrefillInputs, c: Constants, ceiling_tok_s: float,
                   calibration: Calibration | None = None, notes: tuple[str, ...] = (),
                   aggregate_ceiling_tok_s: float | None = None) -> Expected:
    """Expected decode at batch 1 and at stepb.batch, and the time to first token, with their bands. No figure
    exceeds the ceiling (the constants' bounds make t_step >= the ceiling's step; the band's top is capped), and no
    time to first token, nor its band's short end, is shorter than the prompt's FLOPs at the rated peak of the
    precision the runtime's matmuls run at (through its pipeline where it pipelines the prompt)."""
    t1, tb = decode_step_time_s(step1, c), decode_step_time_s(stepb, c)
    factor = calibration.factor if calibration else 1.0
    lo, hi = (1.0, 1.0) if calibration else (c.band_low, c.band_high)
    if calibration:  # a run on this machine: its own scatter is small; keep the fit's spread around it, halved
        lo, hi = 1 - (1 - c.band_low) / 2, 1 + (c.band_high - 1) / 2
    tok = min(factor / t1, ceiling_tok_s)
    agg = factor * stepb.batch / tb
    # no batch beats its own ceiling (the plan's roofline at that batch), nor B x the batch-1 ceiling
    agg_cap = min(ceiling_tok_s * stepb.batch, aggregate_ceiling_tok_s or math.inf)
    ttft = prefill_time_s(pre, c)
    pf = calibration.prefill_factor if calibration and calibration.prefill_factor else 1.0
    plo, phi = c.prefill_band_low or c.band_low, c.prefill_band_high or c.band_high
    floor = flop_time_at_peak_s(pre) * pipeline_factor(pre) if ttft else 0.0
    basis = calibration.source if calibration else c.basis
    return Expected(
        runtime=c.runtime, backend=c.backend, tok_s=tok, tok_s_low=min(tok * lo, ceiling_tok_s),
        tok_s_high=min(tok * hi, ceiling_tok_s), batch=stepb.batch, aggregate_tok_s=min(agg, agg_cap),
        aggregate_tok_s_low=min(agg * lo, agg_cap), aggregate_tok_s_high=min(agg * hi, agg_cap),
        ttft_s=max(ttft / pf, floor) if ttft else None,
        ttft_s_low=max(ttft / pf / phi, floor) if ttft else None,  # a faster prefill (ratio p90): a shorter TTFT
        ttft_s_high=max(ttft / pf / plo, floor) if ttft else None,
        basis=basis, terms_s=decode_terms_s(step1, c), ceiling_tok_s=ceiling_tok_s,
        ttft_reason=None if ttft else prefill_missing(pre, c), weight_streams=weight_streams(step1, c),
        calibrated_step_s=t1 / factor if calibration else None,
        notes=notes + ((calibration.extrapolation,) if calibration and calibration.extrapolation else ()))
