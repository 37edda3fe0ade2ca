#!/bin/bash
# one call on the lent h200 for the cuda model runtime. the machine has no abseil / grpc, so the
# binaries (cuda_model_test, cuda_decode_attention_test, a generate-only vqserve) are built here
# and carried with their shared libraries in .devbuild/run8/bundle.tar.xz, plus a truncated
# default model (bench/cuda/truncate_gguf.py, the first 8 of 30 blocks: the full file is over the
# carry limit) as .devbuild/run8/model.gguf.xz. logs go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/b
# BUNDLE (default .devbuild/run8/bundle.tar.xz) holds the binaries; MODEL_GGUF, when set, is a
# model already on the machine (the full default model travels in two parts over two calls:
# see docs/device/README.md), else the truncated model is unpacked.
BUNDLE=${BUNDLE:-.devbuild/run8/bundle.tar.xz}
[ -x /tmp/b/cuda_model_test ] || python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall('/tmp/b')" "$BUNDLE"
if [ -z "${MODEL_GGUF:-}" ]; then
  python3 - <<'PY'
import lzma, shutil
with lzma.open(".devbuild/run8/model.gguf.xz") as f, open("/tmp/model.gguf", "wb") as g:
    shutil.copyfileobj(f, g)
PY
  MODEL_GGUF=/tmp/model.gguf
fi
export LD_LIBRARY_PATH=/tmp/b/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH
M=$MODEL_GGUF
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "== cuda_model_test (VQSERVE_MODEL=$M, $(sha256sum < $M | cut -c1-16))"
  VQSERVE_MODEL=$M /tmp/b/cuda_model_test
  echo "cuda_model_test exit: $?"
  echo "== generate, cpu then cuda (48 tokens, then 400 for timing)"
  for n in 48 400; do
    for d in cpu cuda; do
      echo "-- --device $d --max-tokens $n"
      /tmp/b/vqserve_generate generate --model $M --prompt "What is a cache?" --chat --max-tokens $n --device $d | md5sum
    done
  done
  /tmp/b/vqserve_generate generate --model $M --prompt "What is a cache?" --chat --max-tokens 48 --device cuda
  echo "== cuda_decode_attention_test"
  /tmp/b/cuda_decode_attention_test > "$OUT/cuda_decode_attention_test.log" 2>&1
  echo "cuda_decode_attention_test exit: $?"; tail -4 "$OUT/cuda_decode_attention_test.log"
} 2>&1 | tee "$OUT/${LOG:-run8_cuda_runtime}.log"
