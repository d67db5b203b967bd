#!/usr/bin/env bash
# Before a GPU run on an H200 machine (Python 3.12, no registry, no pydantic in its image): download
# the wheels llmsize needs there into .whl/ (ignored by git), then copy .whl/ to the GPU machine with the tree;
# benchmarks/measure_gpu.sh installs them into /tmp/site.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir -p .whl
# pydantic pins its core exactly (pydantic 2.14.4 -> pydantic-core 2.50.5)
for spec in "pydantic==2.14.4" "pydantic-core==2.50.5" "annotated-types" "typing-inspection" "typing-extensions"; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d .whl "$spec"
done
ls -la .whl
