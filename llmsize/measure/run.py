"""One `llmsize measure` run: preflight, card, probe, build, prefill, timed decode, and the result dict.

Stages report to an optional `progress(stage, done, total)` callback; the CLI draws it. Ctrl-C during the
timed decode stops the loop and the result covers the tokens measured so far (`run.interrupted`).
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from llmsize import __version__
from llmsize.errors import InvalidValueError, LlmsizeError
from llmsize.measure import GEMV_KERNELS, launch_env, preflight
from llmsize.measure.gpu import CudaGpu, timed_s
from llmsize.measure.stats import percentile
from llmsize.units import GiB

QUANTS = ("nvfp4", "bf16")
DEVICES = ("cuda", "cpu")
MAX_BATCH = 256  # gemv_tc.MAX_ROWS (not imported: validation happens before torch is)


@dataclass
class MeasureOptions:
    quant: str = "nvfp4"
    context: int = 4096
    tokens: int = 256
    batch: int = 1
    device: str = "cuda"
    checkpoint: str | None = None
    gpu_index: int = 0
    warmup: int = 8
    seed: int = 0
    probe: bool = True
    gemv: str = "auto"  # auto | words | triton: the NVFP4 kernel (auto: words if it checks out)
    compile: bool = False  # torch.compile the decode step (fuses norms, RoPE, residuals) before graph capture
    fused: bool | None = None  # the work between the GEMVs in fused.py's kernels; None: if they check out
    fallback: bool = False  # a kernel that fails its self-check: the slower path, said in the report (else: stop)


def _launch_settings(device) -> dict:
    """PDL mode and L2 prefetch as launch.py reads them from the environment (LLMSIZE_PDL, LLMSIZE_PREFETCH_KB)."""
    from llmsize.measure import launch
    mode = launch.pdl_mode(device)
    return {"pdl": mode != launch.PDL_OFF, "pdl_mode": ("off", "wait first", "early")[mode],
            "l2_prefetch_kb": launch.prefetch_bytes(device) // 1024}


def _check_launch_env() -> None:
    try:
        launch_env()
    except ValueError as e:
        head, _, hint = str(e).partition(": ")
        raise InvalidValueError(head + ".", hint[:1].upper() + hint[1:]) from None


def validate(o: MeasureOptions) -> None:
    if o.quant not in QUANTS:
        raise InvalidValueError(f"--quant `{o.quant}` is not measurable.", "Use nvfp4 or bf16.")
    if o.device not in DEVICES:
        raise InvalidValueError(f"--device `{o.device}` is not supported.", "Use cuda or cpu.")
    for name, v, lo in (("--context", o.context, 1), ("--tokens", o.tokens, 1), ("--batch", o.batch, 1),
                        ("--warmup", o.warmup, 1), ("--gpu-index", o.gpu_index, 0)):
        if v < lo:
            raise InvalidValueError(f"{name} `{v}` must be at least {lo}.", f"Pass {name} {lo} or more.")
    if o.batch > MAX_BATCH:
        raise InvalidValueError(f"--batch `{o.batch}` is above {MAX_BATCH}, the most rows the NVFP4 GEMV takes.",
                                f"Measure batch 1 to {MAX_BATCH}.")
    if o.gemv not in ("auto", *GEMV_KERNELS):
        raise InvalidValueError(f"--gemv `{o.gemv}` is not a kernel.", f"Use auto, {', '.join(GEMV_KERNELS)}.")
    if o.batch > 16 and o.quant == "nvfp4" and o.device == "cuda" and o.gemv not in ("auto", "words"):
        raise InvalidValueError(f"--batch `{o.batch}` with --gemv {o.gemv}: above 16 rows only the word family "
                                "has an NVFP4 kernel (the others would decode through a dense bf16 copy).",
                                "Use --gemv auto or words, or a batch of 16 or less.")
    _check_launch_env()
    if o.fused and o.device == "cpu":
        raise InvalidValueError("--fused runs Triton kernels, which need a GPU.",
                                "Drop --fused with --device cpu (the tests run them through Triton's interpreter).")
    from llmsize.files import is_dir

    if o.checkpoint and not is_dir(o.checkpoint, "--checkpoint"):
        raise InvalidValueError(f"--checkpoint `{o.checkpoint}` " + ("is not a folder." if Path(o.checkpoint).exists()
                                                                     else "does not exist."),
                                "Point it at a folder holding config.json and *.safetensors.")


def check_wide_batch(batch: int, gemv: str, off: set[str]) -> None:
    """Above 16 rows NVFP4 has one kernel, the tensor-core word GEMV's row blocks: refuse such a batch, before
    the model is built, when the card's self-checks left it out (off: KernelPlan.off)."""
    if batch <= 16:
        return
    from llmsize.measure.gemv_words import WORDS_FEATURES

    failed = ["the word GEMV"] if gemv != "words" else [f"the word GEMV's {WORDS_FEATURES[n]}" for n in ("tc", "wide")
                                                        if n in off]
    if failed:
        raise InvalidValueError(f"--batch `{batch}`: {' and '.join(failed)} failed the self-check on this card, "
                                "and above 16 rows NVFP4 has no other kernel.", "Measure a batch of 16 or less.")


