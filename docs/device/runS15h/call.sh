#!/bin/bash
# session 15 call 10: the final build's gpu tests (cuda_decode_attention_test,
# cuda_random_model_test, cuda_model_kernels_test) with the staged kivi kernel's ring on
# BlockResidual<D, 256>; end to end per codec at batch 16 on both shapes (ctx 2048 and 32K,
# short ctx 256). bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s15h/bundle.tar.xz \
#     cuda_decode_attention_test cuda_e2e_decode_bench cuda_random_model_test cuda_model_kernels_test
# run with carry [".devbuild/s15h"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT /tmp/logs
set -o pipefail
DIR=.devbuild/s15h
. bench/cuda/unpack_bundle.sh
for t in cuda_decode_attention_test cuda_random_model_test cuda_model_kernels_test; do
  { echo "== $t"; timeout 240 $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } >> $OUT/gtest.log 2>&1
done
grep -E "^==|exit:|FAILED|PASSED|SKIPPED \]" $OUT/gtest.log | head -20
E=$B/cuda_e2e_decode_bench
for ctx in 2048 32768; do
  timeout 200 $E --models smollm2,llama8b --codecs fp16,kivi-k2v2,vecinfer-k2v2,vecinfer-k1v1 --batch 16 --ctx $ctx --short-ctx 256 \
    --steps 24 --warmup 6 > /tmp/logs/e2e_$ctx.log 2>&1
  echo "e2e ctx $ctx exit $?"; grep -E "^\| (fp16|kivi|vecinfer)" /tmp/logs/e2e_$ctx.log
done
cat /tmp/logs/e2e_*.log > $OUT/e2e.log
