"""`llmsize fleet` over the whole catalog for one model: wall time of the command, as a user runs it.

    python benchmarks/fleet_speed.py [--runs 5] [--case TEXT]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = [
    ("llama-3.1-70b, 400 users, TTFT 2 s, 30 tok/s", ["fleet", "llama-3.1-70b", "--isl", "3000", "--osl", "500",
                                                     "--users", "400", "--ttft", "2s", "--tok-s-per-user", "30"]),
    ("qwen3-30b-a3b, 20 req/s, TPOT 33 ms", ["fleet", "qwen3-30b-a3b", "--rate", "20", "--tpot", "33ms"]),
    ("llama-3.1-8b, 64 users, spec decoding", ["fleet", "llama-3.1-8b", "--users", "64", "--spec",
                                               "draft=llama-3.2-1b,k=4,accept=0.7"]),
    ("deepseek-v3 (671 GB), 400 users, TTFT 2 s", ["fleet", "deepseek-v3", "--users", "400", "--ttft", "2s",
                                                   "--tpot", "33ms"]),
    ("llama-3.1-70b, lognormal lengths (p95 4x)", ["fleet", "llama-3.1-70b", "--isl", "3000:p95=12000", "--osl",
                                                  "500:p95=2000", "--users", "400", "--ttft", "2s", "--tpot",
                                                  "33ms"]),
    # the slowest of the catalog's models to size (a 2026-12-02 review: 2.0-2.5 s each on this 2-core machine)
    ("gpt-oss-120b (MXFP4 MoE), 400 users", ["fleet", "gpt-oss-120b", "--users", "400", "--ttft", "2s", "--tpot",
                                             "33ms"]),
    # the slowest found by a 2026-12-03 review: 1.6-2.5 s on this machine under load
    ("gpt-oss-120b, lognormal prompts, 20 req/s", ["fleet", "gpt-oss-120b", "--isl", "3000:p95=12000", "--osl", "500",
                                                   "--rate", "20", "--ttft", "2s", "--tpot", "33ms"]),
    ("gemma-4-12b (windows), 400 users", ["fleet", "gemma-4-12b", "--users", "400", "--ttft", "2s", "--tpot",
                                          "33ms"]),
    ("nemotron-3-nano-30b-a3b (hybrid), 400 users", ["fleet", "nemotron-3-nano-30b-a3b", "--users", "400", "--ttft",
                                                     "2s", "--tpot", "33ms"]),
    # a fleet of 10^8 replicas: the search for the workers whose wait for a slot is within the target
    ("llama-3.1-8b, 10^9 req/s", ["fleet", "llama-3.1-8b", "--rate", "1e9"]),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--case", default="", help="only the cases whose name holds this text")
    args = ap.parse_args()
    print(f"{'case':48} {'median s':>9} {'min s':>7} {'max s':>7}")
    for name, argv in CASES:
        if args.case not in name:
            continue
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "llmsize", *argv, "--format", "json"], check=True,
                           stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t)
        print(f"{name:48} {statistics.median(times):9.2f} {min(times):7.2f} {max(times):7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
