#!/usr/bin/env bash
# ctest fixtures `test_codebooks`, `test_commvq_codebooks` and `test_pca_codebooks`: train a
# small, real codebook on the default model for the tests that serve vecinfer-k2v2, commvq-2 or
# vecinfer-k2v2-pca (`calibrate --pca-keys`, mode `pca`; gpu tests only) (they find it through
# tests/util CodebookPath). the text is Debian's fortune cookie file (package `fortunes`,
# installed by scripts/setup; the same text the codec tests sample). vecinfer: about 9 s on 2
# cores; commvq (512 tokens, 16 em steps a round): about 30 cpu-seconds, and only where a cuda
# device exists (only the gpu tests use it); pca likewise. exits 77 (ctest: skipped) when the
# model or the text is missing (1 under CI, where scripts/setup provides them), or commvq / pca
# without a device.
#   make_test_codebook.sh VQSERVE_BINARY SOURCE_DIR OUT.vqcb [vecinfer|commvq|pca]
set -euo pipefail
vqserve=$1 src=$2 out=$3 codec=${4:-vecinfer}
extra=()
if [ "$codec" = pca ]; then
  codec=vecinfer extra=(--pca-keys) gpu_only=1
fi
if { [ "$codec" = commvq ] || [ -n "${gpu_only:-}" ]; } &&
   ! { command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; }; then
  echo "$(basename "$out"): no cuda device: skipped (only the gpu tests use it)"
  exit 77
fi
model=${VQSERVE_MODEL:-$src/models/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -f "$model" ]; then
  echo "test_codebooks: $model missing: skipped"
  [ -n "${CI:-}" ] && exit 1  # under CI setup must have provided it
  exit 77
fi
text=/usr/share/games/fortunes/fortunes
if [ ! -f "$text" ]; then
  echo "test_codebooks: $text missing (apt-get install fortunes): skipped"
  [ -n "${CI:-}" ] && exit 1  # under CI setup must have provided it
  exit 77
fi
mkdir -p "$(dirname "$out")"
rm -f "$out"
exec "$vqserve" calibrate --model "$model" --text "$text" --codec "$codec" \
  --k-bits 2 --v-bits 2 --tokens 512 --seq-len 256 --iterations 4 "${extra[@]}" -o "$out"
