#!/bin/bash
# one device call for the v8 kernel: prebuilt binaries (built off-device, same nvcc 13.0.88),
# decode_check --long --vecinfer-only, attention_bench (batches 1 and 16), sdpa, ncu, sass.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=/tmp/pre; mkdir -p $B && tar -C $B -xJf prebuilt.tar.xz
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
  python3 -c 'import torch; print("torch", torch.__version__)'; } 2>&1 | tee $OUT/env.log
if ! $B/attention_bench - none 0 0 > /tmp/smoke.log 2>&1; then  # prebuilt does not run: build here
  cat /tmp/smoke.log; echo "prebuilt failed, building"; B=/tmp/build-v8
  cmake -S bench/cuda -B $B -DCMAKE_BUILD_TYPE=Release > /tmp/build.log 2>&1 && cmake --build $B -j16 >> /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
fi
timeout 100 $B/decode_check --long --vecinfer-only > $OUT/check.log 2>&1; check_rc=$?
grep -E "FAIL|sink|decode_check" $OUT/check.log | tail -14
export BENCH_BATCHES=${BENCH_BATCHES:-1,16} BENCH_KERNELS=vecinfer-k2v2-v7,vecinfer-k2v2-v8
timeout 100 $B/attention_bench $OUT/ours.csv > $OUT/bench.log 2>&1; cat $OUT/bench.log
PYTHONUNBUFFERED=1 timeout 70 python3 bench/cuda/sdpa_bench.py --ours $OUT/ours.csv --csv /tmp/sdpa.csv --md $OUT/combined.md > $OUT/sdpa.log 2>&1
cat $OUT/combined.md
if [ -n "$NCU" ]; then
  timeout 45 ncu --clock-control none -k regex:V8Decode -s 3 -c 1 --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
    --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum \
    $B/attention_bench - vecinfer-k2v2-v8 16 32768 > $OUT/ncu.txt 2>&1
  grep -E "Duration|Throughput|Ipc|wavefronts|inst_executed|bank|Stall|Eligible" $OUT/ncu.txt | head -24
fi
cuobjdump --dump-sass $B/attention_bench 2>/dev/null | awk '/Function : /{f=/V8Decode/} f' > $OUT/v8.sass; wc -l $OUT/v8.sass
echo "decode_check exit: $check_rc"
