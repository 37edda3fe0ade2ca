#!/bin/bash
# session 16 call 1: cuda graphs for flush steps and across page boundaries. on the 2-block
# default model (real q4_1 weights, books calibrated on it): cuda_graph_test (graphs vs eager,
# bitwise, and how many steps replay), the kivi / commvq / vecinfer model tests (their flushes
# now take device page ids); then end to end at batch 16, old tree (445610c's runtime with this
# bench) beside this tree, sequences aligned and staggered over a page. bundle:
#   cp /tmp/old/build/bin/cuda_e2e_decode_bench build/bin/cuda_e2e_decode_bench_old
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s16a/bundle.tar.xz \
#     cuda_graph_test cuda_kivi_model_test cuda_commvq_model_test cuda_vecinfer_model_test \
#     cuda_e2e_decode_bench cuda_e2e_decode_bench_old
# (model.gguf.xz, vecinfer-k2v2.vqcb and commvq-2.vqcb from bench/cuda/pack_commvq_bundle.sh.)
# run with carry [".devbuild/s16a"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT /tmp/logs
set -o pipefail
DIR=${DIR:-.devbuild/s16a}
. bench/cuda/unpack_bundle.sh
export VQSERVE_CVQCB=$DIR/commvq-2.vqcb
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/env.log 2>&1
for t in ${TESTS:-cuda_graph_test cuda_kivi_model_test cuda_commvq_model_test cuda_vecinfer_model_test}; do
  { echo "== $t"; timeout 200 $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } >> $OUT/gtest.log 2>&1
done
grep -E "^==|exit:|FAILED|PASSED|SKIPPED \]|replays" $OUT/gtest.log | head -40
[ "${E2E:-1}" = 1 ] || exit 0
for st in 0 1; do
  for bin in cuda_e2e_decode_bench_old cuda_e2e_decode_bench; do
    log=/tmp/logs/e2e_${bin}_stagger$st.log
    timeout 150 $B/$bin --models smollm2,llama8b --codecs fp16,vecinfer-k2v2,kivi-k2v2 --batch 16 \
      --ctx ${CTX:-32768} --short-ctx 256 --steps 64 --warmup 40 --stagger $st > $log 2>&1
    echo "== $bin stagger $st exit $?"; grep -E "^###|^\| (fp16|kivi|vecinfer)" $log
  done
done
tar -C /tmp/logs -czf $OUT/e2e_logs.tgz .
