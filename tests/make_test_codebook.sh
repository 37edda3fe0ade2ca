#!/usr/bin/env bash
# ctest fixture `test_codebooks`: trains a small, real vecinfer-k2v2 codebook on the default model
# for the tests that serve vecinfer (they find it through tests/util CodebookPath). the text is
# Debian's fortune cookie file (package `fortunes`, installed by scripts/setup; the same text the
# codec tests sample). about 9 s on 2 cores. exits 77 (ctest: skipped) when the model or the
# text is missing; those tests skip then too.
#   make_test_codebook.sh VQSERVE_BINARY SOURCE_DIR OUT.vqcb
set -euo pipefail
vqserve=$1 src=$2 out=$3
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
exec "$vqserve" calibrate --model "$model" --text "$text" --codec vecinfer \
  --k-bits 2 --v-bits 2 --tokens 512 --seq-len 256 --iterations 4 -o "$out"
