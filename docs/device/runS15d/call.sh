#!/bin/bash
# session 15 calls 4-6: the full default model (30 blocks, real q4_1 weights) at this commit, after
# the ring split and BlockResidual<64>, through bench/cuda/pack_full_model.sh (SPLIT=58000000):
#   call 4 (carry .devbuild/fullA), call 5 (carry .devbuild/fullB): STAGE=1 bash bench/cuda/run_full_model_on_device.sh
#   call 6 (carry .devbuild/fullC): this script
export OUT=${OUT:-/tmp/out}
E2E_CODECS=fp16,kivi-k2v2,vecinfer-k2v2,vecinfer-k1v1 bash bench/cuda/run_full_model_on_device.sh tests generate serve e2e
