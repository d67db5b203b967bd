"""A serving benchmark replayed forward in time: a client that keeps at most `max_concurrency` requests in flight
(sending the next the moment one finishes, all of them at once at the start: `sglang.bench_serving` and vLLM's
`benchmark_serving.py` at an unbounded request rate under --max-concurrency), and an engine's continuous-batching
scheduler, each forward costed by the step-time model (estimate/speed.py). What it returns is what such a run prints:
mean TTFT, mean TPOT and output tokens/s, start-up burst included.

Analytic steady-state formulas (estimate/fleet.py) describe a server under a constant load; a benchmark of a few
hundred requests is not one: its first `max_concurrency` prompts arrive together and queue for the prefill, and the
run ends as the last answers drain. Replaying the run step by step costs what the engine does.

The scheduler, one forward at a time:
    prefill_first (SGLang's default, python/sglang/srt/managers/scheduler.py get_next_batch_to_run: a new prefill
        batch when one can be formed, else a decode step; mixed chunks are off by default): prompts waiting are
        taken first come first served, up to `prefill_tokens` prompt tokens a forward (a longer prompt is chunked
        over several forwards); the forward costs
            max(compute per token x tokens, weights) + fixed
        (estimate/replica.serving_prefill_parts, its compute and all-reduces linear in the tokens), and each
        prompt it completes emits its first token at the forward's end. Otherwise every running request decodes
        one token: decode_step_s(b).
    mixed (vLLM V1, TensorRT-LLM in-flight batching: running requests' decode tokens first, then waiting prompts in
        the token budget, in one forward): decode_step_s(b) + a cost per prompt token x the tokens it adds (the
        steady-state model's, estimate/replica.prefill_cost_s, over the prompt's tokens).
A request of o output tokens finishes o - 1 decode steps after its first token. A closed loop's next request,
sent when an answer ends, comes in from the forward after the one that starts then: an engine schedules its next
forward the moment one ends, before the last token has reached the client and the client's request has come back
(vLLM V1, vllm/v1/engine/core.py EngineCoreProc.run_busy_loop: take what the input queue holds, then step; it
waits for input only when it has no work, so an idle engine takes the request at once). An open loop (arrivals_s,
e.g. poisson_arrivals: a --rate load) sends each request at its time instead, whatever is in flight.
bench_serving's metrics: TTFT = first token - send time; TPOT = (latency - TTFT) / (o - 1) for o > 1, averaged
over requests; output tok/s = all output tokens / the run's duration. Units: seconds, tokens.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass
from typing import Callable

POLICIES = ("prefill_first", "mixed")


@dataclass(frozen=True)
class Forward:
    """What the engine's forwards cost: decode_step_s(b) for a decode step of b requests; a prefill forward of n
    prompt tokens costs max(compute_per_token_s x n, weights_s) + fixed_s alone, mixed_per_token_s x n inside
    a mixed step (default compute_per_token_s)."""

    decode_step_s: Callable[[int], float]
    compute_per_token_s: float
    weights_s: float
    fixed_s: float
    mixed_per_token_s: float | None = None

    def mixed_s(self, tokens: int) -> float:
        per = self.compute_per_token_s if self.mixed_per_token_s is None else self.mixed_per_token_s
        return per * tokens

    def prefill_s(self, tokens: int) -> float:
        return max(self.compute_per_token_s * tokens, self.weights_s) + self.fixed_s


@dataclass(frozen=True)
class ReplayResult:
    ttft_mean_s: float
    tpot_mean_s: float
    output_tok_s: float  # all output tokens over the run's duration
    duration_s: float
    requests: int
    ttft_s_quantiles: tuple[float, float, float] = (0.0, 0.0, 0.0)  # p50, p95, p99 over the requests
    tpot_s_quantiles: tuple[float, float, float] = (0.0, 0.0, 0.0)


def quantiles(values: list[float], qs=(0.50, 0.95, 0.99)) -> tuple[float, ...]:
    """Nearest-rank quantiles (the smallest value with at least q of them at or below it); zeros when empty."""
    s = sorted(values)
    if not s:
        return tuple(0.0 for _ in qs)
    return tuple(s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))] for q in qs)


@dataclass
class Request:
    """One request as a replay follows it: its lengths, when it was sent, its prompt tokens prefilled so far, its
    first token, its tokens emitted, when it ended (seconds, tokens)."""

    prompt: int
    output: int
    sent_s: float = 0.0
    prefilled: int = 0
    first_s: float | None = None
    emitted: int = 0
    done_s: float | None = None
    index: int = 0


def uniform_lengths(n: int, max_tokens: int, range_ratio: float, mean_tokens: float | None, seed: int,
                    floor: int = 1) -> list[int]:
    """n lengths drawn as bench_serving's random dataset draws them (python/sglang/bench_serving.py
    sample_random_requests: uniform integers in [max(max_tokens x range_ratio, floor), max_tokens]), then scaled so
    their mean is mean_tokens when the run printed it (its total tokens over its requests)."""
    rng = random.Random(seed)
    lo = max(int(max_tokens * range_ratio), floor)
    draws = [rng.randint(lo, max_tokens) for _ in range(n)]
    if mean_tokens is None:
        return draws
    scale = mean_tokens * n / max(1, sum(draws))
    return [max(1, round(d * scale)) for d in draws]


def poisson_arrivals(n: int, rate_per_s: float, seed: int) -> list[float]:
    """n arrival times (s) of a Poisson process at rate_per_s: exponential gaps (an open-loop load, --rate)."""
    if rate_per_s <= 0:
        raise ValueError("rate_per_s must be above 0")
    rng, t, out = random.Random(seed), 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate_per_s)
        out.append(t)
    return out


def replay(prompts: list[int], outputs: list[int], max_concurrency: int, forward: Forward, prefill_tokens: int,
           max_running: int | None = None, policy: str = "prefill_first",
           arrivals_s: list[float] | None = None, skip: int = 0, stagger_s: float = 0.0) -> ReplayResult:
    """Replay one benchmark run of len(prompts) requests (prompt and output lengths paired by index) against one
    engine replica. max_running: requests the engine runs at once (its cap, or what its cache holds).
    arrivals_s: an open loop instead, each request sent at its time whatever is in flight (max_concurrency is then
    not a limit); TTFT counts from the arrival. skip: the first and the last `skip` requests (in the order sent) are
    served but left out of the TTFT and TPOT figures (a steady state without the start-up wave and the drain).
    stagger_s: a closed loop whose max_concurrency users start one after another over stagger_s (user i at
    i x stagger_s / users) instead of all at once, so that they stay out of step."""
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r} is not one of {', '.join(POLICIES)}")
    if not prompts or len(prompts) != len(outputs):
        raise ValueError("prompts and outputs must be non-empty lists of the same length")
    if max_concurrency < 1 or prefill_tokens < 1:
        raise ValueError("max_concurrency and prefill_tokens must be at least 1")
    if arrivals_s is not None and (len(arrivals_s) != len(prompts) or sorted(arrivals_s) != list(arrivals_s)):
        raise ValueError("arrivals_s must give one time per request, in order")
    cap = max(1, max_running if max_running is not None else max_concurrency)
    if skip < 0 or 2 * skip >= len(prompts):
        raise ValueError("skip must leave some requests measured (0 <= 2 x skip < requests)")
    pending = deque(Request(max(1, p), max(1, o), index=i) for i, (p, o) in enumerate(zip(prompts, outputs)))
    if arrivals_s is not None:
        for r, t in zip(pending, arrivals_s):
            r.sent_s = t
    starts: deque[Request] = deque()  # a staggered closed loop's first requests, each at its user's start
    if arrivals_s is None and stagger_s > 0:
        first = min(max_concurrency, len(pending))
        for i in range(first):
            r = pending.popleft()
            r.sent_s = i * stagger_s / first
            starts.append(r)
    waiting: deque[Request] = deque()
    answered: deque[Request] = deque()  # a closed loop's next requests, sent as a forward ended: in by the one after
    running: list[Request] = []
    finished: list[Request] = []
    now, in_flight = 0.0, 0

    def send() -> None:
        nonlocal in_flight, now
        if arrivals_s is not None:
            if pending and not waiting and not running:
                now = max(now, pending[0].sent_s)  # idle until the next arrival
            while pending and pending[0].sent_s <= now:
                waiting.append(pending.popleft())
            return
        for _ in range(2):
            while starts and starts[0].sent_s <= now:
                waiting.append(starts.popleft())
                in_flight += 1
            while pending and in_flight + len(starts) < max_concurrency:
                r = pending.popleft()
                r.sent_s = now
                (answered if now > 0 else waiting).append(r)
                in_flight += 1
            if waiting or running or answered or not starts:
                return
            now = max(now, starts[0].sent_s)  # nothing to run: idle until the next user starts

    def admit(budget: int) -> tuple[int, list[Request]]:
        """Prompt tokens taken this forward, and the prompts it completes."""
        taken, done = 0, []
        for r in list(waiting):
            if taken >= budget or len(running) + len(done) >= cap:
                break
            n = min(r.prompt - r.prefilled, budget - taken)
            r.prefilled += n
            taken += n
            if r.prefilled == r.prompt:
                waiting.remove(r)
                done.append(r)
            else:
                break  # a chunked prompt goes on in the next forward
        return taken, done

    def emit(rs: list[Request]) -> None:
        nonlocal in_flight
        for r in rs:
            r.emitted += 1
            if r.first_s is None:
                r.first_s = now
            if r.emitted >= r.output:
                r.done_s = now
                finished.append(r)
                in_flight -= 1
        running[:] = [r for r in running if r.done_s is None]

    send()
    while waiting or running or pending or starts or answered:
        if not waiting and not running:
            if answered:  # an idle engine takes them as they come
                waiting.extend(answered)
                answered.clear()
            else:
                send()  # an open loop's next arrival
            continue
        decoding = list(running)
        if policy == "prefill_first" and waiting and len(running) < cap:
            taken, done = admit(prefill_tokens)
            now += forward.prefill_s(taken)
            running.extend(done)
            emit(done)
        else:
            taken, done = admit(max(0, prefill_tokens - len(decoding))) if policy == "mixed" else (0, [])
            if not decoding and not taken:
                raise RuntimeError("replay made no progress")  # pragma: no cover - cap >= 1 admits a prompt
            if decoding:
                now += forward.decode_step_s(len(decoding)) + forward.mixed_s(taken)
            else:
                now += forward.prefill_s(taken)
            running.extend(done)
            emit(decoding + done)
        waiting.extend(answered)
        answered.clear()
        send()
    return replay_result(finished, len(prompts), skip, now)


def replay_result(finished: list[Request], requests: int, skip: int, duration_s: float) -> ReplayResult:
    """A replay's figures as bench_serving prints them, the first and last `skip` of its `requests` (in the order
    sent) left out of TTFT and TPOT."""
    kept = [r for r in finished if skip <= r.index < requests - skip]
    ttft = [r.first_s - r.sent_s for r in kept]
    tpot = [(r.done_s - r.first_s) / (r.output - 1) for r in kept if r.output > 1]
    return ReplayResult(sum(ttft) / len(ttft), sum(tpot) / len(tpot) if tpot else 0.0,
                        sum(r.output for r in finished) / duration_s if duration_s > 0 else 0.0, duration_s,
                        len(finished), quantiles(ttft), quantiles(tpot))
