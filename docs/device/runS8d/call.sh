#!/bin/bash
# session 8 call 4: the final code; decode_check --long over every format, the default kernels
# beside sdpa with the commvq warp kernel (commvq-1), the cluster kernel (commvq-1-v1) and
# commvq-2 (cluster kernel at head_dim 128).
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--long" \
BENCH_KERNELS=fp16-paged,kivi-k2v2,vecinfer-k2v2-hk,commvq-1,commvq-1-v1,commvq-2 \
BENCH_SIZES=1x8192,1x131072,16x8192,16x32768,32x32768 timeout 560 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
