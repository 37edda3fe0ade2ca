// cuda decode attention against (1) a float64 decode-then-attend of the documented page formats
// and (2) the cpu codecs themselves (pages written by their EncodePage, cpu AttendPages as the
// reference); commvq also on random pages up to 128k tokens against the cpu AttendPages.
// skips itself where there is no cuda device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/util/codec_decode_case.h"
#include "tests/util/commvq_case.h"
#include "tests/util/device_case.h"
#include "kernels/cpu/hadamard.h"
#include "kernels/cuda/decode/commvq_warp_decode.h"
#include "kernels/cuda/decode/decode_attention.h"
#include "kernels/cuda/encode/vecinfer_encode.h"
#include "runtime/kv/commvq_codebooks.h"
#include "runtime/kv/commvq_codec.h"
#include "runtime/kv/fp16_codec.h"
#include "runtime/kv/kivi_codec.h"
#include "runtime/kv/kv_codec.h"
#include "runtime/kv/vecinfer_codec.h"
#include "tests/util/decode_case.h"
#include "tests/util/decode_reference.h"
#include "tests/util/cuda_device.h"

namespace vqserve {
namespace {

struct FormatCase {
  const char* name;
  KvPageFormat format;
  int kivi_bits, dk, dv, residual;
};

class CudaDecodeReferenceTest
    : public ::testing::TestWithParam<std::tuple<FormatCase, int /*head_dim*/, int /*group*/>> {};

TEST_P(CudaDecodeReferenceTest, MatchesFloat64Reference) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  const auto [fc, head_dim, group] = GetParam();
  for (int splits : {0, 7}) {
    testing::DecodeCaseSpec s;
    s.format = fc.format;
    s.num_kv_heads = 2;
    s.num_heads = 2 * group;
    s.head_dim = head_dim;
    s.lens = {1, 31, 33, 161, 1000, 4133};
    s.residual_tokens = fc.residual;
    s.kivi_bits = fc.kivi_bits;
    s.vq_k_sub_dim = fc.dk;
    s.vq_v_sub_dim = fc.dv;
    s.seed = 100 + head_dim + group + splits;
    testing::DecodeCase c = testing::MakeDecodeCase(s);
    testing::DeviceDecodeCase dev(c);
    dev.params().num_splits = splits;
    dev.PoisonOutput();
    ASSERT_EQ(cuda::LaunchDecodeAttention(s.format, dev.params(), nullptr), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_LE(testing::RelativeError(dev.Output(), testing::ReferenceDecodeAttention(c)), 1e-3)
        << fc.name << " D=" << head_dim << " G=" << group << " splits=" << splits;
  }
}

const FormatCase kFormats[] = {
    {"fp16", KvPageFormat::kFp16, 2, 4, 4, 0},
    {"kivi2", KvPageFormat::kKivi, 2, 4, 4, 128},
    {"kivi4", KvPageFormat::kKivi, 4, 4, 4, 128},
    {"vecinfer_k2v2", KvPageFormat::kVecInfer, 2, 4, 4, 128},
    {"vecinfer_k4v4", KvPageFormat::kVecInfer, 2, 2, 2, 128},
    {"vecinfer_k1v1", KvPageFormat::kVecInfer, 2, 8, 8, 128},
    {"vecinfer_k2v1", KvPageFormat::kVecInfer, 2, 4, 8, 128},
};

INSTANTIATE_TEST_SUITE_P(
    AllFormats, CudaDecodeReferenceTest,
    ::testing::Combine(::testing::ValuesIn(kFormats), ::testing::Values(64, 128),
                       ::testing::Values(1, 3, 4, 8)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).name) + "_d" + std::to_string(std::get<1>(info.param)) +
             "_g" + std::to_string(std::get<2>(info.param));
    });

