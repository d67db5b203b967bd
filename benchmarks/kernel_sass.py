"""How many instructions each NVFP4 GEMV spends per weight, read from its compiled Hopper code, no GPU needed.

    python benchmarks/kernel_sass.py [--arch 90]

(also the registers a thread, with the pointer and stride divisibility the JIT gives Gemma 4's shapes; the
compile test's builds, without those hints, hold more; and the loop's block-wide barriers, BAR.SYNC, at each of
which every warp of the program waits: where a load's layout is not its consumer's, Triton moves the values
through shared memory between two of them)

Compiles each kernel for sm_90 with Triton's own compiler and ptxas (both ship in the triton wheel), finds
the main loop in the SASS (the backward branch), counts its instructions, and divides by the weights one
thread handles per iteration. The bandwidth it can sustain then follows from the issue rate: an H100/H200 SM
issues 4 warp-instructions per clock (128 thread-instructions) and must consume ~32.7 NVFP4 weights per clock
to keep up with 4.8 TB/s (shared/reference/fast-decode-notes.md: 4.8e12 B/s / (132 SMs x 1.98 GHz) / 0.5625 B),
so a kernel is ALU-bound below ~3.9 instructions per weight, at about 3.9 / (its count) of the bandwidth. A
prediction to check against benchmarks/gemv_bench.py on the card, not a measurement.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile

os.environ.pop("TRITON_INTERPRET", None)  # compile the real kernels, not the interpreter's stand-ins

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.kernels import gemv_dot, gemv_rows  # noqa: E402
from llmsize.measure import gemv, gemv_tc, gemv_words  # noqa: E402

WEIGHTS_PER_CLOCK_AT_FULL_BW = 32.7  # per SM, H200 (see the docstring)
ISSUE_PER_CLOCK = 128  # thread-instructions per SM per clock

GEMV_SIG = {"x_ptr": "*bf16", "packed_ptr": "*u8", "scale_ptr": "*u8", "row_scale_ptr": "*fp32",
            "y_ptr": "*bf16", "N": "i32", "K": "i32", "stride_xb": "i32", "stride_yb": "i32"}


def cases():
    """(name, jit function, signature, constexprs, warps, weights per program per loop iteration). Every pointer
    and the row strides are marked divisible by 16, as the JIT marks them for Gemma 4's shapes."""
    sig_b = dict(GEMV_SIG, BLOCK_N="constexpr", BLOCK_K="constexpr")
    sig_dot = {**{k: v for k, v in GEMV_SIG.items() if k not in ("N",)}, "B": "i32", "N": "i32",
               "BLOCK_N": "constexpr", "BLOCK_K": "constexpr", "BLOCK_B": "constexpr", "DOT_DTYPE": "constexpr"}
    sig_pairs = {**{k: v for k, v in GEMV_SIG.items() if k not in ("N", "packed_ptr")}, "packed_ptr": "*i32",
                 "B": "i32", "N": "i32", "BLOCK_N": "constexpr", "BLOCK_W": "constexpr", "BLOCK_B": "constexpr"}
    out = []
    for bn, bk, w in ((32, 256, 4), (16, 512, 8)):
        out.append((f"triton {bn}x{bk} w{w}", gemv._gemv_fixed, sig_b, {"BLOCK_N": bn, "BLOCK_K": bk}, w, bn * bk))
    for bn, bk, w in ((64, 128, 4), (32, 256, 4)):
        out.append((f"dot {bn}x{bk} w{w}", gemv_dot._gemv_dot, sig_dot,
                    {"BLOCK_N": bn, "BLOCK_K": bk, "BLOCK_B": 16, "DOT_DTYPE": triton.language.float16}, w, bn * bk))
    for bn, bw, w in ((64, 16, 4), (32, 32, 4), (64, 32, 8)):
        out.append((f"pairs {bn}x{8 * bw} w{w}", gemv_dot._gemv_pairs, sig_pairs,
                    {"BLOCK_N": bn, "BLOCK_W": bw, "BLOCK_B": 16}, w, bn * bw * 8))
    sig_words = {"x2_ptr": "*i32", "packed_ptr": "*i32", "scale_ptr": "*u8", "row_scale_ptr": "*fp32",
                 "y_ptr": "*bf16", "pack_ptr": "*fp16", "ws_ptr": "*fp32", "cnt_ptr": "*i32", "nx_ptr": "*bf16",
                 "w1_ptr": "*fp32", "sc_ptr": "*bf16", "w2_ptr": "*fp32", "xo_ptr": "*bf16", "h_ptr": "*bf16",
                 "hp_ptr": "*fp16", "gcnt_ptr": "*i32", "N": "i32", "kw": "i32", "nblk": "i32", "stride_yb": "i32",
                 "prefetch": "i32", "inter": "i32", "kw_split": "i32", "eps": "fp32",
                 "BLOCK_N": "constexpr", "BLOCK_W": "constexpr", "EVEN": "constexpr", "USE_ASM": "constexpr",
                 "E4M3_CVT": "constexpr", "GLU": "constexpr", "PACK": "constexpr", "STAGES": "constexpr",
                 "X_WIDE": "constexpr", "SPLIT_K": "constexpr",
                 "NORM": "constexpr", "HAS_S": "constexpr", "NPACK": "constexpr", "BLOCK_D": "constexpr",
                 "PDL": "constexpr"}
    plain = {"NORM": False, "HAS_S": False, "NPACK": False, "BLOCK_D": 16}
    for bn, bw, w, stages, split, x_wide in gemv_words.WORDS_CONFIGS:
        out.append((f"words {bn}x{8 * bw} w{w} s{stages} k{split}" + ("" if x_wide else " x4"), gemv_words._gemv_words,
                    sig_words,
                    {"BLOCK_N": bn, "BLOCK_W": bw, "EVEN": True, "USE_ASM": True, "E4M3_CVT": True, "GLU": False,
                     "PACK": False, "STAGES": stages, "X_WIDE": x_wide, "SPLIT_K": split, "PDL": 2, **plain}, w,
                    bn * bw * 8))
    bn, bw, w, stages, split, x_wide = gemv_words.WORDS_CONFIGS[0]  # gate | up with its GeGLU epilogue: the same loop
    out.append((f"words+glu {bn}x{8 * bw} w{w}", gemv_words._gemv_words, sig_words,
                {"BLOCK_N": bn, "BLOCK_W": bw, "EVEN": True, "USE_ASM": True, "E4M3_CVT": True, "GLU": True,
                 "PACK": True,
                 "STAGES": stages, "X_WIDE": x_wide, "SPLIT_K": split, "PDL": 2, **plain}, w, bn * bw * 8))
    sig_rows = {"x2_ptr": "*i32", "packed_ptr": "*i32", "scale_ptr": "*u8", "row_scale_ptr": "*fp32",
                "y_ptr": "*bf16", "B": "i32", "N": "i32", "kw": "i32", "nblk": "i32", "stride_yb": "i32",
                "prefetch": "i32", "BLOCK_N": "constexpr", "BLOCK_W": "constexpr", "ROWS": "constexpr",
                "EVEN": "constexpr", "USE_ASM": "constexpr", "E4M3_CVT": "constexpr", "STAGES": "constexpr",
                "PDL": "constexpr"}
    for nrows in (2, 4):  # batch rows in one weight pass: instructions per weight for all the rows together
        out.append((f"rows x{nrows} 32x256 w4", gemv_rows._gemv_rows, sig_rows,
                    {"BLOCK_N": 32, "BLOCK_W": 32, "ROWS": nrows, "EVEN": True, "USE_ASM": True, "E4M3_CVT": True,
                     "STAGES": 1,
                     "PDL": 2}, 4, 32 * 32 * 8))
    sig_tc = {"x_ptr": "*bf16", "packed_ptr": "*i32", "scale_ptr": "*u8", "row_scale_ptr": "*fp32", "y_ptr": "*bf16",
              "ws_ptr": "*fp32", "cnt_ptr": "*i32", "B": "i32", "N": "i32", "K": "i32", "kw": "i32", "nblk": "i32",
              "stride_xb": "i32", "stride_yb": "i32", "prefetch": "i32", "kw_split": "i32", "inter": "i32",
              "BLOCK_N": "constexpr", "GLU": "constexpr",
              "BLOCK_W": "constexpr", "BLOCK_B": "constexpr", "EVEN": "constexpr", "SPLIT": "constexpr",
              "USE_ASM": "constexpr", "E4M3_CVT": "constexpr", "PDL": "constexpr"}
    # 1-16 rows in one weight pass, on the tensor cores; above, a program per 32-128 rows ("b64": instructions per
    # weight for all of a program's rows, each weight decoded once per program)
    for bn, bw, w, split, bb in gemv_tc.TC_CONFIGS + gemv_tc.TC_WIDE_CONFIGS:
        out.append((f"tc {bn}x{8 * bw} w{w} k{split}" + (f" b{bb}" if bb != gemv_tc.ROW_BLOCK else ""),
                    gemv_tc._gemv_tc, sig_tc,
                    {"BLOCK_N": bn, "BLOCK_W": bw, "BLOCK_B": bb, "EVEN": True, "SPLIT": split > 1,
                     "GLU": False, "USE_ASM": True, "E4M3_CVT": True, "PDL": 2}, w, bn * bw * 8))
    return out


