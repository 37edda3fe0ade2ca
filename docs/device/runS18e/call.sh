#!/bin/bash
# session 18 call 5 (09218d9 + a second try, not kept): runS18d's split without the l2
# prefetches and with the codes decoded before the tile before is computed (cp.async for the
# fp16 rows only), beside 09218d9's kernel (prefill_bench_v1) in the same call. bundle as
# runS18d's (.devbuild/p4); run with carry [".devbuild/p4"]:
DIR=.devbuild/p4 STEPS="check tests bench e2e" REF_MAX=0 BENCH_BINS="prefill_bench_v1 prefill_bench" \
  E2E_ARGS="--ref-max 2048" bash bench/cuda/run_prefill_on_device.sh
# cp_async_fp16_rows.patch (against 09218d9): this try, restricted to readers of fp16 rows (the
# fp16 cache) so that decoding readers keep 09218d9's fill; written after the last call, not run.
