// the cpu reference kernels against float64 formulas.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/argmax.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/residual_add.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/scaled_exp.h"
#include "kernels/cpu/silu_mul.h"
#include "kernels/cpu/softmax.h"

namespace vqserve::cpu {
namespace {

std::vector<float> RandomVector(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(RopeTest, MatchesFloat64AdjacentPairFormula) {
  const int n = 5, heads = 3, dim = 64;
  RopeParams p;
  p.rope_dim = dim;
  p.theta = 100000.0f;
  std::vector<int32_t> pos = {0, 1, 17, 300, 8191};
  std::vector<float> x = RandomVector(n * heads * dim, 1);
  std::vector<float> y = x;
  ApplyRope(y.data(), n, heads, dim, pos.data(), RopeFrequencies(p));
  double worst = 0;
  for (int t = 0; t < n; ++t) {
    for (int h = 0; h < heads; ++h) {
      const float* a = &x[(t * heads + h) * dim];
      const float* b = &y[(t * heads + h) * dim];
      for (int i = 0; i < dim / 2; ++i) {
        const double angle = pos[t] * std::pow(100000.0, -2.0 * i / dim);
        const double e0 = a[2 * i] * std::cos(angle) - a[2 * i + 1] * std::sin(angle);
        const double e1 = a[2 * i] * std::sin(angle) + a[2 * i + 1] * std::cos(angle);
        worst = std::max({worst, std::abs(e0 - b[2 * i]), std::abs(e1 - b[2 * i + 1])});
      }
    }
  }
  // float32 frequencies times positions up to 8191: angle error ~ 8191 * 6e-8.
  EXPECT_LT(worst, 2e-3);
}

TEST(RopeTest, PartialRopeLeavesTailAlone) {
  RopeParams p;
  p.rope_dim = 32;
  std::vector<int32_t> pos = {5};
  std::vector<float> x = RandomVector(64, 2), y = x;
  ApplyRope(y.data(), 1, 1, 64, pos.data(), RopeFrequencies(p));
  for (int i = 32; i < 64; ++i) EXPECT_EQ(x[i], y[i]);
  EXPECT_NE(x[0], y[0]);
}

TEST(RopeTest, LinearScalingDividesFrequencies) {
  RopeParams p;
  p.rope_dim = 8;
  p.theta = 10000.0f;
  std::vector<float> base = RopeFrequencies(p);
  p.scaling = "linear";
  p.factor = 4.0f;
  std::vector<float> scaled = RopeFrequencies(p);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(scaled[i], std::pow(10000.0, -2.0 * i / 8) / 4, 1e-7);
  EXPECT_FLOAT_EQ(base[0], 1.0f);
}

TEST(RopeTest, Llama3ScalingFollowsWavelengthBands) {
  RopeParams p;
  p.rope_dim = 128;
  p.theta = 500000.0f;
  p.scaling = "llama3";
  p.factor = 8.0f;
  p.low_freq_factor = 1.0f;
  p.high_freq_factor = 4.0f;
  p.original_context = 8192;
  std::vector<float> f = RopeFrequencies(p);
  for (int i = 0; i < 64; ++i) {
    const double base = std::pow(500000.0, -2.0 * i / 128);
    const double wavelen = 2 * M_PI / base;
    double want;
    if (wavelen < 8192.0 / 4) {
      want = base;  // high frequency: unchanged
    } else if (wavelen > 8192.0) {
      want = base / 8;  // low frequency: divided by the factor
    } else {
      const double s = (8192.0 / wavelen - 1.0) / 3.0;
      want = s * base + (1 - s) * base / 8;
    }
    EXPECT_NEAR(f[i], want, 1e-6 * want) << i;
  }
}

TEST(RmsNormTest, MatchesFloat64) {
  const int n = 3, dim = 576;
  std::vector<float> x = RandomVector(n * dim, 3, 2.0f), w = RandomVector(dim, 4), y(n * dim);
  RmsNorm(x.data(), w.data(), y.data(), n, dim, 1e-5f);
  for (int r = 0; r < n; ++r) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int i = 0; i < dim; ++i) {
      const double want = x[r * dim + i] * inv * w[i];
      EXPECT_NEAR(y[r * dim + i], want, 1e-5 * (1 + std::abs(want)));
    }
  }
}

TEST(SiluMulTest, MatchesFloat64) {
  const int n = 2, f = 100;
  std::vector<float> gu = RandomVector(n * 2 * f, 5, 3.0f), out(n * f);
  SiluMul(gu.data(), out.data(), n, f);
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < f; ++i) {
      const double g = gu[r * 2 * f + i], u = gu[r * 2 * f + f + i];
      const double want = g / (1 + std::exp(-g)) * u;
      EXPECT_NEAR(out[r * f + i], want, 1e-5 * (1 + std::abs(want)));
    }
  }
}

