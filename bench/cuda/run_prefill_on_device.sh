#!/bin/bash
# one call on the lent h200 for the tensor-core prefill kernels (kernels/cuda/tiled_prefill.cuh):
# the check sweep (prefill_bench --check: tiled vs reference on every page format), the gtests of
# $DIR/bundle.tar.xz (bench/cuda/bundle_binaries.sh; with $DIR/model.gguf.xz the model tests get
# it), the kernel benchmark beside pytorch sdpa flash, and the runtime's time to first token
# (cuda_e2e_prefill_bench). STEPS picks among check, tests, bench, sdpa, e2e. logs go to $OUT.
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/p1a/bundle.tar.xz \
#     prefill_bench cuda_prefill_attention_test cuda_random_model_test cuda_e2e_prefill_bench
#   run with carry [".devbuild/p1a"]: DIR=.devbuild/p1a bash bench/cuda/run_prefill_on_device.sh
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
set -o pipefail
DIR=${DIR:-.devbuild/p1a}
STEPS=${STEPS:-check tests bench sdpa e2e}
. bench/cuda/unpack_bundle.sh
[ -f "$DIR/commvq-2.vqcb" ] && export VQSERVE_CVQCB=$DIR/commvq-2.vqcb
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } \
  > "$OUT/env.log" 2>&1
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
if has check; then
  timeout 300 "$B/prefill_bench" --check > "$OUT/check.log" 2>&1
  echo "prefill_bench --check exit $?"
  grep -E "^FAIL" "$OUT/check.log" | head -20; tail -1 "$OUT/check.log"
fi
if has tests; then
  for t in ${TESTS:-cuda_prefill_attention_test cuda_random_model_test}; do
    [ -x "$B/$t" ] || continue
    { echo "== $t"; timeout 400 "$B/$t" 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } \
      >> "$OUT/gtest.log" 2>&1
  done
  grep -E "^==|exit:|FAILED|PASSED|SKIPPED \]" "$OUT/gtest.log" | head -40
fi
if has bench; then
  # BENCH_BINS: prefill_bench builds to time one after the other (e.g. the last commit's as
  # prefill_bench_v1 beside the work in progress), each into bench_<name>.md
  for pb in ${BENCH_BINS:-prefill_bench}; do
    REF_MAX=${REF_MAX:-32256} timeout 400 "$B/$pb" --bench > "$OUT/bench_$pb.md" 2>&1
    echo "$pb --bench exit $?"; cat "$OUT/bench_$pb.md"
  done
fi
if has sdpa; then
  PYTHONUNBUFFERED=1 timeout 200 python3 bench/cuda/sdpa_prefill_bench.py > "$OUT/sdpa.md" 2>&1
  echo "sdpa_prefill_bench exit $?"; cat "$OUT/sdpa.md"
fi
if has e2e && [ -x "$B/cuda_e2e_prefill_bench" ]; then
  timeout 400 "$B/cuda_e2e_prefill_bench" ${E2E_ARGS:-} > "$OUT/e2e.md" 2>&1
  echo "cuda_e2e_prefill_bench exit $?"; cat "$OUT/e2e.md"
fi
