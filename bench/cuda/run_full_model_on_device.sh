#!/bin/bash
# the full default model (30 blocks) on the lent h200. its 94 MiB gguf, the binaries and the
# codebooks are over one call's 64 MiB carry, so they travel in three back-to-back calls on one
# warm machine (it stays warm ~30 s between calls), prepared here by bench/cuda/pack_full_model.sh:
#   call 1 (carry .devbuild/fullA) and call 2 (carry .devbuild/fullB), and with commvq books
#   call 2b (carry .devbuild/fullD):
#     STAGE=1 bash bench/cuda/run_full_model_on_device.sh   -- parks what they carry in /tmp/keep
#   call 3 (carry .devbuild/fullC): bash bench/cuda/run_full_model_on_device.sh [what...]
#     joins the model, checks sha256 against scripts/model.sha256, unpacks the binaries, then
#     runs `what` (default: check tests generate e2e serve; a later call carrying nothing reuses
#     what is left in /tmp):
#     check = decode_check --long of the kernel snapshot (a git archive of the same commit);
#     tests = the cuda model tests on the full model with codebooks calibrated on it;
#     generate = `vqserve generate` per codec on cuda and cpu; serve = `vqserve serve --device
#     cuda` and `--device cpu` per codec, greedy answers side by side; e2e = cuda_e2e_decode_bench
#     per codec on the real weights (batch 16 x 32K) and on the llama-3.1-8b shape (random
#     weights), E2E_ARGS appended (e.g. "--stagger 1"). logs go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/keep
if [ "${STAGE:-0}" = 1 ]; then
  for d in .devbuild/fullA .devbuild/fullB .devbuild/fullD; do [ -d $d ] && cp -r $d/. /tmp/keep/; done
  ls -la /tmp/keep && echo "staged"
  exit 0
fi
DIR=.devbuild/fullC
if [ ! -f /tmp/full.gguf ]; then
  for f in part1.xz part2.xz vecinfer-k2v2.vqcb; do
    [ -f /tmp/keep/$f ] || { echo "/tmp/keep/$f missing: stage calls 1 and 2 first, on the same warm machine"; exit 1; }
  done
  python3 - <<'PY'
import lzma
with open("/tmp/full.gguf", "wb") as g:
    for p in ("/tmp/keep/part1.xz", "/tmp/keep/part2.xz"):
        with lzma.open(p) as f:
            g.write(f.read())
PY
  . "$(dirname "$0")/unpack_bundle.sh"
fi
B=/tmp/b
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH
DIR=/tmp/keep
want=$(cut -d' ' -f1 scripts/model.sha256)
got=$(sha256sum /tmp/full.gguf | cut -d' ' -f1)
[ "$want" = "$got" ] || { echo "joined model sha256 $got != $want"; exit 1; }
M=/tmp/full.gguf
export VQSERVE_MODEL=$M VQSERVE_VQCB=$DIR/vecinfer-k2v2.vqcb
# commvq books only when carried (a named artifact that does not load fails the tests).
[ -f $DIR/commvq-2.vqcb ] && export VQSERVE_CVQCB=$DIR/commvq-2.vqcb
WHAT=${*:-check tests generate e2e serve}
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  echo "full model sha256 $got (= scripts/model.sha256)"
} 2>&1 | tee "$OUT/env.log"

if [[ " $WHAT " == *" check "* ]]; then
  # the kernel sweep of the same commit: a git archive of kernels/ bench/ tests/util (staged
  # in /tmp/keep/snap), built here with the machine's nvcc.
  (cd /tmp/keep/snap && cmake -S bench/cuda -B /tmp/build-snap -DCMAKE_BUILD_TYPE=Release \
     > /tmp/snap.log 2>&1 && cmake --build /tmp/build-snap -j16 >> /tmp/snap.log 2>&1) ||
    { grep -A3 error /tmp/snap.log | head -20; echo "snapshot build failed"; }
  /tmp/build-snap/decode_check --long > "$OUT/check.log" 2>&1
  echo "decode_check --long: exit $?"; grep FAIL "$OUT/check.log" | head; tail -1 "$OUT/check.log"
fi

if [[ " $WHAT " == *" tests "* ]]; then
  {
    for t in cuda_model_test cuda_vecinfer_model_test cuda_kivi_model_test cuda_commvq_model_test \
             cuda_serve_test cuda_graph_test cuda_decode_attention_test; do  # those carried
      [ -x $B/$t ] || { echo "== $t: not in the bundle"; continue; }
      echo "== $t (full model)"
      timeout 120 $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"
      echo "$t exit: $?"
    done
  } 2>&1 | tee "$OUT/tests.log"
