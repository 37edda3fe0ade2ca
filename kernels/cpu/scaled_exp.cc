#include "kernels/cpu/scaled_exp.h"

#include <immintrin.h>

namespace vqserve::cpu {
namespace {

constexpr float kLow = -87.3f, kHigh = 88.3762626647949f;

// exp of 8 floats: x = n ln2 + r, |r| <= ln2 / 2 (ln2 split in two for the reduction),
// e^r by cephes' degree-6 polynomial, 2^n placed in the exponent.
__m256 Exp8(__m256 x) {
  const __m256 below = _mm256_cmp_ps(x, _mm256_set1_ps(kLow), _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kLow)), _mm256_set1_ps(kHigh));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(below, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

// x * s - b with the product rounded to float first: the barrier keeps the compiler from
// contracting the two into one fma (gcc does for intrinsics too).
__m256 ScaledShifted(__m256 x, __m256 s, __m256 b) {
  __m256 p = _mm256_mul_ps(x, s);
  asm("" : "+x"(p));
  return _mm256_sub_ps(p, b);
}

}  // namespace

double ScaledExp(const float* x, float scale, float shift, float* w, int64_t n) {
  const __m256 s = _mm256_set1_ps(scale), b = _mm256_set1_ps(shift);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = Exp8(ScaledShifted(_mm256_loadu_ps(x + i), s, b));
    _mm256_storeu_ps(w + i, v);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  alignas(32) double lanes[8];
  _mm256_store_pd(lanes, lo);
  _mm256_store_pd(lanes + 4, hi);
  double sum = 0.0;
  for (double l : lanes) sum += l;
  if (i < n) {  // the tail through the same vector code, padded
    alignas(32) float in[8] = {}, out[8];
    for (int64_t k = i; k < n; ++k) in[k - i] = x[k];
    _mm256_store_ps(out, Exp8(ScaledShifted(_mm256_load_ps(in), s, b)));
    for (int64_t k = i; k < n; ++k) {
      w[k] = out[k - i];
      sum += out[k - i];
    }
  }
  return sum;
}

}  // namespace vqserve::cpu
