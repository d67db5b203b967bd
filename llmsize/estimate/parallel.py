"""More than one card: tensor parallel (tp) and pipeline parallel (pp), as vLLM/Megatron split a model.

A tp x pp plan is costed on the model one card holds, built as a smaller ModelSpec so every other
estimator applies unchanged (Megatron-LM, Shoeybi et al. 2019, section 3; vLLM's parallel layers):
- tp splits attention heads, MLP and expert intermediate sizes, SSM heads and the vocabulary; KV heads
  are split when tp divides them and replicated (one per card) when there are fewer KV heads than cards;
  an MLA latent is replicated on every card; norms and routers are replicated;
- pp gives each stage ceil(layers / pp) of every layer group and one vocabulary matrix (the first stage the
  embedding, the last the lm_head).
Decode of one token crosses the stages in turn, so its time is that of the tp-shard of the whole model
(the stages' reads add up), plus communication: per layer one all-reduce after the mixer and one after
the MLP, each a ring all-reduce moving 2 (tp - 1) / tp x batch x hidden x 2 bytes per card over the card
link (Patarasuk & Yuan 2009, bandwidth-optimal ring all-reduce), and pp - 1 activation hand-offs. The
collectives' latency (a few microseconds each) is not modelled: at batch 1 it can matter more than bytes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from llmsize.catalog.schema import PCIE_LINK, GpuSpec, ModelSpec
from llmsize.errors import InvalidValueError
from llmsize.estimate.memo import by_identity

ACT_BYTES = 2  # activations travel in bf16
# PCI-SIG per-lane rates, 128b/130b encoding: gen3 8 GT/s, gen4 16, gen5 32, gen6 64 (PAM4, FLIT) -> GB/s
# per lane and direction.
PCIE_GB_S_PER_LANE = {3: 8 * 128 / 130 / 8, 4: 16 * 128 / 130 / 8, 5: 32 * 128 / 130 / 8, 6: 64 * 242 / 256 / 8}
DEFAULT_NODE_LINK_GB_S = 50.0  # one 400 Gb/s InfiniBand NDR / Ethernet NIC per GPU, per direction
DEFAULT_GPUS_PER_NODE = 8


@dataclass(frozen=True)
class Link:
    gb_s: float  # per direction, card to card
    kind: str  # "NVLink", "Infinity Fabric", "PCIe 5.0 x16"...
    source: str  # what in the catalog it was read from


def card_link(gpu: GpuSpec) -> Link | None:
    """The card-to-card link from the catalog's interconnect text: an NVLink / Infinity Fabric / RoCE figure
    (an aggregate of both directions: halved), else the PCIe generation and width. None for SoCs and for
    NVLink-C2C (CPU to GPU only)."""
    text = gpu.interconnect or ""
    # the switched fabric of SXM/OAM boards ("NVLink 4: 900 GB/s", "Infinity Fabric 896 GB/s aggregate");
    # a 2-card NVLink bridge does not serve tp > 2, so bridged cards are costed over PCIe
    m = re.search(r"(NVLink \d+|Infinity Fabric)[:\s]+([\d.]+)\s*(TB/s|GB/s)", text)
    if m:
        agg = float(m.group(2)) * (1000 if m.group(3) == "TB/s" else 1)
        return Link(agg / 2, m.group(1).strip(), text)
    m = re.search(r"RoCE[^(]*\(([\d.]+) GB/s bidirectional\)", text)  # Gaudi 3's on-die Ethernet
    if m:
        return Link(float(m.group(1)) / 2, "RoCE", text)
    m = PCIE_LINK.search(text)
    if m and int(m.group(1)) in PCIE_GB_S_PER_LANE:
        gen, lanes = int(m.group(1)), int(m.group(2))
        return Link(PCIE_GB_S_PER_LANE[gen] * lanes, f"PCIe {gen}.0 x{lanes}", text)
    return None


def host_link(gpu: GpuSpec) -> Link | None:
    """The card's PCIe link to the host (what offloaded weights cross), from its interconnect text."""
    m = PCIE_LINK.search(gpu.interconnect or "")
    if m and int(m.group(1)) in PCIE_GB_S_PER_LANE:
        gen, lanes = int(m.group(1)), int(m.group(2))
        return Link(PCIE_GB_S_PER_LANE[gen] * lanes, f"PCIe {gen}.0 x{lanes}", gpu.interconnect)
    return None


def _split(value: int, tp: int, what: str) -> int:
    if value % tp:
        raise InvalidValueError(f"--tp {tp} does not divide the {value} {what}.",
                                "Pick a tensor-parallel size that divides it (engines require it).")
    return value // tp


