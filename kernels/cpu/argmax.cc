#include "kernels/cpu/argmax.h"

#include <immintrin.h>

#include <limits>

namespace vqserve::cpu {

int64_t ArgMax(const float* x, int64_t n) {
  // pass 1: the maximum, four vector accumulators (maxps keeps its second operand when the
  // first is NaN: NaNs never enter).
  __m256 m0 = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
    m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
    m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
  float best = lanes[0];
  for (int k = 1; k < 8; ++k) best = lanes[k] > best ? lanes[k] : best;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  // pass 2: its first place.
  const __m256 b = _mm256_set1_ps(best);
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), b, _CMP_EQ_OQ));
    if (mask != 0) return i + __builtin_ctz(static_cast<unsigned>(mask));
  }
  for (; i < n; ++i) {
    if (x[i] == best) return i;
  }
  return 0;  // all NaN, or n == 0
}

}  // namespace vqserve::cpu
