#!/bin/bash
# session 10 call 6: v8z as the runtime's default (vecinfer_version 0 = 8 at head_dim 128 and 64).
# decode_check --long --vecinfer-only; the kernels beside sdpa (vecinfer-k2v2-hk = the runtime's
# dispatch and books, v8 = vecinfer-k2v2-v8hk, and the other formats); a bundle of this tree's
# build (.devbuild/s10f): cuda_decode_attention_test (default dispatch vs the cpu codec), then
# the end to end per codec at 16 x 32K on both shapes (random weights).
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=.devbuild/s10f CHECKS="--long --vecinfer-only" GTESTS="cuda_decode_attention_test" \
BENCH_KERNELS=vecinfer-k2v2-hk,vecinfer-k2v2-v8hk,fp16-paged,kivi-k2v2,commvq-1 \
BENCH_SIZES=1x8192,1x131072,8x32768,16x8192,16x32768,32x32768 timeout 400 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
export LD_LIBRARY_PATH=/tmp/b/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH  # the bundle's libraries
{
  echo "== cuda_e2e_decode_bench llama8b and smollm2 shapes (random weights), batch 16 x 32K"
  timeout 170 /tmp/b/cuda_e2e_decode_bench --models llama8b,smollm2 --codecs fp16,kivi-k2v2,vecinfer-k2v2 \
    --batch 16 --ctx 32768 --steps 32 --warmup 8
  echo "exit: $?"
} > $OUT/e2e.log 2>&1
grep -E "^\||exit|^#" $OUT/e2e.log
