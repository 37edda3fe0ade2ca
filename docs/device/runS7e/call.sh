#!/bin/bash
# session 7 call 5: the gpu gtests with the runtime's fp16 key books, the block-parallel ring
# and the new combine (bundle of this tree's build), then the 8B-shape end to end.
export OUT=${OUT:-/tmp/out}
export VQSERVE_CVQCB=$PWD/.devbuild/c2/commvq-2.vqcb
SNAP=. DIR=.devbuild/c2 CHECKS="--commvq-only" \
GTESTS="cuda_decode_attention_test cuda_graph_test cuda_kivi_model_test cuda_commvq_model_test" \
VQSERVE_VQCB_LIST="$PWD/.devbuild/c2/vecinfer-k2v2.vqcb" \
timeout 330 bash bench/cuda/run_kernel_bundle_on_device.sh
DIR=.devbuild/c2 . bench/cuda/unpack_bundle.sh
{
  echo "== cuda_e2e_decode_bench llama8b shape (random weights), batch 16 x 32K"
  timeout 200 $B/cuda_e2e_decode_bench --models llama8b --codecs fp16,kivi-k2v2,vecinfer-k2v2 --batch 16 --ctx 32768 --steps 32 --warmup 8
  echo "exit: $?"
} > $OUT/e2e.log 2>&1
grep -E "^\||exit" $OUT/e2e.log
