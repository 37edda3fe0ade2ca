// dequantization of every supported type against its formula, element by element, on random
// blocks, and the k-quants against the independent gguf-py dequantizer.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/gguf/ggml_type.h"
#include "tests/test_paths.h"

namespace vqserve {
namespace {

std::mt19937 rng(2024);

std::vector<uint8_t> RandomBytes(size_t n) {
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// a random finite fp16 in a sane range, stored at p.
void PutHalf(uint8_t* p, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  uint16_t h = FloatToHalf(u(rng));
  std::memcpy(p, &h, 2);
}
double Half(const uint8_t* p) { uint16_t h; std::memcpy(&h, p, 2); return HalfToFloat(h); }

// nibble i (0..31) of a 16-byte 4-bit quant array in ggml's order: low nibbles are elements
// 0..15, high nibbles 16..31.
int Nibble(const uint8_t* qs, int i) { return i < 16 ? qs[i] & 15 : qs[i - 16] >> 4; }
int Bit(const uint8_t* p, int i) { return (p[i / 8] >> (i % 8)) & 1; }

std::vector<float> DequantizeAll(GgmlType t, const std::vector<uint8_t>& b, int64_t n) {
  std::vector<float> out(n);
  Dequantize(t, b.data(), out.data(), n);
  return out;
}

constexpr int kBlocks = 64;

TEST(DequantizeTest, Q4_0) {
  auto b = RandomBytes(kBlocks * 18);
  for (int k = 0; k < kBlocks; ++k) PutHalf(&b[k * 18], -2, 2);
  auto y = DequantizeAll(GgmlType::kQ4_0, b, kBlocks * 32);
  for (int k = 0; k < kBlocks; ++k)
    for (int i = 0; i < 32; ++i)
      ASSERT_NEAR(y[k * 32 + i], Half(&b[k * 18]) * (Nibble(&b[k * 18 + 2], i) - 8), 1e-5);
}

TEST(DequantizeTest, Q4_1) {
  auto b = RandomBytes(kBlocks * 20);
  for (int k = 0; k < kBlocks; ++k) { PutHalf(&b[k * 20], -2, 2); PutHalf(&b[k * 20 + 2], -3, 3); }
  auto y = DequantizeAll(GgmlType::kQ4_1, b, kBlocks * 32);
  for (int k = 0; k < kBlocks; ++k)
    for (int i = 0; i < 32; ++i)
      ASSERT_NEAR(y[k * 32 + i], Half(&b[k * 20]) * Nibble(&b[k * 20 + 4], i) + Half(&b[k * 20 + 2]), 1e-5);
}

TEST(DequantizeTest, Q5_0AndQ5_1) {
  auto b0 = RandomBytes(kBlocks * 22);
  auto b1 = RandomBytes(kBlocks * 24);
  for (int k = 0; k < kBlocks; ++k) {
    PutHalf(&b0[k * 22], -2, 2);
    PutHalf(&b1[k * 24], -2, 2);
    PutHalf(&b1[k * 24 + 2], -2, 2);
  }
  auto y0 = DequantizeAll(GgmlType::kQ5_0, b0, kBlocks * 32);
  auto y1 = DequantizeAll(GgmlType::kQ5_1, b1, kBlocks * 32);
  for (int k = 0; k < kBlocks; ++k) {
    for (int i = 0; i < 32; ++i) {
      int q0 = Nibble(&b0[k * 22 + 6], i) | (Bit(&b0[k * 22 + 2], i) << 4);
      ASSERT_NEAR(y0[k * 32 + i], Half(&b0[k * 22]) * (q0 - 16), 1e-5);
      int q1 = Nibble(&b1[k * 24 + 8], i) | (Bit(&b1[k * 24 + 4], i) << 4);
      ASSERT_NEAR(y1[k * 32 + i], Half(&b1[k * 24]) * q1 + Half(&b1[k * 24 + 2]), 1e-5);
    }
  }
}

TEST(DequantizeTest, Q8_0) {
  auto b = RandomBytes(kBlocks * 34);
  for (int k = 0; k < kBlocks; ++k) PutHalf(&b[k * 34], -1, 1);
  auto y = DequantizeAll(GgmlType::kQ8_0, b, kBlocks * 32);
  for (int k = 0; k < kBlocks; ++k)
    for (int i = 0; i < 32; ++i)
      ASSERT_NEAR(y[k * 32 + i], Half(&b[k * 34]) * static_cast<int8_t>(b[k * 34 + 2 + i]), 1e-5);
}

TEST(DequantizeTest, F32F16BF16) {
  std::vector<float> x(257);
  std::normal_distribution<float> g(0, 3);
  for (auto& v : x) v = g(rng);
  std::vector<uint8_t> f32(x.size() * 4), f16(x.size() * 2), bf16(x.size() * 2);
  std::memcpy(f32.data(), x.data(), f32.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t h = FloatToHalf(x[i]);
    std::memcpy(&f16[2 * i], &h, 2);
    uint32_t bits; std::memcpy(&bits, &x[i], 4);
    uint16_t bb = static_cast<uint16_t>(bits >> 16);
    std::memcpy(&bf16[2 * i], &bb, 2);
  }
  auto a = DequantizeAll(GgmlType::kF32, f32, x.size());
  auto h = DequantizeAll(GgmlType::kF16, f16, x.size());
  auto bf = DequantizeAll(GgmlType::kBF16, bf16, x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(a[i], x[i]);
    EXPECT_NEAR(h[i], x[i], std::fabs(x[i]) * 1.0 / 2048 + 1e-7);  // half ulp of fp16
    EXPECT_NEAR(bf[i], x[i], std::fabs(x[i]) * 1.0 / 128);         // truncation to 8 bits
  }
}

// tensors past 2^20 elements go in chunks across the cores: every element as the element-wise
// conversion gives it (every fp16 bit pattern but NaN, subnormals included; q4_k blocks by
// chunks of 2^20 elements and a short last chunk).
TEST(DequantizeTest, LargeTensorsInChunksEqualElementWise) {
  const int64_t n = 3 * (int64_t{1} << 20) + 512;
  std::vector<uint8_t> f16(size_t(n) * 2);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h = static_cast<uint16_t>(i * 40503u);
    if ((h & 0x7C00) == 0x7C00) h &= 0x83FF;  // no inf / NaN
    std::memcpy(&f16[2 * i], &h, 2);
  }
  const std::vector<float> h = DequantizeAll(GgmlType::kF16, f16, n);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, &f16[2 * i], 2);
    ASSERT_EQ(h[i], HalfToFloat(v)) << i;
  }
  const int64_t blocks = n / 256;
  std::vector<uint8_t> q = RandomBytes(size_t(blocks) * 144);
  for (int64_t b = 0; b < blocks; ++b) {
    PutHalf(&q[b * 144], 0.001f, 0.01f);
    PutHalf(&q[b * 144 + 2], 0.001f, 0.01f);
  }
  const std::vector<float> all = DequantizeAll(GgmlType::kQ4_K, q, blocks * 256);
  std::vector<float> one(256);
  for (int64_t b = 0; b < blocks; b += 997) {
    Dequantize(GgmlType::kQ4_K, &q[b * 144], one.data(), 256);
    for (int k = 0; k < 256; ++k) ASSERT_EQ(all[b * 256 + k], one[k]) << b << " " << k;
  }
}

