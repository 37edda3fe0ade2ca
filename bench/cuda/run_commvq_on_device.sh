#!/bin/bash
# one call on the lent h200 for commvq caches in the cuda runtime: cuda_commvq_model_test (gpu
# page encode vs the cpu codec's EncodePage; the gpu model over a commvq CudaKvCache vs the cpu
# model over a PagedKvCache of the same books, sink 0 and 32; prefill vs chunks), cuda_graph_test
# (graphs == eager, incl. commvq-2 sink 32), `vqserve generate --device cuda --kv-codec commvq-2`
# vs the cpu, `vqserve serve --device cuda` with a commvq-2 pool answering vqctl, then the
# regression tests of the other cuda caches and kernels, last a short end-to-end decode bench.
# binaries, model and codebooks come from $DIR (bench/cuda/pack_commvq_bundle.sh here):
#   bash bench/cuda/pack_commvq_bundle.sh build
#   run: DIR=.devbuild/runCV1 LOG=runCV1 bash bench/cuda/run_commvq_on_device.sh
# (timeout_s 240). logs go to $OUT: $LOG.log, ${LOG}_decode_attention_test.log, ${LOG}_e2e.log.
set -o pipefail
OUT=${OUT:-/tmp/out}
DIR=${DIR:-.devbuild/runCV1}
LOG=${LOG:-runCV1}
mkdir -p "$OUT"
. "$(dirname "$0")/unpack_bundle.sh"
export VQSERVE_CVQCB=$DIR/commvq-2.vqcb
# each step bounded, so that one hang cannot eat the call.
t() { local s=$1; shift; timeout "$s" "$@"; echo "exit: $? ($*)" | sed "s|$B/||"; }
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "== cuda_commvq_model_test (model $(sha256sum < $M | cut -c1-16))"
  t 90 $B/cuda_commvq_model_test
  echo "== cuda_graph_test (graphs == eager; commvq-2 sink 32 among them)"
  t 40 $B/cuda_graph_test
  echo "== vqserve generate --kv-codec commvq-2 (sink 32): cuda vs cpu, 256 tokens (flushes past 160)"
  for d in cuda cpu; do
    t 20 $B/vqserve generate --model $M --device $d --kv-codec commvq-2 --codebooks $VQSERVE_CVQCB \
      --temperature 0 --max-tokens 256 --fp32 --prompt "The history of the printing press" \
      > /tmp/gen_$d.txt
    echo "$d: $(sha256sum < /tmp/gen_$d.txt | cut -c1-16) $(head -c 160 /tmp/gen_$d.txt | tr '\n' ' ')"
  done
  echo "== serve --device cuda --kv-codec commvq-2 --kv-codecs fp16 (sink 32), then vqctl"
  $B/vqserve serve --model $M --device cuda --kv-codec commvq-2 --kv-codecs fp16 \
    --codebooks $VQSERVE_CVQCB --host 127.0.0.1 --port 50162 --metrics-port 9472 \
    --kv-memory 1G > /tmp/serve.log 2>&1 &
  pid=$!
  for i in $(seq 1 30); do grep -q "serving" /tmp/serve.log && break; sleep 1; done
  cat /tmp/serve.log
  for c in commvq-2 fp16; do
    echo "-- vqctl generate --codec $c"
    timeout 20 $B/vqctl --target 127.0.0.1:50162 generate --chat "What is a cache?" --codec $c \
      --max-tokens 32 --temperature 0 --usage
  done
  kill -TERM $pid; wait $pid; echo "serve exit: $?"; tail -2 /tmp/serve.log
  echo "== regressions: cuda_vecinfer_model_test, cuda_kivi_model_test, cuda_model_test"
  t 40 $B/cuda_vecinfer_model_test
  t 40 $B/cuda_kivi_model_test
  t 30 $B/cuda_model_test
  echo "== cuda_decode_attention_test (every kernel against float64 and the cpu codecs)"
  t 60 $B/cuda_decode_attention_test > "$OUT/${LOG}_decode_attention_test.log" 2>&1
  tail -3 "$OUT/${LOG}_decode_attention_test.log"
  grep -E "FAILED|Failure" "$OUT/${LOG}_decode_attention_test.log" | head -20
} 2>&1 | tee "$OUT/$LOG.log"
{
  echo "== cuda_e2e_decode_bench (random weights and kv; commvq over random books)"
  timeout 45 $B/cuda_e2e_decode_bench --models smollm2 --codecs fp16,vecinfer-k2v2,commvq-2,commvq-1 \
    --batch 16 --ctx 4096 --short-ctx 256 --warmup 4 --steps 32 --graphs on
  echo "exit: $?"
  timeout 60 $B/cuda_e2e_decode_bench --models llama8b --codecs fp16,vecinfer-k2v2,commvq-2 \
    --batch 16 --ctx 32768 --short-ctx 256 --warmup 4 --steps 16 --graphs on
  echo "exit: $?"
} 2>&1 | tee "$OUT/${LOG}_e2e.log"
