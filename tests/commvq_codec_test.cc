// commvq codec: commutativity, attention on codes vs decode-then-attend (float64), paged decode
// across page boundaries, memory accounting, serialization; on real keys/values of the default
// model (rearranged into other head_dims / head counts where the model has none).
#include "runtime/kv/commvq_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/kv/commvq_math.h"
#include "runtime/calibration/commvq_trainer.h"
#include "kernels/cpu/rope.h"
#include "runtime/gguf/ggml_type.h"
#include "runtime/kv/paged_kv_cache.h"
#include "tests/util/codec_check.h"
#include "tests/util/model_kv_samples.h"
#include "tests/util/prerequisite.h"

namespace vqserve {
namespace {

using Cd = std::complex<double>;

// the real samples: layers 0, 14, 29 of the default model over 1536 tokens of fortunes.
const CalibrationData* RealSamples() {
  static const CalibrationData* data = [] {
    if (testing::RealTextPath().empty()) return static_cast<CalibrationData*>(nullptr);
    absl::StatusOr<CalibrationData> d =
        testing::ModelKvSamples(testing::RealTextPath(), 1536, {0, 14, 29});
    return d.ok() ? new CalibrationData(std::move(*d)) : nullptr;
  }();
  return data;
}

// (tokens, H, D) floats cut in order from a real stream (pre-rope keys, rope keys or values of
// sample layer 1), starting at token `skip`; rope pairs stay aligned.
std::vector<float> RealStream(const std::vector<float>& stream, int skip_floats, size_t count) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = stream[(skip_floats + i) % stream.size()];
  return out;
}

// calibration data of `shape` made of the real streams (first `tokens` tokens).
CalibrationData RealCalibration(const KvShape& shape, int tokens) {
  const CalibrationData& real = *RealSamples();
  CalibrationData d;
  d.shape = shape;
  d.rope_theta = real.rope_theta;
  size_t count = size_t{1} * tokens * shape.num_kv_heads * shape.head_dim;
  for (int l = 0; l < shape.num_layers; ++l) {
    const LayerSamples& src = real.layers[l % real.layers.size()];
    LayerSamples ls;
    ls.k_pre_rope = RealStream(src.k_pre_rope, 0, count);
    ls.v = RealStream(src.v, 0, count);
    ls.num_tokens = tokens;
    for (int t = 0; t < tokens; ++t) ls.positions.push_back(t);
    d.layers.push_back(std::move(ls));
  }
  return d;
}

// small, quickly trained codebooks (quality is not the point of these tests).
std::shared_ptr<const CommVqCodebooks> QuickBooks(const KvShape& shape, int key_rounds,
                                                  int value_rounds) {
  CommVqOptions o;
  o.key_rounds = key_rounds;
  o.value_rounds = value_rounds;
  o.em_steps = 6;
  o.max_vectors = 256;
  o.max_value_vectors = 512;
  o.kmeans_iters = 4;
  absl::StatusOr<CommVqCodebooks> b = TrainCommVq(RealCalibration(shape, 1024), o, nullptr);
  EXPECT_TRUE(b.ok()) << b.status();
  return std::make_shared<const CommVqCodebooks>(std::move(*b));
}

class CommVqCodecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RealSamples() == nullptr) VQ_SKIP_UNLESS_CI << "default model or fortunes text missing";
  }
};

TEST(CommVqMathTest, EntriesCommuteWithRopeInFloat64) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-3, 3);
  for (int i = 0; i < 100; ++i) {
    double x = u(rng), y = u(rng), a = u(rng) * 1000;
    double c[2][2] = {{x, y}, {-y, x}};
    double r[2][2] = {{std::cos(a), -std::sin(a)}, {std::sin(a), std::cos(a)}};
    for (int p = 0; p < 2; ++p) {
      for (int q = 0; q < 2; ++q) {
        double cr = c[p][0] * r[0][q] + c[p][1] * r[1][q];
        double rc = r[p][0] * c[0][q] + r[p][1] * c[1][q];
        EXPECT_NEAR(cr, rc, 1e-12);
      }
    }
    // the lut identity per pair: q (C_A R_i)^T e1 = (q C_A^T) R_i^T e1 for a row vector q
    // (commutativity moves R_i behind the position-free table entry q C_A^T).
    double qv[2] = {u(rng), u(rng)}, b = u(rng) * 1000;
    double ri[2][2] = {{std::cos(b), -std::sin(b)}, {std::sin(b), std::cos(b)}};
    double cri[2][2];  // C_A R_i: the decoded row 0 of C_A, rotated to position i
    for (int p = 0; p < 2; ++p) {
      for (int q = 0; q < 2; ++q) cri[p][q] = c[p][0] * ri[0][q] + c[p][1] * ri[1][q];
    }
    double lhs = qv[0] * cri[0][0] + qv[1] * cri[0][1];
    double lut[2] = {qv[0] * c[0][0] + qv[1] * c[0][1], qv[0] * c[1][0] + qv[1] * c[1][1]};
    double rhs = lut[0] * ri[0][0] + lut[1] * ri[0][1];  // (q C_A^T) R_i^T e1
    EXPECT_NEAR(lhs, rhs, 1e-9);
  }
}

