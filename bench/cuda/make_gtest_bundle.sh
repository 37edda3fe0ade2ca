#!/bin/bash
# packs cuda_decode_attention_test (built here) with the shared libraries the lent gpu machine
# lacks (abseil, libstdc++; not glibc, cuda runtime or cublas) into one archive that
# `bash bench/cuda/run_on_device.sh --gtest ARCHIVE` unpacks and runs there.
# usage (from the repo root): bash bench/cuda/make_gtest_bundle.sh [BUILD_DIR] [ARCHIVE]
set -e
BUILD=${1:-build-b}
ARCHIVE=${2:-.devbuild/runB/gtest.tar.xz}
bash bench/cuda/bundle_binaries.sh "$BUILD" "$ARCHIVE" cuda_decode_attention_test
ls -la "$ARCHIVE"
