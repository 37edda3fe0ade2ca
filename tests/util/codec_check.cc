#include "tests/util/codec_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "runtime/gguf/ggml_type.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/kv/paged_kv_cache.h"

namespace vqserve::testing {

void SyntheticKv(const KvShape& s, int tokens, uint64_t seed, std::vector<float>* k,
                 std::vector<float>* v) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int D = s.head_dim, H = s.num_kv_heads;
  k->resize(static_cast<size_t>(tokens) * H * D);
  v->resize(k->size());
  // per (head, channel) scale: mostly ~1, a few outlier channels much larger with an offset.
  std::vector<float> scale(H * D), offset(H * D);
  for (int i = 0; i < H * D; ++i) {
    bool outlier = (i * 7919 + static_cast<int>(seed)) % 13 == 0;
    scale[i] = outlier ? 8.0f : 0.5f + 0.5f * std::fabs(normal(rng));
    offset[i] = outlier ? 4.0f : 0.0f;
  }
  for (int t = 0; t < tokens; ++t) {
    for (int i = 0; i < H * D; ++i) {
      (*k)[static_cast<size_t>(t) * H * D + i] = offset[i] + scale[i] * normal(rng);
      (*v)[static_cast<size_t>(t) * H * D + i] = 0.7f * normal(rng);
    }
  }
}

CalibrationData SyntheticCalibration(const KvShape& shape, int tokens, uint64_t seed, int skip) {
  CalibrationData data;
  data.shape = shape;
  data.layers.resize(shape.num_layers);
  const size_t row = static_cast<size_t>(shape.num_kv_heads) * shape.head_dim;
  for (int l = 0; l < shape.num_layers; ++l) {
    LayerSamples& ls = data.layers[l];
    SyntheticKv(shape, skip + tokens, seed + 100 * l, &ls.k_rope, &ls.v);
    ls.k_rope.erase(ls.k_rope.begin(), ls.k_rope.begin() + skip * row);
    ls.v.erase(ls.v.begin(), ls.v.begin() + skip * row);
    ls.num_tokens = tokens;
    for (int t = 0; t < tokens; ++t) ls.positions.push_back(t);
    // the queries' second moment per kv head (for vecinfer -pca): 0.5 I + u u^T, u ~ N(0, 1).
    std::mt19937_64 rng(seed + 100 * l + 7);
    std::normal_distribution<double> normal(0.0, 1.0);
    const int D = shape.head_dim;
    ls.q_moment.assign(static_cast<size_t>(shape.num_kv_heads) * D * D, 0.0);
    for (int h = 0; h < shape.num_kv_heads; ++h) {
      std::vector<double> u(D);
      for (double& x : u) x = normal(rng);
      double* m = ls.q_moment.data() + static_cast<size_t>(h) * D * D;
      for (int i = 0; i < D; ++i) {
        for (int j = 0; j < D; ++j) m[i * D + j] = u[i] * u[j] + (i == j ? 0.5 : 0.0);
      }
    }
  }
  return data;
}

std::vector<double> ReferenceAttention(const KvShape& s, const float* q, const float* k,
                                       const float* v, int n) {
  const int D = s.head_dim, H = s.num_kv_heads, group = s.num_heads / s.num_kv_heads;
  std::vector<double> out(static_cast<size_t>(s.num_heads) * D, 0.0);
  std::vector<double> sc(n);
  for (int qh = 0; qh < s.num_heads; ++qh) {
    const int h = qh / group;
    double mx = -std::numeric_limits<double>::infinity();
    for (int t = 0; t < n; ++t) {
      double d = 0;
      for (int i = 0; i < D; ++i) {
        d += static_cast<double>(q[qh * D + i]) * k[(static_cast<size_t>(t) * H + h) * D + i];
      }
      sc[t] = d / std::sqrt(static_cast<double>(D));
      mx = std::max(mx, sc[t]);
    }
    double sum = 0;
    for (int t = 0; t < n; ++t) {
      double p = std::exp(sc[t] - mx);
      sum += p;
      for (int i = 0; i < D; ++i) out[qh * D + i] += p * v[(static_cast<size_t>(t) * H + h) * D + i];
    }
    for (int i = 0; i < D; ++i) out[qh * D + i] /= sum;
  }
  return out;
}