TEST(DequantizeTest, HalfConversionsRoundTripAndRoundToNearestEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    uint16_t v = static_cast<uint16_t>(h);
    float f = HalfToFloat(v);
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToHalf(f), v) << h;
  }
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f + 1.0f / 4096)), 1.0f);  // tie rounds to even
  EXPECT_EQ(HalfToFloat(FloatToHalf(65520.0f)), INFINITY);
  EXPECT_EQ(HalfToFloat(FloatToHalf(5.96046448e-08f)), 5.96046448e-08f);  // smallest subnormal
}

// q6_k: 256 elements; element e in half n = e/128, r = e%128: quadrant j = r/32, l = r%32.
TEST(DequantizeTest, Q6_K) {
  auto b = RandomBytes(kBlocks * 210);
  for (int k = 0; k < kBlocks; ++k) PutHalf(&b[k * 210 + 208], -0.1f, 0.1f);
  auto y = DequantizeAll(GgmlType::kQ6_K, b, kBlocks * 256);
  for (int k = 0; k < kBlocks; ++k) {
    const uint8_t* blk = &b[k * 210];
    double d = Half(blk + 208);
    for (int e = 0; e < 256; ++e) {
      int n = e / 128, r = e % 128, j = r / 32, l = r % 32;
      const uint8_t* ql = blk + 64 * n;
      const uint8_t* qh = blk + 128 + 32 * n;
      const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * n);
      // low nibble: j=0 ql[l] low, j=1 ql[l+32] low, j=2 ql[l] high, j=3 ql[l+32] high.
      int src = ql[l + (j % 2) * 32];
      int low = j < 2 ? (src & 15) : (src >> 4);
      int high = (qh[l] >> (2 * j)) & 3;
      int q = (low | (high << 4)) - 32;
      double want = d * sc[j * 2 + l / 16] * q;
      ASSERT_NEAR(y[k * 256 + e], want, 1e-5) << "block " << k << " elem " << e;
    }
  }
}

