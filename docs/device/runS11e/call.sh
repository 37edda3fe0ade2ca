#!/bin/bash
# session 11 call 7: v8r1 (version 9) and v8r2 (version 10): v8z that, with one split too,
# attends the sink + ring after its pages, their rows asked into l2 at the start with the
# evict_last policy (runS11c: the ring step costs 6.7 us at 16 x 32K, on every block's critical
# path); v8r2 also copies the pages with an evict_first policy. beside v8z (version 8, the
# default) and sdpa. decode_check --long --vecinfer-only.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--long --vecinfer-only" \
BENCH_KERNELS=vecinfer-k2v2-v8zhk,vecinfer-k2v2-v8r1hk,vecinfer-k2v2-v8r2hk BENCH_SIZES=1x8192,1x131072,8x32768,16x32768,32x32768 \
  timeout 420 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
