"""Sizing a deployment for a workload: how many of which card serve it within its latency targets.

Aggregated serving (every replica prefills and decodes), one replica = tp cards (tensor parallel within a node;
expert parallel over the same cards for a MoE), for a MoE also DEP n (attention data parallel over n = 2, 4, 8
cards, each with its own requests and cache, the experts split among them and exchanged by all-to-alls:
estimate/expert_parallel.py; not with speculative decoding), or two pipeline stages within a node (tp 1, 2 or 4 x
pp 2), or, for a model no node of 8 holds, tp 8 x pp pipeline stages of a node each (pp 2 or 4, over the node
link). A pipeline keeps pp micro-batches in flight, one a stage (estimate/replica.replica_timing): its b users'
TPOT is the step at batch ceil(b / pp) through every stage, and each card holds its stage's share of every user's
cache. For each card and tp, one plan at the cache a running request
holds (isl + osl / 2 on average for vLLM and SGLang, which admit on the blocks in use; isl + osl for TensorRT-LLM,
which reserves a request's whole length: estimate/serving_defaults.py); its decode model gives the step at any
batch b, costed by the runtime's fitted constants (estimate/speed.py):

    TPOT(b) = decode step time at batch b                 (s per output token, per user)
    T_prefill = prefill time of isl tokens, alone         (s)
    C_prefill = what one prompt costs a replica, k prompts sharing one read of the weights and one set of fixed
                costs: max(compute, weight read / k) + fixed / k   (<= T_prefill); k = N // isl for engines that
                fill each step's token budget (N, the engine's chunk) from the queue (vLLM, TensorRT-LLM); for
                SGLang, whose prefill forwards run apart, the prompts that arrived while the last forward ran,
                k = rate x F(k) within [1, N // isl] (estimate/replica.prefill_cost_s): under a light load each
                prompt pays a whole forward

Aggregated serving: each replica also runs the prefills of its requests, and each prefill stalls every user of
the replica decoding, the b - 1 others' per osl tokens of a user (its own came before its first token), so a user
sees
    TPOT_agg(b) = TPOT(b) + (b - 1) x C_prefill / osl
and the replica's b users each get 1 / TPOT_agg(b) tok/s. Prompts arrive as a Poisson stream at
lambda = b / (T_prefill + osl x (TPOT(b) + b x C_prefill / osl)) (b requests a cycle of the replica, every prompt
in it). SGLang: TTFT = the forward of the k prompts that
arrived together (k x C_prefill) + half a decode step (the one in progress when the prompt arrives) + Wq, the wait
for the prefills ahead, M/D/1 (one prefill stream a replica, deterministic service C_prefill;
estimate/queueing.py). vLLM and TensorRT-LLM, whose prompts ride in decode steps: the rest of the step in
progress (length-biased: steps carrying prompts are longer) and the next step, TPOT(b) + C_prefill for the
prompt and each other that arrived meanwhile; a prompt over the step's token budget goes in chunks, one a step,
behind the prompts ahead (M/D/1) (estimate/replica.first_token_s, checked against the scheduler replayed,
tests/test_serving_replay.py). Users = --users, or Little's law on --rate:
users = rate x (TTFT + osl x TPOT). The largest b that the cache holds (the cache memory the engine's own ledger
leaves on each card: vLLM's, SGLang's, TensorRT-LLM's, estimate/engines.py), that the engine's default cap allows
(vLLM 1,024 on an 80 GB-class card, 256 on others; TensorRT-LLM trtllm-bench's tuning), that the step's token
budget admits where prompts ride in decode steps (b (1 + isl / osl) <= the engine's tokens a step: admitted_batch)
and that keeps the user's
TPOT within --tpot and TTFT within --ttft gives the fewest replicas = ceil(users / b); cards = replicas x tp, nodes of 8.
Cost per million output tokens = cards x hourly price / (output tok/s x 3600) x 1e6.

Prefix caching (--shared-prefix f): a replica computes only the (1 - f) x isl new prompt tokens of each request
(its prefill time scaled by 1 - f: the matmuls of the cached tokens are skipped), and holds the shared f x isl
tokens' cache once, so the users it holds are (cache budget - that prefix) / each user's own held tokens.

Speculative decoding (--spec): a target pass verifies k proposed tokens of each of b users (the weights read as at
b x (k + 1) tokens, each user's cache once, k + 1 times the FLOPs), the draft takes k steps at batch b (an MTP
layer: one of the target's layers, 1/layers of a step, each), and the pass yields E = (1 - a^(k+1)) / (1 - a)
tokens a user, so TPOT(b) = (verify + draft) / E. At small batches the verify pass costs about one step and the
gain is ~E; as b grows the pass turns compute-bound and the gain shrinks. A draft model's weights and cache come
out of the replica's cache budget.

Disaggregated serving (prefill and decode workers apart, xPyD, as vLLM/SGLang P/D and NVIDIA Dynamo run it):
decode workers no longer pause for prefills (a user sees TPOT(b)), y = ceil(users / b) of them; a prefill worker,
with no decode steps to ride in, batches the prompts that arrived while its last forward ran, whatever the engine
(as SGLang's aggregated replicas do: k of them, C_prefill each); a prompt that finds every worker busy (Erlang C)
waits for the next to free and rides its forward with the prompts that arrived meanwhile
(estimate/replica.pool_first_token_s; estimate/disaggregated_replay.py replays it, fleet --simulate), and x is the
fewest that keep TTFT = that + the cache's move within --ttft (without a target, the wait within T_prefill);
the request rate is --rate, or users / (TTFT + osl x TPOT(b)); the finished cache moves to a decode worker over
the node link (KV bytes of isl tokens / --node-link-gb-s, 50 GB/s per GPU by default), which TTFT pays too. The
better of the two modes (cheaper, else fewer cards; at an equal cost aggregated, the simpler to run, even where the
disaggregated one serves faster for it) is the row; the other rides along for comparison.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, replace

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.errors import LlmsizeError
from llmsize.estimate.engines import given_util
from llmsize.estimate.expert_parallel import DP_CHOICES, expert_shard, supports_dep
from llmsize.estimate.parallel import card_link
from llmsize.estimate.queueing import erlang_c
from llmsize.estimate.replica import (
    first_token_s,
    kv_pool_bytes,
    pool_first_token_s,
    pool_idle_s,
    replica_timing,
    users_held,
)
from llmsize.estimate.runtimes import architecture_refusal
from llmsize.estimate.serving_defaults import held_context_tokens, serving_defaults
from llmsize.estimate.speculative import SPEC_PIPELINE_REFUSAL
from llmsize.estimate.workload import Workload

TP_CHOICES = (1, 2, 4, 8)
PP_IN_NODE = ((1, 2), (2, 2), (4, 2))  # (tp, pp): two pipeline stages within a node (MLPerf's H200 runs tp 4 x pp 2)
PP_NODES = (2, 4)  # a replica of pp nodes of 8 cards (tp 8 x pp), each tried while the last lowered the fleet
GPUS_PER_NODE = 8
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class FleetRow:
    card: str
    mode: str
    tp: int | None  # None (with pp, ep) when no configuration serves the workload
    pp: int | None
    ep: int | None
    replicas: int | None
    cards_total: int | None
    nodes: int | None
    batch_per_replica: int | None
    output_tok_s_per_gpu: float | None
    output_tok_s_total: float | None
    tok_s_per_user: float | None
    ttft_s: float | None
    tpot_s: float | None
    meets_slo: bool
    watts: float | None
    cost_per_hour: float | None
    cost_per_month: float | None
    cost_per_mtok_out: float | None
    why_not: str | None = None
    prefill_workers: int | None = None  # disaggregated: x prefill workers of tp cards each
    decode_workers: int | None = None  # and y decode workers
    ttft_wait_s: float | None = None  # the part of ttft_s spent queueing for a prefill (M/G/c)
    ttft_p95_s: float | None = None  # with a prompt distribution: a p95-length prompt's prefill + the mean wait
    # the expected-speed model's held-out band (p5-p95 of measured / predicted rates) on TPOT and TTFT's prefill
    tpot_s_low: float | None = None
    tpot_s_high: float | None = None
    ttft_s_low: float | None = None
    ttft_s_high: float | None = None
    other: "FleetRow | None" = None  # the other mode, for comparison
    dp: int | None = 1  # attention data-parallel cards of a replica (DEP: tp 1, dp = ep = n; estimate/expert_parallel)
    caveats: tuple[str, ...] = ()  # what the catalog lacks that the row's figures lean on (card_caveats)
    # the most requests a replica runs at once (the engine's --max-num-seqs): under --rate, above the mean it runs
    # (batch_per_replica), so that Poisson bursts are admitted at once; None: batch_per_replica
    max_batch: int | None = None
    # the share of its prompt-serving capacity the row's load takes: a disaggregated row's prefill workers (M/G/x)
    prefill_load: float | None = None
    gpu_util: float | None = None  # the share of each card's memory the user gave (--gpu-util); None: the engine's own
    cards_cost: float | None = None  # the row's cards x the price of one (--prices `prices:`): what they cost to buy
    # the KV cache dtype the row was sized with: --kv-dtype, else the runtime's own on this card (SGLang keeps a DSA
    # model's cache in FP8 on compute capability >= 10: runtimes.runtime_kv_dtype)
    kv_dtype: str | None = None

    @property
    def running_cap(self) -> int | None:
        """The requests a replica admits at once: max_batch, else batch_per_replica."""
        return self.max_batch or self.batch_per_replica

    @property
    def cards_per_worker(self) -> int:
        """A replica's cards (aggregated), or a prefill or decode worker's (they share the layout)."""
        return (self.tp or 1) * (self.pp or 1) * (self.dp or 1)

    def shared_node_slots(self) -> tuple[int, list[str]] | None:
        """Where several workers of fewer than a node's cards share a node: how many fit one, and the first two's
        device lists ("0,1", "2,3"); None where a worker takes a node or there is one worker."""
        per = self.cards_per_worker
        workers = self.replicas if self.mode == "aggregated" else (self.prefill_workers or 0) + (
            self.decode_workers or 0)
        if per >= GPUS_PER_NODE or (workers or 0) <= 1:
            return None
        return GPUS_PER_NODE // per, [",".join(str(c) for c in range(i * per, (i + 1) * per)) for i in (0, 1)]

    @property
    def tok_s_per_user_band(self) -> tuple[float, float] | None:
        """A user's decode rate at TPOT's band, slowest first (1 / tpot_s_high, 1 / tpot_s_low)."""
        if not self.tpot_s_low or not self.tpot_s_high:
            return None
        return 1 / self.tpot_s_high, 1 / self.tpot_s_low


def _largest_batch(ok, hi: int) -> int | None:
    """The largest b <= hi with ok(b) (ok holds up to some b and not past it), None when not even b = 1."""
    if ok(hi):
        return hi
    if not ok(1):
        return None
    lo = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


# Engines with attention data parallel and expert parallel (vLLM --data-parallel-size --enable-expert-parallel,
# SGLang --enable-dp-attention --ep-size, TensorRT-LLM enable_attention_dp), and those with pipeline stages (those
# three; llama.cpp's layer split, within one machine: its stages over machines go through its RPC backend, not
# costed). gpt-fast splits tensors only.
DEP_RUNTIMES = ("vllm", "sglang", "trtllm")
PIPELINE_RUNTIMES = ("vllm", "sglang", "trtllm", "llamacpp")
NODE_PIPELINE_RUNTIMES = ("vllm", "sglang", "trtllm")


def _configs(any_constants: bool, model: ModelSpec, spec=None, runtime: str = "vllm") -> list[tuple[int, int, int]]:
    """(tp, pp, dp) of a replica `runtime` can run: tensor parallel within a node; for a MoE, attention data parallel
    with expert parallel over 2-8 cards (DEP, where the experts split evenly; not with speculative decoding;
    DEP_RUNTIMES); two pipeline stages within a node (PIPELINE_RUNTIMES); then pipeline stages of a full node each
    (last, fewest nodes first; NODE_PIPELINE_RUNTIMES)."""
    if not any_constants:
        return []
    dep = [(1, 1, n) for n in DP_CHOICES if spec is None and supports_dep(model, n)] if runtime in DEP_RUNTIMES else []
    return ([(tp, 1, 1) for tp in TP_CHOICES] + dep
            + ([(tp, pp, 1) for tp, pp in PP_IN_NODE] if runtime in PIPELINE_RUNTIMES else [])
            + ([(GPUS_PER_NODE, pp, 1) for pp in PP_NODES] if runtime in NODE_PIPELINE_RUNTIMES else []))


def replica_inputs(runtime: str, w: Workload, tp: int, pp: int, kv_dtype: str | None):
    """The plan options of one replica of tp x pp cards serving the workload (its requests' held context, its
    prompt, stages over nodes where they span them), for fleet_rows and pareto_curves alike; kv_dtype None: the
    runtime's own on each card (plan.with_runtime_share)."""
    from llmsize.estimate.plan import PlanInputs

    return PlanInputs(quant=w.quant, context_tokens=held_context_tokens(runtime, w.isl, w.osl), prompt_tokens=w.isl,
                      tp=tp, pp=pp,
                      nodes=stage_nodes(tp, pp), node_link_gb_s=w.node_link_gb_s, kv_dtype=kv_dtype, runtime=runtime,
                      language_model_only=w.language_model_only)


