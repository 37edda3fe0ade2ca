// log-sum-exp merge of the split-kv partials (flash-decoding's second step).
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/decode_attention_common.cuh"
#include "kernels/cuda/decode_attention_instances.h"

namespace vqserve::cuda {
namespace {

// grid (batch * num_heads), 128 threads. slots with m = -inf hold no tokens; a head with no
// tokens at all gets zeros. launched programmatically it may start before the decode kernel
// ends: it waits for it first.
__global__ void SplitCombineKernel(const DecodeAttentionParams p, int num_slots) {
  GridDependencyWait();
  const int b = blockIdx.x / p.num_heads, h = blockIdx.x % p.num_heads;
  float mx = -INFINITY;
  for (int s = 0; s < num_slots; ++s) mx = fmaxf(mx, PartialMl(p, b, h, s)->x);
  float* out = p.out + b * p.out_batch_stride + h * p.out_head_stride;
  if (mx == -INFINITY) {
    for (int d = threadIdx.x; d < p.head_dim; d += blockDim.x) out[d] = 0.0f;
    return;
  }
  float denom = 0.0f;
  for (int s = 0; s < num_slots; ++s) {
    const float2 ml = *PartialMl(p, b, h, s);
    if (ml.x != -INFINITY) denom += ml.y * __expf(ml.x - mx);
  }
  const float inv = 1.0f / denom;
  for (int d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
    float o = 0.0f;
    for (int s = 0; s < num_slots; ++s) {
      const float2 ml = *PartialMl(p, b, h, s);
      if (ml.x != -INFINITY) o += PartialAcc(p, b, h, s)[d] * __expf(ml.x - mx);
    }
    out[d] = o * inv;
  }
}

}  // namespace

std::string LaunchSplitCombine(const DecodeAttentionParams& p, int num_splits, cudaStream_t stream) {
  // programmatic dependent launch (p.plain_combine: a plain one, for benchmarks): the launch
  // overlaps the decode kernel's tail instead of following it.
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(p.batch * p.num_heads);
  cfg.blockDim = dim3(128);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = p.plain_combine ? 0 : 1;
  VQ_CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&cfg, SplitCombineKernel, p, num_splits + 1));
  return "";
}

}  // namespace vqserve::cuda
