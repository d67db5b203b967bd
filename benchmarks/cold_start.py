"""Cold-start time of `llmsize plan` (target: well under 200 ms), where it goes, and proof it loads no torch.

Runs the installed console script N times in fresh processes and prints a table; append the result
to benchmarks/RESULTS.md by hand with the card/machine, date and commit. The children run as an installed package
does, with its bytecode compiled once and reused: PYTHONDONTWRITEBYTECODE is dropped from their environment and each
command runs once untimed first (with it set, every run compiles llmsize's modules again: ~100 ms more a run,
2026-12-07).

    python benchmarks/cold_start.py [--runs 10]

The last line says where llmsize's own share goes: its dataclasses made, the first model read, one runtime's
constants file beside all of them, the memory-variant note (each timed in a fresh process).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CASES = {
    "plan (table)": ["plan", "gemma-4-12b", "--gpu", "rtx5060ti"],
    "plan --json": ["plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--json"],
    "plan, model does not fit": ["plan", "llama-3.1-70b", "--gpu", "rtx5090", "--json"],
    "--version": ["--version"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    exe = shutil.which("llmsize")
    cmd0 = [exe] if exe else [sys.executable, "-m", "llmsize"]
    print(f"{'command':28s} {'median ms':>10s} {'min ms':>8s} {'max ms':>8s}")
    # the floor: the interpreter plus the libraries plan cannot do without (typer converts options through
    # pydantic adapters, the catalogs are pydantic models read from YAML), timed in the same loop
    floor = [sys.executable, "-c", "import typer, typer._adapters, pydantic, yaml"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for name, cmd in [(n, cmd0 + a) for n, a in CASES.items()] + [("floor: typer+pydantic+yaml", floor)]:
        subprocess.run(cmd, check=True, capture_output=True, env=env)  # untimed: the bytecode written once
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            times.append((time.perf_counter() - t) * 1e3)
        print(f"{name:28s} {statistics.median(times):10.1f} {min(times):8.1f} {max(times):8.1f}")
    probe = ("import sys; from llmsize.cli import main\n"
             "try:\n main(['plan','gemma-4-12b','--gpu','rtx5060ti','--json'])\nexcept SystemExit: pass\n"
             "print(sorted(m for m in ('torch','triton','numpy','pynvml') if m in sys.modules))")
    heavy = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           env=env).stdout.strip().splitlines()
    print(f"heavy modules loaded by plan: {heavy[-1] if heavy else '?'}")
    # where the time above the floor goes: each phase timed inside fresh processes, medians
    phases = ("import time, io, contextlib\nt0 = time.perf_counter()\n"
              "import typer, typer._adapters, pydantic, yaml\nt1 = time.perf_counter()\n"
              "import llmsize.cli, llmsize.estimate.plan, llmsize.catalog.loader, llmsize.render.plan_json, "
              "llmsize.render.text\nt2 = time.perf_counter()\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              " try:\n  llmsize.cli.main(['plan','gemma-4-12b','--gpu','rtx5060ti'])\n except SystemExit: pass\n"
              "print((t1 - t0) * 1e3, (t2 - t1) * 1e3, (time.perf_counter() - t2) * 1e3)")
    med = _medians(phases, args.runs, env)
    print(f"plan (table), in-process phases (median ms): libraries {med[0]:.1f}, llmsize imports {med[1]:.1f}, "
          f"parse + catalog + plan + report {med[2]:.1f}")
    # inside llmsize's share: its dataclasses made (Python 3.11 compiles each one's methods when the class is made),
    # the first model read (pydantic builds the schema's validator then), one runtime's constants file and what every
    # other runtime's would add (a process parses a file once), and the memory-variant note's reads of a few
    # hardware files' name lines; each in a fresh process
    where = ("import dataclasses, time, io, contextlib\nmade = [0, 0.0]\norig = dataclasses._process_class\n"
             "def timed(cls, *a, **k):\n t = time.perf_counter(); r = orig(cls, *a, **k)\n"
             " if cls.__module__.startswith('llmsize'):\n  made[0] += 1; made[1] += time.perf_counter() - t\n"
             " return r\ndataclasses._process_class = timed\n"
             "import llmsize.cli\nfrom llmsize.catalog.loader import Catalog\n"
             "from llmsize.catalog.match import sibling_note\nc = Catalog()\n"
             "def ms(f):\n t = time.perf_counter(); f(); return (time.perf_counter() - t) * 1e3\n"
             "model = ms(lambda: c.model('gemma-4-12b'))\none = ms(lambda: c.runtimes.by_id()['vllm'])\n"
             "others = ms(lambda: Catalog().runtimes.all())\ng = c.gpu('rtx5060ti')\n"
             "note = ms(lambda: sibling_note('rtx5060ti', g, c.hardware))\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             " try:\n  llmsize.cli.main(['plan','gemma-4-12b','--gpu','rtx5060ti'])\n except SystemExit: pass\n"
             "print(made[0], made[1] * 1e3, model, one, others, note)")
    med = _medians(where, args.runs, env)
    print(f"inside llmsize's share (median ms): {med[0]:.0f} dataclasses made in {med[1]:.1f}; first model read "
          f"{med[2]:.1f}; one runtime's constants file {med[3]:.1f} (a plan reads one), every other runtime's "
          f"{med[4]:.1f} more; memory-variant note {med[5]:.1f}")


def _medians(code: str, runs: int, env: dict) -> list[float]:
    """The figures `code` prints, each the median over `runs` fresh processes. Run from a neutral folder: `-c` puts
    the working directory first on sys.path, and a source checkout there would be imported (and recompiled) instead
    of the installed package."""
    rows = [list(map(float, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                           cwd=tempfile.gettempdir(), env=env).stdout.split()))
            for _ in range(runs)]
    return [statistics.median(r[i] for r in rows) for i in range(len(rows[0]))]


if __name__ == "__main__":
    main()
