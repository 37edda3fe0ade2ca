#!/bin/bash
# session 6 call 7: ncu stall locations of v8h at 16 x 32K without page work (books + ring + copies).
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
BK=/tmp/build-snap
(cmake -S bench/cuda -B $BK -DCMAKE_BUILD_TYPE=Release > /tmp/build.log 2>&1 && cmake --build $BK -j16 --target attention_bench >> /tmp/build.log 2>&1) || { tail -20 /tmp/build.log; exit 1; }
echo build ok
timeout 150 ncu --clock-control none -k regex:VecInferV8 -s 135 -c 1 --section SourceCounters --section WarpStateStats \
  --import-source yes --print-details all $BK/attention_bench - vecinfer-k2v2-v8h 16 32768 > $OUT/ncu135.txt 2>&1
grep -n -i -A40 "stall sampling" $OUT/ncu135.txt | head -120
