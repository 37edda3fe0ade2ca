#!/bin/bash
# session 8 call 2: the commvq warp kernel in the gpu gtests (cpu AttendPages on random and
# EncodePage pages, graphs, the 2-block default model with commvq-2 books: head_dim 64 runs the
# warp kernel), commvq-1 / commvq-2 beside sdpa. (the end to end is runS8c: both bundles
# and the model exceed one call's 64 MiB.)
export OUT=${OUT:-/tmp/out}
export VQSERVE_CVQCB=$PWD/.devbuild/c2/commvq-2.vqcb
SNAP=. DIR=.devbuild/c2 CHECKS="--commvq-only" \
GTESTS="cuda_decode_attention_test cuda_graph_test cuda_commvq_model_test" \
BENCH_KERNELS=commvq-1,commvq-2 \
BENCH_SIZES=1x8192,1x32768,1x131072,8x32768,16x8192,16x32768,32x32768 \
timeout 330 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
