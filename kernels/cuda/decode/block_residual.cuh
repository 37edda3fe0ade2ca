#ifndef VQSERVE_KERNELS_CUDA_DECODE_BLOCK_RESIDUAL_CUH_
#define VQSERVE_KERNELS_CUDA_DECODE_BLOCK_RESIDUAL_CUH_

// the attention sink + fp16 residual ring of one (sequence, kv head) as one workspace slot,
// for a block of NT threads (512 or 256) and head_dim D (128 or 64), in chunks of NT / 4 tokens
// with one round of global loads each:
//  1. thread (token = tid / 4, quarter = tid % 4) loads D / 4 dims of its token's k and v row
//     (D / 32 + D / 32 sixteen-byte loads), parks the v quarter in smem and dots the k quarter
//     with the 4 heads' queries (smem); 2 shuffles finish the 4 scores.
//  2. warp h < 4 turns head h's NT / 4 scores into probabilities (online softmax across
//     chunks).
//  3. thread (dim pair = tid % (D / 2), slice = tid / (D / 2)) accumulates p * v over the
//     slice's tokens for 4 heads; after the last chunk the 2 NT / D slices are summed through
//     smem.
// same semantics as ResidualPartial (dense_attention.cuh): sink positions first, then the ring.

#include "kernels/cuda/decode/decode_attention_common.cuh"
#include "kernels/cuda/common/dense_attention.cuh"

