// correctness sweep of the cuda decode-attention kernels against the float64 reference
// (tests/util/decode_reference.h) on random pages: formats x head_dim x gqa x lengths x splits.
// prints one line per case and exits non-zero when any relative error exceeds 1e-3 (and, for
// the fp16 value books, when the output differs from the same launch without them by > 1e-6).
// commvq (commvq-1 / commvq-2 round counts for head_dim 64 and 128) is checked against the
// float64 decode-then-attend of bench/cuda/commvq_case.h over the same sweep.
// usage: decode_check [--long] [--commvq-only | --vecinfer-only | --kivi-only] [--only A,B]
// (--long adds 128k-token sequences; --vecinfer-only / --kivi-only: those variants alone, no
// commvq; --only: the variants named, no commvq or sink cross-check)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bench/cuda/commvq_case.h"
#include "bench/cuda/device_case.h"
#include "kernels/cuda/decode_attention.h"
#include "tests/util/decode_case.h"
#include "tests/util/decode_reference.h"

namespace vqserve::testing {
namespace {

struct Variant {
  const char* name;
  DecodeFormat format;
  int kivi_bits, dk, dv, residual;
  bool per_head;
  int vecinfer_version = 0;  // DecodeAttentionParams::vecinfer_version (1 v4 lut, 2 v5, 3 v6, 4 v7, 5 v7r, 6 v8, 7 v8q, 8 v8z)
  int fp16_version = 0;      // 1: the element-wise fp16 kernel instead of the staged one
  int kivi_version = 0;      // 1: the element-wise kivi kernel instead of the staged one
  int k_code_bits = 8, v_code_bits = 8;  // vecinfer code widths (12: the generic kernel)
  int half_books = 0;  // fp16 book copies (vecinfer_half_books.h): 1 values, 2 keys + values
};

// launches the case's kernel into a poisoned output and returns it (empty + *err on an error).
std::vector<float> LaunchCase(DecodeFormat f, DeviceDecodeCase* dev, std::string* err) {
  dev->PoisonOutput();
  *err = cuda::LaunchDecodeAttention(ToKernelFormat(f), dev->params(), nullptr);
  VQ_CUDA_CHECK(cudaDeviceSynchronize());
  return err->empty() ? dev->Output() : std::vector<float>();
}

// with half books set: runs the same case without them and returns ||out - out0|| / ||out0||
// (0 when bitwise equal), *ndiff = elements whose bits differ; 0 without half books.
double DiffWithoutHalfBooks(DecodeFormat f, const std::vector<float>& out, DeviceDecodeCase* dev, int* ndiff) {
  *ndiff = 0;
  cuda::DecodeAttentionParams& p = dev->params();
  if (p.vq_v_codebook_f16 == nullptr || out.empty()) return 0.0;
  const uint16_t* hk = p.vq_k_codebook_f16;
  const uint16_t* hv = p.vq_v_codebook_f16;
  p.vq_k_codebook_f16 = nullptr;
  p.vq_v_codebook_f16 = nullptr;
  std::string err;
  const std::vector<float> out0 = LaunchCase(f, dev, &err);
  p.vq_k_codebook_f16 = hk;
  p.vq_v_codebook_f16 = hv;
  if (!err.empty()) return INFINITY;
  for (size_t i = 0; i < out.size(); ++i) *ndiff += std::memcmp(&out[i], &out0[i], 4) != 0;
  return RelativeError(out, std::vector<double>(out0.begin(), out0.end()));
}

// commvq-1 / commvq-2 key and value rounds for head_dim d (CommVqOptionsForName): R =
// round(bits * d / 12), Rv = bits.
CommVqCaseSpec CommVqSpec(int bits, int d) {
  CommVqCaseSpec s;
  s.head_dim = d;
  s.key_rounds = static_cast<int>(std::lround(bits * d / 12.0));
  s.value_rounds = bits;
  s.book_key_rounds = static_cast<int>(std::lround(2 * d / 12.0));
  s.book_value_rounds = 2;
  return s;
}

// one commvq case: launch (commvq_version `version`), compare; returns the relative error (inf
// on a launch error).
double CheckCommVq(const CommVqCaseSpec& s, int splits, int version, std::string* err) {
  DecodeCase c = MakeCommVqCase(s);
  DeviceDecodeCase dev(c);
  SetCommVqParams(s, &dev.params());
  dev.params().num_splits = splits;
  dev.params().commvq_version = version;
  dev.PoisonOutput();
  *err = cuda::LaunchDecodeAttention(cuda::KvPageFormat::kCommVq, dev.params(), nullptr);
  VQ_CUDA_CHECK(cudaDeviceSynchronize());
  return err->empty() ? RelativeError(dev.Output(), ReferenceCommVq(c, s)) : INFINITY;
}

int RunCommVq(bool with_long, int* cases, double* worst) {
  const std::vector<int> lens = {1, 31, 33, 129, 161, 200, 1000, 4133};
  int failures = 0;
  uint64_t seed = 1000;
  for (int bits : {1, 2}) {
    for (int d : {64, 128}) {
      for (int g : {1, 3, 4, 8}) {
        for (int splits : {0, 1, 7}) {
          for (int version : {0, 1}) {  // the default (warp kernel where it applies), the cluster kernel
            CommVqCaseSpec s = CommVqSpec(bits, d);
            s.num_kv_heads = 2;
            s.num_heads = 2 * g;
            s.lens = lens;
            s.seed = ++seed;
            std::string err;
            const double rel = CheckCommVq(s, splits, version, &err);
            const bool ok = rel <= 1e-3;
            ++*cases;
            failures += !ok;
            if (rel > *worst) *worst = rel;
            if (!ok || splits == 0) {
              std::printf("commvq-%d (R=%2d Rv=%d) v%d D=%3d G=%d splits=%d rel_err=%.3e %s %s\n", bits, s.key_rounds,
                          s.value_rounds, version, d, g, splits, rel, ok ? "ok" : "FAIL", err.c_str());
            }
          }
        }
      }
      if (with_long) {
        CommVqCaseSpec s = CommVqSpec(bits, d);
        s.num_kv_heads = 2;
        s.num_heads = 8;
        s.lens = {131072 + 77, 5, 4133};
        s.seed = ++seed;
        std::string err;
        const double rel = CheckCommVq(s, 0, 0, &err);
        const bool ok = rel <= 1e-3;
        ++*cases;
        failures += !ok;
        if (rel > *worst) *worst = rel;
        std::printf("commvq-%d (R=%2d Rv=%d)    D=%3d G=4 len=131149 rel_err=%.3e %s %s\n", bits, s.key_rounds,
                    s.value_rounds, d, rel, ok ? "ok" : "FAIL", err.c_str());
      }
    }
  }
  return failures;
}

// the float64 reference has no attention sink: cross-checks the sink path of v8 (its own
// block-parallel residual) against v7's (ResidualPartial) on random fp16 sink rows. returns the
// failures (relative difference > 1e-4).
int RunSinkCrossCheck(int* cases, double* worst) {
  int failures = 0;
  uint64_t seed = 5000;
  for (int g : {1, 4}) {
    for (int n_sink : {1, 4, 37, 64}) {
      DecodeCaseSpec s;
      s.format = DecodeFormat::kVecInfer;
      s.num_kv_heads = 2;
      s.num_heads = 2 * g;
      s.head_dim = 128;
      s.lens = {1, 33, 200, 1000, 4133};
      s.residual_tokens = 128;
      s.vq_k_sub_dim = 4;
      s.vq_v_sub_dim = 4;
      s.seed = ++seed;
      DecodeCase c = MakeDecodeCase(s);
      DeviceDecodeCase dev(c);
      cuda::DecodeAttentionParams& p = dev.params();
      int max_slot = 0;
      for (int sl : c.slots) max_slot = sl > max_slot ? sl : max_slot;
      p.sink_slot_stride = static_cast<int64_t>(n_sink) * p.res_token_stride;
      const size_t elems = static_cast<size_t>(max_slot + 1) * p.sink_slot_stride;
      std::vector<uint16_t> hk(elems), hv(elems);
      uint64_t x = seed * 0x9e3779b97f4a7c15ull;
      for (size_t i = 0; i < elems; ++i) {  // fp16 in [-2, 2): sign, exponent 13..15, mantissa
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        hk[i] = static_cast<uint16_t>(((x >> 20) & 0x8000) | ((13 + (x >> 40) % 3) << 10) | ((x >> 8) & 0x3FF));
        hv[i] = static_cast<uint16_t>(((x >> 21) & 0x8000) | ((13 + (x >> 44) % 3) << 10) | ((x >> 30) & 0x3FF));
      }
      std::vector<int32_t> sink_lens(c.batch, n_sink);
      uint16_t *dk, *dvv;
      int32_t* dl;
      VQ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dk), elems * 2));
      VQ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dvv), elems * 2));
      VQ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dl), c.batch * 4));
      VQ_CUDA_CHECK(cudaMemcpy(dk, hk.data(), elems * 2, cudaMemcpyHostToDevice));
      VQ_CUDA_CHECK(cudaMemcpy(dvv, hv.data(), elems * 2, cudaMemcpyHostToDevice));
      VQ_CUDA_CHECK(cudaMemcpy(dl, sink_lens.data(), c.batch * 4, cudaMemcpyHostToDevice));
      p.sink_k = dk;
      p.sink_v = dvv;
      p.sink_lens = dl;
      std::vector<float> out[2];
      std::string err;
      for (int k = 0; k < 2 && err.empty(); ++k) {
        p.vecinfer_version = k == 0 ? 4 : 6;
        dev.PoisonOutput();
        err = cuda::LaunchDecodeAttention(cuda::KvPageFormat::kVecInfer, p, nullptr);
        VQ_CUDA_CHECK(cudaDeviceSynchronize());
        out[k] = dev.Output();
      }
      double rel = INFINITY;
      if (err.empty()) {
        std::vector<double> ref(out[0].begin(), out[0].end());
        rel = RelativeError(out[1], ref);
      }
      const bool ok = rel <= 1e-4;
      ++*cases;
      failures += !ok;
      if (rel > *worst) *worst = rel;
      std::printf("vecinfer-k2v2-v8 sink vs v7 G=%d sink=%2d rel_diff=%.3e %s %s\n", g, n_sink, rel,
                  ok ? "ok" : "FAIL", err.c_str());
      VQ_CUDA_CHECK(cudaFree(dk));
      VQ_CUDA_CHECK(cudaFree(dvv));
      VQ_CUDA_CHECK(cudaFree(dl));
    }
  }
  return failures;
}

