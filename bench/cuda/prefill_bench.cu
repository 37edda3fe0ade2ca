// the multi-token (prefill) attention kernels on the gpu: the tensor-core kernel
// (kernels/cuda/prefill/tiled_prefill.cuh) beside the reference kernels (one warp per token and head),
// on random steps of every page format (tests/util/prefill_case.h).
//   prefill_bench --check   the sweep of tests/cuda_prefill_attention_test.cc without gtest:
//                           tiled (the launcher's key splits, 1 and 3) vs reference (and fp16
//                           vs float64); exit 1 on a failure
//   prefill_bench --bench   one sequence's chunk of CHUNK (512) new tokens behind 0, 2K, 8K and
//                           32K cached tokens, Llama-3.1-8B (32 q / 8 kv heads, D 128) and
//                           SmolLM2-135M (9 / 3, D 64) attention shapes: median µs of each kernel
//                           (tiled with one key split and with the launcher's splits) and the
//                           tiled kernel's rate in TFLOP/s (4 D flops per query-key pair and
//                           head); the reference only up to REF_MAX cached tokens (8192);
//                           SPLITS > 0 forces that many key splits instead of the launcher's
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/cuda/gpu_timing.h"
#include "tests/util/prefill_case.h"

namespace vqserve {
namespace {

using testing::PrefillCaseSpec;
using testing::PrefillFormat;

struct Format {
  const char* name;
  PrefillFormat format;
  int kivi_bits, dk, dv;
};
const Format kFormats[] = {
    {"fp16", PrefillFormat::kFp16, 2, 4, 4},
    {"kivi2", PrefillFormat::kKivi, 2, 4, 4},
    {"kivi4", PrefillFormat::kKivi, 4, 4, 4},
    {"vecinfer_k2v2", PrefillFormat::kVecInfer, 2, 4, 4},
    {"vecinfer_k1v1", PrefillFormat::kVecInfer, 2, 8, 8},
    {"vecinfer_k4v2", PrefillFormat::kVecInfer, 2, 2, 4},
    {"commvq", PrefillFormat::kCommVq, 2, 4, 4},
};

PrefillCaseSpec Spec(const Format& f, int heads, int kv_heads, int d,
                     std::vector<std::pair<int, int>> seqs, int sink, uint64_t seed) {
  PrefillCaseSpec s;
  s.format = f.format;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.head_dim = d;
  s.seqs = std::move(seqs);
  s.sink_tokens = sink;
  s.kivi_bits = f.kivi_bits;
  s.vq_k_sub_dim = f.dk;
  s.vq_v_sub_dim = f.dv;
  s.commvq_rounds = d == 128 ? 11 : 5;  // commvq-1's key rounds
  s.seed = seed;
  return s;
}

int Check() {
  const std::vector<std::pair<int, int>> seqs = {{0, 37},  {100, 100}, {31, 33},
                                                 {500, 1}, {700, 300}, {0, 1}};
  int failures = 0, cases = 0;
  for (const Format& f : kFormats) {
    for (int d : {64, 128}) {
      for (int group : {1, 3, 4, 8}) {
        for (int sink : {0, 32}) {
          if (f.format == PrefillFormat::kFp16 && sink > 0) continue;
          testing::DevicePrefillCase c(
              Spec(f, 2 * group, 2, d, seqs, sink, 7 + d + 3 * group + sink));
          std::string err = c.Launch(false);
          VQ_CUDA_CHECK(cudaDeviceSynchronize());
          const std::vector<float> ref = c.Output();
          for (int splits : {0, 1, 3}) {  // 0: the launcher's choice
            if (err.empty()) err = c.Launch(true, splits);
            VQ_CUDA_CHECK(cudaDeviceSynchronize());
            const std::vector<float> got = c.Output();
            const testing::PrefillError e = testing::ComparePrefill(got, ref, d);
            double exact = 0.0;
            if (f.format == PrefillFormat::kFp16)
              exact = testing::ComparePrefill(got, c.Fp16Reference(), d).rel_l2;
            const bool ok = err.empty() && e.nonfinite == 0 && e.rel_l2 <= 2e-3 &&
                            e.worst_row <= 1e-2 && exact <= 2e-3;
            failures += !ok;
            ++cases;
            std::printf(
                "%s %-14s D=%3d G=%d sink=%2d tiles=%3d splits=%d: rel %.2e worst row %.2e%s%s\n",
                ok ? "ok  " : "FAIL", f.name, d, group, sink, c.num_tiles(), splits, e.rel_l2,
                e.worst_row,
                f.format == PrefillFormat::kFp16 ? (" vs float64 " + std::to_string(exact)).c_str()
                                                 : "",
                err.empty() ? "" : (" " + err).c_str());
          }
        }
      }
    }
  }
  std::printf("prefill check: %d cases, %d failures\n", cases, failures);
  return failures == 0 ? 0 : 1;
}

int Bench() {
  const int chunk = std::getenv("CHUNK") ? std::atoi(std::getenv("CHUNK")) : 512;
  const int ref_max = std::getenv("REF_MAX") ? std::atoi(std::getenv("REF_MAX")) : 8192;
  const int splits = std::getenv("SPLITS") ? std::atoi(std::getenv("SPLITS")) : 0;
  struct Shape {
    const char* name;
    int heads, kv_heads, d;
  };
  const Shape shapes[] = {{"llama8b", 32, 8, 128}, {"smollm2", 9, 3, 64}};
  std::printf(
      "| shape | format | cached | chunk | reference µs | tiled, 1 split µs | splits | tiled µs | "
      "splits' gain | speed-up | tiled TFLOP/s |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Shape& sh : shapes) {
    for (const Format& f : kFormats) {
      if (f.format == PrefillFormat::kKivi && f.kivi_bits == 4) continue;
      if (f.format == PrefillFormat::kVecInfer && f.dk != 4) continue;
      for (int cached : {0, 2048, 8192, 32256}) {
        const int sink = f.format == PrefillFormat::kFp16 ? 0 : 32;
        testing::DevicePrefillCase c(
            Spec(f, sh.heads, sh.kv_heads, sh.d, {{cached, chunk}}, sink, 3));
        // query-key pairs of the causal chunk, times heads
        const double pairs =
            (static_cast<double>(cached) * chunk + chunk * (chunk + 1) / 2.0) * sh.heads;
        const double flops = 4.0 * sh.d * pairs;
        double ref_us = -1.0;
        if (cached <= ref_max) {
          ref_us = 1e3 * bench::MedianEventMs(1, 3, [&](int) {
                     if (const std::string e = c.Launch(false); !e.empty()) std::abort();
                   });
        }
        const double one_us = 1e3 * bench::MedianEventMs(2, 10, [&](int) {
                                if (const std::string e = c.Launch(true, 1); !e.empty())
                                  std::abort();
                              });
        const double tiled_us = 1e3 * bench::MedianEventMs(2, 10, [&](int) {
                                  if (const std::string e = c.Launch(true, splits); !e.empty())
                                    std::abort();
                                });
        char ref[32] = "-", up[32] = "-";
        if (ref_us > 0) {
          std::snprintf(ref, sizeof(ref), "%.1f", ref_us);
          std::snprintf(up, sizeof(up), "%.1fx", ref_us / tiled_us);
        }
        std::printf("| %s | %s | %d | %d | %s | %.1f | %d | %.1f | %.2fx | %s | %.1f |\n",
                    sh.name, f.name, cached, chunk, ref, one_us, cuda::LastTiledPrefillSplits(),
                    tiled_us, one_us / tiled_us, up, flops / (tiled_us * 1e-6) / 1e12);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace vqserve

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no cuda device\n");
    return 0;
  }
  int rc = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--check") == 0) rc |= vqserve::Check();
    if (std::strcmp(argv[i], "--bench") == 0) rc |= vqserve::Bench();
  }
  return rc;
}
