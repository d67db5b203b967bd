"""One serving replica of a fleet (estimate/fleet.py has the formulas): the cache memory each card has (the
engine's own ledger), how many requests it holds, its TPOT at a batch, and what a prompt's prefill costs it,
alone and batched with others."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from llmsize.errors import LlmsizeError
from llmsize.estimate.lengths import Z95
from llmsize.estimate.memo import by_identity
from llmsize.estimate.queueing import erlang_c, wait_mgc_s
from llmsize.estimate.serving_defaults import held_context_tokens
from llmsize.estimate.speculative import Spec, draft_memory, mtp_step_s, time_per_token_s, verify_step
from llmsize.estimate.speed import prefill_comm_s, prefill_parts_s
from llmsize.estimate.workload import Workload


def kv_pool_bytes(plan, runtime: str, max_model_len: int, engine_version: str = "v1") -> tuple[float, str]:
    """The cache memory of one card of a replica, as the engine itself counts it (estimate/engines.py: vLLM's,
    SGLang's and TensorRT-LLM's ledgers at their default memory fractions, charging the activations, CUDA graphs and
    non-torch memory of a max_model_len engine), else the plan's budget (utilization x memory - weights -
    overhead). Where the engine's requests, not its bytes, bind (EngineLedger.requests_bind), the requests it runs at
    once in the plan's bytes of a request, so that users_held counts what the engine admits: vLLM's (requests_at_once
    of max_model_len: its sliding groups' window and in-flight reserve, its Mamba groups' state pages) x the plan's
    cache of such a request; SGLang's, its full layers' tokens over the plan's context, and no more than its states'
    pool holds requests' states, x the plan's request."""
    from llmsize.estimate.engines import (
        ENGINES,
        EngineInputs,
        drafts_with_model,
        engine_ledger,
        mtp_layers_of,
        share_inputs,
        spec_tokens_of,
    )

    if runtime in ENGINES:
        try:
            model = plan.card_model or plan.model
            ledger = engine_ledger(model, plan.gpu, (plan.weights_card or plan.weights).bytes_total,
                                   EngineInputs(engine=runtime, tp=plan.inputs.tp, kv_dtype=plan.inputs.kv_dtype,
                                                **share_inputs(plan),
                                                weight_format=plan.fmt.id, max_model_len=max_model_len,
                                                mtp_layers=mtp_layers_of(plan), spec_tokens=spec_tokens_of(plan),
                                                pp=plan.inputs.pp,
                                                draft_model=drafts_with_model(plan), version=engine_version))
            if ledger.requests_bind and runtime == "sglang":
                kv = plan.kv_card or plan.kv
                held = ledger.kv_cache_tokens / plan.inputs.context_tokens
                if ledger.state_slots is not None:
                    held = min(held, ledger.state_slots)
                return max(0.0, held * kv.bytes_per_sequence), f"{ledger.name} ledger, in requests"
            if ledger.requests_bind:
                from llmsize.estimate.kv import kv_bytes

                one = kv_bytes(model, max_model_len, plan.inputs.kv_dtype).bytes_per_sequence
                return max(0.0, ledger.requests_at_once * one), f"{ledger.name} ledger, in requests"
            return max(0.0, ledger.kv_cache_bytes), f"{ledger.name} ledger"
        except LlmsizeError:
            pass
    return plan.budget.kv_budget_bytes, "plan budget"


def users_held(plan, w: Workload, runtime: str, draft_plan=None, pool: float | None = None) -> int:
    """Users a replica's cache holds (pool: one card's cache memory, default the plan's budget); with a shared
    prefix, its cache once and each user's own tokens; with a draft model, its weights and each user's draft cache
    too. With length distributions, each request's cache B varies:
    b requests fit when their total stays within the pool 95 times in 100 (normal approximation of the sum),
        b E[B] + 1.645 sqrt(b) sd[B] <= pool,
    E and sd over the distributions' points (prompt and answer slice means paired in a scrambled order, as
    independent), and only if the p99 request's cache fits on its own (else 0)."""
    pool = plan.budget.kv_budget_bytes if pool is None else pool
    if not w.shared_prefix and w.spec is None and not w.spread:
        per = (plan.kv_card or plan.kv).bytes_per_sequence
        return int(pool // per) if pool > 0 and per > 0 else 0
    from llmsize.estimate.kv import kv_bytes

    model, dtype = plan.card_model or plan.model, plan.inputs.kv_dtype
    cache: dict[int, float] = {}

    def seq_bytes(tokens: int) -> float:
        if tokens not in cache:
            cache[tokens] = kv_bytes(model, max(1, tokens), dtype).bytes_per_sequence
        return cache[tokens]

    isl_d, osl_d = w.lengths()
    shared = int(w.isl * w.shared_prefix)
    n = len(osl_d.points)
    answers = [osl_d.points[(7 * i) % n] for i in range(n)]  # 7 is prime to the 16 points: every answer once
    own = [seq_bytes(held_context_tokens(runtime, i, o) - shared) for i, o in zip(isl_d.points, answers)]
    prefix = seq_bytes(shared) if shared else 0.0
    left = pool - prefix
    extra = 0.0
    if w.spec is not None:
        weights, extra = draft_memory(plan, w.spec, draft_plan)
        left -= weights
    if left <= 0 or seq_bytes(w.longest_tokens() - shared) + extra > left:
        return 0
    mean = sum(own) / len(own) + extra
    sd = math.sqrt(sum((x + extra - mean) ** 2 for x in own) / len(own))
    if sd == 0:
        return int(left // mean)
    root = (-Z95 * sd + math.sqrt((Z95 * sd) ** 2 + 4 * mean * left)) / (2 * mean)  # sqrt(b) at equality
    return int(root * root)


PREFILL_FIRST = ("sglang",)  # runtimes whose scheduler runs prefill forwards apart from decode steps


def replica_timing(plan, runtime: str, constants, prefill_tokens: int, spec: Spec | None = None, draft_plan=None,
                   dp: int = 1):
    """(TPOT at batch b as a function, the prefill time of the prompt alone, the replica's prefill under load:
    PrefillCost), the last two None without prefill constants. dp > 1: a DEP replica of dp cards
    (estimate/expert_parallel.py), `plan` one card of it (expert_shard, tp 1): a batch of b is ceil(b / dp) a card,
    each step pays the all-to-alls, and the dp cards prefill their own prompts side by side.

    A plan of pp > 1 pipeline stages: the engines keep pp micro-batches in flight, each stage working on a
    different one (vLLM: vllm/config/vllm.py, VllmConfig.max_concurrent_batches, "PP requires PP-size concurrent
    batches to fill the pipeline"; TensorRT-LLM: tensorrt_llm/_torch/pyexecutor/py_executor.py, num_micro_batches =
    pp_size; SGLang: scheduler's pp_max_micro_batch_size = max_running_requests // pp_size). The b users split
    into pp micro-batches of ceil(b / pp); each crosses every stage once a token, so
        TPOT(b) = the step at batch ceil(b / pp) through all stages in turn
    (the plan's step: each card's weights, all stages one after the other, and the hand-offs): the replica yields
    b / step(ceil(b / pp)) where one batch in flight would yield b / step(b), and each card holds the cache of its
    stage's layers only, for all b users. A prompt likewise crosses every stage (its TTFT
    alone is the whole prefill) while the stages work on other prompts: it costs the replica 1 / pp of that."""
    from dataclasses import replace as _replace

    from llmsize.estimate.speed import decode_step_time_s, link_kind, prefill_time_s
    from llmsize.estimate.step_inputs import prefill_inputs, step_inputs

    exchange = None
    if dp > 1:
        from llmsize.estimate.expert_parallel import all_to_all_bytes_per_card, all_to_alls_per_step
        from llmsize.estimate.parallel import card_link

        link = card_link(plan.gpu)
        if link is None:
            raise LlmsizeError(f"{plan.gpu.name} has no card-to-card link for expert parallel",
                               "Pick a card with NVLink or PCIe.")
        model, kind = plan.card_model or plan.model, link_kind(link.kind, False)
        exchange = lambda b: dict(collectives=all_to_alls_per_step(model), link=kind,  # noqa: E731
                                  comm_time_s=all_to_all_bytes_per_card(model, b, dp) / (link.gb_s * 1e9))

    def step_s(p, b: int) -> float:
        if exchange is None or p is not plan:
            return decode_step_time_s(step_inputs(p, p.decode_model.step(b), runtime), constants)
        per_card = -(-b // dp)
        x = step_inputs(p, p.decode_model.step(per_card), runtime)
        return decode_step_time_s(_replace(x, **exchange(per_card)), constants)

    memo: dict[int, float] = {}
    pp = plan.inputs.pp

    def tpot(b: int) -> float:
        m = -(-b // pp)  # one micro-batch's step through all stages
        if m not in memo:
            memo[m] = _tpot(m)
        return memo[m]

    def _tpot(b: int) -> float:
        if spec is None:
            return step_s(plan, b)
        verify = verify_step(plan.decode_model, b, spec.k)
        t = decode_step_time_s(step_inputs(plan, verify, runtime), constants)
        draft = (step_s(draft_plan, b) if draft_plan is not None
                 else mtp_step_s(step_s(plan, b), plan.decode_model.model, plan.weights, plan.fmt))
        return time_per_token_s(t, draft, spec)

    pre_in = prefill_inputs(plan, runtime)
    alone = prefill_time_s(pre_in, constants)
    if alone is None:
        return tpot, None, None
    most = max(1, prefill_tokens // max(1, plan.prompt_tokens))
    return tpot, alone, PrefillCost(pre_in, constants, most, runtime in PREFILL_FIRST, cards=dp * pp,
                                    prompt_tokens=max(1, plan.prompt_tokens), step_tokens=prefill_tokens)


def replica_engine(plan, runtime: str, constants, prefill_tokens: int):
    """The replica as estimate/serving_replay.py replays it: (Forward, scheduler policy), its decode steps and
    prefill costed as replica_timing costs them (serving_prefill_parts: the all-reduces' bytes with the tokens a
    forward holds); None without prefill constants."""
    from llmsize.estimate.serving_replay import Forward

    tpot_fn, _, cost = replica_timing(plan, runtime, constants, prefill_tokens)
    if cost is None:
        return None
    compute, weights, fixed = cost.parts()
    isl = max(1, plan.prompt_tokens)
    forward = Forward(tpot_fn, compute / isl, weights, fixed, cost(math.inf) / isl)
    return forward, "prefill_first" if runtime in PREFILL_FIRST else "mixed"


@dataclass(frozen=True)
class PrefillCost:
    """A replica's prefill under load: called with the prompts' arrival rate (requests/s), what one prompt costs
    the replica (prefill_cost_s); forward_s, how long the forward that carries a prompt runs until its first token.
    `factor` scales the prompt's compute and all-reduces, not a forward's fixed costs (the part of each prompt not
    served from a shared prefix); `cards` > 1 (a DEP replica's
    cards, a pipeline's micro-batches in flight: dp x pp) splits the prompts among lanes that prefill side by side:
    each sees rate / cards, and a prompt costs the replica 1 / cards of what it costs its lane."""

    x: object  # speed.PrefillInputs
    c: object  # speed.Constants
    most: int  # prompts one forward holds: the engine's chunk // isl, at least 1
    apart: bool  # prefill forwards run apart from decode steps (SGLang)
    factor: float = 1.0
    cards: int = 1
    prompt_tokens: int = 1  # the prompt's length
    step_tokens: int = 0  # the tokens a forward takes (the engine's token budget); 0: the whole prompt in one
    pool: bool = False  # a disaggregated prefill worker's (prefill_only)

    def chunks(self, decoding: int = 0) -> int:
        """The forwards a prompt is spread over where prompts ride in decode steps: the step's token budget less
        the decoding requests' tokens (at least one) a forward."""
        if self.apart or self.step_tokens <= 0:
            return 1
        return math.ceil(max(1, round(self.prompt_tokens * self.factor)) / max(1, self.step_tokens - decoding))

    def parts(self) -> tuple[float, float, float]:
        """(the prompt's compute and all-reduces at `factor` of its tokens, the weights' read, the forward's fixed
        costs): serving_prefill_parts, the part of the prompt not served from a shared prefix."""
        compute, weights, fixed = serving_prefill_parts(self.x, self.c)
        return self.factor * compute, weights, fixed

    def alone(self) -> float:
        """The prompt's forward alone: max(compute, weights) + fixed (seconds)."""
        compute, weights, fixed = self.parts()
        return max(compute, weights) + fixed

    def __call__(self, rate_per_s: float, step_s: float = 0.0) -> float:
        if self.pool and self.most <= 1 and self.step_tokens > 0:
            # a prefill worker's prompt over its budget: n = prompt / budget forwards, each with the weights' read
            # and the fixed costs (the last shared with the next prompt's first chunk)
            n = max(1.0, self.prompt_tokens * self.factor / self.step_tokens)
            compute, weights, fixed = self.parts()
            return (max(compute, n * weights) + n * fixed) / self.cards
        return prefill_cost_s(self.x, self.c, self.most, rate_per_s / self.cards, self.apart, step_s,
                              self.factor) / self.cards

    def forward_s(self, rate_per_s: float, step_s: float = 0.0, decoding: int = 0) -> float:
        """The forwards that carry the prompt to its first token: SGLang's prefill forward (of the prompts that
        arrived together); where prompts ride in decode steps (step_s > 0, `decoding` requests a step), the steps of
        its chunks, each a decode step plus its share of the prompt; else the prompt alone."""
        if not self.apart:
            if step_s <= 0:
                return self.alone()
            lanes = self.cards
            return self.chunks(-(-decoding // lanes)) * step_s + self(rate_per_s, step_s) * lanes
        return max(self.alone(), self.prompts(rate_per_s, step_s) * self(rate_per_s, step_s) * self.cards)

    def prompts(self, rate_per_s: float, step_s: float = 0.0) -> float:
        if not self.apart:
            return float(self.most)
        compute, weights, fixed = self.parts()
        return prompts_per_forward(rate_per_s / self.cards, lambda k: max(k * compute, weights) + fixed, self.most,
                                   step_s)

    def scaled(self, factor: float) -> "PrefillCost":
        return replace(self, factor=self.factor * factor)

    def prefill_only(self) -> "PrefillCost":
        """A disaggregated prefill worker's: with no decode steps to ride in, whatever the engine, a forward holds
        the prompts that arrived while the last one ran (prompts_per_forward), under a light load one."""
        return replace(self, apart=True, pool=True)


def prompts_per_forward(rate_per_s: float, forward_s, most: int, step_s: float = 0.0) -> float:
    """Prompts one prefill forward takes at a steady Poisson arrival rate when prefill forwards run apart and come
    first (SGLang: after every forward the scheduler prefills whatever has arrived). The N prompts that arrived while
    the last forward ran, Poisson of mean m_F = rate x F(k), make the next forward when N >= 1; when none did,
    decode steps run until one ends with prompts waiting, m_d / (1 - e^-m_d) of them on average (m_d = rate x
    step_s, the decode step's length; 1 when steps are short). So
        k = m_F + e^-m_F x m_d / (1 - e^-m_d),   within [1, most]
    (most: the chunk's), found by iterating from k = 1 (F grows with k, so the sequence rises to the fixed point or
    to `most`). A replay of the scheduler (estimate/serving_replay.py) checks it (tests/test_serving_replay.py)."""
    m_d = rate_per_s * step_s
    after_steps = m_d / -math.expm1(-m_d) if m_d > 1e-12 else 1.0
    k = 1.0
    for _ in range(50):
        m_f = rate_per_s * forward_s(k)
        nxt = min(float(most), max(1.0, m_f + math.exp(-m_f) * after_steps))
        if abs(nxt - k) < 1e-6:
            break
        k = nxt
    return k


@by_identity(maxsize=256, objects=2)
def serving_prefill_parts(x, c) -> tuple[float, float, float] | None:
    """prefill_parts_s as a serving engine's forwards pay them: the tensor-parallel all-reduces' bytes
    (speed.prefill_comm_s) go with the prompt's tokens, beside its compute, for a forward of part of a prompt (a
    chunk, or the prompt less its cached prefix) moves that part's activations and k prompts in one forward move
    each their own; the rest of the fixed costs is the forward's, whatever it holds. None as prefill_parts_s."""
    parts = prefill_parts_s(x, c)
    if parts is None:
        return None
    compute, weights, fixed = parts
    comm = prefill_comm_s(x)
    return compute + comm, weights, fixed - comm


def prefill_cost_s(x, c, most: int, rate_per_s: float, apart: bool, step_s: float = 0.0,
                   factor: float = 1.0) -> float | None:
    """What one prompt costs a serving replica, prompts arriving at rate_per_s: k of them share a forward's weight
    read and fixed costs, max(compute, weights / k) + fixed / k (estimate/speed.prefill_time_s).
    Engines that mix prompt chunks into decode steps (vLLM, TensorRT-LLM) fill each step's token budget from the
    queue: k = `most` (the engine's chunk // isl, at least 1). Charging only the prompts' compute there, as if the
    decode step's read of the weights were shared, misses TensorRT-LLM's published max-throughput figures by more
    (median 19.9% and p90 57.9% against 18.1% and 49.9%, benchmarks/serving_throughput.py).
    SGLang runs prefill forwards apart (apart=True), and a forward takes the prompts that arrived while the last one
    ran or during the last decode step (prompts_per_forward; step_s the decode step): under a light load one prompt
    a forward, each paying the whole weight read and the fixed costs. The prompt's compute and all-reduces are
    serving_prefill_parts's, at `factor` of its tokens (the rest served from a shared prefix)."""
    parts = serving_prefill_parts(x, c)
    if parts is None:
        return None
    compute, weights, fixed = parts
    compute *= factor
    if not apart:
        return max(compute, weights / most) + fixed / most
    k = prompts_per_forward(rate_per_s, lambda k: max(k * compute, weights) + fixed, most, step_s)
    return max(compute, weights / k) + fixed / k


def first_token_s(b: int, tpot_fn, cost: "PrefillCost", rate_per_s: float, osl: int, cs2: float = 0.0) -> float:
    """TTFT in an aggregated replica of b users, prompts arriving as a Poisson stream at b / (T_prefill + osl x
    TPOT_agg(b)) (Little's law), cs2 the squared coefficient of variation of the prompts' cost.

    Where prefill forwards run apart (SGLang): the forward that carries the prompt (cost.forward_s), the wait for the
    prefills ahead (M/D/1, a prompt's cost each; M/G/1 with cs2), no more than the b - 1 other users' prompts (a
    closed loop of b users holds no more), and the rest of the decode step in progress when the prompt arrives (half
    a step on average). One user alone: its prompt's forward, no wait.

    Where prompts ride in decode steps (vLLM, TensorRT-LLM), a prompt waits for the step in progress to end, and
    the next step carries it with every prompt that arrived meanwhile (mixed_first_token_s)."""
    decode = tpot_fn(b) if b > 1 else 0.0  # one user: nothing else decodes while its prompt waits
    each = cost(rate_per_s, decode)
    # the replica's cycle: b prompts and osl steps for each of b users take osl x (TPOT(b) + b x each / osl), every
    # prompt counted (a user's own too, though it comes before its first token): b requests a cycle
    step = tpot_fn(b) + b * each / osl
    rate = b / (cost.alone() + osl * step)
    if not cost.apart and decode > 0:
        return mixed_first_token_s(decode, each, rate, cost, b, cs2)
    residual = decode / 2 if cost.apart else 0.0
    forward = cost.alone() if b == 1 else cost.forward_s(rate_per_s, decode)  # one user's prompt goes alone
    return forward + residual + min(wait_mgc_s(rate, each, 1, cs2), (b - 1) * each)


def mixed_first_token_s(decode_s: float, each_s: float, rate_per_s: float, cost: "PrefillCost", b: int,
                        cs2: float = 0.0) -> float:
    """TTFT where prompts ride in decode steps (vLLM V1, TensorRT-LLM in-flight batching): the scheduler fills each
    step with the decoding requests' tokens, then the waiting prompts' (estimate/serving_replay.py replays it). With
    the prompts' cost split among `cost.cards` lanes, a lane sees the rate lam = rate / lanes and a prompt costs its
    step m = each x lanes; d is the decode part of a step (the decode step at the lane's batch).

    A prompt that fits one step's token budget (one chunk): steps are S = d + m N, N the prompts that arrived during
    the step before (Poisson of mean lam S_prev; m^2 (1 + cs2) the mean square of a prompt's cost), so
        E[S] = d / (1 - lam m)  (about the replica's TPOT_agg),  Var S = lam E[S] m^2 (1 + cs2) / (1 - (lam m)^2).
    A Poisson arrival lands in a step picked by its length, waits out its rest, R = E[S^2] / (2 E[S]), then rides
    the next step with the others that arrived in the same step (Poisson of mean lam x 2R, and no more than the
    b - 1 other users):
        TTFT = R + d + m (1 + min(lam 2R, b - 1)).
    A prompt over the budget goes in n chunks, one a step, first come first served: its service is n d + m, the
    prompts ahead queue as M/D/1 (M/G/1 with cs2), and R is the rest of a step in progress, half a chunk step with
    probability lam (n d + m) (the share of time a prompt is chunked), else half a decode step.
    Units: seconds, requests/s."""
    lanes = cost.cards
    lam, m = rate_per_s / lanes, each_s * lanes
    chunks = cost.chunks(-(-b // lanes))
    if chunks == 1:
        rho = lam * m
        if rho >= 1:
            return math.inf
        mean_s = decode_s / (1 - rho)
        var = lam * mean_s * m * m * (1 + cs2) / (1 - rho * rho)
        rest = (mean_s * mean_s + var) / (2 * mean_s)
        return rest + decode_s + m * (1 + min(lam * 2 * rest, b - 1))
    service = chunks * decode_s + m
    busy = lam * service
    if busy >= 1:
        return math.inf
    rest = busy * (service / chunks) / 2 + (1 - busy) * decode_s / 2
    return rest + service + wait_mgc_s(lam, service, 1, cs2)


def pool_idle_s(cost: "PrefillCost") -> float:
    """A prompt's first token at a pool of prefill workers with one free (`cost` prefill-only): its forward alone,
    max(compute, weights) + fixed, or for a prompt over the forward's budget its chunks' forwards (PrefillCost.pool;
    a lane's, which pool_first_token_s approaches as workers are added). Seconds."""
    if cost.most <= 1 and cost.step_tokens > 0:
        return cost(0.0) * cost.cards
    return cost.alone()


def pool_first_token_s(cost: "PrefillCost", rate_per_s: float, workers: int, cs2: float = 0.0) -> float:
    """A prompt's first token at a pool of prefill workers sharing one queue (disaggregated serving), the cache's
    move aside; `cost` the prefill-only cost (PrefillCost.prefill_only), rate_per_s Poisson. A worker's forward of k
    prompts costs max(k x compute, weights) + fixed, taken as rest + k x one: one = a prompt's compute, rest = the
    rest of a one-prompt forward (fixed, and the weights' read beyond the compute). A worker, free, takes the
    prompts waiting; each of the `cost.cards` lanes of a worker (a pipeline's stages) is a server, so s = workers x
    lanes servers see lam = rate_per_s.

    A prompt finds a server free with probability 1 - C (C: Erlang C at the pool's load, rate x a prompt's cost to a
    worker, estimate/queueing.erlang_c) and goes alone: rest + one. Else it waits for the next server to free, then
    rides its forward with every prompt that arrived since that server's last one: with L the length-biased gap
    between frees, L / 2 + rest + one x (1 + lam L). One server: its forwards are S = rest + one x N, N the prompts
    that arrived during the last (Poisson of mean lam S_prev; one^2 (1 + cs2) a prompt's mean square), as in
    mixed_first_token_s: Var S = lam E[S] one^2 (1 + cs2) / (1 - (lam one)^2), L = E[S^2] / E[S]. s servers: the
    frees come every g = E[S] / s, a forward's count Poisson over a gap: L = g + lam one^2 (1 + cs2) / s^2.
    E[S] = rest + one x k, k the prompts a forward holds (prompts_per_forward). The others are not capped at the
    forward's token budget: those it leaves out go first or next, first come first served, so they delay the prompt
    about as much (capping them fell 18% short of the replay for one worker at a load of 0.85); but a prompt that
    fills the budget alone goes one at a time, in chunks of the budget, each forward with its fixed costs and the
    last shared with the next prompt's first: M/D/s at that service, and Allen-Cunneen's wait. Against the pool
    replayed (estimate/disaggregated_replay.py; benchmarks/serving_closed_forms.py): within 13% (median 2.5%) over
    1 to 6 workers at loads of 0.3 to 0.85, prompts over the budget to 0.6 (at 0.85 they fall 19-34% short: a
    prompt's last chunk also carries the next prompt's first, and the M/D/s wait is steep there).
    Units: seconds, requests/s."""
    one, weights, fixed = cost.parts()
    rest = fixed + max(0.0, weights - one)
    servers = workers * cost.cards
    if cost.most <= 1:  # a prompt fills a forward's budget: one at a time, in chunks, M/D/s (M/G/s with cs2)
        service = pool_idle_s(cost)
        return service + wait_mgc_s(rate_per_s, service, servers, cs2)
    load = rate_per_s * cost(rate_per_s / workers) * cost.cards  # erlangs, in servers
    if load >= servers:
        return math.inf
    waits = erlang_c(servers, load)
    mean_s = rest + one * cost.prompts(rate_per_s / workers)
    if servers == 1:
        rho = rate_per_s * one
        if rho >= 1:
            return math.inf
        var = rate_per_s * mean_s * one * one * (1 + cs2) / (1 - rho * rho)
        gap = (mean_s * mean_s + var) / mean_s
    else:
        gap = mean_s / servers + rate_per_s * one * one * (1 + cs2) / servers ** 2
    return (1 - waits) * (rest + one) + waits * (gap / 2 + rest + one * (1 + rate_per_s * gap))
