#ifndef VQSERVE_KERNELS_CUDA_COMMON_CODE12_CUH_
#define VQSERVE_KERNELS_CUDA_COMMON_CODE12_CUH_

// 12-bit codes packed two per three bytes (c0 | c1 << 12, little-endian), the packing of
// vecinfer's 12-bit code rows and of commvq's key codes (docs/kv_formats.md).

#include <cstdint>

namespace vqserve::cuda {

// code i (0 .. 4095) of a packed row.
__device__ __forceinline__ int Code12(const uint8_t* row, int i) {
  const uint8_t* b = row + 3 * (i >> 1);
  return (i & 1) == 0 ? b[0] | (b[1] & 0xf) << 8 : b[1] >> 4 | b[2] << 4;
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_COMMON_CODE12_CUH_
