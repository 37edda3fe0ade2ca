#!/bin/bash
# session 15 call 1: the sink + residual ring on a split of its own at short contexts
# (WithRingSplit, kernels/cuda/decode_splits.h) and v8's first copies issued before a leading
# ring (head_dim 128, one split), each timed against the earlier choice in the same call
# (BENCH_SPLITS=1; BENCH_STAGES=64); per-block timelines at ctx 256; the gpu tests of this
# build; end-to-end steps at short contexts. bench/cuda built here from this tree; the bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s15a/bundle.tar.xz \
#     cuda_e2e_decode_bench cuda_decode_attention_test cuda_random_model_test
# run with carry [".devbuild/s15a"].
# (bench flag 64, the old copy order, existed only for this call: the variant was not kept, and
# at 0b2c767 and later BENCH_STAGES=64 changes nothing.)
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
set -o pipefail
DIR=${DIR:-.devbuild/s15a}
. bench/cuda/unpack_bundle.sh
BK=/tmp/bk
( cmake -S bench/cuda -B $BK -DCMAKE_BUILD_TYPE=Release > /tmp/build.log 2>&1 &&
  cmake --build $BK -j14 --target attention_bench decode_check >> /tmp/build.log 2>&1; echo "bench build exit $?" >> /tmp/build.log ) &
for t in cuda_decode_attention_test cuda_random_model_test; do
  { echo "== $t"; timeout 240 $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } >> $OUT/gtest.log 2>&1
done
wait
tail -1 /tmp/build.log; grep -B2 -A3 " error" /tmp/build.log | head -20
grep -E "^==|exit:|FAILED|PASSED|SKIPPED \]" $OUT/gtest.log | head -20
A=$BK/attention_bench
K=fp16-paged,vecinfer-k2v2-hk
for shape in llama8b smollm2; do
  export BENCH_SHAPE=$shape
  BENCH_KERNELS=$K BENCH_BATCHES=1,8,16,32 BENCH_CONTEXTS=256,512,1024,2048 timeout 120 $A - > $OUT/bench_${shape}_auto.log 2>&1
  echo "$shape auto exit $?"
  BENCH_SPLITS=1 BENCH_KERNELS=vecinfer-k2v2-hk BENCH_BATCHES=1,8,16,32 BENCH_CONTEXTS=256,512 timeout 60 $A - > $OUT/bench_${shape}_one.log 2>&1
  echo "$shape one split exit $?"
  VQSERVE_BENCH_TIMELINE=1 BENCH_KERNELS=vecinfer-k2v2-hk BENCH_BATCHES=8,16 BENCH_CONTEXTS=256 timeout 60 $A - > $OUT/timeline_${shape}_auto.log 2>&1
  VQSERVE_BENCH_TIMELINE=1 BENCH_SPLITS=1 BENCH_KERNELS=vecinfer-k2v2-hk BENCH_BATCHES=8,16 BENCH_CONTEXTS=256 timeout 60 $A - > $OUT/timeline_${shape}_one.log 2>&1
  echo "$shape timelines exit $?"
done
unset BENCH_SHAPE
# the copies before a leading ring: head_dim 128 with one split (batch >= 16 at these lengths).
S=16x256,32x256,16x512,16x8192,16x32768,32x32768
for st in 0 64 0 64; do
  BENCH_STAGES=$st BENCH_KERNELS=vecinfer-k2v2-hk BENCH_BATCHES=16,32 BENCH_CONTEXTS=256,512,8192,32768 BENCH_SIZES=$S \
    timeout 120 $A - >> $OUT/bench_copies_$st.log 2>&1
  echo "stages $st exit $?"
done
for f in $OUT/bench_*.log; do echo "== $f"; grep -E "^(fp16|vecinfer)" $f; done
timeout 200 $BK/decode_check --vecinfer-only > $OUT/check.log 2>&1; echo "decode_check exit $?"; tail -2 $OUT/check.log
E=$B/cuda_e2e_decode_bench
for bt in 4 16; do
  timeout 150 $E --models smollm2,llama8b --codecs fp16,vecinfer-k2v2 --batch $bt --ctx 2048 --short-ctx 256 --steps 24 --warmup 6 \
    > $OUT/e2e_b$bt.log 2>&1
  echo "e2e batch $bt exit $?"; grep -E "^\| (fp16|vecinfer)" $OUT/e2e_b$bt.log
done
