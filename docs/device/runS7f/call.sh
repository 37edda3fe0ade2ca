#!/bin/bash
# session 7 call 6: the final code, every default kernel beside sdpa in one call, and
# decode_check --long over every format.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--long" \
BENCH_KERNELS=fp16-paged,kivi-k2v2,kivi-k4v4,vecinfer-k2v2-hk,vecinfer-k2v2,vecinfer-k2v2-v7,vecinfer-k1v1,vecinfer-k3v3,commvq-1 \
BENCH_SIZES=1x8192,1x131072,16x8192,16x32768,32x32768 timeout 560 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
