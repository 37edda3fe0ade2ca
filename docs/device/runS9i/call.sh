#!/bin/bash
# session 9 calls 14-17: runS9g's cuda_commvq_model_test again, built with the 4% bound of
# ChunkedPrefillEqualsWhole, on the full default model with the same commvq-2 books:
#   calls 14, 15, 16 (carry .devbuild/fullA, fullB, fullD): STAGE=1 bash bench/cuda/run_full_model_on_device.sh
#   call 17 (carry .devbuild/fullC): this script
export OUT=${OUT:-/tmp/out}
bash bench/cuda/run_full_model_on_device.sh tests
