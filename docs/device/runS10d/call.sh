#!/bin/bash
# session 10 call 4: v8z as in runS10c plus: probabilities stored as half2 of tokens (q, q + 16)
# (4 stores a page, not 8; the value k-steps take tokens 8 kv .. + 7 and + 16, conflict-free
# code loads without the th swap), l_run / acc rescaled only on exact pages, my_tok and the
# block-table pointer pinned: 570 -> 531 sass instructions in the page loop. beside v8q and v8.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--long --vecinfer-only" \
BENCH_KERNELS=vecinfer-k2v2-v8hk,vecinfer-k2v2-hk,vecinfer-k2v2-v8zhk BENCH_SIZES=1x8192,1x131072,8x32768,16x32768,32x32768 \
  timeout 420 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
BK=/tmp/build-snap
M=smsp__inst_executed.sum,smsp__cycles_active.avg,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
for s in long_scoreboard math_pipe_throttle mio_throttle not_selected selected short_scoreboard wait dispatch_stall barrier; do
  M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
M=$M,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
NCU="timeout 60 ncu --clock-control none --kernel-name-base mangled -s 3 -c 1 --section SpeedOfLight --metrics $M"
$NCU -k regex:ValueGatherE2ELb1 $BK/attention_bench - vecinfer-k2v2-v8zhk 16 32768 > $OUT/ncu_v8z.txt 2>&1
for f in $OUT/ncu_*.txt; do
  echo "== $f"; grep -E "Duration|L1/TEX Cache|Compute \(SM\)|inst_executed|wavefronts|bank_conflicts|cycles_active|stalled_|pipe_" $f
done
cuobjdump -sass $BK/attention_bench 2>/dev/null | awk '/Function : /{f = /ValueGatherE2ELb1/} f' | xz -9 > $OUT/v8z_sass.txt.xz || true
ls -la $OUT
