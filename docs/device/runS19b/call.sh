#!/bin/bash
# session 19 call 2: 64-token query tiles (two m-tiles a warp; the page between two
# coded-prefix runs attended twice) beside c9143af's kernel (32-token tiles with key splits,
# runS19a; built here as prefill_bench_c9143af from a worktree of that commit with nvcc) in the
# same call. bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s19b/bundle.tar.xz \
#     prefill_bench prefill_bench_c9143af cuda_prefill_attention_test cuda_random_model_test \
#     cuda_e2e_prefill_bench
# run with carry [".devbuild/s19b"]:
export OUT=${OUT:-/tmp/out}
set -o pipefail
DIR=.devbuild/s19b STEPS="check tests bench sdpa e2e" REF_MAX=0 \
  BENCH_BINS="prefill_bench_c9143af prefill_bench" E2E_ARGS="--prompts 8192,32768 --ref-max 0" \
  bash bench/cuda/run_prefill_on_device.sh
# the runtime tests again with three key splits forced in every prefill step.
export LD_LIBRARY_PATH=/tmp/b/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
{ echo "== cuda_random_model_test, VQSERVE_CUDA_PREFILL_SPLITS=3"
  VQSERVE_CUDA_PREFILL_SPLITS=3 timeout 300 /tmp/b/cuda_random_model_test 2>&1 |
    grep -vE "^\[ +(RUN|OK) +\]"; echo "exit: $?"; } > "$OUT/gtest_splits3.log" 2>&1
grep -E "^==|exit:|FAILED|PASSED" "$OUT/gtest_splits3.log" | head
