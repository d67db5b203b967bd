"""A plan turned into speed.py's inputs under a runtime: the bytes, FLOPs and links of one decode step
(StepInputs) and of a prompt (PrefillInputs), the side bytes a kernel class adds, and the model traits
(recurrent layers, MLA, an SGLang release's overlap) the step-time model costs."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from llmsize.catalog.schema import ModelSpec
from llmsize.estimate.kernels import (
    asked_marlin,
    attention_rate,
    cache_precision_rate,
    kernel_class,
    llamacpp_cuda_vector_attention,
    matmul_rate,
    tensor_core_native,
    through_marlin,
    tile_rows,
    vector_kernels,
    wgmma_rows,
)
from llmsize.estimate.kv import mla_mixers
from llmsize.estimate.launches import launch_layers
from llmsize.estimate.memo import by_identity
from llmsize.estimate.prefill import UNFUSED_SCORE_TRAFFIC
from llmsize.estimate.runtime_model import departure, run_model
from llmsize.estimate.runtimes import backend
from llmsize.estimate.speed import (
    EAGER_PREFILL_RUNTIMES,
    SERVING_RUNTIMES,
    PrefillInputs,
    StepInputs,
    format_class,
    link_kind,
)
from llmsize.estimate.weights import expert_params_per_token, expert_read_fraction, read_shares_by_format

if TYPE_CHECKING:
    from llmsize.estimate.plan import Plan


def layer_count(plan: Plan) -> tuple[float, int]:
    """The blocks a decode step's fixed costs a layer count (a mixer and an MLP each half of one), and its MoE
    layers. A transformer layer is one block; a layer that is a mixer or an MLP alone, as Nemotron-H's Mamba-2,
    MoE and attention layers are, half a block: it launches about half a transformer layer's kernels (norm,
    projections and its mixer's kernels, or norm, router and experts)."""
    m = plan.model
    moe = sum(g.count for g in m.layer_groups if g.mlp is not None and g.mlp.kind == "moe")
    blocks = sum(g.count * ((g.mixer is not None) + (g.mlp is not None)) for g in m.layer_groups) / 2
    return blocks, moe


def geforce(gpu) -> bool:
    """A consumer NVIDIA card, whose prompts run at prefill_consumer_factor x the fitted fraction (speed.py): the
    factor is fitted on GeForce rows; no serving engine's prompt on a Radeon card is in the data, so none is
    assumed there."""
    return gpu.segment == "consumer" and gpu.vendor == "NVIDIA"


def link_of(plan: Plan) -> tuple[int, str | None]:
    c = plan.comm
    if c is None:
        return 0, None
    collectives = (c.allreduces if c.tp > 1 else 0) + (c.pp - 1)
    crosses = (c.tp > c.gpus_per_node) or (c.pp > 1 and c.stages_cross_nodes)
    return collectives, link_kind(c.link.kind if c.link else None, crosses)


def step_inputs(plan: Plan, batch_step, runtime: str | None = None, marlin: bool = False,
                old_tiles: bool = False, be: str | None = None) -> StepInputs:
    """The plan's decode step at batch_step as the step-time model costs it under `runtime` (on backend `be`, None:
    the card's own); `marlin`: a run that says its FP4 weights went through Marlin (kernel_class), whose matmuls run
    at the 16-bit peak."""
    fixed, marlin, expert_params = _step_constants(plan, runtime, marlin, old_tiles, be)
    cls = fixed["format_class"]
    side = side_bytes(plan, batch_step.weight_bytes, batch_step.batch, runtime, marlin)
    w16 = sum(b for c, b in side if c == "f16")
    return StepInputs(
        **fixed,
        batch=batch_step.batch, weight_bytes=batch_step.weight_bytes, kv_bytes=batch_step.kv_bytes,
        comm_time_s=batch_step.comm_time_s, flops=batch_step.flops, side_bytes=side,
        weight_elements=(batch_step.weight_bytes - w16) * 8 / plan.weights.bits_per_weight
        if plan.weights.bits_per_weight else 0.0,
        attention_flops=attention_flops(plan, batch_step) - llamacpp_mma_attention_flops(plan, batch_step, runtime, be),
        tile_matmul_flops=tile_matmul_flops(plan, batch_step, runtime,
                                             marlin or cls != format_class(plan.fmt.id), old_tiles),
        attention_tile_flops=attention_tile_flops(plan, batch_step, runtime),
        expert_flops=2.0 * batch_step.batch * expert_params,
        expert_weight_bytes=batch_step.weight_bytes * expert_read_fraction(
            plan.card_model or plan.model, plan.fmt, plan.scope, batch_step.batch))


