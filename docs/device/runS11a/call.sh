#!/bin/bash
# session 11 calls 1-3: the full default model (30 blocks, real q4_1 weights) with v8z, the
# default vecinfer kernel since session 10 (head_dim 64: v8's value gathers with the lean loop),
# at 2037772, through bench/cuda/pack_full_model.sh's three folders
# (`bash bench/cuda/pack_full_model.sh build models/default.vqcb`), back to back on one warm machine:
#   call 1 (carry .devbuild/fullA): STAGE=1 bash bench/cuda/run_full_model_on_device.sh
#   call 2 (carry .devbuild/fullB): STAGE=1 bash bench/cuda/run_full_model_on_device.sh
#   call 3 (carry .devbuild/fullC): this script
export OUT=${OUT:-/tmp/out}
E2E_CODECS=fp16,kivi-k2v2,vecinfer-k2v2 bash bench/cuda/run_full_model_on_device.sh tests generate serve e2e
