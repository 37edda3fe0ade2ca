#!/bin/bash
# the gpu checks and benchmarks on the lent h200, with the full default model (30 blocks). its
# 94 MiB gguf, the binaries and the codebooks are over one call's 64 MiB carry, so they travel
# in back-to-back calls on one warm machine (it stays warm ~30 s between calls), prepared here
# by bench/cuda/pack_device_run.sh:
#   call 1 (carry .devbuild/fullA) and call 2 (carry .devbuild/fullB), and with commvq books
#   call 2b (carry .devbuild/fullD), with the evaluation set call 2c (carry .devbuild/fullE):
#     STAGE=1 bash bench/cuda/run_on_device.sh   -- parks what they carry in /tmp/keep
#   call 3 (carry .devbuild/fullC): bash bench/cuda/run_on_device.sh [what...]
#     joins the model, checks sha256 against scripts/model.sha256, unpacks the binaries, then
#     runs `what` (default: tests generate e2e serve bench; a later call carrying nothing
#     reuses what is left in /tmp):
#     tests = every carried cuda_*_test (kernel ops against their cpu references, the model
#     tests on the full model with codebooks calibrated on it); generate = `vqserve generate`
#     per codec on cuda and cpu; serve = `vqserve serve --device cuda` and `--device cpu` per
#     codec, greedy answers side by side; e2e = cuda_e2e_decode_bench per codec on the real
#     weights (batch 16 x 32K) and on the llama-3.1-8b shape (random weights), E2E_ARGS
#     appended; bench = attention_bench beside pytorch sdpa (sdpa_bench.py) at BENCH_SIZES;
#     weights = cuda_e2e_decode_bench with the weights dequantized to fp16 and resident as
#     gguf blocks (--weights fp16,blocks), batch 1 and 16 at short context, on the 8b shape
#     (random weights; blocks of llama.cpp's Q4_K_M types) and the default model;
#     eval = issue 27's evaluation on the gpu (docs/quality.md: 16 windows of the two texts,
#     passkey 10 trials at 1K-8K) for EVAL_CODECS (default: the base books and the carried -pca
#     ones), then the carried -pca books on the machine's cpu and gpu on the same 4 windows.
#     logs go to $OUT. BUNDLE_DIR: where call 3's bundle.tar.xz is (default .devbuild/fullC).
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/keep
if [ "${STAGE:-0}" = 1 ]; then
  for d in .devbuild/fullA .devbuild/fullB .devbuild/fullD .devbuild/fullE; do [ -d $d ] && cp -r $d/. /tmp/keep/; done
  ls -la /tmp/keep && echo "staged"
  exit 0
fi
DIR=${BUNDLE_DIR:-.devbuild/fullC}
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
[ -f $DIR/vecinfer-k2v2-pca.vqcb ] && export VQSERVE_PCA_VQCB=$DIR/vecinfer-k2v2-pca.vqcb
WHAT=${*:-tests generate e2e serve bench}
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  echo "full model sha256 $got (= scripts/model.sha256)"
} 2>&1 | tee "$OUT/env.log"

if [[ " $WHAT " == *" tests "* ]]; then
  {
    for t in ${RUN_TESTS:-$(cd $B && ls cuda_*_test)}; do  # those carried (RUN_TESTS: these)
      echo "== $t (full model)"
      timeout 300 $B/$t 2>&1 | grep -vE "^\[ +(RUN|OK) +\]"
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

if [[ " $WHAT " == *" weights "* ]]; then
  {
    for b in 1 16; do
      echo "== cuda_e2e_decode_bench llama8b shape, fp16 vs block weights, batch $b"
      $B/cuda_e2e_decode_bench --models llama8b --weights fp16,blocks --codecs fp16 --batch $b \
        --ctx 512 --short-ctx 256 --steps 32 --warmup 4
      echo "exit: $?"
      echo "== cuda_e2e_decode_bench default model (q4_1/q8_0), fp16 vs block weights, batch $b"
      $B/cuda_e2e_decode_bench --gguf $M --models smollm2 --weights fp16,blocks --codecs fp16 \
        --batch $b --ctx 512 --short-ctx 256 --steps 64 --warmup 8
      echo "exit: $?"
    done
  } 2>&1 | tee "$OUT/weights.log"
fi

if [[ " $WHAT " == *" bench "* ]]; then
  # decode attention beside pytorch sdpa flash in the same call (the 8b attention shape).
  export BENCH_SIZES=${BENCH_SIZES:-1x8192,1x32768,1x131072,16x8192,16x32768}
  {
    $B/attention_bench /tmp/ours.csv > /tmp/bench.log 2>&1
    echo "attention_bench exit: $?"; cat /tmp/bench.log
    PYTHONUNBUFFERED=1 python3 bench/cuda/sdpa_bench.py --ours /tmp/ours.csv --csv /tmp/sdpa.csv \
      --md "$OUT/combined.md" > /tmp/sdpa.log 2>&1
    echo "sdpa_bench exit: $?"; tail -5 /tmp/sdpa.log; cat "$OUT/combined.md"
  } 2>&1 | tee "$OUT/bench.log"
fi

if [[ " $WHAT " == *" eval "* ]]; then
  {
    pca=""
    [ -f "${VQSERVE_PCA_VQCB:-}" ] && pca=",vecinfer-k2v2-pca@$VQSERVE_PCA_VQCB"
    CODECS=${EVAL_CODECS:-vecinfer-k2v2@$VQSERVE_VQCB$pca}
    echo "== vqserve eval --device cuda, 16 windows, passkey 10 trials: $CODECS"
    start=$(date +%s)
    $B/vqserve eval --model $M --device cuda --text $DIR/eval.txt,$DIR/eval2.txt --windows 8 \
      --ctx 2048 --no-errors --codec "$CODECS" --passkey-lengths 1024,2048,4096,8192 \
      --passkey-trials 10 --json > "$OUT/eval_gpu.json" 2> "$OUT/eval_gpu.err"
    echo "exit: $? in $(( $(date +%s) - start )) s"; tail -30 "$OUT/eval_gpu.err"
    if [ -n "$pca" ]; then
      for d in cuda cpu; do
        echo "== vqserve eval --device $d, 4 windows (cpu / gpu agreement): -pca"
        $B/vqserve eval --model $M --device $d --text $DIR/eval.txt,$DIR/eval2.txt --windows 2 \
          --ctx 2048 --no-errors --no-passkey --codec "${pca#,}" --json > "$OUT/agree_$d.json" \
          2> "$OUT/agree_$d.err"
        echo "exit: $?"; tail -8 "$OUT/agree_$d.err"
      done
    fi
  } 2>&1 | tee "$OUT/eval.log"
fi
