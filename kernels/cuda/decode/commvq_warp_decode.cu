// commvq decode attention, warp per page (header: commvq_warp_decode.h; page format:
// docs/kv_formats.md, "commvq-R").
//
// keys: token t (position n, scale s_t) scores s_t * scale * sum_j Re(conj(Q_j) e^{i n theta_j} W_j)
// with W_j = sum_r zeta_{r,A_r,j} + i zeta_{r,B_r,j}: per round two rows of the kv head's key
// books are gathered and added, then the sum is rotated once per pair and dotted with every
// query head of the block (the books commute with rope, so nothing depends on the query until
// that dot). the books sit in shared memory as fp16 ([R][64][D/2] half2, 16 KB a round at
// head_dim 128): all rounds in one block (up to 11 at head_dim 128), or for more rounds half of
// them in each block of a pair that swaps partial scores once per page (the scores are additive
// over rounds). a round's (A + iB) is formed by one fp16 fma, converted and summed in fp32.
// values: o += p_t * Cv[r][m][code] straight from the fp32 value books in global memory (l2:
// 128 KB a round and kv head at head_dim 128), each lane D / 32 dims of every head.
//
// grid ((splits + 1) x C, kv heads x head groups, batch), clusters of C = 1 or 2 blocks, 512
// threads (16 warps), one block per sm.
// warp w takes pages w, w + 16, ... of the split through 2 cp.async stages; warp-private online
// softmax (log2 units), one merge of the 16 warps at the end. x == splits: the sink + residual
// ring (ResidualPartial). key phase lane layout: D / 8 lanes per token (4 pairs = 16 bytes of
// a book row each, so a quarter warp reads 128 consecutive bytes), 32 / (D / 8) tokens a step.

#include "kernels/cuda/decode/commvq_warp_decode.h"

#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/common/code12.cuh"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/decode/decode_attention_common.cuh"
#include "kernels/cuda/common/dense_attention.cuh"
#include "kernels/cuda/common/rope_rotation.cuh"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 512, kWarps = kThreads / 32;
constexpr int kSmemLimit = 232448;  // the sm_90 opt-in maximum

__host__ __device__ constexpr int Round16(int x) { return (x + 15) / 16 * 16; }

// shared-memory layout for head_dim D, R key rounds, RV value rounds, in bytes.
struct WarpLayout {
  int round_bytes;  // one round of key books: 64 rows of D / 2 half2
  int book_bytes;   // R rounds; reused by the merge after the page loop
  int kc_bytes;     // a stage's key codes [R][48] (then the page's scores [32][4] fp32)
  int stage_bytes;  // scales [32] fp16, key codes, value codes [RV][D / 8][32]
  int dec_stride;   // bytes of one token's decoded rows (A_r, B_r bytes), 8-aligned
  int warp_bytes;   // 2 stages + decoded rows [32][dec_stride]
  int theta;        // offset of theta_j [D / 2] double
  int total;
};
__host__ __device__ constexpr WarpLayout MakeWarpLayout(int D, int R, int RV) {
  WarpLayout l{};
  l.round_bytes = 64 * 2 * D;
  l.book_bytes = R * l.round_bytes;
  l.kc_bytes = Round16(48 * R > 512 ? 48 * R : 512);
  l.stage_bytes = 64 + l.kc_bytes + 32 * RV * (D / 8);
  l.dec_stride = (2 * R + 7) / 8 * 8;
  l.warp_bytes = 2 * l.stage_bytes + 32 * l.dec_stride;
  l.theta = l.book_bytes + kWarps * l.warp_bytes;
  l.total = l.theta + 8 * (D / 2);
  return l;
}

// sums v[0 .. N) over the W lanes lane ^ o (o < W) and scatters the heads: on return v[0] of
// every lane is the group's total of head *head (N <= W, both powers of two); lanes with
// lane % (W / N) == 0 hold distinct heads.
template <int N, int W>
__device__ __forceinline__ float ReduceScatter(float (&v)[N], int lane, int* head) {
  int idx = 0, n = N;
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) {
    if (n > 1) {
      const bool hi = (lane & o) != 0;
      n >>= 1;
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        if (i < n) {
          const float send = hi ? v[i] : v[i + n];
          const float keep = hi ? v[i + n] : v[i];
          v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
      }
      idx += hi ? n : 0;
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
    }
  }
  *head = idx;
  return v[0];
}