def git_commit() -> str | None:
    """The project's commit: LLMSIZE_COMMIT where set (a copy of the tree sent to a borrowed GPU machine names its
    commit that way: on 2026-12-04 such a copy carried a .git whose HEAD was an older commit than its files),
    else git's HEAD for this checkout, else None."""
    named = os.environ.get("LLMSIZE_COMMIT", "").strip()
    if named:
        return named
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        head = out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        head = ""
    return head or None


# ------------------------------------------------------------------------------------------ bytes

def weight_memory_bytes(cfg, quant: str, elem: int = 2) -> int:
    """Resident weight bytes of a config in a format, from shapes alone (for the fit check); `elem` the bytes of
    an unquantized element (2 on the GPU, bf16; 4 on the CPU, float32)."""
    from llmsize.measure.gemma4 import layer_shapes

    total = cfg.vocab_size * cfg.hidden_size * elem + cfg.hidden_size * elem
    for kind in cfg.layer_types:
        for n, k in layer_shapes(cfg, kind).values():
            total += n * k // 2 + n * k // 16 + 4 * n if quant == "nvfp4" else n * k * elem
        total += (4 * cfg.hidden_size + 2 * cfg.hd(kind) + 1) * elem
    return total


def kv_cache_bytes(cfg, batch: int, positions: int, elem: int = 2) -> int:
    total = 0
    for kind in cfg.layer_types:
        slots = min(cfg.sliding_window, positions) if kind == "sliding" else positions
        total += 2 * batch * cfg.kv_heads(kind) * slots * cfg.hd(kind) * elem
    return total


def transient_bytes(cfg, batch: int, context: int, elem: int = 2) -> int:
    """Largest short-lived allocation: prefill activations of one pass of sequences (gate|up output and its
    gelu), one dequantized matrix, attention scores of one query chunk, or quantizing one matrix in fp32 while
    building."""
    from llmsize.measure.gemma4 import prefill_rows

    rows = prefill_rows(batch, context)
    t = rows * context
    act = 3 * t * 2 * cfg.intermediate_size * elem
    dense = 2 * cfg.intermediate_size * cfg.hidden_size * elem
    scores = 3 * rows * cfg.num_heads * min(context, 512) * context * 4
    build = 5 * cfg.intermediate_size * cfg.hidden_size * 4
    return max(act + dense + scores, build)