@by_identity(maxsize=1024)
def _step_constants(plan: Plan, runtime: str | None, marlin: bool, old_tiles: bool, be: str | None
                    ) -> tuple[dict, bool, float]:
    """step_inputs' terms that do not depend on the batch, worked out once a plan and runtime (a fleet search asks
    for thousands of batches of the same plans): StepInputs' fields of the card's rates, the layers, the links and
    the kernel class; whether the FP4 weights go through Marlin; the routed experts' parameters a token."""
    layers, moe = layer_count(plan)
    collectives, link = link_of(plan)
    marlin = asked_marlin(plan, marlin)
    cls = kernel_class(plan, runtime, marlin)
    fields = dict(
        bandwidth_bytes_per_s=plan.gpu.bandwidth_bytes_per_s, layers=layers, moe_layers=moe,
        collectives=collectives, link=link, peak_flop_per_s=matmul_rate(plan, runtime, marlin, be)[0],
        format_class=cls, vector_flop_per_s=(plan.gpu.dense_tflops.fp32 or 0) * 1e12 or None,
        attention_flop_per_s=cache_precision_rate(plan), tensor_core_native=tensor_core_native(plan, runtime, cls),
        old_tiles=old_tiles, recurrent_layers=recurrent_layers(plan.model),
        shared_expert_layers=shared_expert_layers(plan.model) if runtime in SHARED_EXPERT_NODES else 0)
    return fields, marlin, expert_params_per_token(plan.card_model or plan.model)


def recurrent_layers(model) -> int:
    """The model's layers whose mixer is recurrent (SSM, linear attention): Qwen3.5/3.6's 3 Gated DeltaNet layers in
    every 4, Nemotron-H's Mamba-2 layers."""
    return sum(g.count for g in model.layer_groups if g.mixer is not None and g.mixer.kind in RECURRENT_MIXERS)


# Runtimes that run a MoE layer's shared expert as nodes of their own after the routed experts: llama.cpp's graphs
# (src/models/qwen35moe.cpp: build_ffn's up, gate and down matmuls and their GLU, then the one-row gate's matmul,
# sigmoid and product, and the sum with the routed experts' output) and MLX's lazy ops (mlx-lm's models alike). vLLM
# computes it within SharedFusedMoE, overlapped with the routed experts on an auxiliary stream (vllm PR #26145 put
# every model with shared experts on it): fitted with a cost for it, vLLM's rows held out worse (RESULTS.md,
# 2026-12-06), and the CUDA-graph engines pay none.
SHARED_EXPERT_NODES = ("llamacpp", "mlx")


def shared_expert_layers(model) -> int:
    """The model's MoE layers with a shared expert (num_shared_experts > 0: however many, an engine runs them as one
    MLP of their summed width): Qwen3.6-35B-A3B's 40, DeepSeek-V2-Lite's 26 (its first layer is dense), none of
    Qwen3-30B-A3B's or gpt-oss's."""
    return sum(g.count for g in model.layer_groups
               if g.mlp is not None and g.mlp.kind == "moe" and g.mlp.num_shared_experts)


