#!/bin/bash
# session 14 call 8: the GPU tests on the session's final build (the split-kv cost model in
# ChooseDecodeSplits, the reworked small kernels): cuda_decode_attention_test,
# cuda_random_model_test and cuda_model_kernels_test.
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s14h/bundle.tar.xz \
#     cuda_decode_attention_test cuda_random_model_test cuda_model_kernels_test
# run with carry [".devbuild/s14h"].
DIR=.devbuild/s14h TESTS="cuda_decode_attention_test cuda_random_model_test cuda_model_kernels_test" \
  bash docs/device/runS14c/call.sh