// q4_k: 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes.
TEST(DequantizeTest, Q4_K) {
  auto b = RandomBytes(kBlocks * 144);
  for (int k = 0; k < kBlocks; ++k) { PutHalf(&b[k * 144], -0.1f, 0.1f); PutHalf(&b[k * 144 + 2], -0.1f, 0.1f); }
  auto y = DequantizeAll(GgmlType::kQ4_K, b, kBlocks * 256);
  for (int k = 0; k < kBlocks; ++k) {
    const uint8_t* blk = &b[k * 144];
    const uint8_t* s = blk + 4;
    for (int e = 0; e < 256; ++e) {
      int sub = e / 32;  // 0..7
      int sc, m;
      if (sub < 4) { sc = s[sub] & 63; m = s[sub + 4] & 63; }
      else { sc = (s[sub + 4] & 15) | ((s[sub - 4] >> 6) << 4); m = (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4); }
      int byte = 32 * (sub / 2) + e % 32;
      int q = sub % 2 == 0 ? (blk[16 + byte] & 15) : (blk[16 + byte] >> 4);
      double want = Half(blk) * sc * q - Half(blk + 2) * m;
      ASSERT_NEAR(y[k * 256 + e], want, 1e-4) << e;
    }
  }
}

// q4_k, q5_k, q6_k on random blocks against the independent gguf-py dequantizer
// (tests/data/kquant_fixture.json, tools/make_kquant_fixture.py).
TEST(DequantizeTest, KQuantsMatchGgufPy) {
  std::ifstream in(testing::TestDataPath("kquant_fixture.json"));
  ASSERT_TRUE(in.good());
  const nlohmann::json fx = nlohmann::json::parse(in);
  int types = 0;
  for (const auto& c : fx["cases"]) {
    const std::string name = c["type"];
    GgmlType t = name == "Q4_K" ? GgmlType::kQ4_K : name == "Q5_K" ? GgmlType::kQ5_K
                                                                   : GgmlType::kQ6_K;
    ASSERT_TRUE(GetTypeTraits(static_cast<uint32_t>(t)).can_dequantize) << name;
    const std::string hex = c["blocks_hex"];
    std::vector<uint8_t> b(hex.size() / 2);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    const auto& want = c["values"];
    ASSERT_EQ(b.size() / GetTypeTraits(static_cast<uint32_t>(t)).type_size * 256, want.size());
    auto y = DequantizeAll(t, b, static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i) {
      const double w = want[i].get<double>();
      ASSERT_NEAR(y[i], w, 1e-6 * std::max(1.0, std::fabs(w))) << name << " element " << i;
    }
    ++types;
  }
  EXPECT_EQ(types, 3);
}

TEST(DequantizeTest, TraitsAndSizes) {
  EXPECT_EQ(TensorBytes(GgmlType::kQ4_1, 64), 40u);
  EXPECT_EQ(TensorBytes(GgmlType::kQ8_0, 32), 34u);
  EXPECT_EQ(TensorBytes(GgmlType::kF16, 10), 20u);
  EXPECT_EQ(GetTypeTraits(999).block_size, 0);
  EXPECT_STREQ(GetTypeTraits(3).name, "Q4_1");
}

}  // namespace
}  // namespace vqserve
