#!/bin/bash
# session 19 call 3: the launcher's key splits with the occupancy query fixed (the kernel's
# preferred carveout set to all shared memory first; runS19a-b chose one split wherever a block
# took over ~100 KB, i.e. at head_dim 128), for both tile shapes side by side:
#   prefill_bench_t32: c9143af's 32-token query tiles + the fix (worktree of c9143af, nvcc)
#   prefill_bench:     64-token query tiles (two m-tiles a warp) + the fix
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/s19c/bundle.tar.xz \
#     prefill_bench prefill_bench_t32 cuda_prefill_attention_test
# run with carry [".devbuild/s19c"]:
export OUT=${OUT:-/tmp/out}
DIR=.devbuild/s19c STEPS="check tests bench" REF_MAX=0 TESTS=cuda_prefill_attention_test \
  BENCH_BINS="prefill_bench_t32 prefill_bench" bash bench/cuda/run_prefill_on_device.sh
