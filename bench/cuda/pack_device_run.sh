#!/bin/bash
# packs the folders that bench/cuda/run_on_device.sh carries to the lent gpu machine in
# back-to-back calls (each call carries at most 64 MiB):
#   .devbuild/fullA: part1.xz = the first SPLIT bytes of the default model, xz'd;
#   .devbuild/fullC: bundle.tar.xz = binaries of build dir BUILD with their shared libraries
#     (bench/cuda/bundle_binaries.sh);
#   .devbuild/fullB: part2.xz = the rest of the model; vecinfer-k2v2.vqcb; long_prompt.txt;
#   .devbuild/fullD (only when COMMVQ_VQCB names one): commvq-2.vqcb calibrated on the full
#     model (28 MB: a fourth call stages it);
#   .devbuild/fullE (only when PCA_VQCB names one): vecinfer-k2v2-pca.vqcb calibrated on the
#     full model (11 MB) and the evaluation texts data/eval.txt, data/eval2.txt (`eval`).
#   bash bench/cuda/pack_device_run.sh [BUILD=build] [VQCB=data/quality/vecinfer-k2v2.vqcb]
set -euo pipefail
BUILD=${1:-build}
VQCB=${2:-data/quality/vecinfer-k2v2.vqcb}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
SPLIT=${SPLIT:-66000000}
mkdir -p .devbuild/fullA .devbuild/fullB
[ -f .devbuild/fullA/part1.xz ] || head -c "$SPLIT" "$MODEL" | xz -6 -T2 > .devbuild/fullA/part1.xz
[ -f .devbuild/fullB/part2.xz ] || tail -c +"$((SPLIT + 1))" "$MODEL" | xz -6 -T2 > .devbuild/fullB/part2.xz
# TESTS: the gtests to carry (default: every gpu test; each binary adds ~4 MB to the bundle).
bins="vqserve vqctl cuda_e2e_decode_bench cuda_e2e_prefill_bench attention_bench prefill_bench"
all_tests=$(cd "$BUILD/bin" && ls cuda_*_test 2>/dev/null | tr '\n' ' ')
for t in ${TESTS:-$all_tests}; do
  [ -x "$BUILD/bin/$t" ] && bins="$bins $t"
done
mkdir -p .devbuild/fullC
STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh "$BUILD" .devbuild/fullC/bundle.tar.xz $bins
cp "$VQCB" .devbuild/fullB/vecinfer-k2v2.vqcb
rm -rf .devbuild/fullD
if [ -n "${COMMVQ_VQCB:-}" ]; then mkdir -p .devbuild/fullD && cp "$COMMVQ_VQCB" .devbuild/fullD/commvq-2.vqcb; fi
rm -rf .devbuild/fullE
if [ -n "${PCA_VQCB:-}" ]; then
  mkdir -p .devbuild/fullE
  cp "$PCA_VQCB" .devbuild/fullE/vecinfer-k2v2-pca.vqcb
  cp data/eval.txt data/eval2.txt .devbuild/fullE/
fi
head -c 2400 /usr/share/games/fortunes/fortunes > .devbuild/fullB/long_prompt.txt
du -sb .devbuild/fullA .devbuild/fullB .devbuild/fullC ${COMMVQ_VQCB:+.devbuild/fullD} ${PCA_VQCB:+.devbuild/fullE}
