#!/bin/bash
# session 16 call 16: q's rope inside the vecinfer query transform's launch (not kept: its patch
# is docs/device/runS16k/fused_rope_query_transform.patch). on the 2-block
# default model: cuda_vecinfer_model_test (greedy picks and logits against the cpu
# PagedKvCache). leaves the model in /tmp/model.gguf for call 17 on the same warm machine.
# bundle: STRIP=1 XZ_OPT="-6 -T1" bash bench/cuda/bundle_binaries.sh build \
#   .devbuild/s16j/bundle.tar.xz cuda_vecinfer_model_test  (+ model.gguf.xz and the books of
# .devbuild/s16a). run with carry [".devbuild/s16j"]:
DIR=.devbuild/s16j TESTS="cuda_vecinfer_model_test" bash docs/device/runS16a/call.sh