TEST(CommVqMathTest, CodesPackTwelveBitsTight) {
  std::vector<uint16_t> codes = {0, 4095, 1, 2048, 0xabc, 0x123};
  std::vector<uint8_t> bytes(9);
  commvq::PackCodes12(codes.data(), 6, bytes.data());
  EXPECT_EQ(bytes[0], 0x00);
  EXPECT_EQ(bytes[1], 0xf0);  // c0 high nibble 0, c1 low nibble f
  EXPECT_EQ(bytes[2], 0xff);
  std::vector<uint16_t> back(6);
  commvq::UnpackCodes12(bytes.data(), 6, back.data());
  EXPECT_EQ(back, codes);
}

TEST(CommVqOptionsTest, RoundsAndBitsPerElement) {
  KvShape s64{30, 3, 9, 64}, s128{32, 8, 32, 128};
  auto o2 = CommVqOptionsForName("commvq-2", s64), o1 = CommVqOptionsForName("commvq-1", s64);
  auto p2 = CommVqOptionsForName("commvq-2", s128), p1 = CommVqOptionsForName("commvq-1", s128);
  ASSERT_TRUE(o2.ok() && o1.ok() && p2.ok() && p1.ok());
  EXPECT_EQ(o2->key_rounds, 11);  // 11 * 12 / 64 = 2.06 code bits
  EXPECT_EQ(o1->key_rounds, 5);   // 5 * 12 / 64 = 0.94
  EXPECT_EQ(p2->key_rounds, 21);  // 21 * 12 / 128 = 1.97 (the paper's R)
  EXPECT_EQ(p1->key_rounds, 11);  // 11 * 12 / 128 = 1.03
  EXPECT_EQ(o2->value_rounds, 2);
  EXPECT_EQ(o1->value_rounds, 1);
  EXPECT_FALSE(CommVqOptionsForName("commvq-3", s64).ok());
  // per layer page slice: scales 2HP + keys H*R*P*12/8 + values H*Rv*(D/8)*P bytes.
  EXPECT_EQ(CommVqLayerPageBytes(s64, 32, 11, 2), 3u * 32 * 2 + 3u * 11 * 48 + 3u * 2 * 8 * 32);
  // bits per element (k and v averaged): ((16 + 12R)/D + Rv) / 2.
  EXPECT_DOUBLE_EQ(CommVqBitsPerElement(s64, 11, 2), ((16.0 + 132) / 64 + 2) / 2);
  EXPECT_DOUBLE_EQ(CommVqBitsPerElement(s128, 21, 2), ((16.0 + 252) / 128 + 2) / 2);
  EXPECT_DOUBLE_EQ(CommVqBitsPerElement(s64, 5, 1), ((16.0 + 60) / 64 + 1) / 2);
  EXPECT_DOUBLE_EQ(CommVqBitsPerElement(s128, 11, 1), ((16.0 + 132) / 128 + 1) / 2);
}

TEST_F(CommVqCodecTest, AttentionOnCodesEqualsDecodeThenAttend) {
  // head_dim 72 (36 pairs per code) exercises the scalar path of groups not a multiple of 8.
  for (int d : {64, 128, 72}) {
    for (int grp : {1, 3, 4}) {
      if (d == 72 && grp != 3) continue;
      const int kv_heads = d == 128 ? 2 : 3;
      KvShape s{1, kv_heads, kv_heads * grp, d};
      auto books = QuickBooks(s, 3, 2);
      auto codec = MakeCommVqCodec(s, books, 3, 2);
      ASSERT_NE(codec, nullptr);
      for (int n : {32, 77, 160}) {
        const size_t row = size_t{1} * kv_heads * d;
        std::vector<float> k = RealStream(RealSamples()->layers[1].k_pre_rope, 4096 * 64, n * row);
        std::vector<float> v = RealStream(RealSamples()->layers[1].v, 4096 * 64, n * row);
        std::vector<float> q = RealStream(RealSamples()->layers[1].k_rope, 999 * 64,
                                          size_t{1} * s.num_heads * d);
        for (float& x : q) x *= 0.5f;
        double err = testing::CodesVsDequantized(*codec, 0, k.data(), v.data(), n, q.data());
        EXPECT_LT(err, 1e-5) << "head_dim " << d << " gqa " << grp << " tokens " << n;
      }
    }
  }
}

