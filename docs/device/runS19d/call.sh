#!/bin/bash
# session 19 calls 4-6: the full default model (30 blocks, real q4_1 weights, vecinfer-k2v2 books
# calibrated on it: models/default.vqcb) on the final code (the prefill kernel with key splits),
# through bench/cuda/pack_full_model.sh:
#   SPLIT=58000000 TESTS="cuda_model_test cuda_vecinfer_model_test cuda_kivi_model_test \
#     cuda_random_model_test prefill_bench" bash bench/cuda/pack_full_model.sh build models/default.vqcb
#   call 4 (carry .devbuild/fullA), call 5 (carry .devbuild/fullB):
#     STAGE=1 bash bench/cuda/run_full_model_on_device.sh
#   call 6 (carry .devbuild/fullC): this script
export OUT=${OUT:-/tmp/out}
set -o pipefail
bash bench/cuda/run_full_model_on_device.sh tests generate serve
export LD_LIBRARY_PATH=/tmp/b/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export VQSERVE_MODEL=/tmp/full.gguf VQSERVE_VQCB=/tmp/keep/vecinfer-k2v2.vqcb
# the model tests and the random-weight runtime tests with three key splits forced in every
# prefill step (the prompts of these tests are short enough for the launcher to take one).
{
  for t in cuda_vecinfer_model_test cuda_kivi_model_test cuda_random_model_test; do
    echo "== $t, VQSERVE_CUDA_PREFILL_SPLITS=3"
    VQSERVE_CUDA_PREFILL_SPLITS=3 timeout 150 /tmp/b/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"
    echo "$t exit: $?"
  done
} > "$OUT/tests_splits3.log" 2>&1
grep -E "^==|exit:|FAILED|PASSED|picks equal" "$OUT/tests_splits3.log" | head -30
