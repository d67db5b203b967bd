"""Attention data parallel with expert parallel ("DEP n", "DP n + EP"): n cards, each with its own requests, its
own copy of the attention and dense weights and its own cache, the routed experts split among them (E / n whole
experts a card), every MoE layer exchanging tokens between the cards with two all-to-alls (dispatch to the
experts' cards, combine back). vLLM runs it as `--data-parallel-size n --enable-expert-parallel`, SGLang as
`--tp n --dp n --enable-dp-attention`, TensorRT-LLM with attention DP (its published "DEP" configurations).

Against tensor parallel over the same n cards: no all-reduce after attention, no cache replicated (an MLA latent
is held on every card of a TP group, so TP n holds n times fewer requests), but each card reads the whole
attention and dense weights, so one user decodes slower: tensor parallel for low latency, DEP for throughput
(as vLLM's DeepSeek recipe puts it).

One card is costed as the whole model with E / n experts of its own, k experts a token, at its own batch
b = ceil(B / n) of the replica's B requests. Its experts are touched by the B tokens of all cards,
1 - (1 - k/E)^B of them (estimate/params.routed_fraction); the card model gives 1 - (1 - k n / E)^(B / n), a close
and slightly high stand-in ((1 - x / n)^n <= 1 - x): DeepSeek-V3, n = 8, 0.776^b against 0.75^b. Expert FLOPs are
b x k a card either way. Routing is taken as uniform: the busiest card's load is not modelled.

The all-to-alls: per MoE layer, each card sends its b tokens' hidden states to the k experts of each, the share
(n - 1) / n of them on other cards, and receives as much back:
    bytes a card per step = 2 x moe_layers x b x k x hidden x 2 (bf16) x (n - 1) / n
over the card link, plus the runtime's fitted latency per collective (estimate/speed.py, alpha) for each of the
2 x moe_layers exchanges.
"""

from __future__ import annotations

from llmsize.catalog.schema import ModelSpec
from llmsize.errors import InvalidValueError
from llmsize.estimate.parallel import ACT_BYTES

DP_CHOICES = (2, 4, 8)


def _moe_groups(model: ModelSpec):
    return [g for g in model.layer_groups if g.mlp is not None and g.mlp.kind == "moe"]


def supports_dep(model: ModelSpec, n: int) -> bool:
    """n divides every MoE group's experts and each card keeps at least k of them."""
    groups = _moe_groups(model)
    return bool(groups) and all(g.mlp.num_experts % n == 0 and g.mlp.num_experts // n >= g.mlp.experts_per_token
                                for g in groups)


def expert_shard(model: ModelSpec, n: int) -> ModelSpec:
    """What one card of a DEP n replica holds: the model with E / n of each MoE group's experts."""
    if not supports_dep(model, n):
        raise InvalidValueError(f"expert parallel over {n} cards does not split {model.id}'s experts evenly.",
                                "Pick a card count that divides the experts (and leaves each card k of them).")
    groups = [g.model_copy(update={"mlp": g.mlp.model_copy(update={"num_experts": g.mlp.num_experts // n})})
              if g.mlp is not None and g.mlp.kind == "moe" else g for g in model.layer_groups]
    return model.model_copy(update={"layer_groups": groups})


def all_to_alls_per_step(model: ModelSpec) -> int:
    """Dispatch and combine in every MoE layer."""
    return 2 * sum(g.count for g in _moe_groups(model))


def all_to_all_bytes_per_card(model: ModelSpec, batch_per_card: int, n: int) -> float:
    """Bytes one card sends in one decode step (its batch_per_card tokens; receives as many)."""
    if n < 2:
        return 0.0
    total = 0.0
    for g in _moe_groups(model):
        total += 2 * g.count * batch_per_card * g.mlp.experts_per_token * model.hidden_size * ACT_BYTES
    return total * (n - 1) / n
