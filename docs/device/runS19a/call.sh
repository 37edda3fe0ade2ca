#!/bin/bash
# session 19 call 1: the tensor-core prefill kernel with key splits (prefill_combine.cu) and
# cp.async fp16 rows, beside HEAD's kernel (627b47a, built here as prefill_bench_head from a
# worktree of that commit: nvcc of bench/cuda/prefill_bench.cu and the four *_kv_step /
# prefill_attention kernels) in the same call. bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s19a/bundle.tar.xz \
#     prefill_bench prefill_bench_head cuda_prefill_attention_test cuda_random_model_test \
#     cuda_e2e_prefill_bench
# run with carry [".devbuild/s19a"]:
export OUT=${OUT:-/tmp/out}
set -o pipefail
DIR=.devbuild/s19a STEPS="check tests bench sdpa e2e" REF_MAX=0 \
  BENCH_BINS="prefill_bench_head prefill_bench" E2E_ARGS="--prompts 8192,32768 --ref-max 0" \
  bash bench/cuda/run_prefill_on_device.sh
# the runtime tests again with three key splits forced in every prefill step.
{ echo "== cuda_random_model_test, VQSERVE_CUDA_PREFILL_SPLITS=3"
  VQSERVE_CUDA_PREFILL_SPLITS=3 timeout 300 /tmp/b/cuda_random_model_test 2>&1 |
    grep -vE "^\[ +(RUN|OK) +\]"; echo "exit: $?"; } > "$OUT/gtest_splits3.log" 2>&1
grep -E "^==|exit:|FAILED|PASSED" "$OUT/gtest_splits3.log" | head
