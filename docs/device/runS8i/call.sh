#!/bin/bash
# session 8 call 9 (experiment, not on main unless adopted): the commvq warp kernel with a + ib
# summed in fp32 instead of one fp16 fma (commvq_version 2, "-f32sum" in the bench), for
# precision (decode_check prints v0 and v2 side by side) and speed.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--long --commvq-only" \
BENCH_KERNELS=commvq-1,commvq-1-f32sum,commvq-2,commvq-2-f32sum \
BENCH_SIZES=1x131072,16x32768 timeout 400 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
grep -E "G=4" $OUT/check1.log
