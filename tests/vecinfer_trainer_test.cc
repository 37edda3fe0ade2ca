// vecinfer calibration: the query-aware smoothing factors against a float64 recomputation, and
// the score error they are chosen to lower, against the key-only factors on the same data.
#include "runtime/calibration/vecinfer_trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/hadamard.h"
#include "runtime/kv/vecinfer_codec.h"
#include "tests/util/codec_check.h"

namespace vqserve {
namespace {

// synthetic keys (codec_check's: mostly unit channels, a few large outliers) with queries whose
// energy per channel is uneven and unrelated to the keys': channel i of query head r scaled by
// 0.1 .. 3 (fixed per layer, kv head and channel).
CalibrationData WithQueries(const KvShape& s, int tokens, uint64_t seed) {
  CalibrationData data = testing::SyntheticCalibration(s, tokens, seed);
  std::mt19937_64 rng(seed + 17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.1f, 3.0f);
  const int D = s.head_dim, QH = s.num_heads;
  for (LayerSamples& ls : data.layers) {
    std::vector<float> scale(static_cast<size_t>(s.num_kv_heads) * D);
    for (float& x : scale) x = uni(rng);
    const int group = QH / s.num_kv_heads;
    ls.q.resize(static_cast<size_t>(tokens) * QH * D);
    for (int t = 0; t < tokens; ++t) {
      for (int qh = 0; qh < QH; ++qh) {
        for (int i = 0; i < D; ++i) {
          ls.q[(static_cast<size_t>(t) * QH + qh) * D + i] =
              scale[(qh / group) * D + i] * normal(rng);
        }
      }
    }
  }
  return data;
}

VecInferOptions Options(bool query_aware) {
  auto o = VecInferOptionsForName("vecinfer-k2v2");
  EXPECT_TRUE(o.ok());
  o->iterations = 6;
  o->num_threads = 2;
  o->query_aware = query_aware;
  return *o;
}

TEST(VecInferTrainerTest, QueryAwareLambdaIsSqrtOfKeyOverQueryRms) {
  const KvShape s{2, 2, 6, 32};
  const int T = 300;
  CalibrationData data = WithQueries(s, T, 5);
  auto cb = TrainVecInfer(data, Options(true));
  ASSERT_TRUE(cb.ok()) << cb.status();
  const int D = s.head_dim, H = s.num_kv_heads, QH = s.num_heads, group = QH / H;
  for (int l = 0; l < s.num_layers; ++l) {
    const LayerSamples& ls = data.layers[l];
    for (int h = 0; h < H; ++h) {
      for (int i = 0; i < D; ++i) {
        long double kk = 0, qq = 0;
        for (int t = 0; t < T; ++t) {
          long double k = ls.k_rope[(static_cast<size_t>(t) * H + h) * D + i];
          kk += k * k;
          for (int r = 0; r < group; ++r) {
            long double q = ls.q[(static_cast<size_t>(t) * QH + h * group + r) * D + i];
            qq += q * q;
          }
        }
        // (E k^2 / E q^2)^(1/4), E over tokens (and the group's query heads).
        const double want = std::pow(static_cast<double>((kk / T) / (qq / (T * group))), 0.25);
        const double got = cb->lambda[(static_cast<size_t>(l) * H + h) * D + i];
        EXPECT_NEAR(got, want, 1e-5 * want) << "layer " << l << " head " << h << " dim " << i;
      }
    }
  }
}

TEST(VecInferTrainerTest, QueryAwareLambdaNeedsRecordedQueries) {
  const KvShape s{1, 1, 2, 32};
  CalibrationData data = testing::SyntheticCalibration(s, 64, 3);
  auto cb = TrainVecInfer(data, Options(true));
  ASSERT_FALSE(cb.ok());
  EXPECT_NE(cb.status().message().find("queries"), std::string::npos) << cb.status();
}

// mean squared score error (q . k - q . k^)^2 over held-out tokens, float64, for codebooks cb.
double ScoreMse(const VecInferCodebooks& cb, const CalibrationData& test) {
  const KvShape& s = cb.shape;
  const int D = s.head_dim, H = s.num_kv_heads, QH = s.num_heads, group = QH / H;
  auto codec = MakeVecInferCodec(std::make_shared<const VecInferCodebooks>(cb));
  const int P = codec->page_tokens();
  std::vector<uint8_t> page(codec->LayerPageBytes());
  std::vector<float> kd(static_cast<size_t>(P) * H * D), vd(kd.size());
  double se = 0;
  int64_t n = 0;
  for (int l = 0; l < s.num_layers; ++l) {
    const LayerSamples& ls = test.layers[l];
    for (int p0 = 0; p0 + P <= ls.num_tokens; p0 += P) {
      const size_t off = static_cast<size_t>(p0) * H * D;
      codec->EncodePage(l, p0, ls.k_rope.data() + off, ls.v.data() + off, page.data());
      codec->DecodePage(l, p0, page.data(), kd.data(), vd.data());
      // every query of the page's tokens against every key of the page.
      for (int tq = p0; tq < p0 + P; ++tq) {
        for (int qh = 0; qh < QH; ++qh) {
          const int h = qh / group;
          const float* q = ls.q.data() + (static_cast<size_t>(tq) * QH + qh) * D;
          for (int t = 0; t < P; ++t) {
            const float* k = ls.k_rope.data() + off + (static_cast<size_t>(t) * H + h) * D;
            const float* kh = kd.data() + (static_cast<size_t>(t) * H + h) * D;
            double d = 0;
            for (int i = 0; i < D; ++i) d += static_cast<double>(q[i]) * (k[i] - kh[i]);
            se += d * d;
            ++n;
          }
        }
      }
    }
  }
  return se / static_cast<double>(n);
}

// tokens [begin, end) of every layer of `data`.
CalibrationData Slice(const CalibrationData& data, int begin, int end) {
  CalibrationData out;
  out.shape = data.shape;
  const KvShape& s = data.shape;
  const size_t kv = static_cast<size_t>(s.num_kv_heads) * s.head_dim;
  const size_t q = static_cast<size_t>(s.num_heads) * s.head_dim;
  for (const LayerSamples& ls : data.layers) {
    LayerSamples o;
    o.k_rope.assign(ls.k_rope.begin() + begin * kv, ls.k_rope.begin() + end * kv);
    o.v.assign(ls.v.begin() + begin * kv, ls.v.begin() + end * kv);
    o.q.assign(ls.q.begin() + begin * q, ls.q.begin() + end * q);
    o.positions.assign(ls.positions.begin() + begin, ls.positions.begin() + end);
    o.num_tokens = end - begin;
    out.layers.push_back(std::move(o));
  }
  return out;
}

TEST(VecInferTrainerTest, QueryAwareLambdaLowersTheScoreError) {
  const KvShape s{2, 2, 6, 32};
  CalibrationData all = WithQueries(s, 2048 + 256, 7);
  CalibrationData train = Slice(all, 0, 2048);
  CalibrationData test = Slice(all, 2048, 2048 + 256);  // held-out tokens
  auto key_only = TrainVecInfer(train, Options(false));
  auto query_aware = TrainVecInfer(train, Options(true));
  ASSERT_TRUE(key_only.ok() && query_aware.ok());
  const double e_key = ScoreMse(*key_only, test), e_query = ScoreMse(*query_aware, test);
  std::printf("score mse: key-only lambda %.5g, query-aware %.5g\n", e_key, e_query);
  EXPECT_LT(e_query, 0.95 * e_key);  // measured 0.88x
}

}  // namespace
}  // namespace vqserve
