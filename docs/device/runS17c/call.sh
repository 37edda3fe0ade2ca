#!/bin/bash
# session 17 calls 3-5: the full default model (30 blocks, real q4_1 weights, vecinfer-k2v2
# books calibrated on it) at 9cba68d's runtime and kernels (session 16's final code; session 17
# changed no code), through bench/cuda/pack_full_model.sh (SPLIT=58000000):
#   call 3 (carry .devbuild/fullA), call 4 (carry .devbuild/fullB): STAGE=1 bash bench/cuda/run_full_model_on_device.sh
#   call 5 (carry .devbuild/fullC): this script
export OUT=${OUT:-/tmp/out}
E2E_CODECS=fp16,kivi-k2v2,vecinfer-k2v2 bash bench/cuda/run_full_model_on_device.sh tests generate serve
