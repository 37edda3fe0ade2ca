#ifndef VQSERVE_TESTS_UTIL_PREFILL_CASE_H_
#define VQSERVE_TESTS_UTIL_PREFILL_CASE_H_

// random inputs of one multi-token step's attention (the prefill kernels of
// kernels/cuda/prefill/prefill_attention.h and *_kv_step.h) in device memory, for gpu tests and
// benchmarks: every page byte is part of an fp16 value uniform in [-1, 1), which is a valid fp16
// row, kivi scale or commvq norm, and any byte is a valid code; random rings, sinks, step rows,
// queries and books. Launch runs a format's launcher with or without the planned query tiles
// (tiled: the tensor-core kernel; else the reference kernel).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/kv_step/commvq_kv_step.h"
#include "kernels/cuda/kv_step/kivi_kv_step.h"
#include "kernels/cuda/kv_step/paged_kv_step.h"
#include "kernels/cuda/prefill/prefill_attention.h"
#include "kernels/cuda/prefill/prefill_tiles.h"
#include "kernels/cuda/kv_step/vecinfer_kv_step.h"
#include "tests/util/decode_case.h"

namespace vqserve::testing {

enum class PrefillFormat { kFp16, kKivi, kVecInfer, kCommVq };

struct PrefillCaseSpec {
  PrefillFormat format = PrefillFormat::kFp16;
  int num_heads = 8, num_kv_heads = 2, head_dim = 128;
  std::vector<std::pair<int, int>> seqs;  // (tokens cached before the step, new tokens)
  int residual = 128;                     // coded formats' residual window (fp16: 0)
  int sink_tokens = 0;                    // coded formats: whole pages
  int kivi_bits = 2;
  int vq_k_sub_dim = 4, vq_v_sub_dim = 4;
  int commvq_rounds = 5, commvq_value_rounds = 1;
  uint64_t seed = 1;
};

class DevicePrefillCase {
 public:
  explicit DevicePrefillCase(const PrefillCaseSpec& spec) : spec_(spec) {
    const int H = spec.num_kv_heads, D = spec.head_dim, P = cuda::kPrefillTileTokens;
    std::mt19937_64 rng(spec.seed);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::normal_distribution<float> nrm(0.0f, 1.0f);
    const bool fp16 = spec.format == PrefillFormat::kFp16;
    residual_ = fp16 ? 0 : spec.residual;
    layer_bytes_ = static_cast<int64_t>(4) * H * P * D;  // fp16's slice, the largest of the formats
    batch_ = static_cast<int>(spec.seqs.size());
    // step tokens, sequences, pages (shuffled ids) and the tables.
    int pages = 0, stride = 1;
    for (auto [cached, fresh] : spec.seqs) {
      const int n = (cached + fresh + P - 1) / P;
      pages += n;
      stride = std::max(stride, n);
    }
    std::vector<int32_t> ids(pages);
    for (int i = 0; i < pages; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    h_tables_.assign(static_cast<size_t>(batch_) * stride, 0);
    int next = 0;
    for (int b = 0; b < batch_; ++b) {
      const auto [cached, fresh] = spec.seqs[b];
      first_.push_back(static_cast<int32_t>(tok_seq_.size()));
      cached_.push_back(cached);
      fresh_.push_back(fresh);
      slots_.push_back(batch_ - 1 - b);
      const int total = cached + fresh;
      max_len_ = std::max(max_len_, total);
      coded_after_.push_back(cuda::PrefillCodedTokens(residual_, P, total));
      for (int i = 0; i < fresh; ++i) {
        tok_seq_.push_back(b);
        tok_pos_.push_back(cached + i);
      }
      for (int i = 0; i < (total + P - 1) / P; ++i)
        h_tables_[static_cast<size_t>(b) * stride + i] = ids[next++];
    }
    n_ = static_cast<int>(tok_seq_.size());
    stride_ = stride;
    num_pages_ = pages;
    // two layers a page; layer 1 is attended.
    h_pages_.resize(static_cast<size_t>(pages) * 2 * layer_bytes_ / 2);
    for (uint16_t& x : h_pages_) x = FloatToHalfBits(uni(rng));
    ring_tokens_ = fp16 ? P : residual_ + P;
    h_ring_k_ = RandomHalves(static_cast<size_t>(batch_) * ring_tokens_ * H * D, rng);
    h_ring_v_ = RandomHalves(h_ring_k_.size(), rng);
    const int sink = fp16 ? 0 : spec.sink_tokens;
    sink_k_ = Upload(RandomHalves(static_cast<size_t>(batch_) * std::max(sink, 1) * H * D, rng));
    sink_v_ = Upload(RandomHalves(static_cast<size_t>(batch_) * std::max(sink, 1) * H * D, rng));
    h_q_ = RandomFloats(static_cast<size_t>(n_) * spec.num_heads * D, nrm, rng);
    qc_ = Upload(RandomFloats(h_q_.size(), nrm, rng));
    knew_ = Upload(RandomFloats(static_cast<size_t>(n_) * H * D, nrm, rng));
    vnew_ = Upload(RandomFloats(static_cast<size_t>(n_) * H * D, nrm, rng));
    q_ = Upload(h_q_);
    out_ = Alloc<float>(h_q_.size());
    work_floats_ = cuda::PrefillWorkFloats(n_, spec.num_heads, D, cuda::kMaxPrefillSplits);
    work_ = Alloc<float>(static_cast<size_t>(work_floats_));
    std::vector<int32_t> meta = tok_seq_;
    for (const std::vector<int32_t>* v :
         {&tok_pos_, &slots_, &cached_, &coded_after_, &h_tables_, &first_}) {
      meta.insert(meta.end(), v->begin(), v->end());
    }
    tiles_host_ = cuda::PlanPrefillTiles(first_, cached_, fresh_, residual_, P);
    meta.insert(meta.end(), tiles_host_.begin(), tiles_host_.end());
    meta_ = Upload(meta);
    pages_ = reinterpret_cast<uint8_t*>(Upload(h_pages_));
    ring_k_ = Upload(h_ring_k_);
    ring_v_ = Upload(h_ring_v_);
    // books: vecinfer centroids, commvq key / value books and rope frequencies.
    const int dk = spec.vq_k_sub_dim, dv = spec.vq_v_sub_dim;
    if (spec.format == PrefillFormat::kVecInfer) {
      k_book_ = Upload(RandomFloats(static_cast<size_t>(D / dk) * 256 * dk, nrm, rng, 0.5f));
      v_book_ = Upload(RandomFloats(static_cast<size_t>(D / dv) * 256 * dv, nrm, rng, 0.5f));
    } else if (spec.format == PrefillFormat::kCommVq) {
      k_book_ =
          Upload(RandomFloats(static_cast<size_t>(spec.commvq_rounds) * 64 * D, nrm, rng, 0.1f));
      v_book_ = Upload(RandomFloats(
          static_cast<size_t>(spec.commvq_value_rounds) * (D / 8) * 256 * 8, nrm, rng, 0.5f));
      std::vector<float> freqs(D / 2);
      for (int j = 0; j < D / 2; ++j)
        freqs[j] = static_cast<float>(std::pow(10000.0, -2.0 * j / D));
      freqs_ = Upload(freqs);
    }
  }
  ~DevicePrefillCase() {
    for (void* p : owned_) cudaFree(p);
  }
  DevicePrefillCase(const DevicePrefillCase&) = delete;
  DevicePrefillCase& operator=(const DevicePrefillCase&) = delete;

  int num_tokens() const { return n_; }
  int num_tiles() const { return static_cast<int>(tiles_host_.size() / 2); }

  // the step's view; with `tiled` its query tiles are set, and `splits` key splits (0: the
  // launcher's choice).
  cuda::PagedKvStep Step(bool tiled, int splits = 0) const {
    const int32_t* d = meta_;
    cuda::PagedKvStep s;
    s.num_tokens = n_;
    s.tok_seq = d;
    s.tok_pos = d + n_;
    s.batch = batch_;
    s.slots = d + 2 * n_;
    s.num_cached = s.slots + batch_;
    s.coded_before = s.num_cached;  // read by no prefill kernel
    s.coded_after = s.num_cached + batch_;
    s.block_tables = s.coded_after + batch_;
    s.block_table_stride = stride_;
    if (tiled) {
      s.q_tiles = s.block_tables + static_cast<size_t>(batch_) * stride_ + batch_;
      s.num_q_tiles = num_tiles();
      s.max_seq_len = max_len_;
      s.prefill_work = work_;
      s.prefill_work_floats = work_floats_;
      s.prefill_splits = splits;
    }
    s.pages = pages_;
    s.page_stride = 2 * layer_bytes_;
    s.layer_offset = layer_bytes_;
    s.page_tokens = cuda::kPrefillTileTokens;
    s.ring_k = ring_k_;
    s.ring_v = ring_v_;
    s.ring_slot_stride = static_cast<int64_t>(ring_tokens_) * spec_.num_kv_heads * spec_.head_dim;
    s.ring_tokens = ring_tokens_;
    s.num_kv_heads = spec_.num_kv_heads;
    s.head_dim = spec_.head_dim;
    if (spec_.format != PrefillFormat::kFp16) {
      s.sink_k = sink_k_;
      s.sink_v = sink_v_;
      s.sink_tokens = spec_.sink_tokens;
      s.sink_slot_stride = static_cast<int64_t>(std::max(spec_.sink_tokens, 1)) *
                           spec_.num_kv_heads * spec_.head_dim;
    }
    return s;
  }

  // the format's prefill launcher into the output (poisoned with NaN first); "" on success.
  std::string Launch(bool tiled, int splits = 0, cudaStream_t stream = nullptr) {
    if (cudaMemsetAsync(out_, 0xff, h_q_.size() * sizeof(float), stream) != cudaSuccess)
      return "memset";
    const cuda::PagedKvStep s = Step(tiled, splits);
    const int D = spec_.head_dim, nh = spec_.num_heads, H = spec_.num_kv_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    const int64_t qs = static_cast<int64_t>(nh) * D, kvs = static_cast<int64_t>(H) * D;
    const int32_t* starts = s.block_tables + static_cast<size_t>(batch_) * stride_;
    switch (spec_.format) {
      case PrefillFormat::kFp16:
        return cuda::LaunchPrefillAttention(s, q_, qs, out_, qs, nh, scale, stream);
      case PrefillFormat::kKivi:
        return cuda::LaunchKiviPrefillAttention(s, spec_.kivi_bits, residual_, q_, qs, knew_, vnew_,
                                                kvs, starts, out_, qs, nh, scale, stream);
      case PrefillFormat::kVecInfer: {
        cuda::VecInferLayerCodec c;
        c.k_codebook = k_book_;
        c.v_codebook = v_book_;
        c.k_sub_dim = spec_.vq_k_sub_dim;
        c.v_sub_dim = spec_.vq_v_sub_dim;
        return cuda::LaunchVecInferPrefillAttention(s, c, residual_, q_, qc_, qs, knew_, vnew_, kvs,
                                                    starts, out_, qs, nh, scale, stream);
      }
      case PrefillFormat::kCommVq: {
        cuda::CommVqLayerCodec c;
        c.key_books = k_book_;
        c.value_books = v_book_;
        c.key_rounds = spec_.commvq_rounds;
        c.value_rounds = spec_.commvq_value_rounds;
        c.rope_freqs = freqs_;
        return cuda::LaunchCommVqPrefillAttention(s, c, residual_, q_, qs, knew_, vnew_, kvs,
                                                  starts, out_, qs, nh, scale, stream);
      }
    }
    return "unknown format";
  }

  std::vector<float> Output() const {
    std::vector<float> h(h_q_.size());
    cudaMemcpy(h.data(), out_, h.size() * sizeof(float), cudaMemcpyDeviceToHost);
    return h;
  }

  // fp16 format only: causal attention in float64 from the host copies (pages below
  // coded_after, the ring above), (tokens, heads, D).
  std::vector<double> Fp16Reference() const {
    const int H = spec_.num_kv_heads, D = spec_.head_dim, nh = spec_.num_heads;
    std::vector<double> out(h_q_.size(), 0.0);
    for (int t = 0; t < n_; ++t) {
      const int b = tok_seq_[t], pos = tok_pos_[t];
      for (int h = 0; h < nh; ++h) {
        const int kvh = h / (nh / H);
        const float* q = h_q_.data() + (static_cast<size_t>(t) * nh + h) * D;
        std::vector<double> s(pos + 1);
        double mx = -1e300;
        for (int j = 0; j <= pos; ++j) {
          const uint16_t* k = KeyRow(b, kvh, j, false);
          double d = 0.0;
          for (int i = 0; i < D; ++i) d += static_cast<double>(q[i]) * HalfBitsToFloat(k[i]);
          s[j] = d / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[j]);
        }
        double l = 0.0;
        double* o = out.data() + (static_cast<size_t>(t) * nh + h) * D;
        for (int j = 0; j <= pos; ++j) {
          const double p = std::exp(s[j] - mx);
          l += p;
          const uint16_t* v = KeyRow(b, kvh, j, true);
          for (int i = 0; i < D; ++i) o[i] += p * HalfBitsToFloat(v[i]);
        }
        for (int i = 0; i < D; ++i) o[i] /= l;
      }
    }
    return out;
  }

