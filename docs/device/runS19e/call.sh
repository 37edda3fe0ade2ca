#!/bin/bash
# session 19 call 8: the final kernel with key splits forced (SPLITS=2, 4) beside the launcher's
# choice (one split at the 8B shape, runS19d's bench), to see whether more blocks than sms pay.
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s19e/bundle.tar.xz prefill_bench
# run with carry [".devbuild/s19e"]:
export OUT=${OUT:-/tmp/out}
DIR=.devbuild/s19e
. bench/cuda/unpack_bundle.sh
for n in 2 4; do
  SPLITS=$n REF_MAX=0 timeout 120 $B/prefill_bench --bench > "$OUT/bench_splits$n.md" 2>&1
  echo "SPLITS=$n exit $?"; grep llama8b "$OUT/bench_splits$n.md"
done
