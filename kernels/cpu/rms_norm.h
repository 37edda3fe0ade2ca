#ifndef VQSERVE_KERNELS_CPU_RMS_NORM_H_
#define VQSERVE_KERNELS_CPU_RMS_NORM_H_

namespace vqserve::cpu {

// y[r] = x[r] / sqrt(mean(x[r]²) + eps) ∘ weight, per row.
// x is (n, dim), weight is (dim), y is (n, dim); y may alias x.
void RmsNorm(const float* x, const float* weight, float* y, int n, int dim, float eps);

}  // namespace vqserve::cpu

#endif  // VQSERVE_KERNELS_CPU_RMS_NORM_H_
