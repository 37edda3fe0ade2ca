#ifndef VQSERVE_KERNELS_CUDA_KV_STEP_KIVI_KV_STEP_H_
#define VQSERVE_KERNELS_CUDA_KV_STEP_KIVI_KV_STEP_H_

// the kivi ("kivi-kBvB", docs/kv_formats.md) side of one forward step over a paged kv cache on
// the device: causal attention of multi-token steps with the cpu cache's semantics
// (kernels/cuda/prefill/tiled_prefill.cuh; reference coded_prefill.cuh), coded keys and values
// dequantized on the fly from their packed codes. ring appends and flush gathers: kernels/cuda/kv_step/ring_kv_step.h; page encoding:
// kernels/cuda/encode/kivi_encode.h; decode steps use the fused kivi decode kernel.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/kv_step/paged_kv_step.h"

namespace vqserve::cuda {

// causal attention of the step's tokens, read after LaunchSinkAppend, LaunchGatherFlushPages +
// encode and before LaunchRingAppend. bits: 2 or 4. q: (num_tokens, num_heads, head_dim) rows
// at + t * q_stride; k, v: the step's new rows (num_tokens, num_kv_heads, head_dim) at
// + t * kv_stride; seq_tok_start: (batch) step token index of position num_cached[b]; out
// (num_tokens, num_heads, head_dim) rows at out + t * out_stride. head_dim <= 128, multiple of
// 32; the tensor-core kernel with step.q_tiles (head_dim 64 or 128), else the reference.
std::string LaunchKiviPrefillAttention(const PagedKvStep& step, int bits, int residual_tokens,
                                       const float* q, int64_t q_stride, const float* k,
                                       const float* v, int64_t kv_stride,
                                       const int32_t* seq_tok_start, float* out,
                                       int64_t out_stride, int num_heads, float scale,
                                       cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_KV_STEP_KIVI_KV_STEP_H_
