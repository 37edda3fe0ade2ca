#ifndef VQSERVE_KERNELS_CUDA_COMMON_MMA_OPS_CUH_
#define VQSERVE_KERNELS_CUDA_COMMON_MMA_OPS_CUH_

// tensor-core and fp16-packing helpers shared by the mma decode kernels (kivi staged, vecinfer
// tensor-core) and the prefill kernels.

#include <cuda_fp16.h>

#include <cstdint>

namespace vqserve::cuda {

// two floats -> packed fp16 pair (x in the low half), rounded to nearest.
__device__ __forceinline__ uint32_t PackHalf2(float x, float y) {
  __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&h);
}

// c (16 x 8 fp32) += a (16 x 16 fp16, row) . b (16 x 8 fp16, col).
__device__ __forceinline__ void Mma16816(float* c, uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_COMMON_MMA_OPS_CUH_
