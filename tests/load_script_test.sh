#!/usr/bin/env bash
# ctest `load_script_small` (label load): bench/load/h200_load.sh, the script of the H200 load
# run beside llama-server, from the checkout on the cpu at the tiny random shape (vqserve's cells
# only: SKIP_LLAMA=1, building llama.cpp takes too long here): it writes the GGUF, calibrates
# vecinfer-k2v2 on it, serves it with the prefix cache on and off, then on again for the fp16
# cells (FP16=1: a restarted server's cells start once it serves), runs its time-bounded cells
# with sampled requests (SAMPLING: temperature 0.7, top-p 0.9; the H200 runs are greedy) and
# prints the table; the test passes when every cell ran with 0 failed requests and every page
# was free at the end. exits 77 (skipped) when a python module or the model is missing.
#   load_script_test.sh BIN_DIR SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
model=${VQSERVE_MODEL:-$src/models/SmolLM2-135M-Instruct.Q4_1.gguf}
PREREQ_LABEL=load_script_small
source "${BASH_SOURCE%/*}/util/test_prereqs.sh"
require_model_and_grpc_client "$model" "$src"
python3 -c "import gguf, numpy" 2> /dev/null || test_skip "python3 without gguf and numpy"
work=$(mktemp -d)
ports=$(/usr/bin/python3 -c "
import socket
s=[socket.socket() for _ in range(2)]
[x.bind(('127.0.0.1', 0)) for x in s]
print(' '.join(str(x.getsockname()[1]) for x in s))")
read -r grpc_port metrics_port <<< "$ports"
env DEVICE=cpu SHAPE=tiny SKIP_LLAMA=1 FP16=1 VQ_BIN="$bin" PY=/usr/bin/python3 GGUF_PY=python3 \
  TOKENIZER_GGUF="$model" CALIB_TEXT="$src/README.md" PROMPTS="256 1024" PREFIX="128 32" \
  OUT_TOKENS=8 CONC="1 4" PREFIX_CONC="2" WINDOW=4 PREFIX_WINDOW=4 CALL_BUDGET_S=600 \
  SAMPLING="--temperature 0.7 --top-p 0.9" \
  VQ_PORT="$grpc_port" VQ_METRICS="$metrics_port" WORK="$work" RESULTS="$work/results" \
  bash "$src/bench/load/h200_load.sh" run > "$work/out.log" 2>&1
rc=$?
cat "$work/out.log"
fail=0
[ $rc -eq 0 ] || { echo "load_script_small: exit status $rc"; fail=1; }
grep -q "0 cells left" "$work/out.log" || { echo "load_script_small: cells left"; fail=1; }
grep -q "0 failed requests in every cell: met" "$work/table.md" ||
  { echo "load_script_small: failed requests"; fail=1; }
grep -q "all pages free at the end (vqserve): met" "$work/table.md" ||
  { echo "load_script_small: pages not free"; fail=1; }
grep -q '"temperature": 0.7' "$work/results/cells.json" ||
  { echo "load_script_small: the cells were not sampled"; fail=1; }
rm -rf "$work"
exit $fail
