#!/bin/bash
# packs what bench/cuda/run_serve_on_device.sh carries to the lent gpu machine into $DIR
# (git-ignored .devbuild/runA by default): the binaries of build dir $BUILD with their shared
# libraries (not glibc, not the driver, not cublas: the machine has them), the default model
# truncated to BLOCKS (default 4) blocks, and a vecinfer-k2v2 codebook calibrated on that
# truncated model.
#   bash bench/cuda/pack_serve_bundle.sh [BUILD=build-a]
set -euo pipefail
BUILD=${1:-build-a}
DIR=${DIR:-.devbuild/runA}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
bins="vqserve vqctl cuda_vecinfer_model_test cuda_kivi_model_test cuda_serve_test cuda_model_test
      cuda_decode_attention_test"
mkdir -p "$DIR"
bash bench/cuda/bundle_binaries.sh "$BUILD" "$DIR/bundle.tar.xz" $bins
if [ ! -f "$DIR/model.gguf.xz" ]; then
  python3 bench/cuda/truncate_gguf.py "$MODEL" "$DIR/model.gguf" "${BLOCKS:-4}"
  xz -T2 -f "$DIR/model.gguf"
fi
if [ ! -f "$DIR/vecinfer-k2v2.vqcb" ]; then
  xz -dkc "$DIR/model.gguf.xz" > /tmp/runA_model.gguf
  "$BUILD/bin/vqserve" calibrate --model /tmp/runA_model.gguf \
    --text /usr/share/games/fortunes/fortunes --codec vecinfer --k-bits 2 --v-bits 2 \
    --tokens 512 --seq-len 256 --iterations 4 -o "$DIR/vecinfer-k2v2.vqcb"
fi
ls -la "$DIR"