TEST(SoftmaxTest, SumsToOneAndMatchesLogSoftmax) {
  std::vector<float> x = RandomVector(1000, 6, 5.0f), p = x, lp(1000);
  Softmax(p.data(), 1000);
  LogSoftmax(x.data(), lp.data(), 1000);
  double sum = 0, mx = x[0];
  for (float v : x) mx = std::max<double>(mx, v);
  double z = 0;
  for (float v : x) z += std::exp(v - mx);
  for (int i = 0; i < 1000; ++i) {
    sum += p[i];
    EXPECT_NEAR(p[i], std::exp(x[i] - mx) / z, 1e-6);
    EXPECT_NEAR(lp[i], x[i] - mx - std::log(z), 1e-4);
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

// the first index of the maximum, as std::max_element: every length around the vector widths,
// the maximum at every place, ties (the first wins), -inf and NaN.
TEST(ArgMaxTest, FirstMaximumAsMaxElementAtEveryLengthAndPlace) {
  for (int64_t n : {1, 2, 7, 8, 9, 31, 32, 33, 63, 100, 49152, 128256}) {
    std::vector<float> x = RandomVector(static_cast<size_t>(n), 10 + n);
    ASSERT_EQ(ArgMax(x.data(), n), std::max_element(x.begin(), x.end()) - x.begin()) << n;
    for (int64_t at : {int64_t{0}, n / 3, n - 1}) {
      std::vector<float> y = x;
      y[at] = 100.0f;
      EXPECT_EQ(ArgMax(y.data(), n), at) << n << " " << at;
      if (at + 1 < n) {
        y[n - 1] = 100.0f;  // a tie after it: the first
        EXPECT_EQ(ArgMax(y.data(), n), at) << n << " " << at;
      }
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> all_neg_inf(40, -inf);
  EXPECT_EQ(ArgMax(all_neg_inf.data(), 40), 0);
  std::vector<float> with_nan = RandomVector(40, 3);
  with_nan[5] = nan;
  with_nan[37] = 50.0f;
  with_nan[39] = nan;
  EXPECT_EQ(ArgMax(with_nan.data(), 40), 37);
  std::vector<float> all_nan(40, nan);
  EXPECT_EQ(ArgMax(all_nan.data(), 40), 0);
  EXPECT_EQ(ArgMax(nullptr, 0), 0);
}

// exp(x * scale - shift) against float64: within 2 ulp where the result is a normal float,
// 0 below exp(-87.3); every length around the vector width; the sum of what it wrote.
TEST(ScaledExpTest, MatchesFloat64ExpAndSumsWhatItWrote) {
  for (int64_t n : {1, 7, 8, 9, 100, 128256}) {
    std::vector<float> x = RandomVector(static_cast<size_t>(n), 20 + n, 10.0f);
    x[0] = -200.0f;  // far below: 0
    std::vector<float> w(static_cast<size_t>(n));
    const float scale = 1.0f / 0.7f, shift = 12.5f;
    const double sum = ScaledExp(x.data(), scale, shift, w.data(), n);
    double total = 0.0, worst_ulps = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      total += w[i];
      const double arg = static_cast<double>(x[i] * scale) - shift;
      const double want = std::exp(arg);
      if (arg < -87.3) {
        EXPECT_EQ(w[i], 0.0f) << i;
        continue;
      }
      // the argument's float subtraction rounds (half an ulp of it): exp moves by |arg| * 2^-24
      // relative.
      const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
      const double slack = std::fabs(arg) * 0x1.0p-24 * want / ulp;
      worst_ulps = std::max(worst_ulps, std::fabs(w[i] - want) / ulp - slack);
    }
    EXPECT_LE(worst_ulps, 2.0) << n;
    if (n == 9) {  // the largest product as the shift: weight exactly 1
      const float top = *std::max_element(x.begin(), x.end()) * scale;
      std::vector<float> v(9);
      ScaledExp(x.data(), scale, top, v.data(), 9);
      EXPECT_EQ(*std::max_element(v.begin(), v.end()), 1.0f);
    }
    EXPECT_NEAR(sum, total, 1e-12 * total + 1e-300) << n;
  }
}

TEST(MatMulTest, MatchesFloat64ForGemvAndGemm) {
  const int in = 70, out = 33;
  std::vector<float> w = RandomVector(out * in, 7);
  for (int n : {1, 4}) {
    std::vector<float> x = RandomVector(n * in, 8 + n), y(n * out, 1.0f);
    MatMul(x.data(), w.data(), y.data(), n, in, out, /*accumulate=*/true);
    for (int t = 0; t < n; ++t) {
      for (int o = 0; o < out; ++o) {
        double want = 1.0;
        for (int i = 0; i < in; ++i) want += double(x[t * in + i]) * w[o * in + i];
        EXPECT_NEAR(y[t * out + o], want, 1e-4) << n;
      }
    }
  }
}

TEST(SmallKernelsTest, EmbeddingResidualAndHalf) {
  std::vector<float> table = RandomVector(10 * 4, 9), out(2 * 4);
  std::vector<int32_t> ids = {7, 2};
  EmbeddingLookup(table.data(), 4, ids.data(), 2, out.data());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i], table[28 + i]);
    EXPECT_EQ(out[4 + i], table[8 + i]);
  }
  std::vector<float> y = {1, 2, 3}, x = {0.5f, -2, 4};
  ResidualAdd(y.data(), x.data(), 3);
  EXPECT_EQ(y, (std::vector<float>{1.5f, 0, 7}));
  // fp16 round trip of exactly representable values, and rounding of others.
  std::vector<float> v = {0.0f, 1.0f, -2.5f, 65504.0f, 1.0f / 1024, 3.14159f, 1e-8f, -7.0f, 0.1f};
  std::vector<uint16_t> h(v.size());
  std::vector<float> back(v.size());
  FloatToHalfRow(v.data(), h.data(), v.size());
  HalfToFloatRow(h.data(), back.data(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_NEAR(back[i], v[i], std::abs(v[i]) * 1.0 / 2048 + 6e-8) << i;
  }
  EXPECT_EQ(back[3], 65504.0f);
}

}  // namespace
}  // namespace vqserve::cpu

