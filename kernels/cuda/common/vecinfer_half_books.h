#ifndef VQSERVE_KERNELS_CUDA_COMMON_VECINFER_HALF_BOOKS_H_
#define VQSERVE_KERNELS_CUDA_COMMON_VECINFER_HALF_BOOKS_H_

// fp16 code-major copies of vecinfer codebooks, made once per layer (at cache creation) for
// DecodeAttentionParams::vq_{k,v}_codebook_f16: the layout the tensor-core decode kernel keeps in
// shared memory, so that it copies the value book instead of converting it per block.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace vqserve::cuda {

// the shapes whose decode kernel (vecinfer_mma_decode.cu) reads these copies: 8-bit codes
// at head_dim 128 or 64 with (key, value) sub-vectors of (4, 4), (8, 8) or (4, 8) dims.
inline bool VecInferTakesHalfBooks(int head_dim, int k_sub_dim, int v_sub_dim, int k_code_bits,
                                   int v_code_bits) {
  const bool subs = (k_sub_dim == 4 && v_sub_dim == 4) || (v_sub_dim == 8 && (k_sub_dim == 8 || k_sub_dim == 4));
  return (head_dim == 128 || head_dim == 64) && k_code_bits == 8 && v_code_bits == 8 && subs;
}

// halves one fp16 copy of `num_books` books takes (8-bit codes, any sub-vector size).
inline int64_t VecInferHalfBookElems(int num_books, int head_dim) {
  return int64_t{num_books} * 256 * head_dim;
}

// src: num_books books (head_dim / d, 256, d) fp32 with d = sub_dim (4 or 8), book i at src +
// i * head_dim * 256 floats; dst: (num_books, 256, head_dim / d, d) fp16 bits, element (i, code,
// m, j) = __float2half_rn(src element (i, m, code, j)). "" or the cuda error.
std::string LaunchVecInferHalfBooks(const float* src, int num_books, int head_dim, int sub_dim, uint16_t* dst,
                                    cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_COMMON_VECINFER_HALF_BOOKS_H_
