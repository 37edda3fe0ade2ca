#!/bin/bash
# session 8 call 13: after the review mend (Code12 shared by vecinfer's 12-bit rows and the three
# commvq kernels, RopeRotation shared by both commvq decode kernels, LoadFloats): decode_check
# --long --commvq-only and the short sweep of every format, commvq-1 / commvq-2 beside sdpa at
# 16 x 32K, then cuda_commvq_model_test of this tree (.devbuild/c2: also the multi-token step).
export OUT=${OUT:-/tmp/out}
export VQSERVE_CVQCB=$PWD/.devbuild/c2/commvq-2.vqcb
SNAP=. DIR=.devbuild/c2 CHECKS="--long --commvq-only;--all-short" GTESTS="cuda_commvq_model_test" \
BENCH_KERNELS=commvq-1,commvq-2,vecinfer-k3v3 BENCH_SIZES=16x32768 \
timeout 300 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