TEST_F(CommVqCodecTest, DecodedKeysAreRopeOfPositionFreeReconstruction) {
  KvShape s{1, 3, 9, 64};
  auto books = QuickBooks(s, 4, 1);
  auto codec = MakeCommVqCodec(s, books, 4, 1);
  ASSERT_NE(codec, nullptr);
  EXPECT_TRUE(codec->needs_pre_rope_keys());
  const int P = codec->page_tokens(), row = 3 * 64;
  std::vector<float> k = RealStream(RealSamples()->layers[0].k_pre_rope, 0, size_t{1} * P * row);
  std::vector<float> v = RealStream(RealSamples()->layers[0].v, 0, size_t{1} * P * row);
  std::vector<uint8_t> page(codec->LayerPageBytes());
  std::vector<float> k0(k.size()), kp(k.size()), v0(k.size()), vp(k.size());
  const int first = 4000;
  codec->EncodePage(0, first, k.data(), v.data(), page.data());
  codec->DecodePage(0, 0, page.data(), k0.data(), v0.data());
  codec->DecodePage(0, first, page.data(), kp.data(), vp.data());
  EXPECT_EQ(v0, vp);
  // decoding the same codes at first_pos 4000 instead of 0 rotates every pair by 4000 theta_j.
  const double theta = RealSamples()->rope_theta;
  for (int t = 0; t < P; ++t) {
    for (int h = 0; h < 3; ++h) {
      for (int j = 0; j < 32; ++j) {
        size_t o = (size_t{1} * t * 3 + h) * 64 + 2 * j;
        double f = static_cast<float>(std::pow(theta, -2.0 * j / 64));
        Cd z0(k0[o], k0[o + 1]), zp(kp[o], kp[o + 1]);
        Cd want = z0 * std::polar(1.0, first * f);  // z0 sits at position t, zp at first + t
        EXPECT_NEAR(zp.real(), want.real(), 1e-5 * (1 + std::abs(z0)));
        EXPECT_NEAR(zp.imag(), want.imag(), 1e-5 * (1 + std::abs(z0)));
      }
    }
  }
}

// feeds `chunks` (summing to the stream length) of real pre-rope keys (roped here at their
// positions) and values through a paged cache of 2 layers; the last query of every chunk must
// equal float64 attention over the decoded pages plus the fp16 ring. with `last_query_only`
// only that query is attended (Attend of 1 query at the chunk's end; cheap for long chunks).
// returns the checks made.
int CheckPagedDecode(const KvShape& s, const std::vector<int>& chunks, bool last_query_only) {
  auto books = QuickBooks(s, 3, 2);
  auto codec = MakeCommVqCodec(s, books, 3, 2);
  EXPECT_NE(codec, nullptr);
  if (codec == nullptr) return 0;
  const KvCodec* raw = codec.get();
  int total = 0;
  for (int c : chunks) total += c;
  const int row = s.num_kv_heads * s.head_dim, qrow = s.num_heads * s.head_dim;
  KvCacheSpec probe;
  probe.page_tokens = raw->page_tokens();
  probe.residual_tokens = raw->residual_tokens();
  const int num_pages = PagesForTokens(probe, total) + 1;
  auto cache = MakePagedKvCache(std::move(codec), num_pages, 1);
  // a scrambled block table: logical page j lives at physical page (7 j + 3) mod num_pages.
  std::vector<int32_t> table(num_pages, -1);
  for (int j = 0; j < num_pages; ++j) table[j] = (7 * j + 3) % num_pages;
  if (num_pages % 7 == 0) std::iota(table.begin(), table.end(), 0);
  cpu::RopeParams rp;
  rp.rope_dim = s.head_dim;
  rp.theta = RealSamples()->rope_theta;
  const std::vector<float> freqs = cpu::RopeFrequencies(rp);
  std::vector<int32_t> positions(total);
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<std::vector<float>> kpre(2), krope(2), vv(2);
  for (int l = 0; l < 2; ++l) {
    const LayerSamples& src = RealSamples()->layers[l];
    kpre[l] = RealStream(src.k_pre_rope, 0, size_t{1} * total * row);
    krope[l] = kpre[l];
    cpu::ApplyRope(krope[l].data(), total, s.num_kv_heads, s.head_dim, positions.data(), freqs);
    vv[l] = RealStream(src.v, 0, size_t{1} * total * row);
  }
  std::vector<float> q = RealStream(RealSamples()->layers[2].k_rope, 0, size_t{1} * total * qrow);
  for (float& x : q) x *= 0.5f;
  int done = 0, checks = 0;
  for (int chunk : chunks) {
    KvSeqRef seq{0, table.data(), num_pages, done};
    for (int l = 0; l < 2; ++l) {
      size_t off = size_t{1} * done * row;
      cache->Append(l, seq, chunk, kpre[l].data() + off, krope[l].data() + off,
                    vv[l].data() + off);
      const int n = done + chunk;
      std::vector<float> out(size_t{1} * chunk * qrow);
      if (last_query_only) {
        KvSeqRef last{0, table.data(), num_pages, n - 1};
        cache->Attend(l, last, 1, q.data() + size_t{1} * (n - 1) * qrow,
                      out.data() + size_t{1} * (chunk - 1) * qrow);
      } else {
        cache->Attend(l, seq, chunk, q.data() + size_t{1} * done * qrow, out.data());
      }
      const int coded = CodedTokens(cache->spec(), n);
      std::vector<float> rk(size_t{1} * n * row), rv(rk.size());
      for (int p = 0; p < coded / 32; ++p) {
        raw->DecodePage(l, p * 32, cache->page_slice(table[p], l), &rk[size_t{1} * p * 32 * row],
                        &rv[size_t{1} * p * 32 * row]);
      }
      for (size_t i = size_t{1} * coded * row; i < rk.size(); ++i) {
        rk[i] = testing::RoundHalf(krope[l][i]);
        rv[i] = testing::RoundHalf(vv[l][i]);
      }
      std::vector<double> ref = testing::ReferenceAttention(
          s, q.data() + size_t{1} * (n - 1) * qrow, rk.data(), rv.data(), n);
      EXPECT_LT(testing::MaxHeadRelError(s, ref, out.data() + size_t{1} * (chunk - 1) * qrow),
                1e-4)
          << "layer " << l << " tokens " << n << " coded " << coded;
      ++checks;
    }
    done += chunk;
  }
  return checks;
}

