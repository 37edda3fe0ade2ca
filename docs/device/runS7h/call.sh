#!/bin/bash
# session 7 call 8: the lut + Cv built once per thread-block cluster of splits (ClusterBooks),
# cluster sizes 1 / 2 / 4 (the default) / 8 side by side with their timelines; decode_check of
# the vecinfer kernels, the clustered ones also bitwise against the unclustered launch.
export OUT=${OUT:-/tmp/out}
export VQSERVE_BENCH_TIMELINE=1
SNAP=. DIR=/nonexistent CHECKS="--vecinfer-only" \
BENCH_KERNELS=vecinfer-k2v2-hk,vecinfer-k2v2-hk-c1,vecinfer-k2v2-hk-c2,vecinfer-k2v2-hk-c8 \
BENCH_SIZES=1x8192,1x131072,8x32768,16x32768 timeout 500 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