double MaxHeadRelError(const KvShape& s, const std::vector<double>& a, const float* b) {
  double worst = 0;
  const int D = s.head_dim;
  for (int h = 0; h < s.num_heads; ++h) {
    double num = 0, den = 0;
    for (int i = 0; i < D; ++i) {
      double d = a[h * D + i] - b[h * D + i];
      num += d * d;
      den += a[h * D + i] * a[h * D + i];
    }
    worst = std::max(worst, std::sqrt(num / std::max(den, 1e-30)));
  }
  return worst;
}

float RoundHalf(float x) { return HalfToFloat(FloatToHalf(x)); }

double CodesVsDequantized(const KvCodec& codec, int layer, const float* k, const float* v, int n,
                          const float* q) {
  const KvShape& s = codec.shape();
  const int P = codec.page_tokens();
  const int row = s.num_kv_heads * s.head_dim;
  const int pages = (n + P - 1) / P;
  std::vector<std::vector<uint8_t>> store(pages, std::vector<uint8_t>(codec.LayerPageBytes()));
  std::vector<const uint8_t*> ptrs;
  std::vector<float> dk(static_cast<size_t>(pages) * P * row), dv(dk.size());
  std::vector<float> pk(static_cast<size_t>(P) * row), pv(pk.size());
  for (int j = 0; j < pages; ++j) {
    // the last page may be partial: pad with repeats of its first token.
    for (int t = 0; t < P; ++t) {
      int src = std::min(j * P + t, n - 1);
      std::copy_n(k + static_cast<size_t>(src) * row, row, pk.data() + t * row);
      std::copy_n(v + static_cast<size_t>(src) * row, row, pv.data() + t * row);
    }
    codec.EncodePage(layer, j * P, pk.data(), pv.data(), store[j].data());
    ptrs.push_back(store[j].data());
    codec.DecodePage(layer, j * P, store[j].data(), dk.data() + static_cast<size_t>(j) * P * row,
                     dv.data() + static_cast<size_t>(j) * P * row);
  }
  std::vector<float> m(s.num_heads, -std::numeric_limits<float>::infinity()), l(s.num_heads, 0.0f),
      acc(static_cast<size_t>(s.num_heads) * s.head_dim, 0.0f), out(acc.size());
  SoftmaxState st{m.data(), l.data(), acc.data()};
  codec.AttendPages(layer, ptrs.data(), n, q, n, &st);
  FinishSoftmax(s, st, out.data());
  return MaxHeadRelError(s, ReferenceAttention(s, q, dk.data(), dv.data(), n), out.data());
}

