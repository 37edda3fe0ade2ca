#!/bin/bash
# session 9 calls 9-12: CommVQ on the full default model (30 blocks, real q4_1 weights) with
# commvq-2 books calibrated on it here (`vqserve calibrate --codec commvq --k-bits 2 --v-bits 2
# --tokens 2048 --seq-len 256 --iterations 4` on the fortunes text, 7 min on 2 cores), through
# `TESTS=cuda_commvq_model_test COMMVQ_VQCB=... bash bench/cuda/pack_full_model.sh build
# models/default.vqcb`, back to back on one warm machine:
#   calls 9, 10, 11 (carry .devbuild/fullA, fullB, fullD): STAGE=1 bash bench/cuda/run_full_model_on_device.sh
#   call 12 (carry .devbuild/fullC): this script
# cuda_commvq_model_test on the full model, vqserve generate per codec on cuda / cpu / cpu-fp32
# (commvq-2 included), serve + vqctl per codec on cuda and cpu.
export OUT=${OUT:-/tmp/out}
bash bench/cuda/run_full_model_on_device.sh tests generate serve