// pages written by a cpu codec, attended on the gpu and by the codec's own AttendPages.
// half_books: vecinfer with the fp16 book copies the runtime makes (vecinfer_half_books.h).
void CompareWithCpuCodec(const KvCodec& codec, const VecInferCodebooks* vq, int layer, int n,
                         bool half_books = false) {
  const KvShape& shape = codec.shape();
  const int H = shape.num_kv_heads, NH = shape.num_heads, D = shape.head_dim;
  std::mt19937 rng(static_cast<unsigned>(n + D));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(n) * H * D), v(k.size()), q(static_cast<size_t>(NH) * D);
  for (float& x : k) x = normal(rng);
  for (float& x : v) x = normal(rng);
  for (float& x : q) x = normal(rng);
  // gpu: the same pages, table and ring.
  testing::CodecDecodeCase cc = testing::MakeCodecDecodeCase(codec, layer, n, k, v, q);
  testing::DecodeCase& c = cc.gpu;
  cuda::KvPageFormat format = cuda::KvPageFormat::kFp16;
  if (vq != nullptr) {
    format = cuda::KvPageFormat::kVecInfer;
    // q~ = H (q * lambda) per query head with its kv head's lambda.
    for (int qh = 0; qh < NH; ++qh) {
      const float* lam = vq->lambda.data() + (static_cast<size_t>(layer) * H + qh / (NH / H)) * D;
      float* qt = c.q_tilde.data() + static_cast<size_t>(qh) * D;
      for (int i = 0; i < D; ++i) qt[i] = q[static_cast<size_t>(qh) * D + i] * lam[i];
      if (vq->options.hadamard) kernels::FastWalshHadamard(qt, D);
    }
    const PqSpec ks = *PqSpecForBits(vq->options.k_bits), vs = *PqSpecForBits(vq->options.v_bits);
    const size_t kbook = static_cast<size_t>(D) << ks.code_bits, vbook = static_cast<size_t>(D) << vs.code_bits;
    c.k_codebook.assign(vq->k_centroids.begin() + layer * kbook, vq->k_centroids.begin() + (layer + 1) * kbook);
    c.v_codebook.assign(vq->v_centroids.begin() + layer * vbook, vq->v_centroids.begin() + (layer + 1) * vbook);
    c.spec.vq_k_sub_dim = ks.sub_dim;
    c.spec.vq_v_sub_dim = vs.sub_dim;
    c.spec.vq_k_code_bits = ks.code_bits;
    c.spec.vq_v_code_bits = vs.code_bits;
  } else if (codec.name().rfind("kivi", 0) == 0) {
    format = cuda::KvPageFormat::kKivi;
    c.spec.kivi_bits = 2;
  }
  testing::DeviceDecodeCase dev(c);
  if (half_books) {
    ASSERT_TRUE(dev.UploadHalfBooks(true)) << codec.name();
  }
  dev.PoisonOutput();
  ASSERT_EQ(cuda::LaunchDecodeAttention(format, dev.params(), nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<double> ref(cc.reference.begin(), cc.reference.end());
  EXPECT_LE(testing::RelativeError(dev.Output(), ref), 1e-3)
      << codec.name() << " n=" << n << (half_books ? " (fp16 books)" : "");
}

// random vecinfer books for a 2-layer `shape`: lambda in [0.5, 1.5], centroids uniform in
// [-1, 1) (k_scale for keys).
std::shared_ptr<VecInferCodebooks> RandomBooks(const KvShape& shape, float k_bits, float v_bits,
                                               unsigned seed, float k_scale = 1.0f) {
  auto books = std::make_shared<VecInferCodebooks>();
  books->options.k_bits = k_bits;
  books->options.v_bits = v_bits;
  books->shape = shape;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const size_t hd = static_cast<size_t>(shape.num_layers) * shape.head_dim;
  books->lambda.resize(hd * shape.num_kv_heads);
  for (float& x : books->lambda) x = 0.5f + 0.5f * (u(rng) + 1.0f);
  books->k_centroids.resize(hd << PqSpecForBits(k_bits)->code_bits);
  books->v_centroids.resize(hd << PqSpecForBits(v_bits)->code_bits);
  for (float& x : books->k_centroids) x = k_scale * u(rng);
  for (float& x : books->v_centroids) x = u(rng);
  return books;
}

TEST(CudaDecodeCpuCodecTest, MatchesCpuCodecs) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  for (int d : {64, 128}) {
    KvShape shape{2, 2, 6, d};
    for (int n : {5, 200, 1000}) {
      CompareWithCpuCodec(*MakeFp16Codec(shape), nullptr, 1, n);
      CompareWithCpuCodec(*MakeKiviCodec(shape, 2), nullptr, 1, n);
      auto books = RandomBooks(shape, 2, 2, 3);
      CompareWithCpuCodec(*MakeVecInferCodec(books), books.get(), 1, n);
    }
  }
}

