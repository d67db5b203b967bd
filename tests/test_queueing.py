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
