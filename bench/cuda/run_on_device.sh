#!/bin/bash
# one call on the lent h200: build the cuda kernels with the machine's own nvcc/cmake, run the
# correctness sweep, then our benchmark and pytorch sdpa side by side. logs go to $OUT.
# usage (from the repo root): bash bench/cuda/run_on_device.sh [--no-long] [--no-bench]
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LONG=--long; BENCH=1
for a in "$@"; do
  case $a in --no-long) LONG= ;; --no-bench) BENCH=0 ;; esac
done
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
  nvcc --version | tail -2; python3 -c 'import torch; print("torch", torch.__version__)'
} 2>&1 | tee "$OUT/env.log"
cmake -S bench/cuda -B /tmp/build-dev -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
  cmake --build /tmp/build-dev -j16 >> "$OUT/build.log" 2>&1
rc=$?
grep -E "error|registers|spill|smem|Compiling entry" "$OUT/build.log" | grep -B1 -E "error|spill [1-9]|registers" | head -150 > "$OUT/ptxas.log"
if [ $rc -ne 0 ]; then grep -E -A3 "error" "$OUT/build.log" | head -60; echo "BUILD FAILED"; exit 1; fi
echo "build ok"
/tmp/build-dev/decode_check $LONG 2>&1 | tee "$OUT/check.log" | tail -40
check_rc=$?
if [ "$BENCH" = 1 ]; then
  /tmp/build-dev/attention_bench "$OUT/ours.csv" 2>&1 | tee "$OUT/bench.log"
  PYTHONUNBUFFERED=1 python3 bench/cuda/sdpa_bench.py --ours "$OUT/ours.csv" --csv "$OUT/sdpa.csv" \
    --md "$OUT/combined.md" 2>&1 | tee "$OUT/sdpa.log"
fi
echo "decode_check exit: $check_rc"
