#!/bin/bash
# session 16 call 1: cuda graphs for flush steps and across page boundaries, on the 2-block
# default model (real q4_1 weights, books calibrated on it): cuda_graph_test (graphs vs eager,
# bitwise, and how many steps replay) and cuda_kivi_model_test (its flushes now take device page
# ids). calls 2, 4 and 12 ran this script too, with other DIR and TESTS (their call.sh). bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s16a/bundle.tar.xz \
#     cuda_graph_test cuda_kivi_model_test
# (model.gguf.xz, vecinfer-k2v2.vqcb and commvq-2.vqcb as bench/cuda/pack_commvq_bundle.sh makes
# them.) run with carry [".devbuild/s16a"]:
#   DIR=.devbuild/s16a TESTS="cuda_graph_test cuda_kivi_model_test" bash docs/device/runS16a/call.sh
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
