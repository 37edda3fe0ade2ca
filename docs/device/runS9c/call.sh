#!/bin/bash
# session 9 call 3: v8 at head_dim 64 (the default model's shape: 3 query heads per kv head),
# which replaces the v4 lut kernel there. decode_check --long --vecinfer-only (head_dim 64 and
# 128, and a 131149-token case at each); vecinfer-k2v2 beside sdpa (head_dim 128, unchanged);
# a bundle of this tree's build (.devbuild/e2): cuda_decode_attention_test (the cpu codec's
# AttendPages on random and EncodePage pages), then the end to end per codec at 16 x 32K on
# both shapes (random weights). the model tests are runS9d (the carry holds one bundle + model).
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=.devbuild/e2 CHECKS="--long --vecinfer-only" GTESTS="cuda_decode_attention_test" \
BENCH_KERNELS=vecinfer-k2v2-hk BENCH_SIZES=1x131072,16x32768 timeout 420 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
export LD_LIBRARY_PATH=/tmp/b/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH  # the bundle's libraries
{
  echo "== cuda_e2e_decode_bench llama8b and smollm2 shapes (random weights), batch 16 x 32K"
  timeout 240 /tmp/b/cuda_e2e_decode_bench --models llama8b,smollm2 --codecs fp16,kivi-k2v2,vecinfer-k2v2 \
    --batch 16 --ctx 32768 --steps 32 --warmup 8
  echo "exit: $?"
} > $OUT/e2e.log 2>&1
grep -E "^\||exit|^#" $OUT/e2e.log
