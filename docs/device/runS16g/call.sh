#!/bin/bash
# session 16 call 12: after the fp16 flush and vecinfer encoder changes, on the 2-block default
# model: cuda_graph_test (graphs vs eager) and cuda_model_test (fp16 kv, greedy picks against
# the cpu). no commvq books were carried (the carry was full), so the commvq-2 case fails on
# the missing artifact it is pointed at, as designed. bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s16g/bundle.tar.xz \
#     cuda_graph_test cuda_model_test   (+ model.gguf.xz and vecinfer-k2v2.vqcb of .devbuild/s16a)
# run with carry [".devbuild/s16g"]:
DIR=.devbuild/s16g TESTS="cuda_graph_test cuda_model_test" bash docs/device/runS16a/call.sh