fi

if [[ " $WHAT " == *" generate "* ]]; then
  # greedy text of `vqserve generate` per kv codec: cuda, cpu (q4/q8 weights), cpu --fp32:
  # equal hashes = the same tokens; tok/s from the command's own report.
  {
    for c in fp16 kivi-k2v2 vecinfer-k2v2 commvq-2; do
      cb=""
      [ "$c" = vecinfer-k2v2 ] && cb="--codebooks $VQSERVE_VQCB"
      [ "$c" = commvq-2 ] && { [ -f "${VQSERVE_CVQCB:-}" ] || continue; cb="--codebooks $VQSERVE_CVQCB"; }
      for d in cuda cpu cpu-fp32; do
        dev=${d%-fp32}; fp=""; [ "$d" = cpu-fp32 ] && fp=--fp32
        timeout 120 $B/vqserve generate --model $M --device $dev $fp --kv-codec $c $cb --chat \
          --prompt "$(head -c 1500 $DIR/long_prompt.txt) Which of these sayings is the oldest?" \
          --temperature 0 --max-tokens 96 > /tmp/gen.txt 2> /tmp/gen.err
        echo "-- $c --device $d: exit $? text sha $(sha256sum < /tmp/gen.txt | cut -c1-16) $(tail -1 /tmp/gen.err)"
        head -c 300 /tmp/gen.txt | tr '\n' ' '; echo
      done
    done
  } 2>&1 | tee "$OUT/generate.log"
fi

if [[ " $WHAT " == *" serve "* ]]; then
  # serve_pass DEVICE DEFAULT_CODEC EXTRA_CODECS CODEBOOKS: one server, every codec's answers
  serve_pass() {
    local d=$1 c0=$2 extra=$3 cb=$4 flags="--kv-codec $2"
    [ -n "$extra" ] && flags="$flags --kv-codecs $extra"
    [ -n "$cb" ] && flags="$flags --codebooks $cb"
    echo "== serve --device $d $flags"
    $B/vqserve serve --model $M --device $d $flags --host 127.0.0.1 --port 50171 \
      --metrics-port -1 --kv-memory 2G > /tmp/serve_$d.log 2>&1 &
    local pid=$!
    for i in $(seq 1 90); do grep -q "serving" /tmp/serve_$d.log && break; sleep 1; done
    head -3 /tmp/serve_$d.log
    local long="$(head -c 2400 $DIR/long_prompt.txt) Summarize the text above in one sentence."
    for c in $c0 ${extra//,/ }; do
      for p in "What is a cache?" "$long"; do
        $B/vqctl --target 127.0.0.1:50171 generate --chat "$p" --codec $c --max-tokens 48 \
          --temperature 0 > /tmp/ans.txt 2>&1
        echo "-- $d $c prompt of ${#p} chars: text md5 $(md5sum < /tmp/ans.txt | cut -c1-12)"
        head -c 400 /tmp/ans.txt; echo
      done
    done
    kill -TERM $pid; wait $pid; echo "serve exit: $?"
  }
  {
    for d in cuda cpu; do
      serve_pass $d vecinfer-k2v2 fp16,kivi-k2v2 $VQSERVE_VQCB
      [ -f "${VQSERVE_CVQCB:-}" ] && serve_pass $d commvq-2 "" $VQSERVE_CVQCB
    done
  } 2>&1 | tee "$OUT/serve.log"
fi

if [[ " $WHAT " == *" e2e "* ]]; then
  {
    CODECS=${E2E_CODECS:-fp16,kivi-k2v2,vecinfer-k2v2,vecinfer-k1v1,commvq-2,commvq-1}
    echo "== cuda_e2e_decode_bench --gguf (the default model's real weights), batch 16 x 32K"
    $B/cuda_e2e_decode_bench --gguf $M --models smollm2 --codecs $CODECS --batch 16 --ctx 32768 \
      --steps 64 --warmup 8 ${E2E_ARGS:-}
    echo "exit: $?"
    echo "== cuda_e2e_decode_bench llama8b shape (random weights), batch 16 x 32K"
    $B/cuda_e2e_decode_bench --models llama8b --codecs $CODECS --batch 16 --ctx 32768 \
      --steps 32 --warmup 8 ${E2E_ARGS:-}
    echo "exit: $?"
  } 2>&1 | tee "$OUT/e2e.log"
fi
