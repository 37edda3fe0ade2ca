#!/bin/bash
# packs binaries of a build dir with the shared libraries the lent gpu machine lacks (not glibc,
# not the driver, not cublas: the machine has them) into one tar.xz, binaries at
# the top and libraries under lib/. the run_*_on_device.sh scripts unpack it there.
#   bash bench/cuda/bundle_binaries.sh BUILD_DIR ARCHIVE BINARY...
set -euo pipefail
BUILD=$1 ARCHIVE=$2
shift 2
mkdir -p "$(dirname "$ARCHIVE")"
stage=$(mktemp -d)
mkdir -p "$stage/lib"
for b in "$@"; do cp "$BUILD/bin/$b" "$stage/"; done
# STRIP=1: drop symbol tables of the copies (smaller carry; XZ_OPT=-9e shares more across them).
if [ "${STRIP:-0}" = 1 ]; then for b in "$@"; do strip --strip-unneeded "$stage/$b"; done; fi
for b in "$@"; do
  ldd "$BUILD/bin/$b" | awk '/=> \// {print $3}'
done | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda|libcublas[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar -C "$stage" -cJf "$ARCHIVE" .
rm -rf "$stage"
