#ifndef VQSERVE_KERNELS_CUDA_ENCODE_VECINFER_ENCODE_H_
#define VQSERVE_KERNELS_CUDA_ENCODE_VECINFER_ENCODE_H_

// the flush of one page to vecinfer codes on the gpu: keys smoothed and hadamard-rotated (or
// -pca: transformed by T), then
// every sub-vector replaced by the index of its nearest centroid (8- or 12-bit codes), written
// in the page layout of docs/kv_formats.md.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace vqserve::cuda {

struct VecInferEncodeParams {
  const float* k = nullptr;       // (32, num_kv_heads, head_dim) keys after rope
  const float* v = nullptr;       // (32, num_kv_heads, head_dim)
  const float* lambda = nullptr;  // (num_kv_heads, head_dim) this layer's smoothing factors
  bool hadamard = true;           // rotate keys by the orthonormal walsh-hadamard transform
  // this layer's centroids: k (D / k_sub_dim, 2^k_code_bits, k_sub_dim), v (D / v_sub_dim,
  // 2^v_code_bits, v_sub_dim) fp32; kv head h's at + h * *_head_stride floats (0 when shared).
  const float* k_codebook = nullptr;
  const float* v_codebook = nullptr;
  int64_t k_codebook_head_stride = 0;
  int64_t v_codebook_head_stride = 0;
  int k_sub_dim = 4;
  int v_sub_dim = 4;
  int k_code_bits = 8;  // 8 or 12
  int v_code_bits = 8;
  // -pca keys (kernels/cuda/kv_step/vecinfer_kv_step.h VecInferLayerCodec), null otherwise:
  // y = k T with this layer's k_transform (num_kv_heads, D, D) in place of lambda and hadamard,
  // each sub-vector m of size k_dims[h * Mk + m] coded against its book (the books hold
  // centroids plus (mean T), so the mean need not be subtracted).
  const float* k_transform = nullptr;
  const int32_t* k_dims = nullptr;
  int k_codes = 0;  // Mk, key codes a token and head (-pca keys: any number <= D); 0: D / k_sub_dim
  int num_kv_heads = 0;
  int head_dim = 0;      // a power of two, <= 256
  // the page's layer slice: Kcodes[H][32] rows of Mk codes, then Vcodes[H][32] rows of Mv.
  uint8_t* dst = nullptr;
};

// encodes one page (32 tokens); empty string on success.
std::string LaunchVecInferEncodePage(const VecInferEncodeParams& params, cudaStream_t stream);

// encodes `count` pages at once: page i's rows at params.k / params.v + i * 32 * num_kv_heads *
// head_dim floats, its codes to params.dst + page_ids[i] * page_bytes bytes. page_ids is in
// device memory and read by the kernel, so a captured cuda graph replays with the ids of its
// step; it may be null for one page, written at params.dst.
std::string LaunchVecInferEncodePages(const VecInferEncodeParams& params, const int32_t* page_ids,
                                      int64_t page_bytes, int count, cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_ENCODE_VECINFER_ENCODE_H_
