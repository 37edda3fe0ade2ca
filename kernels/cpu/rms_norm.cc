#include "kernels/cpu/rms_norm.h"

#include <cmath>

namespace vqserve::cpu {

void RmsNorm(const float* x, const float* weight, float* y, int n, int dim, float eps) {
  for (int r = 0; r < n; ++r) {
    const float* xr = x + static_cast<long>(r) * dim;
    float* yr = y + static_cast<long>(r) * dim;
    double sum = 0.0;  // double: the row sum must not drift for large dims
    for (int i = 0; i < dim; ++i) sum += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum / dim + eps));
    for (int i = 0; i < dim; ++i) yr[i] = xr[i] * inv * weight[i];
  }
}

}  // namespace vqserve::cpu
