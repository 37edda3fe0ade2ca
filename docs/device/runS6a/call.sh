#!/bin/bash
# session 6 call 1: v8b (bulk page copies), pdl combine, copies-only skip; ncu stall reasons.
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=/nonexistent CHECKS="--long --vecinfer-only;--kivi-only;--commvq-only" \
BENCH_KERNELS=fp16-paged,fp16-paged-plain,kivi-k2v2,vecinfer-k2v2-h,vecinfer-k2v2-v7,vecinfer-k2v2-v8h,vecinfer-k2v2-v8h-plain,vecinfer-k2v2-v8b,vecinfer-k2v2-v8bh \
BENCH_SIZES=1x8192,1x131072,16x32768,32x32768 timeout 420 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log
for k in vecinfer-k2v2-v8h vecinfer-k2v2-v8bh; do
  timeout 60 ncu --clock-control none -k regex:VecInfer -s 5 -c 1 --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
    --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum,dram__bytes_read.sum \
    /tmp/build-snap/attention_bench - $k 16 32768 > $OUT/ncu_$k.txt 2>&1
  grep -E "Duration|DRAM Through|L1/TEX Cache|stalled_(long|short|mio|lg|barrier|wait|math|not_sel|no_inst|dispatch|membar|branch)" $OUT/ncu_$k.txt | awk '{print $1, $NF}' | head -20
done
