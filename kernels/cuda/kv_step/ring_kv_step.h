#ifndef VQSERVE_KERNELS_CUDA_KV_STEP_RING_KV_STEP_H_
#define VQSERVE_KERNELS_CUDA_KV_STEP_RING_KV_STEP_H_

// the codec-independent side of one forward step over a coded paged kv cache with an fp16
// residual ring (vecinfer, kivi; docs/kv_formats.md): ring appends, attention-sink appends and
// the gather of pages due for a flush (fp16-rounded, as the cpu cache encodes them). the codec's
// encode kernel then turns the gathered pages into codes.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/kv_step/paged_kv_step.h"

namespace vqserve::cuda {

// k, v: (num_tokens, num_kv_heads, head_dim) fp32 (k after rope), token t's row at
// k + t * token_stride. writes the tokens with tok_pos[t] >= coded_after of their sequence to
// ring row tok_pos[t] % ring_tokens as fp16; the others are coded this step and skipped.
std::string LaunchRingAppend(const PagedKvStep& step, const float* k, const float* v,
                             int64_t token_stride, cudaStream_t stream);

// writes the tokens with tok_pos[t] < step.sink_tokens to the sink rows as fp16 (nothing when
// sink_tokens is 0). may run before attention: sink rows are never overwritten.
std::string LaunchSinkAppend(const PagedKvStep& step, const float* k, const float* v,
                             int64_t token_stride, cudaStream_t stream);

// flush: (count, 3) int32 per page due for a flush: sequence index b, first position, step
// token index of position num_cached[b]. out_k, out_v: (count, page_tokens, num_kv_heads,
// head_dim) fp32 of fp16-rounded values: positions below num_cached[b] from the ring (before
// this step's ring append), the others from rows of k, v as in LaunchRingAppend.
std::string LaunchGatherFlushPages(const PagedKvStep& step, const int32_t* flush, int count,
                                   const float* k, const float* v, int64_t token_stride,
                                   float* out_k, float* out_v, cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_KV_STEP_RING_KV_STEP_H_