def bytes_read_per_step(weights, batch: int, mean_positions: float) -> dict:
    """Bytes one decode step reads, by part, from the actual tensors; KV at the mean attended length."""
    from llmsize.measure.nvfp4 import Nvfp4Weight

    cfg = weights.config
    parts = dict(nvfp4_packed=0, nvfp4_scales=0, linear_bf16=0, lm_head=0, embedding_rows=0, norms=0,
                 kv_full=0, kv_sliding=0)
    parts["lm_head"] = weights.embed.numel() * weights.embed.element_size()  # tied: the whole embedding
    parts["embedding_rows"] = batch * cfg.hidden_size * weights.embed.element_size()
    parts["norms"] = weights.final_norm.numel() * weights.final_norm.element_size()
    for layer in weights.layers:
        for name in ("qkv", "o", "gate_up", "down"):
            w = getattr(layer, name)
            if isinstance(w, Nvfp4Weight):
                parts["nvfp4_packed"] += w.packed_bytes
                parts["nvfp4_scales"] += w.scale_bytes
            else:
                parts["linear_bf16"] += w.numel() * w.element_size()
        for t in (layer.q_norm, layer.k_norm, layer.input_norm, layer.post_attn_norm, layer.pre_ffn_norm,
                  layer.post_ffn_norm, layer.layer_scalar):
            parts["norms"] += t.numel() * t.element_size()
        kind = layer.kind
        length = min(mean_positions, cfg.sliding_window) if kind == "sliding" else mean_positions
        kv = 2 * batch * cfg.kv_heads(kind) * cfg.hd(kind) * length * weights.embed.element_size()
        parts["kv_full" if kind == "full" else "kv_sliding"] += int(round(kv))
    return parts


def predicted(quant: str, mean_positions: int, batch: int, bandwidths_gb_s: dict) -> dict:
    """What `plan` predicts for Gemma 4 12B: bytes read per step and the ceiling for each bandwidth given."""
    from llmsize.catalog.loader import Catalog
    from llmsize.estimate.kv import kv_bytes
    from llmsize.estimate.plan import resolve_format
    from llmsize.estimate.weights import weight_bytes_read

    model = Catalog().model("gemma-4-12b")
    fmt, scope = resolve_format(model, quant, None)
    step = weight_bytes_read(model, fmt, scope, batch) + batch * kv_bytes(model, mean_positions, "bf16"
                                                                           ).bytes_per_sequence
    out = {"bytes_per_step": int(round(step)), "format": fmt.id, "scope": scope}
    for name, bw in bandwidths_gb_s.items():
        out[f"ceiling_tok_s_{name}"] = batch * bw * 1e9 / step if bw else None
    return out


def plan_roofline(quant: str, mean_positions: int, batch: int, gpu) -> dict:
    """plan's roofline for Gemma 4 12B on a catalog card (GpuSpec) at this batch and attended length: aggregate
    tok/s = batch / max(bytes / datasheet bandwidth, FLOPs / the card's peak), which bound that is, and the
    smallest compute-bound batch at this length (None: never)."""
    from llmsize.catalog.loader import Catalog
    from llmsize.estimate.plan import PlanInputs, make_plan

    plan = make_plan(Catalog().model("gemma-4-12b"), gpu,
                     PlanInputs(quant=quant, context_tokens=mean_positions, batch=batch), search_fit=False)
    return {"roofline_tok_s": plan.decode_b.tok_s, "roofline_bound": plan.decode_b.bound,
            "ridge_batch": plan.ridge_batch}


# ------------------------------------------------------------------------------------------ the run

@dataclass
class _Setup:
    """What the preflight found: torch, the device, the card and its catalog entry, the model's config and where
    it comes from, the memory the run needs, the probed bandwidth."""

    torch: object
    cuda: bool
    device: object
    dtype: object
    cfg: object
    layout: str | None
    source: str
    positions: int
    need: dict
    card: object = None
    catalog_gpu: object = None
    probe_gb_s: float | None = None
    probe_method: str | None = None
    gpu: object = None  # gpu.CudaGpu (or what the caller handed measure); None on the CPU