// pages the cpu codec wrote, for each (k bits, v bits) width, head_dim 64 and 128 and gqa 1, 3,
// 4, 8 (books seeded seed + gqa): lens at gqa long_g, else 200 tokens; for each fp16-books
// choice.
void CompareVecInferWidths(const std::vector<std::pair<float, float>>& widths, unsigned seed, int long_g,
                           const std::vector<int>& lens, const std::vector<bool>& halves) {
  for (const auto& [kb, vb] : widths) {
    for (int d : {64, 128}) {
      for (int g : {1, 3, 4, 8}) {
        KvShape shape{2, 2, 2 * g, d};
        auto books = RandomBooks(shape, kb, vb, seed + g);
        auto codec = MakeVecInferCodec(books);
        for (int n : g == long_g ? lens : std::vector<int>{200}) {
          for (bool half : halves) CompareWithCpuCodec(*codec, books.get(), 1, n, half);
        }
      }
    }
  }
}

// 8-dim sub-vectors (vecinfer-k1v1, -k2v1) and k2v2, with fp32 and with fp16 books: the
// tensor-core kernel at head_dim 64 and 128, two head groups at gqa 8.
TEST(CudaDecodeCpuCodecTest, VecInferEightDimWidths) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  CompareVecInferWidths({{1, 1}, {2, 1}, {2, 2}}, 11, 4, {5, 161, 1000}, {false, true});
}

// the widths the generic kernel serves (12-bit codes; an 8-bit pair the lut kernels do not
// take).
TEST(CudaDecodeCpuCodecTest, VecInferGenericWidths) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  CompareVecInferWidths({{3, 3}, {1.5f, 1.5f}, {2, 1.5f}, {4, 2}}, 5, 3, {5, 161, 200, 1000}, {false});
}

// code m of a vecinfer code row (docs/kv_formats.md): 8-bit codes a byte each, 12-bit codes
// c0 | c1 << 12 in 3 bytes.
int RowCode(const uint8_t* row, int m, int bits) {
  if (bits == 8) return row[m];
  const uint8_t* b = row + 3 * (m / 2);
  const uint32_t w = b[0] | static_cast<uint32_t>(b[1]) << 8 | static_cast<uint32_t>(b[2]) << 16;
  return (m % 2 == 0 ? w : w >> 12) & 0xfff;
}

