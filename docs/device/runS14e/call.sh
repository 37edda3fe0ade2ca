#!/bin/bash
# session 14 call 5: where the vecinfer v8 decode kernel's time goes inside a real decode step
# (cuda_e2e_decode_bench, random weights, batch 16, vecinfer-k2v2 with the 32-token sink) at
# ctx 256 and 32K on both shapes: ncu's speed-of-light, warp-state, scheduler, memory and launch
# sections for one launch, clocks and caches as in a normal run (--clock-control none
# --cache-control none); then per-kernel durations of one eager step, fp16 and vecinfer-k2v2,
# with those settings. the bundle is runS14b's (.devbuild/s14b).
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
DIR=.devbuild/s14b
. bench/cuda/unpack_bundle.sh
E=$B/cuda_e2e_decode_bench
for m in smollm2 llama8b; do
  for ctx in 256 32768; do
    timeout 120 ncu --clock-control none --cache-control none --kernel-name regex:VecInferV8DecodeKernel \
      --launch-skip 40 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
      --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
      $E --models $m --codecs vecinfer-k2v2 --batch 16 --ctx $ctx --short-ctx $ctx --steps 2 --warmup 0 --graphs off \
      > $OUT/ncu_v8_${m}_$ctx.txt 2>&1
    echo "ncu v8 $m $ctx exit $?"; grep -E "Duration|Elapsed Cycles|SM Frequency|Registers|Grid Size|Block Size|Stall|Warp Cycles Per Issued" $OUT/ncu_v8_${m}_$ctx.txt | head -12
  done
  for c in fp16 vecinfer-k2v2; do
    timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
      $E --models $m --codecs $c --batch 16 --ctx 256 --short-ctx 256 --steps 2 --warmup 0 --graphs off \
      > $OUT/ncu_${m}_$c.csv 2> $OUT/ncu_${m}_$c.err
    echo "ncu $m $c exit $?"
    python3 bench/cuda/ncu_step_summary.py $OUT/ncu_${m}_$c.csv | head -8
  done
done
