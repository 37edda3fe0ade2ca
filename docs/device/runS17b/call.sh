#!/bin/bash
# session 17 call 2: ncu of v8i (int8 lut scores, vecinfer_version 9) and v8z at 16 x 32K on
# the 8B shape (runS17a timed them: 128.9 against 137.6 us): shared-memory wavefronts,
# instructions, stall reasons. carry nothing; v8i needs runS17a's patch applied first.
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
BK=/tmp/build-snap
cmake -S bench/cuda -B $BK -DCMAKE_BUILD_TYPE=Release > /tmp/build.log 2>&1 && cmake --build $BK -j16 --target attention_bench >> /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
M=smsp__inst_executed.sum,smsp__cycles_active.avg,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
for s in long_scoreboard math_pipe_throttle mio_throttle not_selected selected short_scoreboard wait dispatch_stall barrier lg_throttle; do
  M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
M=$M,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active
NCU="timeout 90 ncu --clock-control none --kernel-name-base mangled -s 3 -c 1 --section SpeedOfLight --metrics $M"
$NCU -k regex:ValueGatherE2ELb1ELi4ELi4ELb1E $BK/attention_bench - vecinfer-k2v2-v8ihk 16 32768 > $OUT/ncu_v8i.txt 2>&1
$NCU -k regex:ValueGatherE2ELb1ELi4ELi4ELb0E $BK/attention_bench - vecinfer-k2v2-v8zhk 16 32768 > $OUT/ncu_v8z.txt 2>&1
for f in $OUT/ncu_*.txt; do
  echo "== $f"; grep -E "Duration|L1/TEX Cache|Compute \(SM\)|inst_executed|wavefronts|bank_conflicts|cycles_active|stalled_|pipe_|==ERR|==WARN" $f
done
