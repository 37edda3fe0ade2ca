// attention through PagedKvCache against naive float64 attention.
#include "runtime/kv/paged_kv_cache.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/rope.h"
#include "runtime/kv/fp16_codec.h"
#include "runtime/kv/kivi_codec.h"

namespace vqserve {
namespace {

const KvShape kShape{/*num_layers=*/2, /*num_kv_heads=*/2, /*num_heads=*/6, /*head_dim=*/64};

std::vector<float> Random(size_t n, std::mt19937_64& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> RoundHalf(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  std::vector<float> r(v.size());
  cpu::FloatToHalfRow(v.data(), h.data(), v.size());
  cpu::HalfToFloatRow(h.data(), r.data(), v.size());
  return r;
}

// causal attention in float64 of query (H, D) at q_pos over k, v (T, Hkv, D).
std::vector<double> NaiveAttention(const KvShape& s, const float* q, const std::vector<float>& k,
                                   const std::vector<float>& v, int q_pos) {
  const int d = s.head_dim, hkv = s.num_kv_heads, group = s.num_heads / hkv;
  std::vector<double> out(s.num_heads * d, 0.0);
  for (int h = 0; h < s.num_heads; ++h) {
    const int g = h / group;
    std::vector<double> w(q_pos + 1);
    double mx = -1e300;
    for (int t = 0; t <= q_pos; ++t) {
      double dot = 0;
      for (int i = 0; i < d; ++i) dot += double(q[h * d + i]) * k[(t * hkv + g) * d + i];
      w[t] = dot / std::sqrt(double(d));
      mx = std::max(mx, w[t]);
    }
    double z = 0;
    for (double& x : w) z += (x = std::exp(x - mx));
    for (int t = 0; t <= q_pos; ++t) {
      for (int i = 0; i < d; ++i) out[h * d + i] += w[t] / z * v[(t * hkv + g) * d + i];
    }
  }
  return out;
}

// a sequence's keys (after rope and before), values and block table for the tests.
struct TestSeq {
  std::vector<float> k_pre, k, v;
  std::vector<int32_t> blocks;
  KvSeqRef ref;
};

TestSeq MakeSeq(int len, uint64_t seed, std::vector<int32_t> blocks, int slot) {
  std::mt19937_64 rng(seed);
  TestSeq s;
  const int row = kShape.num_kv_heads * kShape.head_dim;
  s.k_pre = Random(size_t(len) * row, rng, 1.5f);
  s.k = s.k_pre;
  std::vector<int32_t> pos(len);
  for (int i = 0; i < len; ++i) pos[i] = i;
  cpu::RopeParams rp;
  rp.rope_dim = kShape.head_dim;
  cpu::ApplyRope(s.k.data(), len, kShape.num_kv_heads, kShape.head_dim, pos.data(),
                 cpu::RopeFrequencies(rp));
  s.v = Random(size_t(len) * row, rng);
  s.blocks = std::move(blocks);
  s.ref.slot = slot;
  s.ref.block_table = s.blocks.data();
  s.ref.num_blocks = static_cast<int>(s.blocks.size());
  return s;
}

// appends tokens [from, from + n) on every layer, attends their queries and checks them against
// float64 attention over `k_ref`, `v_ref` (what the codec is expected to keep).
double StepAndCompare(HostKvCache& cache, TestSeq& s, int from, int n, std::mt19937_64& rng,
                      const std::vector<float>& k_ref, const std::vector<float>& v_ref) {
  const int row = kShape.num_kv_heads * kShape.head_dim;
  const int qrow = kShape.num_heads * kShape.head_dim;
  s.ref.num_cached = from;
  double worst = 0;
  for (int layer = 0; layer < kShape.num_layers; ++layer) {
    cache.Append(layer, s.ref, n, s.k_pre.data() + size_t(from) * row,
                 s.k.data() + size_t(from) * row, s.v.data() + size_t(from) * row);
    std::vector<float> q = Random(size_t(n) * qrow, rng), out(size_t(n) * qrow);
    cache.Attend(layer, s.ref, n, q.data(), out.data());
    for (int i = 0; i < n; ++i) {
      std::vector<double> want =
          NaiveAttention(kShape, q.data() + size_t(i) * qrow, k_ref, v_ref, from + i);
      for (int j = 0; j < qrow; ++j) {
        worst = std::max(worst, std::abs(want[j] - out[size_t(i) * qrow + j]));
      }
    }
  }
  return worst;
}

TEST(PagedKvCacheTest, Fp16SpecAndMemoryAreExact) {
  auto cache = MakePagedKvCache(MakeFp16Codec(kShape), 10, 3);
  const KvCacheSpec& s = cache->spec();
  EXPECT_EQ(s.codec, "fp16");
  EXPECT_EQ(s.residual_tokens, 0);
  EXPECT_EQ(s.page_tokens, 32);
  EXPECT_EQ(s.page_bytes, size_t(2) * 2 * 2 * 32 * 64 * 2);  // layers, k+v, heads, tokens, dim, fp16
  EXPECT_EQ(s.slot_bytes, size_t(2) * 2 * 32 * 2 * 64 * 2);  // layers, k+v, ring of 32, heads, fp16
  EXPECT_DOUBLE_EQ(s.bytes_per_token, double(s.page_bytes) / 32);
  EXPECT_FALSE(s.needs_pre_rope_keys);
  EXPECT_EQ(cache->total_bytes(), 10 * s.page_bytes + 3 * s.slot_bytes);
}

TEST(PagedKvCacheTest, Fp16PrefillMatchesNaiveAttentionAcrossPageBoundaries) {
  for (int len : {1, 31, 32, 33, 100}) {
    auto cache = MakePagedKvCache(MakeFp16Codec(kShape), 8, 2);
    // pages in scrambled physical order.
    TestSeq s = MakeSeq(len, len, {5, 2, 7, 0}, 1);
    std::mt19937_64 rng(100 + len);
    double err = StepAndCompare(*cache, s, 0, len, rng, RoundHalf(s.k), RoundHalf(s.v));
    EXPECT_LT(err, 1e-5) << "len " << len;
  }
}

TEST(PagedKvCacheTest, Fp16ChunkedPrefillAndDecodeMatchNaiveAttention) {
  auto cache = MakePagedKvCache(MakeFp16Codec(kShape), 8, 2);
  // two sequences interleaved in one cache, with disjoint pages and slots.
  TestSeq a = MakeSeq(100, 1, {3, 6, 1, 4}, 0);
  TestSeq b = MakeSeq(70, 2, {0, 7, 2}, 1);
  std::vector<float> ak = RoundHalf(a.k), av = RoundHalf(a.v), bk = RoundHalf(b.k),
                     bv = RoundHalf(b.v);
  std::mt19937_64 rng(7);
  double err = 0;
  err = std::max(err, StepAndCompare(*cache, a, 0, 31, rng, ak, av));
  err = std::max(err, StepAndCompare(*cache, b, 0, 40, rng, bk, bv));
  err = std::max(err, StepAndCompare(*cache, a, 31, 2, rng, ak, av));  // crosses 32
  for (int t = 33; t < 100; ++t) err = std::max(err, StepAndCompare(*cache, a, t, 1, rng, ak, av));
  for (int t = 40; t < 70; ++t) err = std::max(err, StepAndCompare(*cache, b, t, 1, rng, bk, bv));
  EXPECT_LT(err, 1e-5);
  // the coded pages hold the keys and values in fp16.
  std::vector<float> k(32 * 128), v(32 * 128);
  cache->codec().DecodePage(1, 64, cache->page_slice(a.blocks[2], 1), k.data(), v.data());
  for (int i = 0; i < 32 * 128; ++i) {
    ASSERT_EQ(k[i], ak[64 * 128 + i]);
    ASSERT_EQ(v[i], av[64 * 128 + i]);
  }
}

// a codec that keeps fp32 pre-rope keys in its pages and rotates them while attending, with a
// residual window of 8 tokens and pages of 4: exercises the generic ring policy of the cache.
class PreRopeTestCodec : public KvCodec {
 public:
  PreRopeTestCodec() {
    cpu::RopeParams rp;
    rp.rope_dim = kShape.head_dim;
    freqs_ = cpu::RopeFrequencies(rp);
  }
  std::string name() const override { return "test-prerope"; }
  const KvShape& shape() const override { return kShape; }
  int page_tokens() const override { return 4; }
  int residual_tokens() const override { return 8; }
  bool needs_pre_rope_keys() const override { return true; }
  size_t LayerPageBytes() const override { return 2 * 4 * Row() * sizeof(float) + 4; }
  size_t FixedBytes() const override { return 1000; }
  void EncodePage(int layer, int first_pos, const float* k, const float* v,
                  uint8_t* dst) const override {
    std::memcpy(dst, k, 4 * Row() * sizeof(float));
    std::memcpy(dst + 4 * Row() * sizeof(float), v, 4 * Row() * sizeof(float));
    std::memcpy(dst + 8 * Row() * sizeof(float), &first_pos, 4);
  }
  void AttendPagesFrom(int layer, const uint8_t* const* pages, int first_pos, int num_tokens,
                       const float* q, int q_pos, SoftmaxState* state) const override {
    for (int j = 0; j * 4 < num_tokens; ++j) {
      std::vector<float> k(4 * Row()), v(4 * Row());
      DecodePage(layer, first_pos + j * 4, pages[j], k.data(), v.data());
      AttendDense(kShape, q, k.data(), v.data(), std::min(4, num_tokens - j * 4), state);
    }
  }
  void DecodePage(int layer, int first_pos, const uint8_t* src, float* k_rope,
                  float* v) const override {
    int stored_pos;
    std::memcpy(&stored_pos, src + 8 * Row() * sizeof(float), 4);
    EXPECT_EQ(stored_pos, first_pos);
    std::memcpy(k_rope, src, 4 * Row() * sizeof(float));
    std::memcpy(v, src + 4 * Row() * sizeof(float), 4 * Row() * sizeof(float));
    std::vector<int32_t> pos = {first_pos, first_pos + 1, first_pos + 2, first_pos + 3};
    cpu::ApplyRope(k_rope, 4, kShape.num_kv_heads, kShape.head_dim, pos.data(), freqs_);
  }

 private:
  static int Row() { return kShape.num_kv_heads * kShape.head_dim; }
  std::vector<float> freqs_;
};

TEST(PagedKvCacheTest, GenericCodecWithResidualWindowAndPreRopeKeys) {
  auto cache = MakePagedKvCache(std::make_unique<PreRopeTestCodec>(), 30, 2);
  const KvCacheSpec& spec = cache->spec();
  EXPECT_TRUE(spec.needs_pre_rope_keys);
  EXPECT_EQ(spec.page_bytes, 2 * (2 * 4 * 128 * 4 + 4));
  EXPECT_EQ(spec.slot_bytes, size_t(2) * 3 * 12 * 128 * 2);  // k, v, k pre-rope; ring of 8 + 4
  EXPECT_EQ(cache->total_bytes(), 30 * spec.page_bytes + 2 * spec.slot_bytes + 1000);
  EXPECT_EQ(CodedTokens(spec, 11), 0);
  EXPECT_EQ(CodedTokens(spec, 12), 4);
  EXPECT_EQ(CodedTokens(spec, 15), 4);
  EXPECT_EQ(CodedTokens(spec, 16), 8);
  std::vector<int32_t> blocks(25);
  for (int i = 0; i < 25; ++i) blocks[i] = 24 - i;
  TestSeq s = MakeSeq(100, 9, blocks, 1);
  // pages hold rope(fp16(k_pre)), the ring fp16(rope(k)); both are within fp16 error of k.
  std::mt19937_64 rng(3);
  double err = StepAndCompare(*cache, s, 0, 37, rng, s.k, s.v);
  for (int t = 37; t < 60; ++t) err = std::max(err, StepAndCompare(*cache, s, t, 1, rng, s.k, s.v));
  err = std::max(err, StepAndCompare(*cache, s, 60, 40, rng, s.k, s.v));
  EXPECT_LT(err, 5e-3);
}

// a lossy codec (kivi 2-bit) through chunks of any size attends exactly as token-by-token
// decoding: each query sees codes below CodedTokens(q + 1) and fp16 from there on, never the
// codes of its recent neighbours (which would happen if a 300-token chunk flushed them first).
// with a sink, the first page stays fp16 for good.
void CheckChunkedEqualsTokenByToken(int sink_tokens) {
  const int len = 420;
  TestSeq a = MakeSeq(len, 11, {}, 0);
  TestSeq b = MakeSeq(len, 11, {}, 1);
  std::vector<int32_t> blocks(len / 32 + 1);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
  std::vector<int32_t> blocks_b(blocks.rbegin(), blocks.rend());
  for (TestSeq* t : {&a, &b}) t->ref.num_blocks = static_cast<int>(blocks.size());
  a.ref.block_table = blocks.data();
  b.ref.block_table = blocks_b.data();
  const int pages = static_cast<int>(blocks.size());
  auto chunked = MakePagedKvCache(MakeKiviCodec(kShape, 2), pages, 2, sink_tokens);
  auto stepped = MakePagedKvCache(MakeKiviCodec(kShape, 2), pages, 2, sink_tokens);
  const int row = kShape.num_kv_heads * kShape.head_dim;
  // memory: per layer a ring of 128 + 32 tokens and the sink, k and v, fp16.
  EXPECT_EQ(chunked->spec().sink_tokens, sink_tokens);
  EXPECT_EQ(chunked->spec().slot_bytes,
            size_t(kShape.num_layers) * 2 * (160 + sink_tokens) * row * sizeof(uint16_t));
  const int qrow = kShape.num_heads * kShape.head_dim;
  std::mt19937_64 rng(5);
  const std::vector<float> q = Random(size_t(len) * qrow, rng);
  std::vector<float> out_chunked(q.size()), out_stepped(q.size());
  // chunks 300 + 120 in `chunked`; 420 single steps in `stepped`.
  for (auto [from, n] : {std::pair{0, 300}, std::pair{300, 120}}) {
    a.ref.num_cached = from;
    for (int l = 0; l < kShape.num_layers; ++l) {
      chunked->Append(l, a.ref, n, nullptr, a.k.data() + size_t(from) * row,
                      a.v.data() + size_t(from) * row);
      chunked->Attend(l, a.ref, n, q.data() + size_t(from) * qrow,
                      out_chunked.data() + size_t(from) * qrow);
    }
  }
  for (int t = 0; t < len; ++t) {
    b.ref.num_cached = t;
    for (int l = 0; l < kShape.num_layers; ++l) {
      stepped->Append(l, b.ref, 1, nullptr, b.k.data() + size_t(t) * row,
                      b.v.data() + size_t(t) * row);
      stepped->Attend(l, b.ref, 1, q.data() + size_t(t) * qrow,
                      out_stepped.data() + size_t(t) * qrow);
    }
  }
  double worst = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    worst = std::max(worst, double(std::abs(out_chunked[i] - out_stepped[i])));
  }
  EXPECT_LT(worst, 1e-6);
  // the last layer's last query against float64 attention over the fp16 sink, the decoded
  // pages after it and the fp16 ring; attention over fp16 everywhere differs (codes matter).
  const int layer = kShape.num_layers - 1, last = len - 1;
  const int coded = CodedTokens(chunked->spec(), len);
  std::vector<float> k_ref = RoundHalf(a.k), v_ref = RoundHalf(a.v);
  const std::vector<float> k_fp16 = k_ref, v_fp16 = v_ref;
  std::vector<float> k_dec(size_t(32) * row), v_dec(k_dec.size());
  auto kivi = MakeKiviCodec(kShape, 2);
  for (int p = sink_tokens / 32; p < coded / 32; ++p) {
    kivi->DecodePage(layer, p * 32, chunked->page_slice(blocks[p], layer), k_dec.data(),
                     v_dec.data());
    std::copy(k_dec.begin(), k_dec.end(), k_ref.begin() + size_t(p) * 32 * row);
    std::copy(v_dec.begin(), v_dec.end(), v_ref.begin() + size_t(p) * 32 * row);
  }
  const float* q_last = q.data() + size_t(last) * qrow;
  const float* got = out_chunked.data() + size_t(last) * qrow;
  std::vector<double> want = NaiveAttention(kShape, q_last, k_ref, v_ref, last);
  std::vector<double> fp16 = NaiveAttention(kShape, q_last, k_fp16, v_fp16, last);
  double err = 0, diff = 0;
  for (int j = 0; j < qrow; ++j) {
    err = std::max(err, std::abs(want[j] - got[j]));
    diff = std::max(diff, std::abs(fp16[j] - got[j]));
  }
  EXPECT_LT(err, 1e-4) << "sink " << sink_tokens;
  EXPECT_GT(diff, 1e-3) << "sink " << sink_tokens;
}

TEST(PagedKvCacheTest, ChunkedPrefillOfLossyCodecEqualsTokenByToken) {
  CheckChunkedEqualsTokenByToken(0);
  CheckChunkedEqualsTokenByToken(32);
}

}  // namespace
}  // namespace vqserve
