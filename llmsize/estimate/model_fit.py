"""Which catalog models fit one machine, and how fast: every model in every format its runtime loads, fully on
the card or (llama.cpp) partly in host memory, ranked by expected decode speed at batch 1.

For llama.cpp the placement is its start-up ledger with --fit's margin (llamacpp_fit.fit_split): weights, KV cache
at --context, compute and output buffers; a model that does not fit moves experts, then layers, to the host, and
its speed is the offload model's (which needs the host memory). For the other runtimes the placement is the
plan's budget (--gpu-util, --overhead-gib). The context column is the longest one sequence can hold there.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.errors import LlmsizeError
from llmsize.estimate.capacity import DEFAULT_OVERHEAD_BYTES
from llmsize.estimate.host_memory import HostMemory
from llmsize.estimate.unified import is_unified

# the formats each runtime loads, best quality first (a model's own release format is added for vLLM/SGLang)
FIT_FORMATS = {
    "llamacpp": ("gguf-q8_0", "gguf-q6_k", "gguf-q5_k_m", "gguf-q4_k_m", "gguf-q3_k_m", "gguf-q2_k", "gguf-iq2_m",
                 "gguf-iq2_xxs"),
    "mlx": ("mlx-8bit", "mlx-6bit", "mlx-4bit", "mlx-3bit"),
    "graph": ("bf16", "fp8", "awq-int4-g128", "nvfp4"),
}


@dataclass(frozen=True)
class FitRow:
    model: str
    format: str
    bits_per_weight: float
    placement: str  # "full", "--n-cpu-moe N", "--gpu-layers N"
    context_tokens: int | None  # the longest context one sequence can hold with this placement
    expected_tok_s: float | None
    expected_low: float | None
    expected_high: float | None
    ceiling_tok_s: float | None
    weights_bytes: float
    host_bytes: float = 0.0  # what the host must hold beside the card: weights, cache and buffers left there
    note: str | None = None
    params: int = 0  # the model's parameters (params.params_total), for --sort size
    mmproj_bytes: float = 0.0  # its vision tower's mmproj on the card beside it, weights and buffer (--mmproj)


# a format tried beside a quantized release holds at most this share of its bits a weight: re-quantizing a 4-bit
# release to another 4-bit format, or casting it up, costs quality or memory for nothing
REQUANT_BITS_SHARE = 0.9


def _formats(runtime: str, model: ModelSpec) -> tuple[str, ...]:
    """The formats fit tries: llama.cpp's and MLX's files, else the release format and the serving formats with
    fewer bits a weight than it (REQUANT_BITS_SHARE): gpt-oss's MXFP4 alone, not a bf16 upcast of it at three times
    its bytes nor an NVFP4 or AWQ re-quantization; DeepSeek-V3's FP8 beside AWQ and NVFP4, not a bf16 upcast."""
    from llmsize.estimate.quant import quant_format
    from llmsize.estimate.speed import is_ternary

    if runtime in FIT_FORMATS:
        return FIT_FORMATS[runtime]
    own = model.release.quant  # a ternary release runs in bitnet.cpp or as llama.cpp's TQ files, not here
    if is_ternary(own):
        return FIT_FORMATS["graph"]
    most = float(quant_format(own).bits_per_weight) * REQUANT_BITS_SHARE
    smaller = tuple(f for f in FIT_FORMATS["graph"] if float(quant_format(f).bits_per_weight) < most)
    return tuple(dict.fromkeys((own,) + smaller))


def _llamacpp_row(model, gpu, fid, context, host, card_bytes, llama_constants, runtimes,
                  host_ram_bytes=None, wired_limit_bytes=None, engine: str = "llamacpp",
                  mmproj: str | None = None) -> FitRow | None:
    """`engine` llamacpp or ollama: Ollama keeps no routed experts on the host (its num_gpu moves whole layers);
    `mmproj` a type: a model with a vision tower carries it as an mmproj of that type (estimate/mmproj.py)."""
    from dataclasses import replace

    from llmsize.estimate.llamacpp_fit import fit_split
    from llmsize.estimate.llamacpp_memory import gguf_file_tensors
    from llmsize.estimate.llamacpp_options import LlamaCppOptions, settings
    from llmsize.estimate.mmproj import towers

    tensors = gguf_file_tensors(model, fid)
    mm = mmproj if mmproj and towers(model) else None
    found = fit_split(model, gpu, tensors, settings(engine, LlamaCppOptions(context, mmproj=mm), model.num_layers,
                                                    gpu), card_bytes, moe_offload=engine != "ollama", engine=engine)
    if found.how == "none" or found.max_context_tokens is None or found.max_context_tokens < context:
        return None
    row = _placed_row(model, gpu, fid, context, host, llama_constants, runtimes, host_ram_bytes, wired_limit_bytes,
                      tensors, found)
    proj = sum(d.projector_bytes for d in found.ledger.devices)
    return replace(row, mmproj_bytes=float(proj)) if row is not None and proj else row


