#ifndef VQSERVE_KERNELS_CUDA_VECINFER_MMA7_PAGE_CUH_
#define VQSERVE_KERNELS_CUDA_VECINFER_MMA7_PAGE_CUH_

// the warp page loop shared by vecinfer decode v7 / v7r (vecinfer_mma7_decode.cu, which
// documents the fragment layout) and v8 (vecinfer_v8_decode.cu): the cp.async page stages,
// the per-lane constants, one page's lut scores, online softmax and value mma, and the merge
// of the block's warp partials. kRoute (v7r) picks the routed value gathers; v8 is kRoute false.
// D = head_dim, 128 or 64 (v8 only; PageShape): at 64 the 16 sub-vectors take one score step o
// (m = 4 tig + ((j + gid) & 3)) and two value slots (group gid owns sub-vectors 2 gid, 2 gid +
// 1; slot i takes 2 gid + (i ^ tig / 2)); the books keep the 128 layout's 256-byte code rows.

#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/decode_attention_common.cuh"
#include "kernels/cuda/mma_ops.cuh"

namespace vqserve::cuda::mma7 {

inline constexpr int kThreads = 512, kWarps = kThreads / 32;
inline constexpr int kWStages = 3;                  // page stages per warp
inline constexpr int kBookRow = 32;                 // book entries (8 bytes) per code: 256 bytes
inline constexpr int kBookBytes = kBookRow * 256 * 8;  // fp16 lut or codebook
inline constexpr int kPRow = 40;                    // halves per probability row (32 + pad)
inline constexpr size_t kSmemBytes = 232448;        // all of the sm_90 opt-in maximum
// the page loop's shape at head_dim D. book rows stay kBookRow entries per code at either D
// (the first kSubs used), so that a gather address is one prmt.
template <int D>
struct PageShape {
  static_assert(D == 128 || D == 64, "head_dim 128 or 64");
  static constexpr int kDim = D, kSubs = D / 4;
  static constexpr int kO = kSubs / 16;     // score steps o of 16 sub-vectors
  static constexpr int kSlots = kSubs / 8;  // value sub-vectors of a lane group
  static constexpr int kPageCodes = 32 * kSubs, kStageBytes = 2 * kPageCodes;  // k or v; k then v
  static constexpr uint32_t kWarpStage = kWStages * kStageBytes;  // stage bytes of one warp
};
// head_dim 128, the shape of v7 / v7r (vecinfer_mma7_decode.cu) and of v8's defaults.
inline constexpr int kDim = PageShape<128>::kDim, kSubs = PageShape<128>::kSubs;
inline constexpr int kPageCodes = PageShape<128>::kPageCodes, kStageBytes = PageShape<128>::kStageBytes;
inline constexpr uint32_t kWarpStage = PageShape<128>::kWarpStage;
static_assert(kWarps * 4 * (kDim + 2) * 4 <= kBookBytes, "merge smem");
static_assert(4 * kPRow * 2 <= kPageCodes, "probabilities fit the k-code half of a stage");



// byte offset code * 256 + moff of entry (code, m) in a code-major book, code = byte `b` of
// word w: one prmt with sel = 0x7604 | b << 4 and moff = m * 8 (< 256) in the low byte.
__device__ __forceinline__ uint32_t EntryOffset(uint32_t w, uint32_t moff, uint32_t sel) {
  return __byte_perm(w, moff, sel);
}
// 8 bytes at shared-window address `addr`.
__device__ __forceinline__ uint2 Lds64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}

