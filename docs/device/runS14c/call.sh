#!/bin/bash
# session 14 call 3: on the 2-block default model (real q4_1 weights, vecinfer-k2v2 books
# calibrated on it), this tree's build: cuda_vecinfer_model_test (greedy picks and logits vs the
# cpu PagedKvCache, the sink, chunked prefill) after the small-kernel rework, and
# cuda_model_kernels_test with rope split over head groups. (one test binary a call: with the
# model the carry holds no more.)
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s14c/bundle.tar.xz \
#     cuda_model_kernels_test cuda_vecinfer_model_test
# (model.gguf.xz and vecinfer-k2v2.vqcb as in .devbuild/g2.) run with carry [".devbuild/s14c"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
set -o pipefail
DIR=${DIR:-.devbuild/s14c}
. bench/cuda/unpack_bundle.sh
for t in ${TESTS:-cuda_model_kernels_test cuda_vecinfer_model_test}; do
  { echo "== $t"; timeout 300 $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } >> $OUT/gtest.log 2>&1
done
grep -E "^==|exit:|FAILED|PASSED|SKIPPED \]|picks|dlogit" $OUT/gtest.log | head -40
