#!/bin/bash
# session 16 call 11: the fp16 page flush on a block per (sequence, row) and the vecinfer page
# encoder on 512 threads, against the commit before them (b288d11's runtime, this bench:
# cuda_e2e_decode_bench_prev) end to end at batch 16, aligned and staggered; then
# cuda_decode_attention_test (the encoder against the cpu codec's EncodePage, every width) and
# cuda_random_model_test. bundle:
#   cp build/bin/cuda_e2e_decode_bench build/bin/cuda_e2e_decode_bench_prev   (before the change)
#   STRIP=1 XZ_OPT="-6 -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s16h/bundle.tar.xz \
#     cuda_e2e_decode_bench cuda_e2e_decode_bench_prev cuda_decode_attention_test cuda_random_model_test
# run with carry [".devbuild/s16h"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT /tmp/logs
set -o pipefail
DIR=${DIR:-.devbuild/s16h}
. bench/cuda/unpack_bundle.sh
for st in 1 0; do
  for bin in cuda_e2e_decode_bench_prev cuda_e2e_decode_bench; do
    log=/tmp/logs/e2e_${bin}_stagger$st.log
    timeout 170 $B/$bin --models smollm2,llama8b --codecs fp16,vecinfer-k2v2 --batch 16 \
      --ctx 32768 --short-ctx 256 --steps 64 --warmup 40 --stagger $st > $log 2>&1
    echo "== $bin stagger $st exit $?"; grep -E "^###|^\| (fp16|kivi|vecinfer)" $log
  done
done
tar -C /tmp/logs -czf $OUT/e2e_logs.tgz .
for t in cuda_decode_attention_test cuda_random_model_test; do
  { echo "== $t"; timeout 200 $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } >> $OUT/gtest.log 2>&1
done
grep -E "^==|exit:|FAILED|PASSED|SKIPPED \]" $OUT/gtest.log | head -30
