#!/bin/bash
# session 11 call 9: v8l (version 9 then): v8's plain value gathers (16 value mmas a page, 2-way
# bank conflicts) under v8z's lean loop at head_dim 128, beside v8z (quad gathers: 32 value
# mmas, no conflicts) and sdpa. runS11f showed v8z compute-bound (124.2 us at 16 x 32K with no
# page stream), its value path ~50 us of it. decode_check --long --vecinfer-only.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--long --vecinfer-only" \
BENCH_KERNELS=vecinfer-k2v2-v8zhk,vecinfer-k2v2-v8lhk BENCH_SIZES=1x8192,1x131072,8x32768,16x32768,32x32768 \
  timeout 420 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
