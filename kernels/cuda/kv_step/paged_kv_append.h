#ifndef VQSERVE_KERNELS_CUDA_KV_STEP_PAGED_KV_APPEND_H_
#define VQSERVE_KERNELS_CUDA_KV_STEP_PAGED_KV_APPEND_H_

// appends a step's new keys and values to an fp16 paged kv cache on the device, with the
// flush policy of runtime/kv/kv_cache.h: positions below CodedTokens(total) live in pages, the
// rest in the sequence's residual ring.

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/kv_step/paged_kv_step.h"

namespace vqserve::cuda {

// copies ring tokens of earlier steps whose page completes in this step, positions
// [coded_before, min(num_cached, coded_after)) of each sequence, into their pages. runs before
// LaunchPagedKvAppend (whose ring writes may reuse those ring rows). max_flush: host bound on
// the tokens any sequence flushes.
std::string LaunchPagedKvFlush(const PagedKvStep& step, int max_flush, cudaStream_t stream);

// k, v: (num_tokens, num_kv_heads, head_dim) fp32, token t's row at k + t * token_stride
// (k after rope). writes token t to its page when tok_pos[t] < coded_after of its sequence,
// else to ring row tok_pos[t] % ring_tokens.
std::string LaunchPagedKvAppend(const PagedKvStep& step, const float* k, const float* v,
                                int64_t token_stride, cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_KV_STEP_PAGED_KV_APPEND_H_