def _kv_per_card(kv: int, tp: int, what: str = "KV heads") -> int:
    if kv % tp == 0:
        return kv // tp
    if tp % kv == 0:
        return 1  # fewer KV heads than cards: each card keeps (a replica of) one
    raise InvalidValueError(f"--tp {tp} neither divides nor is a multiple of the {kv} {what}.",
                            f"Pick a tensor-parallel size that divides the {what} or is a multiple of them.")


def _shard_mixer(m, tp: int):
    if m is None or tp == 1:
        return m
    if m.kind in ("full", "sliding"):
        return m.model_copy(update={"num_attention_heads": _split(m.num_attention_heads, tp, "attention heads"),
                                    "num_key_value_heads": _kv_per_card(m.num_key_value_heads, tp)})
    if m.kind == "mla":  # a sparse-attention indexer stays whole on every card (vLLM: its wq_b is a ReplicatedLinear)
        return m.model_copy(update={"num_attention_heads": _split(m.num_attention_heads, tp, "attention heads")})
    if m.kind == "compressed":  # DeepSeek-V4: heads and output groups split; its one KV head, compressors and indexer
        # whole on every card (as MLA's latent)
        return m.model_copy(update={"num_attention_heads": _split(m.num_attention_heads, tp, "attention heads"),
                                    "o_groups": _split(m.o_groups, tp, "attention output groups")})
    if m.kind == "ssm":
        return m.model_copy(update={"num_heads": _split(m.num_heads, tp, "SSM heads"),
                                    "n_groups": max(1, m.n_groups // tp)})
    if m.kind == "conv":  # vLLM's ShortConv: in_proj column-parallel, out_proj row-parallel, conv_dim / tp a card
        return m.model_copy(update={"conv_dim": _split(m.conv_dim, tp, "short-conv channels")})
    return m.model_copy(update={"num_key_heads": _kv_per_card(m.num_key_heads, tp, "linear-attention key heads"),
                                "num_value_heads": _split(m.num_value_heads, tp, "linear-attention value heads")})


def _shard_mlp(m, tp: int):
    if m is None or tp == 1:
        return m
    if m.kind == "dense":
        return m.model_copy(update={"intermediate_size": math.ceil(m.intermediate_size / tp)})
    upd = {"moe_intermediate_size": math.ceil(m.moe_intermediate_size / tp)}
    if m.shared_intermediate_size:
        upd["shared_intermediate_size"] = math.ceil(m.shared_intermediate_size / tp)
    return m.model_copy(update=upd)


def stage_group_counts(model: ModelSpec, pp: int) -> list[int]:
    """Each layer group's layers in the largest of `pp` pipeline stages: the stack cut into pp runs as vLLM cuts it
    (vllm/distributed/utils.py get_pp_indices: n // pp layers a stage, one more to each of the n % pp stages before
    the last, which holds the lm_head), the stage holding the most parameters. One stage of interleaved groups holds
    its own mix of them (DeepSeek-V4-Flash's 2 + 1 + 20 + 20 at --pp 43 is one layer a stage, not one of each
    group)."""
    if pp == 1:
        return [g.count for g in model.layer_groups]
    from llmsize.estimate.params import layer_pieces

    per_layer = [sum(p.params for p in layer_pieces(g, model.hidden_size)) for g in model.layer_groups]
    index = {id(g): i for i, g in enumerate(model.layer_groups)}
    stack = [index[id(g)] for g in model.layer_stack()]
    n, best, start = len(stack), None, 0
    sizes = [n // pp] * pp
    for i in range(2, n % pp + 2):
        sizes[-i] += 1
    for size in sizes:
        counts = [0] * len(per_layer)
        for g in stack[start:start + size]:
            counts[g] += 1
        start += size
        weight = sum(c * w for c, w in zip(counts, per_layer))
        if best is None or weight > best[0]:
            best = (weight, counts)
    return best[1]


@by_identity(maxsize=256)
def shard_model(model: ModelSpec, tp: int = 1, pp: int = 1) -> ModelSpec:
    """The part of `model` one card of a tp x pp deployment holds (the largest pipeline stage); one object per model
    and split, so that what is cached per model object downstream (its pieces, its bytes) is found again."""
    if tp < 1 or pp < 1:
        raise InvalidValueError(f"--tp {tp} / --pp {pp} must be at least 1.", "Pass 1 or more.")
    if pp > model.num_layers:
        raise InvalidValueError(f"--pp {pp} is more than the model's {model.num_layers} layers.",
                                "Use fewer pipeline stages.")
    if tp == 1 and pp == 1:
        return model
    counts = stage_group_counts(model, pp)
    groups = [g.model_copy(update={"count": n, "mixer": _shard_mixer(g.mixer, tp), "mlp": _shard_mlp(g.mlp, tp)})
              for g, n in zip(model.layer_groups, counts) if n]
    # layers that read an earlier layer's cache (Gemma 4 E's) in a stage without one of its kind: they hold their own
    kinds = {g.mixer.kind for g in groups if g.mixer is not None and not getattr(g.mixer, "kv_shared", False)}
    groups = [g.model_copy(update={"mixer": g.mixer.model_copy(update={"kv_shared": False})})
              if getattr(g.mixer, "kv_shared", False) and g.mixer.kind not in kinds else g for g in groups]
    # a vision tower is split as the decoder is: vLLM shards its linears over the tensor-parallel cards unless told
    # --mm-encoder-tp-mode data, which "consumes additional memory" (vllm-project/recipes Qwen/Qwen3.5.md)
    extra = [x.model_copy(update={"params": math.ceil(x.params / tp)}) for x in model.extra] if tp > 1 else model.extra
    return model.model_copy(update={
        "vocab_size": math.ceil(model.vocab_size / tp),
        "layer_groups": groups,
        "extra": extra,
        "layer_pattern": None,  # a card's share of each group, not its place in the stack (bytes, not placement)
        # each stage stores one vocabulary matrix: the embedding on the first, the lm_head on the last
        "tie_word_embeddings": model.tie_word_embeddings or pp > 1,
    })


def allreduces_per_token(model: ModelSpec) -> int:
    """One all-reduce after each mixer and one after each MLP (Megatron-LM's two per transformer layer)."""
    return sum(g.count * ((g.mixer is not None) + (g.mlp is not None)) for g in model.layer_groups)


@dataclass(frozen=True)
class Comm:
    """Bytes each card sends per decode step and the time they take over the links."""

    tp: int
    pp: int
    allreduces: int
    link: Link | None
    node_link_gb_s: float
    gpus_per_node: int
    nodes_given: int | None = None  # --nodes: one pipeline stage per node, the hand-offs over the node link
    residual_streams: int = 1  # hidden-size streams a stage hands the next (DeepSeek-V4's hyper-connections: 4)

    @property
    def stages_cross_nodes(self) -> bool:
        if self.nodes_given is not None:
            return self.nodes_given > 1
        return self.tp * self.pp > self.gpus_per_node

    def bytes_per_card(self, batch: int, hidden: int, tokens: int = 1) -> float:
        msg = batch * tokens * hidden * ACT_BYTES
        ring = 2 * (self.tp - 1) / self.tp * msg * self.allreduces if self.tp > 1 else 0.0
        return ring + (self.pp - 1) * msg * self.residual_streams

    def time_s(self, batch: int, hidden: int, tokens: int = 1) -> float:
        if self.tp * self.pp == 1:
            return 0.0
        msg = batch * tokens * hidden * ACT_BYTES
        t = 0.0
        if self.tp > 1:
            tp_link = self.link.gb_s if self.tp <= self.gpus_per_node else self.node_link_gb_s
            t += 2 * (self.tp - 1) / self.tp * msg * self.allreduces / (tp_link * 1e9)
        if self.pp > 1:
            link_gb_s = self.node_link_gb_s if self.stages_cross_nodes else self.link.gb_s
            t += (self.pp - 1) * msg * self.residual_streams / (link_gb_s * 1e9)
        return t

    @property
    def nodes(self) -> int:
        """The user's --nodes, else the fewest nodes of gpus_per_node cards that hold tp x pp."""
        return self.nodes_given or math.ceil(self.tp * self.pp / self.gpus_per_node)


def make_comm(model: ModelSpec, gpu: GpuSpec, tp: int, pp: int, node_link_gb_s: float = DEFAULT_NODE_LINK_GB_S,
              gpus_per_node: int = DEFAULT_GPUS_PER_NODE, nodes: int | None = None) -> Comm:
    if not (math.isfinite(node_link_gb_s) and node_link_gb_s > 0):
        raise InvalidValueError(f"--node-link-gb-s `{node_link_gb_s}` must be a finite number above 0.",
                                "Give the per-GPU bandwidth between nodes, e.g. 50 for a 400 Gb/s NIC.")
    if nodes is not None and not 1 <= nodes <= tp * pp:
        raise InvalidValueError(f"--nodes {nodes} for {tp * pp} card(s): every node needs at least one card.",
                                "Give at most --tp x --pp nodes.")
    link = card_link(gpu)
    if tp * pp > 1 and link is None:
        raise InvalidValueError(f"{gpu.name} has no card-to-card link in the catalog ({gpu.interconnect!r}).",
                                "Plan it on one card, or pick a card with NVLink or PCIe.")
    return Comm(tp, pp, allreduces_per_token(model), link, node_link_gb_s, gpus_per_node, nodes,
                model.hyper_connections or 1)
