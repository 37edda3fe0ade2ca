#ifndef VQSERVE_KERNELS_CPU_ARGMAX_H_
#define VQSERVE_KERNELS_CPU_ARGMAX_H_

#include <cstdint>

namespace vqserve::cpu {

// the first index of the largest of x[0, n) (greedy sampling over a vocabulary's logits):
// the same index as std::max_element for inputs without NaN; NaNs are skipped (0 when all
// are NaN, or n is 0). avx2: two passes of 8-float vectors, the maximum, then its first place.
int64_t ArgMax(const float* x, int64_t n);

}  // namespace vqserve::cpu

#endif  // VQSERVE_KERNELS_CPU_ARGMAX_H_
