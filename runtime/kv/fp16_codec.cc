#include "runtime/kv/fp16_codec.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/half_convert.h"

namespace vqserve {
namespace {

// q · fp16 k over d values (d a multiple of 8 on the fast path).
inline float DotHalf(const float* q, const uint16_t* k, int d) {
  int i = 0;
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= d; i += 8) {
    __m256 kf = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + i)));
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kf, acc);
  }
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  float r = _mm_cvtss_f32(s);
  for (; i < d; ++i) r += q[i] * _cvtsh_ss(k[i]);
  return r;
}

// acc += p · fp16 v over d values.
inline void AddHalf(float* acc, float p, const uint16_t* v, int d) {
  int i = 0;
  const __m256 vp = _mm256_set1_ps(p);
  for (; i + 8 <= d; i += 8) {
    __m256 vf = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)));
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vp, vf, _mm256_loadu_ps(acc + i)));
  }
  for (; i < d; ++i) acc[i] += p * _cvtsh_ss(v[i]);
}

}  // namespace

Fp16Codec::Fp16Codec(const KvShape& shape, int page_tokens)
    : shape_(shape), page_tokens_(page_tokens) {}

size_t Fp16Codec::LayerPageBytes() const {
  return 4ull * shape_.num_kv_heads * page_tokens_ * shape_.head_dim;
}

void Fp16Codec::EncodePage(int layer, int first_pos, const float* k, const float* v,
                           uint8_t* dst) const {
  const int hkv = shape_.num_kv_heads, d = shape_.head_dim, p = page_tokens_;
  uint16_t* kd = reinterpret_cast<uint16_t*>(dst);
  uint16_t* vd = kd + static_cast<long>(hkv) * p * d;
  for (int h = 0; h < hkv; ++h) {
    for (int t = 0; t < p; ++t) {
      const long src = (static_cast<long>(t) * hkv + h) * d;
      const long out = (static_cast<long>(h) * p + t) * d;
      cpu::FloatToHalfRow(k + src, kd + out, d);
      cpu::FloatToHalfRow(v + src, vd + out, d);
    }
  }
}

void Fp16Codec::DecodePage(int layer, int first_pos, const uint8_t* src, float* k_rope,
                           float* v) const {
  const int hkv = shape_.num_kv_heads, d = shape_.head_dim, p = page_tokens_;
  const uint16_t* ks = reinterpret_cast<const uint16_t*>(src);
  const uint16_t* vs = ks + static_cast<long>(hkv) * p * d;
  for (int h = 0; h < hkv; ++h) {
    for (int t = 0; t < p; ++t) {
      const long in = (static_cast<long>(h) * p + t) * d;
      const long out = (static_cast<long>(t) * hkv + h) * d;
      cpu::HalfToFloatRow(ks + in, k_rope + out, d);
      cpu::HalfToFloatRow(vs + in, v + out, d);
    }
  }
}

void Fp16Codec::AttendPagesFrom(int layer, const uint8_t* const* pages, int first_pos,
                                int num_tokens, const float* q, int q_pos,
                                SoftmaxState* state) const {
  const int hkv = shape_.num_kv_heads, d = shape_.head_dim, p = page_tokens_;
  const int group = shape_.num_heads / hkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  float scores[256];  // page_tokens <= 256
  const int num_pages = (num_tokens + p - 1) / p;
  for (int j = 0; j < num_pages; ++j) {
    const int tn = std::min(p, num_tokens - j * p);
    const uint16_t* kp = reinterpret_cast<const uint16_t*>(pages[j]);
    const uint16_t* vp = kp + static_cast<long>(hkv) * p * d;
    for (int h = 0; h < shape_.num_heads; ++h) {
      const int g = h / group;
      const float* qh = q + static_cast<long>(h) * d;
      const uint16_t* kh = kp + static_cast<long>(g) * p * d;
      const uint16_t* vh = vp + static_cast<long>(g) * p * d;
      float mx = -std::numeric_limits<float>::infinity();
      for (int t = 0; t < tn; ++t) {
        scores[t] = DotHalf(qh, kh + static_cast<long>(t) * d, d) * scale;
        mx = scores[t] > mx ? scores[t] : mx;
      }
      const float m_old = state->m[h];
      const float m_new = m_old > mx ? m_old : mx;
      const float alpha = std::exp(m_old - m_new);
      float* acc = state->acc + static_cast<long>(h) * d;
      float l = state->l[h] * alpha;
      if (alpha != 1.0f) {
        for (int i = 0; i < d; ++i) acc[i] *= alpha;
      }
      for (int t = 0; t < tn; ++t) {
        const float pr = std::exp(scores[t] - m_new);
        l += pr;
        AddHalf(acc, pr, vh + static_cast<long>(t) * d, d);
      }
      state->m[h] = m_new;
      state->l[h] = l;
    }
  }
}

std::unique_ptr<KvCodec> MakeFp16Codec(const KvShape& shape) {
  return std::make_unique<Fp16Codec>(shape);
}

}  // namespace vqserve
