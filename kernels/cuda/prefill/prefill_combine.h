#ifndef VQSERVE_KERNELS_CUDA_PREFILL_PREFILL_COMBINE_H_
#define VQSERVE_KERNELS_CUDA_PREFILL_PREFILL_COMBINE_H_

// the log-sum-exp merge of the tensor-core prefill kernel's key splits (tiled_prefill.cuh).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace vqserve::cuda {

// work: `splits` partials of every (step token t, query head h), PrefillWorkFloats of
// prefill_tiles.h: o[split][t][h][head_dim] (unnormalized, fp32) then ml[split][t][h][2] (the
// running max in log2 units, -inf for a split with no keys, and the sum of exp2(score - max)).
// out row of token t, head h: out + t * out_stride + h * head_dim = sum_s w_s o_s / sum_s w_s l_s
// with w_s = exp2(m_s - max_s m_s). head_dim <= 128, a multiple of 32.
cudaError_t LaunchPrefillCombine(const float* work, int splits, int num_tokens, int num_heads,
                                 int head_dim, float* out, int64_t out_stride,
                                 cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_PREFILL_PREFILL_COMBINE_H_
