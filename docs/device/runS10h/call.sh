#!/bin/bash
# session 10 call 8: cuda_graph_test of this tree's build (.devbuild/s10h) on the 2-block
# default model (head_dim 64: v8 with the lean loop now, vecinfer_version 8) with its vecinfer-k2v2 books: graph replays against eager
# (bitwise), fp16, kivi and vecinfer with and without a sink; no commvq books travel.
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
DIR=.devbuild/s10h . bench/cuda/unpack_bundle.sh
{ echo "== cuda_graph_test with $VQSERVE_VQCB"; $B/cuda_graph_test 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"
  echo "cuda_graph_test exit: $?"; } > $OUT/gtest.log 2>&1
grep -E "exit:|FAILED|PASSED|SKIPPED \]|picks" $OUT/gtest.log | head -30
