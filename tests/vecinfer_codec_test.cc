// vecinfer codec: transform invariance, round trip vs float64 nearest-centroid search,
// attention on codes vs dequantize-then-attend, flushes through the paged cache.
#include "runtime/kv/vecinfer_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/hadamard.h"
#include "runtime/calibration/vecinfer_trainer.h"
#include "tests/util/codec_check.h"

namespace vqserve {
namespace {

using testing::CheckPagedDecode;
using testing::CodesVsDequantized;
using testing::SyntheticCalibration;
using testing::SyntheticKv;

std::shared_ptr<const VecInferCodebooks> Train(const KvShape& s, const std::string& name,
                                               int tokens, int iterations = 4) {
  auto opts = VecInferOptionsForName(name);
  EXPECT_TRUE(opts.ok()) << opts.status();
  opts->iterations = iterations;
  opts->num_threads = 2;
  auto cb = TrainVecInfer(SyntheticCalibration(s, tokens, 40), *opts);
  EXPECT_TRUE(cb.ok()) << cb.status();
  return std::make_shared<const VecInferCodebooks>(std::move(*cb));
}

TEST(VecInferCodecTest, NamesRoundTrip) {
  for (std::string name : {"vecinfer-k2v2", "vecinfer-k4v2", "vecinfer-k1.5v1.5", "vecinfer-k3v1",
                           "vecinfer-k2v2-nosmooth-nohadamard", "vecinfer-k2v2-perhead",
                           "vecinfer-k2v2-pca", "vecinfer-k4v2-perhead-pca", "vecinfer-k2.375v2-pca",
                           "vecinfer-k3v2-pca"}) {
    auto o = VecInferOptionsForName(name);
    ASSERT_TRUE(o.ok()) << name;
    EXPECT_EQ(VecInferCodecName(*o), name);
  }
  EXPECT_FALSE(VecInferOptionsForName("vecinfer-k5v2").ok());
  EXPECT_FALSE(VecInferOptionsForName("vecinfer-k2").ok());
  EXPECT_FALSE(VecInferOptionsForName("kivi-k2v2").ok());
  // -pca keys take any width (checked against head_dim later: 8-bit codes, head_dim * bits / 8
  // of them), the other widths the table's; -pca replaces smoothing and hadamard.
  EXPECT_FALSE(VecInferOptionsForName("vecinfer-k2.375v2").ok());
  EXPECT_FALSE(VecInferOptionsForName("vecinfer-k2v2.5-pca").ok());
  EXPECT_FALSE(VecInferOptionsForName("vecinfer-k9v2-pca").ok());
  EXPECT_FALSE(VecInferOptionsForName("vecinfer-k2v2-nosmooth-pca").ok());
  EXPECT_FALSE(VecInferOptionsForName("vecinfer-k2v2-nohadamard-pca").ok());
}

// -pca: DecodePage equals a float64 reference built from the blobs (transform in double,
// nearest centroid per variable-size sub-vector, inverse transform), at a table width (2 bits:
// 16 codes a head) and off it (2.375 bits: 19 codes); the page holds exactly those codes; the
// blobs round-trip; a k_dims blob whose sizes do not sum to head_dim is refused naming it, and
// a width that is not a whole number of codes over head_dim 64 (2.3 bits) naming the width.
class PcaKeysTest : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(PcaKeysTest, RoundTripAgainstFloat64) {
  const auto [name, mk] = GetParam();
  KvShape s{2, 2, 4, 64};
  auto cb = Train(s, name, 512);
  auto codec = MakeVecInferCodec(cb);
  const int P = 32, H = 2, D = 64;
  EXPECT_EQ(codec->LayerPageBytes(), size_t(H) * P * (mk + 16));  // mk key codes, 2-bit values
  for (int layer = 0; layer < 2; ++layer) {
    std::vector<float> k, v;
    SyntheticKv(s, P, 91 + layer, &k, &v);
    std::vector<uint8_t> page(codec->LayerPageBytes());
    codec->EncodePage(layer, 0, k.data(), v.data(), page.data());
    std::vector<float> dk(k.size()), dv(v.size());
    codec->DecodePage(layer, 0, page.data(), dk.data(), dv.data());
    for (int h = 0; h < H; ++h) {
      const size_t at = size_t(layer) * H + h;
      const float* mean = cb->k_mean.data() + at * D;
      const float* t = cb->k_transform.data() + at * D * D;
      const float* inv = cb->k_inverse.data() + at * D * D;
      const int32_t* dims = cb->k_dims.data() + at * mk;
      const float* books = cb->k_centroids.data() + at * 256 * D;
      for (int tok = 0; tok < P; ++tok) {
        const float* key = k.data() + (tok * H + h) * D;
        std::vector<double> y(D, 0.0), rec(D, 0.0);
        for (int i = 0; i < D; ++i) {
          for (int j = 0; j < D; ++j) y[j] += (double(key[i]) - mean[i]) * t[i * D + j];
        }
        int off = 0;
        for (int m = 0; m < mk; ++m) {
          const int d = dims[m];
          const float* c = books + size_t(off) * 256;
          double best = std::numeric_limits<double>::infinity();
          int arg = 0;
          for (int e = 0; e < 256; ++e) {
            double dist = 0;
            for (int j = 0; j < d; ++j) dist += std::pow(y[off + j] - c[e * d + j], 2);
            if (dist < best - 1e-9) {
              best = dist;
              arg = e;
            }
          }
          for (int j = 0; j < d; ++j) rec[off + j] = c[arg * d + j];
          off += d;
        }
        ASSERT_EQ(off, D);
        for (int i = 0; i < D; ++i) {
          double ki = mean[i];
          for (int j = 0; j < D; ++j) ki += rec[j] * inv[j * D + i];
          EXPECT_NEAR(dk[(tok * H + h) * D + i], ki, 1e-3 * (1 + std::fabs(ki))) << layer << " " << h;
        }
      }
    }
  }
  auto blobs = cb->ToBlobs();
  auto back = VecInferCodebooks::FromBlobs(s, cb->options, blobs);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->k_transform, cb->k_transform);
  EXPECT_EQ(back->k_dims, cb->k_dims);
  std::string& dims = blobs["k_dims"];
  dims[0] = static_cast<char>(dims[0] + 1);  // head 0's sizes now sum to 65
  auto bad = VecInferCodebooks::FromBlobs(s, cb->options, blobs);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("k_dims"), std::string::npos) << bad.status();
  blobs.erase("k_inverse");
  bad = VecInferCodebooks::FromBlobs(s, cb->options, blobs);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("k_inverse"), std::string::npos) << bad.status();
  auto odd = VecInferOptionsForName("vecinfer-k2.3v2-pca");
  ASSERT_TRUE(odd.ok());
  bad = VecInferCodebooks::FromBlobs(s, *odd, cb->ToBlobs());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("2.3 bits"), std::string::npos) << bad.status();
}

