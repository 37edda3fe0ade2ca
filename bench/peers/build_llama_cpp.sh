#!/usr/bin/env bash
# builds llama.cpp's programs (llama-batched-bench, llama-quantize, llama-server, llama-cli,
# llama-completion) from the llama.cpp source that PyPI's llama-cpp-python sdist vendors (the
# version pinned below; no llama.cpp source lives in this repo). CUDA when nvcc is found (for
# CUDA_ARCH, default 90 = the H200), else the CPU build.
#
#   build_llama_cpp.sh pack [ARCHIVE]
#     here (network): `pip download --no-binary` fetches the sdist (77 MB: over one device call's
#     64 MiB carry) into .devbuild/llama_cpp/, then repacks its vendor/llama.cpp without models,
#     docs, tests and examples into ARCHIVE (default .devbuild/llama_cpp/llama.cpp-src.tar.xz,
#     ~9 MB) that a device call carries.
#   build_llama_cpp.sh build SRC PREFIX [TARGET...]
#     SRC: the sdist (.tar.gz), a packed ARCHIVE (.tar.xz) or a llama.cpp source folder. builds
#     TARGETs (default the five above) with JOBS (default nproc) jobs, static, into PREFIX/bin.
#     reuses PREFIX when PREFIX/stamp matches (same SRC checksum, targets and backend).
#     LLAMA_CUDA=0 forces the CPU build. CUDA sm_90, batched-bench and quantize: 270 s on the
#     H200 with 14 jobs.
set -euo pipefail
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGETS_DEFAULT="llama-batched-bench llama-quantize llama-server llama-cli llama-completion"

pack() {
  local out=${1:-$ROOT/.devbuild/llama_cpp/llama.cpp-src.tar.xz}
  local dl=$ROOT/.devbuild/llama_cpp sdist
  mkdir -p "$dl" "$(dirname "$out")"
  sdist=$dl/llama_cpp_python-$VERSION.tar.gz
  [ -f "$sdist" ] || python3 -m pip download --no-binary llama-cpp-python --no-deps \
    "llama-cpp-python==$VERSION" -d "$dl" >&2
  if [ -s "$out" ] && [ "$out" -nt "$sdist" ]; then echo "$out"; return 0; fi  # packed already
  local tmp
  tmp=$(mktemp -d)
  tar -C "$tmp" -xzf "$sdist" "llama_cpp_python-$VERSION/vendor/llama.cpp"
  local src=$tmp/llama_cpp_python-$VERSION/vendor/llama.cpp
  rm -rf "$src"/{models,docs,media,tests,examples,benches,gguf-py,conversion,pocs,.github}
  rm -rf "$src"/tools/ui/{src,static,tests}
  echo "llama-cpp-python $VERSION" > "$src/VQSERVE_SOURCE"
  tar -C "$(dirname "$src")" -cf - llama.cpp | xz -6 -T2 > "$out"
  rm -rf "$tmp"
  echo "$out: $(du -h "$out" | cut -f1)" >&2
  echo "$out"
}

build() {
  local src_in=$1 prefix=$2
  shift 2
  local targets=${*:-$TARGETS_DEFAULT} cuda=OFF sum src
  if [ "${LLAMA_CUDA:-1}" != 0 ] && command -v nvcc > /dev/null; then cuda=ON; fi
  if [ -d "$src_in" ]; then
    sum=$(cd "$src_in" && find . -type f -name '*.c*' | sort | xargs cat | sha256sum)
  else
    sum=$(sha256sum < "$src_in")
  fi
  local stamp="src ${sum%% *} cuda $cuda arch ${CUDA_ARCH:-90} targets $targets"
  if [ -f "$prefix/stamp" ] && [ "$(cat "$prefix/stamp")" = "$stamp" ]; then
    echo "llama.cpp: reusing $prefix/bin (stamp matches)" >&2
    return 0
  fi
  mkdir -p "$prefix"
  case "$src_in" in
    *.tar.gz)
      rm -rf "$prefix/src" && mkdir -p "$prefix/src"
      tar -C "$prefix/src" -xzf "$src_in" --wildcards '*/vendor/llama.cpp'
      src=$(echo "$prefix"/src/*/vendor/llama.cpp) ;;
    *.tar.xz)
      rm -rf "$prefix/src" && mkdir -p "$prefix/src"
      tar -C "$prefix/src" -xJf "$src_in"
      src=$prefix/src/llama.cpp ;;
    *) src=$src_in ;;
  esac
  local gen=() opts=()
  command -v ninja > /dev/null && gen=(-G Ninja)
  [ "$cuda" = ON ] && opts=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90}")
  local t0=$SECONDS
  cmake -S "$src" -B "$prefix/build" "${gen[@]}" "${opts[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_UI=OFF \
    > "$prefix/configure.log" 2>&1 || { tail -30 "$prefix/configure.log" >&2; return 1; }
  # shellcheck disable=SC2086
  if ! cmake --build "$prefix/build" --target $targets -j "${JOBS:-$(nproc)}" \
      > "$prefix/build.log" 2>&1; then
    grep -m5 -B2 -A8 -E "error|Error" "$prefix/build.log" >&2
    tail -20 "$prefix/build.log" >&2
    return 1
  fi
  mkdir -p "$prefix/bin"
  for t in $targets; do cp "$prefix/build/bin/$t" "$prefix/bin/"; done
  echo "$stamp" > "$prefix/stamp"
  echo "llama.cpp ($VERSION, cuda $cuda): built $targets in $((SECONDS - t0)) s" \
    "into $prefix/bin" >&2
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  build)
    shift
    [ $# -ge 2 ] || { echo "usage: $0 build SRC PREFIX [TARGET...]" >&2; exit 2; }
    build "$@" ;;
  *) sed -n '2,17p' "$0" >&2; exit 2 ;;
esac
