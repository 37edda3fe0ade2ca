#ifndef VQSERVE_KERNELS_CUDA_VECINFER_CODES_CUH_
#define VQSERVE_KERNELS_CUDA_VECINFER_CODES_CUH_

// vecinfer code rows (docs/kv_formats.md): m codes of `bits` bits per token, 8-bit codes one
// byte each, 12-bit codes two to three bytes (c0 | c1 << 12, little-endian) along m.

#include <cstdint>

namespace vqserve::cuda {

// bytes of one row of m codes (m even for 12-bit codes).
__host__ __device__ inline int VecInferRowBytes(int m, int bits) { return m * bits / 8; }

// code m of a row.
__device__ inline int VecInferCode(const uint8_t* row, int m, int bits) {
  if (bits == 8) return row[m];
  const uint8_t* b = row + 3 * (m >> 1);
  return (m & 1) == 0 ? b[0] | (b[1] & 0xf) << 8 : b[1] >> 4 | b[2] << 4;
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_VECINFER_CODES_CUH_
