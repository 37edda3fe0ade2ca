#ifndef VQSERVE_KERNELS_CUDA_DECODE_DECODE_ATTENTION_COMMON_CUH_
#define VQSERVE_KERNELS_CUDA_DECODE_DECODE_ATTENTION_COMMON_CUH_

// device helpers shared by every decode-attention kernel: split ranges, the split-kv
// workspace (partial accumulators and softmax state), warp reductions, async copies.

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/common/dependent_launch.cuh"
#include "kernels/cuda/decode/decode_attention.h"

namespace vqserve::cuda {

inline constexpr int kDecodeThreads = 256;  // threads of every decode block (8 warps)
inline constexpr int kSplitAlign = 128;     // split boundaries are multiples of this many tokens
inline constexpr int kWorkspaceSlots = kMaxDecodeSplits + 1;  // splits + the residual ring

// tokens [*t0, *t1) of `len` coded tokens that split `split` of `num_splits` covers.
__device__ inline void SplitRange(int len, int num_splits, int split, int* t0, int* t1) {
  int per = (len + num_splits - 1) / num_splits;
  per = (per + kSplitAlign - 1) / kSplitAlign * kSplitAlign;
  *t0 = split * per;
  *t1 = min(len, *t0 + per);
}

// partial accumulator of (b, head, slot): head_dim floats.
__device__ inline float* PartialAcc(const DecodeAttentionParams& p, int b, int head, int slot) {
  return p.workspace +
         ((static_cast<int64_t>(b) * p.num_heads + head) * kWorkspaceSlots + slot) * p.head_dim;
}
// partial (running max, running sum) of (b, head, slot).
__device__ inline float2* PartialMl(const DecodeAttentionParams& p, int b, int head, int slot) {
  float2* base = reinterpret_cast<float2*>(
      p.workspace + static_cast<int64_t>(p.batch) * p.num_heads * kWorkspaceSlots * p.head_dim);
  return base + (static_cast<int64_t>(b) * p.num_heads + head) * kWorkspaceSlots + slot;
}

// marks heads h0 .. h0+hb-1 of slot `slot` as holding no tokens (the combine skips it).
__device__ inline void WriteEmptyPartial(const DecodeAttentionParams& p, int b, int h0, int hb,
                                         int slot) {
  if (threadIdx.x < hb) *PartialMl(p, b, h0 + threadIdx.x, slot) = make_float2(-INFINITY, 0.0f);
}

__device__ inline float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// two fp16 values packed in 32 bits -> float2.
__device__ inline float2 Half2BitsToFloat2(uint32_t bits) {
  __half2 h = *reinterpret_cast<__half2*>(&bits);
  return __half22float2(h);
}

// 16-byte global -> shared copy that bypasses registers (and l1).
__device__ inline void CpAsync16(void* smem_dst, const void* global_src) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(global_src));
}
__device__ inline void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// block index -> (kv head, first query head) when each block serves hb query heads of one kv
// head (blockIdx.y enumerates kv heads x head groups).
__device__ inline void BlockHeads(const DecodeAttentionParams& p, int hb, int* kvh, int* h0) {
  const int group = p.num_heads / p.num_kv_heads;
  const int groups_per_kv = group / hb;
  *kvh = blockIdx.y / groups_per_kv;
  *h0 = *kvh * group + (blockIdx.y % groups_per_kv) * hb;
}

// merges the partials of a block's kWarps warps, each over its own tokens, into workspace slot
// `slot` of query heads h0 .. h0+hb-1 (hb <= 4): warp w's running max of head h (log2 units) at
// wm[w * 4 + h], its sum at wl[w * 4 + h], its accumulator at red[(w * 4 + h) * D ...]. NT
// threads; call after a barrier that made them visible.
template <int D, int kWarps, int NT>
__device__ void MergeWarpPartials(const DecodeAttentionParams& p, int b, int h0, int hb, int slot,
                                  const float* wm, const float* wl, const float* red) {
  for (int idx = threadIdx.x; idx < hb * D; idx += NT) {
    const int h = idx / D, d = idx % D;
    float mmax = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mmax = fmaxf(mmax, wm[w * 4 + h]);
    float o = 0.0f, l = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float mw = wm[w * 4 + h];
      const float f = mw == -INFINITY ? 0.0f : exp2f(mw - mmax);
      o += f * red[(w * 4 + h) * D + d];
      l += f * wl[w * 4 + h];
    }
    PartialAcc(p, b, h0 + h, slot)[d] = o;
    if (d == 0) *PartialMl(p, b, h0 + h, slot) = make_float2(mmax * 0.6931471805599453f, l);
  }
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_DECODE_ATTENTION_COMMON_CUH_
