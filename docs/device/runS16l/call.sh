#!/bin/bash
# session 16 call 18: the final commit's review edits (the vecinfer fp16 books taken through the
# cache's constants, line wrapping): cuda_random_model_test (every vecinfer shape end to end
# against the cpu model) and cuda_commvq_model_test (its encode test; the model cases skip, no
# model carried). bundle:
#   STRIP=1 XZ_OPT="-6 -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s16l/bundle.tar.xz \
#     cuda_random_model_test cuda_commvq_model_test
# run with carry [".devbuild/s16l"]:
DIR=.devbuild/s16l TESTS="cuda_random_model_test cuda_commvq_model_test" bash docs/device/runS16a/call.sh
