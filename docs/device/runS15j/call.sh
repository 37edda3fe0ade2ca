#!/bin/bash
# session 15 call 12, after the review: cuda_model_kernels_test on DeviceArray (its own device
# buffer class gone; DeviceArray::Download added) and rope's launcher, and cuda_random_model_test.
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s15j/bundle.tar.xz \
#     cuda_model_kernels_test cuda_random_model_test
# run with carry [".devbuild/s15j"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
DIR=.devbuild/s15j TESTS="cuda_model_kernels_test cuda_random_model_test" bash docs/device/runS14c/call.sh
