#!/bin/bash
# session 7 call 7: cuda_model_test (greedy picks and logits, gpu vs cpu) on the 2-block default
# model, with a flip accepted only where the step's own logit error explains it.
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
DIR=.devbuild/m1 . bench/cuda/unpack_bundle.sh
timeout 300 $B/cuda_model_test > $OUT/gtest.log 2>&1; echo "cuda_model_test exit: $?"
grep -E "prompt|cuda vs cpu|PASSED|FAILED|OK \]" $OUT/gtest.log | head -40
