#!/bin/bash
# session 16 calls 13-15: the final code's model tests on the full default model (30 blocks,
# books calibrated on it): cuda_model_test, cuda_vecinfer_model_test and cuda_kivi_model_test,
# whose ChunkedPrefillEqualsWhole now takes a teacher-forced pick within 0.5 of the
# whole-prompt run's as a near-tie (runS16f). calls 13 and 14 stage the model (carry
# .devbuild/fullA, then .devbuild/fullB: STAGE=1 bash bench/cuda/run_full_model_on_device.sh);
# call 15, carry .devbuild/s16i, made by
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s16i/bundle.tar.xz \
#     cuda_kivi_model_test cuda_vecinfer_model_test cuda_model_test
export OUT=${OUT:-/tmp/out}
mkdir -p $OUT
DIR=.devbuild/s16i
. bench/cuda/unpack_bundle.sh
python3 - <<'PY'
import lzma
with open("/tmp/full.gguf", "wb") as g:
    for p in ("/tmp/keep/part1.xz", "/tmp/keep/part2.xz"):
        with lzma.open(p) as f:
            g.write(f.read())
PY
sha256sum /tmp/full.gguf; cat scripts/model.sha256
export VQSERVE_MODEL=/tmp/full.gguf VQSERVE_VQCB=/tmp/keep/vecinfer-k2v2.vqcb
for t in cuda_model_test cuda_vecinfer_model_test cuda_kivi_model_test; do
  { echo "== $t"; timeout 180 $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"; echo "$t exit: $?"; } >> $OUT/tests.log 2>&1
done
grep -E "^==|exit:|step [0-9]+:|picks equal|FAILED|PASSED" $OUT/tests.log