// (a + i b) of one rope pair, a and b the fp16 (x, y) of the two book rows: (a.x - b.y, a.y + b.x).
__device__ __forceinline__ float2 CombineRound(uint32_t a, uint32_t b) {
  const __half2 ha = *reinterpret_cast<const __half2*>(&a);
  const __half2 hb = *reinterpret_cast<const __half2*>(&b);
  return __half22float2(__hfma2(__lowhigh2highlow(hb), __halves2half2(__float2half(-1.0f), __float2half(1.0f)), ha));
}

// acc[k] += (a + i b) of the 4 rope pairs whose fp16 rows are ea, eb (one word per pair).
__device__ __forceinline__ void AccumulateRound(const uint4& ea, const uint4& eb, float2 (&acc)[4]) {
  const uint32_t a[4] = {ea.x, ea.y, ea.z, ea.w}, b[4] = {eb.x, eb.y, eb.z, eb.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 c = CombineRound(a[k], b[k]);
    acc[k].x += c.x;
    acc[k].y += c.y;
  }
}

// N = 2 or 4 floats (8 / 16-byte aligned) through the read-only path, one load.
template <int N>
__device__ __forceinline__ void LoadFloats(const float* src, float (&dst)[N]) {
  static_assert(N == 2 || N == 4, "2 or 4 floats");
  if constexpr (N == 4) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(src));
    dst[0] = v.x;
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
  } else {
    const float2 v = __ldg(reinterpret_cast<const float2*>(src));
    dst[0] = v.x;
    dst[1] = v.y;
  }
}

