#!/bin/bash
# session 10 call 1: v8q (v8 with the quad value gathers: no bank conflicts, 32 value mmas a
# page; vecinfer_version 7, made the default for this call) beside v8 (vecinfer-k2v2-v8hk)
# and sdpa. decode_check --long --vecinfer-only (v8q cases included); a bundle of this tree's
# build (.devbuild/s10a): cuda_decode_attention_test (default dispatch = v8q at head_dim 128)
# and the end to end per codec at 16 x 32K on both shapes; ncu of v8 and v8q at 16 x 32K.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=.devbuild/s10a CHECKS="--long --vecinfer-only" GTESTS="cuda_decode_attention_test" \
BENCH_KERNELS=vecinfer-k2v2-v8hk,vecinfer-k2v2-hk BENCH_SIZES=1x8192,1x131072,8x32768,16x32768,32x32768 \
  timeout 400 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
export LD_LIBRARY_PATH=/tmp/b/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH  # the bundle's libraries
{
  echo "== cuda_e2e_decode_bench llama8b and smollm2 shapes (random weights), batch 16 x 32K"
  timeout 150 /tmp/b/cuda_e2e_decode_bench --models llama8b,smollm2 --codecs fp16,vecinfer-k2v2 \
    --batch 16 --ctx 32768 --steps 32 --warmup 8
  echo "exit: $?"
} > $OUT/e2e.log 2>&1
grep -E "^\||exit|^#" $OUT/e2e.log
BK=/tmp/build-snap
M=smsp__inst_executed.sum,smsp__cycles_active.avg,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
for s in long_scoreboard math_pipe_throttle mio_throttle not_selected selected short_scoreboard wait dispatch_stall barrier; do
  M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
M=$M,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
NCU="timeout 60 ncu --clock-control none --kernel-name-base mangled -s 3 -c 1 --section SpeedOfLight --metrics $M"
$NCU -k regex:ValueGatherE0 $BK/attention_bench - vecinfer-k2v2-v8hk 16 32768 > $OUT/ncu_v8.txt 2>&1
$NCU -k regex:ValueGatherE2 $BK/attention_bench - vecinfer-k2v2-hk 16 32768 > $OUT/ncu_v8q.txt 2>&1
for f in $OUT/ncu_*.txt; do
  echo "== $f"; grep -E "Duration|L1/TEX Cache|Compute \(SM\)|inst_executed|wavefronts|bank_conflicts|cycles_active|stalled_|pipe_" $f
done
