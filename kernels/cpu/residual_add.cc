#include "kernels/cpu/residual_add.h"

namespace vqserve::cpu {

void ResidualAdd(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace vqserve::cpu
