"""Compile every Triton kernel of llmsize.measure for a Hopper GPU (sm_90), and for Ampere (sm_80), without
one: Triton's compiler and the ptxas it ships turn each into a cubin, so an error only the real compiler sees
(a layout it cannot lower, inline PTX it rejects) fails here on a CPU machine, not on a borrowed GPU. Run as a
script, with TRITON_INTERPRET unset (the interpreter replaces the kernels by Python stand-ins); prints one line
per kernel (`--registers`: with its registers a thread, the figures quoted for the attention kernel's warps;
`--arch 90,80,89,100,120`: other architectures, the RTX 50 cards' sm_120 among them). Every path of every kernel
for each architecture; the GEMVs' tile configurations a GPU may time, for the first one, each configuration once
with its epilogues taken in turn, so that each epilogue meets every row block and both norm variants
(`--all-configs`: every configuration with every epilogue, for each architecture).
"""
from __future__ import annotations

import os
import sys

os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from llmsize.measure import fused, gemv, gemv_tc, gemv_words, logits, probe  # noqa: E402

P = {"bf16": "*bf16", "f32": "*fp32", "u8": "*u8", "i32": "*i32", "i64": "*i64"}


def kernels(sweeps: bool = True):
    """(name, kernel, argument types, constexprs, warps) of every kernel and path; `sweeps`: also each
    configuration a GPU may time (the tiles change no instruction a path uses: compiled for the first
    architecture only, unless --all-configs)."""
    gemv_args = {"x_ptr": P["bf16"], "packed_ptr": P["u8"], "scale_ptr": P["u8"], "row_scale_ptr": P["f32"],
                 "y_ptr": P["bf16"], "N": "i32", "K": "i32", "stride_xb": "i32", "stride_yb": "i32"}
    yield ("gemv triton", gemv._gemv_fixed, gemv_args, {"BLOCK_N": 32, "BLOCK_K": 256}, 4)
    words = {"x2_ptr": P["i32"], "packed_ptr": P["i32"], "scale_ptr": P["u8"], "row_scale_ptr": P["f32"],
             "y_ptr": P["bf16"], "pack_ptr": "*fp16", "ws_ptr": P["f32"], "cnt_ptr": P["i32"], "nx_ptr": P["bf16"],
             "w1_ptr": P["f32"], "sc_ptr": P["bf16"], "w2_ptr": P["f32"], "xo_ptr": P["bf16"], "h_ptr": P["bf16"],
             "hp_ptr": "*fp16", "gcnt_ptr": P["i32"], "N": "i32", "kw": "i32", "nblk": "i32", "stride_yb": "i32",
             "prefetch": "i32", "inter": "i32", "kw_split": "i32", "eps": "fp32"}
    plain = {"NORM": False, "HAS_S": False, "NPACK": False, "BLOCK_D": 16}
    for even in (True, False):
        for pdl in (1, 2):  # wait first; early (L2 prefetch before the wait, next kernel let in after the loop)
            for glu, pack in ((False, False), (True, True), (True, False)):
                yield (f"gemv words even={even} pdl={pdl} glu={glu} pack={pack}", gemv_words._gemv_words, words,
                       {"BLOCK_N": 64, "BLOCK_W": 32, "EVEN": even, "USE_ASM": True, "PDL": pdl, "GLU": glu,
                        "PACK": pack, "STAGES": 1, "X_WIDE": True, "SPLIT_K": 1, **plain}, 8)
    for even in (True, False):  # the activations in 4-byte loads, masked (ragged shapes) and not
        yield (f"gemv words even={even} x_wide=False", gemv_words._gemv_words, words,
               {"BLOCK_N": 64, "BLOCK_W": 32, "EVEN": even, "USE_ASM": True, "PDL": 0, "GLU": False, "PACK": False,
                "STAGES": 1, "X_WIDE": False, "SPLIT_K": 1, **plain}, 8)
    # every configuration a GPU may time: the tiles change no instruction a path uses (the paths above compile each
    # epilogue at one tile), so each tile compiles once, its epilogue in turn (all of them with --all-configs)
    for i, (bn, bw, warps, stages, split, x_wide) in enumerate(gemv_words.WORDS_CONFIGS if sweeps else ()):
        for epilogue in ("plain", "glu", "norm") if ALL_CONFIGS else (("plain", "glu", "norm")[i % 3],):
            if epilogue != "norm":
                glu = epilogue == "glu"
                yield (f"gemv words {bn}x{bw} w{warps} stages={stages} split={split} x_wide={x_wide} glu={glu}",
                       gemv_words._gemv_words, words,
                       {"BLOCK_N": bn, "BLOCK_W": bw, "EVEN": True, "USE_ASM": True, "PDL": 2, "GLU": glu,
                        "PACK": glu, "STAGES": stages, "X_WIDE": x_wide, "SPLIT_K": split, **plain}, warps)
                continue
            # o and down with the residual norm in the epilogue (h packed, or plain with the layer scalar)
            yield (f"gemv words {bn}x{bw} w{warps} stages={stages} split={split} x_wide={x_wide} norm",
                   gemv_words._gemv_words,
                   words, {"BLOCK_N": bn, "BLOCK_W": bw, "EVEN": True, "USE_ASM": True, "PDL": 2, "GLU": False,
                           "PACK": False, "STAGES": stages, "X_WIDE": x_wide, "SPLIT_K": split, "NORM": True,
                           "HAS_S": split > 2,
                           "NPACK": split <= 2, "BLOCK_D": 4096}, warps)
    tc = {"x_ptr": P["bf16"], "packed_ptr": P["i32"], "scale_ptr": P["u8"], "row_scale_ptr": P["f32"],
          "y_ptr": P["bf16"], "ws_ptr": P["f32"], "cnt_ptr": P["i32"], "B": "i32", "N": "i32", "K": "i32",
          "kw": "i32", "nblk": "i32", "stride_xb": "i32", "stride_yb": "i32", "prefetch": "i32", "kw_split": "i32",
          "inter": "i32"}
    # every configuration the GPU may time (up to 16 rows and above), and the ragged path
    for i, (bn, bw, warps, split, bb) in enumerate(gemv_tc.TC_CONFIGS + gemv_tc.TC_WIDE_CONFIGS if sweeps else ()):
        for glu in (False, True) if ALL_CONFIGS else (i % 2 == 1,):
            yield (f"gemv tc {bn}x{bw} w{warps} split={split} rows={bb} glu={glu}", gemv_tc._gemv_tc, tc,
                   {"BLOCK_N": bn, "BLOCK_W": bw, "BLOCK_B": bb, "EVEN": True, "SPLIT": split > 1,
                    "GLU": glu, "USE_ASM": True}, warps)
    for bb in (gemv_tc.ROW_BLOCK, 64):
        yield (f"gemv tc ragged rows={bb}", gemv_tc._gemv_tc, tc,
               {"BLOCK_N": 32, "BLOCK_W": 8, "BLOCK_B": bb, "EVEN": False, "SPLIT": True, "GLU": True,
                "USE_ASM": True}, 4)
    yield ("pack_x", gemv_words._pack_x_kernel,
           {"x_ptr": P["bf16"], "out_ptr": P["i32"], "K": "i32", "stride_xb": "i32"}, {"BLOCK": 256}, 4)
    attn = {"qkv_ptr": P["bf16"], "qn_ptr": P["f32"], "kn_ptr": P["f32"], "cos_ptr": P["f32"], "sin_ptr": P["f32"],
            "pos_ptr": P["i64"], "kc_ptr": P["bf16"], "vc_ptr": P["bf16"], "acc_ptr": P["f32"], "ml_ptr": P["f32"],
            "cnt_ptr": P["i32"], "out_ptr": P["bf16"], "pack_ptr": "*fp16", "stride_out": "i32",
            "stride_qkv": "i32", "stride_cb": "i32", "stride_ch": "i32", "stride_cs": "i32", "k_off": "i32",
            "v_off": "i32", "slots": "i32", "nsplit": "i32", "eps": "fp32"}
    for kvh, g, hd in ((8, 2, 256), (1, 16, 512)):  # sliding and full layers
        for combine, pack in ((False, False), (True, True), (True, False)):  # the combine folded in (sliding)
            if combine and kvh == 1:
                continue
            yield (f"attention {kvh}x{g}x{hd} combine={combine} pack={pack}", fused._attn_split_kernel, attn,
                   {"KVH": kvh, "G": g, "HALF": hd // 2, "SPLIT": 32 if kvh > 1 else 64,  # as on an H200
                    "BLOCK_S": fused.ATTN_BLOCK_S,
                    "IEEE": False, "PREFETCH": True, "COMBINE": combine, "CHUNK": 32, "PACK": pack}, fused.ATTN_WARPS)
        for pack in (False, True):
            yield (f"combine {kvh}x{g}x{hd} pack={pack}", fused._attn_combine_kernel,
                   {"acc_ptr": P["f32"], "ml_ptr": P["f32"], "out_ptr": P["bf16"], "pack_ptr": "*fp16",
                    "stride_out": "i32", "nsplit": "i32"},
                   {"NH": 16, "KVH": kvh, "G": g, "HD": hd, "CHUNK": 8192 // hd, "PACK": pack}, 4)
    attn32 = dict(attn, qkv_ptr=P["f32"], kc_ptr=P["f32"], vc_ptr=P["f32"])  # float32 caches: IEEE dots
    yield ("attention fp32", fused._attn_split_kernel, attn32,
           {"KVH": 2, "G": 2, "HALF": 16, "SPLIT": 64, "BLOCK_S": 32, "IEEE": True, "PREFETCH": False,
            "COMBINE": True, "CHUNK": 2, "PACK": False, "PDL": 1}, 4)
    for pack in (False, True):
        yield (f"residual_norm pack={pack}", fused._residual_norm_kernel,
               {"x_ptr": P["bf16"], "o_ptr": P["bf16"], "w1_ptr": P["f32"], "s_ptr": P["bf16"], "w2_ptr": P["f32"],
                "x_out_ptr": P["bf16"], "h_out_ptr": P["bf16"], "pack_ptr": "*fp16", "D": "i32", "eps": "fp32"},
               {"BLOCK": 4096, "HAS_O": True, "HAS_S": True, "PACK": pack}, 8)
        yield (f"geglu pack={pack}", fused._geglu_kernel,
               {"gu_ptr": P["bf16"], "out_ptr": P["bf16"], "pack_ptr": "*fp16", "inter": "i32", "stride_gu": "i32",
                "stride_out": "i32"}, {"BLOCK": 1024, "PACK": pack}, 4)
        yield (f"embed_norm pack={pack}", fused._embed_norm_kernel,
               {"tok_ptr": P["i64"], "e_ptr": P["bf16"], "w_ptr": P["f32"], "x_out_ptr": P["bf16"],
                "h_out_ptr": P["bf16"], "pack_ptr": "*fp16", "D": "i32", "scale": "fp32", "eps": "fp32"},
               {"BLOCK": 4096, "PACK": pack}, 8)
    tail = {"y_ptr": P["bf16"], "logits_ptr": P["f32"], "key_ptr": "*u64", "cnt_ptr": P["i32"], "tok_ptr": P["i64"],
            "pos_ptr": P["i64"], "B": "i32", "V": "i32", "stride_y": "i32", "cap": "fp32"}
    for bb in (16, logits.MAX_CAP_ROWS):  # the soft-cap and tokens after the lm_head GEMM
        yield (f"cap_argmax rows={bb}", logits._cap_argmax_kernel, tail,
               {"BLOCK": logits.CAP_BLOCK, "BLOCK_B": bb, "ADVANCE": True}, 4)

def probe_kernels():
    for per_sm, warps, block, stages in probe.PROBE_SHAPES:
        yield (f"probe read {block} x {warps} warps, {stages} stage(s)", probe._read_kernel,
               {"x_ptr": P["i32"], "out_ptr": P["i32"], "n": "i32", "per_program": "i32"},
               {"BLOCK": block, "STAGES": stages}, warps)


REGS = "--registers" in sys.argv  # also print registers a thread and spills (cuobjdump --dump-resource-usage)
# --arch 90,80 (the default) or more: 89 (Ada: RTX 40, L40S; the e4m3 conversion, no PDL), 100 (B200), 120
# (RTX 50, the seed's 5060 Ti: PDL and the L2 prefetch as on Hopper). All five compiled under Triton 3.9 on
# 2026-11-30, 130 kernels each, none failing.
ALL_CONFIGS = "--all-configs" in sys.argv  # the sweep for every architecture, each configuration with every epilogue
ARCHS = tuple(int(a) for a in sys.argv[sys.argv.index("--arch") + 1].split(",")) if "--arch" in sys.argv else (90, 80)


def _registers(k) -> str:
    import re
    import subprocess
    import tempfile
    from pathlib import Path

    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"])
        f.flush()
        out = subprocess.run([str(cuobjdump), "--dump-resource-usage", f.name], capture_output=True,
                             text=True).stdout
    m = re.search(r"REG:(\d+).*?LOCAL:(\d+)", out)
    return f", {m.group(1)} registers, {m.group(2)} B local (spills)" if m else ""


def main() -> int:
    """Every kernel for sm_90 as a Hopper runs it (PDL early unless the case says otherwise); then for sm_80
    (Ampere: no griddepcontrol, no bulk prefetch) with PDL off, as launch.py launches them below compute
    capability 9; or for the architectures --arch names, each as launch.py would launch there."""
    failed = 0
    for arch in ARCHS:
        target = GPUTarget("cuda", arch, 32)
        for name, fn, args, consts, warps in [*kernels(arch == ARCHS[0] or ALL_CONFIGS), *probe_kernels()]:
            sig = {a: (args[a] if a in args else "constexpr") for a in fn.arg_names}
            if "E4M3_CVT" in fn.arg_names:  # the e4m3 conversion instruction exists from sm_89 (gemv_words)
                consts = dict(consts, E4M3_CVT=arch >= 89)
            if "PDL" in fn.arg_names:
                consts = dict(consts, PDL=consts.get("PDL", 2) if arch >= 90 else 0)
            if arch < 90 and consts.get("PREFETCH"):
                consts = dict(consts, PREFETCH=False)  # launch.py prefetches only in PDL early mode
            try:
                k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=target,
                                   options={"num_warps": warps})
                print(f"ok   sm_{arch} {name}: {len(k.asm['cubin'])} B of cubin{_registers(k) if REGS else ''}")
            except Exception as e:  # report every kernel, then fail
                failed += 1
                print(f"FAIL sm_{arch} {name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
