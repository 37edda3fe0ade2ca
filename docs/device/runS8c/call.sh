#!/bin/bash
# session 8 call 3: commvq split count = sms / blocks (runS8a/b: sms / blocks - 1) beside sdpa,
# then the end to end per codec with the commvq warp kernel (bundle .devbuild/e1:
# cuda_e2e_decode_bench of this tree), llama-3.1-8b and smollm2 shapes, random weights.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--commvq-only" BENCH_KERNELS=commvq-1 \
BENCH_SIZES=1x8192,1x32768,1x131072,8x32768,16x8192,16x32768,32x32768 \
timeout 200 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
DIR=.devbuild/e1 . bench/cuda/unpack_bundle.sh
{
  echo "== cuda_e2e_decode_bench llama8b and smollm2 shapes (random weights), batch 16 x 32K"
  timeout 300 $B/cuda_e2e_decode_bench --models llama8b,smollm2 --codecs fp16,vecinfer-k2v2,commvq-1,commvq-2 \
    --batch 16 --ctx 32768 --steps 32 --warmup 8
  echo "exit: $?"
} > $OUT/e2e.log 2>&1
grep -E "^\||exit|^#" $OUT/e2e.log
