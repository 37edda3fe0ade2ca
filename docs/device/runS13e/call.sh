#!/bin/bash
# session 13 call 6: the whole grid (batch 1, 8, 16, 32 x context 8K, 32K, 128K) on the
# Llama-3.1-8B attention shape for the current defaults, beside pytorch sdpa flash in the same
# call: vecinfer-k2v2 / -k1v1 / -k2v1 with the runtime's fp16 books (-hk, -v8zhk), kivi-k2v2,
# our fp16 paged kernel and commvq-1. decode_check only for fp16 (the snapshot's build check).
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=.devbuild/none CHECKS="--only fp16" \
BENCH_KERNELS=vecinfer-k2v2-hk,vecinfer-k1v1-v8zhk,vecinfer-k2v1-v8zhk,kivi-k2v2,fp16-paged,commvq-1 \
  timeout 270 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log 2>/dev/null; cp /tmp/ours.csv /tmp/sdpa.csv /tmp/sdpa.log $OUT/ 2>/dev/null
true
