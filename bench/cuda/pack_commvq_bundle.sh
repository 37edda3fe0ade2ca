#!/bin/bash
# packs what bench/cuda/run_commvq_on_device.sh carries to the lent gpu machine into $DIR
# (git-ignored .devbuild/runCV1 by default): the binaries of build dir $BUILD with their shared
# libraries (bench/cuda/bundle_binaries.sh, stripped), the default model truncated to BLOCKS
# (default 2: binaries + model must fit the 64 MiB carry limit) blocks, and a commvq-2 and a
# vecinfer-k2v2 codebook calibrated on that truncated model (commvq on 4096 tokens: ~16 s here).
#   bash bench/cuda/pack_commvq_bundle.sh [BUILD=build]
set -euo pipefail
BUILD=${1:-build}
DIR=${DIR:-.devbuild/runCV1}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
TEXT=/usr/share/games/fortunes/fortunes
bins="vqserve vqctl cuda_commvq_model_test cuda_vecinfer_model_test cuda_kivi_model_test
      cuda_model_test cuda_decode_attention_test cuda_graph_test cuda_e2e_decode_bench"
mkdir -p "$DIR"
STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh "$BUILD" "$DIR/bundle.tar.xz" $bins
if [ ! -f "$DIR/model.gguf.xz" ]; then
  python3 bench/cuda/truncate_gguf.py "$MODEL" "$DIR/model.gguf" "${BLOCKS:-2}"
  xz -T2 -f "$DIR/model.gguf"
fi
tmp_model=/tmp/pack_commvq_model.gguf
xz -dkc "$DIR/model.gguf.xz" > "$tmp_model"
if [ ! -f "$DIR/commvq-2.vqcb" ]; then
  "$BUILD/bin/vqserve" calibrate --model "$tmp_model" --text "$TEXT" --codec commvq --k-bits 2 \
    --v-bits 2 --tokens 4096 --seq-len 256 --iterations 4 -o "$DIR/commvq-2.vqcb"
fi
if [ ! -f "$DIR/vecinfer-k2v2.vqcb" ]; then
  "$BUILD/bin/vqserve" calibrate --model "$tmp_model" --text "$TEXT" --codec vecinfer --k-bits 2 \
    --v-bits 2 --tokens 512 --seq-len 256 --iterations 4 -o "$DIR/vecinfer-k2v2.vqcb"
fi
rm -f "$tmp_model"
ls -la "$DIR"
du -cb "$DIR"/* | tail -1
