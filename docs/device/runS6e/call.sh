#!/bin/bash
# session 6 call 5: residual before any copy with one split (v8); all checks, bench, gpu gtests, e2e.
export OUT=${OUT:-/tmp/out}
export VQSERVE_CVQCB=$PWD/.devbuild/c2/commvq-2.vqcb
SNAP=. DIR=.devbuild/c2 CHECKS="--long --vecinfer-only" \
GTESTS="cuda_decode_attention_test cuda_graph_test" \
VQSERVE_VQCB_LIST="$PWD/.devbuild/c2/vecinfer-k2v2.vqcb" \
BENCH_KERNELS=vecinfer-k2v2-h,vecinfer-k2v2-v7,vecinfer-k2v2-v8h \
BENCH_SIZES=1x8192,1x131072,16x32768,32x32768 timeout 420 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
