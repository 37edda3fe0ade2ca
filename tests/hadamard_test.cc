// fast walsh-hadamard against the explicit sylvester matrix in float64.
#include "kernels/cpu/hadamard.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

namespace vqserve::kernels {
namespace {

// H[i][j] = (-1)^popcount(i & j) / sqrt(n), the orthonormal sylvester construction.
double Sylvester(int i, int j, int n) {
  return (std::popcount(static_cast<unsigned>(i & j)) % 2 ? -1.0 : 1.0) / std::sqrt(double(n));
}

TEST(HadamardTest, MatchesSylvesterMatrixAndIsOrthonormal) {
  for (int n = 1; n <= 256; n *= 2) {
    std::vector<std::vector<double>> cols(n);
    for (int j = 0; j < n; ++j) {
      std::vector<float> e(n, 0.0f);
      e[j] = 1.0f;
      FastWalshHadamard(e.data(), n);
      for (int i = 0; i < n; ++i) EXPECT_NEAR(e[i], Sylvester(i, j, n), 1e-6) << n;
      cols[j].assign(e.begin(), e.end());
    }
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        double dot = 0;
        for (int i = 0; i < n; ++i) dot += cols[a][i] * cols[b][i];
        EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-6);
      }
    }
  }
}

TEST(HadamardTest, PreservesDotProductsAndIsItsOwnInverse) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (int n : {64, 128}) {
    std::vector<float> q(n), k(n);
    for (int i = 0; i < n; ++i) {
      q[i] = normal(rng);
      k[i] = normal(rng) * (i % 17 == 0 ? 20.0f : 1.0f);
    }
    double ref = 0;
    for (int i = 0; i < n; ++i) ref += double(q[i]) * k[i];
    std::vector<float> tq = q, tk = k;
    FastWalshHadamard(tq.data(), n);
    FastWalshHadamard(tk.data(), n);
    double got = 0;
    for (int i = 0; i < n; ++i) got += double(tq[i]) * tk[i];
    EXPECT_NEAR(got, ref, 1e-4 * (1 + std::fabs(ref)));
    // the transform spreads the outlier channels: the max magnitude drops.
    float max_in = 0, max_out = 0;
    for (int i = 0; i < n; ++i) {
      max_in = std::max(max_in, std::fabs(k[i]));
      max_out = std::max(max_out, std::fabs(tk[i]));
    }
    EXPECT_LT(max_out, max_in);
    FastWalshHadamard(tk.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(tk[i], k[i], 1e-4 * (1 + std::fabs(k[i])));
  }
}

TEST(HadamardTest, RowsTransformEachRow) {
  std::vector<float> x(3 * 8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 5) - 2.0f;
  std::vector<float> y = x;
  FastWalshHadamardRows(y.data(), 3, 8);
  for (int r = 0; r < 3; ++r) {
    std::vector<float> one(x.begin() + r * 8, x.begin() + r * 8 + 8);
    FastWalshHadamard(one.data(), 8);
    for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(y[r * 8 + i], one[i]);
  }
  EXPECT_TRUE(IsPowerOfTwo(64));
  EXPECT_FALSE(IsPowerOfTwo(96));
}

}  // namespace
}  // namespace vqserve::kernels
