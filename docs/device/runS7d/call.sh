#!/bin/bash
# session 7 call 4: the runtime's fp16 key + value books (vecinfer-k2v2-hk) beside the value
# books only (-h); residual debt 1536; timeline with the sm clock and the ring's chunk phases;
# decode_check --long for vecinfer and the short sweep of every format.
export OUT=${OUT:-/tmp/out}
export VQSERVE_BENCH_TIMELINE=1
SNAP=. DIR=/nonexistent CHECKS="--long --vecinfer-only;--all-short" \
BENCH_KERNELS=vecinfer-k2v2-hk,vecinfer-k2v2-h \
BENCH_SIZES=1x8192,1x131072,16x32768,32x32768 timeout 500 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