// the pages of one warp, table[kWarps * i] for i < npages, and their cp.async into the warp's
// kWStages stages at wst (k codes [32][kSubs] then v codes [32][kSubs]).
template <int D = 128>
struct WarpPages {
  using S = PageShape<D>;
  const DecodeAttentionParams& p;
  const int32_t* table;
  int npages, lane;
  uint8_t* wst;
  const uint8_t* lsrc;  // this lane's 16 bytes of the kv head's k codes in a page
  int64_t dv;           // k codes -> v codes
  __device__ __forceinline__ int Id(int i) const { return i < npages ? table[kWarps * i] : -1; }
  // stage <- page `id` (nothing when id < 0); commits one group either way.
  __device__ __forceinline__ void Issue(int stage, int id) const {
    if (id >= 0) {
      const uint8_t* src = lsrc + static_cast<int64_t>(id) * p.page_stride;
      uint8_t* dst = wst + stage * S::kStageBytes + lane * 16;
      CpAsync16(dst, src);
      if constexpr (D == 128) CpAsync16(dst + 512, src + 512);
      CpAsync16(dst + S::kPageCodes, src + dv);
      if constexpr (D == 128) CpAsync16(dst + S::kPageCodes + 512, src + dv + 512);
    }
    CpAsyncCommit();
  }
};
// warp `warp`'s pages w, w + 16, ... of coded tokens [t0, t1) of sequence b, kv head kvh; its
// stages at smem + warp * kWarpStage for warps < nlow, else at high + (warp - nlow) * kWarpStage.
template <int D = 128>
__device__ __forceinline__ WarpPages<D> MakeWarpPages(const DecodeAttentionParams& p, int b, int kvh, int t0,
                                                   int t1, int warp, int lane, uint8_t* smem, int nlow,
                                                   uint32_t high) {
  const int32_t* table = p.block_tables + b * p.block_table_stride + t0 / 32 + warp;
  const int page_end = (t1 + 31) / 32, page0 = t0 / 32;
  const int npages = page_end - page0 > warp ? (page_end - page0 - warp + kWarps - 1) / kWarps : 0;
  using S = PageShape<D>;
  uint8_t* wst = smem + (warp < nlow ? warp * S::kWarpStage : high + (warp - nlow) * S::kWarpStage);
  const uint8_t* lsrc = p.pages + p.layer_offset + static_cast<int64_t>(kvh) * S::kPageCodes + lane * 16;
  const int64_t dv = static_cast<int64_t>(p.num_kv_heads) * S::kPageCodes;
  return WarpPages<D>{p, table, npages, lane, wst, lsrc, dv};
}

// per-lane constants of the page loop. scores: step (o, j) reads word tig + 4 (o ^ u) of a
// token's k codes (D 64: word tig), byte (j + gid) & 3. values: slot j takes byte j ^ 2 u ^ th
// (kRoute: j ^ (tig & 1) ^ 2 th) of the token's word gid (D 64: byte 2 (gid & 1) + (j ^ th)
// of word gid / 2). the prmt selector puts that byte at bits 8..15 of the address, the
// constant's bytes 0 and 2 (m * 8 and the book's 64 KB page) around it.
template <int D = 128>
struct LaneConsts {
  using S = PageShape<D>;
  int gid, tig, u, th;  // lane = 4 gid + tig, u = gid / 4, th = tig / 2
  uint32_t kmoff[S::kO][4], ksel[4], vmoff[S::kSlots], vsel[S::kSlots];
  uint32_t e0, e1;  // E: k = 2 tig + {0, 1} -> cols 0, 1, k = 2 tig + 8 + {0, 1} -> cols 2, 3
  uint32_t plo, phi;  // values: lanes tig >= 2 load tokens tb + 1 / tb + 9 first
  int ha;      // merge: lanes tig < 2 hold heads ha, ha + 1
  int my_tok;  // scores: lanes tig < 2 hold token 16 t + my_tok
};
// lut_hi: window address bits 16.. of the lut (Cv is the next 64 KB page).
template <bool kRoute, int D = 128>
__device__ __forceinline__ LaneConsts<D> MakeLaneConsts(int gid, int tig, uint32_t lut_hi) {
  using S = PageShape<D>;
  static_assert(!kRoute || D == 128, "routed value gathers: head_dim 128 only");
  LaneConsts<D> c;
  const int u = gid >> 2, th = tig >> 1;
  c.gid = gid;
  c.tig = tig;
  c.u = u;
  c.th = th;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int bj = (j + gid) & 3;
    c.ksel[j] = 0x7604u | (bj << 4);
#pragma unroll
    for (int o = 0; o < S::kO; ++o) c.kmoff[o][j] = (4 * tig + (S::kO == 2 ? 16 * (o ^ u) : 0) + bj) * 8 | lut_hi << 16;
    if constexpr (D == 128) {
      const int sg = kRoute ? j ^ (tig & 1) ^ (2 * th) : j ^ (2 * u) ^ th;
      c.vsel[j] = 0x7604u | (sg << 4);
      c.vmoff[j] = (4 * gid + sg) * 8 | (lut_hi + 1) << 16;
    } else if (j < S::kSlots) {
      const int sg = j ^ th;
      c.vsel[j] = 0x7604u | ((2 * (gid & 1) + sg) << 4);
      c.vmoff[j] = (2 * gid + sg) * 8 | (lut_hi + 1) << 16;
    }
  }
  c.e0 = (gid == 0 ? 0x3C00u : 0u) | (gid == 1 ? 0x3C000000u : 0u);
  c.e1 = (gid == 2 ? 0x3C00u : 0u) | (gid == 3 ? 0x3C000000u : 0u);
  c.plo = th ? 0x1054u : 0x5410u;
  c.phi = th ? 0x3276u : 0x7632u;
  c.ha = 2 * (tig & 1);
  c.my_tok = gid + 8 * (tig & 1);
  return c;
}