// the case of variant v: 2 kv heads, `heads` query heads of head_dim d, sequences of `lens`.
DecodeCaseSpec VariantSpec(const Variant& v, int heads, int d, std::vector<int> lens,
                           uint64_t seed) {
  DecodeCaseSpec s;
  s.format = v.format;
  s.num_kv_heads = 2;
  s.num_heads = heads;
  s.head_dim = d;
  s.lens = std::move(lens);
  s.residual_tokens = v.residual;
  s.kivi_bits = v.kivi_bits;
  s.vq_k_sub_dim = v.dk;
  s.vq_v_sub_dim = v.dv;
  s.vq_per_head = v.per_head;
  s.vq_k_code_bits = v.k_code_bits;
  s.vq_v_code_bits = v.v_code_bits;
  s.seed = seed;
  return s;
}

struct CaseOutcome {
  double rel = 0;   // relative error against the float64 reference
  double diff = 0;  // with fp16 books: relative difference to the run without them
  int ndiff = 0;    // ... and how many floats differ
  bool ok = false;
  std::string err;  // the launch's error, if any
};

// runs variant v on spec s with `splits` (0: chosen) and checks it.
CaseOutcome RunVariantCase(const Variant& v, const DecodeCaseSpec& s, int splits) {
  DecodeCase c = MakeDecodeCase(s);
  DeviceDecodeCase dev(c);
  dev.params().num_splits = splits;
  dev.params().vecinfer_version = v.vecinfer_version;
  dev.params().fp16_version = v.fp16_version;
  dev.params().kivi_version = v.kivi_version;
  if (v.half_books) dev.UploadHalfBooks(v.half_books == 2);
  CaseOutcome o;
  const std::vector<float> out = LaunchCase(s.format, &dev, &o.err);
  o.rel = o.err.empty() ? RelativeError(out, ReferenceDecodeAttention(c)) : INFINITY;
  o.diff = DiffWithoutHalfBooks(s.format, out, &dev, &o.ndiff);
  o.ok = o.rel <= 1e-3 && (v.half_books != 1 || o.diff <= 1e-6);
  return o;
}

