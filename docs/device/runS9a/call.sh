#!/bin/bash
# session 9 call 1 (v8r is in v8r.patch here, not on main): the shared-memory floors of the vecinfer k2v2 and commvq-1 formats
# (bench/cuda/smem_floor_bench.cu) beside our kernels and sdpa; v8r (v8 with v7r's routed,
# conflict-free value gathers, vecinfer_version 7) beside the runtime's v8; decode_check --long
# --vecinfer-only (v8r included); ncu stall reasons and shared-memory wavefronts of v8, v8r and
# the floors at 16 x 32K; cuda_graph_test with vecinfer and commvq books (.devbuild/g1).
export OUT=${OUT:-/tmp/out}
export VQSERVE_CVQCB=$PWD/.devbuild/g1/commvq-2.vqcb
SNAP=. DIR=.devbuild/g1 CHECKS="--long --vecinfer-only" GTESTS="cuda_graph_test" FLOOR=1 \
BENCH_KERNELS=vecinfer-k2v2-hk,vecinfer-k2v2-v8rhk,commvq-1 \
BENCH_SIZES=1x8192,1x131072,16x32768,32x32768 timeout 420 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
BK=/tmp/build-snap
M=smsp__inst_executed.sum,smsp__cycles_active.avg,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
for s in barrier branch_resolving dispatch_stall drain imc_miss lg_throttle long_scoreboard math_pipe_throttle membar mio_throttle misc no_instruction not_selected selected short_scoreboard sleeping tex_throttle wait; do
  M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
NCU="timeout 90 ncu --clock-control none --kernel-name-base mangled -s 3 -c 1 --section SpeedOfLight --section WarpStateStats --metrics $M"
$NCU -k regex:VecInferV8DecodeKernelILb0 $BK/attention_bench - vecinfer-k2v2-hk 16 32768 > $OUT/ncu_v8.txt 2>&1
$NCU -k regex:VecInferV8DecodeKernelILb1 $BK/attention_bench - vecinfer-k2v2-v8rhk 16 32768 > $OUT/ncu_v8r.txt 2>&1
BENCH_SIZES=16x32768 $NCU -k regex:VecInferFloorILb1 $BK/smem_floor_bench > $OUT/ncu_floor_vecinfer.txt 2>&1
BENCH_SIZES=16x32768 $NCU -k regex:CommVqFloorILb1 $BK/smem_floor_bench > $OUT/ncu_floor_commvq1.txt 2>&1
for f in $OUT/ncu_*.txt; do
  echo "== $f"; grep -E "Duration|Memory Throughput|DRAM Through|L1/TEX Cache|Compute \(SM\)|inst_executed|wavefronts|bank_conflicts|cycles_active|stalled_" $f | awk '$NF != "0" && $NF+0 > 0.05 || /Duration|inst|wavefr|bank|Throughput/'
done
