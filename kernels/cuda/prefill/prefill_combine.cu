// the log-sum-exp merge of the tensor-core prefill kernel's key splits (see prefill_combine.h).
#include "kernels/cuda/prefill/prefill_combine.h"

#include <cmath>

#include "kernels/cuda/decode/decode_attention_common.cuh"

namespace vqserve::cuda {
namespace {

constexpr int kCombineWarps = 4;  // warps per block, one (token, head) row each

// grid ceil(tokens * heads / kCombineWarps), kCombineWarps * 32 threads; splits <= 32.
// lane s < splits reads split s's (max, sum); lane l sums dims l, l + 32, ... over the splits.
__global__ void PrefillCombineKernel(const float* work, int splits, int num_tokens, int num_heads,
                                     int head_dim, float* out, int64_t out_stride) {
  const int row = blockIdx.x * kCombineWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rows = num_tokens * num_heads;
  if (row >= rows) return;
  const float* o = work + static_cast<int64_t>(row) * head_dim;
  const float2* ml = reinterpret_cast<const float2*>(work + static_cast<int64_t>(splits) * rows *
                                                                head_dim) + row;
  const float2 mine = lane < splits ? ml[static_cast<int64_t>(lane) * rows]
                                    : make_float2(-INFINITY, 0.0f);
  const float mx = WarpMax(mine.x);
  const float w = mine.x == -INFINITY ? 0.0f : exp2f(mine.x - mx);
  const float l = WarpSum(w * mine.y);
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  float* dst = out + static_cast<int64_t>(row / num_heads) * out_stride +
               static_cast<int64_t>(row % num_heads) * head_dim;
  for (int d = lane; d < head_dim; d += 32) {
    float acc = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float ws = __shfl_sync(0xffffffffu, w, s);
      if (ws != 0.0f) acc += ws * o[static_cast<int64_t>(s) * rows * head_dim + d];
    }
    dst[d] = acc * inv;
  }
}

}  // namespace

cudaError_t LaunchPrefillCombine(const float* work, int splits, int num_tokens, int num_heads,
                                 int head_dim, float* out, int64_t out_stride,
                                 cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(num_tokens) * num_heads;
  if (rows <= 0) return cudaSuccess;
  if (splits < 1 || splits > 32 || head_dim % 32 != 0 || head_dim > 128) {
    return cudaErrorInvalidValue;
  }
  const int blocks = static_cast<int>((rows + kCombineWarps - 1) / kCombineWarps);
  PrefillCombineKernel<<<blocks, kCombineWarps * 32, 0, stream>>>(work, splits, num_tokens,
                                                                   num_heads, head_dim, out,
                                                                   out_stride);
  return cudaGetLastError();
}

}  // namespace vqserve::cuda
