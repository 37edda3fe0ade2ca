#!/bin/bash
# session 11 call 8: how long v8z's page work takes without the page stream. v8n (version 9
# then, bench only) is v8z whose warps copy only their first 3 pages and then attend those
# stages over and over (every later copy group is empty; wrong results on purpose), beside v8z
# and sdpa; the stage costs of both (names starting vecinfer-k2v2-v8). decode_check
# --vecinfer-only (the short sweep; v8n is not in it).
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--vecinfer-only" \
BENCH_KERNELS=vecinfer-k2v2-v8zhk,vecinfer-k2v2-v8nhk BENCH_SIZES=1x8192,1x131072,8x32768,16x32768,32x32768 \
  timeout 420 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
