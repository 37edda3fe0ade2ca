#!/bin/bash
# packs cuda_decode_attention_test (built here) with the shared libraries the lent gpu machine
# lacks (abseil, libstdc++; not glibc, cuda runtime or cublas) into one archive that
# `bash bench/cuda/run_on_device.sh --gtest ARCHIVE` unpacks and runs there.
# usage (from the repo root): bash bench/cuda/make_gtest_bundle.sh [BUILD_DIR] [ARCHIVE]
set -e
BUILD=${1:-build-b}
ARCHIVE=${2:-.devbuild/runB/gtest.tar.xz}
TMP=$(mktemp -d)
mkdir -p "$TMP/lib" "$(dirname "$ARCHIVE")"
cp "$BUILD/bin/cuda_decode_attention_test" "$TMP/"
strip "$TMP/cuda_decode_attention_test" || true
ldd "$BUILD/bin/cuda_decode_attention_test" | awk '/=>/ {print $3}' | while read -r l; do
  case $(basename "$l") in
    libcublas*|libcudart*|libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libcuda.so*) ;;
    *) cp -L "$l" "$TMP/lib/" ;;
  esac
done
tar -C "$TMP" -cJf "$ARCHIVE" .
rm -rf "$TMP"
ls -la "$ARCHIVE"
