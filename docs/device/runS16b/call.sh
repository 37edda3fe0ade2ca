#!/bin/bash
# session 16 call 3: end to end at batch 16 on both shapes (random weights), the old tree
# (445610c's runtime with this tree's bench, which adds --stagger) beside this tree's, with
# the sequences aligned (stagger 0) and staggered over a page (stagger 1); then
# cuda_random_model_test and cuda_commvq_model_test (its encode test takes device page ids;
# its model cases skip unless a warm machine still has /tmp/model.gguf). bundle:
#   cp /tmp/old/build/bin/cuda_e2e_decode_bench build/bin/cuda_e2e_decode_bench_old
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s16b/bundle.tar.xz \
#     cuda_e2e_decode_bench cuda_e2e_decode_bench_old cuda_random_model_test cuda_commvq_model_test
# (+ the books of .devbuild/s16a.) run with carry [".devbuild/s16b"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT /tmp/logs
set -o pipefail
DIR=${DIR:-.devbuild/s16b}
. bench/cuda/unpack_bundle.sh
[ -f /tmp/model.gguf ] && export VQSERVE_MODEL=/tmp/model.gguf VQSERVE_VQCB=$DIR/vecinfer-k2v2.vqcb
export VQSERVE_CVQCB=$DIR/commvq-2.vqcb
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/env.log 2>&1
for st in 0 1; do
  for bin in cuda_e2e_decode_bench_old cuda_e2e_decode_bench; do
    log=/tmp/logs/e2e_${bin}_stagger$st.log
    timeout 170 $B/$bin --models smollm2,llama8b --codecs fp16,vecinfer-k2v2,kivi-k2v2 --batch 16 \
      --ctx ${CTX:-32768} --short-ctx 256 --steps 64 --warmup 40 --stagger $st > $log 2>&1
    echo "== $bin stagger $st exit $?"; grep -E "^###|^\| (fp16|kivi|vecinfer)" $log
  done
done
tar -C /tmp/logs -czf $OUT/e2e_logs.tgz .
for t in cuda_random_model_test cuda_commvq_model_test; do
  { echo "== $t"; timeout 150 $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } >> $OUT/gtest.log 2>&1
done
grep -E "^==|exit:|FAILED|PASSED|SKIPPED \]" $OUT/gtest.log | head -30
