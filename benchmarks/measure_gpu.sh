#!/usr/bin/env bash
# On a CUDA machine: `llmsize measure` for nvfp4 and bf16, the GPU tests, the GEMV microbenchmark, every way
# to run the decode step on one built model, then the other measure variants, the batch sweep and a profile.
# Works in $WORK (default /tmp/llmsize-gpu); leaves three files in $OUT (default benchmarks/out): the Markdown
# block for benchmarks/RESULTS.md, the whole console log, and a tarball of every log and JSON, repacked after
# each stage (the device tool brings back at most 8 files, and what a killed run left in $OUT).
#
#   bash benchmarks/measure_gpu.sh [STAGE ...]
#
# Stages, in this order (default: all): headline (plain `llmsize measure` and the bf16 baseline), tests (the GPU
# tests), gemv (the GEMV microbenchmark), ncu (the gate | up GEMVs under Nsight Compute: benchmarks/ncu_gemv.py),
# variants (step_variants.py), others (the other measure variants),
# sweep (decode.py at batch 1, 4, 16), crossover (decode.py at 128 tokens, batch 1 to 256: where the loop
# leaves the memory roof, against plan's ridge), profile. A second device call can pick up where a first one was cut off,
# e.g. `bash benchmarks/measure_gpu.sh sweep profile`.
#
# Steps run most important first (the headline: plain `llmsize measure` and the bf16 baseline), everything
# printed streams to console.log and the Markdown block is rewritten after each stage, so a run cut short by
# the device's 10-minute limit still brings back what it measured (use timeout_s ~570 on the device tool).
#
# A machine without registry access needs pydantic carried as wheels in .whl/:
# run benchmarks/fetch_device_wheels.sh here first and carry .whl; if .whl/ exists it is installed to /tmp/site.
# A copy of the tree names its commit in LLMSIZE_COMMIT, for the JSON and the RESULTS block (it wins over a .git
# the copy carries, which may be older): `LLMSIZE_COMMIT=$(git rev-parse HEAD)` here, pasted into the call.
set -uo pipefail
cd "$(dirname "$0")/.."
ALL="headline tests gemv ncu variants others sweep crossover profile"
STAGES=" ${*:-$ALL} "
for st in $STAGES; do
  case " $ALL " in *" $st "*) ;; *) echo "measure_gpu.sh: unknown stage \`$st\`; use some of: $ALL" >&2; exit 2;; esac
done
want() { case "$STAGES" in *" $1 "*) return 0;; *) return 1;; esac; }
FINAL=${OUT:-benchmarks/out}
OUT=${WORK:-/tmp/llmsize-gpu}
mkdir -p "$OUT" "$FINAL"
exec > >(tee "$FINAL/console.log") 2>&1
PY=${PYTHON:-python3}
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
$PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee "$OUT/versions.txt"
COMMIT=${LLMSIZE_COMMIT:-$(git rev-parse HEAD 2>/dev/null)}  # a copy of the tree: say it in the call
echo "commit: ${COMMIT:-unknown (run as LLMSIZE_COMMIT=<the commit> bash benchmarks/measure_gpu.sh ...)}" \
  | tee -a "$OUT/versions.txt"

T0=$SECONDS TS=$SECONDS
mark() {  # how long each stage took, for planning the next device call (the device's limits are minutes); and
  # the logs and JSON so far packed into $FINAL, so a run the device's timeout kills still brings them back
  want "$1" || return 0
  echo "== stage $1: $((SECONDS - TS)) s (since start: $((SECONDS - T0)) s)" | tee -a "$OUT/stage-times.txt"
  tar czf "$FINAL/all-logs.tgz" -C "$OUT" . 2>/dev/null
  TS=$SECONDS
}

summary() {  # the Markdown block from every measure run so far, then the step variants if they ran
  : > "$OUT/RESULTS-append.md"
  ls "$OUT"/measure-*.json >/dev/null 2>&1 && $PY benchmarks/measure_summary.py "$OUT"/measure-*.json \
    > "$OUT/RESULTS-append.md"
  [ -f "$OUT/step-variants.md" ] && { echo; cat "$OUT/step-variants.md"; } >> "$OUT/RESULTS-append.md"
  [ -f "$OUT/decode-sweep.md" ] && { echo; cat "$OUT/decode-sweep.md"; } >> "$OUT/RESULTS-append.md"
  [ -f "$OUT/decode-crossover.md" ] && { echo; cat "$OUT/decode-crossover.md"; } >> "$OUT/RESULTS-append.md"
  cp "$OUT/RESULTS-append.md" "$FINAL/" 2>/dev/null
}

run_measure() {  # name, then the arguments of `llmsize measure`
  local q=$1; shift
  local t=$SECONDS
  timeout 150 $PY -m llmsize measure "$@" --json --save "$OUT/measure-$q.json" > /dev/null 2> "$OUT/measure-$q.err"
  echo "measure $q ($*): exit $? after $((SECONDS - t)) s"; tail -3 "$OUT/measure-$q.err"
  [ -f "$OUT/measure-$q.json" ] && $PY -c "
import json
from rich.console import Console
from llmsize.render.measure_report import render_measure
render_measure(json.load(open('$OUT/measure-$q.json')), Console(width=100))" | tee "$OUT/measure-$q.txt"
  summary
}

