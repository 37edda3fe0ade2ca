#!/usr/bin/env bash
# ctest `random_gguf`: tools/make_random_gguf.py writes a tiny random-weight GGUF (2 blocks,
# F16) with the default model's tokenizer; `vqserve generate` loads it and greedily generates 8
# tokens on the cpu, and `vqserve eval` gives it a finite perplexity on a short text (its logits
# are finite: the random weights are well scaled). then the same for the writer's random
# Q4_K_M blocks (--type Q4_K_M: Q4_K, Q6_K for the head and layer 1's attn_v / ffn_down), which
# the cpu dequantizes through runtime/gguf. exits 77 (skipped) without the default model
# or python's gguf package (scripts/setup installs both; under CI: failure).
#   random_gguf_test.sh BIN_DIR SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
model=${VQSERVE_MODEL:-$src/models/SmolLM2-135M-Instruct.Q4_1.gguf}
skip() { echo "random_gguf: $1: skipped"; [ -n "${CI:-}" ] && exit 1; exit 77; }
[ -f "$model" ] || skip "$model missing"
python3 -c "import gguf" 2> /dev/null || skip "python3 has no gguf package"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$src/tools/make_random_gguf.py" --shape tiny --tokenizer "$model" --out-dir "$tmp" \
  > "$tmp/path" || { echo "random_gguf: make_random_gguf.py failed"; exit 1; }
gguf=$(cat "$tmp/path")
[ "$gguf" = "$tmp/random-tiny-F16.gguf" ] || { echo "random_gguf: wrote '$gguf'"; exit 1; }
python3 "$src/tools/make_random_gguf.py" --shape tiny --tokenizer "$model" --out-dir "$tmp" \
  --type Q4_K_M > "$tmp/qpath" || { echo "random_gguf: make_random_gguf.py --type Q4_K_M failed"; exit 1; }
qgguf=$(cat "$tmp/qpath")
[ "$qgguf" = "$tmp/random-tiny-Q4_K_M.gguf" ] || { echo "random_gguf: wrote '$qgguf'"; exit 1; }
for i in $(seq 1 40); do
  echo "The history of the city is long and full of surprising turns."
done > "$tmp/eval.txt"
fail=0
# check GGUF: 8 greedy tokens and a finite perplexity on the cpu.
check() {
  local g=$1 tag
  tag=$(basename "$g" .gguf)
  "$bin/vqserve" generate --model "$g" --device cpu --prompt "The capital of France is" \
    --max-tokens 8 --temperature 0 > "$tmp/text" 2> "$tmp/err" || fail=1
  tail -1 "$tmp/err"
  grep -q "; 8 generated in" "$tmp/err" ||
    { echo "random_gguf: $tag: not 8 tokens generated:"; cat "$tmp/err"; fail=1; }
  "$bin/vqserve" eval --model "$g" --text "$tmp/eval.txt" --codec fp16 --ctx 128 --windows 2 \
    --no-passkey --no-errors > "$tmp/eval" 2> "$tmp/eval.err" || { cat "$tmp/eval.err"; fail=1; }
  python3 - "$tmp/eval" "$tag" <<'PY' || fail=1
import math, re, sys
text = open(sys.argv[1]).read()
m = re.search(r"fp16 perplexity (\S+)", text)
assert m, f"no perplexity in: {text!r}"
ppl = float(m.group(1))
assert math.isfinite(ppl) and ppl > 1, f"perplexity {ppl}"
print(f"random_gguf: {sys.argv[2]}: fp16 perplexity {ppl:.1f} (finite)")
PY
}
check "$gguf"
check "$qgguf"
exit $fail
