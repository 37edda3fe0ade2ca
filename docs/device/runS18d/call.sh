#!/bin/bash
# session 18 call 4 (09218d9 + a try, not kept): the tile fill split in two, fp16 rows of the
# sink, ring and fp16 pages by cp.async before the tile before is computed, codes decoded after
# it with l2 prefetches of the pages two tiles ahead (prefill_bench), beside 09218d9's kernel
# (prefill_bench_v1) in the same call. bundle:
#   STRIP=1 XZ_OPT="-9e -T2" bash bench/cuda/bundle_binaries.sh build .devbuild/p3/bundle.tar.xz \
#     prefill_bench prefill_bench_v1 cuda_prefill_attention_test cuda_random_model_test cuda_e2e_prefill_bench
# run with carry [".devbuild/p3"]:
DIR=.devbuild/p3 STEPS="check tests bench e2e" REF_MAX=8192 BENCH_BINS="prefill_bench_v1 prefill_bench" \
  bash bench/cuda/run_prefill_on_device.sh
