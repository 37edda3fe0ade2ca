#!/bin/bash
# session 8 call 1: the commvq warp kernel (commvq_warp_decode.cu) beside the cluster kernel
# (commvq-1-v1) and sdpa; decode_check --long --commvq-only (both kernels); ncu of the warp
# kernel at 16 x 32K.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--long --commvq-only" \
BENCH_KERNELS=commvq-1,commvq-1-v1 \
BENCH_SIZES=1x8192,1x131072,16x8192,16x32768,32x32768 timeout 400 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
timeout 120 ncu --clock-control none -k regex:CommVqWarp -s 3 -c 1 --section SpeedOfLight --section SchedulerStats \
  --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
  /tmp/build-snap/attention_bench - commvq-1 16 32768 > $OUT/ncu.txt 2>&1
grep -E "Duration|DRAM Through|L1/TEX Cache|L2 Cache Thr|Issue Slots|Eligible|stalled_|Registers|Theoretical Occ|Achieved Occ|Shared Memory|Bank" $OUT/ncu.txt | head -40