def _placed_row(model, gpu, fid, context, host, llama_constants, runtimes, host_ram_bytes, wired_limit_bytes,
                tensors, found) -> FitRow | None:
    """The row of a placement fit_split found: the whole card's speed, or the offload's."""
    from llmsize.estimate.expected import expect
    from llmsize.estimate.offload import offload_speed
    from llmsize.estimate.plan import PlanInputs, make_plan
    from llmsize.estimate.speed import format_class

    weights = sum(b for _, b in tensors)
    # the plan gives the speed figures; the placement and context are fit_split's, so the plan's budget need not
    # search llama.cpp's ledger again (an overhead given keeps the generic one)
    plan = make_plan(model, gpu, PlanInputs(quant=fid, context_tokens=context, wired_limit_bytes=wired_limit_bytes,
                                            overhead_bytes=DEFAULT_OVERHEAD_BYTES), search_fit=False)
    bits = float(plan.weights.bits_per_weight)
    if found.how == "as asked":
        e = expect(plan, runtimes, "llamacpp").expected
        return FitRow(model.id, fid, bits, "full", found.max_context_tokens, e.tok_s if e else None,
                      e.tok_s_low if e else None, e.tok_s_high if e else None, plan.decode_ceiling_tok_s, weights)
    if is_unified(gpu):
        return None  # the CPU's layers would read the GPU's own memory: not an offload that pays
    split = (f"--n-cpu-moe {found.settings.n_cpu_moe}" if found.how == "n_cpu_moe"
             else f"--gpu-layers {found.ledger.gpu_layers}")
    cpu = found.ledger.devices[-1]
    on_host = cpu.total_bytes
    if host_ram_bytes is not None and on_host > host_ram_bytes:
        return None
    if host is None:
        return FitRow(model.id, fid, bits, split, found.max_context_tokens, None, None, None, None, weights,
                      on_host, "offloaded: speed needs --host-memory")
    from llmsize.estimate.offload import gpu_part

    # as plan --engine llamacpp --fit costs it: the whole-GPU step restricted to the GPU part
    off = offload_speed(model, gpu, found.ledger, tensors, context, host, llama_constants,
                        gpu_step=gpu_part(plan, found.ledger, tensors, format_class(fid)))
    return FitRow(model.id, fid, bits, split, found.max_context_tokens, off.decode_tok_s, off.decode_tok_s_low,
                  off.decode_tok_s_high, off.ceiling_tok_s, weights, on_host,
                  "offloaded: the host side at the fitted share of its memory's peak (llama.cpp's CPU-only runs); "
                  "its band puts the GPU and host parts each at its own fit's held-out extreme")


class EngineRefuses(Exception):
    """A pair the plan's budget holds but the serving engine's own ledger holds no request of the context with."""


def _plan_row(model, gpu, fid, context, runtime, runtimes, wired_limit_bytes=None) -> FitRow | None:
    from llmsize.estimate.engines import plan_ledger
    from llmsize.estimate.expected import expect
    from llmsize.estimate.plan import PlanInputs, make_plan

    plan = make_plan(model, gpu, PlanInputs(quant=fid, context_tokens=context, wired_limit_bytes=wired_limit_bytes),
                     search_fit=False)
    if not plan.budget.weights_fit or plan.max_context.tokens < context:
        return None
    led = plan_ledger(plan, model, gpu, runtime)  # a serving engine's own ledger: does it start at all
    if led is not None and not led.fits_one_request:
        raise EngineRefuses(model.id)
    e = expect(plan, runtimes, runtime).expected
    return FitRow(model.id, fid, float(plan.weights.bits_per_weight), "full", plan.max_context.tokens,
                  e.tok_s if e else None, e.tok_s_low if e else None, e.tok_s_high if e else None,
                  plan.decode_ceiling_tok_s, plan.weights.bytes_total)


def _keep(r: FitRow, fastest: float) -> tuple:
    """--one-per-model's order: whole on the card first, by bits per weight; then offloaded: the most bits among
    those at least half as fast as the model's fastest offloaded format (not a Q8_0 at a few tok/s, nor a Q2_K for
    a few percent of speed), then without a speed the least host memory (an offloaded Q8_0 of DeepSeek-V3 would
    leave 654 GiB on the host)."""
    if r.placement == "full":
        return (2, r.bits_per_weight)
    if r.expected_tok_s is not None and fastest:
        return (1, r.expected_tok_s >= fastest / 2, r.bits_per_weight)
    return (0, -(r.host_bytes or 0))


