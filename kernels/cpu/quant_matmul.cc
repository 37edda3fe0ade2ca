#include "kernels/cpu/quant_matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace vqserve::cpu {
namespace {

// one activation block: 32 int8 values, scale d and d·Σq.
struct BlockQ8 {
  int8_t q[32];
  float d;
  float s;
};

inline float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// quantizes one row of k floats (k % 32 == 0) into k / 32 blocks; scales stay fp32.
void QuantizeRow(const float* x, int k, BlockQ8* out) {
  for (int b = 0; b < k / 32; ++b) {
    const float* xb = x + b * 32;
    __m256 amax = _mm256_setzero_ps();
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < 32; i += 8) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + i)));
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float mx = _mm_cvtss_f32(m);
    const float d = mx / 127.0f;
    const float id = d > 0 ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = static_cast<int>(std::nearbyint(xb[i] * id));
      out[b].q[i] = static_cast<int8_t>(q);
      sum += q;
    }
    out[b].d = d;
    out[b].s = d * sum;
  }
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Σ u·s over 32 bytes (u unsigned < 128 or 0..15, s signed) as 8 int32 lanes in float.
inline __m256 DotU8S8(__m256i u, __m256i s) {
  const __m256i p16 = _mm256_maddubs_epi16(u, s);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

inline __m256i UnpackNibbles(const uint8_t* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(bytes, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
  return _mm256_set_m128i(hi, lo);
}

// dot of one weight row (nb blocks) with one quantized activation row.
float RowDot(QuantFormat f, const uint8_t* w, const BlockQ8* x, int nb) {
  __m256 acc = _mm256_setzero_ps();
  float extra = 0.0f;
  switch (f) {
    case QuantFormat::kQ8_0:
      for (int b = 0; b < nb; ++b, w += 34) {
        const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2));
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].q));
        // signed · signed through |w| · (x with w's sign).
        const __m256 dot = DotU8S8(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw));
        acc = _mm256_fmadd_ps(dot, _mm256_set1_ps(Half(w) * x[b].d), acc);
      }
      break;
    case QuantFormat::kQ4_0:
      for (int b = 0; b < nb; ++b, w += 18) {
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].q));
        const float d = Half(w);
        acc = _mm256_fmadd_ps(DotU8S8(UnpackNibbles(w + 2), qx), _mm256_set1_ps(d * x[b].d), acc);
        extra -= 8.0f * d * x[b].s;
      }
      break;
    case QuantFormat::kQ4_1:
      for (int b = 0; b < nb; ++b, w += 20) {
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].q));
        acc = _mm256_fmadd_ps(DotU8S8(UnpackNibbles(w + 4), qx),
                              _mm256_set1_ps(Half(w) * x[b].d), acc);
        extra += Half(w + 2) * x[b].s;
      }
      break;
  }
  return HorizontalSum(acc) + extra;
}

}  // namespace

size_t QuantBlockBytes(QuantFormat format) {
  switch (format) {
    case QuantFormat::kQ8_0: return 34;
    case QuantFormat::kQ4_0: return 18;
    case QuantFormat::kQ4_1: return 20;
  }
  return 0;
}

QuantMatrix QuantizeQ8_0(const float* w, int rows, int cols) {
  QuantMatrix m;
  m.format = QuantFormat::kQ8_0;
  m.rows = rows;
  m.cols = cols;
  m.data.resize(m.row_bytes() * rows);
  std::vector<BlockQ8> blocks(cols / 32);
  for (int r = 0; r < rows; ++r) {
    QuantizeRow(w + static_cast<size_t>(r) * cols, cols, blocks.data());
    uint8_t* dst = m.data.data() + m.row_bytes() * r;
    for (int b = 0; b < cols / 32; ++b, dst += 34) {
      const uint16_t d = _cvtss_sh(blocks[b].d, _MM_FROUND_TO_NEAREST_INT);
      std::memcpy(dst, &d, 2);
      std::memcpy(dst + 2, blocks[b].q, 32);
    }
  }
  return m;
}

void QuantMatMul(const float* x, const QuantMatrix& w, float* y, int n, bool accumulate) {
  const int nb = w.cols / 32;
  thread_local std::vector<BlockQ8> xq;
  xq.resize(static_cast<size_t>(n) * nb);
  for (int t = 0; t < n; ++t) QuantizeRow(x + static_cast<size_t>(t) * w.cols, w.cols, &xq[t * nb]);
  const BlockQ8* xs = xq.data();
  const size_t rb = w.row_bytes();
  // rows in chunks of 16 over the threads; every token reuses a row while it is in cache.
#pragma omp parallel for schedule(static)
  for (int r0 = 0; r0 < w.rows; r0 += 16) {
    const int r1 = std::min(w.rows, r0 + 16);
    for (int r = r0; r < r1; ++r) {
      const uint8_t* row = w.data.data() + rb * r;
      for (int t = 0; t < n; ++t) {
        const float v = RowDot(w.format, row, xs + static_cast<size_t>(t) * nb, nb);
        float& out = y[static_cast<size_t>(t) * w.rows + r];
        out = accumulate ? out + v : v;
      }
    }
  }
}

}  // namespace vqserve::cpu
