#!/usr/bin/env bash
# vqserve's cuda decode step beside llama.cpp's CUDA build on the same random-weight GGUF of the
# Llama-3.1-8B shape, in one call on the lent gpu machine: tokens/s of the decode step at batch
# 1 and 16, short context (256), batch 16 x 32K and batch 1 x 128K; vqserve with fp16 and
# vecinfer-k2v2 kv caches (cuda_e2e_decode_bench --gguf), llama.cpp with f16, q8_0 and q4_0 kv
# caches (llama-batched-bench, flash attention, the prompt shared and copied to every sequence);
# weights F16 and Q4_K_M (random blocks of llama.cpp's Q4_K_M types written directly by
# tools/make_random_gguf.py --type: ~20 s; other llama.cpp types through llama-quantize of the
# F16 file). prints one markdown table and the ratios.
#
#   here:   bash bench/peers/compare_decode.sh pack [BUILD=build-cuda] [DIR=.devbuild/peers]
#     packs what the device call needs into DIR (15 MB, within one call's 64 MiB carry):
#     the llama.cpp source (bench/peers/build_llama_cpp.sh pack), cuda_e2e_decode_bench of
#     BUILD with its libraries (bench/cuda/bundle_binaries.sh), the default model's tokenizer
#     as a tensor-free GGUF, the `gguf` wheel of scripts/requirements.txt, and these scripts.
#   device: bash DIR/compare_decode.sh run      (carry DIR)
#     builds llama.cpp into /tmp/peers/llama.cpp (or reuses it: 270 s on the H200) while it
#     writes the F16 GGUF (13 s) and runs vqserve on it (the build on cores 2.., the bench and
#     writer on cores 0-1), then writes the Q4_K_M GGUF (random blocks, no llama-quantize; Q8_0
#     likewise; any other type is quantized from the F16 file, ~5 minutes on 14 cores) beside
#     llama.cpp's F16 rows, and runs the rest. the whole table may take more than one call's
#     10 minutes: a second call on the same warm machine (chained at once: it is given back
#     after ~30 s idle) reuses the build and the GGUFs (/dev/shm) and reruns every row.
#     the table and logs: RESULTS (default $OUT, else /tmp/peers/results).
#     the PyTorch step (torch_decode_step.py: bf16 weights and kv, SDPA flash, one CUDA graph a
#     step) runs on the same cells after vqserve's F16 rows, while llama.cpp builds.
#     knobs: WEIGHTS="F16 Q4_K_M"  OUR_KV=fp16,vecinfer-k2v2  LLAMA_KV="f16 q8_0 q4_0"
#            LONG_KV="f16" (llama.cpp kv types also run at 1 x 128K: a 128K-token prefill each)
#            STEPS=32 (decode steps timed per cell, every engine)  SKIP_OURS=1  SKIP_LLAMA=1
#            SKIP_TORCH=1  TORCH_CELLS=1x256,16x256,16x32768,1x131072
#            OUR_WEIGHTS=blocks (vqserve keeps a quantized file's blocks resident; fp16: dequantized)
#            GGUF_DIR (default /dev/shm/peers when it has 25 GB free, else /tmp/peers/gguf)
#            SHAPE=llama8b (tools/make_random_gguf.py's shape; tiny for a dry run of the script)
#            LLAMA_TARGETS="llama-batched-bench llama-quantize" (add llama-server for
#            bench/load/h200_load.sh's LLAMA_PREFIX=/tmp/peers/llama.cpp on the same machine)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

pack() {
  local build=${1:-build-cuda} dir=${2:-.devbuild/peers}
  local root
  root=$(cd "$HERE/../.." && pwd)
  mkdir -p "$dir"
  bash "$root/bench/peers/build_llama_cpp.sh" pack "$dir/llama.cpp-src.tar.xz" > /dev/null \
    || return 1
  STRIP=1 XZ_OPT="-9e -T2" bash "$root/bench/cuda/bundle_binaries.sh" "$build" \
    "$dir/bench.tar.xz" cuda_e2e_decode_bench || return 1
  python3 "$root/tools/make_random_gguf.py" --vocab-only \
    --tokenizer "${TOKENIZER:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}" \
    --out "$dir/tokenizer.gguf" > /dev/null || return 1
  local pin
  pin=$(grep -E '^gguf==' "$root/scripts/requirements.txt")
  rm -f "$dir"/gguf-*.whl
  python3 -m pip download --no-deps --only-binary=:all: "$pin" -d "$dir" > /dev/null || return 1
  cp "$root/bench/peers/compare_decode.sh" "$root/bench/peers/build_llama_cpp.sh" \
    "$root/bench/peers/decode_table.py" "$root/bench/peers/torch_decode_step.py" \
    "$root/tools/make_random_gguf.py" "$dir/"
  du -sh "$dir"
}

