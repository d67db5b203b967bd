"""Importing llmsize.measure keeps Triton's floating-point contraction on (a * b + c as one FMA), as the
kernels' instruction counts and accuracy figures assume: Triton 3.9 warns that its default turns off in 3.10.
Compiled for sm_90 on the CPU (no GPU needed), in a subprocess where the variable is unset to begin with."""

import os
import subprocess
import sys

import pytest

triton = pytest.importorskip("triton")

SCRIPT = """
import warnings
warnings.simplefilter("error")  # Triton's warning about the default, if it came, fails the run
from llmsize.measure import fused
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
sig = {"gu_ptr": "*bf16", "out_ptr": "*bf16", "pack_ptr": "*fp16", "inter": "i32", "stride_gu": "i32",
       "stride_out": "i32", "BLOCK": "constexpr", "PACK": "constexpr", "PDL": "constexpr"}
k = ASTSource(fn=fused._geglu_kernel, signature=sig, constexprs={"BLOCK": 1024, "PACK": False, "PDL": 2})
ptx = __import__("triton").compile(k, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
print("fma" if "fma.rn.f32" in ptx else "no fma")
"""


def test_measure_keeps_fp_contraction_on_without_a_warning():
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_DEFAULT_FP_FUSION", "TRITON_INTERPRET")}
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-1500:]
    assert r.stdout.strip() == "fma"  # the GeGLU's tanh polynomial contracted


def test_a_users_choice_is_kept():
    env = dict(os.environ, TRITON_DEFAULT_FP_FUSION="0")
    code = "import os, llmsize.measure; print(os.environ['TRITON_DEFAULT_FP_FUSION'])"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.stdout.strip() == "0"
