#include "kernels/cpu/silu_mul.h"

#include <cmath>

namespace vqserve::cpu {

void SiluMul(const float* gate_up, float* out, int n, int f) {
  for (int r = 0; r < n; ++r) {
    const float* g = gate_up + static_cast<long>(r) * 2 * f;
    const float* u = g + f;
    float* o = out + static_cast<long>(r) * f;
    for (int i = 0; i < f; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

}  // namespace vqserve::cpu
