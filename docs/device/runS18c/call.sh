#!/bin/bash
# session 18 call 3 (09218d9), right after call 2 on the same warm machine: the other model
# tests on the 2-block model parked by call 2. bundle: cuda_model_test cuda_kivi_model_test
# cuda_commvq_model_test cuda_graph_test; run with carry [".devbuild/p2b"]:
mkdir -p .devbuild/p2b && cp /tmp/keep/* .devbuild/p2b/
DIR=.devbuild/p2b STEPS=tests TESTS="cuda_model_test cuda_kivi_model_test cuda_commvq_model_test cuda_graph_test" \
  bash bench/cuda/run_prefill_on_device.sh