def default_runtime(emit: str | None, gpus: list[GpuSpec], fmt_id: str = "") -> str:
    """The runtime a fleet is sized for without --runtime: the engine --emit names, llama.cpp for GGUF weights (as
    plan's default: runtimes.default_runtime) or where every card is Apple's or Intel's Arc (no serving engine
    modelled runs on them: expected.backend), else vLLM."""
    if emit is not None:
        return emit
    from llmsize.estimate.runtimes import backend

    if fmt_id.startswith(("gguf-", "ggml-")):
        return "llamacpp"
    return "llamacpp" if all(backend(g) in ("metal", "vulkan") for g in gpus) else "vllm"


def cards_per_node(g: GpuSpec) -> int:
    """A node holds GPUS_PER_NODE cards with a card-to-card link; a card without one (an Apple or other SoC, a
    DGX Spark) is a machine of its own."""
    return GPUS_PER_NODE if card_link(g) is not None else 1


def stage_nodes(tp: int, pp: int) -> int | None:
    """Nodes a replica's pipeline stages span, one stage a node (PlanInputs.nodes: the hand-offs over the node
    link), or None when the replica fits one node (stages hand off over the cards' own link)."""
    return pp if tp * pp > GPUS_PER_NODE else None


def _row(g, par, moe, mode, replicas, b, out_total, tpot, ttft, price, x=None, y=None, wait=None) -> FleetRow:
    tp, pp, dp = par
    cards = replicas * tp * pp * dp
    return FleetRow(
        card=g.id, mode=mode, tp=tp, pp=pp, ep=tp * dp if moe else 1, dp=dp, replicas=replicas, cards_total=cards,
        nodes=math.ceil(cards / cards_per_node(g)), batch_per_replica=b, output_tok_s_per_gpu=out_total / cards,
        output_tok_s_total=out_total, tok_s_per_user=1 / tpot, ttft_s=ttft, tpot_s=tpot, meets_slo=True,
        watts=g.tdp_w * cards if g.tdp_w else None, cost_per_hour=price * cards if price else None,
        cost_per_month=price * cards * HOURS_PER_MONTH if price else None,
        cost_per_mtok_out=price * cards / (out_total * 3600) * 1e6 if price else None,
        prefill_workers=x, decode_workers=y, ttft_wait_s=wait)


