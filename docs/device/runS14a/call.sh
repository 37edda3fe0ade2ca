#!/bin/bash
# session 14 call 1: where a decode step's time goes outside the attention. gemm_bench (built
# here from bench/cuda: the runtime's cublasGemmEx beside cublasLt's algorithms at the layer
# shapes), the e2e bench at batch 16 x ctx 256 (graphs on, the default), and ncu per-kernel
# durations of 2 eager decode steps at batch 16 x ctx 256 on both shapes.
#   STRIP=1 XZ_OPT=-9e bash bench/cuda/bundle_binaries.sh build .devbuild/s14a/bundle.tar.xz cuda_e2e_decode_bench
# run with carry [".devbuild/s14a"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/env.log 2>&1
cmake -S bench/cuda -B /tmp/bd -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1
cmake --build /tmp/bd --target gemm_bench -j16 > /tmp/build.log 2>&1 || tail -30 /tmp/cmake.log /tmp/build.log
timeout 240 /tmp/bd/gemm_bench > $OUT/gemm.log 2>&1; echo "gemm_bench exit $?"; cat $OUT/gemm.log
DIR=.devbuild/s14a
. bench/cuda/unpack_bundle.sh
timeout 150 /tmp/b/cuda_e2e_decode_bench --models llama8b,smollm2 --codecs fp16,vecinfer-k2v2 --batch 16 \
  --ctx 256 --short-ctx 256 --steps 32 --warmup 8 > $OUT/e2e.log 2>&1; echo "e2e exit $?"
grep -E "^\|" $OUT/e2e.log
for m in smollm2 llama8b; do
  timeout 150 ncu --metrics gpu__time_duration.sum --csv --print-units base /tmp/b/cuda_e2e_decode_bench \
    --models $m --codecs vecinfer-k2v2 --batch 16 --ctx 256 --short-ctx 256 --steps 2 --warmup 0 --graphs off \
    > $OUT/ncu_$m.csv 2> $OUT/ncu_$m.err
  echo "ncu $m exit $?"; wc -l $OUT/ncu_$m.csv; tail -3 $OUT/ncu_$m.err
done
