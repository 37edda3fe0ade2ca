#!/bin/bash
# session 14 call 7: the split-kv choice of the whole-wave decode kernels (kernels/cuda/
# decode_splits.h). bench/cuda built here from this tree: decode_check (default cases), then
# attention_bench at batch 16, 17, 18, 20, 24, 32 x 32K (Llama-3.1-8B shape) for fp16-paged,
# kivi-k2v2 and vecinfer-k2v2 with the new choice (auto) and with one split forced
# (BENCH_SPLITS=1: what the fill-one-wave rule chose past one wave), in the same call; then the
# end to end at batch 16 / 18 / 24 (8B shape) and 32 (SmolLM2 shape), whose split counts changed,
# from this tree's build:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s14g/bundle.tar.xz cuda_e2e_decode_bench
# run with carry [".devbuild/s14g"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
BK=/tmp/bk
cmake -S bench/cuda -B $BK -DCMAKE_BUILD_TYPE=Release > /tmp/build.log 2>&1 && cmake --build $BK -j16 >> /tmp/build.log 2>&1 \
  || { grep -A3 error /tmp/build.log | head -30; exit 1; }
timeout 150 $BK/decode_check > $OUT/check.log 2>&1; echo "decode_check exit $?"; tail -2 $OUT/check.log
S=16x32768,17x32768,18x32768,20x32768,24x32768,32x32768
for mode in auto one; do
  if [ $mode = one ]; then export BENCH_SPLITS=1; else unset BENCH_SPLITS; fi
  BENCH_KERNELS=fp16-paged,kivi-k2v2,vecinfer-k2v2-hk BENCH_BATCHES=16,17,18,20,24,32 BENCH_SIZES=$S \
    timeout 150 $BK/attention_bench $OUT/ours_$mode.csv > $OUT/bench_$mode.log 2>&1
  echo "bench $mode exit $?"
done
unset BENCH_SPLITS
grep -vE "^copy" $OUT/bench_auto.log | head -30
grep -vE "^copy" $OUT/bench_one.log | head -30
DIR=.devbuild/s14g
. bench/cuda/unpack_bundle.sh
for mb in llama8b:16 llama8b:18 llama8b:24 smollm2:32; do
  IFS=: read -r m n <<< "$mb"
  { echo "== $m batch $n x 32K"; timeout 100 $B/cuda_e2e_decode_bench --models $m --codecs fp16,vecinfer-k2v2 --batch $n \
      --ctx 32768 --short-ctx 256 --steps 16 --warmup 4; echo "exit: $?"; } >> $OUT/e2e.log 2>&1
done
grep -E "^==|^\| [a-z]|exit" $OUT/e2e.log
