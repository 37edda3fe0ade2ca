#!/bin/bash
# session 15 call 8, right after call 7 on the same warm machine (its /tmp/model.gguf, the
# 2-block default model, and /tmp/keep/vecinfer-k2v2.vqcb): cuda_graph_test (graphs bitwise
# equal to eager, now that the sink append's launch depends on the step), cuda_model_kernels_test
# (the warp query transform against the cpu's), cuda_random_model_test; then end to end on
# both shapes at batch 16 (ctx 2048 and 32K, short ctx 256) and ncu per-kernel times of one
# eager step at ctx 256. bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s15f/bundle.tar.xz \
#     cuda_graph_test cuda_e2e_decode_bench cuda_random_model_test cuda_model_kernels_test
# run with carry [".devbuild/s15f"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT /tmp/logs
set -o pipefail
B=/tmp/b2
mkdir -p $B
python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .devbuild/s15f/bundle.tar.xz $B
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH
if [ -f /tmp/model.gguf ]; then
  export VQSERVE_MODEL=/tmp/model.gguf VQSERVE_VQCB=/tmp/keep/vecinfer-k2v2.vqcb
else
  echo "no /tmp/model.gguf: cuda_graph_test will skip (call 7 first, on the same warm machine)"
fi
for t in cuda_graph_test cuda_model_kernels_test cuda_random_model_test; do
  { echo "== $t"; timeout 300 $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } >> $OUT/gtest.log 2>&1
done
grep -E "^==|exit:|FAILED|PASSED|SKIPPED \]|bitwise|replay" $OUT/gtest.log | head -30
E=$B/cuda_e2e_decode_bench
for ctx in 2048 32768; do
  timeout 200 $E --models smollm2,llama8b --codecs fp16,vecinfer-k2v2 --batch 16 --ctx $ctx --short-ctx 256 --steps 24 --warmup 6 \
    > /tmp/logs/e2e_$ctx.log 2>&1
  echo "e2e ctx $ctx exit $?"; grep -E "^\| (fp16|vecinfer)" /tmp/logs/e2e_$ctx.log
done
cat /tmp/logs/e2e_*.log > $OUT/e2e.log
for c in fp16 vecinfer-k2v2; do
  f=/tmp/logs/ncu_smollm2_256_$c.csv
  timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
    $E --models smollm2 --codecs $c --batch 16 --ctx 256 --short-ctx 256 --steps 2 --warmup 0 --graphs off > $f 2> $f.err
  echo "== smollm2 ctx 256 $c (ncu exit $?)"
  python3 bench/cuda/ncu_step_summary.py $f | head -16
done > $OUT/ncu_step_kernels.txt 2>&1
grep -E "kernels in the last step|VecInfer|Fp16Staged|QueryTransform|SinkAppend" $OUT/ncu_step_kernels.txt
tar -C /tmp/logs -cJf $OUT/logs.tar.xz .
