#!/bin/bash
# one call on the lent h200: build the cuda kernels with the machine's own nvcc/cmake, run the
# correctness sweep, then our benchmark and pytorch sdpa side by side. logs go to $OUT.
# usage (from the repo root): bash bench/cuda/run_on_device.sh [--no-long] [--no-bench]
#   [--commvq-long] [--gtest BUNDLE.tar.xz]
#   --commvq-long: decode_check of commvq alone, 128k cases included (the other formats are
#     covered by the gtest's float64 cases when --gtest runs); --gtest: also run cuda_decode_attention_test from a bundle
#     built off-device (binary + lib/ of its shared libraries; the machine has no abseil) by
#     bench/cuda/make_gtest_bundle.sh.
#   env BENCH_KERNELS=a,b,...: time only these kernels (attention_bench names).
#   env BENCH_SIZES=16x32768,1x131072,...: only these batch x context sizes (ours and sdpa).
#   env CHECK_FLAGS="...": extra decode_check flags (e.g. --vecinfer-only).
#   env NCU_CASE="kernel batch context": also profile that one attention_bench case (ncu.txt).
set -o pipefail
OUT=${OUT:-/tmp/out}
B=${BUILD_DIR:-/tmp/build-dev}  # env BUILD_DIR: build folder on the device
mkdir -p "$OUT"
LONG=--long; BENCH=1; CVQ_LONG=0; GTEST=
while [ $# -gt 0 ]; do
  case $1 in
    --no-long) LONG= ;;
    --no-bench) BENCH=0 ;;
    --commvq-long) LONG=; CVQ_LONG=1 ;;
    --gtest) GTEST=$2; shift ;;
  esac
  shift
done
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
  nvcc --version | tail -2; python3 -c 'import torch; print("torch", torch.__version__)'
} 2>&1 | tee "$OUT/env.log"
cmake -S bench/cuda -B $B -DCMAKE_BUILD_TYPE=Release > /tmp/build.log 2>&1 &&
  cmake --build $B -j16 >> /tmp/build.log 2>&1
rc=$?
grep -E "error|registers|spill|smem|Compiling entry" /tmp/build.log | grep -B1 -E "error|spill [1-9]|registers" | head -150 >> "$OUT/env.log"
if [ $rc -ne 0 ]; then grep -E -A3 "error" /tmp/build.log | head -60; cp /tmp/build.log "$OUT/"; echo "BUILD FAILED"; exit 1; fi
echo "build ok"
if [ "$CVQ_LONG" = 1 ]; then
  $B/decode_check --long --commvq-only 2>&1 | tee "$OUT/check.log" | tail -40
else
  $B/decode_check $LONG $CHECK_FLAGS 2>&1 | tee "$OUT/check.log" | tail -40
fi
check_rc=$?
if [ -n "$GTEST" ]; then
  mkdir -p /tmp/gt && python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall('/tmp/gt')" "$GTEST"
  LD_LIBRARY_PATH=/tmp/gt/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH /tmp/gt/cuda_decode_attention_test > "$OUT/gtest.log" 2>&1
  echo "cuda_decode_attention_test exit: $?"; grep -E "FAILED|PASSED|SKIPPED" "$OUT/gtest.log" | tail -8
fi
if [ "$BENCH" = 1 ]; then
  $B/attention_bench "$OUT/ours.csv" 2>&1 | tee "$OUT/bench.log"
  PYTHONUNBUFFERED=1 python3 bench/cuda/sdpa_bench.py --ours "$OUT/ours.csv" --csv /tmp/sdpa.csv \
    --md "$OUT/combined.md" 2>&1 | tee "$OUT/sdpa.log"
fi
if [ -n "$NCU_CASE" ]; then
  ncu --clock-control none -k regex:VecInfer -s 5 -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section Occupancy \
    --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum \
    $B/attention_bench - $NCU_CASE > "$OUT/ncu.txt" 2>&1
  grep -E "Duration|Throughput|Busy|Ipc|bank|wavefronts|inst_executed" "$OUT/ncu.txt" | head -30
fi
echo "decode_check exit: $check_rc"
