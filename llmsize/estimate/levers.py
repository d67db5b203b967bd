"""The seeds' map of efficiency levers, computed for one plan (`plan --levers`).

Seed 002 ends on a map: each technique, the resource it attacks and its typical gain (quantization: weights / 2 to
/ 4; a smaller KV dtype; a cache that stops growing; batching; more cards), and the advice to diagnose the resource
that saturates before choosing. Here each lever is a change of the plan's own options, and its row is the plan
that change gives: the figure that binds today (diagnosis.saturates) before and after, the cost or caveat, and the
`llmsize plan` command that reproduces the "after". Rows are sorted by their effect on their figure (for a decode
figure, on the runtime's expected speed where the plan has one: expected_of); the first is the diagnosis itself. A row's figure is the binding one except where a lever moves another (batching: the aggregate
tok/s; a KV lever under a weights shortfall: still the memory left).

Figures, by what saturates (all from estimate/plan.py):
  weights    kv_budget_gb    memory left for the KV cache on each card, GB (negative: the weights do not fit)
  kv_cache   sequences       sequences of --context tokens the cache holds
  bandwidth  tok_s           batch-1 decode ceiling, tok/s (the bandwidth-bound one; with --spec, speculative's)
  compute    aggregate_tok_s decode at --batch, tok/s in aggregate
and two that only a lever moves:
  offload_tok_s      batch-1 decode ceiling with part of the weights in host memory (llama.cpp's --fit split;
                     estimate/offload.py), tok/s; before: none (the model does not run)
  fleet_tok_s_per_gpu  output tok/s per card of the cheapest fleet (estimate/fleet.py) serving the plan's
                     sequences, aggregated before and disaggregated (prefill and decode on separate cards) after
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, replace

from llmsize.catalog.schema import STATE_KINDS
from llmsize.errors import LlmsizeError
from llmsize.estimate.capacity import LLAMACPP_RUNTIMES
from llmsize.estimate.fleet import DISAGGREGATING
from llmsize.estimate.kv_policy import parse_kv_policy, policy_applies
from llmsize.estimate.quant import FORMATS, RUNTIME_FORMATS, RUNTIME_KV, kv_dtype_bytes, kv_dtype_flags
from llmsize.estimate.runtime_model import vision_tower_of
from llmsize.estimate.runtimes import is_gguf
from llmsize.estimate.speculative import suggested_spec
from llmsize.estimate.speed import is_ternary
from llmsize.units import GB, GiB

FIGURE_OF = {"weights": "kv_budget_gb", "kv_cache": "sequences", "bandwidth": "tok_s", "compute": "aggregate_tok_s"}
FIGURE_WORDS = {"kv_budget_gb": "memory left for the KV cache (GB)", "sequences": "sequences at --context",
                "tok_s": "batch-1 decode ceiling (tok/s)", "aggregate_tok_s": "aggregate decode (tok/s)",
                "offload_tok_s": "batch-1 decode ceiling, part in host memory (tok/s)",
                "fleet_tok_s_per_gpu": "fleet output per card (tok/s)"}
RESOURCE_OF = {"weights": "memory (weights)", "kv_cache": "memory (KV cache)", "bandwidth": "memory bandwidth",
               "compute": "compute"}
# weight formats tried, with what each costs beside its bytes (the caveat column)
WEIGHT_FORMATS = {
    "fp8": "8-bit floats: near-lossless on most models; FP8 tensor cores from Ada and Hopper, weight-only before",
    "nvfp4": "4-bit (NVFP4): some quality loss, check your evals; FP4 tensor cores on Blackwell only, Marlin "
             "weight-only in vLLM elsewhere",
    "mxfp4": "4-bit (MXFP4): some quality loss, check your evals; FP4 tensor cores on Blackwell and MI355X",
    "int4-g128": "4-bit weight-only (GPTQ/AWQ-style): some quality loss; Marlin kernels in vLLM and SGLang",
    "gguf-q8_0": "GGUF Q8_0: near-lossless; llama.cpp, Ollama, LM Studio",
    "gguf-q4_k_m": "GGUF Q4_K_M: some quality loss; llama.cpp, Ollama, LM Studio",
    "gguf-q3_k_m": "GGUF Q3_K_M: visible quality loss; llama.cpp, Ollama, LM Studio",
    "gguf-q2_k": "GGUF Q2_K: large quality loss; llama.cpp, Ollama, LM Studio",
    "gguf-iq2_m": "GGUF IQ2_M: large quality loss; files made with an importance matrix (llama-quantize requires "
                  "one); llama.cpp, Ollama, LM Studio",
    "gguf-iq2_xxs": "GGUF IQ2_XXS: severe quality loss; files made with an importance matrix (llama-quantize "
                    "requires one); llama.cpp, Ollama, LM Studio",
    "mlx-8bit": "MLX 8-bit affine: near-lossless; MLX (mlx-lm) on Apple silicon",
    "mlx-4bit": "MLX 4-bit affine: some quality loss; MLX (mlx-lm) on Apple silicon",
    "int8": "INT8 weights: near-lossless; gpt-fast",
    "int4-g32-zp": "4-bit groups of 32: some quality loss; gpt-fast",
    "gguf-tq1_0": "GGUF TQ1_0: the ternary weights at 1.69 bits, lossless for a model trained ternary; llama.cpp",
    "gguf-tq2_0": "GGUF TQ2_0: the ternary weights at 2.06 bits, lossless for a model trained ternary; llama.cpp "
                  "(faster kernels than TQ1_0)",
}
TERNARY_FORMATS = ("gguf-tq1_0", "gguf-tq2_0")  # a ternary-trained model's rows, whatever the runtime
# the caveat of each smaller cache a row offers (the runtimes' own: quant.RUNTIME_KV; quant.RUNTIME_FORMATS for the
# weight formats, a plan without a runtime listing every one)
KV_DTYPES = {"fp8": "FP8 cache: small accuracy loss at long context; vLLM, SGLang, TensorRT-LLM",
             "nvfp4": "NVFP4 cache: more accuracy loss; TensorRT-LLM on Blackwell",
             "q8_0/q8_0": "llama.cpp's 8-bit cache (-ctk q8_0 -ctv q8_0, 8.5 bits a value; the V cache needs "
                          "flash attention): small accuracy loss"}
KV_POLICIES = ("streaming:4092+4", "budget:2048")
TP_CHOICES = (2, 4, 8)
# architectural levers a trained model cannot take: shown as the nearest catalog model that has them (by total
# parameters), clearly another model
ARCHITECTURES = {
    "GQA": ("KV cache (heads sharing K and V)", lambda m: m.kind in ("full", "sliding")
            and m.num_key_value_heads < m.num_attention_heads),
    "MLA": ("KV cache (a latent per token)", lambda m: m.kind == "mla"),
    "a sliding window": ("KV cache (capped per layer)", lambda m: m.kind in ("sliding", "compressed")),
    "compressed attention": ("KV cache (a row every few tokens beside a window)", lambda m: m.kind == "compressed"),
    "SSM / linear-attention layers": ("KV cache (constant state)", lambda m: m.kind in STATE_KINDS),
    "sparse attention (DSA)": ("KV cache read and attention FLOPs (top-k tokens a query)",
                               lambda m: getattr(m, "indexer", None) is not None),
}


@dataclass(frozen=True)
class Lever:
    name: str
    resource: str
    figure: str  # a FIGURE_OF value
    before: float | None
    after: float | None
    caveat: str
    command: str  # the `llmsize plan` line that reproduces "after" ("" for the diagnosis row)
    ttft_before_s: float | None = None  # the time to first token of --prompt (plan.prefill), before and after:
    ttft_after_s: float | None = None  # every plan row carries it beside its figure (None: unknown peak, or no plan)
    # a decode figure's runtime-expected value before and after (expected.expect under the plan's runtime): what
    # the rows are ranked by where both are known, since a ceiling's gain can be far from the speed it brings
    # (8 cards over PCIe multiply the ceiling, the all-reduces' latency eats much of it)
    expected_before: float | None = None
    expected_after: float | None = None

    @property
    def ttft_moves(self) -> bool:
        """Whether the row changes the time to first token by more than 5% either way (the roofline's TTFT moves a
        little with any plan change: the report names only what matters)."""
        return bool(self.ttft_before_s and self.ttft_after_s) and not (
            0.95 <= self.ttft_after_s / self.ttft_before_s <= 1.05)

    @property
    def gain(self) -> float:
        """The effect on the figure, bigger is better: GB gained for the memory left (before can be negative),
        after / before for the others, where before is 0 the after itself over a large offset (every such row
        above a ratio, the larger first)."""
        if self.expected_before and self.expected_after is not None:
            return self.expected_after / self.expected_before
        if self.before is None or self.after is None:
            return 0.0
        if self.figure == "kv_budget_gb":
            return self.after - self.before
        return self.after / self.before if self.before > 0 else (1e12 + self.after if self.after > 0 else 0.0)


    @property
    def worse(self) -> bool:
        """Whether the row's plan is worse than the plan it started from on its own figure (another model with a
        different architecture, a disaggregated fleet on a workload that does not pay for it)."""
        if self.before is None or self.after is None:
            return False
        return self.gain < 0 if self.figure == "kv_budget_gb" and not self.expected_before else self.gain < 1


def figure_of(plan, figure: str) -> float | None:
    if figure == "kv_budget_gb":
        return plan.budget.kv_budget_bytes / GB
    if figure == "sequences":
        return float(plan.max_sequences)
    if figure == "tok_s":
        return plan.speculative.ceiling_tok_s if plan.speculative is not None else plan.decode_ceiling_tok_s
    return plan.decode_b.tok_s


EXPECTED_FIGURES = ("tok_s", "aggregate_tok_s")  # decode figures the runtime's expected speed gives too


def expected_of(plan, figure: str, runtimes: dict | None, runtime: str | None) -> float | None:
    """`figure`'s expected value under `runtime` (estimate/expected.py), None where it has none (another figure, no
    runtime or constants, a format the runtime does not run)."""
    if figure not in EXPECTED_FIGURES or not runtimes or runtime is None:
        return None
    from llmsize.estimate.expected import expect

    e = expect(plan, runtimes, runtime).expected
    if e is None:
        return None
    if figure == "aggregate_tok_s":
        return e.aggregate_tok_s
    return e.spec_tok_s if e.spec_tok_s is not None else e.tok_s


# PlanInputs fields and the plan options that set them (the CLI's spelling); the others below need a unit
PLAN_FLAGS = (("quant", "--quant"), ("scope", "--scope"), ("kv_dtype", "--kv-dtype"), ("batch", "--batch"),
              ("prompt_tokens", "--prompt"), ("gpu_util", "--gpu-util"), ("compute_precision", "--compute"),
              ("tp", "--tp"), ("pp", "--pp"), ("nodes", "--nodes"), ("node_link_gb_s", "--node-link-gb-s"),
              ("runtime", "--runtime"), ("backend", "--backend"), ("fp4_kernel", "--fp4-kernel"))


def plan_args(source: list[str], gpu_id: str, inputs) -> list[str]:
    """The `llmsize plan` arguments that give `inputs`: every option whose value is not PlanInputs' default (those
    levers and their reproduction use); `source`: how the command names the model (a catalog id, a folder, or
    --hub ORG/NAME)."""
    from llmsize.estimate.plan import PlanInputs

    default = PlanInputs()
    o = inputs.llamacpp  # llama.cpp's options: its -c (a slot holds less), and the flags that set them
    args = ["plan", *source, "--gpu", gpu_id, "--context", str(o.context if o is not None else inputs.context_tokens)]
    for name, flag in PLAN_FLAGS:
        value = getattr(inputs, name)
        if name == "kv_dtype" and value and "/" in value:  # llama.cpp's K/V cache types (quant.llamacpp_kv_dtype)
            args += kv_dtype_flags(value)
        elif value is not None and value != getattr(default, name):
            args += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if inputs.overhead_bytes != default.overhead_bytes:
        args += ["--overhead-gib", f"{inputs.overhead_bytes / GiB:g}"]
    if inputs.wired_limit_bytes is not None:
        args += ["--wired-limit-gb", f"{inputs.wired_limit_bytes / GB:g}"]  # GB, as the option reads it
    if inputs.memory_gb is not None:
        args += ["--memory-gb", f"{inputs.memory_gb:g}"]
    if inputs.kv_policy is not None:
        args += ["--kv-policy", inputs.kv_policy.label]
    if inputs.spec is not None:
        args += ["--spec", inputs.spec.label]
    if inputs.language_model_only:
        args.append("--language-model-only")
    if o is not None:
        args += llama_flags(o)
    if "--flash-attn" in args:  # a quantized V cache's flags turn it on
        pass
    elif o is not None and o.flash_attn is not None:
        args += ["--flash-attn", o.flash_attn]
    elif not inputs.flash_attn:
        args.append("--no-flash-attn")
    return args


def with_kv_dtype(inputs, dt: str):
    """`inputs` with the cache dtype `dt`, and where llama.cpp's options are planned (inputs.llamacpp) its cache
    types too, with flash attention for a quantized V cache (llama.cpp refuses one without)."""
    o = inputs.llamacpp
    if o is None or "/" not in dt:
        return replace(inputs, kv_dtype=dt)
    from llmsize.estimate.llamacpp_budget import cache_types

    k, v = cache_types(dt)
    fa = "on" if v not in ("f16", "bf16", "f32") else o.flash_attn
    return replace(inputs, kv_dtype=dt, flash_attn=inputs.flash_attn or fa == "on",
                   llamacpp=replace(o, cache_type_k=k, cache_type_v=v, flash_attn=fa))


def with_flash_attn(inputs):
    """`inputs` with flash attention on, in llama.cpp's options too where they are planned."""
    o = inputs.llamacpp
    return replace(inputs, flash_attn=True, llamacpp=None if o is None else replace(o, flash_attn="on"))


