#ifndef VQSERVE_KERNELS_CPU_RESIDUAL_ADD_H_
#define VQSERVE_KERNELS_CPU_RESIDUAL_ADD_H_

#include <cstdint>

namespace vqserve::cpu {

// y += x elementwise. x, y are (n).
void ResidualAdd(float* y, const float* x, int64_t n);

}  // namespace vqserve::cpu

#endif  // VQSERVE_KERNELS_CPU_RESIDUAL_ADD_H_
