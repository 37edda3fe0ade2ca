#ifndef VQSERVE_KERNELS_CUDA_WARP_RESIDUAL_CUH_
#define VQSERVE_KERNELS_CUDA_WARP_RESIDUAL_CUH_

// the attention sink + fp16 residual ring of one (sequence, kv head) as one workspace slot,
// warp-parallel for a 16-warp block: every warp keeps its own online softmax over tokens
// w, w + 16, ... (no block barrier per chunk), then one merge. same semantics as
// ResidualPartial (dense_attention.cuh): sink positions first, then the ring.

#include "kernels/cuda/decode_attention_common.cuh"
#include "kernels/cuda/dense_attention.cuh"

namespace vqserve::cuda {

// smem floats WarpResidual needs: per warp 4 heads x 128 dims, then 2 x 64 (max, sum).
inline constexpr int kWarpResidualFloats = 16 * 4 * 128 + 2 * 64;

__device__ inline int ResidualTokens(const DecodeAttentionParams& p, int b, int* n_sink) {
  *n_sink = p.sink_lens != nullptr ? p.sink_lens[b] : 0;
  return *n_sink + (p.res_lens != nullptr ? p.res_lens[b] : 0);
}
// tokens of the sink + ring of sequence b and, when > 0, their rows of kv head kvh in *src
// (metadata loaded in one round trip).
__device__ inline int ResidualSource(const DecodeAttentionParams& p, int b, int kvh, SinkRingSource* src) {
  const int slot = p.slots != nullptr ? p.slots[b] : 0, coded = p.coded_lens[b];
  int n_sink;
  const int n = ResidualTokens(p, b, &n_sink);
  if (n <= 0) return 0;
  const int64_t off = slot * p.res_slot_stride + kvh * p.res_head_stride;
  const int64_t soff = slot * p.sink_slot_stride + kvh * p.res_head_stride;
  const bool sink = n_sink > 0;
  *src = SinkRingSource{RingSource{p.res_k + off, p.res_v + off, p.res_token_stride, p.res_ring_tokens,
                                   (coded + n_sink) % p.res_ring_tokens},
                        sink ? p.sink_k + soff : nullptr, sink ? p.sink_v + soff : nullptr,
                        p.res_token_stride, n_sink};
  return n;
}

// asks l2 to fetch the sink + ring rows (k and v, head_dim 128 fp16 = two 128-byte lines each)
// that WarpResidual reads later; NT threads.
template <int NT>
__device__ void PrefetchResidualL2(const DecodeAttentionParams& p, int b, int kvh) {
  SinkRingSource src;
  const int n = ResidualSource(p, b, kvh, &src);
  const int n_sink = src.n_sink;
  for (int i = threadIdx.x; i < 4 * n; i += NT) {
    const int t = i >> 2, part = i & 3;
    const uint16_t* row;
    if (t < n_sink) {
      row = ((part & 2) ? src.v : src.k) + static_cast<int64_t>(t) * src.token_stride;
    } else {
      row = ((part & 2) ? src.ring.v : src.ring.k) + src.ring.Off(t - n_sink);
    }
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + 64 * (part & 1)));
  }
}

// heads h0 .. h0 + hb - 1 (hb <= 4) of sequence b over its sink + ring tokens -> workspace slot
// `slot`; head_dim 128, 512 threads, smem >= kWarpResidualFloats floats (no live data). lane
// owns dims 4 lane .. 4 lane + 3; scores in log2 units.
__device__ inline void WarpResidual(const DecodeAttentionParams& p, int b, int kvh, int h0, int hb,
                                    int slot, float* smem) {
  constexpr int kD = 128, kW = 16, kTok = 4;  // tokens per warp per step (8 spills at the 128-register cap)
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float qs = p.scale * 1.4426950408889634f;
  float qr[4][4];  // loaded with the metadata: one round trip
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const float* q = p.q + b * p.q_batch_stride + (h0 + min(h, hb - 1)) * p.q_head_stride + 4 * lane;
#pragma unroll
    for (int i = 0; i < 4; ++i) qr[h][i] = h < hb ? q[i] * qs : 0.0f;
  }
  SinkRingSource src;
  const int n = ResidualSource(p, b, kvh, &src);
  if (n <= 0) {
    WriteEmptyPartial(p, b, h0, hb, slot);
    return;
  }
  float m_run[4], l_run[4], acc[4][4];
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    m_run[h] = -INFINITY;
    l_run[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[h][i] = 0.0f;
  }
  for (int t0 = warp; t0 < n; t0 += kW * kTok) {
    float kr[kTok][4], vr[kTok][4];
#pragma unroll
    for (int j = 0; j < kTok; ++j) {
      const int t = t0 + kW * j;
      if (t < n) {
        src.LoadK<4>(t, 4 * lane, kr[j]);
        const float2 v0 = src.LoadV2(t, 4 * lane), v1 = src.LoadV2(t, 4 * lane + 2);
        vr[j][0] = v0.x;
        vr[j][1] = v0.y;
        vr[j][2] = v1.x;
        vr[j][3] = v1.y;
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) kr[j][i] = vr[j][i] = 0.0f;
      }
    }
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      float s[kTok];
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < kTok; ++j) {
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i) d += qr[h][i] * kr[j][i];
        d = WarpSum(d);
        s[j] = t0 + kW * j < n ? d : -INFINITY;
        mx = fmaxf(mx, s[j]);
      }
      const float m_new = fmaxf(m_run[h], mx);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = exp2f(m_run[h] - m_use);
      m_run[h] = m_new;
      l_run[h] *= alpha;
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[h][i] *= alpha;
#pragma unroll
      for (int j = 0; j < kTok; ++j) {
        const float pj = exp2f(s[j] - m_use);
        l_run[h] += pj;
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[h][i] += pj * vr[j][i];
      }
    }
  }
  float* red = smem;                 // [warp][4 heads][128]
  float* wm = red + kW * 4 * kD;     // [warp][4]
  float* wl = wm + kW * 4;
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    *reinterpret_cast<float4*>(red + (warp * 4 + h) * kD + 4 * lane) =
        make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
    if (lane == 0) {
      wm[warp * 4 + h] = m_run[h];
      wl[warp * 4 + h] = l_run[h];
    }
  }
  __syncthreads();
  MergeWarpPartials<kD, kW, kW * 32>(p, b, h0, hb, slot, wm, wl, red);
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_WARP_RESIDUAL_CUH_