def llama_flags(o) -> list[str]:
    """The llama.cpp options (a LlamaCppOptions) other than their defaults, as `plan` spells them; the cache types
    come with the plan's K/V dtype (kv_dtype_flags), flash attention with plan_args."""
    from llmsize.estimate.mmproj import MmprojFile

    args = []
    for flag, value, default in (("--parallel", o.parallel, 1), ("--ubatch-size", o.ubatch_size, 512),
                                 ("--gpu-layers", o.gpu_layers, None), ("--n-cpu-moe", o.n_cpu_moe, 0)):
        if value != default:
            args += [flag, str(value)]
    args += [flag for flag, on in (("--kv-unified", o.kv_unified), ("--swa-full", o.swa_full),
                                   ("--cpu-moe", o.cpu_moe)) if on]
    if o.mmproj is not None:
        args += ["--mmproj", o.mmproj.path if isinstance(o.mmproj, MmprojFile) else o.mmproj]
    return args


def splits_refused(o) -> bool:
    """Whether llama.cpp options (a LlamaCppOptions, or None) rule a split over cards out: any but the cache types
    plans llama.cpp's one-GPU ledger (plan's _ledger_engine refuses --tp/--pp beside them)."""
    return o is not None and bool(llama_flags(o))


def has_feature(model, test) -> bool:
    return any(g.mixer is not None and test(g.mixer) for g in model.layer_groups)


