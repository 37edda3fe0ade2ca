#ifndef VQSERVE_KERNELS_CUDA_COMMON_VECINFER_CODES_CUH_
#define VQSERVE_KERNELS_CUDA_COMMON_VECINFER_CODES_CUH_

// vecinfer code rows (docs/kv_formats.md): m codes of `bits` bits per token, 8-bit codes one
// byte each, 12-bit codes two to three bytes (c0 | c1 << 12, little-endian) along m.

#include <cstdint>

#include "kernels/cuda/common/code12.cuh"

namespace vqserve::cuda {

// bytes of one row of m codes (m even for 12-bit codes).
__host__ __device__ inline int VecInferRowBytes(int m, int bits) { return m * bits / 8; }

// code m of a row.
__device__ inline int VecInferCode(const uint8_t* row, int m, int bits) {
  return bits == 8 ? row[m] : Code12(row, m);
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_COMMON_VECINFER_CODES_CUH_