# the most of what its prefill workers can serve a disaggregated row loads them with: the pool's closed form
# (replica.pool_first_token_s) is checked against its replay at loads up to 0.85, and past it a queue grows fast with a
# slower service (at 0.99 a prefill 1% slower than expected saturates it, where the prompts' held-out band is ~20%)
PREFILL_LOAD_MAX = 0.85


def card_caveats(g: GpuSpec, plan, row: FleetRow, runtime: str, w: Workload) -> tuple[str, ...]:
    """What a row's figures lean on that the reader should know: a 16-bit matrix rate the catalog lacks (its
    prompts costed at the FP32 rate stand-in: TTFT and prefill workers an upper bound), a card-to-card link faster
    than PCIe the catalog gives no figure for (a replica of several cards' collectives costed over PCIe), a p95
    prompt whose first token misses the TTFT target the mean prompt meets."""
    from llmsize.estimate.kernels import fp32_stands_in
    from llmsize.estimate.step_inputs import prefill_inputs

    out = []
    if w.ttft_s is not None and row.ttft_p95_s is not None and row.ttft_p95_s > w.ttft_s:
        out.append(f"a p95 prompt ({w.lengths()[0].p95:,} tokens) waits {row.ttft_p95_s:.2f} s for its first "
                   f"token, over the {w.ttft_s:g} s target the mean prompt meets (--ttft applies to the mean)")
    if fp32_stands_in(g, prefill_inputs(plan, runtime).peak_flop_per_s):
        out.append(f"prompts costed at its FP32 rate ({g.dense_tflops.fp32:g} TFLOPS): the catalog has no 16-bit "
                   "matrix rate for it, so its TTFT and prefill workers are an upper bound")
    link, text = card_link(g), g.interconnect or ""
    faster = None if re.search(r"\bno (NVLink|Infinity Fabric)", text) else re.search(r"NVLink|Infinity Fabric", text)
    if (row.tp or 1) * (row.pp or 1) * (row.dp or 1) > 1 and link is not None and link.kind.startswith("PCIe") \
            and faster:
        out.append(f"its cards' collectives costed over {link.kind} ({link.gb_s:.0f} GB/s a direction), not its "
                   f"{faster.group(0)}: the catalog gives no figure for it that serves this replica (\"{text}\")")
    return tuple(out)


