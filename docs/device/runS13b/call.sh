#!/bin/bash
# session 13 call 3: cuda_random_model_test of this tree's build (.devbuild/s13b; its fp16 case
# had aborted in runS13a on a block table sized for vecinfer's policy), then compute-sanitizer
# (memcheck, racecheck) over decode_check --only of the runtime's default vecinfer paths: k2v2
# with fp32 and fp16 books, and v8z on the 8-dim sub-vectors of k1v1 / k2v1 (head_dim 64 and
# 128, GQA 1 / 3 / 4 / 8, lengths 1 .. 4133, splits 0 / 1 / 7).
#   STRIP=1 XZ_OPT=-9e bash bench/cuda/bundle_binaries.sh build .devbuild/s13b/bundle.tar.xz cuda_random_model_test
# run with carry [".devbuild/s13b"].
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
set -o pipefail
DIR=.devbuild/s13b . bench/cuda/unpack_bundle.sh
{ $B/cuda_random_model_test 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "cuda_random_model_test exit: $?"; } > $OUT/gtest.log 2>&1
grep -E "exit:|FAILED|PASSED|SKIPPED \]|greedy picks" $OUT/gtest.log
BK=/tmp/build-snap
{ cmake -S bench/cuda -B $BK -DCMAKE_BUILD_TYPE=Release && cmake --build $BK -j16 --target decode_check; } > /tmp/build.log 2>&1 ||
  { grep -E -A3 error /tmp/build.log | head -30; echo "BUILD FAILED"; exit 1; }
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
ONLY=vecinfer-k2v2,vecinfer-k2v2-hk,vecinfer-k1v1,vecinfer-k2v1,vecinfer-k1v1-v8zhk,vecinfer-k2v1-v8zhk-ph
for tool in memcheck racecheck; do
  timeout 170 $CS --tool $tool --error-exitcode 9 $BK/decode_check --only $ONLY > $OUT/$tool.log 2>&1
  echo "$tool exit: $? ($(grep -c ' ok' $OUT/$tool.log) cases ok)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL" $OUT/$tool.log | head -5; tail -1 $OUT/$tool.log
done
