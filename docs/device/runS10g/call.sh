#!/bin/bash
# session 10 call 7: cuda_vecinfer_model_test of this tree's build (.devbuild/s10g) on the 2-block
# default model (head_dim 64: v8 with the lean loop now, vecinfer_version 8) with its vecinfer-k2v2 books: greedy picks and logits
# against the cpu PagedKvCache, chunked prefill, mixed caches in one step.
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
DIR=.devbuild/s10g . bench/cuda/unpack_bundle.sh
{ echo "== cuda_vecinfer_model_test with $VQSERVE_VQCB"; $B/cuda_vecinfer_model_test 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"
  echo "cuda_vecinfer_model_test exit: $?"; } > $OUT/gtest.log 2>&1
grep -E "exit:|FAILED|PASSED|SKIPPED \]|picks" $OUT/gtest.log | head -30
