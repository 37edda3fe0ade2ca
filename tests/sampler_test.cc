// sampler statistics over many draws against the softmax it is meant to sample.
#include "runtime/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/scaled_exp.h"

namespace vqserve {
namespace {

std::vector<float> Logits(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// float64 softmax of logits / t.
std::vector<double> Probs(const std::vector<float>& logits, double t) {
  double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double z = 0;
  for (size_t i = 0; i < p.size(); ++i) z += (p[i] = std::exp((logits[i] - mx) / t));
  for (double& x : p) x /= z;
  return p;
}

std::vector<int> Order(const std::vector<double>& p) {
  std::vector<int> idx(p.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int(i);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return p[a] > p[b]; });
  return idx;
}

TEST(SamplerTest, GreedyPicksArgmaxAndReportsLogprobs) {
  std::vector<float> logits = Logits(1000, 1);
  SamplingParams params;
  params.logprobs = 5;
  Sampler sampler(params);
  SampledToken t = sampler.Sample(logits, {});
  const int arg = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
  EXPECT_EQ(t.id, arg);
  std::vector<double> p = Probs(logits, 1.0);
  EXPECT_NEAR(t.logprob, std::log(p[arg]), 1e-4);
  std::vector<int> order = Order(p);
  ASSERT_EQ(t.top_logprobs.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(t.top_logprobs[i].first, order[i]);
    EXPECT_NEAR(t.top_logprobs[i].second, std::log(p[order[i]]), 1e-4);
  }
}

// argmax_only exactly when Sample is the plain argmax: greedy without penalty or logprobs.
TEST(SamplerTest, ArgmaxOnlyForPlainGreedy) {
  std::vector<float> logits = Logits(1000, 4);
  const int arg = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
  SamplingParams greedy;
  greedy.top_k = 5;  // ignored at temperature 0
  greedy.top_p = 0.5f;
  Sampler plain(greedy);
  EXPECT_TRUE(plain.argmax_only());
  EXPECT_EQ(plain.Sample(logits, {}).id, arg);
  SamplingParams p = greedy;
  p.repetition_penalty = 1.0f;
  EXPECT_TRUE(Sampler(p).argmax_only());
  p.repetition_penalty = 0.0f;  // off, as Sample reads it
  EXPECT_TRUE(Sampler(p).argmax_only());
  p.repetition_penalty = 1.3f;
  EXPECT_FALSE(Sampler(p).argmax_only());
  p = greedy;
  p.logprobs = 1;
  EXPECT_FALSE(Sampler(p).argmax_only());
  p = greedy;
  p.temperature = 0.7f;
  EXPECT_FALSE(Sampler(p).argmax_only());
}

// without logprobs the sampler skips the softmax: the same token, no log-probabilities; with a
// repetition penalty the caller's logits stay as they were.
TEST(SamplerTest, LogprobsOnlyWhenAskedAndLogitsUntouched) {
  std::vector<float> logits = Logits(1000, 3);
  const std::vector<float> before = logits;
  SamplingParams with;
  with.logprobs = 2;
  SamplingParams without;
  SampledToken a = Sampler(with).Sample(logits, {});
  SampledToken b = Sampler(without).Sample(logits, {});
  EXPECT_EQ(a.id, b.id);
  EXPECT_LT(a.logprob, 0.0f);
  EXPECT_EQ(a.top_logprobs.size(), 2u);
  EXPECT_EQ(b.logprob, 0.0f);
  EXPECT_TRUE(b.top_logprobs.empty());
  SamplingParams penalty;
  penalty.repetition_penalty = 5.0f;
  const int arg = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const std::vector<int32_t> history = {arg};
  SampledToken c = Sampler(penalty).Sample(logits, history);
  EXPECT_EQ(logits, before);
  EXPECT_NE(c.id, arg);  // the best, positive, divided by 5 falls behind the second
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  std::vector<float> logits = {3.0f, 2.5f, -1.0f, -1.2f};
  SamplingParams params;
  params.repetition_penalty = 1.5f;
  Sampler sampler(params);
  // 3 / 1.5 = 2 < 2.5: token 1 wins once token 0 is penalized.
  EXPECT_EQ(sampler.Sample(logits, std::vector<int32_t>{0, 0}).id, 1);
  // all negative: -1 * 1.5 = -1.5 < -1.2.
  std::vector<float> neg = {-5.0f, -5.0f, -1.0f, -1.2f};
  EXPECT_EQ(sampler.Sample(neg, std::vector<int32_t>{2}).id, 3);
}

TEST(SamplerTest, TemperatureFrequenciesMatchSoftmax) {
  std::vector<float> logits = Logits(20, 2);
  const double t = 0.7;
  SamplingParams params;
  params.temperature = float(t);
  params.seed = 11;
  Sampler sampler(params);
  const int draws = 100000;
  std::vector<int> count(20, 0);
  for (int i = 0; i < draws; ++i) ++count[sampler.Sample(logits, {}).id];
  std::vector<double> p = Probs(logits, t);
  for (int i = 0; i < 20; ++i) {
    const double sigma = std::sqrt(p[i] * (1 - p[i]) / draws);
    EXPECT_NEAR(double(count[i]) / draws, p[i], 5 * sigma + 1e-4) << i;
  }
}

TEST(SamplerTest, TopKTopPMinPSetsAreRespected) {
  std::vector<float> logits = Logits(2000, 3);
  std::vector<double> p = Probs(logits, 1.0);
  std::vector<int> order = Order(p);
  // top-k: only the k most likely.
  {
    SamplingParams params;
    params.temperature = 1.0f;
    params.top_k = 7;
    params.seed = 1;
    Sampler sampler(params);
    std::set<int> allowed(order.begin(), order.begin() + 7), seen;
    for (int i = 0; i < 2000; ++i) seen.insert(sampler.Sample(logits, {}).id);
    for (int id : seen) EXPECT_TRUE(allowed.count(id)) << id;
    EXPECT_EQ(seen.size(), 7u);
  }
  // top-p: the smallest most-likely prefix whose mass reaches p.
  {
    SamplingParams params;
    params.temperature = 1.0f;
    params.top_p = 0.5f;
    params.seed = 2;
    Sampler sampler(params);
    size_t cut = 0;
    double cum = 0;
    while (cum < 0.5) cum += p[order[cut++]];
    std::set<int> allowed(order.begin(), order.begin() + cut);
    std::map<int, int> seen;
    const int draws = 10000;
    for (int i = 0; i < draws; ++i) ++seen[sampler.Sample(logits, {}).id];
    for (auto [id, c] : seen) EXPECT_TRUE(allowed.count(id)) << id;
    // renormalized frequencies within the kept set.
    for (int id : allowed) {
      const double want = p[id] / cum;
      EXPECT_NEAR(double(seen[id]) / draws, want, 5 * std::sqrt(want * (1 - want) / draws) + 1e-3);
    }
  }
  // min-p: tokens at least min_p times as likely as the best.
  {
    SamplingParams params;
    params.temperature = 1.0f;
    params.min_p = 0.2f;
    params.seed = 3;
    Sampler sampler(params);
    std::set<int> seen;
    for (int i = 0; i < 2000; ++i) seen.insert(sampler.Sample(logits, {}).id);
    for (int id : seen) EXPECT_GE(p[id], 0.2 * p[order[0]] * (1 - 1e-6)) << id;
    size_t expected = 0;
    for (double x : p) expected += x >= 0.2 * p[order[0]];
    EXPECT_EQ(seen.size(), expected);
  }
}

// top-p through the sampler's candidates above a weight threshold and its growing sorted
// prefixes picks what a full sort picks: the same token for the same seed, whether the cut
// falls among the few above the threshold, in the first 512 candidates, the first 4096, the
// first 32768 or past them (logits of spread sd over a 128256-token vocabulary).
TEST(SamplerTest, TopPEqualsAFullSortWhereverTheCutFalls) {
  const int n = 128256;
  for (float sd : {8.0f, 2.5f, 2.0f, 0.5f, 0.05f}) {
    std::mt19937_64 gen(7);
    std::normal_distribution<float> dist(0.0f, sd);
    std::vector<float> logits(n);
    for (float& x : logits) x = dist(gen);
    for (float top_p : {0.5f, 0.9f}) {
      SamplingParams params;
      params.temperature = 0.7f;
      params.top_p = top_p;
      params.seed = 5;
      Sampler sampler(params);
      // the reference: the sampler's arithmetic (its weights) with one full sort.
      std::mt19937_64 rng(params.seed);
      const float inv_t = 1.0f / params.temperature;
      const float mx = *std::max_element(logits.begin(), logits.end()) * inv_t;
      std::vector<float> w(n);
      const double z = cpu::ScaledExp(logits.data(), inv_t, mx, w.data(), n);
      std::vector<std::pair<float, int32_t>> c(n);
      for (int i = 0; i < n; ++i) c[i] = {w[i], i};
      std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
      });
      int cut = n;
      double cum = 0.0;
      for (int i = 0; i < n; ++i) {
        cum += c[i].first;
        if (cum >= top_p * z) {
          cut = i + 1;
          break;
        }
      }
      for (int draw = 0; draw < 3; ++draw) {
        double mass = 0.0;
        for (int i = 0; i < cut; ++i) mass += c[i].first;
        const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * mass;
        int32_t want = c[cut - 1].second;
        double acc = 0.0;
        for (int i = 0; i < cut; ++i) {
          acc += c[i].first;
          if (u < acc) {
            want = c[i].second;
            break;
          }
        }
        EXPECT_EQ(sampler.Sample(logits, {}).id, want)
            << "sd " << sd << " top_p " << top_p << " cut " << cut << " draw " << draw;
      }
    }
  }
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferentTokens) {
  std::vector<float> logits = Logits(500, 4);
  SamplingParams params;
  params.temperature = 1.0f;
  params.top_p = 0.95f;
  params.seed = 42;
  auto draw = [&](uint64_t seed) {
    SamplingParams p = params;
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(s.Sample(logits, out).id);
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

}  // namespace
}  // namespace vqserve
