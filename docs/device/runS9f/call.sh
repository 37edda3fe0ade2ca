#!/bin/bash
# session 9 calls 6-8: the full default model (30 blocks, real q4_1 weights) with the v8
# vecinfer kernel at head_dim 64, through bench/cuda/pack_full_model.sh's three folders
# (`bash bench/cuda/pack_full_model.sh build models/default.vqcb`), back to back on one warm machine:
#   call 6 (carry .devbuild/fullA): STAGE=1 bash bench/cuda/run_full_model_on_device.sh
#   call 7 (carry .devbuild/fullB): STAGE=1 bash bench/cuda/run_full_model_on_device.sh
#   call 8 (carry .devbuild/fullC): this script
# cuda model tests (fp16, vecinfer-k2v2 books calibrated on the full model, kivi), vqserve
# generate per codec on cuda / cpu / cpu-fp32, serve + vqctl per codec, and the end to end on the
# real weights and the 8B shape. no commvq books calibrated on the full model travel.
export OUT=${OUT:-/tmp/out}
E2E_CODECS=fp16,kivi-k2v2,vecinfer-k2v2 bash bench/cuda/run_full_model_on_device.sh tests generate serve e2e
