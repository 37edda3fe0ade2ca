#ifndef VQSERVE_KERNELS_CPU_SCALED_EXP_H_
#define VQSERVE_KERNELS_CPU_SCALED_EXP_H_

#include <cstdint>

namespace vqserve::cpu {

// w[i] = exp(x[i] * scale - shift) for i < n (a vocabulary's tempered softmax weights; the
// product rounded to float first, so that the largest x weighs exactly 1 when shift is its
// product), and their sum in double (8 lanes, then the lanes and the tail in order: the same
// sum on every run).
// avx2 polynomial exp (cephes' expf): within 2 ulp of std::exp where the result is a normal
// float; 0 where x[i] * scale - shift < -87.3. w may alias x.
double ScaledExp(const float* x, float scale, float shift, float* w, int64_t n);

}  // namespace vqserve::cpu

#endif  // VQSERVE_KERNELS_CPU_SCALED_EXP_H_
