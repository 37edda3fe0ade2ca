#!/bin/bash
# session 13 call 5: cuda_vecinfer_model_test of this tree's build (.devbuild/s13d) on the 2-block
# default model (real q4_1 weights; head_dim 64, 3 query heads per kv head) with vecinfer-k1v1
# and -k2v1 books calibrated on it, which now run v8's lean loop (runS13c): greedy picks and
# logits against the cpu PagedKvCache, the sink, chunked prefill, mixed caches in one step.
#   build/bin/vqserve calibrate --model <2-block model> --text /usr/share/games/fortunes/fortunes \
#     --codec vecinfer --k-bits 1 --v-bits 1 (and 2 / 1) --tokens 2048 --seq-len 256 --iterations 8 \
#     -o .devbuild/s13d/vecinfer-k1v1.vqcb
#   STRIP=1 XZ_OPT=-9e bash bench/cuda/bundle_binaries.sh build .devbuild/s13d/bundle.tar.xz cuda_vecinfer_model_test
# (model.gguf.xz and vecinfer-k2v2.vqcb as in .devbuild/g2.) run with carry [".devbuild/s13d"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
set -o pipefail
DIR=.devbuild/s13d
. bench/cuda/unpack_bundle.sh
for c in k1v1 k2v1; do
  { echo "== cuda_vecinfer_model_test with vecinfer-$c"
    VQSERVE_VQCB=$DIR/vecinfer-$c.vqcb $B/cuda_vecinfer_model_test 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"
    echo "cuda_vecinfer_model_test exit: $?"; } >> $OUT/gtest.log 2>&1
done
grep -E "^==|exit:|FAILED|PASSED|SKIPPED \]|picks|dlogit" $OUT/gtest.log | head -40