__device__ __forceinline__ float2 CMul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// q (batch, num_heads, D) fp32 after rope; key books (R' >= rounds, 64, D/2, 2) and value books
// (Rv', D/8, 256, 8) fp32 per kv head; pages per docs/kv_formats.md; writes workspace partials.
// C = 1: one block holds all R key rounds. C = 2: a cluster of 2 blocks on the same pages, block
// `rank` holds key rounds [R rank, R rank + R) (zero rows past p.commvq_key_rounds) and value
// round `rank`; the two swap their partial scores through distributed shared memory once per
// page (one cluster barrier), run the same softmax, and rank 0 adds rank 1's values at the end.
template <int D, int HBP, int R, int C>
__global__ void __launch_bounds__(kThreads, 1)
    CommVqWarpKernel(const DecodeAttentionParams p, int hb, int num_splits) {
  constexpr int kLpt = D / 8;          // lanes per token in the key phase
  constexpr int kTps = 32 / kLpt;      // tokens per step
  constexpr int kSteps = 32 / kTps;    // steps per page
  constexpr int kVpl = D / 32;         // value dims per lane
  constexpr int M = D / 8;             // value sub-vectors
  constexpr int kDecWords = (2 * R + 7) / 8 * 2;  // u32 words of a token's decoded rows
  extern __shared__ __align__(16) uint8_t cvw_smem[];
  namespace cg = cooperative_groups;
  const int rank = C == 1 ? 0 : static_cast<int>(cg::this_cluster().block_rank());
  const int split = blockIdx.x / C, b = blockIdx.z;
  if (rank != 0 && split == num_splits) return;  // rank 0 folds the residual
  int kvh, h0, t0, t1;
  if (!BeginSplitBlock<D, HBP, kThreads>(p, hb, num_splits, split, reinterpret_cast<float*>(cvw_smem), &kvh,
                                         &h0, &t0, &t1)) {
    return;  // both ranks of a cluster return here together (same split)
  }
  const int RT = p.commvq_key_rounds, H = p.num_kv_heads;
  const int rb = R * rank, nr = min(R, RT - rb);        // this block's key rounds [rb, rb + nr)
  const int RV = C == 1 ? p.commvq_value_rounds : 1;    // value rounds this block accumulates
  const int vr0 = C == 1 ? 0 : rank;                    // the first of them
  const bool values = vr0 < p.commvq_value_rounds;
  const WarpLayout L = MakeWarpLayout(D, R, RV);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  uint8_t* const wst = cvw_smem + L.book_bytes + warp * L.warp_bytes;  // this warp's stages
  uint8_t* const dec = wst + 2 * L.stage_bytes;  // [32][dec_stride]; after the keys p [32][4] fp32
  double* const theta_sm = reinterpret_cast<double*>(cvw_smem + L.theta);

  // this warp's pages: coded pages page0 + warp + 16 i, i < npages (every warp loops to
  // npages_max when the cluster swaps scores).
  const int page0 = t0 / 32, page_end = (t1 + 31) / 32;
  const int npages = page_end - page0 > warp ? (page_end - page0 - warp + kWarps - 1) / kWarps : 0;
  const int npages_max = (page_end - page0 + kWarps - 1) / kWarps;
  const int32_t* table = p.block_tables + b * p.block_table_stride + page0 + warp;
  const uint8_t* layer = p.pages + p.layer_offset;
  const int64_t koff = 64 * H + (static_cast<int64_t>(kvh) * RT + rb) * 48;
  const int64_t voff = 64 * H + static_cast<int64_t>(48) * H * RT +
                       (static_cast<int64_t>(kvh) * p.commvq_value_rounds + vr0) * M * 32;
  const int kchunks = 3 * nr, vchunks = values ? 2 * RV * M : 0, nchunks = 4 + kchunks + vchunks;
  auto issue = [&](int stage, int i) {
    if (i < npages) {
      const uint8_t* slice = layer + static_cast<int64_t>(table[kWarps * i]) * p.page_stride;
      uint8_t* dst = wst + stage * L.stage_bytes;
      for (int c = lane; c < nchunks; c += 32) {
        if (c < 4) {
          CpAsync16(dst + 16 * c, slice + kvh * 64 + 16 * c);
        } else if (c < 4 + kchunks) {
          CpAsync16(dst + 64 + 16 * (c - 4), slice + koff + 16 * (c - 4));
        } else {
          const int x = c - 4 - kchunks;
          CpAsync16(dst + 64 + L.kc_bytes + 16 * x, slice + voff + 16 * x);
        }
      }
    }
    CpAsyncCommit();
  };
  issue(0, 0);
  if constexpr (C == 1) issue(1, 1);  // C = 2: page i + 1 is issued once the partner read page i - 1

  // key books -> fp16 (the fp32 pairs' order; rounds past nr zero), rope frequencies.
  {
    const float4* kb = reinterpret_cast<const float4*>(p.vq_k_codebook + kvh * p.vq_k_codebook_head_stride +
                                                       static_cast<int64_t>(rb) * 64 * D);
    uint2* dst = reinterpret_cast<uint2*>(cvw_smem);
    constexpr int n4 = R * 64 * D / 4;
    const int valid4 = nr * 64 * D / 4;
#pragma unroll 4
    for (int i = tid; i < n4; i += kThreads) {
      const float4 v = i < valid4 ? __ldg(kb + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      const __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
      dst[i] = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    }
    if (tid < D / 2) {
      theta_sm[tid] = static_cast<float>(pow(static_cast<double>(p.rope_theta), -2.0 * tid / D));
    }
  }
  __syncthreads();

  // key-phase lane: token slot g of a step, pairs 4 l .. 4 l + 3.
  const int g = lane / kLpt, l = lane % kLpt;
  const uint32_t lofs = D == 128 ? 16u * l : 32u * l;  // D 64: the prmt offset is halved after
  double th[4];
  float2 dstep[4];  // e^{i kTps theta_j}
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    th[k] = theta_sm[4 * l + k];
    double s, c;
    sincos(kTps * th[k], &s, &c);
    dstep[k] = make_float2(static_cast<float>(c), static_cast<float>(s));
  }
  float2 q[HBP][4];
#pragma unroll
  for (int h = 0; h < HBP; ++h) {
    const float* qh = p.q + b * p.q_batch_stride + (h0 + (h < hb ? h : 0)) * p.q_head_stride + 8 * l;
    const float4 a = *reinterpret_cast<const float4*>(qh), c = *reinterpret_cast<const float4*>(qh + 4);
    const float z = h < hb ? 1.0f : 0.0f;
    q[h][0] = make_float2(z * a.x, z * a.y);
    q[h][1] = make_float2(z * a.z, z * a.w);
    q[h][2] = make_float2(z * c.x, z * c.y);
    q[h][3] = make_float2(z * c.z, z * c.w);
  }
  // value-phase lane: dims kVpl * lane .. + kVpl - 1 = sub-vector m, offset e0.
  const int vm = lane * kVpl / 8, ve0 = lane * kVpl % 8;
  const float* cvb = p.vq_v_codebook + kvh * p.vq_v_codebook_head_stride + ve0;
  float vacc[HBP][kVpl];
  float m_run[HBP], l_run[HBP];
#pragma unroll
  for (int h = 0; h < HBP; ++h) {
    m_run[h] = -INFINITY;
    l_run[h] = 0.0f;
#pragma unroll
    for (int e = 0; e < kVpl; ++e) vacc[h][e] = 0.0f;
  }
  const float kLog2e = 1.4426950408889634f;
  const int pos0 = p.sink_lens != nullptr ? p.sink_lens[b] : 0;

  for (int i = 0; i < (C == 1 ? npages : npages_max); ++i) {
    const bool mine = i < npages;
    if constexpr (C == 1) {
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncwarp();
    uint8_t* st = wst + (i & 1) * L.stage_bytes;
    float* sbuf = reinterpret_cast<float*>(st + 64);  // [32 tokens][4 heads] over the key codes
    float* pbuf = reinterpret_cast<float*>(dec);      // [32 tokens][4 heads] after the keys
    const int tp = (page0 + warp + kWarps * i) * 32;  // coded index of the page's first token
    float ts = 0.0f;
    if (mine) {
      // decode: lane t writes token t's book rows (A_r, B_r) as bytes 2r, 2r + 1.
      const uint8_t* kc = st + 64;
      uint32_t words[kDecWords];
#pragma unroll
      for (int w = 0; w < kDecWords; ++w) words[w] = 0;
#pragma unroll
      for (int r = 0; r < R; ++r) {  // rounds >= nr read stale bytes: their book rows are zero
        const uint32_t c = Code12(kc + r * 48, lane);
        const uint32_t ab = (c & 63u) | ((c >> 6) << 8);
        words[r >> 1] |= ab << (16 * (r & 1));
      }
      uint2* dw = reinterpret_cast<uint2*>(dec + lane * L.dec_stride);
#pragma unroll
      for (int w = 0; w < kDecWords; w += 2) dw[w / 2] = make_uint2(words[w], words[w + 1]);
      ts = __half2float(reinterpret_cast<const __half*>(st)[lane]) * p.scale * kLog2e;
      __syncwarp();  // decoded rows visible; the key codes are dead (their space takes the scores)

      float2 rot[4];
      {
        const double n = static_cast<double>(pos0 + tp + g);
#pragma unroll
        for (int k = 0; k < 4; ++k) rot[k] = RopeRotation(n * th[k]);
      }
#pragma unroll 1
      for (int s = 0; s < kSteps; ++s) {
        const int tok = s * kTps + g;
        uint32_t dw2[kDecWords];
        const uint2* dp = reinterpret_cast<const uint2*>(dec + tok * L.dec_stride);
#pragma unroll
        for (int w = 0; w < kDecWords; w += 2) {
          const uint2 v = dp[w / 2];
          dw2[w] = v.x;
          dw2[w + 1] = v.y;
        }
        float2 acc[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) acc[k] = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const uint32_t word = dw2[r >> 1];
          const int ba = 2 * (r & 1);
          uint32_t oa = __byte_perm(word, lofs, 0x7604u | (ba << 4));
          uint32_t ob = __byte_perm(word, lofs, 0x7604u | ((ba + 1) << 4));
          if constexpr (D == 64) {
            oa >>= 1;
            ob >>= 1;
          }
          const uint8_t* rbk = cvw_smem + r * L.round_bytes;
          const uint4 ea = *reinterpret_cast<const uint4*>(rbk + oa);
          const uint4 eb = *reinterpret_cast<const uint4*>(rbk + ob);
          AccumulateRound(ea, eb, acc);
        }
        float d[HBP];
#pragma unroll
        for (int h = 0; h < HBP; ++h) d[h] = 0.0f;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const float2 kr = CMul(acc[k], rot[k]);
#pragma unroll
          for (int h = 0; h < HBP; ++h) d[h] += q[h][k].x * kr.x + q[h][k].y * kr.y;
          rot[k] = CMul(rot[k], dstep[k]);
        }
        int head;
        const float tot = ReduceScatter<HBP, kLpt>(d, lane, &head);
        if (lane % (kLpt / HBP) == 0) sbuf[tok * 4 + head] = tot;
      }
    }
    __syncwarp();
    const float4* partner = nullptr;
    if constexpr (C == 2) {
      cg::this_cluster().sync();  // both blocks' partial scores of page i are written
      partner = reinterpret_cast<const float4*>(cg::this_cluster().map_shared_rank(sbuf, rank ^ 1));
      issue((i + 1) & 1, i + 1);  // the partner read that stage's scores (page i - 1) before this barrier
    }
    if (mine) {
      // online softmax over the page: lane t = token t (C = 2: rank 0's + rank 1's scores).
      const bool valid = tp + lane < t1;
      float sc[4];
      {
        float4 own = reinterpret_cast<const float4*>(sbuf)[lane];
        if constexpr (C == 2) {
          const float4 oth = partner[lane];
          const float4 lo = rank == 0 ? own : oth, hi = rank == 0 ? oth : own;
          own = make_float4(lo.x + hi.x, lo.y + hi.y, lo.z + hi.z, lo.w + hi.w);
        }
        sc[0] = own.x;
        sc[1] = own.y;
        sc[2] = own.z;
        sc[3] = own.w;
      }
      float alpha[HBP];
#pragma unroll
      for (int h = 0; h < HBP; ++h) {
        const float sv = valid ? sc[h] * ts : -INFINITY;
        const float m_new = fmaxf(m_run[h], WarpMax(sv));
        alpha[h] = exp2f(m_run[h] - m_new);
        const float pv = exp2f(sv - m_new);
        l_run[h] = l_run[h] * alpha[h] + pv;
        m_run[h] = m_new;
        pbuf[lane * 4 + h] = pv;
      }
#pragma unroll
      for (int h = 0; h < HBP; ++h)
#pragma unroll
        for (int e = 0; e < kVpl; ++e) vacc[h][e] *= alpha[h];
      __syncwarp();

      // values: o[h][dims] += p[t][h] * Cv[r][vm][code(t, r, vm)][dims].
      for (int r = 0; values && r < RV; ++r) {
        const uint8_t* vc = st + 64 + L.kc_bytes + (r * M + vm) * 32;
        const float* cv = cvb + static_cast<int64_t>((vr0 + r) * M + vm) * 256 * 8;
#pragma unroll
        for (int t8 = 0; t8 < 32; t8 += 8) {
          const uint2 cw = *reinterpret_cast<const uint2*>(vc + t8);
          float e[8][kVpl];
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const uint32_t code = ((j < 4 ? cw.x : cw.y) >> (8 * (j & 3))) & 0xffu;
            LoadFloats(cv + code * 8, e[j]);
          }
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const float4 pr = *reinterpret_cast<const float4*>(pbuf + (t8 + j) * 4);
            const float pj[4] = {pr.x, pr.y, pr.z, pr.w};
#pragma unroll
            for (int h = 0; h < HBP; ++h)
#pragma unroll
              for (int x = 0; x < kVpl; ++x) vacc[h][x] += pj[h] * e[j][x];
          }
        }
      }
    }
    __syncwarp();  // every lane is done with the stage before it is refilled
    if constexpr (C == 1) issue(i & 1, i + 2);
  }
  CpAsyncWait<0>();
  __syncthreads();  // the books are dead: the merge reuses them

  float* red = reinterpret_cast<float*>(cvw_smem);  // [warp][4 heads][D]
  float* wm = red + kWarps * 4 * D;                 // [warp][4]
  float* wl = wm + kWarps * 4;
