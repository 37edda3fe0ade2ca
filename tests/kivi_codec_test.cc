// kivi codec: quantization error bound in float64, attention on codes vs dequantize-then-attend,
// and flushes through the paged cache.
#include "runtime/kv/kivi_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "tests/util/codec_check.h"

namespace vqserve {
namespace {

using testing::CheckPagedDecode;
using testing::CodesVsDequantized;
using testing::SyntheticKv;

KvShape Shape(int layers, int kv_heads, int heads, int head_dim) {
  return KvShape{layers, kv_heads, heads, head_dim};
}

TEST(KiviCodecTest, RoundTripWithinHalfAStepOfFloat64MinMax) {
  for (int bits : {2, 4}) {
    for (int D : {64, 128}) {
      KvShape s = Shape(1, 2, 4, D);
      auto codec = MakeKiviCodec(s, bits);
      const int P = codec->page_tokens(), H = 2;
      std::vector<float> k, v;
      SyntheticKv(s, P, 17, &k, &v);
      std::vector<uint8_t> page(codec->LayerPageBytes());
      codec->EncodePage(0, 0, k.data(), v.data(), page.data());
      std::vector<float> dk(k.size()), dv(v.size());
      codec->DecodePage(0, 0, page.data(), dk.data(), dv.data());
      const double levels = (1 << bits) - 1;
      // keys: per (head, channel) over the page's tokens.
      for (int h = 0; h < H; ++h) {
        for (int c = 0; c < D; ++c) {
          double lo = 1e30, hi = -1e30;
          for (int t = 0; t < P; ++t) {
            lo = std::min(lo, double(k[(t * H + h) * D + c]));
            hi = std::max(hi, double(k[(t * H + h) * D + c]));
          }
          double step = (hi - lo) / levels;
          for (int t = 0; t < P; ++t) {
            size_t i = (t * H + h) * D + c;
            EXPECT_LE(std::fabs(dk[i] - k[i]), 0.5 * step * 1.01 + 2e-3 * (std::fabs(lo) + step))
                << bits << " " << D;
          }
        }
        // values: per (head, token) in groups of 32 channels.
        for (int t = 0; t < P; ++t) {
          for (int g = 0; g < D / 32; ++g) {
            double lo = 1e30, hi = -1e30;
            for (int c = g * 32; c < g * 32 + 32; ++c) {
              lo = std::min(lo, double(v[(t * H + h) * D + c]));
              hi = std::max(hi, double(v[(t * H + h) * D + c]));
            }
            double step = (hi - lo) / levels;
            for (int c = g * 32; c < g * 32 + 32; ++c) {
              size_t i = (t * H + h) * D + c;
              EXPECT_LE(std::fabs(dv[i] - v[i]), 0.5 * step * 1.01 + 2e-3 * (std::fabs(lo) + step));
            }
          }
        }
      }
      // bytes: 2 fp16 per key channel and per value group, plus the packed codes.
      EXPECT_EQ(codec->LayerPageBytes(),
                size_t(H) * (4 * D + 4 * P * D / 32 + 2 * P * D * bits / 8));
    }
  }
}

TEST(KiviCodecTest, AttentionOnCodesEqualsDequantizeThenAttend) {
  for (int bits : {2, 4}) {
    for (int D : {64, 128}) {
      for (auto [kv, heads] : {std::pair{1, 1}, {3, 9}, {2, 8}, {4, 4}}) {
        KvShape s = Shape(1, kv, heads, D);
        auto codec = MakeKiviCodec(s, bits);
        for (int n : {32, 100, 300}) {
          std::vector<float> k, v, q, unused;
          SyntheticKv(s, n, 21 + n, &k, &v);
          KvShape qs = s;
          qs.num_kv_heads = heads;
          SyntheticKv(qs, 1, 5, &q, &unused);
          for (float& x : q) x *= 0.2f;
          EXPECT_LT(CodesVsDequantized(*codec, 0, k.data(), v.data(), n, q.data()), 1e-5)
              << bits << " D" << D << " kv" << kv << " n" << n;
        }
      }
    }
  }
}

TEST(KiviCodecTest, PagedCacheFlushBoundaries) {
  for (int n : {127, 128, 129, 160, 161, 1000, 8000}) {
    for (int chunk : {1, 37}) {
      if (chunk == 1 && n >= 1000) continue;
      auto r = CheckPagedDecode(MakeKiviCodec(Shape(2, 2, 4, 64), 4), n, chunk, 3);
      auto r2 = CheckPagedDecode(MakeKiviCodec(Shape(1, 1, 3, 128), 2), n, chunk, 4);
      EXPECT_LT(r.vs_dequantized, 1e-4) << n << " chunk " << chunk;
      std::printf("n %d chunk %d: kivi4 %.2e / %.3f, kivi2 %.2e / %.3f\n", n, chunk, r.vs_dequantized, r.vs_exact, r2.vs_dequantized, r2.vs_exact);
      EXPECT_LT(r.vs_exact, 0.15) << n << " chunk " << chunk;
      EXPECT_LT(r2.vs_dequantized, 1e-4) << n << " chunk " << chunk;
      EXPECT_LT(r2.vs_exact, 0.6) << n << " chunk " << chunk;
    }
  }
}

}  // namespace
}  // namespace vqserve
