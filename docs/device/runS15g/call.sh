#!/bin/bash
# session 15 call 9: the staged kivi kernel's ring column on BlockResidual<D, 256> (hb <= 4)
# instead of ResidualPartial, timed against the old path in the same call (a temporary bench
# flag, 64, kept only for this call) on both shapes; decode_check (all formats, the sink
# cross-check); cuda_kivi_model_test on the 2-block default model. bench/cuda built here from
# this tree; the bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s15g/bundle.tar.xz cuda_kivi_model_test
# (model.gguf.xz and vecinfer-k2v2.vqcb as in .devbuild/g2.) run with carry [".devbuild/s15g"].
# (at the commit after this call BENCH_STAGES=64 changes nothing.)
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
set -o pipefail
DIR=.devbuild/s15g
. bench/cuda/unpack_bundle.sh
BK=/tmp/bk
( cmake -S bench/cuda -B $BK -DCMAKE_BUILD_TYPE=Release > /tmp/build.log 2>&1 &&
  cmake --build $BK -j14 --target attention_bench decode_check >> /tmp/build.log 2>&1; echo "bench build exit $?" >> /tmp/build.log ) &
{ echo "== cuda_kivi_model_test"; timeout 300 $B/cuda_kivi_model_test 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "exit: $?"; } > $OUT/gtest.log 2>&1
wait
tail -1 /tmp/build.log; grep -B2 -A3 " error" /tmp/build.log | head -20
grep -E "^==|exit:|FAILED|PASSED|picks" $OUT/gtest.log
A=$BK/attention_bench
for shape in smollm2 llama8b; do
  for st in 0 64 0 64; do
    echo "=== $shape stages $st"
    BENCH_SHAPE=$shape BENCH_STAGES=$st BENCH_KERNELS=kivi-k2v2,kivi-k4v4 BENCH_BATCHES=1,16,32 BENCH_CONTEXTS=256,2048,32768 \
      timeout 100 $A - 2>&1 | grep -E "^kivi"
  done
done > $OUT/bench_kivi_ring.log
echo "bench exit $?"
timeout 300 $BK/decode_check > $OUT/check.log 2>&1; echo "decode_check exit $?"; tail -1 $OUT/check.log
grep -iE "fail" $OUT/check.log | head -5
