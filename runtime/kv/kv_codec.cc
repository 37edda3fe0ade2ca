#include "runtime/kv/kv_codec.h"

#include <immintrin.h>

#include <cmath>
#include <limits>
#include <vector>

namespace vqserve {
namespace {

// q · k over d floats.
inline float Dot(const float* q, const float* k, int d) {
  int i = 0;
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= d; i += 8) {
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), acc);
  }
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  float r = _mm_cvtss_f32(s);
  for (; i < d; ++i) r += q[i] * k[i];
  return r;
}

// acc = acc * a + p * v over d floats.
inline void ScaleAdd(float* acc, float a, float p, const float* v, int d) {
  int i = 0;
  const __m256 va = _mm256_set1_ps(a), vp = _mm256_set1_ps(p);
  for (; i + 8 <= d; i += 8) {
    __m256 x = _mm256_mul_ps(_mm256_loadu_ps(acc + i), va);
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vp, _mm256_loadu_ps(v + i), x));
  }
  for (; i < d; ++i) acc[i] = acc[i] * a + p * v[i];
}

}  // namespace

void AttendDense(const KvShape& shape, const float* q, const float* k, const float* v, int n,
                 SoftmaxState* state) {
  if (n <= 0) return;
  const int d = shape.head_dim, hkv = shape.num_kv_heads;
  const int group = shape.num_heads / hkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  thread_local std::vector<float> scores;
  scores.resize(n);
  for (int h = 0; h < shape.num_heads; ++h) {
    const int g = h / group;
    const float* qh = q + static_cast<long>(h) * d;
    float mx = -std::numeric_limits<float>::infinity();
    for (int t = 0; t < n; ++t) {
      scores[t] = Dot(qh, k + (static_cast<long>(t) * hkv + g) * d, d) * scale;
      mx = scores[t] > mx ? scores[t] : mx;
    }
    const float m_old = state->m[h];
    const float m_new = m_old > mx ? m_old : mx;
    const float alpha = std::exp(m_old - m_new);  // 0 when m_old is -inf
    float* acc = state->acc + static_cast<long>(h) * d;
    float l = state->l[h] * alpha;
    for (int i = 0; i < d; ++i) acc[i] *= alpha;
    for (int t = 0; t < n; ++t) {
      const float p = std::exp(scores[t] - m_new);
      l += p;
      ScaleAdd(acc, 1.0f, p, v + (static_cast<long>(t) * hkv + g) * d, d);
    }
    state->m[h] = m_new;
    state->l[h] = l;
  }
}

void FinishSoftmax(const KvShape& shape, const SoftmaxState& state, float* out) {
  const int d = shape.head_dim;
  for (int h = 0; h < shape.num_heads; ++h) {
    const float inv = state.l[h] > 0 ? 1.0f / state.l[h] : 0.0f;
    for (int i = 0; i < d; ++i) out[h * d + i] = state.acc[h * d + i] * inv;
  }
}

}  // namespace vqserve
