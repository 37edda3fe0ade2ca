#!/bin/bash
# session 14 call 9: the split-kv counts the cost model (kernels/cuda/decode_splits.h) changed on
# the SmolLM2-135M shape (9 query heads, 3 kv heads, head_dim 64: BENCH_SHAPE=smollm2), timed
# beside the fill-one-wave rule's counts in the same call: at batch 32 that rule took 1 split
# for vecinfer and 2 for the staged fp16 / kivi kernels. bench/cuda built here from this tree.
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
BK=/tmp/bk
cmake -S bench/cuda -B $BK -DCMAKE_BUILD_TYPE=Release > /tmp/build.log 2>&1 && cmake --build $BK -j16 --target attention_bench >> /tmp/build.log 2>&1 \
  || { grep -A3 error /tmp/build.log | head -30; exit 1; }
export BENCH_SHAPE=smollm2 BENCH_BATCHES=16,32
S32=32x8192,32x32768,32x131072
BENCH_KERNELS=fp16-paged,kivi-k2v2,vecinfer-k2v2-hk BENCH_SIZES=16x32768,$S32 timeout 150 $BK/attention_bench - > $OUT/bench_auto.log 2>&1
echo "auto exit $?"
BENCH_SPLITS=1 BENCH_KERNELS=vecinfer-k2v2-hk BENCH_SIZES=$S32 timeout 100 $BK/attention_bench - > $OUT/bench_rule_vecinfer.log 2>&1
echo "rule vecinfer exit $?"
BENCH_SPLITS=2 BENCH_KERNELS=fp16-paged,kivi-k2v2 BENCH_SIZES=$S32 timeout 100 $BK/attention_bench - > $OUT/bench_rule_staged.log 2>&1
echo "rule staged exit $?"
for f in auto rule_vecinfer rule_staged; do echo "== $f"; grep -E "^(fp16|kivi|vecinfer)" $OUT/bench_$f.log; done