// the paged cache flushes pages at 128 + 32 tokens; attention through it over 127 ... 300
// tokens (odd chunks) equals float64 attention over decoded pages plus the fp16 ring.
TEST_F(CommVqCodecTest, PagedDecodeAcrossPageBoundaries) {
  EXPECT_EQ(CheckPagedDecode(KvShape{2, 3, 9, 64}, {100, 27, 1, 1, 31, 1, 2, 37, 60, 40}, false),
            20);
}

// long sequences: flushes at 1000 and 8000 tokens, a page boundary inside big chunks.
TEST_F(CommVqCodecTest, PagedDecodeAtThousandsOfTokens) {
  EXPECT_EQ(CheckPagedDecode(KvShape{2, 3, 9, 64}, {999, 1, 1, 2000, 3997, 1, 1, 1000, 1}, true),
            18);
  EXPECT_EQ(CheckPagedDecode(KvShape{2, 2, 4, 128}, {1000, 7000}, true), 4);
}

TEST_F(CommVqCodecTest, MemoryAccountingIsExact) {
  KvShape s{2, 3, 9, 64};
  auto books = QuickBooks(s, 3, 2);
  auto codec = MakeCommVqCodec(s, books, 2, 1);  // fewer rounds than trained is valid
  ASSERT_NE(codec, nullptr);
  EXPECT_EQ(codec->LayerPageBytes(), 3u * 32 * 2 + 3u * 2 * 48 + 3u * 1 * 8 * 32);
  // fp32 codebooks of the used rounds: keys 64 x D floats, values 256 x D floats per round.
  EXPECT_EQ(codec->FixedBytes(), 2u * 3 * 4 * (2 * 64 * 64 + 1 * 256 * 64));
  EXPECT_EQ(MakeCommVqCodec(s, books, 4, 1), nullptr);  // more rounds than trained
  KvShape other{2, 3, 9, 128};
  EXPECT_FALSE(CheckCommVqCodec(other, *books, 3, 2).ok());
}

TEST_F(CommVqCodecTest, SerializationRoundTripAndCorruption) {
  KvShape s{1, 3, 9, 64};
  auto books = QuickBooks(s, 2, 1);
  std::string blob = books->Serialize();
  absl::StatusOr<CommVqCodebooks> back = CommVqCodebooks::Deserialize(blob);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Serialize(), blob);
  EXPECT_EQ(back->rope_theta(), books->rope_theta());
  EXPECT_EQ(0, std::memcmp(back->key_book(0, 2, 1), books->key_book(0, 2, 1),
                           books->key_book_floats() * 4));
  std::string flipped = blob;
  flipped[blob.size() / 2] ^= 0x10;
  EXPECT_FALSE(CommVqCodebooks::Deserialize(flipped).ok());
  EXPECT_FALSE(CommVqCodebooks::Deserialize(blob.substr(0, blob.size() - 1)).ok());
  EXPECT_FALSE(CommVqCodebooks::Deserialize("CVQB").ok());
  std::string magic = blob;
  magic[0] = 'X';
  EXPECT_FALSE(CommVqCodebooks::Deserialize(magic).ok());
}

}  // namespace
}  // namespace vqserve
