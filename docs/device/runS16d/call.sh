#!/bin/bash
# session 16 call 4: cuda_commvq_model_test on the 2-block default model (greedy picks and
# logits against the cpu PagedKvCache; the encode test with page ids in reverse order), its
# flushes now encoded from device page ids. bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s16d/bundle.tar.xz \
#     cuda_commvq_model_test
# (+ model.gguf.xz and the books of .devbuild/s16a.) run with carry [".devbuild/s16d"]:
DIR=.devbuild/s16d TESTS="cuda_commvq_model_test" bash docs/device/runS16a/call.sh