def measure(o: MeasureOptions, progress=None, gpu=None) -> dict:
    """The run, step by step: options, preflight, the kernels (self-checks), build, prefill, timed loop, result.
    `gpu`: the card of a --device cuda run (default gpu.CudaGpu(torch, o.gpu_index)); every torch.cuda and NVML
    call the run makes goes through it."""
    validate(o)

    def tick(stage, done=0, total=1):
        if progress:
            progress(stage, done, total)

    s = _preflight(o, tick, gpu)
    kernels = _kernels(o, s)
    weights, build_s = _build(o, s, tick)
    from llmsize.measure import gemma4
    from llmsize.measure.tuner import Tuning

    dec = gemma4.Gemma4Decoder(weights, batch=o.batch, max_positions=s.positions, gemv=kernels.gemv,
                               fused=kernels.fused, fold=kernels.fold, fold_combine=kernels.fold_combine,
                               cap_argmax=kernels.cap_argmax, off=kernels.off, tuning=Tuning())
    gen = s.torch.Generator(device=s.device).manual_seed(o.seed + 1)
    prompt = s.torch.randint(0, s.cfg.vocab_size, (o.batch, o.context), generator=gen, device=s.device)
    tick("prefill", 0, 1)
    ttft_s = timed_s(s.gpu, lambda: dec.prefill(prompt))
    tick("prefill", 1, 1)
    start_pos, times_s, interrupted = _timed_loop(o, s, dec, tick)
    return _result(o, s, kernels, dec.tuning, weights, build_s, ttft_s, start_pos, times_s, interrupted)