// one warp's partial: O^T fragments acc[m-tile][c] and the softmax state of heads 0..3 (the
// same in every lane).
template <int D = 128>
struct WarpPartial {
  static constexpr int kTiles = 2 * PageShape<D>::kSlots;
  float acc[kTiles][4];
  float m_run[4], l_run[4];
  __device__ __forceinline__ void Init() {
#pragma unroll
    for (int i = 0; i < kTiles; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      m_run[h] = -INFINITY;
      l_run[h] = 0.0f;
    }
  }
};

// one page of the warp: lut scores of tokens ptok0 .. + 31 (those >= t1 masked), online
// softmax into *w, O^T += V^T . P. kc, vc: the stage's k and v codes [32 tokens][32]; kc is
// reused for the probabilities. the books sit at the window pages that c's constants name.
template <bool kRoute, int D = 128>
__device__ __forceinline__ void AttendPage(const DecodeAttentionParams& p, const LaneConsts<D>& c, uint8_t* kc,
                                           const uint8_t* vc, int ptok0, int t1, WarpPartial<D>* w) {
  using S = PageShape<D>;
  const int gid = c.gid, tig = c.tig, u = c.u, th = c.th;
  const bool pkeep = u == th;  // B col gid carries p only for the k lanes of its half
  const bool score_lane = th == 0, odd = tig & 1;
  // scores: tile t = tokens 16 t .. + 15; after the 8 k-steps lanes tig < 2 hold heads
  // 0..3 (s[t][h]) of token 16 t + my_tok.
  float s[2][4];
  {
    uint32_t kw[2][2][S::kO];  // [tile][token gid / gid + 8][o]
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int o = 0; o < S::kO; ++o)
          kw[t][r][o] = *reinterpret_cast<const uint32_t*>(kc + (16 * t + 8 * r + gid) * S::kSubs + 4 * (tig + (S::kO == 2 ? 4 * (o ^ u) : 0)));
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int h = 0; h < 4; ++h) s[t][h] = 0.0f;
    if (!(p.bench_skip_stages & 1)) {
#pragma unroll
      for (int o = 0; o < S::kO; ++o)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            const uint2 ea = Lds64(EntryOffset(kw[t][0][o], c.kmoff[o][j], c.ksel[j]));
            const uint2 eb = Lds64(EntryOffset(kw[t][1][o], c.kmoff[o][j], c.ksel[j]));
            Mma16816(s[t], ea.x, ea.y, eb.x, eb.y, c.e0, c.e1);
          }
    }
  }
  // page max per head: own tokens, then the pair of lanes tig, tig ^ 1 splits the heads
  // (ha, ha + 1 stay), then the other lanes; then the other pair back from tig ^ 1.
  float mh[4];
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    const bool ok = score_lane && ptok0 + 16 * t + c.my_tok < t1;
#pragma unroll
    for (int h = 0; h < 4; ++h) s[t][h] = ok ? s[t][h] : -INFINITY;
  }