namespace vqserve::cuda {

inline constexpr int kResidualQStride = 36;  // floats per (head, quarter) of q: 32 + pad
// smem floats BlockResidual<D, NT> needs (no live data): the chunk's v rows (fp16, NT / 4
// tokens), q, the probabilities [token][4 heads] and the softmax state.
template <int D, int NT>
constexpr int BlockResidualFloats() {
  return NT / 4 * D / 2 + 16 * kResidualQStride + NT / 4 * 4 + 12;
}
inline constexpr int kBlockResidualFloats = BlockResidualFloats<128, 512>();  // the largest

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

// asks l2 to fetch the sink + ring rows (k and v, D fp16 = D / 64 128-byte lines each) that
// BlockResidual reads later; NT threads.
template <int NT, int D = 128>
__device__ void PrefetchResidualL2(const DecodeAttentionParams& p, int b, int kvh) {
  constexpr int kLines = D / 64;
  SinkRingSource src;
  const int n = ResidualSource(p, b, kvh, &src);
  const int n_sink = src.n_sink;
  for (int i = threadIdx.x; i < 2 * kLines * n; i += NT) {
    const int t = i / (2 * kLines), part = kLines == 2 ? i & 3 : 2 * (i & 1);  // bit 1: v
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
// `slot`; head_dim D (128 or 64), NT threads (512 or 256), smem >= BlockResidualFloats<D, NT>()
// floats (no live data; the caller syncs before reusing it). scores in log2 units.
template <int D = 128, int NT = 512>
__device__ inline void BlockResidual(const DecodeAttentionParams& p, int b, int kvh, int h0, int hb,
                                     int slot, float* smem) {
  static_assert(D == 128 || D == 64, "head_dim 128 or 64");
  static_assert(NT == 512 || NT == 256, "512 or 256 threads");
  constexpr int kD = D, kC = NT / 4, kQ = kResidualQStride;
  constexpr int kQuarter = D / 4, kWords = D / 32;  // dims and 16-byte loads per quarter
  constexpr int kPairs = D / 2, kSlices = NT / kPairs;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  uint32_t* vs = reinterpret_cast<uint32_t*>(smem);  // [kC tokens][D / 2] half2 of v
  float* qs = smem + kC * kD / 2;                     // [4 heads][4 quarters][kQ]
  float* ps = qs + 16 * kQ;                           // [kC tokens][4 heads]
  float* st = ps + kC * 4;                            // alpha[4], m[4], l[4]
  float* red = smem;                                  // [kSlices][4][D], after the last chunk
  for (int i = tid; i < 4 * kD; i += NT) {
    const int h = i / kD, d = i % kD;
    const float* q = p.q + b * p.q_batch_stride + (h0 + min(h, hb - 1)) * p.q_head_stride + d;
    qs[(h * 4 + d / kQuarter) * kQ + d % kQuarter] = h < hb ? *q * (p.scale * 1.4426950408889634f) : 0.0f;
  }
  SinkRingSource src;
  const int n = ResidualSource(p, b, kvh, &src);
  if (n <= 0) {
    WriteEmptyPartial(p, b, h0, hb, slot);
    return;
  }
  const int tok = tid >> 2, quarter = tid & 3, dp = tid % kPairs, slice = tid / kPairs;
  float m_run = -INFINITY, l_run = 0.0f;  // warps 0..3: head `warp`
  float acc[4][2] = {};                   // heads x dims 2 dp, 2 dp + 1
  for (int c0 = 0; c0 < n; c0 += kC) {
    __syncthreads();  // q is visible; the last chunk's v rows and probabilities are read
    const int t = c0 + tok;
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (t < n) {
      const uint16_t *krow, *vrow;
      if (t < src.n_sink) {
        krow = src.k + static_cast<int64_t>(t) * src.token_stride;
        vrow = src.v + static_cast<int64_t>(t) * src.token_stride;
      } else {
        const int64_t off = src.ring.Off(t - src.n_sink);
        krow = src.ring.k + off;
        vrow = src.ring.v + off;
      }
      uint4 kw[kWords], vw[kWords];
#pragma unroll
      for (int i = 0; i < kWords; ++i) {
        kw[i] = reinterpret_cast<const uint4*>(krow + kQuarter * quarter)[i];
        vw[i] = reinterpret_cast<const uint4*>(vrow + kQuarter * quarter)[i];
      }
#pragma unroll
      for (int i = 0; i < kWords; ++i) reinterpret_cast<uint4*>(vs + tok * kPairs + kQuarter / 2 * quarter)[i] = vw[i];
#pragma unroll
      for (int i = 0; i < kWords; ++i) {
        const float2 k0 = Half2BitsToFloat2(kw[i].x), k1 = Half2BitsToFloat2(kw[i].y);
        const float2 k2 = Half2BitsToFloat2(kw[i].z), k3 = Half2BitsToFloat2(kw[i].w);
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          const float4 qa = *reinterpret_cast<const float4*>(qs + (h * 4 + quarter) * kQ + 8 * i);
          const float4 qb = *reinterpret_cast<const float4*>(qs + (h * 4 + quarter) * kQ + 8 * i + 4);
          s[h] += qa.x * k0.x + qa.y * k0.y + qa.z * k1.x + qa.w * k1.y + qb.x * k2.x + qb.y * k2.y +
                  qb.z * k3.x + qb.w * k3.y;
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      s[h] += __shfl_xor_sync(0xffffffffu, s[h], 1);
      s[h] += __shfl_xor_sync(0xffffffffu, s[h], 2);
    }
    if (quarter == 0) {
      *reinterpret_cast<float4*>(ps + tok * 4) =
          t < n ? make_float4(s[0], s[1], s[2], s[3]) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    }
    __syncthreads();
    if (warp < 4) {  // head `warp`: scores -> probabilities
      float x[kC / 32];
      float cm = -INFINITY;
#pragma unroll
      for (int i = 0; i < kC / 32; ++i) {
        x[i] = ps[(lane + 32 * i) * 4 + warp];
        cm = fmaxf(cm, x[i]);
      }
      const float m_new = fmaxf(m_run, WarpMax(cm));
      const float alpha = exp2f(m_run - m_new);  // m_new is finite: the chunk has a token
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kC / 32; ++i) {
        const float e = exp2f(x[i] - m_new);
        ps[(lane + 32 * i) * 4 + warp] = e;
        sum += e;
      }
      l_run = l_run * alpha + WarpSum(sum);
      m_run = m_new;
      if (lane == 0) st[warp] = alpha;
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const float a = st[h];
      acc[h][0] *= a;
      acc[h][1] *= a;
    }
    const int n_here = min(kC, n - c0);
#pragma unroll 4
    for (int tk = slice; tk < n_here; tk += kSlices) {
      const float2 v = Half2BitsToFloat2(vs[tk * kPairs + dp]);
      const float4 pr = *reinterpret_cast<const float4*>(ps + tk * 4);
      acc[0][0] += pr.x * v.x;
      acc[0][1] += pr.x * v.y;
      acc[1][0] += pr.y * v.x;
      acc[1][1] += pr.y * v.y;
      acc[2][0] += pr.z * v.x;
      acc[2][1] += pr.z * v.y;
      acc[3][0] += pr.w * v.x;
      acc[3][1] += pr.w * v.y;
    }
  }
  __syncthreads();  // every slice is done with the v rows: red may overwrite them
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    *reinterpret_cast<float2*>(red + (slice * 4 + h) * kD + 2 * dp) = make_float2(acc[h][0], acc[h][1]);
  }
  if (warp < 4 && lane == 0) {
    st[4 + warp] = m_run;
    st[8 + warp] = l_run;
  }
  __syncthreads();
  for (int i = tid; i < hb * kD; i += NT) {
    const int h = i / kD, d = i % kD;
    float o = 0.0f;
#pragma unroll
    for (int sl = 0; sl < kSlices; ++sl) o += red[(sl * 4 + h) * kD + d];
    PartialAcc(p, b, h0 + h, slot)[d] = o;
    if (d == 0) *PartialMl(p, b, h0 + h, slot) = make_float2(st[4 + h] * 0.6931471805599453f, st[8 + h]);
  }
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_BLOCK_RESIDUAL_CUH_