namespace vqserve::cpu {
namespace {

// a random matrix in `format` (ggml block layout) and its float64 dequantization.
QuantMatrix RandomQuant(QuantFormat format, int rows, int cols, std::vector<double>* deq) {
  std::mt19937_64 rng(17);
  QuantMatrix m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  m.data.resize(m.row_bytes() * rows);
  deq->assign(size_t(rows) * cols, 0.0);
  const size_t bb = QuantBlockBytes(format);
  for (int r = 0; r < rows; ++r) {
    for (int b = 0; b < cols / 32; ++b) {
      uint8_t* p = m.data.data() + m.row_bytes() * r + bb * b;
      const float d = 0.01f + 0.001f * (rng() % 50), mn = -0.05f * (rng() % 5);
      uint16_t hd, hm;
      FloatToHalfRow(&d, &hd, 1);
      FloatToHalfRow(&mn, &hm, 1);
      float dd, dm;
      HalfToFloatRow(&hd, &dd, 1);
      HalfToFloatRow(&hm, &dm, 1);
      std::memcpy(p, &hd, 2);
      double* out = &(*deq)[size_t(r) * cols + b * 32];
      if (format == QuantFormat::kQ8_0) {
        for (int i = 0; i < 32; ++i) {
          const int8_t q = static_cast<int8_t>(int(rng() % 255) - 127);
          p[2 + i] = static_cast<uint8_t>(q);
          out[i] = double(dd) * q;
        }
      } else {
        const int off = format == QuantFormat::kQ4_1 ? 4 : 2;
        if (format == QuantFormat::kQ4_1) std::memcpy(p + 2, &hm, 2);
        for (int i = 0; i < 16; ++i) {
          const int lo = rng() % 16, hi = rng() % 16;
          p[off + i] = static_cast<uint8_t>(lo | (hi << 4));
          out[i] = format == QuantFormat::kQ4_1 ? double(dd) * lo + dm : double(dd) * (lo - 8);
          out[16 + i] = format == QuantFormat::kQ4_1 ? double(dd) * hi + dm : double(dd) * (hi - 8);
        }
      }
    }
  }
  return m;
}

TEST(QuantMatMulTest, MatchesFloat64WithinActivationRounding) {
  const int rows = 40, cols = 128;
  for (QuantFormat f : {QuantFormat::kQ8_0, QuantFormat::kQ4_0, QuantFormat::kQ4_1}) {
    std::vector<double> w;
    QuantMatrix m = RandomQuant(f, rows, cols, &w);
    for (int n : {1, 3}) {
      std::vector<float> x = RandomVector(size_t(n) * cols, 20 + n), y(size_t(n) * rows, 0.5f);
      QuantMatMul(x.data(), m, y.data(), n, /*accumulate=*/true);
      for (int t = 0; t < n; ++t) {
        for (int r = 0; r < rows; ++r) {
          double want = 0.5, bound = 1e-4;
          for (int b = 0; b < cols / 32; ++b) {
            double amax = 0, wabs = 0;
            for (int i = 0; i < 32; ++i) {
              amax = std::max(amax, std::abs(double(x[t * cols + b * 32 + i])));
              wabs += std::abs(w[size_t(r) * cols + b * 32 + i]);
            }
            // each activation is off by at most half its block's step amax / 127.
            bound += amax / 127 / 2 * wabs * 1.01;
          }
          for (int i = 0; i < cols; ++i) want += x[t * cols + i] * w[size_t(r) * cols + i];
          EXPECT_NEAR(y[t * rows + r], want, bound) << int(f) << " n " << n << " row " << r;
        }
      }
    }
  }
}

TEST(QuantMatMulTest, QuantizeQ8_0RoundTrips) {
  const int rows = 3, cols = 64;
  std::vector<float> w = RandomVector(rows * cols, 30);
  QuantMatrix m = QuantizeQ8_0(w.data(), rows, cols);
  std::vector<float> y(rows * rows);
  // rows of w against the identity-like probe: w · e_j reproduces column j within the step.
  for (int j = 0; j < cols; ++j) {
    std::vector<float> e(cols, 0.0f);
    e[j] = 1.0f;
    std::vector<float> out(rows);
    QuantMatMul(e.data(), m, out.data(), 1);
    for (int r = 0; r < rows; ++r) {
      double amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::abs(double(w[r * cols + (j / 32) * 32 + i])));
      EXPECT_NEAR(out[r], w[r * cols + j], amax / 127 * 0.51 + amax * 1e-3) << r << " " << j;
    }
  }
}

}  // namespace
}  // namespace vqserve::cpu
