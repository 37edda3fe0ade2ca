#!/bin/bash
# session 7 call 3: the sink + ring step block-parallel (block_residual.cuh), with its stamps;
# the ring attended twice (bit 64) and the first pages after the books (bit 128);
# sass sizes of the v8 and combine kernels.
export OUT=${OUT:-/tmp/out}
export VQSERVE_BENCH_TIMELINE=1
SNAP=. DIR=/nonexistent CHECKS="--all-short" \
BENCH_KERNELS=vecinfer-k2v2-v8h \
BENCH_SIZES=1x8192,1x131072,16x32768 timeout 400 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log

cuobjdump --dump-sass /tmp/build-snap/attention_bench 2>/dev/null | awk '/Function : /{name=$3} /^ +\/\*[0-9a-f]+\*\//{n[name]++} END{for (f in n) print n[f], f}' | grep -E "V8Decode|SplitCombine" > $OUT/sass_sizes.txt
cat $OUT/sass_sizes.txt
