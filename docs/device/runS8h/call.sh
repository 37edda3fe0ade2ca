#!/bin/bash
# session 8 call 8: cuda_commvq_model_test of this tree's build (.devbuild/c2: the bundle, the
# 2-block default model and its commvq-2 books; head_dim 64: the warp kernel, one block).
export OUT=${OUT:-/tmp/out}
export VQSERVE_CVQCB=$PWD/.devbuild/c2/commvq-2.vqcb
DIR=.devbuild/c2 . bench/cuda/unpack_bundle.sh
{ echo "== cuda_commvq_model_test"; $B/cuda_commvq_model_test 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"
  echo "cuda_commvq_model_test exit: $?"; } > $OUT/gtest.log 2>&1
grep -E "exit:|FAILED|PASSED|picks|prefill" $OUT/gtest.log | head -20
