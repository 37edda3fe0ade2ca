#!/bin/bash
# session 15 call 11: the final commit's query-transform launcher (one helper for the warp
# kernels): cuda_model_kernels_test (against the cpu's FastWalshHadamard) and
# cuda_random_model_test (vecinfer end to end against the cpu model). bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s15i/bundle.tar.xz \
#     cuda_model_kernels_test cuda_random_model_test
# run with carry [".devbuild/s15i"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
DIR=.devbuild/s15i TESTS="cuda_model_kernels_test cuda_random_model_test" bash docs/device/runS14c/call.sh
