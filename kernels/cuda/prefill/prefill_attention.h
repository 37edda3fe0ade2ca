#ifndef VQSERVE_KERNELS_CUDA_PREFILL_PREFILL_ATTENTION_H_
#define VQSERVE_KERNELS_CUDA_PREFILL_PREFILL_ATTENTION_H_

// causal attention of a step's new tokens (prefill chunks, or any mix of sequences) over an
// fp16 paged kv cache on the device, read after the step's append: the query at position p of
// a sequence attends to its positions 0 .. p. with step.q_tiles (prefill_tiles.h) on the tensor
// cores (tiled_prefill.cuh: fp16 q and probabilities, fp32 sums); else the reference kernel, one
// warp per (token, query head), online softmax in fp32.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/kv_step/paged_kv_step.h"

namespace vqserve::cuda {

// q: (num_tokens, num_heads, head_dim) fp32 after rope, token t's row at q + t * q_token_stride;
// out: (num_tokens, num_heads, head_dim) fp32, token t's row at out + t * out_token_stride.
// head_dim <= 128 and a multiple of 32; scale = 1/sqrt(head_dim).
std::string LaunchPrefillAttention(const PagedKvStep& step, const float* q,
                                   int64_t q_token_stride, float* out, int64_t out_token_stride,
                                   int num_heads, float scale, cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_PREFILL_PREFILL_ATTENTION_H_
