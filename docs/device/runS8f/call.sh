#!/bin/bash
# session 8 call 6: the commvq warp kernel for commvq-2 at head_dim 128 (21 key rounds: a
# cluster of 2 blocks, 11 rounds and one value round each, scores swapped per page) beside the
# cluster kernel (commvq-2-v1) and sdpa; decode_check --long --commvq-only (both kernels) and
# the short sweep of every format (the BeginSplitBlock split argument).
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--long --commvq-only;--all-short" \
BENCH_KERNELS=commvq-1,commvq-2,commvq-2-v1,vecinfer-k2v2-hk \
BENCH_SIZES=1x8192,1x131072,8x32768,16x32768,32x32768 timeout 500 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