# 1. the headline: what a user gets from plain `llmsize measure` (self-checked choices: the word kernel, the
#    fused step, no PDL: launch.py says why), with the probe; then the bf16 baseline it must beat, run the
#    same way (cuBLAS GEMMs, the same fused kernels between them; --fallback: the eager step if the fused one
#    fails its check, as it did on 2026-12-04, said in the report, so that a baseline is measured either way)
if want headline; then
  run_measure nvfp4default
  run_measure bf16 --quant bf16 --no-probe --fallback
fi
mark headline
# 2. the kernels on the card against their references
if want tests; then  # -v into a log as it runs, each outcome also on the console (which streams to $FINAL): a
  # run cut by a timeout, this one's or the device's, still names each test's outcome so far
  timeout 180 $PY -m pytest -vv -rfE -p no:cacheprovider tests/gpu 2>&1 | tee "$OUT/gpu-tests-verbose.log" \
    | grep -E "(PASSED|FAILED|ERROR|SKIPPED)" | cut -c1-160
  { grep -E "(FAILED|ERROR)" "$OUT/gpu-tests-verbose.log" | head -30; tail -3 "$OUT/gpu-tests-verbose.log"; } \
    | tee "$OUT/gpu-tests.log"
fi
mark tests
# 3. the GEMVs alone (each config timed per shape; DRAM-bound: each call reads another copy of the matrix)
want gemv && timeout 100 $PY benchmarks/gemv_bench.py --best-out "$OUT/best-gemv.txt" 2>&1 | tee "$OUT/gemv-bench.txt"
mark gemv
# 3b. why the gate | up GEMVs reach the bandwidth they do: DRAM throughput, issue slots, stall reasons
if want ncu; then
  if command -v ncu > /dev/null; then
    timeout 150 ncu --nvtx --nvtx-include "profiled/" --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy \
      --section LaunchStats $PY benchmarks/ncu_gemv.py > "$OUT/ncu-gemv.txt" 2>&1
    echo "ncu: exit $?"
    grep -E "tiles:|launched|^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Occupancy|\
Registers Per|Warp Cycles Per Issued|Stall" "$OUT/ncu-gemv.txt" | head -120
  else
    echo "ncu: not on this machine"
  fi
fi
mark ncu
FALLBACK=words  # not benched in this call: the default's kernel on Hopper; benched and none won: the byte kernel
want gemv && FALLBACK=triton
BEST=$(cat "$OUT/best-gemv.txt" 2>/dev/null || echo $FALLBACK)
echo "batch-1 NVFP4 kernel for what follows: $BEST"
# 4. one model, many ways to run its step (PDL modes, L2 prefetch sizes, kernels), each checked, then timed
if want variants; then
  timeout 150 $PY benchmarks/step_variants.py --out "$OUT/step-variants.md" 2>&1 | tee "$OUT/step-variants.log"
  summary
fi
mark variants
# 5. the other whole-loop variants: the eager step, the byte kernel, inductor, the baseline fused
if want others; then
  run_measure nvfp4 --quant nvfp4 --gemv "$BEST" --no-fused --no-probe
  run_measure bf16eager --quant bf16 --no-fused --no-probe
  [ "$BEST" = triton ] || run_measure nvfp4triton --quant nvfp4 --gemv triton --no-probe
  run_measure nvfp4compiled --quant nvfp4 --gemv "$BEST" --compile --no-probe
fi
mark others
# 6. the batch sweep (issue 5's continuous-batching regime) and where the step's time goes
FUSED="--fused"  # unless the headline run (when it ran) fell back to the eager step
[ -f "$OUT/measure-nvfp4default.json" ] && ! $PY -c "
import json, sys
sys.exit(0 if json.load(open('$OUT/measure-nvfp4default.json'))['run']['fused'] else 1)" 2>/dev/null && FUSED=""
if want sweep; then
  echo "batch sweep with: --gemv $BEST $FUSED"
  timeout 300 $PY benchmarks/decode.py --save-dir "$OUT" --batches 1,4,16 --gemv "$BEST" $FUSED 2>&1 \
    | tee "$OUT/decode-sweep.log" | sed -n '/^## decode.py/,$p' > "$OUT/decode-sweep.md"
  summary
fi
mark sweep
if want crossover; then  # the word family (auto: if its self-checks pass), the only NVFP4 path above 16 rows
  timeout 300 $PY benchmarks/decode.py --save-dir "$OUT" --context 128 --tokens 64 --batches 1,16,32,64,128,256 \
    --no-baseline --gemv auto $FUSED 2>&1 | tee "$OUT/decode-crossover.log" | sed -n '/^## decode.py/,$p' \
    > "$OUT/decode-crossover.md"
  summary
fi
mark crossover
if want profile; then
  timeout 120 $PY benchmarks/profile_decode.py --gemv "$BEST" $FUSED 2>&1 | tee "$OUT/profile-nvfp4.txt"
  timeout 120 $PY benchmarks/profile_decode.py --gemv "$BEST" $FUSED --batch 16 2>&1 | tee "$OUT/profile-nvfp4-b16.txt"
  # without PDL every kernel starts after the one before has ended: the gaps a persistent kernel would close
  LLMSIZE_PDL=0 timeout 120 $PY benchmarks/profile_decode.py --gemv "$BEST" $FUSED 2>&1 \
    | tee "$OUT/profile-nvfp4-nopdl.txt"
fi
mark profile
tar czf "$FINAL/all-logs.tgz" -C "$OUT" . && echo "logs: $FINAL/all-logs.tgz"