def _preflight(o: MeasureOptions, tick, gpu=None) -> _Setup:
    """torch, the card (NVML, the catalog), the model's config, and whether the run fits: before any work."""
    cuda = o.device == "cuda"
    if cuda and gpu is None:
        preflight.require_driver(o.gpu_index)  # before torch's import: a machine without a card is told at once
    torch = preflight.require_torch()
    from llmsize.measure import checkpoint as ckpt
    from llmsize.measure import gemma4

    card = catalog_gpu = None
    if cuda:
        gpu = gpu if gpu is not None else CudaGpu(torch, o.gpu_index)
        gpu.require(triton=o.quant == "nvfp4")
        from llmsize.catalog.loader import Catalog
        from llmsize.catalog.match import match_gpu

        card = gpu.card()
        catalog_gpu = match_gpu(card.name, card.vram_total_bytes, Catalog().hardware.all())
        gpu.open()
        device, dtype = gpu.device, gpu.dtype
    else:
        gpu, device, dtype = None, torch.device("cpu"), torch.float32
    if o.checkpoint:
        cfg, layout = ckpt.read_config(Path(o.checkpoint))
        source = f"checkpoint {o.checkpoint} ({layout})"
    else:
        cfg, layout = (gemma4.GEMMA4_12B if cuda else gemma4.GEMMA4_TINY), None
        source = "random weights of the exact shapes (scaled normal), quantized with the ModelOpt NVFP4 recipe" \
            if o.quant == "nvfp4" else "random weights of the exact shapes (scaled normal), bf16"
    positions = o.context + o.warmup + o.tokens + 2
    elem = 2 if cuda else 4  # bf16 on the card, float32 on the CPU
    need = {"weights": weight_memory_bytes(cfg, o.quant, elem),
            "kv_cache": kv_cache_bytes(cfg, o.batch, positions, elem),
            "transient": transient_bytes(cfg, o.batch, o.context, elem), "runtime": int(0.75 * GiB) if cuda else 0}
    s = _Setup(torch, cuda, device, dtype, cfg, layout, source, positions, need, card, catalog_gpu, gpu=gpu)
    if cuda:
        free = gpu.free_bytes()
        preflight.check_fits(sum(need.values()), free, f"{cfg.name} in {o.quant} at {o.context} tokens x batch "
                                                       f"{o.batch}")
        if o.probe:
            tick("probe bandwidth")
            buf = min(2 * GiB, max(256 * 2 ** 20, (free - sum(need.values())) // 4)) // 4 * 4
            s.probe_gb_s, s.probe_method = gpu.probe(buf)
    else:
        preflight.check_fits(sum(need.values()), preflight.host_available_bytes(),
                             f"{cfg.name} in {o.quant} at {o.context} tokens x batch {o.batch} on the CPU", host=True)
    return s


def _kernels(o: MeasureOptions, s: _Setup):
    """The run's kernels from the options and the card's self-checks (kernel_plan.plan_kernels); a batch above 16
    whose only NVFP4 kernel failed is refused here, before the build."""
    from llmsize.measure.kernel_plan import plan_kernels

    kernels = plan_kernels(o.gemv, o.fused, o.compile, o.quant, o.batch, s.device, s.cuda, o.fallback)
    if kernels.gemv != "torch":  # an NVFP4 kernel (the plan says torch on the CPU and for bf16)
        check_wide_batch(o.batch, kernels.gemv, set(kernels.off))
    return kernels


def _build(o: MeasureOptions, s: _Setup, tick):
    """The weights, from the checkpoint or random of the exact shapes; and the seconds it took."""
    from llmsize.measure import checkpoint as ckpt
    from llmsize.measure import gemma4

    stage = "build + quantize" if o.quant == "nvfp4" else "build"
    t_build = time.perf_counter()
    tick(stage, 0, s.cfg.num_layers)

    def on_layer(i):
        tick(stage, i + 1, s.cfg.num_layers)

    if o.checkpoint:
        weights = ckpt.load(o.checkpoint, device=s.device, dtype=s.dtype, quant=o.quant, on_layer=on_layer)
    else:
        weights = gemma4.build_random(s.cfg, device=s.device, dtype=s.dtype, quant=o.quant, seed=o.seed,
                                      on_layer=on_layer)
    if s.cuda:
        s.gpu.synchronize()
    return weights, time.perf_counter() - t_build


def lm_head_path(kernels, cuda: bool) -> dict:
    """How the step ends: cuBLAS's lm_head GEMM, then the soft-cap and tokens in one checked kernel (the fused
    step) or in the eager ops; torch's matmul on the CPU."""
    if kernels.cap_argmax:
        return {"kernel": "cublas+cap_argmax"}
    return {"kernel": "cublas" if cuda else "torch"}


def _timed_loop(o: MeasureOptions, s: _Setup, dec, tick) -> tuple[int, list[float], bool]:
    """Warm-up steps (compile, autotune), one captured in a CUDA graph on a GPU, then --tokens timed steps (CUDA
    events around each replay; the wall clock on the CPU). Ctrl-C keeps what was timed. (first position, step
    seconds, interrupted)"""
    torch = s.torch
    decode_step = dec.decode_step
    if o.compile:  # inductor fuses the elementwise work between the GEMVs; our Triton kernels are called as-is
        decode_step()  # one eager step first: kernel choices timed outside the traced region
        decode_step = torch.compile(dec.decode_step, dynamic=False)
    for i in range(o.warmup):  # compiles and autotunes the kernels before capture
        tick("warm-up", i, o.warmup)
        decode_step()
    dec.tuning.freeze()  # every shape's launch settings are timed: none may be timed inside the graph
    step = s.gpu.capture(decode_step) if s.cuda else decode_step
    start_pos = int(dec.pos.item())
    times_s, interrupted = [], False
    try:
        if s.cuda:
            starts = [s.gpu.event() for _ in range(o.tokens)]
            ends = [s.gpu.event() for _ in range(o.tokens)]
            done = 0
            try:
                for i in range(o.tokens):
                    starts[i].record()
                    step()
                    ends[i].record()
                    done = i + 1
                    if i % 32 == 31:
                        tick("decode", done, o.tokens)
            finally:
                s.gpu.synchronize()
                times_s = [starts[i].elapsed_time(ends[i]) / 1e3 for i in range(done)]
        else:
            for i in range(o.tokens):
                t = time.perf_counter()
                step()
                times_s.append(time.perf_counter() - t)
                tick("decode", i + 1, o.tokens)
    except KeyboardInterrupt:
        interrupted = True
    tick("decode", len(times_s), o.tokens)
    if not times_s:
        raise LlmsizeError("Interrupted before any token was decoded: nothing to report.")
    return start_pos, times_s, interrupted


def _prediction(o: MeasureOptions, s: _Setup, mean_pos: float, tok_s: float) -> dict:
    """plan's bytes and ceilings for Gemma 4 12B at this run's batch and attended length, and the fractions of
    them measured; a reason instead where the run is not Gemma 4 12B on a GPU."""
    from llmsize.measure import gemma4

    big = gemma4.GEMMA4_12B
    if not (s.cuda and s.cfg.hidden_size == big.hidden_size and s.cfg.layer_types == big.layer_types):
        return {"ceiling_tok_s": None, "reason": "plan models Gemma 4 12B on a catalog card; this run is neither"}
    sheet = s.catalog_gpu.bandwidth_gb_s if s.catalog_gpu else None
    theo = s.card.theoretical_bandwidth_gb_s if s.card else None
    pred = predicted(o.quant, int(round(mean_pos)), o.batch, {"datasheet": sheet, "theoretical": theo,
                                                              "probe": s.probe_gb_s})
    pred["ceiling_tok_s"] = pred.get("ceiling_tok_s_datasheet") or pred.get("ceiling_tok_s_theoretical")
    for name in ("datasheet", "theoretical", "probe"):
        ceil = pred[f"ceiling_tok_s_{name}"]
        pred[f"measured_fraction_of_ceiling_{name}"] = tok_s / ceil if ceil else None
    pred["catalog_gpu"] = s.catalog_gpu.id if s.catalog_gpu else None
    if s.catalog_gpu:
        pred.update(plan_roofline(o.quant, int(round(mean_pos)), o.batch, s.catalog_gpu))
        pred["measured_fraction_of_roofline"] = tok_s / pred["roofline_tok_s"]
    return pred


def _gpu_record(o: MeasureOptions, s: _Setup) -> dict:
    """The card as NVML and the catalog describe it, with the probe and the clocks after the decode."""
    theo = s.card.theoretical_bandwidth_gb_s if s.card else None
    gpu = s.card.as_dict() if s.card else {"name": f"CPU ({platform.processor() or platform.machine()})",
                                           "theoretical_bandwidth_gb_s": None}
    clocks = s.gpu.clocks() if s.cuda else {}
    gpu.update({
        "probed_read_bandwidth_gb_s": s.probe_gb_s, "probe_method": s.probe_method,
        "probe_fraction_of_theoretical": s.probe_gb_s / theo if s.probe_gb_s and theo else None,
        "catalog_id": s.catalog_gpu.id if s.catalog_gpu else None,
        "catalog_name": s.catalog_gpu.name if s.catalog_gpu else None,
        "datasheet_bandwidth_gb_s": s.catalog_gpu.bandwidth_gb_s if s.catalog_gpu else None,
        "compute_capability": s.gpu.capability() if s.cuda else None,
        "clocks_after_decode": clocks,
    })
    return gpu


def _result(o: MeasureOptions, s: _Setup, kernels, tuning, weights, build_s: float, ttft_s: float,
            start_pos: int, times_s: list[float], interrupted: bool) -> dict:
    """The run's JSON: bytes, timings, achieved bandwidth, plan's prediction, the kernels that ran."""
    torch, n = s.torch, len(times_s)
    mean_pos = start_pos + (n - 1) / 2 + 1  # attended length, averaged over the timed steps
    parts = bytes_read_per_step(weights, o.batch, mean_pos)
    step_bytes, total_s = sum(parts.values()), sum(times_s)
    tok_s, achieved_gb_s = o.batch * n / total_s, step_bytes * n / total_s / 1e9
    theo = s.card.theoretical_bandwidth_gb_s if s.card else None
    sheet = s.catalog_gpu.bandwidth_gb_s if s.catalog_gpu else None
    versions = {"llmsize": __version__, "python": platform.python_version(), "torch": torch.__version__,
                "cuda": torch.version.cuda}
    try:
        import triton
        versions["triton"] = triton.__version__
    except ImportError:
        versions["triton"] = None
    fused, gemv = kernels.fused, kernels.gemv
    return {
        "command": "measure",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "versions": versions,
        "gpu": _gpu_record(o, s),
        "model": {"name": s.cfg.name, "source": s.source, "layout": s.layout, "layers": s.cfg.num_layers,
                  "hidden_size": s.cfg.hidden_size, "vocab_size": s.cfg.vocab_size},
        "run": {"device": o.device, "quant": o.quant, "gemv": gemv, "context_tokens": o.context,
                "batch": o.batch, "tokens_requested": o.tokens, "tokens_measured": n, "warmup_tokens": o.warmup,
                "first_timed_position": start_pos, "mean_attended_positions": mean_pos,
                "cuda_graph": s.cuda, "compiled": o.compile, "fused": fused,
                "fused_epilogues": bool(fused and kernels.fold and gemv == "words" and o.batch == 1),
                "combine_folded": bool(fused and kernels.fold and kernels.fold_combine),
                "lm_head": lm_head_path(kernels, s.cuda), "batch_kernels": batch_kernels(gemv, o.batch, tuning),
                **(_launch_settings(s.device) if s.cuda else {"pdl": False}), "self_checks": dict(kernels.checks),
                "fallbacks": list(kernels.fallbacks), "interrupted": interrupted, "seed": o.seed,
                "build_s": build_s, "memory_estimate_bytes": s.need,
                "peak_memory_bytes": s.gpu.peak_memory_bytes() if s.cuda else None},
        "bytes_per_token": step_bytes / o.batch,
        "bytes_per_step": step_bytes,
        "bytes_per_step_parts": parts,
        "prefill": {"ttft_s": ttft_s, "prompt_tokens": o.context},
        "decode": {"tok_s": tok_s, "ms_per_token_median": statistics.median(times_s) * 1e3,
                   "ms_per_token_p10": percentile(times_s, .1) * 1e3, "ms_per_token_p90": percentile(times_s, .9) * 1e3,
                   "ms_per_step_mean": total_s / n * 1e3, "timing_note": unsteady_note(times_s)},
        "achieved": {"bandwidth_gb_s": achieved_gb_s, "fraction_of_theoretical": achieved_gb_s / theo if theo else None,
                     "fraction_of_probe": achieved_gb_s / s.probe_gb_s if s.probe_gb_s else None,
                     "fraction_of_datasheet": achieved_gb_s / sheet if sheet else None},
        "predicted": _prediction(o, s, mean_pos, tok_s),
        "options": asdict(o),
        "env": {"TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET")},
    }


# steps of one decode loop whose p90 lasts this many times their p10: not one steady loop
UNSTEADY_SPREAD = 2.0


def unsteady_note(times_s: list[float]) -> str | None:
    """What a run whose step times spread UNSTEADY_SPREAD-fold or more from p10 to p90 says beside its figures: a
    steady loop (CUDA graphs replaying one step) spreads a few percent; a CPU run on a busy machine was seen at 80x."""
    p10, p90 = percentile(times_s, .1), percentile(times_s, .9)
    if not p10 or p90 / p10 < UNSTEADY_SPREAD:
        return None
    return (f"the steps' times spread {p90 / p10:,.1f}x from p10 to p90: something else ran on this machine, or its "
            "clocks moved; the median and tokens/s are not one steady loop's, rerun it on an idle machine")


def batch_kernels(gemv: str, batch: int, tuning) -> dict | None:
    """With the word kernels, the tile each weight shape got from the run's tuning: at batch 1 the word kernel's
    (gemv_words.chosen_tiles), at 2-256 rows the tensor-core kernel's (gemv_tc.chosen_kernels); None otherwise
    (or where nothing was timed: the interpreter's fixed tiles)."""
    if gemv != "words":
        return None
    from llmsize.measure import gemv_tc, gemv_words

    return (gemv_words.chosen_tiles(tuning) if batch == 1 else gemv_tc.chosen_kernels(tuning, batch)) or None
