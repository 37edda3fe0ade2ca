#!/usr/bin/env bash
# ctest `serve_smoke`: the real `vqserve serve` binary starts with its /metrics endpoint (any
# free ports), answers a greedy request through vqctl with the expected text, counts its tokens
# in /metrics, and exits 0 on SIGTERM; a bad --gpu-weights is refused in one line, exit 2.
# exits 77 (skipped) when the default model is missing.
#   serve_smoke_test.sh BIN_DIR SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
model=${VQSERVE_MODEL:-$src/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$model" ] || { echo "serve_smoke: $model missing: skipped"; [ -n "${CI:-}" ] && exit 1; exit 77; }
source "${BASH_SOURCE%/*}/util/serve_helpers.sh"
SERVE_LABEL=serve_smoke
fail=0
# --gpu-weights is refused before the model loads: a bad value, and blocks on the cpu.
for args in "--gpu-weights q4|--gpu-weights must be fp16 or blocks (got 'q4')" \
            "--gpu-weights blocks|--gpu-weights blocks needs --device cuda"; do
  flag=${args%%|*} want="vqserve serve: ${args#*|}"
  got=$("$bin/vqserve" serve --model "$model" $flag 2>&1 > /dev/null); rc=$?
  [ $rc -eq 2 ] && [ "$got" = "$want" ] ||
    { echo "serve_smoke: '$flag' gave exit $rc and '$got', want 2 and '$want'"; fail=1; }
done
log=$(mktemp)
serve_start "$bin/vqserve" "$log" 60 --model "$model" || exit 1
grpc=$SERVE_GRPC_PORT metrics=$SERVE_METRICS_PORT
# the default model's greedy continuation names the capital; the counter then holds its 4 tokens.
text=$("$bin/vqctl" --target "127.0.0.1:$grpc" generate --prompt "The capital of France is" \
  --max-tokens 4 --temperature 0) || fail=1
echo "serve_smoke: generated '$text'"
case "$text" in *Paris*) ;; *) echo "serve_smoke: the greedy answer does not name Paris"; fail=1 ;; esac
python3 - "$metrics" <<'PY' || fail=1
import sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode()
values = [float(l.split()[-1]) for l in body.splitlines()
          if l.startswith("vqserve:generation_tokens_total")]
assert values and sum(values) >= 4, f"generation_tokens_total {values}: the 4 tokens not counted"
print("serve_smoke: /metrics ok,", sum(1 for l in body.splitlines() if l.startswith("vqserve:")), "samples")
PY
serve_stop TERM
rc=$?
[ $rc -eq 0 ] || { echo "serve_smoke: exit status $rc after SIGTERM"; fail=1; }
[ $fail -eq 0 ] || cat "$log"
rm -f "$log"
exit $fail