def _with_bands(row: FleetRow, c, hybrid_range: tuple[float, float] | None = None,
                decode_floor: float | None = None) -> FleetRow:
    """The row's TPOT and TTFT bands from the runtime's held-out p5-p95 of measured / predicted rates (a faster
    rate is a shorter time): TPOT / high .. TPOT / low; TTFT's prefill likewise with the prefill band, its queue
    as it is. A hybrid's prefill (hybrid_range: expected.RECURRENT_PREFILL_RANGE's, as multiples of the figure)
    spans at least what published hybrid prompts took, and i-quant weights' decode down to what published i-quant
    decodes took (decode_floor: expected.iquant_decode_floor), as plan's bands do."""
    lo, hi = c.band_low, c.band_high
    plo, phi = c.prefill_band_low or lo, c.prefill_band_high or hi
    lo = min(lo, decode_floor) if decode_floor is not None else lo
    wait = row.ttft_wait_s or 0.0
    pre = row.ttft_s - wait
    short, long = pre / phi, pre / plo
    if hybrid_range is not None:
        short, long = min(short, pre * hybrid_range[0]), max(long, pre * hybrid_range[1])
    return replace(row, tpot_s_low=row.tpot_s / hi, tpot_s_high=row.tpot_s / lo, ttft_s_low=short + wait,
                   ttft_s_high=long + wait)


def _with_p95(row: FleetRow, model, g, w: Workload, runtime: str, c, kv_dtype: str | None) -> FleetRow:
    """The row with the TTFT of a p95-length prompt: its prefill (a plan at that prompt), the row's mean wait, and
    for a disaggregated row the move of its cache."""
    from llmsize.estimate.plan import make_plan
    from llmsize.estimate.speed import prefill_time_s
    from llmsize.estimate.step_inputs import prefill_inputs

    p95 = w.lengths()[0].p95
    try:
        card_model = expert_shard(model, row.dp) if (row.dp or 1) > 1 else model
        plan = make_plan(card_model, g, replace(replica_inputs(runtime, w, row.tp, row.pp, kv_dtype),
                                                prompt_tokens=p95), search_fit=False)
    except LlmsizeError:
        return row
    pre = prefill_time_s(prefill_inputs(plan, runtime), c)
    if pre is None:
        return row
    move = (p95 * (plan.kv_card or plan.kv).bytes_per_token / (w.node_link_gb_s * 1e9)
            if row.mode == "disaggregated" else 0.0)
    return replace(row, ttft_p95_s=pre * (1 - w.shared_prefix) + move + (row.ttft_wait_s or 0.0))


def _batch_for_rate(b: int, rate: float | None, request_s) -> int:
    """With --rate, a replica batches no more requests than the load puts in it, its share of the rate x the
    request's time (Little's law), which shrinks with the batch: the fixed point from `b` down (the largest batch
    the targets allow, or the replicas' even share of the users that batch implied)."""
    if rate is None:
        return b
    for _ in range(40):
        need = max(1, min(b, math.ceil(rate * request_s(b))))
        if need == b:
            break
        b = need
    return b


