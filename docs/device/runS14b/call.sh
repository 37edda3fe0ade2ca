#!/bin/bash
# session 14 call 2: the small per-token kernels reworked (rmsnorm one pass over float4s in
# registers, rope's angles once per token and q + k in one launch, ring append 4 elements a
# thread). cuda_model_kernels_test (new: each against its cpu reference) and
# cuda_random_model_test (random-weight llamas per codec, cuda vs cpu); the tests on the default
# model's weights are runS14c (the carry cannot hold the model and these binaries at once); then
# the end to end per codec on both shapes at batch 16 x 32K (and its ctx-256 column), and ncu
# per-kernel durations of 2 eager steps at batch 16 x ctx 256 as in runS14a.
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s14b/bundle.tar.xz \
#     cuda_model_kernels_test cuda_random_model_test cuda_e2e_decode_bench
# run with carry [".devbuild/s14b"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
set -o pipefail
DIR=.devbuild/s14b
. bench/cuda/unpack_bundle.sh
for t in cuda_model_kernels_test cuda_random_model_test; do
  { echo "== $t"; timeout 240 $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } >> $OUT/gtest.log 2>&1
done
grep -E "^==|exit:|FAILED|PASSED|SKIPPED \]" $OUT/gtest.log | head -40
{ timeout 240 $B/cuda_e2e_decode_bench --models llama8b,smollm2 --codecs fp16,kivi-k2v2,vecinfer-k2v2,vecinfer-k1v1 \
    --batch 16 --ctx 32768 --steps 32 --warmup 8; echo "exit: $?"; } > $OUT/e2e.log 2>&1
grep -E "^\||exit" $OUT/e2e.log
for m in smollm2 llama8b; do
  timeout 120 ncu --metrics gpu__time_duration.sum --csv --print-units base $B/cuda_e2e_decode_bench \
    --models $m --codecs vecinfer-k2v2 --batch 16 --ctx 256 --short-ctx 256 --steps 2 --warmup 0 --graphs off \
    > $OUT/ncu_$m.csv 2> $OUT/ncu_$m.err
  echo "ncu $m exit $?"
done