def unused_host(gpu: GpuSpec, runtime: str) -> str | None:
    """Why a host memory given to `fit` plays no part (nothing of a placement goes there), or None."""
    if is_unified(gpu):
        return f"{gpu.id} shares one memory between CPU and GPU"
    if runtime != "llamacpp":
        from llmsize.estimate.runtimes import RUNTIME_NAMES

        return f"only llama.cpp offloads, and {RUNTIME_NAMES[runtime]} is planned"
    return None


def _order(sort: str):
    """tok_s: fastest expected first (no figure last), then more bits; size: most parameters first, then more bits,
    then faster."""
    if sort == "size":
        return lambda r: (-r.params, -r.bits_per_weight, -(r.expected_tok_s or 0.0))
    return lambda r: (r.expected_tok_s is None, -(r.expected_tok_s or 0.0), -r.bits_per_weight)


def shorter_context_note(models: list[ModelSpec], context: int, asked: bool) -> str | None:
    """What fit_models does with the models of fewer positions than `context`: by default (not `asked`) it sizes each
    at its own, as plan does (cap_to_model); a --context asked for leaves them out. None where there are none."""
    shorter = sorted((m for m in models if m.max_position_embeddings < context), key=lambda m: m.id)
    if not shorter:
        return None
    if not asked:
        return (f"--context defaults to {context:,} tokens, each model at most its own (max_position_embeddings): "
                + ", ".join(f"{m.id} at {m.max_position_embeddings:,}" for m in shorter))
    return (f"{len(shorter)} model(s) left out that take fewer than {context:,} tokens (max_position_embeddings): "
            + ", ".join(f"{m.id} {m.max_position_embeddings:,}" for m in shorter[:6])
            + (f" and {len(shorter) - 6} more" if len(shorter) > 6 else ""))


def fit_models(models: list[ModelSpec], gpu: GpuSpec, runtime: str, context: int, runtimes: dict,
               card_bytes: int, host: HostMemory | None = None, llama_constants=None,
               host_ram_bytes: float | None = None, one_per_model: bool = False,
               wired_limit_bytes: float | None = None, sort: str = "tok_s",
               min_tok_s: float | None = None, engine: str = "llamacpp",
               cap_to_model: bool = False, mmproj: str | None = None) -> tuple[list[FitRow], int, int, int]:
    """(rows, how many model/format pairs could not be planned, how many fit before --min-tok-s and
    --one-per-model, how many the plan's budget holds but the serving engine's own ledger does not: no request of
    `context` tokens, so the engine does not start) in `sort`'s order. `cap_to_model`: each model at the least of
    `context` and its own (Ollama's
    default num_ctx). `host_ram_bytes` drops
    offloaded placements the host cannot hold; `one_per_model` keeps each model's most bits per weight whole on the
    card, or where no format fits whole the most bits of the offloaded ones at least half as fast as its fastest;
    `min_tok_s` drops rows expected slower (and those without an expected figure); `mmproj` (a type, llama.cpp
    only) sizes each model with a vision tower with its mmproj on the card."""
    from dataclasses import replace

    from llmsize.estimate.params import params_total

    rows, skipped, refused = [], 0, 0
    asked = context
    for m in models:
        context = min(asked, m.max_position_embeddings) if cap_to_model else asked
        for fid in _formats(runtime, m):
            try:
                row = (_llamacpp_row(m, gpu, fid, context, host, card_bytes, llama_constants, runtimes, host_ram_bytes,
                                     wired_limit_bytes, engine, mmproj)
                       if runtime == "llamacpp" else _plan_row(m, gpu, fid, context, runtime, runtimes,
                                                               wired_limit_bytes))
            except EngineRefuses:
                refused += 1
                continue
            except LlmsizeError:
                skipped += 1  # a format this architecture has no rule for (e.g. a GGUF mix of an SSM)
                continue
            if row is not None:
                rows.append(replace(row, params=params_total(m)))
    fitting = len(rows)
    if min_tok_s is not None:
        rows = [r for r in rows if r.expected_tok_s is not None and r.expected_tok_s >= min_tok_s]
    if one_per_model:
        best: dict[str, FitRow] = {}
        fastest: dict[str, float] = {}
        for r in rows:
            if r.placement != "full" and r.expected_tok_s:
                fastest[r.model] = max(fastest.get(r.model, 0.0), r.expected_tok_s)
        for r in rows:
            f = fastest.get(r.model, 0.0)
            if r.model not in best or _keep(r, f) > _keep(best[r.model], f):
                best[r.model] = r
        rows = list(best.values())
    rows.sort(key=_order(sort))
    return rows, skipped, fitting, refused