run() {
  local W=${WORK:-/tmp/peers}
  # every log goes to $W/logs; the table, vqserve's logs, llama.cpp's rows and a tarball of
  # all logs are copied to RESULTS (default $OUT, the device call's folder that comes back;
  # at most 8 files come back) after each step.
  RESULTS=${RESULTS:-${OUT:-$W/results}}
  OUT=$W/logs
  rm -rf "$OUT"
  mkdir -p "$OUT" "$RESULTS"
  local L=$W/llama.cpp B=$W/bench G=${GGUF_DIR:-$W/gguf} steps=${STEPS:-32} ncpu
  # the 21 GB of GGUFs in memory (tmpfs) when it has room: no wait on the disk.
  local shm
  shm=$(df -k --output=avail /dev/shm 2> /dev/null | tail -1)
  if [ -z "${GGUF_DIR:-}" ] && [ "${shm:-0}" -gt 25000000 ] 2> /dev/null; then G=/dev/shm/peers; fi
  ncpu=$(nproc)
  # the device's python lacks gguf: the carried wheel, on PYTHONPATH.
  if ! python3 -c "import gguf" 2> /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$W/site" \
      "$HERE"/gguf-*.whl || return 1
    export PYTHONPATH=$W/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  if [ ! -x "$B/cuda_e2e_decode_bench" ]; then
    mkdir -p "$B" && tar -C "$B" -xJf "$HERE/bench.tar.xz" || return 1
  fi
  export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  mkdir -p "$G"
  local fast="" slow=""  # cores for the timed programs and for the build
  if [ "$ncpu" -ge 8 ] && command -v taskset > /dev/null; then
    fast="taskset -c 0,1" slow="taskset -c 2-$((ncpu - 1))"
  fi
  {
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
    echo "cpus $ncpu; llama.cpp from" \
      "$(tar -xJOf "$HERE/llama.cpp-src.tar.xz" llama.cpp/VQSERVE_SOURCE)"
  } | tee "$OUT/env.log"
  JOBS=$((ncpu > 8 ? ncpu - 2 : ncpu)) $slow bash "$HERE/build_llama_cpp.sh" build \
    "$HERE/llama.cpp-src.tar.xz" "$L" ${LLAMA_TARGETS:-llama-batched-bench llama-quantize} \
    > "$OUT/llama_build.log" 2>&1 &
  local build_pid=$!
  local name=random-${SHAPE:-llama8b}
  local need_f16=0 wt
  for wt in ${WEIGHTS:-F16 Q4_K_M}; do
    case $wt in F16) need_f16=1 ;; Q8_0 | Q4_K_M) ;; *) need_f16=1 ;; esac  # else llama-quantize
  done
  if [ $need_f16 = 1 ] && [ ! -f "$G/$name-F16.gguf" ]; then
    $fast python3 "$HERE/make_random_gguf.py" --shape "${SHAPE:-llama8b}" \
      --tokenizer "$HERE/tokenizer.gguf" --out-dir "$G" --name "$name" 2>&1 |
      tee "$OUT/gguf.log" || return 1
  fi
  ours() {  # ours WEIGHTS: both cells of each batch in one load
    [ "${SKIP_OURS:-0}" = 1 ] && return 0
    echo "== vqserve cuda_e2e_decode_bench, $1 weights"
    # a quantized file's blocks stay resident in their format (--weights blocks) unless
    # OUR_WEIGHTS=fp16 (dequantized at load); F16 files are fp16 either way.
    local ow=fp16
    [ "$1" != F16 ] && ow=${OUR_WEIGHTS:-blocks}
    local args=(--gguf "$G/$name-$1.gguf" --models "llama8b-$1" --weights "$ow"
                --codecs "${OUR_KV:-fp16,vecinfer-k2v2}" --short-ctx 256 --steps "$steps" --warmup 4)
    $fast "$B/cuda_e2e_decode_bench" "${args[@]}" --batch 16,1 --ctx 32768,131072 |
      tee "$W/ours.txt"
    echo "exit: $?"
    # a bench older than the cell lists (one batch x context per run) ran 16 x 32K only.
    grep -q "^batch x context" "$W/ours.txt" && return 0
    $fast "$B/cuda_e2e_decode_bench" "${args[@]}" --batch 1 --ctx 131072
    echo "exit: $?"
  }
  [[ " ${WEIGHTS:-F16 Q4_K_M} " == *" F16 "* ]] && ours F16 2>&1 | tee "$OUT/ours_F16.log"
  if [ "${SKIP_TORCH:-0}" != 1 ]; then
    echo "== the PyTorch step"
    local tshape=llama8b
    [ "${SHAPE:-llama8b}" = llama8b ] || tshape=tiny
    $fast python3 "$HERE/torch_decode_step.py" --shape $tshape --steps "$steps" \
      --cells "${TORCH_CELLS:-1x256,16x256,16x32768,1x131072}" --jsonl "$OUT/torch.jsonl" 2>&1 |
      tee "$OUT/torch.log"
  fi
  table
  wait $build_pid || { echo "llama.cpp build failed:"; tail -30 "$OUT/llama_build.log"; return 1; }
  cat "$OUT/llama_build.log"
  # the f16-kv rows first (each weight type), then the quantized kv types: a call cut at its
  # time limit still returns the most wanted rows. writing or quantizing the other weight types
  # (cpu) runs beside llama.cpp's F16 rows (gpu, cores 0-1).
  local quant_pids=()
  for wt in ${WEIGHTS:-F16 Q4_K_M}; do
    [ "$wt" = F16 ] || [ -f "$G/$name-$wt.gguf" ] || {
      # into a temporary name, renamed when done: a call cut mid-way leaves no half file to reuse.
      case $wt in
        Q8_0 | Q4_K_M)  # random blocks of the type, written directly
          { $slow python3 "$HERE/make_random_gguf.py" --shape "${SHAPE:-llama8b}" --type "$wt" \
              --tokenizer "$HERE/tokenizer.gguf" --out-dir "$G/part" --name "$name" \
              > "$OUT/quantize_$wt.log" 2>&1 &&
              mv "$G/part/$name-$wt.gguf" "$G/$name-$wt.gguf"; } & ;;
        *)
          { $slow "$L/bin/llama-quantize" "$G/$name-F16.gguf" "$G/$name-$wt.gguf.part" "$wt" \
              "$ncpu" > "$OUT/quantize_$wt.log" 2>&1 &&
              mv "$G/$name-$wt.gguf.part" "$G/$name-$wt.gguf"; } & ;;
      esac
      quant_pids+=("$wt:$!")
    }
  done
  local first=1
  for kv in ${LLAMA_KV:-f16 q8_0 q4_0}; do
    for wt in ${WEIGHTS:-F16 Q4_K_M}; do
      if [ "$wt" != F16 ] && [ $first = 1 ]; then  # the quantized weights are needed now
        for qp in "${quant_pids[@]}"; do
          wait "${qp#*:}" || { tail -20 "$OUT/quantize_${qp%%:*}.log"; return 1; }
          echo "${qp%%:*} weights: $(du -h "$G/$name-${qp%%:*}.gguf" | cut -f1)"
        done
        quant_pids=()
      fi
      [ "$wt" != F16 ] && [ $first = 1 ] && { ours "$wt" 2>&1 | tee "$OUT/ours_$wt.log"; }
      [ "${SKIP_LLAMA:-0}" = 1 ] && continue
      echo "== llama-batched-bench $wt weights, $kv kv"
      # -pps: one prefill per prompt length, copied into each sequence's own kv stream. batch
      # 1 runs beside 128K when this kv type is in LONG_KV (a 128K-token prefill), else here.
      local pl=1,16 long=0
      [[ " ${LONG_KV-f16} " == *" $kv "* ]] && pl=16 long=1
      llama "$wt" "$kv" $((16 * (32768 + steps))) -pps -npp 256,32768 -npl $pl
      [ $long = 1 ] && llama "$wt" "$kv" $((131072 + steps)) -npp 256,131072 -npl 1
      table
    done
    first=0
  done
  table
}

