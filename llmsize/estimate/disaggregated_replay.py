"""A disaggregated deployment (fleet's xPyD rows, estimate/fleet.py) replayed forward in time, as
estimate/serving_replay.py replays one aggregated replica: x prefill workers and y decode workers, each forward
costed by the step-time model, so that the closed form's mean TTFT and TPOT can be checked and their spread read.

Prefill workers share one queue, first come first served (the closed form's M/D/x). A free worker takes up to
`prefill_tokens` prompt tokens a forward from the queue's head: whole prompts while they fit, then the start of the
next, whose rest it keeps for its next forward (a prompt over the budget goes in chunks, one a forward, on one
worker). A forward of n tokens costs prefill.prefill_s(n) = max(compute per token x n, weights) + fixed, and each
prompt it completes has its first token at the forward's end; its cache then crosses the node link (move_s(prompt
tokens)) to the decode worker with the fewest requests, running and waiting (a load-balancing router; the closed
form takes the load as even).

Decode workers: each runs steps while it holds requests, decode_step_s(b) for its b running, each emitting one
token; a request that arrives during a step joins at its end, up to `max_running` a worker (its --max-num-seqs), and
one that finds the worker idle starts a step. The first token counts from the moment the cache reaches the decode
worker (fleet: T_prefill + the move + the wait); a request of o tokens finishes o - 1 steps after it joins.

The load: a closed loop of `users`, each sending its next request when its last answer ends (starts staggered over
stagger_s), or an open loop (arrivals_s). Metrics as serving_replay's: TTFT = first token - send; TPOT =
(done - first token) / (o - 1); the first and last `skip` requests (in the order sent) left out of them. Units:
seconds, tokens.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from llmsize.estimate.serving_replay import Forward, ReplayResult, Request, replay_result


@dataclass
class _Decoder:
    running: list = field(default_factory=list)
    waiting: deque = field(default_factory=deque)
    stepping: bool = False

    def load(self) -> int:
        return len(self.running) + len(self.waiting)


def replay_disaggregated(prompts: list[int], outputs: list[int], prefill: Forward, prefill_workers: int,
                         prefill_tokens: int, decode_step_s: Callable[[int], float], decode_workers: int,
                         max_running: int, move_s: Callable[[int], float], users: int | None = None,
                         arrivals_s: list[float] | None = None, stagger_s: float = 0.0,
                         skip: int = 0) -> ReplayResult:
    """Replay len(prompts) requests (prompt and output lengths paired by index) through x = prefill_workers and
    y = decode_workers; `users` for a closed loop, else `arrivals_s` for an open one."""
    n = len(prompts)
    if n == 0 or len(outputs) != n:
        raise ValueError("prompts and outputs must be non-empty lists of the same length")
    if min(prefill_workers, decode_workers, max_running, prefill_tokens) < 1:
        raise ValueError("workers, max_running and prefill_tokens must be at least 1")
    if (users is None) == (arrivals_s is None):
        raise ValueError("give users (a closed loop) or arrivals_s (an open loop), not both")
    if arrivals_s is not None and (len(arrivals_s) != n or sorted(arrivals_s) != list(arrivals_s)):
        raise ValueError("arrivals_s must give one time per request, in order")
    if skip < 0 or 2 * skip >= n:
        raise ValueError("skip must leave some requests measured (0 <= 2 x skip < requests)")
    reqs = [Request(max(1, p), max(1, o), index=i) for i, (p, o) in enumerate(zip(prompts, outputs))]
    events: list = []
    order = itertools.count()

    def at(t: float, kind: str, what) -> None:
        heapq.heappush(events, (t, next(order), kind, what))

    sent = 0
    if arrivals_s is not None:
        for r, t in zip(reqs, arrivals_s):
            at(t, "arrive", r)
        sent = n
    else:
        first = min(users, n)
        for i in range(first):
            at(i * stagger_s / first, "arrive", reqs[i])
        sent = first
    queue: deque[Request] = deque()
    free = list(range(prefill_workers))  # prefill workers with no forward running
    carry: list[Request | None] = [None] * prefill_workers  # a chunked prompt each worker goes on with
    decoders = [_Decoder() for _ in range(decode_workers)]
    finished: list[Request] = []
    now = 0.0

    def start_prefills() -> None:
        while free and (queue or any(carry[w] is not None for w in free)):
            w = next((w for w in free if carry[w] is not None), free[0])
            free.remove(w)
            taken, done = 0, []
            todo = [carry[w]] if carry[w] is not None else []
            carry[w] = None
            while taken < prefill_tokens and (todo or queue):
                r = todo.pop() if todo else queue.popleft()
                k = min(r.prompt - r.prefilled, prefill_tokens - taken)
                r.prefilled += k
                taken += k
                if r.prefilled < r.prompt:
                    carry[w] = r
                    break
                done.append(r)
            at(now + prefill.prefill_s(taken), "prefilled", (w, done))

    def step(d: _Decoder) -> None:
        """An idle decode worker admits what waits, up to its cap, and starts a step if it runs anything."""
        while d.waiting and len(d.running) < max_running:
            d.running.append(d.waiting.popleft())
        d.stepping = bool(d.running)
        if d.stepping:
            at(now + decode_step_s(len(d.running)), "stepped", d)

    def finish(r: Request) -> None:
        nonlocal sent
        r.done_s = now
        finished.append(r)
        if arrivals_s is None and sent < n:  # the user sends its next request
            at(now, "arrive", reqs[sent])
            sent += 1

    while events:
        now = events[0][0]
        while events and events[0][0] == now:  # everything that happens at this instant, then the workers start
            _, _, kind, what = heapq.heappop(events)
            if kind == "arrive":
                what.sent_s = now
                queue.append(what)
            elif kind == "prefilled":
                w, done = what
                free.append(w)
                for r in done:
                    at(now + move_s(r.prompt), "moved", r)
            elif kind == "moved":
                what.first_s, what.emitted = now, 1
                if what.emitted >= what.output:
                    finish(what)
                else:
                    min(decoders, key=_Decoder.load).waiting.append(what)
            else:  # a decode step ended
                what.stepping = False
                for r in what.running:
                    r.emitted += 1
                    if r.emitted >= r.output:
                        finish(r)
                what.running = [r for r in what.running if r.done_s is None]
        start_prefills()
        for d in decoders:
            if not d.stepping:
                step(d)
    return replay_result(finished, n, skip, now)
