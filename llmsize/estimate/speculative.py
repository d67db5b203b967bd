"""Speculative decoding: its parameters (`--spec`), what a draft costs in memory, and what a verify pass yields.

A pass: the draft proposes k tokens (k steps of a smaller model, or the target's own multi-token-prediction layers),
then one target pass verifies them, reading the weights as for k + 1 tokens a sequence (an MoE's experts for all of
them) and each sequence's cache once. With each proposed token accepted with probability a, independently, a pass
yields E = (1 - a^(k+1)) / (1 - a) tokens (Leviathan, Kalman, Matias 2023, "Fast Inference from Transformers via
Speculative Decoding", eq. 1), so

    time per token = (verify pass + k x draft step) / E                      seconds per token of one sequence

At batch 1 the verify pass reads about what a plain step reads, and the gain is ~E / (1 + k x draft / target). The
draft's weights and its cache of every sequence take memory beside the target's (vLLM allocates the draft's cache in
lockstep with the target's blocks, vllm PR #3250); an MTP module adds its own layers' cache (num_nextn_predict_layers
layers) and, where engines load it only for speculative decoding, its weights.

Pure: plan.py calls `speculate` when --spec is given; replica.py (fleet) prices its TPOT with `verify_step` and
`time_per_token_s`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from llmsize.catalog.schema import ModelSpec
from llmsize.errors import InvalidValueError, shown
from llmsize.estimate.capacity import LLAMACPP_RUNTIMES
from llmsize.estimate.runtime_model import base_family


@dataclass(frozen=True)
class Spec:
    """Speculative decoding: k tokens proposed a pass by a draft model (or the model's own MTP layers), each
    accepted with probability `accept`."""

    k: int
    accept: float
    draft: ModelSpec | None = None  # None: MTP (a layer of the target proposes)

    def tokens_per_pass(self) -> float:
        """E = (1 - a^(k+1)) / (1 - a): expected tokens a target pass yields with k drafted tokens accepted
        i.i.d. at rate a (Leviathan, Kalman, Matias 2023, eq. 1)."""
        a = self.accept
        return self.k + 1 if a >= 1 else (1 - a ** (self.k + 1)) / (1 - a)

    @property
    def label(self) -> str:
        """The --spec text that gives this Spec."""
        if self.draft is None:
            return f"mtp={self.k},accept={self.accept:g}"
        return f"draft={self.draft.id},k={self.k},accept={self.accept:g}"


def parse_spec(text: str | None, catalog) -> Spec | None:
    """`draft=MODEL,k=4,accept=0.7` or `mtp=1,accept=0.8` (k = the MTP layers); None for None."""
    if text is None:
        return None
    if not text.strip():
        raise InvalidValueError("--spec is empty.", "e.g. --spec draft=llama-3.2-1b,k=4,accept=0.7 or --spec mtp=1.")
    said = shown(text, 160)  # as the errors below quote it: a path of a draft may be long, not thousands of characters
    fields = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep and key.strip().lower() == "mtp":  # `--spec mtp`: the module's one token a pass
            key, sep, value = "mtp", "=", "1"
        if not sep or not value.strip():
            raise InvalidValueError(f"--spec '{said}': `{shown(part)}` is not key=value.",
                                    "e.g. --spec draft=llama-3.2-1b,k=4,accept=0.7 or --spec mtp=1,accept=0.8.")
        if key.strip().lower() in fields:
            raise InvalidValueError(f"--spec '{said}': `{shown(key.strip())}` is given twice.", "Give each key once.")
        fields[key.strip().lower()] = value.strip()
    if "mtp" in fields and "k" in fields:
        raise InvalidValueError(f"--spec '{said}': with mtp=N, N is the tokens the MTP module proposes a pass; k is "
                                "a draft model's.", "Drop k=, e.g. --spec mtp=1,accept=0.8.")
    unknown = sorted(set(fields) - {"draft", "k", "accept", "mtp"})
    if unknown:
        raise InvalidValueError(f"--spec: unknown key `{shown(unknown[0])}`.", "Keys: draft, k, accept, mtp.")
    if ("draft" in fields) == ("mtp" in fields):
        raise InvalidValueError("--spec needs draft=MODEL or mtp=N, one of them.", "e.g. --spec mtp=1,accept=0.8.")
    if "draft" in fields and "accept" not in fields:  # no default: how often a draft is kept is the user's figure
        raise InvalidValueError(f"--spec '{said}': a draft model needs accept=A, the share of its drafted tokens the "
                                "target keeps (yours to measure; none is assumed).",
                                f"e.g. --spec draft={shown(fields['draft'])},k={shown(fields.get('k', '4'))},"
                                "accept=0.7.")
    try:  # an MTP module's acceptance defaults to DeepSeek-V3's (MTP_ACCEPT); a draft model's must be given
        accept = float(fields.get("accept", MTP_ACCEPT if "mtp" in fields else ""))
        k = int(fields.get("mtp") or fields.get("k") or 4)
    except ValueError:
        raise InvalidValueError(f"--spec '{said}': accept must be a number and k / mtp a whole number.",
                                "e.g. accept=0.7, k=4.") from None
    if not (0 <= accept <= 1 and math.isfinite(accept)):
        raise InvalidValueError(f"--spec '{said}': accept {shown(fields['accept'])} is not in [0, 1].",
                                "e.g. accept=0.7.")
    if not 1 <= k <= 16:
        what = "mtp" if "mtp" in fields else "k"
        raise InvalidValueError(f"--spec '{said}': {what} {k} is not from 1 to 16.", f"e.g. {what}=" +
                                ("1." if what == "mtp" else "4."))
    return Spec(k, accept, catalog.model(fields["draft"]) if "draft" in fields else None)


MTP_WORDS = "multi-token-prediction"


def mtp_module(model: ModelSpec):
    """The catalog's MTP module of the model (an ExtraParams), or None."""
    return next((e for e in model.extra if MTP_WORDS in e.name.lower()), None)


def check_spec(spec: Spec, model: ModelSpec) -> None:
    """A draft must be a smaller model with the target's tokenizer (its vocabulary); MTP needs the target's own
    multi-token-prediction module (the catalog lists it among the model's extra parameters)."""
    d = spec.draft
    if d is None:
        if mtp_module(model) is None:
            raise InvalidValueError(f"--spec mtp: {model.name} has no multi-token-prediction module (none among "
                                    "its extra parameters, as its entry or config.json gives them).",
                                    "Use a draft model instead: --spec draft=MODEL,k=4,accept=0.7.")
        return
    if d.id == model.id:
        raise InvalidValueError(f"--spec draft={d.id} is the target model itself.", "Pick a smaller draft model.")
    if d.params_official >= model.params_official:
        raise InvalidValueError(f"--spec draft={d.id} ({d.params_official / 1e9:,.1f}B) is not smaller than "
                                f"{model.name} ({model.params_official / 1e9:,.1f}B).", "Pick a smaller draft model.")
    if d.vocab_size != model.vocab_size:
        raise InvalidValueError(f"--spec draft={d.id} has a vocabulary of {d.vocab_size:,} tokens, {model.name} "
                                f"{model.vocab_size:,}: a draft must share the target's tokenizer.",
                                "Pick a draft of the same family (e.g. Llama 3.2 1B for Llama 3.1).")


# model families (runtime_model.base_family: config.json's model_type, less a `_text` suffix) whose GGUF llama.cpp
# drafts from with its own MTP tensors, --spec-type draft-mtp (llama.cpp @0c1e57098: src/models/*.cpp build a
# graph_mtp for qwen35, qwen35moe, qwen3next, glm4-moe, deepseek2 (GLM-4.7-Flash, PR #24868), glm-dsa (GLM-5.x,
# PR #25980), deepseek32 (PR #26457))
LLAMACPP_MTP_FAMILIES = ("qwen3_5", "qwen3_5_moe", "qwen3_next", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa",
                         "deepseek_v32")
# families whose GGUF has no MTP tensors to draft with: llama.cpp's converter drops DeepSeek-V3's
# (conversion/deepseek.py: "remove this when we support MTP for deepseek models", skip_mtp = True)
LLAMACPP_MTP_DROPPED = ("deepseek_v3",)
# how a GGUF runtime is told to draft with the file's MTP tensors
GGUF_MTP_SWITCH = {
    "llamacpp": "llama-server drafts with a GGUF's MTP tensors given --spec-type draft-mtp --spec-draft-n-max {k} "
                "(PR #22673)",
    "ollama": "Ollama drafts with a GGUF's MTP tensors only given PARAMETER draft_num_predict {k} in the Modelfile "
              "(docs/modelfile.mdx, ollama @fb307609)",
    "lmstudio": "LM Studio's llama.cpp engine (2.15.0 and later) drafts with a GGUF's MTP tensors where MTP is turned "
                "on as the model loads (lmstudio-bug-tracker #1924, 2026-05-20)",
}


def mtp_drafting(runtime: str | None, model: ModelSpec, k: int = 1, gguf: bool = False
                 ) -> tuple[str | None, str | None]:
    """(why `runtime` cannot draft with `model`'s own MTP module, how it drafts with it): one of the two is None,
    or both where nothing is known to say. mlx-lm drops the module as it loads (its models' sanitize: qwen3_5.py
    filters "mtp.", deepseek_v3.py the layer past the last; mlx-lm @d78bf58e, 2026-08-22) and drafts only with a
    separate --draft-model, as gpt-fast does (generate.py's --draft_checkpoint_path, pytorch-labs/gpt-fast
    @0055c42d); a GGUF runtime drafts with the file's MTP tensors for the families llama.cpp builds an
    MTP graph for (LLAMACPP_MTP_FAMILIES), and none runs from a GGUF (`gguf`: the plan's weights are one, whatever
    the runtime) where the converter drops them; `k` the tokens it drafts a pass."""
    family = base_family(model)
    if runtime == "mlx":
        return ("mlx-lm drops the model's MTP layers as it loads (its sanitize, mlx_lm/models: qwen3_5.py, "
                "deepseek_v3.py, glm4_moe.py) and drafts only with a separate --draft-model"), None
    if runtime == "gpt-fast":
        return ("gpt-fast drafts only with a separate model (generate.py --draft_checkpoint_path, --speculate_k); "
                "its Transformer has no MTP module"), None
    if family in LLAMACPP_MTP_DROPPED and (gguf or runtime in LLAMACPP_RUNTIMES):
        return (f"llama.cpp's converter drops {model.name}'s MTP layer (conversion/deepseek.py: skip_mtp), so its "
                "GGUF files have none to draft with"), None
    if runtime not in LLAMACPP_RUNTIMES:
        return None, None
    if family not in LLAMACPP_MTP_FAMILIES:
        return None, (f"llama.cpp drafts with a GGUF's MTP tensors for {', '.join(LLAMACPP_MTP_FAMILIES)}; "
                      f"whether it does for {family} is not checked here")
    return None, (f"{GGUF_MTP_SWITCH[runtime].format(k=k)}; the file must have kept them (convert_hf_to_gguf.py "
                  "--no-mtp leaves them out)")


def check_mtp_runtime(spec: Spec | None, runtime: str | None, model: ModelSpec, gguf: bool = False) -> str | None:
    """Refuse --spec mtp under a runtime (or from a GGUF's weights, `gguf`) that cannot draft with the model's MTP
    module; else the note saying how the runtime is told to (None: nothing to say, or no MTP spec)."""
    if spec is None or spec.draft is not None:
        return None
    why, how = mtp_drafting(runtime, model, spec.k, gguf)
    if why:
        where = "a GGUF's weights" if gguf and runtime not in LLAMACPP_RUNTIMES else runtime
        other = ("the checkpoint's own weights (drop --quant gguf-*) under vLLM or SGLang" if gguf
                 else "a runtime that drafts with it (--runtime vllm or sglang)")
        raise InvalidValueError(f"--spec {spec.label} under {where}: {why}.",
                                f"Use a draft model (--spec draft=MODEL,k=4,accept=0.7), or {other}.")
    return how


# Speculative decoding across pipeline stages, as the serving engines' releases ran it by 2026-09: vLLM refused an
# MTP drafter under pipeline parallel at config time (SupportsPP asked of the draft: vllm issue #52069) and its
# pipeline's sampled-token broadcast assumed one token a step (issue #57755, 0.28.0 and 0.29.0), EAGLE3 and MTP
# landing on main's V2 model runner (PRs #50514, #46994); SGLang's server_args refuses a speculative algorithm with
# pp_size > 1 unless SGLANG_ENABLE_PP_SPEC=1 (an experimental path: PR #30775, tracking issue #39634); TensorRT-LLM's
# PyTorch executor raised "Drafting is not supported for selected executor loop" with pipeline parallel (1.2.0rc2,
# issue #9009). fleet sizes no such replica (it prints launch lines); a plan that asks for one says so.
SPEC_PIPELINE_REFUSAL = {
    "vllm": "vLLM releases through 0.29 start neither an MTP drafter nor a draft model across pipeline stages "
            "(vllm #52069, #57755; main's V2 model runner adds them, #50514, #46994)",
    "sglang": "SGLang refuses a speculative algorithm with --pp-size above 1 unless SGLANG_ENABLE_PP_SPEC=1 turns on "
              "its experimental path (server_args; sglang #30775)",
    "trtllm": "TensorRT-LLM's PyTorch executor refuses drafting under pipeline parallel (\"Drafting is not supported "
              "for selected executor loop\", 1.2.0rc2; TensorRT-LLM #9009)",
}


def spec_pipeline_note(spec: Spec | None, runtime: str | None, pp: int) -> str | None:
    """The note of a plan that asks for --spec over pipeline stages under an engine whose releases do not run it
    (SPEC_PIPELINE_REFUSAL); None otherwise."""
    why = SPEC_PIPELINE_REFUSAL.get(runtime or "")
    if spec is None or pp <= 1 or not why:
        return None
    return f"--spec {spec.label} with --pp {pp}: {why}; split over --tp alone to be sure it starts"


def verify_step(dm, batch: int, k: int):
    """The target's verify pass for `batch` sequences of k proposed tokens each (a decode.DecodeStep): weights and
    FLOPs as for batch x (k + 1) tokens, each sequence's cache read once."""
    one, wide = dm.step(batch), dm.step(batch * (k + 1))
    return replace(wide, kv_bytes=one.kv_bytes,
                   memory_time_s=(wide.weight_bytes + one.kv_bytes) / dm.gpu.bandwidth_bytes_per_s)


def mtp_step_s(target_step_s: float, model: ModelSpec, weights=None, fmt=None) -> float:
    """An MTP draft step: one block like the target's and, to turn its hidden state into the drafted token, the
    target's lm_head (DeepSeek-V3's MTP module shares it: technical report, section 2.2), so the step's share of the
    target's is (the mean block's read + the lm_head's) / the target's read per token (weights.WeightBytes); 1 /
    layers of the target's step where the weights are not given. DeepSeek-V3 in FP8: 1.85 GB of BF16 lm_head
    beside a mean block's 0.59 GB of the 37.67 GB read a token, 2.44 GB where 1 / 61 of the read is 0.62 GB: ~4x.
    The block is read in the bits the module is stored in (module_bits, given the target's format `fmt`): beside
    NVFP4 weights a BF16 module's block reads 16 / 4.5 of the mean block's NVFP4 bytes (the whole block scaled,
    its unquantized norms included: a few per cent high)."""
    if weights is None or not weights.bytes_read_per_token:
        return target_step_s / model.num_layers
    total = weights.bytes_read_per_token
    head = weights.read_bytes_per_token.get("lm_head", 0.0)
    wider = module_bits(fmt, model) / float(fmt.bits_per_weight) if fmt is not None else 1.0
    return target_step_s * ((total - head) / model.num_layers * wider + head) / total


def time_per_token_s(verify_s: float, draft_step_s: float, spec: Spec) -> float:
    """Seconds per token of one sequence: (verify pass + k draft steps) / E."""
    return (verify_s + spec.k * draft_step_s) / spec.tokens_per_pass()


def attention_layer_bytes(kv, num_layers: int) -> float:
    """One sequence's cache in one full-attention (or MLA) layer, an MTP layer's kind (DeepSeek-V3's is MLA, Qwen3.5's
    and Qwen3-Next's gated full attention: vllm qwen3_5_mtp.py builds it with layer_type "full_attention"); the mean
    layer's where the model has none. A hybrid's mean layer is not one: Qwen3.5-27B's 16 attention layers of 64 hold
    its whole growing cache, so its MTP layer caches what one of those 16 does: 2.5x the mean over 64 at 4,096
    tokens, 4x at long context."""
    layers = kv.layers_by_kind.get("full", 0) + kv.layers_by_kind.get("mla", 0)
    if kv.layers_by_kind.get("compressed"):  # DeepSeek-V4: its MTP layer keeps the window alone (compress_ratios'
        # last entry is 0 in Flash's and Pro's configs): one window layer's cache
        return kv.bytes_by_kind["sliding"] / kv.layers_by_kind["sliding"]
    if not layers:
        return kv.bytes_per_sequence / num_layers
    return (kv.bytes_by_kind.get("full", 0.0) + kv.bytes_by_kind.get("mla", 0.0)) / layers


# families whose released checkpoint stores its MTP layer in the release's own per-component recipe: DeepSeek-V4's
# (its FP4 experts and FP8 layers; DeepSeek-V4-Flash's checkpoint, 148.66 GiB as vLLM loads it, holds the MTP layer so)
MTP_IN_RELEASE_RECIPE = ("deepseek_v4",)


def module_bits(fmt, model=None) -> float:
    """Bits a weight an MTP module is stored in beside weights of `fmt`: the format's where it has 8 bits or more
    (DeepSeek-V3's FP8 checkpoint quantizes its MTP layer; vLLM's online FP8 quantizes the drafter with the model)
    or is a GGUF file type (its base type's bits: a GGUF that keeps the MTP tensors holds them with the rest, and
    llama.cpp drafts with them, --spec-type draft-mtp, since PR #22673), 16 below (NVIDIA's NVFP4 exports keep it in
    BF16: their hf_quant_config.json excludes "mtp*", tests/data/hf-configs/nvidia__Qwen3.6-35B-A3B-NVFP4
    .hf_quant_config.json and the 122B-A10B's)."""
    from llmsize.estimate.weights import EXTRA_BITS

    bits = float(fmt.bits_per_weight)
    if fmt.recipe and model is not None and model.family in MTP_IN_RELEASE_RECIPE and fmt.id == model.release.quant:
        return bits  # the release recipe's mean bits over its quantized weights
    return bits if bits >= 8 or fmt.mix else float(EXTRA_BITS)


def draft_memory(plan, spec: Spec, draft_plan) -> tuple[float, float]:
    """(bytes of weights, cache bytes per sequence) that speculative decoding adds on each card of `plan`: a draft
    model's (its plan, on the same split); an MTP module's cache of its layers, k at most (attention_layer_bytes: an
    attention layer's cache on the card) and, when engines load the module only for speculative decoding (catalog
    `loaded: false`), its weights (module_bits), split over the tensor-parallel cards: its own, where the draft takes
    the target's embedding and lm_head (vLLM's EagleProposer logs "Detected MTP model. Sharing target model
    embedding weights with the draft model", and the same of the lm_head: ExtraParams.draft_params)."""
    if draft_plan is not None:
        return ((draft_plan.weights_card or draft_plan.weights).bytes_total,
                (draft_plan.kv_card or draft_plan.kv).bytes_per_sequence)
    module = mtp_module(plan.model)
    # its layers' cache: k draft tokens run the module's layers in turn, reusing them past the last (vLLM's MTP
    # proposers pick layer spec_step_idx % num_mtp_layers), so a one-layer module caches one layer whatever k
    layers = min(spec.k, (module.layers or 1) if module is not None else spec.k)
    kv = attention_layer_bytes(plan.kv_card or plan.kv, (plan.card_model or plan.model).num_layers) * layers
    weights = 0.0
    if module is not None and not module.loaded:  # less what the draft takes from the target (draft_params)
        params = module.params if module.draft_params is None else module.draft_params
        weights = params * module_bits(plan.fmt, plan.model) / 8 / plan.inputs.tp
    return weights, kv


@dataclass(frozen=True)
class SpecDecode:
    """A plan's speculative decoding at batch 1 and what its draft leaves for the cache (on each card)."""

    spec: Spec
    tokens_per_pass: float  # E
    draft_weight_bytes: float
    draft_kv_bytes_per_sequence: float
    kv_budget_bytes: float  # the plan's budget less the draft's weights
    max_sequences: int  # sequences of --context, each with its draft cache
    verify_s: float  # the batch-1 verify pass at the bandwidth (and the links' time when split)
    draft_step_s: float  # one draft step at batch 1, likewise
    ceiling_tok_s: float  # batch-1, bandwidth-bound, verify and draft reads included: E / (verify + k x draft)
    gain: float  # that ceiling / the plan's batch-1 ceiling without speculative decoding
    draft_plan: object | None = None  # the draft model's plan (None: MTP)

    @property
    def draft_name(self) -> str:
        return self.spec.draft.id if self.spec.draft is not None else "the model's MTP module"


def speculate(plan, spec: Spec, draft_plan=None) -> SpecDecode:
    """`plan` (its batch-1 step and memory budget) with speculative decoding: the batch-1 ceiling is E tokens per
    (verify pass + k draft steps), each at the bandwidth (and the links' time when split); a draft model's step
    is its own plan's batch-1 ceiling step, an MTP step 1 / layers of the target's."""
    dm = plan.decode_model
    verify = verify_step(dm, 1, spec.k)
    target_s = 1.0 / plan.decode_ceiling_tok_s
    draft_s = (1.0 / draft_plan.decode_ceiling_tok_s if draft_plan is not None
               else mtp_step_s(target_s, dm.model, plan.weights, plan.fmt))
    verify_s = verify.memory_time_s + verify.comm_time_s
    ceiling = 1.0 / time_per_token_s(verify_s, draft_s, spec)
    weights, kv = draft_memory(plan, spec, draft_plan)
    budget = plan.budget.kv_budget_bytes - weights
    per_seq = (plan.kv_card or plan.kv).bytes_per_sequence + kv
    seqs = int(budget // per_seq) if budget > 0 and per_seq > 0 else 0
    return SpecDecode(spec, spec.tokens_per_pass(), weights, kv, budget, seqs, verify_s, draft_s, ceiling,
                      ceiling / plan.decode_ceiling_tok_s, draft_plan)


# the acceptance rates the lever table states (a rate is the user's to give), and MTP's when --spec mtp=N gives none
MTP_ACCEPT = 0.85  # DeepSeek-V3 technical report (arXiv:2412.19437) section 5.4.3: "the acceptance rate of the
# second token prediction ranges between 85% and 90%"
DRAFT_ACCEPT = 0.7  # an assumption, not a measurement: the lever's caveat says so
DRAFT_K = 4
DRAFT_SIZE_RATIO = 5  # a draft is at most 1/5 of the target's parameters


def family_root(model: ModelSpec) -> str:
    """The family without its variant suffixes (qwen3_moe -> qwen3, gemma3_text -> gemma3)."""
    return model.family.split("_")[0]


def suggested_spec(model: ModelSpec, models, runtime: str | None = None, gguf: bool = False) -> Spec | None:
    """What the lever table tries: the model's own MTP module at MTP_ACCEPT where `runtime` drafts with it, else
    the smallest catalog model of its family with its vocabulary and at most 1/DRAFT_SIZE_RATIO of its parameters,
    k = DRAFT_K at DRAFT_ACCEPT; None when neither exists."""
    if mtp_module(model) is not None and mtp_drafting(runtime, model, gguf=gguf)[0] is None:
        return Spec(1, MTP_ACCEPT)
    drafts = [m for m in models if m.id != model.id and m.vocab_size == model.vocab_size
              and family_root(m) == family_root(model)
              and m.params_official * DRAFT_SIZE_RATIO <= model.params_official]
    if not drafts:
        return None
    return Spec(DRAFT_K, DRAFT_ACCEPT, min(drafts, key=lambda m: (m.params_official, m.id)))