# SGLang releases whose radix cache ran a hybrid's recurrent (linear-attention or Mamba) layers with the no_buffer
# strategy, which turns the overlap scheduler off (server_args.py of the released wheels): Qwen3-Next from 0.5.5.post2
# (PR #13057, "disable overlap schedule if mamba radix cache open"), every hybrid from 0.5.7 (PR #14792:
# --mamba-scheduler-strategy, `auto` hard-coded to no_buffer; Nemotron-H, Falcon-H1 alike) to 0.5.13.post1. From
# 0.5.14 `auto` resolves to extra_buffer and keeps the scheduler on for Qwen3-Next, Qwen3.5/3.6 and Nemotron-H
# (issue #27418; 0.5.23's arg_groups/overrides.py alike); --disable-radix-cache kept it on in every release.
SGLANG_NO_BUFFER = ((0, 5, 7, 0), (0, 5, 13, 1))  # first and last release, (major, minor, patch, post)


SGLANG_QWEN3_NEXT_NO_BUFFER_FROM = (0, 5, 5, 2)


# (a few digits a part: int() refuses 4,300)
_SGLANG_RELEASE = re.compile(r"(?<!\d)(\d{1,6})\.(\d{1,6})\.(\d{1,6})(?:\.post(\d{1,6}))?")


def sglang_release(version: str | None) -> tuple[int, int, int, int] | None:
    """(major, minor, patch, post) of the first SGLang release number in a version string (`v0.5.8.post1`,
    `sglang 0.5.6`), None where it names none."""
    m = _SGLANG_RELEASE.search(version or "")
    return tuple(int(g or 0) for g in m.groups()) if m else None


def release_words(r: tuple[int, int, int, int]) -> str:
    """A release tuple as its number: (0, 5, 13, 1) -> `0.5.13.post1`."""
    return ".".join(map(str, r[:3])) + (f".post{r[3]}" if r[3] else "")


def no_buffer_releases(model) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """The first and last SGLang release that ran this hybrid without its overlap scheduler (SGLANG_NO_BUFFER)."""
    first = SGLANG_QWEN3_NEXT_NO_BUFFER_FROM if model.family == "qwen3_next" else SGLANG_NO_BUFFER[0]
    return first, SGLANG_NO_BUFFER[1]


def without_overlap(plan: Plan, runtime: str | None, version: str | None = None) -> bool:
    """Whether SGLang `version` decodes the plan's model with each step waiting for the CPU's scheduling: a hybrid
    with recurrent layers under a release whose radix cache fell back to the no_buffer strategy and turned the
    overlap scheduler off (SGLANG_NO_BUFFER; a run's log shows disable_overlap_schedule=True, not passed:
    vuuihc/sglang study-notes/profiling-study/07, section 6.2, SGLang 0.5.13.post1, Qwen3.6-35B-A3B on an H20). Such
    a row's step pays the fitted cost a step of scheduling between steps (t_step_v0_s, with vLLM V0's rows). Held
    out, the three sources of such rows go from 0.62-0.87 of the prediction without it to 0.88-1.13 (Qwen3.6-35B-A3B
    on an H20, 0.5.13.post1), 0.68 to 1.05 (the Cookbook's Qwen3-Next on 8 x B200, 0.5.6) and 0.62 to 1.05
    (Nemotron-3 Nano on a B200, 0.5.8.post1): `python benchmarks/fit_speed.py --sources sglang:cuda`, with and
    without benchmarks/experiments/sglang_hybrids_with_overlap.patch, RESULTS.md 2026-12-05. A plan (version None)
    is for the current release, which keeps the scheduler on, and pays none; its note says what the older releases
    cost."""
    if runtime != "sglang" or not has_recurrent_layers(plan.model):
        return False
    r = sglang_release(version)
    if r is None:
        return False
    first, last = no_buffer_releases(plan.model)
    return first <= r <= last


