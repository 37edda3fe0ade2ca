#!/bin/bash
# session 14 call 6: this tree's build (rope now split over head groups): cuda_model_kernels_test;
# the end to end per codec at batch 16 x 32K on both shapes (as runS14b); then decode throughput
# at 32K with as many sequences as 80 GB of KV holds per codec (the bench's "max seqs" column:
# llama8b fp16 18, kivi-k2v2 96, vecinfer-k2v2 142, vecinfer-k1v1 273; smollm2 fp16 105,
# vecinfer-k2v2 812), random weights.
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s14f/bundle.tar.xz \
#     cuda_e2e_decode_bench cuda_model_kernels_test
# run with carry [".devbuild/s14f"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
set -o pipefail
DIR=.devbuild/s14f
. bench/cuda/unpack_bundle.sh
E=$B/cuda_e2e_decode_bench
{ echo "== cuda_model_kernels_test"; timeout 120 $B/cuda_model_kernels_test 2>&1 | tail -3; } > $OUT/gtest.log 2>&1
cat $OUT/gtest.log
{ timeout 240 $E --models llama8b,smollm2 --codecs fp16,kivi-k2v2,vecinfer-k2v2,vecinfer-k1v1 \
    --batch 16 --ctx 32768 --steps 32 --warmup 8; echo "exit: $?"; } > $OUT/e2e.log 2>&1
grep -E "^\||exit" $OUT/e2e.log
for mcb in llama8b:fp16:18 llama8b:kivi-k2v2:96 llama8b:vecinfer-k2v2:142 llama8b:vecinfer-k1v1:273 \
    smollm2:fp16:105 smollm2:vecinfer-k2v2:812; do
  IFS=: read -r m c n <<< "$mcb"
  { echo "== $m $c batch $n x 32K"; timeout 150 $E --models $m --codecs $c --batch $n --ctx 32768 --short-ctx 256 \
      --steps 12 --warmup 3; echo "exit: $?"; } >> $OUT/max_batch.log 2>&1
done
grep -E "^==|^\| [a-z]|exit" $OUT/max_batch.log
