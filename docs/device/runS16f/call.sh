#!/bin/bash
# session 16 calls 8-10: cuda_kivi_model_test on the full default model, this tree's (which
# prints the teacher-forced steps whose picks differ, with the whole-prefill run's margin)
# beside 445610c's (session 15's last commit): is ChunkedPrefillEqualsWhole's failure in
# runS16e this session's? calls 8 and 9 stage the model (carry .devbuild/fullA, then
# .devbuild/fullB: STAGE=1 bash bench/cuda/run_full_model_on_device.sh); call 10, carry
# .devbuild/s16f, made by
#   cp /tmp/old/build/bin/cuda_kivi_model_test build/bin/cuda_kivi_model_test_old
#   STRIP=1 XZ_OPT="-6 -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s16f/bundle.tar.xz \
#     cuda_kivi_model_test cuda_kivi_model_test_old
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
DIR=.devbuild/s16f
. bench/cuda/unpack_bundle.sh
python3 - <<'PY'
import lzma
with open("/tmp/full.gguf", "wb") as g:
    for p in ("/tmp/keep/part1.xz", "/tmp/keep/part2.xz"):
        with lzma.open(p) as f:
            g.write(f.read())
PY
sha256sum /tmp/full.gguf; cat scripts/model.sha256
export VQSERVE_MODEL=/tmp/full.gguf
for t in cuda_kivi_model_test cuda_kivi_model_test_old cuda_kivi_model_test; do
  { echo "== $t"; $B/$t --gtest_filter='*Chunked*' 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } >> $OUT/tests.log 2>&1
done
grep -E "^==|exit:|step|dlogit|FAILED|PASSED" $OUT/tests.log
