#!/bin/bash
# session 14 call 4: on the 2-block default model, this tree's build: cuda_model_test (fp16
# weights and kv on the gpu vs the cpu model: greedy tokens, logits, batched = alone) and
# cuda_graph_test (graphs vs eager, bitwise, fp16 / kivi / vecinfer) after the small-kernel
# rework. the script is runS14c's with another bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s14d/bundle.tar.xz \
#     cuda_model_test cuda_graph_test
# (model.gguf.xz and vecinfer-k2v2.vqcb as in .devbuild/g2.) run with carry [".devbuild/s14d"].
DIR=.devbuild/s14d TESTS="cuda_model_test cuda_graph_test" bash docs/device/runS14c/call.sh
