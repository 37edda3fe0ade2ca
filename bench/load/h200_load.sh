#!/usr/bin/env bash
# the whole server under load beside llama.cpp's llama-server (issue 29, parts 3 and 4), on one
# random-weight GGUF of the Llama-3.1-8B shape (tools/make_random_gguf.py, the default model's
# tokenizer), both servers given the same KV memory: vqserve `serve --device cuda` over gRPC
# (vecinfer-k2v2, codebooks calibrated on that GGUF by `vqserve calibrate` on the CPU; fp16 as
# its own baseline with FP16=1) and llama-server (f16 KV, flash attention) over HTTP, both
# driven by bench/load_generator.py in time-bounded closed-loop cells (WINDOW seconds each:
# requests in flight at the end are unfinished, neither completed nor failed). prints one
# markdown table (bench/load/load_table.py), the largest concurrency each sustains within a
# TTFT p99 of 10 s, the targets met or not, and plots tokens/s against concurrency.
#
#   here:   bash bench/load/h200_load.sh pack [BUILD=/work/main/build-cuda] [DIR=.devbuild/load]
#     packs into DIR (~27 MB, within one device call's 64 MiB carry): vqserve and vqctl of BUILD
#     with their libraries (bench/cuda/bundle_binaries.sh), llama.cpp's source (LLAMA_SRC, an
#     archive of bench/peers/build_llama_cpp.sh pack, else that command), the tokenizer as a
#     tensor-free GGUF, the python grpc stubs (scripts/gen_python_stubs), the `gguf` wheel of
#     scripts/requirements.txt and a pure-python protobuf wheel (used only where the device's
#     protobuf cannot load the stubs), 200 KB of data/calib.txt and these scripts.
#   device: bash DIR/h200_load.sh run      (carry DIR; run it again in the next call)
#     resumable: each cell's result is kept in WORK (/tmp/load) and a later call on the same warm
#     machine (chained at once: it goes back ~30 s after a call) skips the cells done and reuses
#     the GGUF (/dev/shm), the codebooks and the llama.cpp build; a call starts no cell that
#     would end after CALL_BUDGET_S (default 560) seconds. first call: writes the F16 GGUF
#     (~13 s), calibrates (CPU, all cores), then builds llama-server (cores 4.., its own process
#     session: it outlives the call) while the vqserve cells run on cores 0-3.
#     the table, the plot and the logs: RESULTS (default $OUT, else WORK/results).
# cells, in this order (each at every concurrency in CONC, default "1 16 64 256"):
#   vqserve vecinfer-k2v2, prefix cache on: the longest prompt, PREFIX cells, the other prompts;
#   vqserve vecinfer-k2v2, --no-prefix-cache: PREFIX cells; llama-server: the longest prompt,
#   then the others and PREFIX cells; with FP16=1, vqserve fp16 KV (same server as the first).
# PROMPTS="4096 32768" token ids each (random ids, the same for both servers), OUT_TOKENS=256
# (ignore_eos, greedy); PREFIX="2048 256": SHARED+OWN tokens, SHARED the same in every request
# (a system prompt), at PREFIX_CONC="1 16". KV memory: llama-server's f16 KV is B_TOKEN bytes a
# token (131072 at the 8B shape); each of its configurations gets -np slots of the prompt's
# length + OUT_TOKENS + 1 rounded up to 256 and -c = slots x that, all equal to KV_TOKENS
# (default: KV_MULT=2 x the lcm of those lengths: 599040 tokens = 78517370880 bytes at the
# defaults); vqserve gets --kv-memory KV_TOKENS x B_TOKEN, shared by its codecs.
# ONLY="PATTERN..." runs only the cells whose ids match (`h200_load.sh cells` lists the ids).
# SAMPLING="--temperature 0.7 --top-p 0.9" makes every request sampled (default greedy).
# llama-server restarts for every cell (3 s, mmap) unless LL_FRESH=0.
# with 8 or more cores the server runs on cores SERVER_CPUS (default 0,1), the load generator on
# 2,3 and the llama.cpp build on the rest; each vqserve cell leaves logs/metrics_after_ID.txt.
# knobs for a CPU dry run: SHAPE=tiny DEVICE=cpu VQ_BIN=DIR (a built vqserve) LLAMA_PREFIX=DIR
# (a llama.cpp build of build_llama_cpp.sh) PY=python3-with-grpcio WINDOW PREFIX_WINDOW
# SKIP_LLAMA=1 (vqserve's cells only); FP16=1 adds vqserve's fp16 cells. run from the checkout
# (bench/load/h200_load.sh run) it finds its files in the repository, given TOKENIZER_GGUF (any
# GGUF with a tokenizer), CALIB_TEXT and GGUF_PY (a python with gguf and numpy): CPU test
# tests/load_script_test.sh.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

