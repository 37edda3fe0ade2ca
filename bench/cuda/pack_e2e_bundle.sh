#!/bin/bash
# packs what bench/cuda/run_e2e_on_device.sh carries to the lent gpu machine into $DIR
# (git-ignored .devbuild/runC by default): cuda_e2e_decode_bench of build dir $BUILD with its
# shared libraries (not glibc, not the driver, not cublas: the machine has them). the bench
# makes its models and caches with random contents, so no model file travels.
#   bash bench/cuda/pack_e2e_bundle.sh [BUILD=build-c]
set -euo pipefail
BUILD=${1:-build-c}
DIR=${DIR:-.devbuild/runC}
bins="cuda_e2e_decode_bench"
mkdir -p "$DIR"
bash bench/cuda/bundle_binaries.sh "$BUILD" "$DIR/bundle.tar.xz" $bins
ls -la "$DIR"
