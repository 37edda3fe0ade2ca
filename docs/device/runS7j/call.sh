#!/bin/bash
# session 7 call 10: after the review clean-up (timeline helpers return first when unset):
# decode_check of the vecinfer kernels, the runtime kernel with its timeline.
export OUT=${OUT:-/tmp/out}
export VQSERVE_BENCH_TIMELINE=1
SNAP=. DIR=/nonexistent CHECKS="--vecinfer-only" \
BENCH_KERNELS=vecinfer-k2v2-hk \
BENCH_SIZES=1x131072,16x32768 timeout 300 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