PagedCheck CheckPagedDecode(std::unique_ptr<KvCodec> codec, int n, int chunk, uint64_t seed) {
  const KvShape s = codec->shape();
  const int row = s.num_kv_heads * s.head_dim;
  const int qrow = s.num_heads * s.head_dim;
  std::vector<std::vector<float>> ks(s.num_layers), vs(s.num_layers);
  for (int l = 0; l < s.num_layers; ++l) SyntheticKv(s, n, seed + 100 * l, &ks[l], &vs[l]);
  std::vector<float> q, qv;
  {
    KvShape qs = s;
    qs.num_kv_heads = s.num_heads;
    SyntheticKv(qs, n, seed + 7, &q, &qv);
    for (float& x : q) x *= 0.1f;
  }
  KvCacheSpec probe;
  probe.page_tokens = codec->page_tokens();
  probe.residual_tokens = codec->residual_tokens();
  const int num_pages = PagesForTokens(probe, n) + 1;
  const KvCodec* raw_codec = codec.get();
  auto cache = MakePagedKvCache(std::move(codec), num_pages, 1);
  std::vector<int32_t> table(num_pages);
  for (int i = 0; i < num_pages; ++i) table[i] = i;
  std::vector<float> out;
  int done = 0;
  PagedCheck result;
  double err2 = 0, keyless_err2 = 0, exact2 = 0;
  while (done < n) {
    const int step = std::min(chunk, n - done);
    KvSeqRef seq{0, table.data(), num_pages, done};
    const bool last = done + step == n;
    for (int l = 0; l < s.num_layers; ++l) {
      const size_t off = static_cast<size_t>(done) * row;
      cache->Append(l, seq, step, nullptr, ks[l].data() + off, vs[l].data() + off);
      if (!last) continue;  // only the last chunk's queries are checked
      out.assign(static_cast<size_t>(step) * qrow, 0.0f);
      cache->Attend(l, seq, step, q.data() + static_cast<size_t>(done) * qrow, out.data());
      // reference keys/values for the query at pos: decoded pages below CodedTokens(pos + 1),
      // fp16-rounded inputs from there on (what token-by-token decoding would see).
      const int P = cache->spec().page_tokens;
      std::vector<float> rk(static_cast<size_t>(n) * row), rv(rk.size());
      for (size_t i = 0; i < rk.size(); ++i) {
        rk[i] = RoundHalf(ks[l][i]);
        rv[i] = RoundHalf(vs[l][i]);
      }
      // the same from pages the codec encodes itself (no cache) from the fp16-rounded inputs
      // at their positions: where the cache put each token's codes is checked against it.
      const std::vector<float> hk = rk, hv = rv;
      std::vector<float> sk = rk, sv = rv;
      std::vector<uint8_t> page(raw_codec->LayerPageBytes());
      int decoded = 0;  // tokens of rk/rv (and sk/sv) replaced by decoded pages so far
      // running sum of the values over the tokens before done, per (kv head, channel).
      std::vector<double> vsum(row, 0.0);
      for (int t = 0; t < done; ++t) {
        for (int j = 0; j < row; ++j) vsum[j] += vs[l][static_cast<size_t>(t) * row + j];
      }
      for (int i = 0; i < step; ++i) {
        const int pos = done + i;
        for (; decoded < CodedTokens(cache->spec(), pos + 1); decoded += P) {
          raw_codec->DecodePage(l, decoded, cache->page_slice(table[decoded / P], l),
                                rk.data() + static_cast<size_t>(decoded) * row,
                                rv.data() + static_cast<size_t>(decoded) * row);
          const size_t at = static_cast<size_t>(decoded) * row;
          raw_codec->EncodePage(l, decoded, hk.data() + at, hv.data() + at, page.data());
          raw_codec->DecodePage(l, decoded, page.data(), sk.data() + at, sv.data() + at);
        }
        const float* qi = q.data() + static_cast<size_t>(pos) * qrow;
        const float* oi = out.data() + static_cast<size_t>(i) * qrow;
        auto ref = ReferenceAttention(s, qi, rk.data(), rv.data(), pos + 1);
        auto exact = ReferenceAttention(s, qi, ks[l].data(), vs[l].data(), pos + 1);
        result.vs_dequantized = std::max(result.vs_dequantized, MaxHeadRelError(s, ref, oi));
        auto standalone = ReferenceAttention(s, qi, sk.data(), sv.data(), pos + 1);
        result.vs_standalone = std::max(result.vs_standalone, MaxHeadRelError(s, standalone, oi));
        result.vs_exact = std::max(result.vs_exact, MaxHeadRelError(s, exact, oi));
        for (int j = 0; j < row; ++j) vsum[j] += vs[l][static_cast<size_t>(pos) * row + j];
        const int group = s.num_heads / s.num_kv_heads;
        for (int j = 0; j < qrow; ++j) {
          const int h = j / s.head_dim / group, c = j % s.head_dim;
          const double keyless = vsum[h * s.head_dim + c] / (pos + 1);
          err2 += (oi[j] - exact[j]) * (oi[j] - exact[j]);
          keyless_err2 += (keyless - exact[j]) * (keyless - exact[j]);
          exact2 += exact[j] * exact[j];
        }
        result.coded_tokens = CodedTokens(cache->spec(), pos + 1);
      }
    }
    done += step;
  }
  result.rms_vs_exact = std::sqrt(err2 / std::max(exact2, 1e-300));
  result.keyless_rms_vs_exact = std::sqrt(keyless_err2 / std::max(exact2, 1e-300));
  return result;
}

void ExpectErrorAsMeasured(const PagedCheck& r, double measured_max, double measured_rms,
                           const std::string& label) {
  if (r.coded_tokens == 0) {
    std::printf("%s: nothing coded, vs exact max %.1e (bound 1e-3), keyless rms %.4f\n",
                label.c_str(), r.vs_exact, r.keyless_rms_vs_exact);
  } else {
    std::printf("%s: %d tokens coded, vs exact max %.4f (bound %.4f), rms %.4f (bound %.4f); "
                "keyless rms %.4f, zeros 1\n",
                label.c_str(), r.coded_tokens, r.vs_exact, kMeasuredMargin * measured_max,
                r.rms_vs_exact, kMeasuredMargin * measured_rms, r.keyless_rms_vs_exact);
  }
  if (r.coded_tokens == 0) {
    EXPECT_LT(r.vs_exact, 1e-3) << label << ": nothing coded, only fp16 rounding";
    return;
  }
  EXPECT_LE(r.vs_exact, kMeasuredMargin * measured_max) << label;
  EXPECT_LE(r.rms_vs_exact, kMeasuredMargin * measured_rms) << label;
}

}  // namespace vqserve::testing