# llama WEIGHTS KV CTX ARGS...: one llama-batched-bench run; its jsonl rows, tagged, to llama.jsonl
llama() {
  local wt=$1 kv=$2 ctx=$3
  shift 3
  $fast "$L/bin/llama-batched-bench" -m "$G/$name-$wt.gguf" -ngl 99 -fa on -ctk "$kv" -ctv "$kv" \
    -t "${LLAMA_THREADS:-2}" -c "$ctx" -b 2048 -ub 2048 -ntg "$steps" --output-format jsonl "$@" \
    2>> "$OUT/llama_${wt}_$kv.err" | sed "s/^{/{\"weights\": \"$wt\", \"kv\": \"$kv\", /" |
    tee -a "$OUT/llama.jsonl"
}

table() {
  python3 "$HERE/decode_table.py" --ours "$OUT"/ours_*.log --llama "$OUT/llama.jsonl" \
    --torch "$OUT/torch.jsonl" > "$OUT/table.md" && cat "$OUT/table.md"
  cp "$OUT"/{table.md,env.log} "$OUT"/ours_*.log "$OUT"/{llama,torch}.jsonl "$RESULTS/" \
    2> /dev/null
  tar -C "$OUT" -czf "$RESULTS/logs.tar.gz" .
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) sed -n '2,30p' "$0" >&2; exit 2 ;;
esac