// only: variant names to run (none: all); with names, commvq and the sink cross-check are left out.
int Run(bool with_long, bool commvq_only, bool vecinfer_only, bool kivi_only,
        const std::vector<std::string>& only) {
  const Variant variants[] = {
      {"fp16", DecodeFormat::kFp16, 2, 4, 4, 0, false},
      {"fp16-ring", DecodeFormat::kFp16, 2, 4, 4, 128, false},
      {"fp16-v1", DecodeFormat::kFp16, 2, 4, 4, 0, false, 0, 1},
      {"kivi-k2v2", DecodeFormat::kKivi, 2, 4, 4, 128, false},
      {"kivi-k4v4", DecodeFormat::kKivi, 4, 4, 4, 128, false},
      {"kivi-k2v2-noring", DecodeFormat::kKivi, 2, 4, 4, 0, false},
      {"kivi-k4v4-noring", DecodeFormat::kKivi, 4, 4, 4, 0, false},
      {"kivi-k2v2-v1", DecodeFormat::kKivi, 2, 4, 4, 128, false, 0, 0, 1},
      {"kivi-k4v4-v1", DecodeFormat::kKivi, 4, 4, 4, 128, false, 0, 0, 1},
      {"vecinfer-k2v2", DecodeFormat::kVecInfer, 2, 4, 4, 128, false},
      {"vecinfer-k2v2-perhead", DecodeFormat::kVecInfer, 2, 4, 4, 128, true},
      {"vecinfer-k2v2-lut", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 1},
      {"vecinfer-k2v2-mmakeys", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 2},
      {"vecinfer-k2v2-mmakeys-ph", DecodeFormat::kVecInfer, 2, 4, 4, 128, true, 2},
      {"vecinfer-k2v2-v6", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 3},
      {"vecinfer-k2v2-v7", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 4},
      {"vecinfer-k2v2-v7-ph", DecodeFormat::kVecInfer, 2, 4, 4, 128, true, 4},
      {"vecinfer-k2v2-v7r", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 5},
      {"vecinfer-k2v2-v7r-ph", DecodeFormat::kVecInfer, 2, 4, 4, 128, true, 5},
      {"vecinfer-k2v2-v8", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 6},
      {"vecinfer-k2v2-v8-ph", DecodeFormat::kVecInfer, 2, 4, 4, 128, true, 6},
      {"vecinfer-k2v2-v8h", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 6, 0, 0, 8, 8, 1},
      {"vecinfer-k2v2-v8h-ph", DecodeFormat::kVecInfer, 2, 4, 4, 128, true, 6, 0, 0, 8, 8, 1},
      {"vecinfer-k2v2-h", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 0, 0, 0, 8, 8, 1},
      {"vecinfer-k2v2-hk", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 0, 0, 0, 8, 8, 2},
      {"vecinfer-k2v2-v8hk", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 6, 0, 0, 8, 8, 2},
      {"vecinfer-k2v2-v8q", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 7},
      {"vecinfer-k2v2-v8q-ph", DecodeFormat::kVecInfer, 2, 4, 4, 128, true, 7},
      {"vecinfer-k2v2-v8qhk", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 7, 0, 0, 8, 8, 2},
      {"vecinfer-k2v2-v8z", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 8},
      {"vecinfer-k2v2-v8z-ph", DecodeFormat::kVecInfer, 2, 4, 4, 128, true, 8},
      {"vecinfer-k2v2-v8zhk", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 8, 0, 0, 8, 8, 2},
      {"vecinfer-k4v4", DecodeFormat::kVecInfer, 2, 2, 2, 128, false},
      {"vecinfer-k1v1", DecodeFormat::kVecInfer, 2, 8, 8, 128, false},
      {"vecinfer-k2v1", DecodeFormat::kVecInfer, 2, 4, 8, 128, false},
      // v8's lean loop with 8-dim sub-vectors (version 8, as the default; v8z's at head_dim 128):
      // -h / -hk with fp16 books (-h: values only, equal to the fp32 books' run to 1e-6).
      {"vecinfer-k1v1-v8z", DecodeFormat::kVecInfer, 2, 8, 8, 128, false, 8},
      {"vecinfer-k2v1-v8z", DecodeFormat::kVecInfer, 2, 4, 8, 128, false, 8},
      {"vecinfer-k1v1-v8z-ph", DecodeFormat::kVecInfer, 2, 8, 8, 128, true, 8},
      {"vecinfer-k2v1-v8z-ph", DecodeFormat::kVecInfer, 2, 4, 8, 128, true, 8},
      {"vecinfer-k1v1-v8zh", DecodeFormat::kVecInfer, 2, 8, 8, 128, false, 8, 0, 0, 8, 8, 1},
      {"vecinfer-k2v1-v8zh", DecodeFormat::kVecInfer, 2, 4, 8, 128, false, 8, 0, 0, 8, 8, 1},
      {"vecinfer-k1v1-v8zhk", DecodeFormat::kVecInfer, 2, 8, 8, 128, false, 8, 0, 0, 8, 8, 2},
      {"vecinfer-k2v1-v8zhk-ph", DecodeFormat::kVecInfer, 2, 4, 8, 128, true, 8, 0, 0, 8, 8, 2},
      // the generic kernel: 12-bit codes, and an 8-bit pair the lut kernels do not take.
      {"vecinfer-k3v3", DecodeFormat::kVecInfer, 2, 4, 4, 128, false, 0, 0, 0, 12, 12},
      {"vecinfer-k1.5v1.5", DecodeFormat::kVecInfer, 2, 8, 8, 128, false, 0, 0, 0, 12, 12},
      {"vecinfer-k1.5v1.5-ph", DecodeFormat::kVecInfer, 2, 8, 8, 128, true, 0, 0, 0, 12, 12},
      {"vecinfer-k2v1.5", DecodeFormat::kVecInfer, 2, 4, 8, 128, false, 0, 0, 0, 8, 12},
      {"vecinfer-k4v2", DecodeFormat::kVecInfer, 2, 2, 4, 128, false},
  };
  for (const std::string& name : only) {  // a misspelt name would otherwise pass with 0 cases
    if (std::none_of(std::begin(variants), std::end(variants), [&](const Variant& v) { return name == v.name; })) {
      std::printf("decode_check: --only: no variant named '%s'\n", name.c_str());
      return 2;
    }
  }
  const std::vector<int> lens = {1, 31, 33, 129, 161, 200, 1000, 4133};
  int failures = 0, cases = 0;
  double worst = 0;
  uint64_t seed = 7;
  if (!vecinfer_only && !kivi_only && only.empty()) failures += RunCommVq(with_long, &cases, &worst);
  for (const Variant& v : variants) {
    if (commvq_only) break;
    if (vecinfer_only && v.format != DecodeFormat::kVecInfer) continue;
    if (kivi_only && v.format != DecodeFormat::kKivi) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), v.name) == only.end()) continue;
    for (int d : {64, 128}) {
      for (int g : {1, 3, 4, 8}) {
        for (int splits : {0, 1, 7}) {
          const CaseOutcome o = RunVariantCase(v, VariantSpec(v, 2 * g, d, lens, ++seed), splits);
          const double rel = o.rel;
          const bool ok = o.ok;
          ++cases;
          failures += !ok;
          if (rel > worst) worst = rel;
          if (!ok || splits == 0 || (v.half_books && o.ndiff > 0)) {
            std::printf("%-22s D=%3d G=%d splits=%d rel_err=%.3e %s %s", v.name, d, g, splits, rel,
                        ok ? "ok" : "FAIL", o.err.c_str());
            if (v.half_books) std::printf(" vs-fp32-books: %d elems differ, rel %.3e", o.ndiff, o.diff);
            std::printf("\n");
          }
        }
      }
    }
    // 131149 tokens: head_dim 128 with 4 query heads per kv head, 64 with 3 (the default model).
    for (int d = 128; with_long && d >= 64; d -= 64) {
      const int g = d == 128 ? 4 : 3;
      const CaseOutcome o = RunVariantCase(v, VariantSpec(v, 2 * g, d, {131072 + 77, 5}, ++seed), 0);
      const double rel = o.rel;
      const bool ok = o.ok;
      ++cases;
      failures += !ok;
      if (rel > worst) worst = rel;
      std::printf("%-22s D=%3d G=%d len=131149 rel_err=%.3e %s %s", v.name, d, g, rel, ok ? "ok" : "FAIL", o.err.c_str());
      if (v.half_books) std::printf(" vs-fp32-books: %d elems differ, rel %.3e", o.ndiff, o.diff);
      std::printf("\n");
    }
  }
  if (!commvq_only && !kivi_only && only.empty()) failures += RunSinkCrossCheck(&cases, &worst);
  std::printf("decode_check: %d cases, %d failures, worst relative error %.3e\n", cases, failures, worst);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace vqserve::testing

int main(int argc, char** argv) {
  bool with_long = false, commvq_only = false, vecinfer_only = false, kivi_only = false;
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    with_long |= std::strcmp(argv[i], "--long") == 0;
    commvq_only |= std::strcmp(argv[i], "--commvq-only") == 0;
    vecinfer_only |= std::strcmp(argv[i], "--vecinfer-only") == 0;
    kivi_only |= std::strcmp(argv[i], "--kivi-only") == 0;
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      for (const char* p = argv[++i]; *p != '\0';) {
        const char* e = std::strchr(p, ',');
        only.emplace_back(p, e == nullptr ? std::strlen(p) : size_t(e - p));
        p = e == nullptr ? p + std::strlen(p) : e + 1;
      }
    }
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("decode_check: no cuda device\n");
    return 2;
  }
  return vqserve::testing::Run(with_long, commvq_only, vecinfer_only, kivi_only, only);
}
