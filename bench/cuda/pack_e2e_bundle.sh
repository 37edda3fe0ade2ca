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
stage=$(mktemp -d)
mkdir -p "$stage/lib"
for b in $bins; do cp "$BUILD/bin/$b" "$stage/"; done
for b in $bins; do
  ldd "$BUILD/bin/$b" | awk '/=> \// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda|libcublas[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar -C "$stage" -cJf "$DIR/bundle.tar.xz" .
rm -rf "$stage"
ls -la "$DIR"
