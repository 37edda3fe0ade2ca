#ifndef VQSERVE_KERNELS_CUDA_KV_STEP_COMMVQ_KV_STEP_H_
#define VQSERVE_KERNELS_CUDA_KV_STEP_COMMVQ_KV_STEP_H_

// the commvq ("commvq-R", docs/kv_formats.md) side of one forward step over a paged kv cache on
// the device: the ring of pre-rope keys the flushes code, and causal attention of multi-token
// steps with the cpu cache's semantics (kernels/cuda/prefill/tiled_prefill.cuh; reference
// coded_prefill.cuh). ring appends, sink appends and flush gathers are codec-independent
// (kernels/cuda/kv_step/ring_kv_step.h);
// kernels/cuda/encode/commvq_encode.h encodes the gathered pages; single-token steps use the fused
// decode kernel (kernels/cuda/decode/commvq_decode.cuh).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/kv_step/paged_kv_step.h"

namespace vqserve::cuda {

// one layer's commvq constants in device memory (runtime/kv/commvq_codebooks.h layout).
struct CommVqLayerCodec {
  // keys (book rounds, 64, D / 2, 2), values (book value rounds, D / 8, 256, 8) fp32; kv head
  // h's at + h * *_head_stride floats.
  const float* key_books = nullptr;
  const float* value_books = nullptr;
  int64_t key_head_stride = 0;
  int64_t value_head_stride = 0;
  int key_rounds = 0;  // rounds of the page layout
  int value_rounds = 0;
  const float* rope_freqs = nullptr;  // (D / 2) theta_j = float32(theta^(-2j/D))
};

// k_pre: (num_tokens, num_kv_heads, head_dim) fp32 keys before rope, rows at + t * token_stride;
// writes the tokens with tok_pos[t] >= coded_after of their sequence to ring_pre row
// tok_pos[t] % ring_tokens (ring_pre: this layer's pre-rope ring, slot stride
// step.ring_slot_stride) as fp16, as LaunchRingAppend does for k and v.
std::string LaunchPreRopeRingAppend(const PagedKvStep& step, const float* k_pre,
                                    int64_t token_stride, uint16_t* ring_pre,
                                    cudaStream_t stream);

// causal attention of the step's tokens, read after LaunchSinkAppend, the flush gathers +
// encode and before LaunchRingAppend (as LaunchVecInferPrefillAttention): coded keys are
// rebuilt from the books and rotated by their position's rope (float64 angles; the tensor-core
// kernel reduces them in float64 and takes sine and cosine in fp32).
// q: (num_tokens, num_heads, head_dim) after rope, rows at + t * q_stride; k, v: the step's
// new rows after rope; out rows at out + t * out_stride. head_dim 64 or 128.
std::string LaunchCommVqPrefillAttention(const PagedKvStep& step, const CommVqLayerCodec& codec,
                                         int residual_tokens, const float* q, int64_t q_stride,
                                         const float* k, const float* v, int64_t kv_stride,
                                         const int32_t* seq_tok_start, float* out,
                                         int64_t out_stride, int num_heads, float scale,
                                         cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_KV_STEP_COMMVQ_KV_STEP_H_
