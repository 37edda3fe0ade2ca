#!/bin/bash
# session 13 call 7: after the review commit (one predicate for the v8 kernel's shapes,
# VecInferTakesHalfBooks): cuda_decode_attention_test and cuda_random_model_test of that build
# (.devbuild/s13f), made by
#   STRIP=1 XZ_OPT=-9e bash bench/cuda/bundle_binaries.sh build .devbuild/s13f/bundle.tar.xz \
#     cuda_decode_attention_test cuda_random_model_test
# run with carry [".devbuild/s13f"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
set -o pipefail
DIR=.devbuild/s13f
. bench/cuda/unpack_bundle.sh
for t in cuda_decode_attention_test cuda_random_model_test; do
  { echo "== $t"; $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } >> $OUT/gtest.log 2>&1
done
grep -E "exit:|FAILED|PASSED|greedy picks" $OUT/gtest.log