#pragma unroll
  for (int h = 0; h < HBP; ++h) {
#pragma unroll
    for (int x = 0; x < kVpl; ++x) red[(warp * 4 + h) * D + lane * kVpl + x] = vacc[h][x];
    const float lt = WarpSum(l_run[h]);
    if (lane == 0) {
      wm[warp * 4 + h] = m_run[h];
      wl[warp * 4 + h] = lt;
    }
  }
  if constexpr (C == 2) {
    // both blocks hold the same softmax state; rank 0 adds rank 1's value rounds.
    cg::this_cluster().sync();
    if (rank == 0) {
      const float* other = cg::this_cluster().map_shared_rank(red, 1);
      for (int idx = tid; idx < kWarps * 4 * D; idx += kThreads) red[idx] += other[idx];
    }
    cg::this_cluster().sync();  // rank 1 stays until rank 0 has read it
    if (rank != 0) return;
  } else {
    __syncthreads();
  }
  MergeWarpPartials<D, kWarps, kThreads>(p, b, h0, hb, split, wm, wl, red);
}

template <int D, int HBP, int R, int C>
std::string Launch(const DecodeAttentionParams& p, int hb, int num_splits, cudaStream_t stream) {
  const int bytes = MakeWarpLayout(D, R, C == 1 ? p.commvq_value_rounds : 1).total;
  static int configured = 0;
  if (bytes > configured) {
    VQ_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(CommVqWarpKernel<D, HBP, R, C>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    configured = bytes;
  }
  const int group = p.num_heads / p.num_kv_heads;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((num_splits + 1) * C, p.num_kv_heads * (group / hb), p.batch);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = C;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = C == 1 ? 0 : 1;
  VQ_CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&cfg, CommVqWarpKernel<D, HBP, R, C>, p, hb, num_splits));
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

