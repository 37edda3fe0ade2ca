#ifndef VQSERVE_KERNELS_CUDA_DECODE_WARP_FLASH_STATE_CUH_
#define VQSERVE_KERNELS_CUDA_DECODE_WARP_FLASH_STATE_CUH_

// the flash-attention state of a decode warp that folds its own tokens on the tensor cores
// (the staged fp16 and kivi kernels): lane (g = lane / 4, q = lane % 4) keeps head g's running
// max and sum; WarpSoftmaxStep turns a tile's scores into P fragments, WarpMergeBytes /
// MergeWarpPartials meet the warps' states in shared memory at the end of a block.

#include <cstdint>

#include "kernels/cuda/common/mma_ops.cuh"
#include "kernels/cuda/decode/decode_attention_common.cuh"

namespace vqserve::cuda {

// one online-softmax step over NT tiles of 8 tokens: sc[nt] is the score accumulator of
// mma.m16n8k16 with rows (hi g, lo g) of head g's query (sc[nt][j] + sc[nt][j + 2] = the score
// of token token(nt, j), j = 0, 1; log2 units). tokens >= valid and heads >= hb count as -inf.
// updates *m_run, *l_run; pb[nt] = fp16 pair of the tile's probabilities (the B fragment of
// the value mma); *a_even, *a_odd = the rescale factors of O^T columns (heads) 2q, 2q + 1.
template <int NT, class Token>
__device__ __forceinline__ void WarpSoftmaxStep(float (&sc)[NT][4], int hb, int valid,
                                                const Token& token, float* m_run, float* l_run,
                                                uint32_t (&pb)[NT], float* a_even,
                                                float* a_odd) {
  const int g = (threadIdx.x & 31) >> 2, qd = threadIdx.x & 3;
  float mx = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float v = sc[nt][j] + sc[nt][j + 2];
      sc[nt][j] = g < hb && token(nt, j) < valid ? v : -INFINITY;
      mx = fmaxf(mx, sc[nt][j]);
    }
  }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float m_new = fmaxf(*m_run, mx);
  const float m_use = m_new == -INFINITY ? 0.0f : m_new;
  const float alpha = exp2f(*m_run - m_use);
  *m_run = m_new;
  float psum = 0.0f;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const float p0 = exp2f(sc[nt][0] - m_use), p1 = exp2f(sc[nt][1] - m_use);
    psum += p0 + p1;
    pb[nt] = PackHalf2(p0, p1);
  }
  *l_run = *l_run * alpha + psum;
  // O^T columns are heads 2 q, 2 q + 1: their alphas live in lanes 8 q and 8 q + 4.
  *a_even = __shfl_sync(0xffffffffu, alpha, 8 * qd);
  *a_odd = __shfl_sync(0xffffffffu, alpha, 8 * qd + 4);
}

// shared-memory bytes of MergeWarpPartials: red [kWarps][kMaxHeads][D], then the warps' max
// and sum [kWarps][kMaxHeads], fp32.
template <int D, int kWarps, int kMaxHeads>
constexpr int WarpMergeBytes() {
  return (kWarps * kMaxHeads * D + 2 * kWarps * kMaxHeads) * 4;
}

// lane (g = lane / 4, q = lane % 4) of each warp holds head g's running max m_run (log2 units)
// and its part of the running sum l_run, and acc[m], the O^T fragment of m-tile m: channels
// channel(m, g, 0) (acc[m][0, 1]) and channel(m, g, 1) (acc[m][2, 3]) of heads 2q, 2q + 1.
// writes heads h0 .. h0 + hb - 1 (hb <= kMaxHeads <= 8) of sequence b to workspace slot
// `slot`. smem: WarpMergeBytes bytes nobody uses any more (the caller synchronized the block);
// every thread of the block (kWarps warps) calls it.
template <int D, int kWarps, int kMaxHeads, class Channel>
__device__ __forceinline__ void MergeWarpPartials(const DecodeAttentionParams& p, int b, int h0,
                                                  int hb, int slot, float m_run, float l_run,
                                                  const float (&acc)[D / 16][4], uint8_t* smem,
                                                  const Channel& channel) {
  const int tid = threadIdx.x, warp = tid >> 5, g = (tid & 31) >> 2, qd = tid & 3;
  float* red = reinterpret_cast<float*>(smem);
  float* wm = red + kWarps * kMaxHeads * D;
  float* wl = wm + kWarps * kMaxHeads;
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
  if (qd == 0) {
    wm[warp * kMaxHeads + g] = m_run;
    wl[warp * kMaxHeads + g] = l_run;
  }
#pragma unroll
  for (int m = 0; m < D / 16; ++m) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int ch = channel(m, g, r);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int h = 2 * qd + j;
        if (h < hb) red[(warp * kMaxHeads + h) * D + ch] = acc[m][2 * r + j];
      }
    }
  }
  __syncthreads();
  for (int idx = tid; idx < hb * D; idx += kWarps * 32) {
    const int h = idx / D, d = idx % D;
    float mmax = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mmax = fmaxf(mmax, wm[w * kMaxHeads + h]);
    float o = 0.0f, l = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float mw = wm[w * kMaxHeads + h];
      const float f = mw == -INFINITY ? 0.0f : exp2f(mw - mmax);
      o += f * red[(w * kMaxHeads + h) * D + d];
      l += f * wl[w * kMaxHeads + h];
    }
    PartialAcc(p, b, h0 + h, slot)[d] = o;
    if (d == 0) *PartialMl(p, b, h0 + h, slot) = make_float2(mmax * 0.6931471805599453f, l);
  }
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_WARP_FLASH_STATE_CUH_
