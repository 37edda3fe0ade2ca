#include "runtime/kv/commvq_math.h"

#include <immintrin.h>

#include <cmath>
#include <limits>

#include "runtime/kv/commvq_codebooks.h"

namespace vqserve::commvq {
namespace {

// dot product of n floats (avx2 + fma, scalar tail).
inline float Dot(const float* a, const float* b, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  }
  acc0 = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  float r = _mm_cvtss_f32(s);
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

constexpr int kE = kCommVqKeyEntries;

}  // namespace

std::vector<double> RopeFrequencies(int head_dim, float rope_theta) {
  std::vector<double> f(head_dim / 2);
  for (int j = 0; j < head_dim / 2; ++j) {
    // rounded to float first, as the model's rope table (kernels/cpu/rope.h) holds them.
    f[j] = static_cast<float>(std::pow(static_cast<double>(rope_theta), -2.0 * j / head_dim));
  }
  return f;
}

void CentreNorms(const float* book, int pair_stride, int g, float* base) {
  // entry a as interleaved (x, y) over the group, and its perpendicular (y, -x).
  std::vector<float> ent(kE * 2 * g), perp(kE * 2 * g);
  float norms[kE];
  for (int a = 0; a < kE; ++a) {
    const float* src = book + size_t{1} * a * pair_stride * 2;
    for (int k = 0; k < 2 * g; k += 2) {
      ent[a * 2 * g + k] = src[k];
      ent[a * 2 * g + k + 1] = src[k + 1];
      perp[a * 2 * g + k] = src[k + 1];
      perp[a * 2 * g + k + 1] = -src[k];
    }
    norms[a] = Dot(&ent[a * 2 * g], &ent[a * 2 * g], 2 * g);
  }
  // |zeta_A + i zeta_B|^2 = |zeta_A|^2 + |zeta_B|^2 + 2 (y_A x_B - x_A y_B).
  for (int b = 0; b < kE; ++b) {
    for (int a = 0; a < kE; ++a) {
      base[a + kE * b] =
          norms[a] + norms[b] + 2.0f * Dot(&perp[a * 2 * g], &ent[b * 2 * g], 2 * g);
    }
  }
}

void ProjectOnEntries(const float* z, int n, const float* book, int pair_stride, int g,
                      float* u) {
  // columns 0..63: (x_A, y_A); 64..127: (-y_B, x_B), so u = z . column; stored transposed
  // (2g, 128) so each target is 2g broadcasts times 16 vector fmas.
  constexpr int kW = 2 * kE;
  std::vector<float> cols(size_t{1} * 2 * g * kW);
  for (int a = 0; a < kE; ++a) {
    const float* src = book + size_t{1} * a * pair_stride * 2;
    for (int j = 0; j < g; ++j) {
      cols[(2 * j) * kW + a] = src[2 * j];
      cols[(2 * j + 1) * kW + a] = src[2 * j + 1];
      cols[(2 * j) * kW + kE + a] = -src[2 * j + 1];
      cols[(2 * j + 1) * kW + kE + a] = src[2 * j];
    }
  }
  for (int i = 0; i < n; ++i) {
    const float* zi = z + size_t{1} * i * 2 * g;
    float* ui = u + size_t{1} * i * kW;
    for (int half = 0; half < kW; half += 64) {
      __m256 acc[8];
      for (int l = 0; l < 8; ++l) acc[l] = _mm256_setzero_ps();
      for (int k = 0; k < 2 * g; ++k) {
        const __m256 zk = _mm256_set1_ps(zi[k]);
        const float* c = &cols[size_t{1} * k * kW + half];
        for (int l = 0; l < 8; ++l) acc[l] = _mm256_fmadd_ps(zk, _mm256_loadu_ps(c + 8 * l), acc[l]);
      }
      for (int l = 0; l < 8; ++l) _mm256_storeu_ps(ui + half + 8 * l, acc[l]);
    }
  }
}

int NearestCode(const float* base, const float* u, float* excess) {
  alignas(32) float two_u[kE];
  for (int a = 0; a < kE; ++a) two_u[a] = 2.0f * u[a];
  __m256 best = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256i best_idx = _mm256_setzero_si256();
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int b = 0; b < kE; ++b) {
    const __m256 vb = _mm256_set1_ps(2.0f * u[kE + b]);
    const float* row = base + kE * b;
    for (int a = 0; a < kE; a += 8) {
      __m256 e = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(row + a), _mm256_load_ps(two_u + a)),
                               vb);
      __m256 lt = _mm256_cmp_ps(e, best, _CMP_LT_OQ);
      __m256i idx = _mm256_add_epi32(lane, _mm256_set1_epi32(a + kE * b));
      best = _mm256_blendv_ps(best, e, lt);
      best_idx = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(best_idx),
                                                      _mm256_castsi256_ps(idx), lt));
    }
  }
  alignas(32) float vals[8];
  alignas(32) int idxs[8];
  _mm256_store_ps(vals, best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(idxs), best_idx);
  int bi = idxs[0];
  float bv = vals[0];
  for (int l = 1; l < 8; ++l) {
    if (vals[l] < bv || (vals[l] == bv && idxs[l] < bi)) {
      bv = vals[l];
      bi = idxs[l];
    }
  }
  if (excess != nullptr) *excess = bv;
  return bi;
}

void AddCentre(const float* book, int pair_stride, int g, int code, float sign, float* z) {
  const float* ea = book + size_t{1} * (code % kE) * pair_stride * 2;
  const float* eb = book + size_t{1} * (code / kE) * pair_stride * 2;
  for (int j = 0; j < g; ++j) {
    z[2 * j] += sign * (ea[2 * j] - eb[2 * j + 1]);
    z[2 * j + 1] += sign * (ea[2 * j + 1] + eb[2 * j]);
  }
}

int NearestValueCentroid(const float* centroids, const float* x) {
  int best = 0;
  float best_d = std::numeric_limits<float>::infinity();
  const __m256 vx = _mm256_loadu_ps(x);
  for (int c = 0; c < kCommVqValueEntries; ++c) {
    __m256 d = _mm256_sub_ps(_mm256_loadu_ps(centroids + 8 * c), vx);
    d = _mm256_mul_ps(d, d);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(d), _mm256_extractf128_ps(d, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    float dist = _mm_cvtss_f32(s);
    if (dist < best_d) {
      best_d = dist;
      best = c;
    }
  }
  return best;
}

void PackCodes12(const uint16_t* codes, int n, uint8_t* dst) {
  for (int i = 0; i + 1 < n; i += 2) {
    uint32_t c0 = codes[i] & 0xfff, c1 = codes[i + 1] & 0xfff;
    uint8_t* d = dst + (i / 2) * 3;
    d[0] = static_cast<uint8_t>(c0 & 0xff);
    d[1] = static_cast<uint8_t>((c0 >> 8) | ((c1 & 0xf) << 4));
    d[2] = static_cast<uint8_t>(c1 >> 4);
  }
}

void UnpackCodes12(const uint8_t* src, int n, uint16_t* codes) {
  for (int i = 0; i + 1 < n; i += 2) {
    const uint8_t* s = src + (i / 2) * 3;
    codes[i] = static_cast<uint16_t>(s[0] | ((s[1] & 0xf) << 8));
    codes[i + 1] = static_cast<uint16_t>((s[1] >> 4) | (s[2] << 4));
  }
}

}  // namespace vqserve::commvq