NEAREST_SIZE_RATIO = 2.0  # an architecture's row compares models within 2x in total parameters, or none


def nearest_with(model, models, test) -> object | None:
    """The catalog model with the feature whose total parameters are nearest the model's (by ratio), within
    NEAREST_SIZE_RATIO: beyond it the gap in size would be what the row shows, not the architecture."""
    from llmsize.estimate.params import params_total

    size = params_total(model)
    have = [m for m in models if m.id != model.id and test(m)
            and abs(math.log(params_total(m) / size)) <= math.log(NEAREST_SIZE_RATIO)]
    return min(have, key=lambda m: (abs(math.log(params_total(m) / size)), m.id)) if have else None


def lever_table(plan, source: list[str], make, models=(), make_for=None, runtime: str | None = None,
                offload_for=None, host_args: tuple[str, ...] = (), runtimes: dict | None = None) -> list[Lever]:
    """The diagnosis row, then each lever that applies, by its gain. `make(inputs)` builds the plan of other
    inputs (estimate.plan.make_plan on the same model and card); a change the plan refuses (a format the model
    cannot take, a split the card cannot make) is left out. `models` (the catalog's) and `make_for(model, inputs)`
    add the architectural levers the model lacks, each as the nearest catalog model that has it, and a draft for
    speculative decoding. `runtime`: the runtime the plan's expected speed is for; its weight-format rows are the
    formats it runs. `offload_for(inputs)` (llamacpp_plan.OffloadLever of those inputs' plan, or None) adds
    llama.cpp's partial offload when the weights do not fit, in the plan's GGUF format or else in OFFLOAD_FORMAT;
    `host_args` the plan's host-memory options for its command; `runtimes` (the catalog's) the rows' expected decode
    speed under `runtime` (they rank by it where it is known) and the fleet's disaggregated serving for a serving
    engine."""
    saturates = plan.diagnosis.saturates
    figure = FIGURE_OF[saturates]
    now = figure_of(plan, figure)
    # a share of the card the user did not give is each row's own runtime's (a GGUF row: llama.cpp's whole card)
    inputs = plan.inputs if plan.gpu_util_given else replace(plan.inputs, gpu_util=None)
    # another model's row takes its own runtime default cache where the user gave none (DeepSeek-V4's FP8)
    own_cache = {} if plan.kv_dtype_given else {"kv_dtype": None}
    ttft = plan.prefill.ttft_s
    expected_now = {f: expected_of(plan, f, runtimes, runtime) for f in EXPECTED_FIGURES}
    rows = [Lever("diagnosis: " + saturates.replace("_", " "), RESOURCE_OF[saturates], figure, now, now,
                  plan.diagnosis.summary, "", ttft, ttft, expected_now.get(figure), expected_now.get(figure))]

    def add(name: str, resource: str, caveat: str, changed, fig: str = figure, model=None):
        """The row of the plan `changed` gives (of `model`, another catalog model, where given)."""
        try:
            other = make(changed) if model is None else make_for(model, changed)
        except LlmsizeError:
            return
        command = shlex.join(["llmsize", *plan_args(source if model is None else [model.id], plan.gpu.id, changed)])
        after = expected_of(other, fig, runtimes, runtime) if expected_now.get(fig) else None
        rows.append(Lever(name, resource, fig, figure_of(plan, fig), figure_of(other, fig), caveat, command, ttft,
                          other.prefill.ttft_s, expected_now.get(fig) if after is not None else None, after))

    bits = float(plan.fmt.bits_per_weight)
    ternary = is_ternary(plan.model.release.quant)  # trained ternary: only ternary files keep it
    for fid in TERNARY_FORMATS if ternary else RUNTIME_FORMATS.get(runtime, tuple(WEIGHT_FORMATS)):
        if fid == "nvfp4" and plan.gpu.vendor != "NVIDIA":
            continue  # NVFP4 kernels (FP4 tensor cores, Marlin) are NVIDIA's
        caveat = WEIGHT_FORMATS[fid]
        if float(FORMATS[fid].bits_per_weight) < 0.95 * bits:  # a format that reads at least 5% fewer bytes
            add(f"weights in {fid}", "weights (memory, bandwidth)", caveat, replace(inputs, quant=fid, scope=None))
    if runtime in FP4_KERNEL_RUNTIMES and inputs.fp4_kernel != "marlin" and plan.budget.weights_fit:
        from llmsize.estimate.kernels import kernel_class

        if kernel_class(plan, runtime) == "fp4":  # FP4 weights on the FP4 tensor cores: Marlin reads them too
            add("FP4 weights through Marlin (weight-only)", "memory bandwidth (the FP4 GEMM's efficiency at small "
                "batches)", MARLIN_CAVEAT, replace(inputs, fp4_kernel="marlin"), "tok_s")
    if not (saturates == "weights" and figure == "kv_budget_gb"):  # the cache cannot help weights that do not fit
        per_value = float(kv_dtype_bytes(inputs.kv_dtype))
        for dt in RUNTIME_KV.get(runtime, tuple(KV_DTYPES)):
            caveat = KV_DTYPES[dt]
            if dt == "nvfp4" and not plan.gpu.dense_tflops.get("fp4"):
                continue  # an FP4 cache where the card has FP4 tensor cores (Blackwell)
            if float(kv_dtype_bytes(dt)) < per_value:
                add(f"KV cache in {dt}", "KV cache (memory, bandwidth)", caveat, with_kv_dtype(inputs, dt))
        if inputs.kv_policy is None and policy_applies(plan.model):
            for spec in KV_POLICIES:
                pol = parse_kv_policy(spec)
                if pol.cap_tokens < inputs.context_tokens:
                    add(f"KV policy {spec}", "KV cache (memory, bandwidth)", pol.caveat(),
                        replace(inputs, kv_policy=pol))
        if plan.budget.weights_fit and plan.max_sequences > inputs.batch:
            best = min(plan.max_sequences, max(plan.ridge_batch or plan.max_sequences, inputs.batch + 1))
            add(f"batch {best:,} sequences", "compute (idle at small batches)",
                "latency per sequence grows with the batch; needs that many concurrent requests",
                replace(inputs, batch=best), "aggregate_tok_s")
    if runtime in ("vllm", "sglang") and not inputs.language_model_only and vision_tower_of(plan.model) is not None:
        add("text served alone (--language-model-only)", "memory (the vision tower's weights)", "images and video "
            "refused: vLLM and SGLang build no tower, vLLM profiles no encoder and SGLang takes no multimodal margin",
            replace(inputs, language_model_only=True), figure if figure in ("kv_budget_gb", "sequences")
            else "kv_budget_gb")
    if not inputs.flash_attn:  # it moves the memory left (and the sequences), not the decode ceiling
        add("FlashAttention", "memory (attention scores)", "fused attention: the score matrix stays in on-chip "
            "tiles (Dao et al. 2022); vLLM, SGLang and TensorRT-LLM always run it, llama.cpp by default (-fa), "
            "Ollama where the card supports it (OLLAMA_FLASH_ATTENTION=1 forces it)", with_flash_attn(inputs),
            figure if figure in ("kv_budget_gb", "sequences") else "kv_budget_gb")
    spec = (suggested_spec(plan.model, models, runtime, is_gguf(plan.fmt, plan.exact))
            if inputs.spec is None and plan.budget.weights_fit else None)
    if spec is not None:
        add(f"speculative decoding ({spec.label})", "memory bandwidth (tokens per pass over the weights)",
            spec_caveat(spec), replace(inputs, spec=spec), "tok_s")
    if offload_for is not None and not plan.budget.weights_fit:
        row = offload_lever(plan, source, inputs, offload_for, host_args)
        if row is not None:
            rows.append(row)
    if runtimes is not None and runtime in DISAGGREGATING:
        row = disaggregation_lever(plan, source, runtime, runtimes)
        if row is not None:
            rows.append(row)
    if splits_refused(inputs.llamacpp):
        pass  # llama.cpp's one-GPU ledger: no split's row (its command would be refused)
    elif inputs.pp == 1 and inputs.nodes is None and runtime in LLAMACPP_RUNTIMES and inputs.tp == 1:
        for n in TP_CHOICES:  # llama.cpp's default split (-sm layer): whole layers per card, a pipeline
            add(f"{n} cards (layer split)", "cards", f"{n}x the cards; llama.cpp's -sm layer: each card holds a "
                "share of the layers, a token crosses the link at each hand-off", replace(inputs, pp=n))
    elif inputs.pp == 1 and inputs.nodes is None:
        for tp in (t for t in TP_CHOICES if t > inputs.tp):
            add(f"{tp} cards (tensor parallel)", "cards", f"{tp}x the cards; the all-reduces cross the card link",
                replace(inputs, tp=tp))
    if make_for is not None:
        from llmsize.estimate.plan import scope_for

        wanted = [(name, resource, lambda m, t=test: has_feature(m, t)) for name, (resource, test)
                  in ARCHITECTURES.items() if not has_feature(plan.model, test)]
        if not plan.model.is_moe:
            wanted.append(("MoE", "compute and bandwidth (active parameters)", lambda m: m.is_moe))
        for name, resource, test in wanted:
            other_model = nearest_with(plan.model, models, test)
            if other_model is not None:  # in the plan's format, but never a ternary file of a model not trained so
                other_inputs = (replace(inputs, quant=None, scope=None, **own_cache) if ternary
                                else replace(inputs, scope=scope_for(other_model, inputs.scope), **own_cache))
                add(f"{name}: {other_model.id} (another model)", resource, "a different model, the catalog's nearest "
                    f"in size (within 2x) with {name}: what the architecture buys, not a change this model can take "
                    "(quality, tokenizer and licence may differ)", other_inputs, model=other_model)
    head, rest = rows[0], rows[1:]
    rest.sort(key=lambda r: (r.figure != figure, -r.gain, r.name))  # the binding figure's rows first
    return [head, *rest]


