// the eval command's passkey answer check, window placement and paired statistics
// (tools/vqserve/eval_metrics.h), the statistics against plain float64 maths written here.
#include "tools/vqserve/eval_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

namespace vqserve::cli {
namespace {

TEST(PasskeyAnswerTest, FirstRunOfDigitsMustBeTheKey) {
  EXPECT_TRUE(PasskeyAnswerCorrect(" 86806.", "86806"));
  EXPECT_TRUE(PasskeyAnswerCorrect(" 86806. Remember", "86806"));
  EXPECT_TRUE(PasskeyAnswerCorrect("The pass key is 66824", "66824"));
  // one digit too many or too few, or split, is a miss (a substring test would pass the first).
  EXPECT_FALSE(PasskeyAnswerCorrect(" 868066.", "86806"));
  EXPECT_FALSE(PasskeyAnswerCorrect(" 8680.The", "86806"));
  EXPECT_FALSE(PasskeyAnswerCorrect(" 8680 6", "86806"));
  // only the first number counts.
  EXPECT_FALSE(PasskeyAnswerCorrect(" 12 then 86806", "86806"));
  EXPECT_FALSE(PasskeyAnswerCorrect(" the pass key that is hidden inside the", "86806"));
  EXPECT_FALSE(PasskeyAnswerCorrect("", "86806"));
}


// a deterministic sample: mean 1.5, spread about 2.
std::vector<double> Sample(int n, uint64_t seed) {
  std::vector<double> x;
  uint64_t s = seed;
  for (int i = 0; i < n; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x.push_back(1.5 + 4.0 * (static_cast<double>(s >> 11) / 9007199254740992.0 - 0.5));
  }
  return x;
}

TEST(StatisticsTest, IncompleteBetaMatchesClosedForms) {
  // I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1-x)^b; I_x(a, b) = 1 - I_{1-x}(b, a).
  for (double x : {0.01, 0.2, 0.5, 0.77, 0.999}) {
    EXPECT_NEAR(RegularizedIncompleteBeta(1, 1, x), x, 1e-13);
    EXPECT_NEAR(RegularizedIncompleteBeta(3.5, 1, x), std::pow(x, 3.5), 1e-13);
    EXPECT_NEAR(RegularizedIncompleteBeta(1, 2.5, x), 1 - std::pow(1 - x, 2.5), 1e-13);
    EXPECT_NEAR(RegularizedIncompleteBeta(4.5, 0.5, x),
                1 - RegularizedIncompleteBeta(0.5, 4.5, 1 - x), 1e-13);
  }
  // I_x(1/2, 1/2) = (2/pi) asin(sqrt x).
  for (double x : {0.1, 0.5, 0.9}) {
    EXPECT_NEAR(RegularizedIncompleteBeta(0.5, 0.5, x), 2 / M_PI * std::asin(std::sqrt(x)), 1e-12);
  }
}

TEST(StatisticsTest, StudentTQuantileMatchesKnownValues) {
  // closed forms: dof 1 (Cauchy) tan(pi (p - 1/2)); dof 2 (2p-1) sqrt(2 / (1 - (2p-1)^2)).
  for (double p : {0.6, 0.9, 0.975, 0.995}) {
    EXPECT_NEAR(StudentTQuantile(p, 1), std::tan(M_PI * (p - 0.5)), 1e-9 * std::tan(M_PI * (p - 0.5)));
    const double a = 2 * p - 1;
    EXPECT_NEAR(StudentTQuantile(p, 2), a * std::sqrt(2 / (1 - a * a)), 1e-10);
  }
  // reference values from mpmath (30 digits: betainc root), two-sided 95% and 99%.
  EXPECT_NEAR(StudentTQuantile(0.975, 5), 2.5705818356363148, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.975, 15), 2.1314495455597752, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.975, 31), 2.0395134463964081, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.995, 10), 3.1692726726169507, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.025, 15), -2.1314495455597752, 1e-9);
  // dof 0: the normal quantile; a huge dof tends to it.
  EXPECT_NEAR(StudentTQuantile(0.975, 0), 1.959963984540054, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.975, 1e7), 1.959963984540054, 1e-5);
  EXPECT_EQ(StudentTQuantile(0.5, 7), 0.0);
}

TEST(StatisticsTest, MeanIntervalMatchesFloat64) {
  for (int n : {2, 5, 16, 32, 101}) {
    const std::vector<double> x = Sample(n, 7 + n);
    long double sum = 0;
    for (double v : x) sum += v;
    const double mean = static_cast<double>(sum / n);
    long double ss = 0;
    for (double v : x) ss += (v - mean) * (v - mean);
    const double sd = std::sqrt(static_cast<double>(ss / (n - 1)));
    const double se = sd / std::sqrt(static_cast<double>(n));
    const MeanInterval m = MeanWithTInterval(x);
    EXPECT_EQ(m.n, n);
    EXPECT_NEAR(m.mean, mean, 1e-12);
    EXPECT_NEAR(m.sd, sd, 1e-12);
    EXPECT_NEAR(m.se, se, 1e-12);
    const double t = StudentTQuantile(0.975, n - 1);
    EXPECT_NEAR(m.lo, mean - t * se, 1e-12);
    EXPECT_NEAR(m.hi, mean + t * se, 1e-12);
    EXPECT_LT(m.lo, m.mean);
    EXPECT_GT(m.hi, m.mean);
  }
  // one value: no spread; none: zeros.
  const MeanInterval one = MeanWithTInterval({3.0});
  EXPECT_EQ(one.mean, 3.0);
  EXPECT_EQ(one.se, 0.0);
  EXPECT_EQ(one.lo, 3.0);
  EXPECT_EQ(MeanWithTInterval({}).n, 0);
}

