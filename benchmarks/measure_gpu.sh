#!/usr/bin/env bash
# On a CUDA machine: GPU tests, GEMV microbenchmark, then `llmsize measure` for bf16 and nvfp4.
# Works in $WORK (default /tmp/llmsize-gpu); leaves three files in $OUT (default benchmarks/out): the Markdown
# block for benchmarks/RESULTS.md, the whole console log, and a tarball of every log and JSON (the device
# tool brings back at most 8 files).
#
#   bash benchmarks/measure_gpu.sh
#
# Steps run most important first and everything printed streams to console.log, so a run cut short by the
# device's 10-minute limit still brings back what it measured (use timeout_s ~570 on the device tool).
#
# A machine without registry access (the workplace's device) needs pydantic carried as wheels in .whl/:
# run benchmarks/fetch_device_wheels.sh here first and carry .whl; if .whl/ exists it is installed to /tmp/site.
set -uo pipefail
cd "$(dirname "$0")/.."
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
timeout 150 $PY -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tail -15 | tee "$OUT/gpu-tests.log"
timeout 120 $PY benchmarks/gemv_bench.py --best-out "$OUT/best-gemv.txt" 2>&1 | tee "$OUT/gemv-bench.txt"
# the whole loop runs with the kernel the microbenchmark found fastest at batch 1 (triton if it found none)
BEST=$(cat "$OUT/best-gemv.txt" 2>/dev/null || echo triton)
echo "fastest batch-1 NVFP4 kernel: $BEST"
# one model, many ways to run its step (PDL modes, L2 prefetch sizes, kernels), each checked, then timed
timeout 180 $PY benchmarks/step_variants.py --out "$OUT/step-variants.md" 2>&1 | tee "$OUT/step-variants.log"
for q in bf16 nvfp4default nvfp4 bf16fused nvfp4triton nvfp4compiled; do
  args="--quant $q --no-fused"  # the eager step: ~100 torch ops per layer between the GEMMs
  [ "$q" = nvfp4 ] && args="--quant nvfp4 --gemv $BEST --no-fused"
  [ "$q" = nvfp4default ] && args=""  # plain `llmsize measure`: self-checked choices (words, fused, PDL early)
  [ "$q" = nvfp4compiled ] && args="--quant nvfp4 --gemv $BEST --compile"  # inductor fuses the small ops
  [ "$q" = bf16fused ] && args="--quant bf16 --fused"  # the baseline with the same kernels between its GEMMs
  if [ "$q" = nvfp4triton ]; then  # the CUDA-core kernel in the whole loop, when it was not the fastest
    [ "$BEST" = triton ] && continue
    args="--quant nvfp4 --gemv triton --no-fused"
  fi
  probe=""; [ "$q" = bf16 ] || probe="--no-probe"  # the probe once (measure_summary.py carries it over)
  timeout 150 $PY -m llmsize measure $args $probe --json --save "$OUT/measure-$q.json" > /dev/null \
    2> "$OUT/measure-$q.err"
  echo "measure $q: exit $?"; tail -3 "$OUT/measure-$q.err"
  [ -f "$OUT/measure-$q.json" ] && $PY -c "
import json, sys
from rich.console import Console
from llmsize.render.measure_report import render_measure
render_measure(json.load(open('$OUT/measure-$q.json')), Console(width=100))" | tee "$OUT/measure-$q.txt"
done
ls "$OUT"/measure-*.json >/dev/null 2>&1 && $PY benchmarks/measure_summary.py "$OUT"/measure-*.json \
  | tee "$OUT/RESULTS-append.md"
[ -f "$OUT/step-variants.md" ] && { echo; cat "$OUT/step-variants.md"; } >> "$OUT/RESULTS-append.md"
# the batch sweep (issue 5's continuous-batching regime) and the profile, if time is left, with the fused
# step if it beat the eager one
FUSED=""
$PY -c "
import json, sys
tok = {q: json.load(open(f'$OUT/measure-{q}.json'))['decode']['tok_s'] for q in ('nvfp4', 'nvfp4default')}
fused = json.load(open('$OUT/measure-nvfp4default.json'))['run']['fused']
sys.exit(0 if fused and tok['nvfp4default'] > tok['nvfp4'] else 1)" 2>/dev/null && FUSED="--fused"
echo "batch sweep and profile with: --gemv $BEST $FUSED"
timeout 200 $PY benchmarks/decode.py --save-dir "$OUT" --batches 1,4,16 --gemv "$BEST" $FUSED 2>&1 \
  | tee -a "$OUT/RESULTS-append.md"
# where the step's time goes (kernel count, top kernels), if time is left
timeout 120 $PY benchmarks/profile_decode.py --gemv "$BEST" $FUSED 2>&1 | tee "$OUT/profile-nvfp4.txt"
cp "$OUT/RESULTS-append.md" "$FINAL/" 2>/dev/null
tar czf "$FINAL/all-logs.tgz" -C "$OUT" . && echo "logs: $FINAL/all-logs.tgz"
