#!/bin/bash
# session 16 call 2: cuda_vecinfer_model_test on the 2-block default model (greedy picks and
# logits against the cpu PagedKvCache, the sink, chunked prefill), its flushes encoded from
# device page ids. bundle: STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build \
#   .devbuild/s16c/bundle.tar.xz cuda_vecinfer_model_test  (+ model.gguf.xz and the books of
# .devbuild/s16a). run with carry [".devbuild/s16c"]:
DIR=.devbuild/s16c TESTS="cuda_vecinfer_model_test" bash docs/device/runS16a/call.sh
