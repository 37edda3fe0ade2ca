#!/bin/bash
# one call on the lent h200 for cuda graphs of decode steps (runtime/cuda/cuda_graph_cache.h):
# cuda_graph_test (tokens and logits with graphs == without, fp16 / kivi / vecinfer caches), then
# decode speed with and without graphs in the same call: `vqserve generate --device cuda` at
# batch 1 on the carried model (VQSERVE_CUDA_GRAPHS=0 / 1) and cuda_e2e_decode_bench
# --graphs both on the SmolLM2-135M shape at batch 1 and 16. binaries, model and codebook come
# from $DIR as in run_serve_on_device.sh (bundle.tar.xz of bundle_binaries.sh with vqserve,
# cuda_graph_test, cuda_e2e_decode_bench, cuda_model_test, cuda_vecinfer_model_test,
# cuda_kivi_model_test; model.gguf.xz; vecinfer-k2v2.vqcb). last, the gpu-vs-cpu model tests
# with graphs on (the default). logs go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/out}
DIR=${DIR:-.devbuild/graphs}
LOG=${LOG:-runG_cuda_graphs}
mkdir -p "$OUT"
. "$(dirname "$0")/unpack_bundle.sh"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "== cuda_graph_test (model $(sha256sum < $M | cut -c1-16))"
  $B/cuda_graph_test; echo "cuda_graph_test exit: $?"
  for g in 0 1 0 1; do
    echo "== VQSERVE_CUDA_GRAPHS=$g vqserve generate --device cuda --max-tokens 256"
    VQSERVE_CUDA_GRAPHS=$g $B/vqserve generate --model $M --device cuda --temperature 0 \
      --max-tokens 256 --prompt "The history of the printing press" > /tmp/gen_$g.txt
    echo "exit: $?; sha256 of output $(sha256sum < /tmp/gen_$g.txt | cut -c1-16)"
  done
  for b in 1 16; do
    echo "== cuda_e2e_decode_bench --models smollm2 --batch $b --graphs both"
    $B/cuda_e2e_decode_bench --models smollm2 --codecs fp16,vecinfer-k2v2,kivi-k2v2 --batch $b \
      --ctx 2048 --short-ctx 256 --warmup 8 --steps 64 --budget-gb 80 --graphs both
    echo "exit: $?"
  done
  for t in cuda_vecinfer_model_test cuda_kivi_model_test cuda_model_test; do
    echo "== $t (graphs on)"
    timeout 40 $B/$t > "$OUT/${LOG}_$t.log" 2>&1; echo "$t exit: $?"
    grep -E "^\[  (PASSED|FAILED) |tests ran" "$OUT/${LOG}_$t.log"
  done
} 2>&1 | tee "$OUT/$LOG.log"
