#!/bin/bash
# session 16 calls 5-7: the full default model (30 blocks, real q4_1 weights, vecinfer-k2v2
# books calibrated on it) at this session's code (graphs for flush steps), through
# bench/cuda/pack_full_model.sh (SPLIT=58000000):
#   call 5 (carry .devbuild/fullA), call 6 (carry .devbuild/fullB): STAGE=1 bash bench/cuda/run_full_model_on_device.sh
#   call 7 (carry .devbuild/fullC): this script
export OUT=${OUT:-/tmp/out}
E2E_CODECS=fp16,kivi-k2v2,vecinfer-k2v2 bash bench/cuda/run_full_model_on_device.sh tests generate serve
for st in 0 1; do
  E2E_CODECS=fp16,kivi-k2v2,vecinfer-k2v2 E2E_ARGS="--warmup 40 --stagger $st" \
    bash bench/cuda/run_full_model_on_device.sh e2e
  mv $OUT/e2e.log $OUT/e2e_stagger$st.log
done
