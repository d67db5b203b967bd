"""The measure tests need the [measure] extra (torch, triton). CI installs it and sets LLMSIZE_REQUIRE_MEASURE=1,
so that a missing install fails there instead of skipping silently."""

import os

import pytest

# Triton kernels run on the CPU through its interpreter (set before triton is first imported).
os.environ.setdefault("TRITON_INTERPRET", "1")

if os.environ.get("LLMSIZE_REQUIRE_MEASURE") == "1":
    import torch  # noqa: F401  (fail loudly in CI)
    import triton  # noqa: F401
else:
    pytest.importorskip("torch")

if os.environ["TRITON_INTERPRET"] == "1":
    from .interpreter_lookups import install

    install()  # the interpreter's builtins listed once, not looked up at every call (see the module)
