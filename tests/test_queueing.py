"""M/G/c waiting times (llmsize/estimate/queueing.py) against textbook values."""

from __future__ import annotations

import math

import pytest

from llmsize.estimate.queueing import erlang_c, wait_mgc_s


def test_md1_is_pollaczek_khinchine():
    # rate 0.5/s, service 1 s: rho = 0.5, Wq = rho S / (2 (1 - rho)) = 0.5 / 1 = 0.5 s
    assert wait_mgc_s(0.5, 1.0, 1) == pytest.approx(0.5)
    # rho = 0.9: 0.9 / 0.2 = 4.5 s
    assert wait_mgc_s(0.9, 1.0, 1) == pytest.approx(4.5)


def test_erlang_c_textbook_values():
    # M/M/2 at a = 1 erlang: C = (a^2 / 2!) / (1 - rho) / (1 + a + (a^2 / 2!) / (1 - rho)) = 1 / (1 + 1 + 1) = 1/3
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    # M/M/1: C = rho
    assert erlang_c(1, 0.7) == pytest.approx(0.7)
    # so M/D/2 waits half of M/M/2's C x S / (c - a) = (1/3) / 1 (Allen-Cunneen with Cs^2 = 0)
    assert wait_mgc_s(1.0, 1.0, 2) == pytest.approx(1 / 6)


def test_saturation_and_many_servers():
    assert wait_mgc_s(2.0, 1.0, 2) == math.inf and wait_mgc_s(3.0, 1.0, 2) == math.inf
    assert wait_mgc_s(0.0, 1.0, 3) == 0.0
    w = wait_mgc_s(450.0, 1.0, 500)  # 500 servers at 90%: the recursion stays finite (no 500! overflow)
    assert 0 < w < 0.01
    # more servers at the same rate never wait longer
    waits = [wait_mgc_s(10.0, 0.5, c) for c in range(6, 20)]
    assert all(a >= b for a, b in zip(waits, waits[1:]))
    # M/G/1 (Pollaczek-Khinchine): exponential service (Cs^2 = 1) waits twice the deterministic one, = M/M/1
    assert wait_mgc_s(0.5, 1.0, 1, cs2=1.0) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        wait_mgc_s(1.0, 1.0, 0)


def test_many_servers_use_the_halfin_whitt_limit_continuously():
    """Past 500 servers Erlang C comes from the Halfin-Whitt limit: at 501 servers it stays within 20% of the
    exact recursion, and 10 million servers take no time."""
    import time

    import llmsize.estimate.queueing as q

    exact = q.EXACT_SERVERS
    try:
        q.EXACT_SERVERS = 10**9
        ref = erlang_c(501, 480.0)
    finally:
        q.EXACT_SERVERS = exact
    assert erlang_c(501, 480.0) == pytest.approx(ref, rel=0.2)
    t = time.perf_counter()
    assert 0 < erlang_c(10**7, 0.999 * 10**7) < 1
    assert time.perf_counter() - t < 0.1


def _erlang_c_full(c: int, a: float) -> float:
    """Erlang C by the whole recursion from B_0 = 1 (the form queueing.erlang_c shortens)."""
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b / (1 - (a / c) * (1 - b))


def test_erlang_c_started_below_the_load_equals_the_whole_recursion():
    """erlang_c starts Erlang B's recursion at a - 10 sqrt(a) from the fluid limit 1 - k/a: the steps up to the load
    shrink that start's error below a double's rounding, so the result is the whole recursion's, bit for bit, at
    light loads, loads a hair under the servers, and 1 to 500 servers."""
    import random

    rng = random.Random(7)
    cases = [(c, a) for c in (1, 2, 3, 10, 37, 100, 499, 500) for a in (0.01, 0.5 * c, 0.9 * c, c - 1e-9)]
    cases += [(c, rng.uniform(0, c)) for c in (rng.randint(1, 500) for _ in range(3000))]
    cases += [(c, c * (1 - 10 ** rng.uniform(-8, -0.5))) for c in (rng.randint(1, 500) for _ in range(3000))]
    for c, a in cases:
        if 0 < a < c:
            assert erlang_c(c, a) == _erlang_c_full(c, a), (c, a)
