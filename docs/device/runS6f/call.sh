#!/bin/bash
# session 6 call 6: where v8's one-split ring time goes (ncu source counters), and the 8B-shape
# end to end with the final code.
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
BK=/tmp/build-snap
(cmake -S bench/cuda -B $BK -DCMAKE_BUILD_TYPE=Release > /tmp/build.log 2>&1 && cmake --build $BK -j16 >> /tmp/build.log 2>&1) || { tail -20 /tmp/build.log; exit 1; }
echo build ok
for s in 5 135; do
  timeout 120 ncu --clock-control none -k regex:VecInferV8 -s $s -c 1 --section SourceCounters --section WarpStateStats \
    --import-source yes -o /tmp/r$s $BK/attention_bench - vecinfer-k2v2-v8h 16 32768 > /tmp/ncu$s.log 2>&1
  tail -3 /tmp/ncu$s.log
  ncu -i /tmp/r$s.ncu-rep --page source --csv --print-source cuda > $OUT/src$s.csv 2> $OUT/src$s.err
  echo "src$s: $(wc -l < $OUT/src$s.csv) lines"; head -c 600 $OUT/src$s.err
  ncu -i /tmp/r$s.ncu-rep --page details > $OUT/details$s.txt 2>&1
done
DIR=.devbuild/c2 . bench/cuda/unpack_bundle.sh
{
  echo "== cuda_e2e_decode_bench llama8b shape (random weights), batch 16 x 32K"
  timeout 150 $B/cuda_e2e_decode_bench --models llama8b --codecs fp16,kivi-k2v2,vecinfer-k2v2 --batch 16 --ctx 32768 --steps 32 --warmup 8
  echo "exit: $?"
} > $OUT/e2e.log 2>&1
grep -E "^\||exit" $OUT/e2e.log
