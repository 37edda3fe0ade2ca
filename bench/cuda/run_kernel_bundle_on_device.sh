#!/bin/bash
# one call on the lent h200 for kernel work in progress: builds the stand-alone kernel project
# of a snapshot ($SNAP: kernels/, bench/, tests/util/ of a commit), runs decode_check once per
# CHECKS entry (decode_check flags, ';'-separated), times BENCH_KERNELS at BENCH_SIZES beside
# pytorch sdpa, then, when $DIR/bundle.tar.xz exists (bench/cuda/bundle_binaries.sh), runs its
# gtests (GTESTS, with VQSERVE_MODEL=$DIR/model.gguf.xz unpacked and VQSERVE_VQCB_LIST: one
# cuda_vecinfer_model_test run per artifact). FLOOR=1: smem_floor_bench's rows (the formats'
# shared-memory floors) join the table. logs go to $OUT.
#   SNAP=.devbuild/k1 DIR=.devbuild/k1 CHECKS="--long --kivi-only;--long --vecinfer-only" \
#   BENCH_KERNELS=kivi-k2v2,fp16-paged BENCH_SIZES=16x32768 bash bench/cuda/run_kernel_bundle_on_device.sh
set -o pipefail
OUT=${OUT:-/tmp/out}
SNAP=${SNAP:-.devbuild/k1}
DIR=${DIR:-$SNAP}
BK=/tmp/build-snap
mkdir -p "$OUT"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
} 2>&1 | tee "$OUT/env.log"
(cd "$SNAP" && cmake -S bench/cuda -B $BK -DCMAKE_BUILD_TYPE=Release > /tmp/build.log 2>&1 &&
  cmake --build $BK -j16 >> /tmp/build.log 2>&1)
rc=$?
grep -E "error|spill [1-9]" /tmp/build.log | head -20 >> "$OUT/env.log"
if [ $rc -ne 0 ]; then grep -E -A3 "error" /tmp/build.log | head -40; echo "BUILD FAILED"; exit 1; fi
echo "build ok"
i=0
IFS=';' read -ra checks <<< "${CHECKS:---long}"
for c in "${checks[@]}"; do
  i=$((i + 1))
  $BK/decode_check $c > "$OUT/check$i.log" 2>&1
  echo "decode_check $c: exit $?"; grep -E "FAIL" "$OUT/check$i.log" | head -10; tail -1 "$OUT/check$i.log"
done
if [ -n "${BENCH_KERNELS:-}" ]; then
  (cd "$SNAP" && $BK/attention_bench /tmp/ours.csv > /tmp/bench.log 2>&1 &&
    { [ "${FLOOR:-0}" != 1 ] || $BK/smem_floor_bench /tmp/ours.csv >> /tmp/bench.log 2>&1 || echo "floor bench failed"; } &&
    PYTHONUNBUFFERED=1 python3 bench/cuda/sdpa_bench.py --ours /tmp/ours.csv --csv /tmp/sdpa.csv \
      --md "$OUT/combined.md" > /tmp/sdpa.log 2>&1)
  echo "bench exit: $?"; cat /tmp/bench.log >> "$OUT/env.log"; cat "$OUT/combined.md"
fi
if [ -f "$DIR/bundle.tar.xz" ]; then
  . "$(dirname "$0")/unpack_bundle.sh"
  {
    for t in ${GTESTS:-cuda_decode_attention_test}; do
      echo "== $t"; $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"
    done
    for vqcb in ${VQSERVE_VQCB_LIST:-}; do
      echo "== cuda_vecinfer_model_test with $vqcb"
      VQSERVE_VQCB=$vqcb $B/cuda_vecinfer_model_test 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"
      echo "cuda_vecinfer_model_test exit: $?"
    done
  } > "$OUT/gtest.log" 2>&1
  grep -E "exit:|FAILED|PASSED|SKIPPED \]|gpu\]|picks" "$OUT/gtest.log" | head -60
fi