INSTANTIATE_TEST_SUITE_P(Widths, PcaKeysTest,
                         ::testing::Values(std::pair<const char*, int>{"vecinfer-k2v2-pca", 16},
                                           std::pair<const char*, int>{"vecinfer-k2.375v2-pca", 19}));

TEST(VecInferCodecTest, RoundTripPicksFloat64NearestCentroidsAndPacksTight) {
  KvShape s{1, 2, 4, 64};
  for (std::string name : {"vecinfer-k2v2", "vecinfer-k1.5v3", "vecinfer-k4v1-perhead"}) {
    auto cb = Train(s, name, 256);
    auto codec = MakeVecInferCodec(cb);
    const int P = 32, H = 2, D = 64;
    std::vector<float> k, v;
    SyntheticKv(s, P, 77, &k, &v);
    std::vector<uint8_t> page(codec->LayerPageBytes());
    codec->EncodePage(0, 0, k.data(), v.data(), page.data());
    std::vector<float> dk(k.size()), dv(v.size());
    codec->DecodePage(0, 0, page.data(), dk.data(), dv.data());
    auto kspec = *PqSpecForBits(cb->options.k_bits);
    auto vspec = *PqSpecForBits(cb->options.v_bits);
    // tight packing: bits/8 bytes per element.
    EXPECT_EQ(codec->LayerPageBytes(),
              size_t(H) * P * (D * kspec.code_bits / kspec.sub_dim + D * vspec.code_bits / vspec.sub_dim) / 8);
    // float64 reference: transform the key in double, pick the nearest centroid per sub-vector,
    // invert the transform; compare with DecodePage.
    for (int t = 0; t < P; ++t) {
      for (int h = 0; h < H; ++h) {
        const int g = cb->options.per_head ? h : 0;
        const int G = cb->options.per_head ? H : 1;
        const float* lam = cb->lambda.data() + h * D;
        std::vector<float> kt(D);
        for (int i = 0; i < D; ++i) kt[i] = k[(t * H + h) * D + i] / lam[i];
        kernels::FastWalshHadamard(kt.data(), D);
        std::vector<float> rec(D);
        for (int pass = 0; pass < 2; ++pass) {
          const PqSpec& sp = pass == 0 ? kspec : vspec;
          const std::vector<float>& all = pass == 0 ? cb->k_centroids : cb->v_centroids;
          const float* x = pass == 0 ? kt.data() : v.data() + (t * H + h) * D;
          const int n = 1 << sp.code_bits, d = sp.sub_dim;
          for (int m = 0; m < D / d; ++m) {
            const float* c = all.data() + ((size_t(0) * G + g) * (D / d) + m) * n * d;
            double best = std::numeric_limits<double>::infinity();
            int arg = 0;
            for (int e = 0; e < n; ++e) {
              double dist = 0;
              for (int j = 0; j < d; ++j) dist += std::pow(double(x[m * d + j]) - c[e * d + j], 2);
              if (dist < best - 1e-9) {
                best = dist;
                arg = e;
              }
            }
            for (int j = 0; j < d; ++j) rec[m * d + j] = c[arg * d + j];
          }
          if (pass == 0) {
            kernels::FastWalshHadamard(rec.data(), D);
            for (int i = 0; i < D; ++i) {
              EXPECT_NEAR(rec[i] * lam[i], dk[(t * H + h) * D + i], 1e-3 * (1 + std::fabs(rec[i] * lam[i])))
                  << name;
            }
          } else {
            for (int i = 0; i < D; ++i) EXPECT_NEAR(rec[i], dv[(t * H + h) * D + i], 1e-5) << name;
          }
        }
      }
    }
  }
}

