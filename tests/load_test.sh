#!/usr/bin/env bash
# ctest `load_small` (label load): the real `vqserve serve` on the cpu over one shared kv memory
# of 64 MiB serving fp16 and kivi-k2v2, driven by bench/load_generator.py at a small size: a
# closed-loop sweep (concurrency 1 and 4) of both codecs, an open-loop poisson cell and a
# shared-system-prompt cell; 0 failed requests, and afterwards no kv held by any sequence
# (what only the prefix cache holds is reclaimable) and nothing running or waiting.
# exits 77 (skipped) when the default model or the python grpc stubs are missing.
#   load_test.sh BIN_DIR SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
model=${VQSERVE_MODEL:-$src/models/SmolLM2-135M-Instruct.Q4_1.gguf}
PREREQ_LABEL=load_small
source "${BASH_SOURCE%/*}/util/test_prereqs.sh"
require_model_and_grpc_client "$model" "$src"
source "${BASH_SOURCE%/*}/util/serve_helpers.sh"
SERVE_LABEL=load_small
log=$(mktemp)
serve_start "$bin/vqserve" "$log" 60 --model "$model" --kv-codecs fp16,kivi-k2v2 --kv-memory 64M \
  --max-num-seqs 8 || exit 1
grpc=$SERVE_GRPC_PORT metrics=$SERVE_METRICS_PORT
fail=0
gen=(/usr/bin/python3 "$src/bench/load_generator.py" --target "127.0.0.1:$grpc" --max-failed 0)
"${gen[@]}" --codecs fp16,kivi-k2v2 --concurrency 1,4 --requests 8 --prompt-tokens 96 \
  --max-tokens 8 || fail=1
"${gen[@]}" --codecs kivi-k2v2 --concurrency "" --rate 4 --requests 8 --prompt-tokens 64 \
  --max-tokens 8 --no-warmup || fail=1
"${gen[@]}" --codecs fp16 --concurrency 4 --requests 8 --prompt-tokens 300 \
  --shared-prefix-tokens 256 --max-tokens 4 --no-warmup \
  --check-free "http://127.0.0.1:$metrics/metrics" || fail=1
serve_stop TERM
rc=$?
[ $rc -eq 0 ] || { echo "load_small: exit status $rc after SIGTERM"; fail=1; }
[ $fail -eq 0 ] || cat "$log"
rm -f "$log"
exit $fail
