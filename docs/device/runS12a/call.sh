#!/bin/bash
# (ran in session 13, 2026-12-01 22:10 UTC: all passed; the logs beside this file.)
# session 12 call 1 (prepared; session 12 was lent no device, so it has not run): vecinfer-k1v1
# / -k2v1 (8-dim value sub-vectors, 8-dim keys for k1v1) on v8z's page loop at head_dim 128
# (PageShape<D, DK, DV>; vecinfer_version 8, opt-in), beside the v4 lut kernel that is still
# their default (-v4), k2v2 (the runtime's dispatch and books, -hk) and sdpa. decode_check --long
# --vecinfer-only (new: k1v1 / k2v1 -v8z, -v8z-ph, -v8zh, -v8zhk); cuda_decode_attention_test
# (new: *_v8z reference cases, VecInferEightDimWidths) and cuda_graph_test of this tree's build:
#   bash bench/cuda/bundle_binaries.sh build .devbuild/s12a/bundle.tar.xz \
#     cuda_decode_attention_test cuda_graph_test
# run with carry [".devbuild/s12a"]. if it passes, the default for these shapes can become v8z:
# `git apply docs/device/runS12a/flip_default.patch` (VecInferV8Sub8 in
# kernels/cuda/decode_attention.cu, and the runtime's fp16 books for them in
# runtime/cuda_kv_cache.cc); then the end to end per codec can be measured.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=.devbuild/s12a CHECKS="--long --vecinfer-only" GTESTS="cuda_decode_attention_test cuda_graph_test" \
BENCH_KERNELS=vecinfer-k2v2-hk,vecinfer-k1v1-v8zhk,vecinfer-k1v1-v4,vecinfer-k2v1-v8zhk,vecinfer-k2v1-v4 \
BENCH_SIZES=1x8192,1x131072,8x32768,16x32768,32x32768 timeout 500 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
