"""Waiting time of a request for a prefill server: M/G/c, Poisson arrivals (a large population of independent
users is close to Poisson whether it is a closed loop or an open rate), a service time of mean S and squared
coefficient of variation Cs^2 (0 when every prompt has one length: M/D/c), c servers.

    offered load a = rate x S (erlangs),  utilization rho = a / c  (must be < 1, else the queue grows forever)
    Erlang C (the probability to wait, M/M/c), by the Erlang B recursion B_0 = 1, B_k = a B_{k-1} / (k + a B_{k-1}):
        C = B_c / (1 - rho (1 - B_c))
    M/M/c:  Wq = C x S / (c - a)
    M/G/c:  Wq ~= Wq(M/M/c) x (Ca^2 + Cs^2) / 2 with Ca^2 = 1 (Poisson): for fixed lengths (Cs^2 = 0) half of
            M/M/c (the Allen-Cunneen approximation, A. O. Allen, "Probability, Statistics, and Queueing Theory",
            1978); exact for c = 1, where it is the Pollaczek-Khinchine formula Wq = rho S (1 + Cs^2) / (2 (1 - rho)).
    Past EXACT_SERVERS servers, C from the Halfin-Whitt limit (S. Halfin and W. Whitt, "Heavy-traffic limits for
    queues with many exponential servers", Operations Research 29(3), 1981): with beta = (c - a) / sqrt(a),
        C ~= 1 / (1 + beta Phi(beta) / phi(beta)),
    accurate when c is large, and constant-time where the recursion is O(c).
Units: rate in requests/s, S and Wq in seconds.
"""

from __future__ import annotations

import math
from statistics import NormalDist

EXACT_SERVERS = 500
_N = NormalDist()


def erlang_c(servers: int, offered_erlangs: float) -> float:
    """Probability that an arrival waits in an M/M/c queue (1 when the load reaches the servers)."""
    c, a = servers, offered_erlangs
    if a <= 0:
        return 0.0
    if a >= c:
        return 1.0
    if c > EXACT_SERVERS:
        beta = (c - a) / math.sqrt(a)
        return 1 / (1 + beta * _N.cdf(beta) / _N.pdf(beta)) if beta < 37 else 0.0
    # Erlang B's recursion B_k = a B_{k-1} / (k + a B_{k-1}) from B_0 = 1. Below the load it contracts (a step
    # scales an error in B by about k / a), so it starts where the steps up to a shrink any error by e^-50
    # (k0 = a - 10 sqrt(a): the product of k / a from there is about exp(-(10 sqrt(a))^2 / 2a)), at the fluid
    # limit 1 - k0 / a
    k0 = int(a - 10 * math.sqrt(a))
    b, start = (1 - k0 / a, k0 + 1) if k0 > 1 else (1.0, 1)
    for k in range(start, c + 1):
        ab = a * b
        b = ab / (k + ab)
    return b / (1 - (a / c) * (1 - b))


def wait_mgc_s(rate_per_s: float, service_s: float, servers: int, cs2: float = 0.0) -> float:
    """Mean wait in the queue (s) of an M/G/c server group whose service has squared coefficient of variation
    cs2 (0: M/D/c); infinite at or past full utilization."""
    if servers < 1:
        raise ValueError(f"servers must be at least 1 (got {servers})")
    a = rate_per_s * service_s
    if a <= 0:
        return 0.0
    if a >= servers:
        return math.inf
    return 0.5 * (1 + cs2) * erlang_c(servers, a) * service_s / (servers - a)
