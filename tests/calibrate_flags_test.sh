#!/usr/bin/env bash
# `vqserve calibrate --max-samples`: a negative count is refused with one line naming the flag;
# a small real calibration with --max-samples records it among the artifact's settings.
# `--pca-keys`: refused with one line beside --no-smooth or with a key width that is not a whole
# number of 8-bit codes over head_dim 64 (2.3 bits), before the forward pass; a small real
# calibration at a width off the table (2.375 bits: 19 key codes) writes a vecinfer-k2.375v2-pca
# artifact that `vqserve eval` loads and runs at 2.19 bits per element. exits
# 77 (ctest: skipped) without the default model or Debian's fortunes (1 under CI).
#   calibrate_flags_test.sh VQSERVE_BINARY SOURCE_DIR
set -euo pipefail
vqserve=$1 src=$2
model=${VQSERVE_MODEL:-$src/models/SmolLM2-135M-Instruct.Q4_1.gguf}
text=/usr/share/games/fortunes/fortunes
for f in "$model" "$text"; do
  if [ ! -f "$f" ]; then
    echo "calibrate_flags: $f missing: skipped"
    [ -n "${CI:-}" ] && exit 1
    exit 77
  fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if "$vqserve" calibrate --model "$model" --text "$text" --codec vecinfer --max-samples -1 \
     -o "$tmp/bad.vqcb" 2> "$tmp/err"; then
  echo "FAIL: --max-samples -1 accepted"; exit 1
fi
grep -q -- "--max-samples 0 or more" "$tmp/err" || { echo "FAIL: no message"; cat "$tmp/err"; exit 1; }
[ ! -e "$tmp/bad.vqcb" ] || { echo "FAIL: wrote a file"; exit 1; }
"$vqserve" calibrate --model "$model" --text "$text" --codec vecinfer --k-bits 2 --v-bits 2 \
  --tokens 512 --seq-len 256 --iterations 2 --max-samples 1024 -o "$tmp/ok.vqcb" 2> "$tmp/log"
grep -a -q "max_samples.*1024" "$tmp/ok.vqcb" || { echo "FAIL: max_samples not recorded"; exit 1; }
for bad in "--no-smooth:-pca replaces" "--k-bits 2.3:2.3 bits over head_dim 64"; do
  want=${bad#*:} bad=${bad%%:*}
  # shellcheck disable=SC2086
  if "$vqserve" calibrate --model "$model" --text "$text" --codec vecinfer --pca-keys $bad \
       -o "$tmp/bad.vqcb" 2> "$tmp/err"; then
    echo "FAIL: --pca-keys $bad accepted"; exit 1
  fi
  [ "$(wc -l < "$tmp/err")" = 1 ] || { echo "FAIL: --pca-keys $bad: not one line"; cat "$tmp/err"; exit 1; }
  grep -q -- "$want" "$tmp/err" || { echo "FAIL: --pca-keys $bad: no message"; cat "$tmp/err"; exit 1; }
  [ ! -e "$tmp/bad.vqcb" ] || { echo "FAIL: wrote a file"; exit 1; }
done
"$vqserve" calibrate --model "$model" --text "$text" --codec vecinfer --k-bits 2.375 --v-bits 2 \
  --tokens 512 --seq-len 256 --iterations 2 --pca-keys -o "$tmp/pca.vqcb" 2> "$tmp/log"
grep -a -q "vecinfer-k2.375v2-pca" "$tmp/pca.vqcb" || { echo "FAIL: codec name not recorded"; exit 1; }
head -c 300000 "$text" > "$tmp/eval.txt"
"$vqserve" eval --model "$model" --text "$tmp/eval.txt" --ctx 256 --windows 1 --no-errors --no-passkey \
  --codec "vecinfer-k2.375v2-pca@$tmp/pca.vqcb" > "$tmp/eval.out" 2> "$tmp/eval.err" ||
  { echo "FAIL: eval of the -pca artifact"; cat "$tmp/eval.err"; exit 1; }
grep -q "2.188 bits/element" "$tmp/eval.out" ||
  { echo "FAIL: no -pca row at 2.19 bits"; cat "$tmp/eval.out"; exit 1; }
echo "calibrate_flags: ok"
