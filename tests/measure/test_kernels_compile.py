"""Every Triton kernel compiles for sm_90 (Hopper) and sm_80 (Ampere, PDL off) on this CPU machine:
tests/measure/compile_kernels.py runs Triton's real compiler and ptxas in a subprocess (the interpreter, set for
the other tests, would only run Python stand-ins). Catches what only the GPU compiler sees: inline PTX, layouts,
loop-carried types."""

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_every_kernel_compiles_for_hopper_and_ampere():
    ptxas = pytest.importorskip("triton").__file__
    if not (Path(ptxas).parent / "backends" / "nvidia" / "bin" / "ptxas").exists():
        pytest.skip("this triton build has no ptxas")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    script = Path(__file__).with_name("compile_kernels.py")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(("ok", "FAIL"))]
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    assert len(lines) >= 100 and all(ln.startswith("ok") for ln in lines), r.stdout
