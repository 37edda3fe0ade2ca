#!/bin/bash
# session 18 call 1 (at 09218d9's code): the tensor-core prefill kernel's first run.
# bundle (no model):
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/p1a/bundle.tar.xz \
#     prefill_bench cuda_prefill_attention_test cuda_random_model_test cuda_e2e_prefill_bench
# run with carry [".devbuild/p1a"] (every step: check tests bench sdpa e2e):
DIR=.devbuild/p1a bash bench/cuda/run_prefill_on_device.sh
