#!/bin/bash
# session 11 call 10: v8e (version 9 then): v8z whose page copies carry an l2 evict_first
# policy (one createpolicy per warp; the cp.async lines are read once), beside v8z and sdpa.
# runS11e: the policy made the copies alone 4 us faster and v8r2 3.6 us faster than v8r1.
# decode_check --long --vecinfer-only.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--long --vecinfer-only" \
BENCH_KERNELS=vecinfer-k2v2-v8zhk,vecinfer-k2v2-v8ehk BENCH_SIZES=1x8192,1x131072,8x32768,16x32768,32x32768 \
  timeout 420 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