 private:
  // fp16 format: key (or value) row of position j of sequence b, kv head kvh.
  const uint16_t* KeyRow(int b, int kvh, int j, bool value) const {
    const int H = spec_.num_kv_heads, D = spec_.head_dim, P = cuda::kPrefillTileTokens;
    if (j < coded_after_[b]) {
      const int64_t page = h_tables_[static_cast<size_t>(b) * stride_ + j / P];
      const int64_t at = (page * 2 * layer_bytes_ + layer_bytes_) / 2 +
                         ((value ? static_cast<int64_t>(H) * P * D : 0) +
                          (static_cast<int64_t>(kvh) * P + j % P) * D);
      return h_pages_.data() + at;
    }
    const std::vector<uint16_t>& ring = value ? h_ring_v_ : h_ring_k_;
    return ring.data() +
           ((static_cast<size_t>(slots_[b]) * ring_tokens_ + j % ring_tokens_) * H + kvh) * D;
  }
  template <class T>
  T* Alloc(size_t n) {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) std::abort();
    owned_.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  T* Upload(const std::vector<T>& h) {
    T* d = Alloc<T>(h.size());
    cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
    return d;
  }
  static std::vector<uint16_t> RandomHalves(size_t n, std::mt19937_64& rng) {
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::vector<uint16_t> h(n);
    for (uint16_t& x : h) x = FloatToHalfBits(uni(rng));
    return h;
  }
  static std::vector<float> RandomFloats(size_t n, std::normal_distribution<float>& nrm,
                                         std::mt19937_64& rng, float scale = 1.0f) {
    std::vector<float> h(n);
    for (float& x : h) x = nrm(rng) * scale;
    return h;
  }

