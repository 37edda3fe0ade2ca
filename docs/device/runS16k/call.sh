#!/bin/bash
# session 16 call 17, right after call 16 on the same warm machine (its /tmp/model.gguf):
# cuda_graph_test (graphs vs eager), cuda_model_kernels_test (the fused rope + query transform
# against cpu::ApplyRope and FastWalshHadamard), cuda_random_model_test; then end to end at
# batch 16, the commit before the fusion (dff428e: cuda_e2e_decode_bench_prev) beside it,
# aligned and staggered. not kept (no gain); the patch is fused_rope_query_transform.patch. bundle:
#   cp build/bin/cuda_e2e_decode_bench build/bin/cuda_e2e_decode_bench_prev   (before the change)
#   STRIP=1 XZ_OPT="-6 -T1" bash bench/cuda/bundle_binaries.sh build .devbuild/s16k/bundle.tar.xz \
#     cuda_e2e_decode_bench cuda_e2e_decode_bench_prev cuda_model_kernels_test \
#     cuda_random_model_test cuda_graph_test   (+ the books of .devbuild/s16a)
# run with carry [".devbuild/s16k"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT /tmp/logs
set -o pipefail
DIR=.devbuild/s16k
. bench/cuda/unpack_bundle.sh
if [ -f /tmp/model.gguf ]; then
  export VQSERVE_MODEL=/tmp/model.gguf VQSERVE_VQCB=$DIR/vecinfer-k2v2.vqcb VQSERVE_CVQCB=$DIR/commvq-2.vqcb
else
  echo "no /tmp/model.gguf: cuda_graph_test skips (call 16 first, on the same warm machine)"
fi
for t in cuda_graph_test cuda_model_kernels_test cuda_random_model_test; do
  { echo "== $t"; timeout 200 $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } >> $OUT/gtest.log 2>&1
done
grep -E "^==|exit:|FAILED|PASSED|SKIPPED \]|replays" $OUT/gtest.log | head -30
for st in 0 1; do
  for bin in cuda_e2e_decode_bench_prev cuda_e2e_decode_bench; do
    log=/tmp/logs/e2e_${bin}_stagger$st.log
    timeout 170 $B/$bin --models smollm2,llama8b --codecs fp16,vecinfer-k2v2 --batch 16 \
      --ctx 32768 --short-ctx 256 --steps 64 --warmup 40 --stagger $st > $log 2>&1
    echo "== $bin stagger $st exit $?"; grep -E "^###|^\| (fp16|kivi|vecinfer)" $log
  done
done
tar -C /tmp/logs -czf $OUT/e2e_logs.tgz .
