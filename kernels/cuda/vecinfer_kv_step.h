#ifndef VQSERVE_KERNELS_CUDA_VECINFER_KV_STEP_H_
#define VQSERVE_KERNELS_CUDA_VECINFER_KV_STEP_H_

// the vecinfer ("vecinfer-kXvY" with 8-bit codes, docs/kv_formats.md) side of one forward step
// over a paged kv cache on the device: fp16 residual ring appends, the gather of pages due for
// a flush (fp16-rounded, as the cpu cache encodes them; kernels/cuda/vecinfer_encode.h encodes
// them), the query transform q~ = H (q * lambda), and causal attention of multi-token steps
// with the cpu cache's semantics: the query at position p sees positions below
// CodedTokens(p + 1) (runtime/kv_cache.h) as codes and the rest in fp16, exactly as if the
// tokens had been decoded one at a time.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/paged_kv_step.h"

namespace vqserve::cuda {

// one layer's vecinfer constants in device memory.
struct VecInferLayerCodec {
  const float* lambda = nullptr;  // (num_kv_heads, head_dim) smoothing factors
  bool hadamard = true;
  // centroids k (D / k_sub_dim, 256, k_sub_dim), v (D / v_sub_dim, 256, v_sub_dim); kv head
  // h's at + h * *_head_stride floats (0 when shared).
  const float* k_codebook = nullptr;
  const float* v_codebook = nullptr;
  int64_t k_codebook_head_stride = 0;
  int64_t v_codebook_head_stride = 0;
  int k_sub_dim = 4;  // 2, 4 or 8
  int v_sub_dim = 4;
};

// k, v: (num_tokens, num_kv_heads, head_dim) fp32 (k after rope), token t's row at
// k + t * token_stride. writes the tokens with tok_pos[t] >= coded_after of their sequence to
// ring row tok_pos[t] % ring_tokens as fp16; the others are coded this step and skipped.
std::string LaunchRingAppend(const PagedKvStep& step, const float* k, const float* v,
                             int64_t token_stride, cudaStream_t stream);

// flush: (count, 3) int32 per page due for a flush: sequence index b, first position, step
// token index of position num_cached[b]. out_k, out_v: (count, page_tokens, num_kv_heads,
// head_dim) fp32 of fp16-rounded values: positions below num_cached[b] from the ring (before
// this step's ring append), the others from rows of k, v as in LaunchRingAppend.
std::string LaunchGatherFlushPages(const PagedKvStep& step, const int32_t* flush, int count,
                                   const float* k, const float* v, int64_t token_stride,
                                   float* out_k, float* out_v, cudaStream_t stream);

// q (n, num_heads, head_dim) fp32 rows at q + t * q_stride -> out (same layout, rows at
// out + t * q_stride): q~ = H (q * lambda[kv head]), H the orthonormal walsh-hadamard transform
// (when codec.hadamard). head_dim a power of two <= 256.
std::string LaunchVecInferQueryTransform(const float* q, int64_t q_stride, int n, int num_heads,
                                         int num_kv_heads, int head_dim,
                                         const VecInferLayerCodec& codec, float* out,
                                         cudaStream_t stream);

// causal attention of the step's tokens, read after LaunchGatherFlushPages + encode and before
// LaunchRingAppend. q, q_tilde: (num_tokens, num_heads, head_dim) rows at + t * q_stride;
// k, v: the step's new rows as in LaunchRingAppend; seq_tok_start: (batch) step token index of
// position num_cached[b]; out (num_tokens, num_heads, head_dim) rows at out + t * out_stride.
// one warp per (token, query head), online softmax in fp32; head_dim <= 128, multiple of 32.
std::string LaunchVecInferPrefillAttention(const PagedKvStep& step, const VecInferLayerCodec& codec,
                                           int residual_tokens, const float* q,
                                           const float* q_tilde, int64_t q_stride,
                                           const float* k, const float* v, int64_t kv_stride,
                                           const int32_t* seq_tok_start, float* out,
                                           int64_t out_stride, int num_heads, float scale,
                                           cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_VECINFER_KV_STEP_H_
