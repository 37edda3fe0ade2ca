#ifndef VQSERVE_KERNELS_CUDA_COMMON_ROPE_ROTATION_CUH_
#define VQSERVE_KERNELS_CUDA_COMMON_ROPE_ROTATION_CUH_

// the rope rotation of a large angle (position x theta_j, exact in double): reduced mod 2 pi
// in double, then a float sincos of |r| <= pi (no slow large-argument path).

#include <cuda_runtime.h>

namespace vqserve::cuda {

// (cos a, sin a).
__device__ __forceinline__ float2 RopeRotation(double a) {
  const double k = rint(a * 0.15915494309189535);
  const double r = fma(-k, 2.4492935982947064e-16, fma(-k, 6.283185307179586, a));
  float s, c;
  sincosf(static_cast<float>(r), &s, &c);
  return make_float2(c, s);
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_COMMON_ROPE_ROTATION_CUH_
