#!/bin/bash
# one device call for the v8 fp16-books work (runF16): prebuilt binaries (prebuilt.tar.xz beside
# this script's snapshot root: decode_check, attention_bench, lib/libcudart; built off-device with
# the same nvcc 13.0), attention_bench (BENCH_KERNELS at BENCH_SIZES) beside pytorch sdpa first,
# then decode_check --long --vecinfer-only. logs -> $OUT.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=/tmp/pre; mkdir -p $B && tar -C $B -xJf prebuilt.tar.xz
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv; } 2>&1 | tee $OUT/env.log
if ! $B/attention_bench - none 0 0 > /tmp/smoke.log 2>&1; then  # prebuilt does not run: build here
  cat /tmp/smoke.log; echo "prebuilt failed, building"; B=/tmp/build-f16
  cmake -S bench/cuda -B $B -DCMAKE_BUILD_TYPE=Release > /tmp/build.log 2>&1 && cmake --build $B -j16 >> /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
fi
timeout 45 $B/attention_bench $OUT/ours.csv > $OUT/bench.log 2>&1; echo "bench exit $?"
PYTHONUNBUFFERED=1 timeout 50 python3 bench/cuda/sdpa_bench.py --ours $OUT/ours.csv --csv /tmp/sdpa.csv --md $OUT/combined.md > $OUT/sdpa.log 2>&1
timeout 95 $B/decode_check --long --vecinfer-only > $OUT/check.log 2>&1; check_rc=$?
grep -E "without" $OUT/bench.log
grep -E "FAIL|v8h|decode_check" $OUT/check.log | grep -vE "splits=0 .*ok $" | tail -16
cat $OUT/combined.md
echo "decode_check exit: $check_rc"
