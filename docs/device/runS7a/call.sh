#!/bin/bash
# session 7 call 1: per-block phase timeline of v8 (VQSERVE_BENCH_TIMELINE) at 1x8K, 1x128K, 16x32K.
export OUT=${OUT:-/tmp/out}
export VQSERVE_BENCH_TIMELINE=1
SNAP=. DIR=/nonexistent CHECKS="--vecinfer-only" \
BENCH_KERNELS=vecinfer-k2v2-v8h,vecinfer-k2v2-v8hk \
BENCH_SIZES=1x8192,1x131072,16x32768 timeout 400 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
