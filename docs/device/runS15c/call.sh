#!/bin/bash
# session 15 call 3: v8 at head_dim 64 attends the sink + ring with BlockResidual<64> (one round
# of loads per 128 tokens, as at 128) instead of ResidualPartial, before the pages with one
# split. timed against session 14's path in the same call (a temporary bench flag, 64, kept only
# for this call); timelines; gpu tests; ncu per-kernel step times; end to end on the SmolLM2
# shape. bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s15c/bundle.tar.xz \
#     cuda_e2e_decode_bench cuda_decode_attention_test cuda_random_model_test
# run with carry [".devbuild/s15c"].
# (bench flag 64, session 14's ResidualPartial path at head_dim 64, existed only for this call;
# at 0b2c767 and later BENCH_STAGES=64 changes nothing.)
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT /tmp/logs
set -o pipefail
DIR=${DIR:-.devbuild/s15c}
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
export BENCH_SHAPE=smollm2
for st in 0 64 0 64; do
  echo "=== stages $st"
  BENCH_STAGES=$st BENCH_KERNELS=vecinfer-k2v2-hk BENCH_BATCHES=1,16,32,64 BENCH_CONTEXTS=256,2048,8192,32768 timeout 150 $A - 2>&1 | grep -E "^vecinfer"
done > $OUT/bench_ring64.log
echo "bench exit $?"
BENCH_KERNELS=fp16-paged BENCH_BATCHES=1,16,32,64 BENCH_CONTEXTS=256,2048,8192,32768 timeout 150 $A - > $OUT/bench_fp16.log 2>&1
for st in 0 64; do
  echo "=== stages $st"
  BENCH_STAGES=$st VQSERVE_BENCH_TIMELINE=1 BENCH_KERNELS=vecinfer-k2v2-hk BENCH_BATCHES=16,64 BENCH_CONTEXTS=256,2048 timeout 60 $A - 2>&1 | grep -v " without "
done > $OUT/timeline.log
unset BENCH_SHAPE
timeout 200 $BK/decode_check --vecinfer-only > /tmp/logs/check.log 2>&1; echo "decode_check exit $?"; tail -1 /tmp/logs/check.log
grep -iE "fail" /tmp/logs/check.log | head -5
E=$B/cuda_e2e_decode_bench
for ctx in 256 2048; do
  for c in fp16 vecinfer-k2v2; do
    f=/tmp/logs/ncu_smollm2_${ctx}_$c.csv
    timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
      $E --models smollm2 --codecs $c --batch 16 --ctx $ctx --short-ctx $ctx --steps 2 --warmup 0 --graphs off > $f 2> $f.err
    echo "== smollm2 ctx $ctx $c (ncu exit $?)"
    python3 bench/cuda/ncu_step_summary.py $f | head -14
  done
done > $OUT/ncu_step_kernels.txt 2>&1
grep -E "kernels in the last step|VecInfer|Fp16Staged" $OUT/ncu_step_kernels.txt
for ctx in 2048 32768; do
  timeout 150 $E --models smollm2 --codecs fp16,vecinfer-k2v2,vecinfer-k1v1 --batch 16 --ctx $ctx --short-ctx 256 --steps 24 --warmup 6 \
    > /tmp/logs/e2e_$ctx.log 2>&1
  echo "e2e ctx $ctx exit $?"; grep -E "^\| (fp16|vecinfer)" /tmp/logs/e2e_$ctx.log
done
cat /tmp/logs/e2e_*.log > $OUT/e2e.log
tar -C /tmp/logs -cJf $OUT/logs.tar.xz .
