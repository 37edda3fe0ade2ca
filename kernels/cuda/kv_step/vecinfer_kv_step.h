#ifndef VQSERVE_KERNELS_CUDA_KV_STEP_VECINFER_KV_STEP_H_
#define VQSERVE_KERNELS_CUDA_KV_STEP_VECINFER_KV_STEP_H_

// the vecinfer ("vecinfer-kXvY" with 8- or 12-bit codes, docs/kv_formats.md) side of one forward step
// over a paged kv cache on the device: the query transform q~ = H (q * lambda) and causal
// attention of multi-token steps with the cpu cache's semantics (kernels/cuda/prefill/tiled_prefill.cuh;
// reference coded_prefill.cuh).
// ring appends and flush gathers are codec-independent (kernels/cuda/kv_step/ring_kv_step.h);
// kernels/cuda/encode/vecinfer_encode.h encodes the gathered pages.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/kv_step/paged_kv_step.h"
#include "kernels/cuda/kv_step/ring_kv_step.h"

namespace vqserve::cuda {

// one layer's vecinfer constants in device memory.
struct VecInferLayerCodec {
  const float* lambda = nullptr;  // (num_kv_heads, head_dim) smoothing factors
  bool hadamard = true;
  // centroids k (D / k_sub_dim, 2^k_code_bits, k_sub_dim), v (D / v_sub_dim, 2^v_code_bits,
  // v_sub_dim); kv head h's at + h * *_head_stride floats (0 when shared).
  const float* k_codebook = nullptr;
  const float* v_codebook = nullptr;
  int64_t k_codebook_head_stride = 0;
  int64_t v_codebook_head_stride = 0;
  int k_sub_dim = 4;  // 2, 4 or 8
  int v_sub_dim = 4;
  int k_code_bits = 8;  // 8 or 12
  int v_code_bits = 8;
  // -pca keys (runtime/kv/vecinfer_codec.h), null otherwise (then lambda and hadamard apply):
  // per kv head, k_transform (D, D) T (y = k T), k_inverse_t (D, D) the transpose of T^-1
  // (q~ = T^-1 q), k_dims (k_codes) sub-vector sizes and k_dim_map (D): dim i of sub-vector
  // m at offset j in it is m | j << 8 | size << 16. key book m is (2^k_code_bits, size) at
  // k_codebook + 2^k_code_bits * (the sizes before m), centroids plus (mean T) (so q~ . centroid
  // = q . the decoded key); k_codebook_head_stride is D << k_code_bits.
  const float* k_transform = nullptr;
  const float* k_inverse_t = nullptr;
  const int32_t* k_dims = nullptr;
  const int32_t* k_dim_map = nullptr;
  int k_codes = 0;  // Mk, key codes a token and head (-pca keys: any number); 0: D / k_sub_dim
};


// q (n, num_heads, head_dim) fp32 rows at q + t * q_stride -> out (same layout, rows at
// out + t * q_stride): q~ = H (q * lambda[kv head]), H the orthonormal walsh-hadamard transform
// (when codec.hadamard); with -pca keys q~ = T^-1 q. head_dim a power of two <= 256.
std::string LaunchVecInferQueryTransform(const float* q, int64_t q_stride, int n, int num_heads,
                                         int num_kv_heads, int head_dim,
                                         const VecInferLayerCodec& codec, float* out,
                                         cudaStream_t stream);

// causal attention of the step's tokens, read after LaunchSinkAppend, LaunchGatherFlushPages +
// encode and before LaunchRingAppend (positions below step.sink_tokens come from the sink
// rows). q, q_tilde: (num_tokens, num_heads, head_dim) rows at + t * q_stride;
// k, v: the step's new rows as in LaunchRingAppend; seq_tok_start: (batch) step token index of
// position num_cached[b]; out (num_tokens, num_heads, head_dim) rows at out + t * out_stride.
// head_dim <= 128, multiple of 32; the tensor-core kernel with step.q_tiles (head_dim 64 or
// 128), else the reference (one warp per token and query head).
std::string LaunchVecInferPrefillAttention(const PagedKvStep& step, const VecInferLayerCodec& codec,
                                           int residual_tokens, const float* q,
                                           const float* q_tilde, int64_t q_stride,
                                           const float* k, const float* v, int64_t kv_stride,
                                           const int32_t* seq_tok_start, float* out,
                                           int64_t out_stride, int num_heads, float scale,
                                           cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_KV_STEP_VECINFER_KV_STEP_H_
