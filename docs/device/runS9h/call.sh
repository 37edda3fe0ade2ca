#!/bin/bash
# session 9 call 13: the benches after their timing helpers moved to bench/cuda/gpu_timing.h:
# smem_floor_bench and attention_bench (vecinfer-k2v2-hk, commvq-1) beside sdpa at 1 x 128K and
# 16 x 32K; decode_check's short sweep of every format on this tree's kernels.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--all-short" FLOOR=1 \
BENCH_KERNELS=vecinfer-k2v2-hk,commvq-1 BENCH_SIZES=1x131072,16x32768 \
timeout 400 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