def divisibility(sig: dict, fn) -> dict:
    names = fn.arg_names
    return {(names.index(a),): [["tt.divisibility", 16]] for a, t in sig.items()
            if t.startswith("*") or a in ("N", "K", "kw", "nblk", "stride_xb", "stride_yb", "kw_split")}


def reorder(sig: dict, fn) -> dict:
    return {name: sig[name] for name in fn.arg_names}


def main_loop(sass: str) -> list[str]:
    """The instructions of the longest loop: from the target of a backward branch to the branch itself."""
    addr = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
    lines = [(int(m.group(1), 16), m.group(2)) for m in addr.finditer(sass)]
    best = (0, -1)
    for pc, ins in lines:
        m = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))", ins)
        if m and m.group(1):
            target = int(m.group(1), 16)
            if target < pc and pc - target > best[1] - best[0]:
                best = (target, pc)
    return [ins for pc, ins in lines if best[0] <= pc <= best[1]]


def barriers(loop: list[str]) -> int:
    """The loop's block-wide barriers (BAR.SYNC): every warp of the program waits at each."""
    return sum(1 for ins in loop if re.match(r"(@!?U?P\w+\s+)?BAR\.", ins))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", type=int, default=90)
    args = ap.parse_args()
    target = GPUTarget("cuda", args.arch, 32)
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    # per row: the activation rows a program takes (BLOCK_B, ROWS; 1 for the one-row kernels), what binds once
    # the tensor cores do (batches above 16)
    print(f"{'kernel':26s} {'loop instr':>10s} {'weights/thread':>14s} {'instr/weight':>12s} {'BW ceiling':>10s} "
          f"{'registers':>9s} {'per row':>8s} {'barriers':>8s}")
    for name, fn, sig, consts, warps, weights in cases():
        src = ASTSource(fn=fn, signature=reorder(sig, fn), constexprs=consts, attrs=divisibility(sig, fn))
        k = triton.compile(src, target=target, options={"num_warps": warps})
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(k.asm["cubin"])
            f.flush()
            sass = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True, check=True).stdout
            usage = subprocess.run([cuobjdump, "--dump-resource-usage", f.name], capture_output=True,
                                   text=True).stdout
        regs = re.search(r"REG:(\d+)", usage)
        loop = main_loop(sass)
        n = len(loop)
        per_thread = weights / (32 * warps)
        ipw = n / per_thread
        ceiling = min(1.0, ISSUE_PER_CLOCK / ipw / WEIGHTS_PER_CLOCK_AT_FULL_BW)
        rows = consts.get("BLOCK_B", consts.get("ROWS", 1))
        print(f"{name:26s} {n:10d} {per_thread:14.0f} {ipw:12.2f} {100 * ceiling:9.0f}% "
              f"{regs.group(1) if regs else '?':>9s} {ipw / rows:8.3f} {barriers(loop):8d}")


if __name__ == "__main__":
    main()
