#!/bin/bash
# session 15 call 2: where a short-context decode step's time goes with the ring split
# (runS15a): per-block phase timelines of the v8 kernel (attention_bench, VQSERVE_BENCH_TIMELINE)
# at ctx 256 with the chosen and with one split, and ncu per-kernel durations of one eager
# decode step (cuda_e2e_decode_bench --graphs off, real clocks) for fp16 and vecinfer-k2v2 at
# batch 16 x ctx 256 and 2048 on both shapes. bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s15b/bundle.tar.xz cuda_e2e_decode_bench
# run with carry [".devbuild/s15b"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT /tmp/logs
DIR=${DIR:-.devbuild/s15b}
. bench/cuda/unpack_bundle.sh
BK=/tmp/bk
cmake -S bench/cuda -B $BK -DCMAKE_BUILD_TYPE=Release > /tmp/build.log 2>&1 && cmake --build $BK -j16 --target attention_bench >> /tmp/build.log 2>&1 \
  || { grep -A3 error /tmp/build.log | head -30; exit 1; }
A=$BK/attention_bench
for shape in smollm2 llama8b; do
  for sp in 0 1; do
    echo "=== $shape splits ${sp/0/auto}"
    BENCH_SHAPE=$shape BENCH_SPLITS=$sp VQSERVE_BENCH_TIMELINE=1 BENCH_KERNELS=vecinfer-k2v2-hk BENCH_BATCHES=1,16 BENCH_CONTEXTS=256,2048 \
      timeout 60 $A - 2>&1
  done
done > $OUT/timeline.log
echo "timelines exit $?"; grep -cE "timeline of one launch" $OUT/timeline.log
E=$B/cuda_e2e_decode_bench
for m in smollm2 llama8b; do
  for ctx in 256 2048; do
    for c in fp16 vecinfer-k2v2; do
      f=/tmp/logs/ncu_${m}_${ctx}_$c.csv
      timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
        $E --models $m --codecs $c --batch 16 --ctx $ctx --short-ctx $ctx --steps 2 --warmup 0 --graphs off > $f 2> $f.err
      echo "== $m ctx $ctx $c (ncu exit $?)"
      python3 bench/cuda/ncu_step_summary.py $f | head -14
    done
  done
done > $OUT/ncu_step_kernels.txt 2>&1
cat $OUT/ncu_step_kernels.txt | grep -E "^==|kernels in the last step|VecInfer|Fp16Staged|QueryTransform|SinkAppend|SplitCombine|RingAppend|PagedKvAppend"
tar -C /tmp/logs -cJf $OUT/ncu_csv.tar.xz .