TEST(VecInferCodecTest, AttentionOnCodesEqualsDequantizeThenAttend) {
  for (int D : {64, 128}) {
    for (auto [kv, heads] : {std::pair{1, 1}, {3, 9}, {2, 8}}) {
      KvShape s{1, kv, heads, D};
      for (std::string name : {"vecinfer-k2v2", "vecinfer-k4v1.5", "vecinfer-k3v4-nohadamard",
                               "vecinfer-k2v2-pca", "vecinfer-k2.375v2-pca"}) {
        auto codec = MakeVecInferCodec(Train(s, name, 128, 2));
        for (int n : {32, 77, 300}) {
          std::vector<float> k, v, q, unused;
          SyntheticKv(s, n, 50 + n, &k, &v);
          KvShape qs = s;
          qs.num_kv_heads = heads;
          SyntheticKv(qs, 1, 6, &q, &unused);
          for (float& x : q) x *= 0.2f;
          EXPECT_LT(CodesVsDequantized(*codec, 0, k.data(), v.data(), n, q.data()), 1e-5)
              << name << " D" << D << " kv" << kv << " n" << n;
        }
      }
    }
  }
}

// the vs-exact errors of PagedCacheFlushBoundaries measured on 2026-12-03 (deterministic data).
struct VecInferMeasured {
  int n, chunk;
  double max, rms;
};
constexpr VecInferMeasured kVecInferMeasured[] = {
    {127, 1, 0, 0},           {127, 37, 0, 0},          {128, 1, 0, 0},
    {128, 37, 0, 0},          {129, 1, 0, 0},           {129, 37, 0, 0},
    {160, 1, 0.1622, 0.1435}, {160, 37, 0.1622, 0.0413}, {161, 1, 0.1899, 0.1535},
    {161, 37, 0.1899, 0.0576}, {1000, 37, 0.3711, 0.3092}, {8000, 37, 0.5031, 0.4258},
};

// flushes through the paged cache equal float64 attention on the decoded pages and on pages the
// codec encodes outside the cache (a token flushed into the wrong page fails the latter; the
// vs-exact bound below would not catch it at 2 bits), and the vs-exact error stays within 1.25x of
// its measured value. the codebooks are trained on 2048 tokens of each layer's stream that follow
// the 8000 the test feeds (same distribution, none of the checked tokens). a codebook trained on
// the stream's own first 512 tokens (as before) flattered 1000 tokens (rms 0.24, 512 of them
// memorised by 256 centroids a sub-space) and overfitted the rest (0.53 at 8000). the error still
// grows from 1000 to 8000 tokens, as kivi-k2v2's does (no training): a 2-bit cache of these
// gaussian values is bounded against zeros (1), not against the keyless estimate (0.34 and 0.32 rms
// at 1000 and 8000 tokens, printed).
TEST(VecInferCodecTest, PagedCacheFlushBoundaries) {
  KvShape s{2, 2, 6, 64};
  auto opts = VecInferOptionsForName("vecinfer-k2v2");
  ASSERT_TRUE(opts.ok()) << opts.status();
  opts->iterations = 4;
  opts->num_threads = 2;
  auto trained = TrainVecInfer(SyntheticCalibration(s, 2048, 40, /*skip=*/8000), *opts);
  ASSERT_TRUE(trained.ok()) << trained.status();
  auto cb = std::make_shared<const VecInferCodebooks>(std::move(*trained));
  for (const VecInferMeasured& m : kVecInferMeasured) {
    const std::string at = "n " + std::to_string(m.n) + " chunk " + std::to_string(m.chunk);
    auto r = CheckPagedDecode(MakeVecInferCodec(cb), m.n, m.chunk, 40);
    EXPECT_LT(r.vs_dequantized, 1e-4) << at;
    EXPECT_LT(r.vs_standalone, 1e-4) << at;
    EXPECT_EQ(r.coded_tokens > 0, m.n >= 160) << at;
    testing::ExpectErrorAsMeasured(r, m.max, m.rms, at);
    if (r.coded_tokens > 0) EXPECT_LT(r.rms_vs_exact, 0.5) << at;
  }
}

}  // namespace
}  // namespace vqserve
