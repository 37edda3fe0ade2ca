#!/bin/bash
# session 9 call 2 (the variants are in variants.patch here, not on main): three v8 variants beside the runtime's v8 (vecinfer-k2v2-hk) and sdpa:
# v8x7 = split score chains (two chains of 4 mma per score tile), v8x8 = with one split, the Cv
# and first page copies issued before the residual ring, v8x9 = both; decode_check
# --vecinfer-only (the variants included); per-block timelines (VQSERVE_BENCH_TIMELINE).
export OUT=${OUT:-/tmp/out}
export VQSERVE_BENCH_TIMELINE=1
SNAP=. DIR=/nonexistent CHECKS="--vecinfer-only" \
BENCH_KERNELS=vecinfer-k2v2-hk,vecinfer-k2v2-v8x7hk,vecinfer-k2v2-v8x8hk,vecinfer-k2v2-v8x9hk \
BENCH_SIZES=1x8192,1x131072,16x32768,32x32768 timeout 400 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
