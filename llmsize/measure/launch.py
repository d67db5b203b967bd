"""How the decode step's Triton kernels are launched: programmatic dependent launch where the GPU has it.

With PDL (Hopper and later; CUDA graphs keep it) a kernel is scheduled while the one before it still runs, and
waits in griddepcontrol.wait until that one has finished and its writes are visible before it reads any input
or writes anything. Every kernel launched this way calls wait before touching activations (pdl_entry, and the
word GEMV), so none reads an input early, and since each finishes only after its own wait they finish in
order. Modes (LLMSIZE_PDL, to compare on the card):

- 0, the default: no PDL (plain stream order). On an H200 the batch-1 Gemma 4 12B NVFP4 step ran 4.58 ms a
  step without PDL against 5.14 ms in mode 2 and 5.72 ms in mode 1 (benchmarks/step_variants.py, 2026-12-04,
  commit cc01f14). The profile of the same day (benchmarks/profile_decode.py: 6.24 against 6.58 ms) saw the
  word GEMVs take 1.6 ms longer in all with PDL early, more than the launch gaps it hides (2% of the step).
- 2 ("early"): the small kernels let the next one be scheduled as they start; the word GEMV first
  asks L2 for the start of its weight block (weights do not depend on the kernel before), then waits, and lets
  the next kernel be scheduled only after its main loop. So a GEMV's CTAs are resident while the small kernels
  before it run, and its first weights stream from DRAM during their latency instead of after it.
- 1 ("wait first"): every kernel waits, then lets the next be scheduled; no prefetch.

LLMSIZE_PREFETCH_KB (default 32) caps the L2 prefetch per GEMV program in mode 2; 0 turns it off.
"""

from __future__ import annotations

import torch

from llmsize.measure import launch_env

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

PDL_OFF, PDL_WAIT_FIRST, PDL_EARLY = 0, 1, 2


def pdl_mode(device) -> int:
    """LLMSIZE_PDL's mode (PDL_OFF unless it says 1 or 2) on CUDA devices of compute capability 9 and up; never
    on the CPU, where Triton's interpreter runs the kernels, nor before Hopper."""
    if device.type != "cuda":
        return PDL_OFF
    mode, _ = launch_env()
    if torch.cuda.get_device_capability(device)[0] < 9:
        return PDL_OFF
    return mode


def pdl(device) -> bool:
    return pdl_mode(device) != PDL_OFF


def prefetch_bytes(device) -> int:
    """The L2 prefetch per GEMV program (bytes, a multiple of 16): only before a PDL wait, so 0 unless in
    PDL_EARLY; LLMSIZE_PREFETCH_KB sets it."""
    if pdl_mode(device) != PDL_EARLY:
        return 0
    return launch_env()[1] * 1024


INTERPRETER_MAX_ROWS = 1024  # the most weight rows one GEMV program takes under the interpreter


def interpreter_rows(n: int) -> int:
    """A GEMV's weight rows per program under Triton's CPU interpreter (the tests' and `--device cpu`'s): all n
    of them, as a power of two up to INTERPRETER_MAX_ROWS. The interpreter's cost is per program and per
    operation, not per element: on the test model's 512 x 128 gate | up weight one program runs ~3x (word
    kernel), 9-15x (tensor-core kernel, 3 rows) and ~10x (byte kernel) faster than the 32-128-row tiles taken
    before (benchmarks/interpreter_tiles.py, two runs in benchmarks/RESULTS.md)."""
    return min(INTERPRETER_MAX_ROWS, triton.next_power_of_2(n))


def launch_opts(mode: int) -> dict:
    """The kernel's PDL constexpr (the mode) and, when on, Triton's launch_pdl option."""
    return {"PDL": int(mode), "launch_pdl": True} if mode else {"PDL": 0}


if triton is not None:

    @triton.jit
    def pdl_entry(PDL: tl.constexpr, LET_IN: tl.constexpr = True):
        """A kernel's start. PDL_EARLY: let the next kernel be scheduled (unless LET_IN is false: a GEMV does it
        in pdl_exit, after its main loop), then wait for the one before (all its writes visible).
        PDL_WAIT_FIRST: wait, then let the next one be scheduled."""
        if PDL == 2:
            if LET_IN:
                tl.extra.cuda.gdc_launch_dependents()
            tl.extra.cuda.gdc_wait()
        elif PDL == 1:
            tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()

    @triton.jit
    def pdl_exit(PDL: tl.constexpr):
        """A GEMV's weights are read: in PDL_EARLY the next kernel may be scheduled now."""
        if PDL == 2:
            tl.extra.cuda.gdc_launch_dependents()

    @triton.jit
    def prefetch_l2(ptr, nbytes):
        """Ask L2 for nbytes (a multiple of 16, from a 16-byte aligned address) at ptr: one bulk prefetch
        (sm_90 cp.async.bulk.prefetch.L2), issued by the program's first thread; nothing waits for it."""
        tl.inline_asm_elementwise(
            asm="""{
            .reg .pred p;
            .reg .b32 t;
            mov.u32 t, %tid.x;
            setp.eq.u32 p, t, 0;
            @p cp.async.bulk.prefetch.L2.global [$1], $2;
            mov.u32 $0, 0;
            }""",
            constraints="=r,l,r", args=[ptr, nbytes], dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def prefetch_l2_each(ptrs, nbytes):
        """One bulk L2 prefetch per element (16-byte aligned addresses, sizes multiples of 16; 0 is skipped),
        issued by whichever thread holds the element."""
        tl.inline_asm_elementwise(
            asm="""{
            .reg .pred p;
            setp.ne.u32 p, $2, 0;
            @p cp.async.bulk.prefetch.L2.global [$1], $2;
            mov.u32 $0, 0;
            }""",
            constraints="=r,l,r", args=[ptrs, nbytes], dtype=tl.int32, is_pure=False, pack=1)
