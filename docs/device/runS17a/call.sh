#!/bin/bash
# session 17 call 1: v8i (vecinfer_version 9, kernels/cuda/vecinfer_int8_lut.cuh), v8z with
# int8 lut scores on the int8 tensor cores, beside v8z (-hk: the runtime's dispatch and books)
# and sdpa on the 8B shape; decode_check of the v8i variants against the int8-lut reference
# (each line also gives the distance to the exact lut); the kernel's registers, spills and
# local-memory instructions; cuda_decode_attention_test (its *_v8i reference cases) from
#   STRIP=1 XZ_OPT="-6 -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s17a/bundle.tar.xz \
#     cuda_decode_attention_test
# (v8i was not kept: to rerun, `git apply docs/device/runS17a/v8i_int8_lut.patch` on 9cba68d
# first, then build and bundle.) run with carry [".devbuild/s17a"]: bash docs/device/runS17a/call.sh
export OUT=${OUT:-/tmp/out}
SNAP=. DIR=.devbuild/s17a \
CHECKS="--long --only vecinfer-k2v2-v8i,vecinfer-k2v2-v8i-ph,vecinfer-k2v2-v8ih,vecinfer-k2v2-v8ihk,vecinfer-k2v2-v8z" \
GTESTS="cuda_decode_attention_test" \
BENCH_KERNELS=vecinfer-k2v2-hk,vecinfer-k2v2-v8ihk \
BENCH_SIZES=1x8192,1x131072,8x32768,16x32768,32x32768 timeout 480 bash bench/cuda/run_kernel_bundle_on_device.sh
cp /tmp/bench.log $OUT/bench.log 2>/dev/null
K=$(cuobjdump -symbols /tmp/build-snap/decode_check 2>/dev/null | grep -o "_ZN[^ ]*VecInferV8DecodeKernelILi128ELNS1_11ValueGatherE2ELb1ELi4ELi4ELb[01]E[^ ]*" | sort -u)
for k in $K; do
  cuobjdump -sass -fun "$k" /tmp/build-snap/decode_check > /tmp/k.sass 2>/dev/null
  echo "$k: $(wc -l < /tmp/k.sass) lines, $(grep -c 'LDL\|STL' /tmp/k.sass) local, $(grep -c IMMA /tmp/k.sass) imma, $(grep -c HMMA /tmp/k.sass) hmma"
  grep -n "LDL\|STL" /tmp/k.sass | head -12
done > $OUT/sass.log 2>&1
cat $OUT/sass.log | cut -c1-200
grep -E "error|spill" /tmp/build.log | grep -i "v8\|spill" | head -10