FP4_KERNEL_RUNTIMES = ("vllm", "sglang")  # the runtimes whose FP4 weights --fp4-kernel chooses a kernel for
MARLIN_CAVEAT = ("vLLM's --linear-backend marlin: 16-bit math on the 4-bit weights, which the prompt and large "
                 "batches pay for (the FP4 tensor cores idle); Rodder5's Qwen3-8B NVFP4 on an RTX 5090 under vLLM "
                 "0.26: 6.6 ms a token native, 4.6 through Marlin")


def spec_caveat(spec) -> str:
    if spec.draft is None:
        return (f"the model's own MTP module proposes {spec.k} token(s) a pass; acceptance {spec.accept:g} from "
                "DeepSeek-V3's technical report (85-90% for the second token); engines load the module for it")
    return (f"needs the draft model {spec.draft.id} beside it (its weights and cache take memory); acceptance "
            f"{spec.accept:g} a token is assumed, not measured: it varies with the task and the draft, so rerun the "
            "command with yours; verify passes cost more as the batch grows, so the gain shrinks at high batch")


OFFLOAD_FORMAT = "gguf-q4_k_m"  # the GGUF file type an offload row tries for a plan in another format


def offload_lever(plan, source: list[str], inputs, offload_for, host_args: tuple[str, ...]) -> Lever | None:
    """llama.cpp's partial offload of the plan's GGUF file, or of its OFFLOAD_FORMAT file for another format: the
    split its --fit margin allows and that split's batch-1 ceiling (None without the host memory)."""
    changed = inputs if plan.fmt.id.startswith("gguf-") else replace(inputs, quant=OFFLOAD_FORMAT, scope=None)
    try:
        found = offload_for(changed)
    except LlmsizeError:
        return None
    if found is None or not found.split_args:
        return None
    after = found.speed.ceiling_tok_s if found.speed is not None else None
    # Ollama places whole layers itself (its plan's --fit is implied); llama.cpp's own, with --fit
    engine = ["--engine", "ollama"] if inputs.runtime == "ollama" else ["--engine", "llamacpp", "--fit"]
    args = [*plan_args(source, plan.gpu.id, changed), *engine, *host_args]
    what = "" if changed is inputs else f"{OFFLOAD_FORMAT}, "
    return Lever(f"partial offload ({what}{' '.join(found.split_args)})", "memory (weights in host RAM)",
                 "offload_tok_s", None, after, offload_caveat(found), shlex.join(["llmsize", *args]))


