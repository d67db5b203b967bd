"""KV policies as what-ifs on any model: what the cache would hold if the runtime kept fewer tokens per layer.

Seed 002's map puts them beside the cache's other levers, with the warning this module repeats in every report:
sinks give stability, not memory of the context beyond the window, and eviction loses tokens.

  streaming:W+S  StreamingLLM (Xiao et al. 2023, "Efficient Streaming Language Models with Attention Sinks",
                 arXiv:2309.17453): every attention layer keeps its first S tokens (the attention sinks; the paper
                 uses 4) and the last W, so its cache stops growing at W + S tokens; the prompt is processed through
                 the same window, so its attention stops growing quadratically past W + S too.
  budget:N       H2O (Zhang et al. 2023, arXiv:2306.14048) and SnapKV (Li et al. 2024, arXiv:2404.14469): every
                 attention layer keeps N tokens chosen by their attention scores. The prompt is prefilled in full (its
                 attention over all of it is paid, and its whole cache is held while it prefills), then evicted to
                 N: the decode reads N tokens a layer, the longest prompt is what one sequence's full cache allows.

A policy caps every layer that caches tokens: full attention becomes a window of the cap, a sliding window keeps
the smaller of the two, an MLA layer caches at most the cap (schema.MlaAttention.sliding_window); recurrent states
(SSM, linear attention) are constant already. No engine this tool models implements either policy; the report
says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmsize.catalog.schema import FullAttention, MlaAttention, ModelSpec, SlidingAttention
from llmsize.errors import InvalidValueError
from llmsize.estimate.kv import has_compressed_layers

KINDS = ("streaming", "budget")
_SPEC = re.compile(r"^(?P<kind>[a-z]+):(?P<a>\d{1,30})(?:\+(?P<b>\d{1,30}))?$")  # bounds checked below
MAX_TOKENS = 1 << 30
HINT = "Give streaming:WINDOW+SINKS (StreamingLLM, e.g. streaming:4092+4) or budget:N (H2O/SnapKV, e.g. budget:2048)."


@dataclass(frozen=True)
class KvPolicy:
    kind: str  # streaming | budget
    window: int = 0  # streaming: the recent tokens kept
    sinks: int = 0  # streaming: the first tokens kept
    budget: int = 0  # budget: the tokens kept a layer

    @property
    def cap_tokens(self) -> int:
        """Tokens each attention layer caches at most."""
        return self.window + self.sinks if self.kind == "streaming" else self.budget

    @property
    def full_prompt(self) -> bool:
        """Whether the prompt is prefilled over all of its tokens (eviction after prefill) rather than the window."""
        return self.kind == "budget"

    @property
    def label(self) -> str:
        return f"streaming:{self.window}+{self.sinks}" if self.kind == "streaming" else f"budget:{self.budget}"

    def describe(self) -> str:
        if self.kind == "streaming":
            return (f"StreamingLLM (arXiv:2309.17453): each attention layer keeps its first {self.sinks:,} tokens "
                    f"(attention sinks) and the last {self.window:,}, {self.cap_tokens:,} at most; the prompt runs "
                    "through the same window")
        return (f"H2O / SnapKV eviction (arXiv:2306.14048, 2404.14469): each attention layer keeps {self.budget:,} "
                "tokens chosen by attention score; the prompt is prefilled in full and its whole cache held until "
                "it is evicted")

    def caveat(self) -> str:
        if self.kind == "streaming":
            return ("the sinks keep generation stable, not the context: tokens older than the window are gone, so "
                    "nothing beyond the last " f"{self.window:,} is remembered (a what-if: vLLM, SGLang, TensorRT-LLM "
                    "and llama.cpp's server do not run it as such)")
        return ("evicted tokens are lost: recall of details in the dropped part of the prompt suffers (a what-if: "
                "vLLM, SGLang, TensorRT-LLM and llama.cpp do not implement score-based eviction)")


def parse_kv_policy(text: str | None) -> KvPolicy | None:
    """`streaming:W+S` or `budget:N`; a one-line error naming the value otherwise."""
    if text is None:
        return None
    m = _SPEC.match(text.strip().lower())
    if not m or m.group("kind") not in KINDS:
        raise InvalidValueError(f"--kv-policy {text!r}: not a policy llmsize knows.", HINT)
    kind, a, b = m.group("kind"), int(m.group("a")), m.group("b")
    if kind == "streaming":
        if b is None:
            raise InvalidValueError(f"--kv-policy {text!r}: StreamingLLM keeps a window and its sink tokens.",
                                    "Give both, e.g. streaming:4092+4 (the paper keeps 4 sinks).")
        policy = KvPolicy("streaming", window=a, sinks=int(b))
        if policy.window < 1:
            raise InvalidValueError(f"--kv-policy {text}: the window must hold at least 1 token.", HINT)
    else:
        if b is not None:
            raise InvalidValueError(f"--kv-policy {text!r}: a budget is one number of tokens.", HINT)
        policy = KvPolicy("budget", budget=a)
        if policy.budget < 1:
            raise InvalidValueError(f"--kv-policy {text}: the budget must be at least 1 token.", HINT)
    if policy.cap_tokens > MAX_TOKENS:
        raise InvalidValueError(f"--kv-policy {text}: {policy.cap_tokens:,} tokens is beyond any context.",
                                f"Keep the cap under {MAX_TOKENS:,} tokens.")
    return policy


def policy_applies(model: ModelSpec) -> bool:
    """Whether a policy's cap is modelled for the model's layers: not for DeepSeek-V4's, which keep a window and
    compressed rows already (how a cap on tokens would fall on rows that each stand for several is not modelled)."""
    return not has_compressed_layers(model)


def capped_model(model: ModelSpec, policy: KvPolicy | None) -> ModelSpec:
    """The model as the policy's cache sees it: every layer that caches tokens caches at most policy.cap_tokens
    (full attention becomes a window of the cap, a window keeps the smaller, MLA gets the cap); weights unchanged."""
    if policy is None:
        return model
    if not policy_applies(model):
        raise InvalidValueError(f"--kv-policy {policy.label}: DeepSeek-V4's layers already keep a window and a "
                                "compressed row every few tokens; a token cap over them is not modelled.",
                                "Plan it without --kv-policy (its own cache is the plan's).")
    cap = policy.cap_tokens
    groups = []
    for g in model.layer_groups:
        m = g.mixer
        if isinstance(m, FullAttention):
            m = SlidingAttention(**{**m.model_dump(), "kind": "sliding", "sliding_window": cap})
        elif isinstance(m, SlidingAttention) and m.sliding_window > cap:
            m = m.model_copy(update={"sliding_window": cap})
        elif isinstance(m, MlaAttention):
            m = m.model_copy(update={"sliding_window": min(cap, m.sliding_window or cap)})
        groups.append(g.model_copy(update={"mixer": m}))
    return model.model_copy(update={"layer_groups": groups})