#pragma unroll
  for (int h = 0; h < 4; ++h) mh[h] = fmaxf(s[0][h], s[1][h]);
  float k0 = odd ? mh[2] : mh[0], k1 = odd ? mh[3] : mh[1];
  k0 = fmaxf(k0, __shfl_xor_sync(0xffffffffu, odd ? mh[0] : mh[2], 1));
  k1 = fmaxf(k1, __shfl_xor_sync(0xffffffffu, odd ? mh[1] : mh[3], 1));
#pragma unroll
  for (int o = 2; o < 32; o <<= 1) {
    k0 = fmaxf(k0, __shfl_xor_sync(0xffffffffu, k0, o));
    k1 = fmaxf(k1, __shfl_xor_sync(0xffffffffu, k1, o));
  }
  const float q0 = __shfl_xor_sync(0xffffffffu, k0, 1), q1 = __shfl_xor_sync(0xffffffffu, k1, 1);
  const float pm[4] = {odd ? q0 : k0, odd ? q1 : k1, odd ? k0 : q0, odd ? k1 : q1};
  float alpha[4], m_use[4];
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const float m_new = fmaxf(w->m_run[h], pm[h]);
    m_use[h] = m_new == -INFINITY ? 0.0f : m_new;
    alpha[h] = exp2f(w->m_run[h] - m_use[h]);
    w->m_run[h] = m_new;
  }
  __syncwarp();  // every lane has read its k codes: the probabilities reuse that space
  __half* pb = reinterpret_cast<__half*>(kc);  // [4 heads][kPRow tokens]
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const float p0 = exp2f(s[0][h] - m_use[h]), p1 = exp2f(s[1][h] - m_use[h]);
    w->l_run[h] = w->l_run[h] * alpha[h] + (p0 + p1);
    if (score_lane) {
      pb[h * kPRow + c.my_tok] = __float2half_rn(p0);
      pb[h * kPRow + 16 + c.my_tok] = __float2half_rn(p1);
    }
  }
  if (alpha[0] != 1.0f || alpha[1] != 1.0f || alpha[2] != 1.0f || alpha[3] != 1.0f) {  // warp-uniform
    const float a0 = odd ? alpha[2] : alpha[0], a1 = odd ? alpha[3] : alpha[1];
#pragma unroll
    for (int mi = 0; mi < WarpPartial<D>::kTiles; ++mi) {
      w->acc[mi][0] *= a0;
      w->acc[mi][1] *= a1;
      w->acc[mi][2] *= a0;
      w->acc[mi][3] *= a1;
    }
  }
  __syncwarp();

  // values: k-step kv = tokens kv * 16 .. + 15; lane k cols are tokens tb, tb + 1, tb + 8, tb + 9.
  if (!(p.bench_skip_stages & 2)) {
    const uint32_t plo = c.plo, phi = c.phi;
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      const int tb = kv * 16 + 2 * tig;
      uint32_t b0 = *reinterpret_cast<const uint32_t*>(pb + (gid & 3) * kPRow + tb);
      uint32_t b1 = *reinterpret_cast<const uint32_t*>(pb + (gid & 3) * kPRow + tb + 8);
      b0 = pkeep ? b0 : 0u;
      b1 = pkeep ? b1 : 0u;
      const int vw = 4 * (D == 128 ? gid : gid >> 1);  // the word of group gid's sub-vectors
      const uint32_t c0 = *reinterpret_cast<const uint32_t*>(vc + (tb + th) * S::kSubs + vw);
      const uint32_t c1 = *reinterpret_cast<const uint32_t*>(vc + (tb + 1 - th) * S::kSubs + vw);
      const uint32_t c2 = *reinterpret_cast<const uint32_t*>(vc + (tb + 8 + th) * S::kSubs + vw);
      const uint32_t c3 = *reinterpret_cast<const uint32_t*>(vc + (tb + 9 - th) * S::kSubs + vw);
      if constexpr (kRoute) {
        // the 4 lanes of a group gather 4 different sub-vectors (sv ^ tig & 1 ^ 2 th; a half
        // warp, which is what one 8-byte gather wavefront serves, sees 16 distinct m mod 16):
        // odd lanes load slot sv's sub-vector at slot sv ^ 1 and swap the registers back.
#pragma unroll
        for (int sp = 0; sp < 4; sp += 2) {
          uint2 r[2][4];
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            r[q][0] = Lds64(EntryOffset(c0, c.vmoff[sp + q], c.vsel[sp + q]));
            r[q][1] = Lds64(EntryOffset(c1, c.vmoff[sp + q], c.vsel[sp + q]));
            r[q][2] = Lds64(EntryOffset(c2, c.vmoff[sp + q], c.vsel[sp + q]));
            r[q][3] = Lds64(EntryOffset(c3, c.vmoff[sp + q], c.vsel[sp + q]));
          }
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            uint2 x[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) x[k] = odd ? r[q ^ 1][k] : r[q][k];
            Mma16816(w->acc[2 * (sp + q)], __byte_perm(x[0].x, x[1].x, plo), __byte_perm(x[0].x, x[1].x, phi),
                     __byte_perm(x[2].x, x[3].x, plo), __byte_perm(x[2].x, x[3].x, phi), b0, b1);
            Mma16816(w->acc[2 * (sp + q) + 1], __byte_perm(x[0].y, x[1].y, plo), __byte_perm(x[0].y, x[1].y, phi),
                     __byte_perm(x[2].y, x[3].y, plo), __byte_perm(x[2].y, x[3].y, phi), b0, b1);
          }
        }
      } else {
#pragma unroll
        for (int sv = 0; sv < S::kSlots; ++sv) {
          const uint2 v0 = Lds64(EntryOffset(c0, c.vmoff[sv], c.vsel[sv]));
          const uint2 v1 = Lds64(EntryOffset(c1, c.vmoff[sv], c.vsel[sv]));
          const uint2 v2 = Lds64(EntryOffset(c2, c.vmoff[sv], c.vsel[sv]));
          const uint2 v3 = Lds64(EntryOffset(c3, c.vmoff[sv], c.vsel[sv]));
          Mma16816(w->acc[2 * sv], __byte_perm(v0.x, v1.x, plo), __byte_perm(v0.x, v1.x, phi),
                   __byte_perm(v2.x, v3.x, plo), __byte_perm(v2.x, v3.x, phi), b0, b1);
          Mma16816(w->acc[2 * sv + 1], __byte_perm(v0.y, v1.y, plo), __byte_perm(v0.y, v1.y, phi),
                   __byte_perm(v2.y, v3.y, plo), __byte_perm(v2.y, v3.y, phi), b0, b1);
        }
      }
    }
  }
}

