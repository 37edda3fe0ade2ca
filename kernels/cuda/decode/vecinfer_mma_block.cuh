#ifndef VQSERVE_KERNELS_CUDA_DECODE_VECINFER_MMA_BLOCK_CUH_
#define VQSERVE_KERNELS_CUDA_DECODE_VECINFER_MMA_BLOCK_CUH_

// the block-level ends of the tensor-core vecinfer decode kernel around the warp page loop
// (vecinfer_mma_page.cuh): the merge of the 16 warp partials into a workspace slot, and the
// launch on one 512-thread block per (split, head group, sequence).

#include <string>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/decode/decode_attention.h"
#include "kernels/cuda/decode/decode_attention_common.cuh"
#include "kernels/cuda/decode/vecinfer_mma_page.cuh"

namespace vqserve::cuda::vq_mma {

// after the page loop: waits for the warp's copies, then merges the block's 16 warp partials
// (staged over the books at `books`, >= 64 KB) into workspace slot `split` of heads h0 .. h0 +
// hb - 1. lane tig's slot sv holds sub-vector 4 gid + (sv ^ 2 u ^ th) (kQuad: sv ^ th); lane
// tig ^ 2 holds the same one in slot sv ^ 1.
template <ValueGather kG, class S = PageShape<128>, bool kLean = false>
__device__ __forceinline__ void MergeBlock(const DecodeAttentionParams& p, const LaneConsts<S>& c,
                                           const WarpPartial<S::kDim>& w, int b, int h0, int hb, int split,
                                           int warp, int lane, void* books) {
  constexpr int D = S::kDim;
  constexpr int kT = WarpPartial<D>::kTiles;
  const int gid = c.gid, u = c.u, ha = c.ha;
  const bool score_lane = c.th == 0;
  CpAsyncWait<0>();
  __syncthreads();
  float* red = reinterpret_cast<float*>(books);  // [warp][4 heads][D]
  float* wm = red + kWarps * 4 * D;                // [warp][4]
  float* wl = wm + kWarps * 4;
  float tot[kT][4];
#pragma unroll
  for (int mi = 0; mi < kT; ++mi)
#pragma unroll
    for (int j = 0; j < 4; ++j) tot[mi][j] = w.acc[mi][j] + __shfl_xor_sync(0xffffffffu, w.acc[mi ^ 2][j], 2);
  if (score_lane) {
#pragma unroll
    for (int mi = 0; mi < kT; ++mi) {
      const int sub = D == 128 ? 4 * gid + ((mi >> 1) ^ (kG == ValueGather::kPlain ? 2 * u : 0)) : 2 * gid + (mi >> 1);
      const int d = 4 * sub + 2 * (mi & 1);
      red[(warp * 4 + ha) * D + d] = tot[mi][0];
      red[(warp * 4 + ha + 1) * D + d] = tot[mi][1];
      red[(warp * 4 + ha) * D + d + 1] = tot[mi][2];
      red[(warp * 4 + ha + 1) * D + d + 1] = tot[mi][3];
    }
  }
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const float l = WarpSum(!kLean || score_lane ? w.l_run[h] : 0.0f);  // kLean: see AttendPage
    if (lane == 0) {
      wm[warp * 4 + h] = w.m_run[h];
      wl[warp * 4 + h] = l;
    }
  }
  __syncthreads();
  MergeWarpPartials<D, kWarps, kThreads>(p, b, h0, hb, split, wm, wl, red);
}

// launches kKernel(p, hb, num_splits) on grid (splits, kv heads x head groups, batch), kThreads
// threads and all of kSmemBytes (its attribute set on the first call); "" or the cuda error.
template <auto kKernel>
std::string LaunchBlocks(const DecodeAttentionParams& p, int hb, int num_splits, cudaStream_t stream) {
  static bool configured = false;
  if (!configured) {
    VQ_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(kSmemBytes)));
    configured = true;
  }
  const int group = p.num_heads / p.num_kv_heads;
  dim3 grid(num_splits, p.num_kv_heads * (group / hb), p.batch);
  kKernel<<<grid, kThreads, kSmemBytes, stream>>>(p, hb, num_splits);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda::vq_mma

#endif  // VQSERVE_KERNELS_CUDA_DECODE_VECINFER_MMA_BLOCK_CUH_
