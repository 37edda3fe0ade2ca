#!/bin/bash
# session 7 call 9: v8 merges its own splits (folded_combine.cuh: the last cta of a head group)
# beside the separate split combine kernel (-sep), with timelines; decode_check --long for
# vecinfer and the short sweep of every format.
export OUT=${OUT:-/tmp/out}
export VQSERVE_BENCH_TIMELINE=1
SNAP=. DIR=/nonexistent CHECKS="--long --vecinfer-only;--all-short" \
BENCH_KERNELS=vecinfer-k2v2-hk,vecinfer-k2v2-hk-sep \
BENCH_SIZES=1x8192,1x131072,16x32768,32x32768 timeout 500 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
