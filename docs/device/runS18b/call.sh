#!/bin/bash
# session 18 call 2 (09218d9): cuda_vecinfer_model_test on the 2-block default model (real q4_1
# weights, books calibrated on it: bench/cuda/pack_commvq_bundle.sh's model.gguf.xz and .vqcb
# files), which it then parks in /tmp/keep for call 3 (the carry limit holds one bundle beside the
# model). bundle: cuda_vecinfer_model_test; run with carry [".devbuild/p2a"]:
DIR=.devbuild/p2a STEPS=tests TESTS=cuda_vecinfer_model_test bash bench/cuda/run_prefill_on_device.sh
mkdir -p /tmp/keep && cp .devbuild/p2a/*.vqcb .devbuild/p2a/model.gguf.xz /tmp/keep/