def offload_caveat(offload) -> str:
    gib = offload.gpu_bytes / GiB
    if offload.speed is None:
        return (f"llama.cpp (or Ollama) keeps {gib:.1f} GiB on the card and the rest in host RAM; its speed needs "
                "the host memory: add --host-memory (e.g. DDR5-6000x2)")
    expected = (f"; llama.cpp's expected {offload.speed.decode_tok_s:,.1f} tok/s" if offload.speed.decode_tok_s
                else "")
    return (f"llama.cpp (or Ollama) keeps {gib:.1f} GiB on the card; every token also reads the host's share from "
            f"host memory{expected}; GGUF files only")


DISAGG_OSL = 500  # answer tokens when --prompt is the whole context (fleet's default --osl)


def fleet_workload(plan) -> tuple[int, int, int]:
    """(prompt tokens, answer tokens, users) of the fleet that serves the plan's sequences: --prompt in and the
    rest of --context out (with --prompt at the context, DISAGG_OSL of it out, at most half), as many users as
    the card holds at --context (at least --batch)."""
    ctx, prompt = plan.inputs.context_tokens, plan.prompt_tokens
    osl = ctx - prompt if prompt < ctx else min(DISAGG_OSL, ctx // 2)
    return max(1, ctx - osl), max(1, osl), max(plan.inputs.batch, plan.max_sequences)


def disaggregation_lever(plan, source: list[str], runtime: str, runtimes: dict) -> Lever | None:
    """Prefill and decode on separate cards, as `llmsize fleet` sizes it on this card for the plan's sequences:
    output tok/s per card aggregated (before) and disaggregated (after). None where the fleet cannot be asked the
    same question (another format than the release's, a KV policy, --hub, split options of its own) or finds no
    configuration of either mode."""
    from llmsize.estimate.fleet import fleet_rows
    from llmsize.estimate.plan import PlanInputs
    from llmsize.estimate.workload import Workload

    inputs, model, default = plan.inputs, plan.model, PlanInputs()
    if (inputs.quant not in (None, model.release.quant) or inputs.scope is not None or inputs.kv_policy is not None
            or is_ternary(plan.fmt.id)  # no serving engine runs them
            or (inputs.gpu_util if plan.gpu_util_given else None, inputs.overhead_bytes, inputs.wired_limit_bytes,
                inputs.nodes, inputs.flash_attn)
            != (default.gpu_util, default.overhead_bytes, default.wired_limit_bytes, default.nodes,
                default.flash_attn)
            or not plan.budget.weights_fit or source[0].startswith("--")):
        return None  # the fleet sizes memory by the engines' own ledgers, on replicas of its own choosing
    isl, osl, users = fleet_workload(plan)
    try:
        found = fleet_rows(model, [plan.gpu], Workload(isl, osl, users=users, node_link_gb_s=inputs.node_link_gb_s),
                           runtime, runtimes, None, inputs.kv_dtype)
    except LlmsizeError:
        return None
    modes = {r.mode: r for row in found for r in (row, row.other) if r is not None and r.cards_total}
    agg, dis = modes.get("aggregated"), modes.get("disaggregated")
    if agg is None or dis is None:
        return None
    args = ["fleet", *source, "--isl", str(isl), "--osl", str(osl), "--users", str(users), "--gpus", plan.gpu.id,
            "--runtime", runtime]
    if inputs.kv_dtype != default.kv_dtype:
        args += ["--kv-dtype", inputs.kv_dtype]
    if inputs.node_link_gb_s != default.node_link_gb_s:
        args += ["--node-link-gb-s", f"{inputs.node_link_gb_s:g}"]
    caveat = (f"{dis.prefill_workers} prefill + {dis.decode_workers} decode worker(s) against {agg.replicas} "
              f"aggregated replica(s) for {users:,} users ({isl:,} tokens in, {osl:,} out); the cache moves over the "
              "node link; pays with long prompts and tight TTFT/TPOT targets: give them to the fleet command")
    return Lever("disaggregated prefill/decode (fleet)", "compute (prefill stalls decode)", "fleet_tok_s_per_gpu",
                 agg.output_tok_s_per_gpu, dis.output_tok_s_per_gpu, caveat, shlex.join(["llmsize", *args]))


def lever_dict(lv: Lever) -> dict:
    return {"name": lv.name, "resource": lv.resource, "figure": lv.figure, "figure_words": FIGURE_WORDS[lv.figure],
            "before": lv.before, "after": lv.after, "caveat": lv.caveat, "command": lv.command or None,
            "ttft_before_s": lv.ttft_before_s, "ttft_after_s": lv.ttft_after_s,
            "expected_before": lv.expected_before, "expected_after": lv.expected_after, "worse": lv.worse}
