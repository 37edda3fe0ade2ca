#!/bin/bash
# session 8 call 5: after the review refactor (BeginSplitBlock in dense_attention.cuh, shared by
# the commvq warp, fp16 staged, vecinfer lut / mma and element-wise kernels): decode_check
# --long over every format, and the default kernels beside sdpa.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--long" \
BENCH_KERNELS=fp16-paged,kivi-k2v2,vecinfer-k2v2-hk,vecinfer-k1v1,commvq-1 \
BENCH_SIZES=1x8192,1x131072,16x32768 timeout 500 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