def admitted_batch(runtime: str, prefill_tokens: int, w: Workload, cards: int = 1) -> int:
    """The most requests an aggregated replica can keep running when each step's token budget (the engine's
    prefill_tokens: vLLM's max_num_batched_tokens) must carry a decode token of each of b requests and the prompts
    they send, b / osl new prompts a step of isl tokens each (the shared prefix's not computed):
        b x (1 + isl x (1 - shared prefix) / osl) <= tokens a step
    (TensorRT-LLM's trtllm-bench sizes its budget the same way: estimate/serving_defaults.py). Engines whose prefill
    forwards run apart (SGLang) are bounded by their prefill's time instead (the stall in TPOT_agg): no cap. A DEP
    replica: each of its cards has the budget; a pipeline of pp stages: each of its pp micro-batches in flight
    (estimate/replica.replica_timing), `cards` = dp x pp."""
    from llmsize.estimate.replica import PREFILL_FIRST

    if runtime in PREFILL_FIRST:
        return 1 << 30
    per = 1 + w.isl * (1 - w.shared_prefix) / max(1, w.osl)
    return max(1, int(prefill_tokens // per)) * cards


# the engines with prefill/decode disaggregation (vLLM and SGLang P/D, NVIDIA Dynamo over them and TensorRT-LLM);
# llama.cpp, MLX and gpt-fast serve both on one worker
DISAGGREGATING = ("vllm", "sglang", "trtllm")
# ... and those whose P/D workers cannot run over pipeline stages. vLLM's NixlConnector (the one Dynamo's vLLM
# workers use) refuses a pipeline-parallel peer at its handshake (vllm #52913, open 2026-08); its push mode takes a
# pipelined prefill worker beside a decode worker without stages (#45880), stages on the decode side not planned.
# SGLang runs P/D with the same stages on both sides (sglang #8846, #14265), TensorRT-LLM's cache transceiver maps
# them (TensorRT-LLM #7117).
DISAGG_PIPELINE_REFUSAL = {
    "vllm": "vLLM's NixlConnector does not move a cache between pipeline stages (\"NixlConnector received pp_rank > 0 "
            "handshake metadata but does not support PP-disaggregated KV transfer\", vllm #52913)",
}


def disaggregation_refused(runtime: str, pp: int) -> str | None:
    """Why `runtime` cannot serve a replica of `pp` stages as prefill and decode workers; None where it can."""
    if runtime not in DISAGGREGATING:
        return f"{runtime} serves prompts and decode on one worker"
    return DISAGG_PIPELINE_REFUSAL.get(runtime) if pp > 1 else None


class Miss(str):
    """A reason a configuration misses a target, with how far: got / target (the smallest is the closest miss,
    the one why_not names)."""

    ratio: float = math.inf


def _miss(text: str, got: float, target: float) -> Miss:
    m = Miss(text)
    m.ratio = got / target
    return m


def _closest(reasons: list[str]) -> str:
    """The reason to give when nothing meets the targets: the closest miss of a target, else the last reason."""
    misses = [r for r in reasons if isinstance(r, Miss) and math.isfinite(r.ratio)]
    return min(misses, key=lambda r: r.ratio) if misses else (reasons[-1] if reasons else "no configuration")


def _aggregated(g, par, moe, hi, tpot_fn, pre, cost, w: Workload, price) -> tuple[FleetRow | None, str | None]:
    """Each replica also runs its requests' prefills: per osl tokens of each of its b users, b prompts' prefill
    (`cost(rate)` each, batched as the arrival rate allows: estimate/replica.prefill_cost_s) stall every user, so a
    user sees TPOT(b) + (b - 1) x cost / osl per token (the others'). A new prompt's first token:
    estimate/replica.first_token_s at the replica's arrival rate (the module's docstring has the forms)."""
    if w.ttft_s is not None and pre > w.ttft_s:
        return None, _miss(f"TTFT {pre:.2f} s for {w.isl:,} tokens exceeds the {w.ttft_s:g} s target", pre, w.ttft_s)
    rate = lambda b: b / (pre + w.osl * tpot_fn(b))  # noqa: E731  b users' arrival rate at the replica
    # the other users' prompts stall a user's answer (its own came before its first token); each batch's figures
    # worked out once (the searches below ask for the same batches again and again)
    eff = functools.cache(lambda b: tpot_fn(b) + (b - 1) * cost(rate(b), tpot_fn(b)) / w.osl)
    ttft = functools.cache(lambda b: first_token_s(b, tpot_fn, cost, rate(b), w.osl, w.prefill_cs2))
    # (and without a --ttft target, a batch whose users' prompts the replica keeps up with: past it the queue of
    # prompts grows without end, an infinite first token)
    b = _largest_batch(lambda b: (w.tpot_s is None or eff(b) <= w.tpot_s)
                       and (ttft(b) <= w.ttft_s if w.ttft_s is not None else math.isfinite(ttft(b))), hi)
    if b is None:  # at batch 1 one target or both fail: say each, and the worse is how far it misses
        words, ratio = [], 0.0
        if w.tpot_s is not None and eff(1) > w.tpot_s:
            words.append(f"TPOT {eff(1) * 1000:.1f} ms at batch 1 exceeds the {w.tpot_s * 1000:.3g} ms target")
            ratio = eff(1) / w.tpot_s
        if w.ttft_s is not None and ttft(1) > w.ttft_s:
            words.append(f"TTFT {ttft(1):.2f} s at batch 1 (prefill and its queue) exceeds the {w.ttft_s:g} s target")
            ratio = max(ratio, ttft(1) / w.ttft_s)
        return None, _miss("; ".join(words), ratio, 1.0)
    request_s = functools.cache(lambda b: ttft(b) + w.osl * eff(b))
    cap = b  # the most a replica runs at once within the targets: its --max-num-seqs
    b = _batch_for_rate(b, w.rate, request_s)
    tpot, first = eff(b), ttft(b)
    users = w.users if w.users is not None else math.ceil(w.rate * (first + w.osl * tpot))
    replicas = max(1, math.ceil(users / b))
    # the fewest replicas are sized at b; each then runs its share of the users, and a user sees that batch (with
    # --rate, the fewer requests a replica's share of the rate keeps in flight at that faster step: Little's law)
    run = _batch_for_rate(max(1, math.ceil(users / replicas)), w.rate and w.rate / replicas, request_s)
    if w.rate is not None:  # Poisson arrivals: a request waits for one of the cap's slots (admission_wait_s)
        # within --ttft, or without a target within the prompt's own first token
        replicas, run = _admitting(replicas, run, cap, users, w, request_s,
                                   lambda b: (w.ttft_s - ttft(b)) if w.ttft_s is not None else ttft(b))
    tpot, first = eff(run), ttft(run) + admission_wait_s(w, replicas, run, cap, request_s)
    forward = cost.alone() if run == 1 else cost.forward_s(rate(run), tpot_fn(run), run)  # as first_token_s
    row = _row(g, par, moe, "aggregated", replicas, run, served_tok_s(w, users, first, tpot), tpot, first, price,
               wait=first - forward)
    return (replace(row, max_batch=cap) if w.rate is not None else row), None


def admission_wait_s(w: Workload, replicas: int, run: int, cap: int, request_s) -> float:
    """Under --rate (Poisson arrivals), the mean wait of a request for a free slot of its replica's `cap` (the
    engine's --max-num-seqs), M/G/c at the replica's share of the rate lam (Allen-Cunneen, estimate/queueing.py; the
    spread the answers' lengths'): every slot is taken with Erlang C's probability at the mean occupancy, lam x a
    request's life at the mean batch `run`; while they are, the batch is the cap and slots free at cap / its life,
    so the wait is C / (cap / life(cap) - lam) x (1 + cs2) / 2. (A life at the mean batch throughout, M/G/c's own
    form, fell 22-44% short of the replay on four rows; at the cap throughout, 41-327% over.) A closed loop of
    --users never holds more than its users: none."""
    if w.rate is None:
        return 0.0
    rate = w.rate / replicas
    busy = erlang_c(cap, rate * request_s(run))  # every slot taken, the mean batch's life its service
    drain = cap / request_s(cap) - rate  # while they are, slots free at the full batch's pace
    if busy <= 0:
        return 0.0
    return math.inf if drain <= 0 else 0.5 * (1 + w.life_cs2) * busy / drain


def _admitting(workers: int, run: int, cap: int, busy: int, w: Workload, service_s, allowed_s) -> tuple[int, int]:
    """The fewest workers, from `workers`, whose wait for one of a worker's `cap` slots (admission_wait_s: their share
    of --rate, `service_s(b)` a request's stay) is within `allowed_s(run)`, and the mean batch each then runs (their
    share of the `busy` requests in flight). The wait falls as workers are added (each takes less of the rate, and
    its batch shrinks)."""
    def batch(n: int) -> int:  # the mean batch n workers run
        return _batch_for_rate(max(1, math.ceil(busy / n)), w.rate / n, service_s)

    def within(n: int, b: int) -> bool:
        return admission_wait_s(w, n, b, cap, service_s) <= allowed_s(b)

    if within(workers, run):
        return workers, run
    n = _fewest(workers + 1, lambda n: within(n, batch(n)))
    return n, batch(n)


def _fewest(n: int, ok) -> int:
    """The fewest workers from `n` with ok (false up to some count, true from it on, as a wait that falls as workers
    are added): a step that doubles until ok holds, then halves back. One worker a step took 10,000 steps, seconds,
    short of a fleet of 10^8 replicas (10^9 requests/s)."""
    if ok(n):
        return n
    lo, step = n, 1  # lo: a count without ok
    while not ok(lo + step):
        lo, step = lo + step, 2 * step
        if step > 1 << 62:  # never (not reached: with workers enough a wait goes to 0)
            break
    hi = lo + step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def served_tok_s(w: Workload, users: int, ttft_s: float, tpot_s: float) -> float:
    """Output tokens a second the fleet serves: the offered load with --rate (rate x osl: the replicas have room
    for it, not more work); with --users, each user's request every TTFT + osl x TPOT (Little's law), osl tokens
    each."""
    if w.rate is not None:
        return w.rate * w.osl
    return users * w.osl / (ttft_s + w.osl * tpot_s)


def _disaggregated(g, par, moe, hi, tpot_fn, pre, cost, w: Workload, price, plan) -> tuple[FleetRow | None,
                                                                                               str | None]:
    """x prefill workers, y decode workers of tp cards each; the cache crosses the node link once. The prompts
    queue for the x prefill workers at the request rate, each worker's forward taking the prompts waiting
    (estimate/replica.pool_first_token_s): x is the fewest that keep the first token within --ttft, or without a
    target, that keep the wait within one prefill."""
    kv_move_s = w.isl * (plan.kv_card or plan.kv).bytes_per_token / (w.node_link_gb_s * 1e9)
    pool = cost.prefill_only()  # prefill workers batch only the prompts waiting, whatever the engine
    base = pool_idle_s(pool) + kv_move_s  # the first token at an idle pool: the prompt alone (its chunks) and the move
    if w.ttft_s is not None and base >= w.ttft_s:
        return None, _miss(f"TTFT {base:.2f} s (prefill and moving the cache) exceeds the {w.ttft_s:g} s target",
                           base, w.ttft_s)
    b = _largest_batch(lambda b: w.tpot_s is None or tpot_fn(b) <= w.tpot_s, hi)
    if b is None:
        return None, _miss(f"TPOT {tpot_fn(1) * 1000:.1f} ms at batch 1 exceeds the {w.tpot_s * 1000:.3g} ms target",
                           tpot_fn(1), w.tpot_s)
    request_s = lambda b: base + w.osl * tpot_fn(b)  # noqa: E731
    decode_s = lambda b: w.osl * tpot_fn(b)  # noqa: E731  a request's stay on a decode worker
    cap = b  # the most a decode worker runs at once within the target: its --max-num-seqs
    b = _batch_for_rate(b, w.rate, decode_s)
    users = w.users if w.users is not None else math.ceil(w.rate * request_s(b))
    # the requests decoding at a time (Little's law over a request's life, its prefill and the move of its cache
    # spent on the other workers): a user whose prompt is prefilling holds no decode slot
    busy = (math.ceil(w.users * decode_s(b) / request_s(b)) if w.users is not None
            else math.ceil(w.rate * decode_s(b)))
    y = max(1, math.ceil(busy / b))  # the fewest decode workers, sized at b
    # each runs its share of them (with --rate, what its share of the rate keeps in flight)
    run = _batch_for_rate(max(1, math.ceil(busy / y)), w.rate and w.rate / y, decode_s)
    if w.rate is not None:  # Poisson arrivals from the prefill workers: a request waits for a decode slot
        # the wait spread over the answer's tokens within --tpot, or without a target within one token's time
        y, run = _admitting(y, run, cap, busy, w, decode_s, lambda b: (w.tpot_s - tpot_fn(b)) * max(1, w.osl - 1)
                            if w.tpot_s is not None else tpot_fn(b))
    # a wait for a decode slot falls between the first token (the prefill worker's) and the second: its share a token
    tpot = tpot_fn(run) + (admission_wait_s(w, y, run, cap, decode_s) / max(1, w.osl - 1) if w.rate else 0.0)
    rate = w.rate if w.rate is not None else w.users / (base + w.osl * tpot)
    limit = w.ttft_s if w.ttft_s is not None else base + pre
    # a prompt's first token: alone, or after a wait for a worker, in a forward with the prompts that arrived meanwhile;
    # it falls to `base` (below the limit) as workers are added
    first = lambda x: pool_first_token_s(pool, rate, x, w.prefill_cs2) + kv_move_s  # noqa: E731
    load = lambda x: rate * pool(rate / x) / x  # noqa: E731  the share of what x workers serve
    # from the fewest that keep up (utilization below 1), at most PREFILL_LOAD_MAX loaded
    x = _fewest(math.floor(rate * pool(rate)) + 1, lambda x: first(x) <= limit and load(x) <= PREFILL_LOAD_MAX)
    ttft = first(x)
    row = _row(g, par, moe, "disaggregated", x + y, run, served_tok_s(w, users, ttft, tpot), tpot, ttft, price, x, y,
               ttft - base)
    return replace(row, prefill_load=load(x), max_batch=cap if w.rate is not None else None), None


def runtime_refusal(runtime: str, runtimes: dict, g: GpuSpec) -> str | None:
    """Why `runtime` gets no row on card `g` whatever the workload, None where it can: no fitted constants for
    the card's backend, or an architecture the engine's documentation leaves out (runtimes.architecture_refusal)."""
    from llmsize.estimate.runtimes import INTEL_VULKAN_WHY, backend, constants, intel_vulkan

    spec, be = runtimes.get(runtime), backend(g)
    if runtime == "llamacpp" and intel_vulkan(g, be):
        return INTEL_VULKAN_WHY
    if spec is None or not be or constants(spec, be, g) is None:
        return (f"{runtime} does not run on Apple cards: size them with --runtime llamacpp or mlx"
                if g.vendor == "Apple" and runtime not in ("llamacpp", "mlx")
                else f"no {runtime} constants for {g.vendor} cards")
    return architecture_refusal(runtime, g)  # the engine's documentation leaves this card's architecture out


def fleet_rows(model: ModelSpec, gpus: list[GpuSpec], w: Workload, runtime: str, runtimes: dict,
               hourly: dict[str, float] | None = None, kv_dtype: str | None = "bf16",
               bought: dict[str, float] | None = None) -> list[FleetRow]:
    """Per card, the cheapest configuration that serves `w` (an hour's cost with `hourly` prices, else the fewest
    cards), the other serving mode beside it; `bought` (a card's price) adds what the row's cards cost to buy;
    kv_dtype None: each card's cache in the runtime's own dtype there (the row's kv_dtype says which)."""
    from llmsize.estimate.expected import RECURRENT_PREFILL_RANGE, iquant_decode_floor, recurrent_prefill_key
    from llmsize.estimate.plan import make_plan
    from llmsize.estimate.runtimes import backend, constants
    from llmsize.estimate.step_inputs import has_recurrent_layers

    w.check(model)
    from llmsize.estimate.plan import resolve_format
    from llmsize.estimate.weights import weight_bytes

    weights_total = weight_bytes(model, *resolve_format(model, w.quant, None)).bytes_total
    spec = runtimes.get(runtime)
    moe = any(g.mlp is not None and g.mlp.kind == "moe" for g in model.layer_groups)
    recurrent = has_recurrent_layers(model)
    rows = []
    for g in gpus:
        be = backend(g)
        why = runtime_refusal(runtime, runtimes, g)
        c = constants(spec, be, g) if why is None else None
        hybrid = RECURRENT_PREFILL_RANGE[recurrent_prefill_key(runtime, be)] if recurrent else None
        price = (hourly or {}).get(g.id)
        best, reasons, best_of = None, [], {}
        if why is not None:
            reasons.append(why)
        # stages a node each: one more node a stage is tried while the last one lowered the fleet's cards (or
        # cost): a model that one node barely holds leaves its cache little room, and two nodes a replica can
        # serve its users on fewer cards in all (a 70B on 24 GB cards, DeepSeek-V3 on 48 GB ones)
        node_before, node_fitted = None, False
        for tp, pp, dp in _configs(c is not None, model, w.spec, runtime):
            if pp > 1 and w.spec is not None and runtime in SPEC_PIPELINE_REFUSAL:  # the engine would not start it
                reasons.append(f"tp {tp} x pp {pp}: --spec over pipeline stages: {SPEC_PIPELINE_REFUSAL[runtime]}")
                continue
            if stage_nodes(tp, pp):
                if node_fitted and (best and best[0]) == node_before:
                    break
                node_before, node_fitted = best and best[0], False
            if (tp > 1 or pp > 1 or dp > 1) and card_link(g) is None:
                continue  # one card only (an SoC, a board without NVLink or PCIe peers): the reason is tp 1's
            label = f"dep {dp}" if dp > 1 else f"tp {tp}" + (f" x pp {pp}" if pp > 1 else "")
            if weights_total / (tp * pp * dp) > g.memory_bytes:  # not even a perfect split fits: no plan to make
                reasons.append(f"{label}: the weights alone ({weights_total / (tp * pp * dp) / 1e9:,.1f} GB a card) "
                               f"exceed its {g.memory_bytes / 1e9:,.1f} GB")
                continue
            inputs = replica_inputs(runtime, w, tp, pp, kv_dtype)
            try:
                plan = make_plan(expert_shard(model, dp) if dp > 1 else model, g, inputs, search_fit=False)
            except LlmsizeError as e:
                reasons.append(f"{label}: {e.message}")
                continue
            draft_plan = None
            if w.spec is not None and w.spec.draft is not None:
                try:
                    draft_plan = make_plan(w.spec.draft, g, inputs, search_fit=False)  # the same split and cache
                except LlmsizeError as e:
                    reasons.append(f"{label}: the draft model: {e.message}")
                    continue
            pool, _ = kv_pool_bytes(plan, runtime, w.longest_tokens())
            held = users_held(plan, w, runtime, draft_plan, pool) if plan.budget.weights_fit else 0
            limits = serving_defaults(runtime, g, held, w.isl, w.osl, pp, model=model)
            if limits.max_batch is not None:
                held = min(held, limits.max_batch)  # the engine's own cap on running requests (a card's, under DEP)
            held *= dp  # DEP: each card holds its own requests
            if w.users is not None:
                held = min(held, w.users)  # a replica never batches more users than there are
            if held < 1:
                reasons.append(f"{label}: the weights and one request's cache do not fit" + (
                    f" (a p99 request, {w.longest_tokens():,} tokens)" if w.spread else ""))
                continue
            node_fitted = True
            try:
                tpot_fn, pre, cost = replica_timing(plan, runtime, c, limits.prefill_tokens, w.spec, draft_plan, dp)
            except LlmsizeError as e:
                reasons.append(f"{label}: {e.message}")
                continue
            if pre is None or cost is None:
                reasons.append(f"{label}: {g.id} has no dense TFLOPS figure in the catalog, so no prompt can be "
                               "costed" if not plan.peak.flop_per_s else
                               f"{label}: no prefill constants for {runtime} on this card")
                continue
            cost = cost.scaled(1 - w.shared_prefix)
            pre = cost.alone()  # the new tokens' compute and all-reduces; the forward's fixed costs whole
            par = (tp, pp, dp)
            admitted = admitted_batch(runtime, limits.prefill_tokens, w, dp * pp)
            modes = [_aggregated(g, par, moe, min(held, admitted), tpot_fn, pre, cost, w, price)]
            if runtime in DISAGGREGATING:
                refused = disaggregation_refused(runtime, pp)
                if refused:
                    reasons.append(f"{label}: disaggregated: {refused}")
                else:
                    modes.append(_disaggregated(g, par, moe, held, tpot_fn, pre, cost, w, price, plan))
            for row, why in modes:
                if row is None:
                    reasons.append(_miss(f"{label}: {why}", why.ratio, 1.0) if isinstance(why, Miss) else
                                   f"{label}: {why}")
                    continue
                row = replace(_with_bands(row, c, hybrid, iquant_decode_floor(plan, runtime, c, be)),
                              gpu_util=given_util(plan), kv_dtype=plan.inputs.kv_dtype)
                key = (row.cost_per_hour if price else row.cards_total, row.mode != "aggregated", tp * pp * dp)
                if best is None or key < best[0]:
                    best = (key, row, plan)
                if best_of.get(row.mode) is None or key < best_of[row.mode][0]:
                    best_of[row.mode] = (key, row, plan)
        if best is not None:
            other = next((r for m, (_, r, _) in best_of.items() if m != best[1].mode), None)
            row = best[1]
            if w.isl_lengths is not None and not w.isl_lengths.fixed:
                row = _with_p95(row, model, g, w, runtime, c, kv_dtype)
                other = other and _with_p95(other, model, g, w, runtime, c, kv_dtype)
            buy = (bought or {}).get(g.id)
            if buy is not None:
                other = other and replace(other, cards_cost=other.cards_total * buy)
            rows.append(replace(row, other=other, caveats=card_caveats(g, best[2], row, runtime, w),
                                cards_cost=None if buy is None else row.cards_total * buy))
        else:
            rows.append(FleetRow(g.id, "aggregated", None, None, None, None, None, None, None, None, None, None, None, None,
                                 False, None, None, None, None, _closest(reasons)))
    rows.sort(key=lambda r: (not r.meets_slo, r.cost_per_hour if r.cost_per_hour is not None else math.inf,
                             r.cards_cost if r.cards_cost is not None else math.inf,
                             r.cards_total if r.cards_total is not None else math.inf, r.card))
    return rows


@dataclass(frozen=True)
class ParetoCurve:
    card: str
    points: list[tuple[float, float]]  # (tok/s per user, output tok/s per GPU), Pareto-optimal
    mode: str = "aggregated"  # or "disaggregated": decode workers with the prefill workers their requests need

    @property
    def label(self) -> str:
        return self.card if self.mode == "aggregated" else f"{self.card} P/D"


def disaggregated_point(b: int, tpot_s: float, cards: int, osl: int, cost) -> tuple[float, float]:
    """A decode worker of `cards` cards at batch b, with the prefill capacity its requests need: it finishes
    b / (osl x TPOT(b)) requests a second, each a prompt that takes a prefill worker of as many cards cost(rate)
    seconds (the prompts it batches at that rate), so it needs rate x cost(rate) prefill workers, a fraction
    (rate-matched, as AIConfigurator sizes x:y). Returns (tok/s per user, output tok/s per GPU)."""
    rate = b / (osl * tpot_s)
    return 1 / tpot_s, b / tpot_s / (cards * (1 + rate * cost(rate)))


def pareto_curves(model: ModelSpec, gpus: list[GpuSpec], w: Workload, runtime: str, runtimes: dict,
                  kv_dtype: str | None = "bf16",
                  batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
                  ) -> list[ParetoCurve]:
    """Per card, what each replica of each tp (for a MoE, each DEP n; and the pipelines fleet_rows tries: two stages
    within a node, stages a node each) gives at a batch b (aggregated: a user sees
    TPOT_agg(b), the replica's tp x pp x dp cards share b / TPOT_agg(b)), reduced to the points no other point of
    the card beats on both axes; for an engine that disaggregates, a second curve of decode workers with the
    prefill workers they need (disaggregated_point)."""
    from llmsize.estimate.plan import make_plan
    from llmsize.estimate.runtimes import backend, constants

    spec = runtimes.get(runtime)
    w = replace(w, spec=None)  # the curves are of plain decoding
    out = []
    for g in gpus:
        be = backend(g)
        c = constants(spec, be, g) if spec is not None and be else None
        pts, disagg = [], []
        for tp, pp, dp in (_configs(c is not None, model, runtime=runtime) if card_link(g) is not None
                           else [(1, 1, 1)] * bool(c)):
            try:
                plan = make_plan(expert_shard(model, dp) if dp > 1 else model, g,
                                 replica_inputs(runtime, w, tp, pp, kv_dtype), search_fit=False)
            except LlmsizeError:
                continue
            held = users_held(plan, w, runtime, None, kv_pool_bytes(plan, runtime, w.longest_tokens())[0]) \
                if plan.budget.weights_fit else 0
            if held < 1:
                continue
            limits = serving_defaults(runtime, g, held, w.isl, w.osl, pp, model=model)
            hi = min(min(held, limits.max_batch or held) * dp,
                     admitted_batch(runtime, limits.prefill_tokens, w, dp * pp))
            tpot_fn, pre, cost = replica_timing(plan, runtime, c, limits.prefill_tokens, dp=dp)
            if pre is None or cost is None:
                continue
            for b in sorted({min(b, hi) for b in batches}):
                t = tpot_fn(b) + b * cost(b / (pre + w.osl * tpot_fn(b)), tpot_fn(b)) / w.osl  # TPOT_agg(b)
                pts.append((1 / t, b / t / (tp * pp * dp)))
                if not disaggregation_refused(runtime, pp):
                    disagg.append(disaggregated_point(b, tpot_fn(b), tp * pp * dp, w.osl, cost.prefill_only()))
        for mode, points in (("aggregated", pts), ("disaggregated", disagg)):
            front = [p for p in points if not any(q[0] >= p[0] and q[1] >= p[1] and q != p for q in points)]
            if front:
                out.append(ParetoCurve(g.id, sorted(set(front)), mode))
    return out


CHART_CARDS = 4  # the cards a chart draws, best first: more curves than a reader (or a terminal's markers) tells apart


def charted_cards(rows: list[FleetRow], gpus: list[GpuSpec]) -> tuple[list[GpuSpec], int]:
    """The (at most CHART_CARDS) best cards that serve the workload, in the rows' order, and how many serve."""
    by_id = {g.id: g for g in gpus}
    served = [by_id[r.card] for r in rows if r.meets_slo and r.card in by_id]
    return served[:CHART_CARDS], len(served)


def fleet_charts(model: ModelSpec, gpus: list[GpuSpec], rows: list[FleetRow], w: Workload, runtime: str,
                 runtimes: dict, kv_dtype: str | None = "bf16"):
    """The data of fleet's report charts for the best cards that serve the workload (charted_cards): their Pareto
    curves, and their rooflines at the row's tp (a DEP row: one card's share of the experts) with the model's
    decode and prefill points."""
    from llmsize.estimate.charts import rooflines
    from llmsize.estimate.plan import PlanInputs

    cards, _ = charted_cards(rows, gpus)
    row_of = {r.card: r for r in rows}
    served = [row_of[g.id] for g in cards]
    by_id = {g.id: g for g in cards}
    roofs = []
    for r in served:
        card_model = expert_shard(model, r.dp) if (r.dp or 1) > 1 else model
        roofs += rooflines(card_model, [(by_id[r.card], PlanInputs(context_tokens=w.isl + w.osl, prompt_tokens=w.isl,
                                                                   tp=r.tp, kv_dtype=r.kv_dtype or kv_dtype))])
    curves = [c for g in cards  # each card's curve with its row's cache
              for c in pareto_curves(model, [g], w, runtime, runtimes, row_of[g.id].kv_dtype or kv_dtype)]
    return curves, roofs