template <int D, int R, int C>
std::string LaunchHeads(const DecodeAttentionParams& p, int hb, int num_splits, cudaStream_t stream) {
  if (hb == 1) return Launch<D, 1, R, C>(p, hb, num_splits, stream);
  if (hb == 2) return Launch<D, 2, R, C>(p, hb, num_splits, stream);
  return Launch<D, 4, R, C>(p, hb, num_splits, stream);
}

}  // namespace

int CommVqWarpBlocks(const DecodeAttentionParams& p) {
  return p.head_dim == 128 && p.commvq_key_rounds > 11 ? 2 : 1;
}

bool UsesCommVqWarp(const DecodeAttentionParams& p) {
  const int D = p.head_dim, R = p.commvq_key_rounds, RV = p.commvq_value_rounds;
  // instantiated: (128, 11) one block; (128, 12 .. 22) a cluster of 2 (11 rounds and one value
  // round each); (64, 5) and (64, 11) one block.
  const bool pair = D == 128 && R > 11 && R <= 22 && RV <= 2;
  const bool one = (D == 128 && R == 11) || (D == 64 && (R == 5 || R == 11));
  if (RV < 1 || !(one || pair)) return false;
  return MakeWarpLayout(D, one ? R : 11, one ? RV : 1).total <= kSmemLimit;
}

std::string LaunchCommVqWarpDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream) {
  if (!UsesCommVqWarp(p) || hb < 1 || hb > kCommVqWarpMaxHeads) {
    return "commvq warp decode: unsupported shape";
  }
  if (p.head_dim == 128) {
    return CommVqWarpBlocks(p) == 2 ? LaunchHeads<128, 11, 2>(p, hb, num_splits, stream)
                                    : LaunchHeads<128, 11, 1>(p, hb, num_splits, stream);
  }
  if (p.commvq_key_rounds == 5) return LaunchHeads<64, 5, 1>(p, hb, num_splits, stream);
  return LaunchHeads<64, 11, 1>(p, hb, num_splits, stream);
}

}  // namespace vqserve::cuda