// after the page loop: waits for the warp's copies, then merges the block's 16 warp partials
// (staged over the books at `books`, >= 64 KB) into workspace slot `split` of heads h0 .. h0 +
// hb - 1. lane tig's slot sv holds sub-vector 4 gid + (sv ^ 2 u ^ th) (kRoute: sv ^ 2 th);
// lane tig ^ 2 holds the same one in slot sv ^ 1 (kRoute: sv ^ 2).
template <bool kRoute, int D = 128>
__device__ __forceinline__ void MergeBlock(const DecodeAttentionParams& p, const LaneConsts<D>& c,
                                           const WarpPartial<D>& w, int b, int h0, int hb, int split,
                                           int warp, int lane, void* books) {
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
    for (int j = 0; j < 4; ++j) tot[mi][j] = w.acc[mi][j] + __shfl_xor_sync(0xffffffffu, w.acc[mi ^ (kRoute ? 4 : 2)][j], 2);
  if (score_lane) {
#pragma unroll
    for (int mi = 0; mi < kT; ++mi) {
      const int sub = D == 128 ? 4 * gid + ((mi >> 1) ^ (kRoute ? 0 : 2 * u)) : 2 * gid + (mi >> 1);
      const int d = 4 * sub + 2 * (mi & 1);
      red[(warp * 4 + ha) * D + d] = tot[mi][0];
      red[(warp * 4 + ha + 1) * D + d] = tot[mi][1];
      red[(warp * 4 + ha) * D + d + 1] = tot[mi][2];
      red[(warp * 4 + ha + 1) * D + d + 1] = tot[mi][3];
    }
  }
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const float l = WarpSum(w.l_run[h]);
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

}  // namespace vqserve::cuda::mma7

#endif  // VQSERVE_KERNELS_CUDA_VECINFER_MMA7_PAGE_CUH_
