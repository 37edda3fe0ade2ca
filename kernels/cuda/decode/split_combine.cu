// log-sum-exp merge of the split-kv partials (flash-decoding's second step).
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/decode/decode_attention_common.cuh"
#include "kernels/cuda/decode/decode_attention_instances.h"

namespace vqserve::cuda {
namespace {

// grid (batch * num_heads), 128 threads, num_slots <= kWorkspaceSlots (33). slots with
// m = -inf hold no tokens; a head with no tokens at all gets zeros. launched programmatically
// it may start before the decode kernel ends: it waits for it first. warp 0 turns the slots'
// (m, l) into weights in one round of loads, then every thread sums its dims over the slots
// with the accumulator loads unrolled (few dependent round trips: 17 slots at 1 x 128K).
// the weights' array is padded to a multiple of 4 slots, the pad zero: ptxas unrolls the tail
// loop by four and issues the loads of weight[s + 1 .. s + 3] before it knows they are below
// num_slots (their values unused then); with all kWorkspaceSlots = 33 slots in use (1 x 128K)
// those from weight[32] ran past the block's 136 bytes of shared memory (compute-sanitizer
// memcheck: "invalid __shared__ read of size 12 ... access to 0x480", the window at 0x400).
constexpr int kPaddedSlots = (kWorkspaceSlots + 3) / 4 * 4;
static_assert(kPaddedSlots <= 64, "warp 0 writes 64 slots");

__global__ void SplitCombineKernel(const DecodeAttentionParams p, int num_slots) {
  __shared__ float weight[kPaddedSlots];  // exp(m_s - max), 0 for empty slots and the pad
  __shared__ float inv_denom;                // 0: the head has no tokens
  GridDependencyWait();
  const int b = blockIdx.x / p.num_heads, h = blockIdx.x % p.num_heads;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float2 ml[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int slot = lane + 32 * i;
      ml[i] = slot < num_slots ? *PartialMl(p, b, h, slot) : make_float2(-INFINITY, 0.0f);
    }
    const float mx = WarpMax(fmaxf(ml[0].x, ml[1].x));
    float l = 0.0f;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int slot = lane + 32 * i;
      const float e = ml[i].x == -INFINITY ? 0.0f : __expf(ml[i].x - mx);
      if (slot < kPaddedSlots) weight[slot] = e;
      l += ml[i].y * e;
    }
    l = WarpSum(l);
    if (lane == 0) inv_denom = mx == -INFINITY ? 0.0f : 1.0f / l;
  }
  __syncthreads();
  const float inv = inv_denom;
  float* out = p.out + b * p.out_batch_stride + h * p.out_head_stride;
  for (int d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
    float o = 0.0f;
    int s = 0;
    for (; s + 4 <= num_slots; s += 4) {
      float a[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = PartialAcc(p, b, h, s + i)[d];
#pragma unroll
      for (int i = 0; i < 4; ++i) o += weight[s + i] == 0.0f ? 0.0f : a[i] * weight[s + i];
    }
    for (; s < num_slots; ++s) {
      const float a = PartialAcc(p, b, h, s)[d];
      o += weight[s] == 0.0f ? 0.0f : a * weight[s];
    }
    out[d] = o * inv;
  }
}

}  // namespace

std::string LaunchSplitCombine(const DecodeAttentionParams& p, int num_splits, cudaStream_t stream) {
  // programmatic dependent launch: the launch overlaps the decode kernel's tail instead of
  // following it.
  VQ_CUDA_RETURN_IF_ERROR(LaunchAfterPrevious(SplitCombineKernel, dim3(p.batch * p.num_heads),
                                              dim3(128), 0, stream, p, num_splits + 1));
  return "";
}

}  // namespace vqserve::cuda