  PrefillCaseSpec spec_;
  int residual_ = 0, batch_ = 0, n_ = 0, stride_ = 1, num_pages_ = 0, ring_tokens_ = 32;
  int max_len_ = 0;
  int64_t layer_bytes_ = 0, work_floats_ = 0;
  std::vector<int32_t> tok_seq_, tok_pos_, slots_, cached_, fresh_, coded_after_, h_tables_, first_,
      tiles_host_;
  std::vector<uint16_t> h_pages_, h_ring_k_, h_ring_v_;
  std::vector<float> h_q_;
  std::vector<void*> owned_;
  int32_t* meta_ = nullptr;
  uint8_t* pages_ = nullptr;
  uint16_t *ring_k_ = nullptr, *ring_v_ = nullptr, *sink_k_ = nullptr, *sink_v_ = nullptr;
  float *q_ = nullptr, *qc_ = nullptr, *knew_ = nullptr, *vnew_ = nullptr, *out_ = nullptr;
  float *k_book_ = nullptr, *v_book_ = nullptr, *freqs_ = nullptr, *work_ = nullptr;
};

// max over rows of |a - b| / |b| (rows of `width`), and the overall relative l2 error.
struct PrefillError {
  double rel_l2 = 0.0, worst_row = 0.0;
  int64_t nonfinite = 0;
};
template <class A, class B>
PrefillError ComparePrefill(const std::vector<A>& got, const std::vector<B>& ref, int width) {
  PrefillError e;
  double num = 0.0, den = 0.0;
  for (size_t r = 0; r * width < got.size(); ++r) {
    double rn = 0.0, rd = 0.0;
    for (int i = 0; i < width; ++i) {
      const double g = static_cast<double>(got[r * width + i]),
                   f = static_cast<double>(ref[r * width + i]);
      if (!std::isfinite(g)) ++e.nonfinite;
      rn += (g - f) * (g - f);
      rd += f * f;
    }
    num += rn;
    den += rd;
    e.worst_row = std::max(e.worst_row, std::sqrt(rn / std::max(rd, 1e-30)));
  }
  e.rel_l2 = std::sqrt(num / std::max(den, 1e-30));
  return e;
}

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_PREFILL_CASE_H_