def tile_matmul_flops(plan: Plan, batch_step, runtime: str | None, marlin: bool = False, old: bool = False) -> float:
    """The step's matmul FLOPs with the batch rounded up to whole tensor-core tiles; zero for runtimes whose
    small-batch matmuls are vector kernels (llama.cpp's mmvq, MLX's qmv) and on cards without tensor cores.
    `marlin`: the matmuls run through Marlin (the run says so, or the runtime runs the plan's FP4 through it)."""
    if vector_kernels(plan, runtime):
        return 0.0
    rows = tile_rows(plan.gpu, marlin, old)
    padded = -(-batch_step.batch // rows) * rows
    return (batch_step.flops - attention_flops(plan, batch_step)) * padded / batch_step.batch


# Rows a decode attention kernel's query tile holds on the tensor cores: the query heads that share a cached head,
# padded. Hopper's and datacenter Blackwell's kernels issue wgmma / tcgen05.mma, m64 (PTX ISA): FlashAttention-3's
# query block is 64 rows for one warpgroup and 128-192 otherwise (hopper/tile_size.h, tile_size_fwd_sm90), FlashMLA's
# decode kernel 64 (Flash_fwd_kernel_traits_mla<576, 64, 64, ...>: its 64-row block holds the heads); elsewhere
# mma.sync's 16 (FlashInfer's smallest query tile). Unlike the matmuls' GEMMs, no engine swaps attention's operands.
# Padding shows only where the tile's FLOPs a byte exceed the card's ridge (speed.attention_excess_s): of the
# catalog's cards with tensor cores, only the H20 (37) is below 64. The rows are wgmma_rows.
def attention_tile_flops(plan: Plan, batch_step, runtime: str | None) -> float:
    """The step's decode attention as tensor-core kernels compute it, every query group padded to the tile
    (flops.decode_attention_tile_flops), all sequences, one card's heads; zero for runtimes whose batch-1
    attention runs on the vector units (llama.cpp, MLX: their attention term) and on Apple cards."""
    if vector_kernels(plan, runtime):
        return 0.0
    from llmsize.estimate.flops import decode_attention_tile_flops
    from llmsize.estimate.parallel import shard_model

    shard = shard_model(plan.model, plan.inputs.tp, 1)
    return batch_step.batch * decode_attention_tile_flops(shard, batch_step.context_tokens,
                                                          wgmma_rows(plan.gpu))


def attention_flops(plan: Plan, batch_step) -> float:
    """The step's FLOPs beyond its matmuls: attention over the cache (and SSM state updates), one card's share."""
    return max(0.0, batch_step.flops - batch_step.batch * 2.0 * card_matmul_params(plan))


def llamacpp_mma_attention_flops(plan: Plan, batch_step, runtime: str | None, be: str | None) -> float:
    """The part of the step's attention FLOPs llama.cpp's CUDA build runs in its tensor-core kernel
    (kernels.llamacpp_cuda_vector_attention), out of the vector term; zero elsewhere."""
    if runtime != "llamacpp" or backend(plan.gpu, be) != "cuda":
        return 0.0
    from llmsize.estimate.flops import decode_attention_tile_flops
    from llmsize.estimate.parallel import shard_model

    shard = shard_model(plan.model, plan.inputs.tp, 1)
    b, ctx, kv = batch_step.batch, batch_step.context_tokens, plan.inputs.kv_dtype
    return b * decode_attention_tile_flops(
        shard, ctx, 1, keep=lambda m: not llamacpp_cuda_vector_attention(plan.gpu, m, b, ctx, kv))


@by_identity(maxsize=512)
def card_matmul_params(plan: Plan) -> float:
    """Matmul parameters a token multiplies on one card of the plan (its tensor-parallel share, all stages)."""
    from llmsize.estimate.parallel import shard_model
    from llmsize.estimate.weights import matmul_params_per_token

    return matmul_params_per_token(shard_model(plan.model, plan.inputs.tp, 1))


NOT_FIT_NOTE = "as if the weights fit the budget: they do not (the Diagnosis says what does)"


def side_bytes(plan: Plan, weight_bytes: float, batch: int, runtime: str | None,
               marlin: bool = False) -> tuple[tuple[str, float], ...]:
    """The parts of a step's `weight_bytes` that other kernels than the format's stream (speed.StepInputs.side_bytes),
    by class: what the scope leaves in 16 bits, and a recipe's formats beside its primary one, each at its own
    kernel class (FP4 through Marlin where the primary would be). A side part of the primary's class streams at
    the same fraction: it is kept apart only to count what is left in 16 bits."""
    out: dict[str, float] = {}
    for fid, share in read_shares_by_format(plan.card_model or plan.model, plan.fmt, plan.scope, batch).items():
        if fid == plan.fmt.kernel_id:
            continue
        cls = "f16" if fid is None else through_marlin(format_class(fid), plan, runtime, marlin)
        if share:
            out[cls] = out.get(cls, 0.0) + weight_bytes * share
    return tuple(sorted(out.items()))


RECURRENT_MIXERS = ("ssm", "linear")


def has_mla(model) -> bool:
    """Whether the model's attention is multi-head latent attention (DeepSeek V2/V3's, Kimi K2's)."""
    return bool(mla_mixers(model))


def has_recurrent_layers(model) -> bool:
    """Whether the model has SSM or linear-attention layers (a hybrid such as Qwen3-Next, Qwen3.5/3.6, Nemotron-H)."""
    return recurrent_layers(model) > 0


def has_delta_net_layers(model) -> bool:
    """Whether the model has linear-attention (Gated DeltaNet) layers: Qwen3-Next, Qwen3.5/3.6; not Mamba-2's."""
    return any(g.mixer is not None and g.mixer.kind == "linear" for g in model.layer_groups)


def prompt_expert_bytes(plan: Plan, tokens_per_forward: int) -> float:
    """The routed experts' bytes a prompt streams, one card's share: each forward of `tokens_per_forward` tokens
    reads the experts they touch (weights.expert_read_fraction), ceil(prompt / tokens_per_forward) forwards."""
    prompt = max(plan.prefill.prompt_tokens, 1)
    per = max(1, min(tokens_per_forward, prompt))
    w = plan.weights_card or plan.weights
    share = expert_read_fraction(plan.card_model or plan.model, plan.fmt, plan.scope, per)
    return -(-prompt // per) * w.bytes_total * share


# llama.cpp's defaults for a prompt: llama_decode calls of n_batch 2,048 tokens, each cut into ubatches of
# n_ubatch 512 (common/common.h; llama-bench's defaults are the same, and it feeds a prompt n_batch at a time).
# The same 512 as the ledger's LlamaCppSettings (not imported here: plan's start-up stays without the ledger;
# tests/test_speed.py holds the two equal).
LLAMACPP_BATCH_TOKENS, LLAMACPP_UBATCH_TOKENS = 2048, 512


# the backends whose llama.cpp pipelines ubatches over layer-split cards (async compute and events: CUDA, and
# ROCm through the same HIP backend; src/llama-context.cpp, the pipeline_parallel condition). Not Vulkan: its
# graph_compute became async in PR #17158 (2025-11), but no source here shows its events, nor a pipelined prompt
PIPELINED_BACKENDS = ("cuda", "rocm")


# llama.cpp's attention without flash attention moves prefill.UNFUSED_SCORE_TRAFFIC bytes a score (src/llama-graph.cpp,
# build_attn_mha: the breakdown is in estimate/prefill.py). The cache cells in view are padded to 32 without flash
# attention (256 with it).
UNFUSED_KV_PAD = 32


def score_matrix_bytes(plan: Plan, ubatch_tokens: int = LLAMACPP_UBATCH_TOKENS, model: ModelSpec | None = None,
                       pad: int = UNFUSED_KV_PAD, traffic: int = UNFUSED_SCORE_TRAFFIC) -> float:
    """Bytes llama.cpp's unfused attention moves for the plan's prompt: per attention layer, heads x the sum over
    ubatches of its tokens x the cells in view (the tokens so far, padded; a sliding window's layers see at most
    the window plus the ubatch) x UNFUSED_SCORE_TRAFFIC; a tensor-parallel card holds its share of the heads. By hand:
    LLaMA 3 8B (32 layers x 32 heads), 4,096 tokens in ubatches of 512: 512 x 512 x (1 + ... + 8) = 9,437,184
    scores a head and layer, x 1,024 x 20 B = 193 GB. Another runtime's unfused attention: the `model` it runs, its
    chunks, the cells' padding and the bytes moved a score (runtime_model.Departure)."""
    m, prompt = model or plan.model, plan.prefill.prompt_tokens
    tp = plan.comm.tp if plan.comm else 1
    total = 0.0
    for g in m.layer_groups:
        mix = g.mixer
        heads = getattr(mix, "num_attention_heads", None) if mix is not None else None
        if not heads:
            continue
        window = getattr(mix, "sliding_window", None)
        scores, done = 0, 0
        while done < prompt:
            u = min(ubatch_tokens, prompt - done)
            seen = done + u if window is None else min(done + u, window + u)
            scores += u * -(-seen // pad) * pad
            done += u
        total += g.count * max(1, heads // tp) * scores
    return total * traffic


def prompt_score_bytes(plan: Plan, runtime: str | None, flash_attn: bool, ubatch_tokens: int) -> float:
    """The score traffic of the plan's prompt where its attention is unfused: llama.cpp without flash attention, or
    a runtime that runs the model unfused (runtime_model.Departure); 0 where attention is fused."""
    if runtime == "llamacpp":
        return 0.0 if flash_attn else score_matrix_bytes(plan, ubatch_tokens)
    d = departure(runtime, plan.model) if runtime else None
    if d is None or not d.score_traffic_bytes:
        return 0.0
    return score_matrix_bytes(plan, d.prompt_chunk_tokens, run_model(plan.model, d), 1, d.score_traffic_bytes)


def prefill_inputs(plan: Plan, runtime: str | None = None, flash_attn: bool = True,
                   ubatch_tokens: int = LLAMACPP_UBATCH_TOKENS, marlin: bool = False,
                   be: str | None = None) -> PrefillInputs:
    """The plan's prompt as the step-time model costs it under `runtime`; `flash_attn` False: llama.cpp's
    unfused attention (score_matrix_bytes); `ubatch_tokens`: llama.cpp's -ub (at most its n_batch); `marlin` and
    `be` as in step_inputs."""
    ub = max(1, min(ubatch_tokens, LLAMACPP_BATCH_TOKENS))
    marlin = asked_marlin(plan, marlin)
    layers, _ = layer_count(plan)
    collectives, link = link_of(plan)
    pre = plan.prefill
    comm_s = plan.comm.time_s(1, plan.model.hidden_size, tokens=pre.prompt_tokens) if plan.comm else 0.0
    peak, peak_name = matmul_rate(plan, runtime, marlin, be)
    cls = kernel_class(plan, runtime, marlin)
    stages = plan.comm.pp if plan.comm else 1
    piped = runtime == "llamacpp" and stages > 1 and backend(plan.gpu, be) in PIPELINED_BACKENDS
    return PrefillInputs(
        prompt_tokens=pre.prompt_tokens, flops=pre.flops, weight_bytes=pre.bytes,
        side_bytes=side_bytes(plan, pre.bytes, pre.prompt_tokens, runtime, marlin),
        bandwidth_bytes_per_s=plan.gpu.bandwidth_bytes_per_s, peak_flop_per_s=peak, layers=layers,
        collectives=collectives, link=link, comm_time_s=comm_s, format_class=cls,
        expert_flops=2.0 * pre.prompt_tokens * expert_params_per_token(plan.card_model or plan.model),
        # each ubatch a forward (a -ub above n_batch's default comes with -b raised: llama.cpp clamps ub to b)
        expert_read_bytes=prompt_expert_bytes(plan, ubatch_tokens if runtime == "llamacpp" else pre.prompt_tokens),
        stages=stages, batch_tokens=LLAMACPP_BATCH_TOKENS if piped else 0,
        ubatch_tokens=ub if piped else 0,
        score_bytes=prompt_score_bytes(plan, runtime, flash_attn, ub),
        serving=runtime in SERVING_RUNTIMES, consumer=geforce(plan.gpu), peak_name=peak_name,
        launch_layers=(launch_layers(plan.model, tensor_core_native(plan, runtime, cls))
                       if runtime in EAGER_PREFILL_RUNTIMES else layers if runtime in SERVING_RUNTIMES else 0.0),
        attention_flops=pre.attention_flops, attention_flop_per_s=attention_rate(plan, runtime, peak))
