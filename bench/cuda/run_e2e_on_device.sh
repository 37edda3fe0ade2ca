#!/bin/bash
# one call on the lent h200: end-to-end decode tokens/s of the cuda runtime per kv codec
# (bench/cuda_e2e_decode_bench.cc), Llama-3.1-8B and SmolLM2-135M shapes with random weights,
# batch 16 x 32K context. the machine has no abseil / grpc, so the binary is built here and
# carried with its shared libraries in $DIR/bundle.tar.xz (bench/cuda/pack_e2e_bundle.sh).
# extra arguments go to the bench. logs go to $OUT/$LOG.log.
set -o pipefail
OUT=${OUT:-/tmp/out}
DIR=${DIR:-.devbuild/runC}
LOG=${LOG:-runC_cuda_e2e}
mkdir -p "$OUT"
. "$(dirname "$0")/unpack_bundle.sh"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  echo "== cuda_e2e_decode_bench $*"
  /tmp/b/cuda_e2e_decode_bench "$@"
  echo "exit: $?"
} 2>&1 | tee "$OUT/$LOG.log"
