#ifndef VQSERVE_KERNELS_CUDA_COMMON_MMA_OPS_CUH_
#define VQSERVE_KERNELS_CUDA_COMMON_MMA_OPS_CUH_

// tensor-core and fp16-packing helpers shared by the mma decode kernels (fp16 and kivi staged,
// vecinfer tensor-core) and the prefill kernels.

#include <cuda_fp16.h>

#include <cstdint>

namespace vqserve::cuda {

// two floats -> packed fp16 pair (x in the low half), rounded to nearest.
__device__ __forceinline__ uint32_t PackHalf2(float x, float y) {
  __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&h);
}

// (x, y) = hi + lo with hi, lo fp16 pairs (hi rounded to nearest): x and y to ~2^-22.
__device__ __forceinline__ void SplitHalf2(float x, float y, uint32_t* hi, uint32_t* lo) {
  const __half2 h = __floats2half2_rn(x, y);
  const float2 f = __half22float2(h);
  *hi = *reinterpret_cast<const uint32_t*>(&h);
  *lo = PackHalf2(x - f.x, y - f.y);
}

// r[j] = the fragment of 8 x 8 fp16 matrix j (rows at the addresses lanes 8 j .. 8 j + 7 give)
// that lane (g = lane / 4, q = lane % 4) holds: row g, columns 2 q, 2 q + 1; kTrans: each
// matrix transposed, rows 2 q, 2 q + 1 of column g.
template <bool kTrans = false>
__device__ __forceinline__ void Ldmatrix4(uint32_t* r, const void* smem_row) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
  }
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
