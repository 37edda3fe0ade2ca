#!/bin/bash
# packs the three folders that bench/cuda/run_full_model_on_device.sh carries to the lent gpu
# machine in three back-to-back calls (each call carries at most 64 MiB):
#   .devbuild/fullA: part1.xz = the first SPLIT bytes of the default model, xz'd;
#   .devbuild/fullC: bundle.tar.xz = binaries of build dir BUILD with their shared libraries
#     (bench/cuda/bundle_binaries.sh);
#   .devbuild/fullB: part2.xz = the rest of the model; vecinfer-k2v2.vqcb; long_prompt.txt;
#     snap/ = a git archive of HEAD's kernels/ bench/ tests/util (the kernel sweep);
#   .devbuild/fullD (only when COMMVQ_VQCB names one): commvq-2.vqcb calibrated on the full
#     model (28 MB: a fourth call stages it).
#   bash bench/cuda/pack_full_model.sh [BUILD=build] [VQCB=models/default.vqcb]
set -euo pipefail
BUILD=${1:-build}
VQCB=${2:-models/default.vqcb}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
SPLIT=${SPLIT:-66000000}
mkdir -p .devbuild/fullA .devbuild/fullB
[ -f .devbuild/fullA/part1.xz ] || head -c "$SPLIT" "$MODEL" | xz -6 -T2 > .devbuild/fullA/part1.xz
[ -f .devbuild/fullB/part2.xz ] || tail -c +"$((SPLIT + 1))" "$MODEL" | xz -6 -T2 > .devbuild/fullB/part2.xz
# TESTS: the gtests to carry (default: the model tests that need the full model; each binary
# adds ~4 MB to a bundle that has to fit one call beside part 2).
bins="vqserve vqctl cuda_e2e_decode_bench"
for t in ${TESTS:-cuda_model_test cuda_vecinfer_model_test cuda_kivi_model_test}; do
  [ -x "$BUILD/bin/$t" ] && bins="$bins $t"
done
mkdir -p .devbuild/fullC
STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh "$BUILD" .devbuild/fullC/bundle.tar.xz $bins
cp "$VQCB" .devbuild/fullB/vecinfer-k2v2.vqcb
rm -rf .devbuild/fullD
if [ -n "${COMMVQ_VQCB:-}" ]; then mkdir -p .devbuild/fullD && cp "$COMMVQ_VQCB" .devbuild/fullD/commvq-2.vqcb; fi
head -c 2400 /usr/share/games/fortunes/fortunes > .devbuild/fullB/long_prompt.txt
rm -rf .devbuild/fullB/snap && mkdir -p .devbuild/fullB/snap
git archive HEAD kernels bench tests/util | tar -x -C .devbuild/fullB/snap
du -sb .devbuild/fullA .devbuild/fullB .devbuild/fullC ${COMMVQ_VQCB:+.devbuild/fullD}