// the gpu page encoder against the cpu codec's EncodePage: codes equal except on near-ties,
// where both picks must be (within rounding) equally near. every width: 8-bit codes of 2, 4, 8
// dims and 12-bit codes of 4 and 8 dims.
TEST(CudaVecInferEncodeTest, MatchesCpuEncodePage) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  for (int d : {64, 128}) {
    for (float bits : {4.0f, 2.0f, 1.0f, 3.0f, 1.5f}) {
      const int H = 2, P = 32, layer = 1;
      const PqSpec pq = *PqSpecForBits(bits);
      const int sub = pq.sub_dim, cb = pq.code_bits;
      KvShape shape{2, H, 2 * H, d};
      auto books = std::make_shared<VecInferCodebooks>();
      books->options.k_bits = bits;
      books->options.v_bits = bits;
      books->shape = shape;
      std::mt19937 rng(static_cast<unsigned>(d + sub + cb));
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      books->lambda.resize(static_cast<size_t>(2) * H * d);
      for (float& x : books->lambda) x = 0.5f + 0.5f * (u(rng) + 1.0f);
      const size_t book = static_cast<size_t>(d) << cb;
      books->k_centroids.resize(2 * book);
      books->v_centroids.resize(books->k_centroids.size());
      for (float& x : books->k_centroids) x = 0.4f * normal(rng);
      for (float& x : books->v_centroids) x = normal(rng);
      auto codec = MakeVecInferCodec(books);
      std::vector<float> k(static_cast<size_t>(P) * H * d), v(k.size());
      for (float& x : k) x = normal(rng);
      for (float& x : v) x = normal(rng);
      std::vector<uint8_t> cpu(codec->LayerPageBytes());
      codec->EncodePage(layer, 0, k.data(), v.data(), cpu.data());

      std::vector<float> lam(books->lambda.begin() + static_cast<size_t>(layer) * H * d,
                             books->lambda.begin() + static_cast<size_t>(layer + 1) * H * d);
      std::vector<float> ck(books->k_centroids.begin() + layer * book, books->k_centroids.begin() + (layer + 1) * book);
      std::vector<float> cv(books->v_centroids.begin() + layer * book, books->v_centroids.begin() + (layer + 1) * book);
      float *dk, *dv, *dl, *dck, *dcv;
      uint8_t* ddst;
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dk), k.size() * 4), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dv), v.size() * 4), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dl), lam.size() * 4), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dck), book * 4), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dcv), book * 4), cudaSuccess);
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&ddst), cpu.size()), cudaSuccess);
      cudaMemcpy(dk, k.data(), k.size() * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(dv, v.data(), v.size() * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(dl, lam.data(), lam.size() * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(dck, ck.data(), book * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(dcv, cv.data(), book * 4, cudaMemcpyHostToDevice);
      cudaMemset(ddst, 0xAB, cpu.size());
      cuda::VecInferEncodeParams ep;
      ep.k = dk;
      ep.v = dv;
      ep.lambda = dl;
      ep.k_codebook = dck;
      ep.v_codebook = dcv;
      ep.k_sub_dim = sub;
      ep.v_sub_dim = sub;
      ep.k_code_bits = cb;
      ep.v_code_bits = cb;
      ep.num_kv_heads = H;
      ep.head_dim = d;
      ep.dst = ddst;
      ASSERT_EQ(cuda::LaunchVecInferEncodePage(ep, nullptr), "");
      std::vector<uint8_t> gpu(cpu.size());
      ASSERT_EQ(cudaMemcpy(gpu.data(), ddst, gpu.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      for (void* ptr : {static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dl),
                        static_cast<void*>(dck), static_cast<void*>(dcv), static_cast<void*>(ddst)}) {
        cudaFree(ptr);
      }
      // distances in float64 of both picks, in the space each sub-vector is coded in.
      const int m_count = d / sub, row_bytes = m_count * cb / 8;
      int mismatches = 0;
      for (int h = 0; h < H; ++h) {
        for (int t = 0; t < P; ++t) {
          std::vector<float> kt(d);
          for (int i = 0; i < d; ++i) kt[i] = k[(static_cast<size_t>(t) * H + h) * d + i] / lam[h * d + i];
          kernels::FastWalshHadamard(kt.data(), d);
          for (int kv = 0; kv < 2; ++kv) {
            const size_t row = (kv == 0 ? 0 : static_cast<size_t>(H) * P * row_bytes) + (static_cast<size_t>(h) * P + t) * row_bytes;
            const float* x = kv == 0 ? kt.data() : &v[(static_cast<size_t>(t) * H + h) * d];
            const std::vector<float>& c = kv == 0 ? ck : cv;
            for (int m = 0; m < m_count; ++m) {
              const int a = RowCode(&cpu[row], m, cb), b = RowCode(&gpu[row], m, cb);
              if (a == b) continue;
              ++mismatches;
              double da = 0, db = 0;
              for (int e = 0; e < sub; ++e) {
                const double xa = x[m * sub + e] - c[((static_cast<size_t>(m) << cb) + a) * sub + e];
                const double xb = x[m * sub + e] - c[((static_cast<size_t>(m) << cb) + b) * sub + e];
                da += xa * xa;
                db += xb * xb;
              }
              EXPECT_LE(std::fabs(db - da), 1e-4 * (da + 1e-3)) << "d=" << d << " bits=" << bits;
            }
          }
        }
      }
      EXPECT_LE(mismatches, 2 * H * P * m_count / 100) << "d=" << d << " bits=" << bits;
    }
  }
}

// commvq-1 / commvq-2 rounds for head_dim d, as CommVqOptionsForName derives them.
testing::CommVqCaseSpec CommVqSpec(int bits, int d, int group) {
  KvShape shape{2, 2, 2 * group, d};
  testing::CommVqCaseSpec s;
  auto o = CommVqOptionsForName(bits == 1 ? "commvq-1" : "commvq-2", shape);
  auto o2 = CommVqOptionsForName("commvq-2", shape);
  EXPECT_TRUE(o.ok() && o2.ok());
  s.head_dim = d;
  s.num_kv_heads = 2;
  s.num_heads = 2 * group;
  s.key_rounds = o->key_rounds;
  s.value_rounds = o->value_rounds;
  s.book_key_rounds = o2->key_rounds;  // commvq-1 runs on the first rounds of commvq-2 books
  s.book_value_rounds = o2->value_rounds;
  return s;
}

// the cpu codec's books holding the case's books at layer c.spec.layer (other layer zero).
std::shared_ptr<CommVqCodebooks> CaseBooks(const testing::DecodeCase& c, const testing::CommVqCaseSpec& s) {
  KvShape shape{c.num_layers, s.num_kv_heads, s.num_heads, s.head_dim};
  auto books = CommVqCodebooks::Create(shape, s.rope_theta, s.book_key_rounds, s.book_value_rounds);
  EXPECT_TRUE(books.ok());
  auto out = std::make_shared<CommVqCodebooks>(*std::move(books));
  for (int h = 0; h < s.num_kv_heads; ++h) {
    for (int r = 0; r < s.book_key_rounds; ++r) {
      const float* src = c.k_codebook.data() + (static_cast<size_t>(h) * s.book_key_rounds + r) * out->key_book_floats();
      std::copy(src, src + out->key_book_floats(), out->mutable_key_book(c.spec.layer, h, r));
    }
    for (int r = 0; r < s.book_value_rounds; ++r) {
      const float* src = c.v_codebook.data() + (static_cast<size_t>(h) * s.book_value_rounds + r) * out->value_book_floats();
      std::copy(src, src + out->value_book_floats(), out->mutable_value_book(c.spec.layer, h, r));
    }
  }
  return out;
}

// the cpu commvq codec's AttendPages over the case's pages, then the fp16 ring: (batch, heads, D).
std::vector<double> CpuCommVqReference(const testing::DecodeCase& c, const testing::CommVqCaseSpec& s) {
  KvShape shape{c.num_layers, s.num_kv_heads, s.num_heads, s.head_dim};
  auto codec = MakeCommVqCodec(shape, CaseBooks(c, s), s.key_rounds, s.value_rounds);
  EXPECT_NE(codec, nullptr);
  EXPECT_EQ(codec->LayerPageBytes(), c.layer_page_bytes);
  const int H = s.num_kv_heads, NH = s.num_heads, D = s.head_dim;
  std::vector<double> out;
  for (int b = 0; b < c.batch; ++b) {
    const int coded = c.coded_lens[b], nres = c.res_lens[b];
    std::vector<const uint8_t*> slices(coded / 32);
    for (int j = 0; j < coded / 32; ++j) {
      slices[j] = c.pages.data() + c.block_tables[b * c.block_table_stride + j] * c.page_bytes +
                  c.spec.layer * c.layer_page_bytes;
    }
    std::vector<float> kd(static_cast<size_t>(nres) * H * D), vd(kd.size());
    for (int t = 0; t < nres; ++t) {
      for (int e = 0; e < H * D; ++e) {
        const size_t src = (static_cast<size_t>(c.slots[b]) * c.ring_tokens + (coded + t) % c.ring_tokens) * H * D + e;
        kd[static_cast<size_t>(t) * H * D + e] = testing::HalfBitsToFloat(c.ring_k[src]);
        vd[static_cast<size_t>(t) * H * D + e] = testing::HalfBitsToFloat(c.ring_v[src]);
      }
    }
    std::vector<float> m(NH, -std::numeric_limits<float>::infinity()), l(NH, 0.0f), acc(static_cast<size_t>(NH) * D, 0.0f);
    SoftmaxState state{m.data(), l.data(), acc.data()};
    const float* q = c.q.data() + static_cast<size_t>(b) * NH * D;
    if (coded > 0) codec->AttendPages(c.spec.layer, slices.data(), coded, q, coded + nres - 1, &state);
    if (nres > 0) AttendDense(shape, q, kd.data(), vd.data(), nres, &state);
    std::vector<float> o(static_cast<size_t>(NH) * D);
    FinishSoftmax(shape, state, o.data());
    out.insert(out.end(), o.begin(), o.end());
  }
  return out;
}

// gpu output of a commvq case.
std::vector<float> RunCommVq(const testing::DecodeCase& c, const testing::CommVqCaseSpec& s, int splits) {
  testing::DeviceDecodeCase dev(c);
  testing::SetCommVqParams(s, &dev.params());
  dev.params().num_splits = splits;
  dev.PoisonOutput();
  EXPECT_EQ(cuda::LaunchDecodeAttention(cuda::KvPageFormat::kCommVq, dev.params(), nullptr), "");
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return dev.Output();
}

// which commvq kernel serves which shape (host code: runs without a device too).
TEST(CudaCommVqDispatchTest, WarpKernelWhereItsBooksFit) {
  cuda::DecodeAttentionParams p;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.batch = 1;
  p.max_coded_len = 131072;
  struct Shape {
    int d, rounds, value_rounds;
    bool warp;
    int blocks;
  };
  // commvq-1 / commvq-2 at head_dim 128 (11 / 21 rounds) and 64 (5 / 11), and a round count
  // no warp kernel instantiates.
  for (const Shape& c : {Shape{128, 11, 1, true, 1}, Shape{128, 21, 2, true, 2}, Shape{64, 5, 1, true, 1},
                         Shape{64, 11, 2, true, 1}, Shape{128, 7, 1, false, 1}, Shape{64, 21, 2, false, 1}}) {
    p.head_dim = c.d;
    p.commvq_key_rounds = c.rounds;
    p.commvq_value_rounds = c.value_rounds;
    EXPECT_EQ(cuda::UsesCommVqWarp(p), c.warp) << "d=" << c.d << " R=" << c.rounds;
    EXPECT_EQ(cuda::CommVqWarpBlocks(p), c.blocks) << "d=" << c.d << " R=" << c.rounds;
    const int splits = cuda::ChooseDecodeSplits(cuda::KvPageFormat::kCommVq, p);
    EXPECT_GE(splits, 1);
    if (c.warp) {  // one wave: split blocks (a pair for the pair kernel) fit the sms of the device
      EXPECT_LE(splits * c.blocks * p.num_kv_heads, 132 * 2) << "d=" << c.d << " R=" << c.rounds;
    }
  }
}

class CudaCommVqTest : public ::testing::TestWithParam<std::tuple<int /*bits*/, int /*head_dim*/, int /*group*/>> {};

// random pages: the gpu against the cpu codec's AttendPages and the float64 reference.
TEST_P(CudaCommVqTest, MatchesCpuAttendPages) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  const auto [bits, head_dim, group] = GetParam();
  for (int splits : {0, 7}) {
    testing::CommVqCaseSpec s = CommVqSpec(bits, head_dim, group);
    s.lens = {1, 31, 33, 161, 1000, 4133};
    s.seed = 300 + bits * 1000 + head_dim + group + splits;
    testing::DecodeCase c = testing::MakeCommVqCase(s);
    const std::vector<float> gpu = RunCommVq(c, s, splits);
    EXPECT_LE(testing::RelativeError(gpu, CpuCommVqReference(c, s)), 1e-3)
        << "commvq-" << bits << " D=" << head_dim << " G=" << group << " splits=" << splits;
    EXPECT_LE(testing::RelativeError(gpu, testing::ReferenceCommVq(c, s)), 1e-3)
        << "commvq-" << bits << " D=" << head_dim << " G=" << group << " splits=" << splits;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllConfigs, CudaCommVqTest,
    ::testing::Combine(::testing::Values(1, 2), ::testing::Values(64, 128), ::testing::Values(1, 3, 4, 8)),
    [](const auto& info) {
      return "commvq" + std::to_string(std::get<0>(info.param)) + "_d" + std::to_string(std::get<1>(info.param)) +
             "_g" + std::to_string(std::get<2>(info.param));
    });

// 128k tokens (not a multiple of the page or tile) against the cpu AttendPages.
TEST(CudaCommVqLongTest, MatchesCpuAttendPagesAt128k) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  for (int bits : {1, 2}) {
    for (int d : {64, 128}) {
      testing::CommVqCaseSpec s = CommVqSpec(bits, d, 4);
      s.lens = {131072 + 77, 5};
      s.seed = 77 + bits + d;
      testing::DecodeCase c = testing::MakeCommVqCase(s);
      EXPECT_LE(testing::RelativeError(RunCommVq(c, s, 0), CpuCommVqReference(c, s)), 1e-3)
          << "commvq-" << bits << " D=" << d;
    }
  }
}

// pages written by the cpu codec's EncodePage from real keys and values.
TEST(CudaCommVqEncodedTest, MatchesCpuCodecOnEncodedPages) {
  VQ_SKIP_WITHOUT_CUDA_DEVICE();
  for (int bits : {1, 2}) {
    for (int d : {64, 128}) {
      testing::CommVqCaseSpec s = CommVqSpec(bits, d, 3);
      s.lens = {700, 200, 1};
      s.seed = 5 + bits + d;
      testing::DecodeCase c = testing::MakeCommVqCase(s);
      KvShape shape{c.num_layers, s.num_kv_heads, s.num_heads, d};
      auto codec = MakeCommVqCodec(shape, CaseBooks(c, s), s.key_rounds, s.value_rounds);
      ASSERT_NE(codec, nullptr);
      std::mt19937 rng(static_cast<unsigned>(d + bits));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> k(static_cast<size_t>(32) * s.num_kv_heads * d), v(k.size());
      for (int b = 0; b < c.batch; ++b) {
        for (int j = 0; j < c.coded_lens[b] / 32; ++j) {
          for (float& x : k) x = normal(rng);
          for (float& x : v) x = normal(rng);
          uint8_t* slice = c.pages.data() + c.block_tables[b * c.block_table_stride + j] * c.page_bytes +
                           c.spec.layer * c.layer_page_bytes;
          codec->EncodePage(c.spec.layer, j * 32, k.data(), v.data(), slice);
        }
      }
      EXPECT_LE(testing::RelativeError(RunCommVq(c, s, 0), CpuCommVqReference(c, s)), 1e-3)
          << "commvq-" << bits << " D=" << d;
    }
  }
}

}  // namespace
}  // namespace vqserve
