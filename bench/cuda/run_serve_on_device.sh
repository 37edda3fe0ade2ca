#!/bin/bash
# one call on the lent h200 for `vqserve serve --device cuda` and the coded kv caches (vecinfer,
# kivi, with and without the attention sink) on the gpu. the machine has no abseil / grpc, so the
# binaries (vqserve, vqctl, cuda_vecinfer_model_test, cuda_kivi_model_test, cuda_serve_test,
# cuda_model_test, cuda_decode_attention_test) are built here and carried with their shared libraries in
# $DIR/bundle.tar.xz, with the default model truncated to its first 4 blocks
# (bench/cuda/truncate_gguf.py; the full file is over the carry limit) as $DIR/model.gguf.xz and
# a vecinfer-k2v2 codebook calibrated on that truncated model as $DIR/vecinfer-k2v2.vqcb.
# prepare here with bench/cuda/pack_serve_bundle.sh. logs go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/out}
DIR=${DIR:-.devbuild/runA}
LOG=${LOG:-runA_cuda_serve}
mkdir -p "$OUT"
. "$(dirname "$0")/unpack_bundle.sh"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "== cuda_vecinfer_model_test (model $(sha256sum < $M | cut -c1-16))"
  $B/cuda_vecinfer_model_test; echo "cuda_vecinfer_model_test exit: $?"
  echo "== cuda_kivi_model_test (kivi-k2v2 / k4v4 on the gpu, sink 0 and 32)"
  $B/cuda_kivi_model_test; echo "cuda_kivi_model_test exit: $?"
  echo "== cuda_serve_test"
  $B/cuda_serve_test; echo "cuda_serve_test exit: $?"
  echo "== cuda_model_test (fp16 kv, regression)"
  $B/cuda_model_test; echo "cuda_model_test exit: $?"
  echo "== cuda_decode_attention_test (every kernel against float64 and the cpu codecs)"
  $B/cuda_decode_attention_test > "$OUT/${LOG}_decode_attention_test.log" 2>&1
  echo "cuda_decode_attention_test exit: $?"; tail -3 "$OUT/${LOG}_decode_attention_test.log"
  grep -E "FAILED|Failure" "$OUT/${LOG}_decode_attention_test.log" | head -20
  echo "== serve --device cuda: bad combinations"
  $B/vqserve serve --model $M --device cuda --kv-codec commvq-2; echo "exit: $?"
  $B/vqserve serve --model $M --device cuda --kv-codec fp16 --kv-codecs commvq-2; echo "exit: $?"
  $B/vqserve serve --model $M --device cuda --kv-codec vecinfer-k2v2; echo "exit: $?"
  echo "== serve --device cuda --kv-codec vecinfer-k2v2 --kv-codecs fp16,kivi-k2v2 (sink 32), then vqctl"
  $B/vqserve serve --model $M --device cuda --kv-codec vecinfer-k2v2 --kv-codecs fp16,kivi-k2v2 \
    --codebooks $VQSERVE_VQCB --host 127.0.0.1 --port 50161 --metrics-port 9471 \
    --kv-memory 1G > /tmp/serve.log 2>&1 &
  pid=$!
  for i in $(seq 1 60); do grep -q "serving" /tmp/serve.log && break; sleep 1; done
  cat /tmp/serve.log
  for c in vecinfer-k2v2 fp16 kivi-k2v2; do
    echo "-- vqctl generate --codec $c"
    $B/vqctl --target 127.0.0.1:50161 generate --chat "What is a cache?" --codec $c \
      --max-tokens 32 --temperature 0 --usage
  done
  curl -s 127.0.0.1:9471/metrics 2>/dev/null | grep -E "^vqserve:kv_(compression|bytes)" | head
  kill -TERM $pid; wait $pid; echo "serve exit: $?"; tail -2 /tmp/serve.log
} 2>&1 | tee "$OUT/$LOG.log"
