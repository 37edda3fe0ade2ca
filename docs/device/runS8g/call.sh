#!/bin/bash
# session 8 call 7: with the pair-of-blocks commvq-2 kernel, a bundle of this tree's build
# (.devbuild/e1): cuda_decode_attention_test (the cpu codec's AttendPages on random and
# EncodePage pages, 128K-token sequences), then the end to end per codec at 16 x 32K.
export OUT=${OUT:-/tmp/out}
DIR=.devbuild/e1 . bench/cuda/unpack_bundle.sh
{ echo "== cuda_decode_attention_test"; $B/cuda_decode_attention_test 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"
  echo "cuda_decode_attention_test exit: $?"; } > $OUT/gtest.log 2>&1
grep -E "exit:|FAILED|PASSED" $OUT/gtest.log | head -20
{
  echo "== cuda_e2e_decode_bench llama8b and smollm2 shapes (random weights), batch 16 x 32K"
  timeout 300 $B/cuda_e2e_decode_bench --models llama8b,smollm2 --codecs fp16,vecinfer-k2v2,commvq-1,commvq-2 \
    --batch 16 --ctx 32768 --steps 32 --warmup 8
  echo "exit: $?"
} > $OUT/e2e.log 2>&1
grep -E "^\||exit|^#" $OUT/e2e.log
