#!/bin/bash
# session 13 call 2: the tree with docs/device/runS12a/flip_default.patch applied (v8z the default
# for vecinfer-k1v1 / -k2v1 at head_dim 128, with the runtime's fp16 books; v8 on two head
# groups for head_dim 64 with more than 4 query heads per kv head). decode_check --long
# --vecinfer-only; k1v1 / k2v1 on v8z beside k2v2 and sdpa; a bundle of this tree's build
# (.devbuild/s13a): cuda_decode_attention_test and the new cuda_random_model_test (random-weight
# llamas at head_dim 128 GQA 1 / 4 / 8 and head_dim 64 GQA 8, cuda vs cpu per codec); then the
# end to end per codec at 16 x 32K on both shapes (random weights).
#   STRIP=1 XZ_OPT=-9e bash bench/cuda/bundle_binaries.sh build .devbuild/s13a/bundle.tar.xz \
#     cuda_decode_attention_test cuda_random_model_test cuda_e2e_decode_bench
# run with carry [".devbuild/s13a"].
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=.devbuild/s13a CHECKS="--long --vecinfer-only" GTESTS="cuda_decode_attention_test cuda_random_model_test" \
BENCH_KERNELS=vecinfer-k2v2-hk,vecinfer-k1v1-v8zhk,vecinfer-k2v1-v8zhk \
BENCH_SIZES=1x8192,1x131072,8x32768,16x32768,32x32768 timeout 400 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
grep -E "greedy picks" $OUT/gtest.log
export LD_LIBRARY_PATH=/tmp/b/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH  # the bundle's libraries
{
  echo "== cuda_e2e_decode_bench llama8b and smollm2 shapes (random weights), batch 16 x 32K"
  timeout 300 /tmp/b/cuda_e2e_decode_bench --models llama8b,smollm2 \
    --codecs fp16,kivi-k2v2,vecinfer-k2v2,vecinfer-k2v1,vecinfer-k1v1,commvq-2 \
    --batch 16 --ctx 32768 --steps 32 --warmup 8
  echo "exit: $?"
} > $OUT/e2e.log 2>&1
grep -E "^\||exit|^#" $OUT/e2e.log
