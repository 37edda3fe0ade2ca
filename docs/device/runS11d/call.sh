#!/bin/bash
# session 11 call 6: v8a3 (version 9) and v8a6 (version 10): v8z whose warps also ask l2 for
# the page 3 (v8a3) or 6 (v8a6) past the newest one in their smem stages (one
# cp.async.bulk.prefetch.L2 of 1 KB each for the k and v codes), so that the stage copies find
# their lines in l2. runS11c's stage costs: at 16 x 32K the page copies alone take 75.0 us of
# v8z's 137.5. beside v8z (version 8, the default) and sdpa. decode_check --long
# --vecinfer-only; ncu of v8a6 at 16 x 32K.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--long --vecinfer-only" \
BENCH_KERNELS=vecinfer-k2v2-v8zhk,vecinfer-k2v2-v8a3hk,vecinfer-k2v2-v8a6hk BENCH_SIZES=1x8192,1x131072,8x32768,16x32768,32x32768 \
  timeout 420 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
BK=/tmp/build-snap
M=smsp__inst_executed.sum,smsp__cycles_active.avg,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
for s in long_scoreboard math_pipe_throttle mio_throttle not_selected selected short_scoreboard wait dispatch_stall barrier; do
  M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
M=$M,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
NCU="timeout 60 ncu --clock-control none --kernel-name-base mangled -s 3 -c 1 --section SpeedOfLight --metrics $M"
$NCU -k regex:ValueGatherE2ELb1ELi6 $BK/attention_bench - vecinfer-k2v2-v8a6hk 16 32768 > $OUT/ncu_v8a6.txt 2>&1
for f in $OUT/ncu_*.txt; do
  echo "== $f"; grep -E "Duration|L1/TEX Cache|Compute \(SM\)|inst_executed|wavefronts|bank_conflicts|cycles_active|stalled_|pipe_" $f
done
