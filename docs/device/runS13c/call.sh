#!/bin/bash
# session 13 call 4: v8's lean loop takes the 8-dim sub-vectors at head_dim 64 too (vecinfer-k1v1
# / -k2v1 on the default model's shape; PageShape<64, 8, 8> / <64, 4, 8>: one score step whose
# lanes tig >= 2 gather nothing, 256-byte code parts, a padded k part for the probabilities).
# decode_check --long --vecinfer-only; cuda_decode_attention_test and cuda_random_model_test
# (now with head_dim 64 k1v1 / k2v1 at GQA 3 and 8) of this tree's build (.devbuild/s13c);
# compute-sanitizer memcheck + racecheck over the 8-dim variants; the end to end per codec on the
# SmolLM2-135M shape at 16 x 32K (random weights).
#   STRIP=1 XZ_OPT=-9e bash bench/cuda/bundle_binaries.sh build .devbuild/s13c/bundle.tar.xz \
#     cuda_decode_attention_test cuda_random_model_test cuda_e2e_decode_bench
# run with carry [".devbuild/s13c"].
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=.devbuild/s13c CHECKS="--long --vecinfer-only" GTESTS="cuda_decode_attention_test cuda_random_model_test" \
  timeout 300 bash bench/cuda/run_kernel_bundle_on_device.sh
grep -E "greedy picks" $OUT/gtest.log
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
ONLY=vecinfer-k1v1,vecinfer-k2v1,vecinfer-k1v1-v8zhk,vecinfer-k2v1-v8zhk-ph,vecinfer-k1v1-v8z-ph
for tool in memcheck racecheck; do
  timeout 120 $CS --tool $tool --error-exitcode 9 /tmp/build-snap/decode_check --only $ONLY > $OUT/$tool.log 2>&1
  echo "$tool exit: $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL" $OUT/$tool.log | head -5; tail -n 2 $OUT/$tool.log
done
export LD_LIBRARY_PATH=/tmp/b/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH  # the bundle's libraries
{
  echo "== cuda_e2e_decode_bench smollm2 shape (random weights), batch 16 x 32K"
  timeout 150 /tmp/b/cuda_e2e_decode_bench --models smollm2 --codecs fp16,vecinfer-k2v2,vecinfer-k2v1,vecinfer-k1v1 \
    --batch 16 --ctx 32768 --steps 32 --warmup 8
  echo "exit: $?"
} > $OUT/e2e.log 2>&1
grep -E "^\||exit|^#" $OUT/e2e.log
