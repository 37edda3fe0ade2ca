#!/bin/bash
# session 15 call 7: on the 2-block default model (real q4_1 weights, vecinfer-k2v2 books
# calibrated on it): the sink append skipped on steps whose tokens all lie past the sink (its
# flag in the graph key), and the warp-shuffle vecinfer query transform.
# cuda_vecinfer_model_test (greedy picks and logits vs the cpu cache; prefill vs single-token
# steps from position 0, through the sink). the model stays in /tmp/model.gguf for call 8
# (runS15f). one test binary: with the model the carry holds no more.
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s15e/bundle.tar.xz \
#     cuda_vecinfer_model_test
# (model.gguf.xz and vecinfer-k2v2.vqcb as in .devbuild/g2.) run with carry [".devbuild/s15e"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT /tmp/keep
cp .devbuild/s15e/vecinfer-k2v2.vqcb /tmp/keep/
DIR=.devbuild/s15e TESTS="cuda_vecinfer_model_test" bash docs/device/runS14c/call.sh