TEST(StatisticsTest, TIntervalCoversTheMeanAtItsLevel) {
  // normal samples of 16 (sum of 12 uniforms - 6), true mean 0: about 95% of intervals cover.
  uint64_t s = 99;
  auto uniform = [&s] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(s >> 11) / 9007199254740992.0;
  };
  int covered = 0;
  const int runs = 4000;
  for (int r = 0; r < runs; ++r) {
    std::vector<double> x;
    for (int i = 0; i < 16; ++i) {
      double z = -6;
      for (int k = 0; k < 12; ++k) z += uniform();
      x.push_back(z);
    }
    const MeanInterval m = MeanWithTInterval(x);
    covered += m.lo <= 0 && 0 <= m.hi;
  }
  EXPECT_NEAR(static_cast<double>(covered) / runs, 0.95, 0.015);
}

TEST(StatisticsTest, RelativeDeltaIsThePerWindowPerplexityRatio) {
  std::vector<PerplexityResult> codec(3), base(3);
  const double cn[] = {2000.0, 1500.0, 1800.0}, bn[] = {1900.0, 1510.0, 1700.0};
  for (int i = 0; i < 3; ++i) {
    codec[i].nll_sum = cn[i];
    codec[i].predictions = 1000 + i;
    base[i].nll_sum = bn[i];
    base[i].predictions = 1000 + i;
  }
  const std::vector<double> d = RelativePerplexityDeltaPct(codec, base);
  ASSERT_EQ(d.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const double ppl_c = std::exp(cn[i] / (1000 + i)), ppl_b = std::exp(bn[i] / (1000 + i));
    EXPECT_NEAR(d[i], 100.0 * (ppl_c / ppl_b - 1), 1e-10);
  }
  EXPECT_LT(d[1], 0);  // the codec may do better on a window
}

TEST(StatisticsTest, WilsonIntervalMatchesFloat64) {
  const double z = 1.959963984540054;
  for (auto [k, n] : {std::pair{0, 10}, {5, 10}, {9, 10}, {10, 10}, {37, 40}}) {
    double lo, hi;
    WilsonInterval(k, n, z, &lo, &hi);
    const double p = double(k) / n;
    const double c = (p + z * z / (2 * n)) / (1 + z * z / n);
    const double h = z / (1 + z * z / n) * std::sqrt(p * (1 - p) / n + z * z / (4.0 * n * n));
    EXPECT_NEAR(lo, k == 0 ? 0.0 : c - h, 1e-12);
    EXPECT_NEAR(hi, k == n ? 1.0 : c + h, 1e-12);
    EXPECT_LE(lo, p);
    EXPECT_GE(hi, p);
  }
  double lo, hi;
  WilsonInterval(10, 10, z, &lo, &hi);
  EXPECT_NEAR(lo, 0.7224672, 1e-6);  // 10/10: the lower bound is well below 1
  EXPECT_EQ(hi, 1.0);
}

TEST(WindowsTest, SpreadWindowsAreEvenAndDoNotOverlap) {
  const int ctx = 2048;
  const std::vector<EvalWindow> w = SpreadWindows({100000, 20000, 1000}, ctx, 16);
  // text 0 holds 16; text 1 only 9 (20000 / 2047); text 2 none.
  int n0 = 0, n1 = 0;
  for (const auto& x : w) (x.text == 0 ? n0 : n1)++;
  EXPECT_EQ(n0, 16);
  EXPECT_EQ(n1, 9);
  for (size_t i = 1; i < w.size(); ++i) {
    if (w[i].text != w[i - 1].text) continue;
    EXPECT_GE(w[i].begin, w[i - 1].begin + ctx - 1);
  }
  for (const auto& x : w) {
    EXPECT_LE(x.begin + ctx - 1, x.text == 0 ? 100000u : 20000u);
  }
  EXPECT_EQ(w.front().begin, 0u);
  EXPECT_EQ(w[15].begin + ctx - 1, 100000u);  // the last window ends the text
}

TEST(PasskeyTest, DepthsAndKeysAreSpreadAndStable) {
  const std::vector<double> d = SpreadDepths(10);
  ASSERT_EQ(d.size(), 10u);
  EXPECT_DOUBLE_EQ(d.front(), 0.05);
  EXPECT_DOUBLE_EQ(d.back(), 0.95);
  std::set<std::string> keys;
  for (int len : {1024, 2048, 4096, 8192}) {
    for (int t = 0; t < 10; ++t) {
      const std::string k = PasskeyKey(20261129, len, t);
      EXPECT_EQ(k.size(), 5u);
      EXPECT_EQ(k, PasskeyKey(20261129, len, t));
      keys.insert(k);
    }
  }
  EXPECT_GE(keys.size(), 38u);  // (nearly) all different
}

}  // namespace
}  // namespace vqserve::cli