pack() {
  local build=${1:-/work/main/build-cuda} dir=${2:-.devbuild/load}
  local root
  root=$(cd "$HERE/../.." && pwd)
  mkdir -p "$dir/gen"
  if [ -n "${LLAMA_SRC:-}" ]; then
    cp "$LLAMA_SRC" "$dir/llama.cpp-src.tar.xz"
  else
    bash "$root/bench/peers/build_llama_cpp.sh" pack "$dir/llama.cpp-src.tar.xz" > /dev/null ||
      return 1
  fi
  if [ ! -s "$dir/vqserve.tar.xz" ] || [ "$build/bin/vqserve" -nt "$dir/vqserve.tar.xz" ]; then
    STRIP=1 XZ_OPT="-9e -T2" bash "$root/bench/cuda/bundle_binaries.sh" "$build" \
      "$dir/vqserve.tar.xz" vqserve vqctl || return 1
  fi
  python3 "$root/tools/make_random_gguf.py" --vocab-only \
    --tokenizer "${TOKENIZER:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}" \
    --out "$dir/tokenizer.gguf" > /dev/null || return 1
  (cd "$root" && bash scripts/gen_python_stubs > /dev/null) || return 1
  cp "$root"/tools/python_client/gen/*_pb2*.py "$dir/gen/"
  local pin
  pin=$(grep -E '^gguf==' "$root/scripts/requirements.txt")
  rm -f "$dir"/gguf-*.whl "$dir"/protobuf-*.whl
  python3 -m pip download -q --no-deps --only-binary=:all: "$pin" -d "$dir" > /dev/null ||
    return 1
  python3 -m pip download -q --no-deps --only-binary=:all: --platform any \
    --python-version 3.12 --implementation py "protobuf==${PROTOBUF_VERSION:-4.25.8}" \
    -d "$dir" > /dev/null || return 1
  head -c 200000 "$root/data/calib.txt" > "$dir/calib.txt"
  cp "$root/bench/load/h200_load.sh" "$root/bench/load/load_table.py" \
    "$root/bench/load_generator.py" "$root/bench/peers/build_llama_cpp.sh" \
    "$root/tools/make_random_gguf.py" "$dir/"
  du -sh "$dir"
}

# ---- device side ----
SHAPE=${SHAPE:-llama8b}
DEVICE=${DEVICE:-cuda}
W=${WORK:-/tmp/load}
PY=${PY:-python3}
OUT_TOKENS=${OUT_TOKENS:-256}
PROMPTS=${PROMPTS:-4096 32768}
PREFIX=${PREFIX:-2048 256}
CONC=${CONC:-1 16 64 256}
PREFIX_CONC=${PREFIX_CONC:-1 16}
WINDOW=${WINDOW:-30}
PREFIX_WINDOW=${PREFIX_WINDOW:-20}
CALL_BUDGET_S=${CALL_BUDGET_S:-560}
VQ_PORT=${VQ_PORT:-50051} VQ_METRICS=${VQ_METRICS:-9464} LL_PORT=${LL_PORT:-8080}
T0=$SECONDS
# the packed folder holds everything beside this script; in the repository the same files are
# found in their own places (a run from the checkout: the CPU test at the tiny shape).
LG=$HERE/load_generator.py MRG=$HERE/make_random_gguf.py
[ -f "$LG" ] || LG=$HERE/../load_generator.py
[ -f "$MRG" ] || MRG=$HERE/../../tools/make_random_gguf.py
TOKENIZER_GGUF=${TOKENIZER_GGUF:-$HERE/tokenizer.gguf}
CALIB_TEXT=${CALIB_TEXT:-$HERE/calib.txt}
GGUF_PY=${GGUF_PY:-$PY}

log() { echo "[$(date -u +%H:%M:%S) +$((SECONDS - T0))s] $*" | tee -a "$W/logs/run.log"; }

b_token() {  # f16 K+V bytes per token of llama.cpp's cache: layers x kv heads x head_dim x 4
  case $SHAPE in
    llama8b) echo $((32 * 8 * 128 * 4)) ;;
    smollm2) echo $((30 * 3 * 64 * 4)) ;;
    tiny) echo $((2 * 2 * 64 * 4)) ;;
  esac
}
slot_len() { echo $(((($1 + OUT_TOKENS + 1 + 255) / 256) * 256)); }
gcd() { local a=$1 b=$2 t; while [ "$b" -ne 0 ]; do t=$((a % b)); a=$b; b=$t; done; echo "$a"; }
kv_tokens() {
  [ -n "${KV_TOKENS:-}" ] && { echo "$KV_TOKENS"; return; }
  local l=256 p s
  for p in $PROMPTS; do s=$(slot_len "$p"); l=$((l / $(gcd "$l" "$s") * s)); done
  echo $((${KV_MULT:-2} * l))
}
longest() { local m=0 p; for p in $PROMPTS; do [ "$p" -gt $m ] && m=$p; done; echo $m; }

# the cells: ID SERVER CODEC PROMPT SHARED CONCURRENCY WINDOW; ONLY (cell id patterns, e.g.
# "ll-* vq-fp16-*") keeps the matching ones.
cells() {
  if [ -n "${ONLY:-}" ]; then
    local line id pat
    all_cells | while read -r line; do
      id=${line%% *}
      for pat in $ONLY; do
        # shellcheck disable=SC2053
        [[ $id == $pat ]] && { echo "$line"; break; }
      done
    done
    return 0
  fi
  all_cells
}
all_cells() {
  local long p c shared=${PREFIX% *} own=${PREFIX#* } short=0
  long=$(longest)
  for p in $PROMPTS; do [ $((shared + own)) -le "$p" ] && { [ $short = 0 ] || [ "$p" -lt $short ]; } && short=$p; done
  local pp=$((shared + own))
  for c in $CONC; do echo "vq-vecinfer-$long-c$c vq-on vecinfer-k2v2 $long 0 $c $WINDOW"; done
  for c in $PREFIX_CONC; do echo "vq-vecinfer-prefix-on-c$c vq-on vecinfer-k2v2 $pp $shared $c $PREFIX_WINDOW"; done
  for p in $PROMPTS; do
    [ "$p" = "$long" ] && continue
    for c in $CONC; do echo "vq-vecinfer-$p-c$c vq-on vecinfer-k2v2 $p 0 $c $WINDOW"; done
  done
  for c in $PREFIX_CONC; do echo "vq-vecinfer-prefix-off-c$c vq-off vecinfer-k2v2 $pp $shared $c $PREFIX_WINDOW"; done
  if [ "${SKIP_LLAMA:-0}" != 1 ]; then
    for c in $CONC; do echo "ll-$long-c$c ll-$long f16 $long 0 $c $WINDOW"; done
    for p in $PROMPTS; do
      [ "$p" = "$long" ] && continue
      for c in $CONC; do echo "ll-$p-c$c ll-$p f16 $p 0 $c $WINDOW"; done
    done
    for c in $PREFIX_CONC; do echo "ll-prefix-c$c ll-$short f16 $pp $shared $c $PREFIX_WINDOW"; done
  fi
  if [ "${FP16:-0}" = 1 ]; then
    for c in $CONC; do echo "vq-fp16-$long-c$c vq-on fp16 $long 0 $c $WINDOW"; done
    for p in $PROMPTS; do
      [ "$p" = "$long" ] && continue
      for c in $CONC; do echo "vq-fp16-$p-c$c vq-on fp16 $p 0 $c $WINDOW"; done
    done
  fi
}

SERVER="" SERVER_PID=""
scrape() {  # scrape FILE: vqserve's metrics
  curl -s "http://127.0.0.1:$VQ_METRICS/metrics" > "$1" 2> /dev/null ||
    $PY -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$VQ_METRICS/metrics').read().decode())" \
      > "$1" 2> /dev/null
}
stop_server() {
  [ -z "$SERVER" ] && return 0
  if [[ $SERVER == vq-* ]]; then  # the end-of-run checks: every page free, nothing running
    local free
    free=$($PY "$LG" --target 127.0.0.1:$VQ_PORT --concurrency "" \
      --no-warmup --check-free "http://127.0.0.1:$VQ_METRICS/metrics" 2>&1 | grep "kv memory")
    echo "$SERVER after $(cat "$W/cells_$SERVER" 2> /dev/null | wc -w) cells: $free" >> "$W/free.txt"
    "$VQ/vqctl" --target 127.0.0.1:$VQ_PORT model-info > "$W/logs/model_info_$SERVER.txt" 2>&1
    scrape "$W/logs/metrics_$SERVER.txt"
    log "$SERVER: $free"
  fi
  kill -TERM "$SERVER_PID" 2> /dev/null
  for _ in $(seq 1 150); do kill -0 "$SERVER_PID" 2> /dev/null || break; sleep 0.2; done
  kill -KILL "$SERVER_PID" 2> /dev/null
  wait "$SERVER_PID" 2> /dev/null
  log "stopped $SERVER"
  SERVER="" SERVER_PID=""
}

start_server() {  # start_server CONFIG: vq-on | vq-off | ll-PROMPT
  local cfg=$1 t=$SECONDS
  [ "$SERVER" = "$cfg" ] && return 0
  stop_server
  local lg=$W/logs/server_$cfg.log
  # a restarted server appends to its log: look for "serving" in the new lines only.
  local seen=0
  [ -f "$lg" ] && seen=$(wc -l < "$lg")
  if [[ $cfg == vq-* ]]; then
    local extra=()
    [ "$cfg" = vq-off ] && extra=(--no-prefix-cache)
    $PIN_SERVER "$VQ/vqserve" serve --model "$GGUF" --device "$DEVICE" --host 127.0.0.1 \
      --port $VQ_PORT --metrics-port $VQ_METRICS --kv-codec vecinfer-k2v2 --kv-codecs fp16 \
      --codebooks "$W/books.vqcb" --kv-memory "$KV_BYTES" --max-num-seqs "${MAX_SEQS:-256}" \
      "${extra[@]}" ${VQ_ARGS:-} >> "$lg" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 1500); do
      tail -n +$((seen + 1)) "$lg" | grep -q "serving" && break
      kill -0 $SERVER_PID 2> /dev/null || break
      sleep 0.2
    done
    tail -n +$((seen + 1)) "$lg" | grep -q "serving" ||
      { log "vqserve did not start:"; tail -20 "$lg"; return 1; }
  else
    local p=${cfg#ll-} slot np ngl=99
    slot=$(slot_len "$p")
    np=$((KV_T / slot))
    [ "$DEVICE" = cpu ] && ngl=0
    echo "llama-server: -np $np slots of $slot tokens, -c $((np * slot)) tokens," \
      "f16 KV $((np * slot * BT)) bytes" >> "$lg"
    $PIN_SERVER "$LL/bin/llama-server" -m "$GGUF" -ngl $ngl -fa on -c $((np * slot)) -np $np \
      -b 2048 -ub 2048 -fit off -t "${LLAMA_THREADS:-2}" --host 127.0.0.1 --port $LL_PORT \
      ${LL_ARGS:-} >> "$lg" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 1500); do
      [ "$($PY -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$LL_PORT/health', timeout=2).status)" 2> /dev/null)" = 200 ] && break
      kill -0 $SERVER_PID 2> /dev/null || break
      sleep 0.2
    done
    kill -0 $SERVER_PID 2> /dev/null || { log "llama-server did not start:"; tail -20 "$lg"; return 1; }
  fi
  SERVER=$cfg
  log "started $cfg in $((SECONDS - t)) s: $(tail -n +$((seen + 1)) "$lg" | grep -m1 -E "serving|llama-server: -np")"
  [[ $cfg == ll-* ]] && grep -E "n_ctx_seq|llama_kv_cache: size|kv_unified" "$lg" | head -4 |
    tee -a "$W/logs/run.log"
  # one short request first (connections, first-step setup), outside the timed cells.
  local be=(--target 127.0.0.1:$VQ_PORT --codecs vecinfer-k2v2,fp16)
  [[ $cfg == ll-* ]] && be=(--backend http --target 127.0.0.1:$LL_PORT)
  $PIN_GEN $PY "$LG" "${be[@]}" --concurrency 1 --requests 1 \
    --prompt-tokens 64 --max-tokens 2 --no-warmup > /dev/null 2>&1
}

table() {
  $PY "$HERE/load_table.py" --cells "$W/cells" --free "$W/free.txt" \
    --plot "$RESULTS/tokens_per_s.png" --title "$SHAPE shape, $DEVICE, KV $KV_BYTES bytes each" \
    > "$W/table.md" 2> "$W/logs/table.err" || cat "$W/logs/table.err"
  cat "$W/table.md"
  cp "$W/table.md" "$W/free.txt" "$RESULTS/" 2> /dev/null
  cat "$W"/cells/*.json > "$RESULTS/cells.json" 2> /dev/null
  tar -C "$W" -czf "$RESULTS/logs.tar.gz" logs cells free.txt 2> /dev/null
}

run() {
  mkdir -p "$W/logs" "$W/cells"
  RESULTS=${RESULTS:-${OUT:-$W/results}}
  mkdir -p "$RESULTS"
  local ncpu G
  ncpu=$(nproc)
  G=${GGUF_DIR:-$W/gguf}
  local shm
  shm=$(df -k --output=avail /dev/shm 2> /dev/null | tail -1)
  if [ -z "${GGUF_DIR:-}" ] && [ "${shm:-0}" -gt 20000000 ] 2> /dev/null; then G=/dev/shm/load; fi
  mkdir -p "$G"
  BT=$(b_token) KV_T=$(kv_tokens)
  KV_BYTES=$((KV_T * BT))
  PIN_SERVER="" PIN_GEN="" PIN_BUILD=""
  if [ "$ncpu" -ge 8 ] && command -v taskset > /dev/null; then
    PIN_SERVER="taskset -c ${SERVER_CPUS:-0,1}" PIN_GEN="taskset -c 2,3"
    PIN_BUILD="taskset -c 4-$((ncpu - 1))"
  fi
  {
    date -u
    command -v nvidia-smi > /dev/null &&
      nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    echo "cpus $ncpu; shape $SHAPE; device $DEVICE; KV $KV_T tokens x $BT B = $KV_BYTES bytes" \
      "for each server; window $WINDOW s (prefix cells $PREFIX_WINDOW s)"
  } | tee -a "$W/logs/run.log"
  # python: the device's python3 lacks gguf (the carried wheel); the stubs need a protobuf that
  # loads them (the carried one where the device's does not).
  export PYTHONPATH=$HERE/gen:$HERE/../../tools/python_client/gen:$W/site${PYTHONPATH:+:$PYTHONPATH}
  if [ ! -f "$G/random-$SHAPE-F16.gguf" ] && ! $GGUF_PY -c "import gguf" 2> /dev/null; then
    $GGUF_PY -m pip install -q --no-index --no-deps --no-compile --target "$W/site" "$HERE"/gguf-*.whl
  fi
  if ! $PY -c "import grpc, vqserve_pb2, vqserve_pb2_grpc" 2> "$W/logs/stubs.err"; then
    log "stubs do not load with the device's protobuf ($(tail -1 "$W/logs/stubs.err")): the carried one"
    $PY -m pip install -q --no-index --no-deps --no-compile --target "$W/pb" "$HERE"/protobuf-*.whl
    export PYTHONPATH=$W/pb:$PYTHONPATH
    $PY -c "import grpc, vqserve_pb2, vqserve_pb2_grpc" || return 1
  fi
  # vqserve: the carried bundle, or VQ_BIN (a build here).
  VQ=${VQ_BIN:-$W/vq}
  if [ -z "${VQ_BIN:-}" ] && [ ! -x "$VQ/vqserve" ]; then
    mkdir -p "$VQ" && tar -C "$VQ" -xJf "$HERE/vqserve.tar.xz" || return 1
  fi
  export LD_LIBRARY_PATH=$VQ/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  # the model (13 s at the 8B shape).
  GGUF=$G/random-$SHAPE-F16.gguf
  if [ ! -f "$GGUF" ]; then
    local t=$SECONDS
    $GGUF_PY "$MRG" --shape "$SHAPE" --tokenizer "$TOKENIZER_GGUF" \
      --out-dir "$G" --name "random-$SHAPE" > "$W/logs/gguf.log" 2>&1 ||
      { cat "$W/logs/gguf.log"; return 1; }
    log "wrote $GGUF ($(du -h "$GGUF" | cut -f1)) in $((SECONDS - t)) s"
  fi
  # codebooks calibrated on this GGUF: the CPU runtime (fp32 weights), all cores, a small run.
  if [ ! -f "$W/books.vqcb" ]; then
    local t=$SECONDS
    timeout "${CALIB_TIMEOUT:-300}" "$VQ/vqserve" calibrate --model "$GGUF" --text "$CALIB_TEXT" \
      --codec vecinfer --k-bits 2 --v-bits 2 --tokens "${CALIB_TOKENS:-256}" \
      --seq-len "${CALIB_SEQ:-128}" --iterations "${CALIB_ITERS:-2}" -o "$W/books.vqcb.part" \
      > "$W/logs/calibrate.log" 2>&1 && mv "$W/books.vqcb.part" "$W/books.vqcb"
    grep -E "forward|wrote" "$W/logs/calibrate.log" | tee -a "$W/logs/run.log"
    [ -f "$W/books.vqcb" ] || { log "calibration failed:"; tail -5 "$W/logs/calibrate.log"; return 1; }
    log "calibrated vecinfer-k2v2 on $GGUF in $((SECONDS - t)) s"
  fi
  # llama-server: built here in its own session on cores 4.. (outlives this call), or LLAMA_PREFIX.
  LL=${LLAMA_PREFIX:-$W/llama.cpp}
  if [ "${SKIP_LLAMA:-0}" != 1 ] && [ -z "${LLAMA_PREFIX:-}" ] && [ ! -x "$LL/bin/llama-server" ] &&
      ! { [ -f "$W/build.pid" ] && kill -0 "$(cat "$W/build.pid")" 2> /dev/null; }; then
    local llama_cuda=1
    [ "$DEVICE" = cpu ] && llama_cuda=0
    setsid bash -c "LLAMA_CUDA=$llama_cuda JOBS=$((ncpu > 8 ? ncpu - 4 : ncpu)) $PIN_BUILD \
      bash '$HERE/build_llama_cpp.sh' build '$HERE/llama.cpp-src.tar.xz' '$LL' llama-server \
      > '$W/logs/llama_build.log' 2>&1; echo \"exit \$?\" >> '$W/logs/llama_build.log'" &
    echo $! > "$W/build.pid"
    log "building llama-server into $LL (pid $(cat "$W/build.pid"))"
  fi
  llama_ready() { [ -x "$LL/bin/llama-server" ]; }
  build_running() { [ -f "$W/build.pid" ] && kill -0 "$(cat "$W/build.pid")" 2> /dev/null; }

  local deferred=() line id cfg codec p shared c win est
  run_cell() {
    read -r id cfg codec p shared c win <<< "$1"
    [ -f "$W/cells/$id.json" ] && return 0
    est=$((win + 20))
    [ "$SERVER" != "$cfg" ] && est=$((est + 45))
    if [ $((SECONDS - T0 + est)) -gt "$CALL_BUDGET_S" ]; then
      log "no time for $id in this call ($((SECONDS - T0)) s used of $CALL_BUDGET_S)"
      return 2
    fi
    # llama-server afresh for every cell (LL_FRESH=0: one per prompt length): a cell's cancelled
    # requests are saved one by one into its host-RAM prompt cache after the window, work that
    # ran into the next cell's window (64 slots, ~25 s) and that its idle check does not see.
    [[ $cfg == ll-* ]] && [ "${LL_FRESH:-1}" = 1 ] && [ "$SERVER" = "$cfg" ] && stop_server
    start_server "$cfg" || return 1
    # each kind of cell its own prompts (the same on both servers and both codecs, whose
    # prefix caches are separate): request i's ids come from --seed and i, so cells sharing a
    # seed would find each other's prompts in a prefix cache, and a shorter prompt is the start
    # of a longer one.
    local seed
    seed=$(printf '%s' "$p-$shared-$c" | cksum | cut -d' ' -f1)
    local be=(--target 127.0.0.1:$VQ_PORT --codecs "$codec" --label "vqserve ${cfg/vq-/prefix-}"
              --idle-url "http://127.0.0.1:$VQ_METRICS/metrics")
    [[ $cfg == ll-* ]] && be=(--backend http --target 127.0.0.1:$LL_PORT --label llama-server --codecs "$codec"
                              --idle-url "http://127.0.0.1:$LL_PORT/slots")
    $PIN_GEN $PY "$LG" "${be[@]}" --concurrency "$c" --duration "$win" \
      --prompt-tokens "$p" --shared-prefix-tokens "$shared" --max-tokens "$OUT_TOKENS" \
      --id-low 1000 --id-high 30000 --seed "$seed" --no-warmup ${SAMPLING:-} \
      --json "$W/cells/$id.json.part" \
      > "$W/logs/cell_$id.log" 2>&1
    local rc=$?
    grep -E "^\| (vq|ll)" "$W/logs/cell_$id.log" | tee -a "$W/logs/run.log"
    grep -A3 "errors:\|not idle\|Traceback" "$W/logs/cell_$id.log" | head -8 | tee -a "$W/logs/run.log"
    [ -f "$W/cells/$id.json.part" ] && mv "$W/cells/$id.json.part" "$W/cells/$id.json"
    # the server's metrics after each cell (cumulative: a cell's own share is the difference).
    [[ $cfg == vq-* ]] && scrape "$W/logs/metrics_after_$id.txt"
    echo "$id" >> "$W/cells_$cfg"
    [ $rc = 0 ] || log "$id: load_generator exit $rc"
    return 0
  }
  while read -r line; do
    [ -z "$line" ] && continue
    if [[ $line == *" ll-"* ]] && ! llama_ready; then deferred+=("$line"); continue; fi
    run_cell "$line"
    [ $? = 2 ] && break
    table > /dev/null
  done < <(cells)
  if [ ${#deferred[@]} -gt 0 ]; then
    stop_server
    while ! llama_ready && build_running && [ $((SECONDS - T0 + 120)) -lt "$CALL_BUDGET_S" ]; do
      sleep 2
    done
    if llama_ready; then
      log "$(tail -2 "$W/logs/llama_build.log" | head -1)"
      for line in "${deferred[@]}"; do
        run_cell "$line"
        [ $? = 2 ] && break
        table > /dev/null
      done
    else
      log "llama-server not built yet: $(tail -1 "$W/logs/llama_build.log" 2> /dev/null)"
    fi
  fi
  stop_server
  local left=0
  while read -r line; do
    [ -z "$line" ] && continue
    read -r id _ <<< "$line"
    [ -f "$W/cells/$id.json" ] || left=$((left + 1))
  done < <(cells)
  table
  log "$left cells left$([ $left -gt 0 ] && echo ": run again (same warm machine)")"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  cells) cells ;;
  *) sed -n '2,40p' "$0" >&2; exit 2 ;;
esac
