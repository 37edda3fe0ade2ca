#ifndef VQSERVE_KERNELS_CUDA_PREFILL_TILED_PREFILL_CUH_
#define VQSERVE_KERNELS_CUDA_PREFILL_TILED_PREFILL_CUH_

// causal attention of a multi-token step on the tensor cores (flash-attention 2 style), with the
// cpu cache's rule (runtime/kv/paged_kv_cache.h, as CodedPrefillKernel in coded_prefill.cuh, its
// reference): the query at position p sees the sink (fp16 rows) below in_sink = min(sink_tokens,
// c), codes in [in_sink, c) with c = CodedTokens(p + 1), and fp16 rows in [c, p] (the ring
// before the step's append, or the step's own rows). a query tile (prefill_tiles.h) holds up to
// 32 tokens of one sequence that share c, so every 32-token key tile (one page) is all sink, all
// codes or all fp16, and a code page is decoded once per tile into shared memory (fp16), not
// into a buffer in device memory.
//
// grid (query tiles, kv heads x head groups, key splits), 64 hb threads: hb query heads of one kv head per
// block, 32 rows each (the tile's tokens); warp w takes head w / 2, tokens 16 (w & 1) .. + 15.
// per key tile (double-buffered in shared memory, the next one filled before this one is used):
//   s = q k^T   mma m16n8k16 (q rows from shared memory, k by ldmatrix), scores in log2 units
//   online softmax per row (quads of lanes share a row), causal mask on the tiles that need it
//   o += p v    p from the score registers as fp16 a-fragments, v by ldmatrix.trans
// a Reader decodes the codes (see coded_prefill.cuh for Token, the reference's method):
//   __device__ void Chunk(const uint8_t* slice, int kvh, int jj, int d0, uint4* k, uint4* v) const;
// dims d0 .. d0 + 7 of token jj of the page layer slice as 8 fp16 each: k in the domain of the
// coded queries qc, v. with Reader::kTakesPosition, jj is the token's absolute position.
// a reader of fp16 rows (Reader::kFp16Rows: fp16 pages) gives instead
//   __device__ void Rows(const uint8_t* slice, int kvh, int jj, const uint16_t** k,
//                        const uint16_t** v) const;
// token jj's k and v rows; every fp16 row of a tile is then copied by cp.async, in flight while
// the tile before is computed (the decoding readers measured 3-43% slower so; docs/history/).
// key splits (blockIdx.z < a.splits, PagedKvStep::prefill_work): split z takes the z-th run of
// ceil(key tiles / splits) key tiles of its query tile and writes unnormalized partials that
// LaunchPrefillCombine (prefill_combine.h) merges; one split writes the output itself.

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/prefill/coded_prefill.cuh"
#include "kernels/cuda/decode/decode_attention_common.cuh"
#include "kernels/cuda/common/mma_ops.cuh"
#include "kernels/cuda/kv_step/paged_kv_step.h"
#include "kernels/cuda/prefill/prefill_combine.h"
#include "kernels/cuda/prefill/prefill_tiles.h"

namespace vqserve::cuda {

// what TiledPrefillKernel reads besides the step and the reader.
struct TiledPrefillArgs {
  const int32_t* tiles = nullptr;  // (num_tiles, 2): first step token, token count
  int num_tiles = 0;
  int residual = 0;  // the codec's residual window (CodedTokens)
  bool after_append =
      false;  // fp16 pages: the step's rows are in the cache already; c = coded_after
  const float* q = nullptr;   // queries for fp16 keys, (tokens, heads, D) rows at + t * q_stride
  const float* qc = nullptr;  // queries for decoded codes (q itself for most codecs)
  int64_t q_stride = 0;
  const float* knew = nullptr;  // the step's own rows (tokens, kv heads, D) at + t * kv_stride
  const float* vnew = nullptr;
  int64_t kv_stride = 0;
  const int32_t* seq_tok_start = nullptr;  // (batch) step token of position num_cached[b]
  float* out = nullptr;                    // (tokens, heads, D) rows at + t * out_stride
  int64_t out_stride = 0;
  int num_heads = 0;
  int hb = 1;  // query heads per block (<= 4)
  float scale = 0.0f;
  int splits = 1;         // key splits (blockIdx.z)
  float* part = nullptr;  // splits > 1: the partials (prefill_combine.h)
};

namespace tiled {

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const __half* p) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const __half* p) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
// 8 floats -> 8 fp16 (round to nearest).
__device__ __forceinline__ uint4 PackHalf8(const float (&x)[8]) {
  return make_uint4(PackHalf2(x[0], x[1]), PackHalf2(x[2], x[3]), PackHalf2(x[4], x[5]),
                    PackHalf2(x[6], x[7]));
}
__device__ __forceinline__ uint4 LoadHalf8(const uint16_t* p) {
  return *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ uint4 LoadFloat8AsHalf(const float* p) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  const float x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  return PackHalf8(x);
}

// whether a Reader's pages are fp16 rows (Reader::kFp16Rows, see the top of this file).
template <class Reader, class = void>
struct ReaderHasFp16Rows : std::false_type {};
template <class Reader>
struct ReaderHasFp16Rows<Reader, std::void_t<decltype(Reader::kFp16Rows)>>
    : std::bool_constant<Reader::kFp16Rows> {};

// shared memory of a block: q [rows][kRow] (and qc [rows][kRow] when it differs), then k and
// v [2 buffers][32][kRow]; rows padded by 16 bytes so ldmatrix rows hit distinct banks.
template <int D>
struct Smem {
  static constexpr int kRow = D + 8;  // halves per row
  static __host__ __device__ int Bytes(int hb, bool two_q) {
    return 2 * kRow * (32 * hb * (two_q ? 2 : 1) + 4 * kPrefillTileTokens);
  }
};

}  // namespace tiled

// D: head_dim (64 or 128). see the top of this file.
template <int D, class Reader>
__global__ void __launch_bounds__(256, 2)
    TiledPrefillKernel(const PagedKvStep s, const Reader rd, const TiledPrefillArgs a) {
  using tiled::Smem;
  constexpr int kRow = Smem<D>::kRow, T = kPrefillTileTokens, kChunks = D / 8;
  extern __shared__ uint4 tiled_prefill_smem[];
  const int tid = threadIdx.x, nthreads = blockDim.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t4 = lane & 3;
  const int group = a.num_heads / s.num_kv_heads, groups = group / a.hb;
  const int kvh = blockIdx.y / groups, h0 = kvh * group + (blockIdx.y % groups) * a.hb;
  const int t0 = a.tiles[2 * blockIdx.x], nt = a.tiles[2 * blockIdx.x + 1];
  const int b = s.tok_seq[t0], p0 = s.tok_pos[t0], p_last = p0 + nt - 1;
  const int rows = T * a.hb;
  const bool two_q = a.qc != a.q;
  __half* qs = reinterpret_cast<__half*>(tiled_prefill_smem);
  __half* qcs = two_q ? qs + rows * kRow : qs;
  __half* ks = qs + (two_q ? 2 : 1) * rows * kRow;  // [2][T][kRow]
  __half* vs = ks + 2 * T * kRow;                   // [2][T][kRow]

  // q rows r = head r / T, token r % T, scaled into log2 units; rows past the tile are zeros.
  const float qscale = a.scale * 1.4426950408889634f;
  for (int i = tid; i < rows * kChunks; i += nthreads) {
    const int r = i / kChunks, d0 = 8 * (i % kChunks), hh = r / T, tq = r % T;
    uint4 x = make_uint4(0u, 0u, 0u, 0u), y = x;
    if (tq < nt) {
      const int64_t at = (t0 + tq) * a.q_stride + static_cast<int64_t>(h0 + hh) * D + d0;
      float f[8];
      const float4 u = *reinterpret_cast<const float4*>(a.q + at),
                   w = *reinterpret_cast<const float4*>(a.q + at + 4);
      f[0] = u.x * qscale, f[1] = u.y * qscale, f[2] = u.z * qscale, f[3] = u.w * qscale;
      f[4] = w.x * qscale, f[5] = w.y * qscale, f[6] = w.z * qscale, f[7] = w.w * qscale;
      x = tiled::PackHalf8(f);
      if (two_q) {
        const float4 uc = *reinterpret_cast<const float4*>(a.qc + at),
                     wc = *reinterpret_cast<const float4*>(a.qc + at + 4);
        f[0] = uc.x * qscale, f[1] = uc.y * qscale, f[2] = uc.z * qscale, f[3] = uc.w * qscale;
        f[4] = wc.x * qscale, f[5] = wc.y * qscale, f[6] = wc.z * qscale, f[7] = wc.w * qscale;
        y = tiled::PackHalf8(f);
      }
    }
    *reinterpret_cast<uint4*>(qs + r * kRow + d0) = x;
    if (two_q) *reinterpret_cast<uint4*>(qcs + r * kRow + d0) = y;
  }

  // keys [0, in_sink) sink rows, [in_sink, c) codes, [c, p] fp16 (ring below `cached`, else
  // the step's rows; all ring rows after the append).
  const int c =
      a.after_append ? s.coded_after[b] : CodedTokensDev(a.residual, s.page_tokens, p0 + 1);
  const int in_sink = min(s.sink_tokens, c);
  const int cached = a.after_append ? 0x7fffffff : s.num_cached[b];
  const int32_t* table = s.block_tables + b * s.block_table_stride;
  const int row = s.num_kv_heads * D;
  const int64_t sink_base = static_cast<int64_t>(s.slots[b]) * s.sink_slot_stride + kvh * D;
  const int64_t ring_base = static_cast<int64_t>(s.slots[b]) * s.ring_slot_stride + kvh * D;
  const int n_tiles = p_last / T + 1;
  constexpr bool kRows = tiled::ReaderHasFp16Rows<Reader>::value;
  auto fill = [&](int kt, int buf) {
    const int j0 = T * kt;
    const int kind = j0 < in_sink ? 0 : j0 < c ? 1 : 2;
    const uint8_t* slice =
        kind == 1 ? s.pages + table[kt] * s.page_stride + s.layer_offset : nullptr;
    __half* kd = ks + buf * T * kRow;
    __half* vd = vs + buf * T * kRow;
    if constexpr (kRows) {  // fp16 rows by cp.async (waited for before the next barrier)
      for (int i = tid; i < T * kChunks; i += nthreads) {
        const int jj = i / kChunks, d0 = 8 * (i % kChunks), j = j0 + jj;
        uint4* kdst = reinterpret_cast<uint4*>(kd + jj * kRow + d0);
        uint4* vdst = reinterpret_cast<uint4*>(vd + jj * kRow + d0);
        const uint16_t *kr = nullptr, *vr = nullptr;
        if (j > p_last) {
          *kdst = *vdst = make_uint4(0u, 0u, 0u, 0u);
        } else if (kind == 0) {
          kr = s.sink_k + sink_base + static_cast<int64_t>(j) * row + d0;
          vr = s.sink_v + sink_base + static_cast<int64_t>(j) * row + d0;
        } else if (kind == 1) {
          rd.Rows(slice, kvh, jj, &kr, &vr);
          kr += d0;
          vr += d0;
        } else if (j < cached) {
          kr = s.ring_k + ring_base + static_cast<int64_t>(j % s.ring_tokens) * row + d0;
          vr = s.ring_v + ring_base + static_cast<int64_t>(j % s.ring_tokens) * row + d0;
        } else {
          const int64_t r =
              static_cast<int64_t>(a.seq_tok_start[b] + j - cached) * a.kv_stride + kvh * D + d0;
          *kdst = tiled::LoadFloat8AsHalf(a.knew + r);
          *vdst = tiled::LoadFloat8AsHalf(a.vnew + r);
        }
        if (kr != nullptr) {
          CpAsync16(kdst, kr);
          CpAsync16(vdst, vr);
        }
      }
      CpAsyncCommit();
    } else {
      for (int i = tid; i < T * kChunks; i += nthreads) {
        const int jj = i / kChunks, d0 = 8 * (i % kChunks), j = j0 + jj;
        uint4 kx = make_uint4(0u, 0u, 0u, 0u), vx = kx;
        if (j <= p_last) {
          if (kind == 0) {
            const int64_t r = sink_base + static_cast<int64_t>(j) * row + d0;
            kx = tiled::LoadHalf8(s.sink_k + r);
            vx = tiled::LoadHalf8(s.sink_v + r);
          } else if (kind == 1) {
            if constexpr (ReaderTakesPosition<Reader>::value) {
              rd.Chunk(slice, kvh, j, d0, &kx, &vx);
            } else {
              rd.Chunk(slice, kvh, jj, d0, &kx, &vx);
            }
          } else if (j < cached) {
            const int64_t r = ring_base + static_cast<int64_t>(j % s.ring_tokens) * row + d0;
            kx = tiled::LoadHalf8(s.ring_k + r);
            vx = tiled::LoadHalf8(s.ring_v + r);
          } else {
            const int64_t r =
                static_cast<int64_t>(a.seq_tok_start[b] + j - cached) * a.kv_stride + kvh * D + d0;
            kx = tiled::LoadFloat8AsHalf(a.knew + r);
            vx = tiled::LoadFloat8AsHalf(a.vnew + r);
          }
        }
        *reinterpret_cast<uint4*>(kd + jj * kRow + d0) = kx;
        *reinterpret_cast<uint4*>(vd + jj * kRow + d0) = vx;
      }
    }
  };

  // this warp's rows: head hw, tokens tw + g and tw + g + 8 of the tile.
  const int hw = warp >> 1, tw = 16 * (warp & 1);
  const bool active = tw < nt;
  const int pos0 = p0 + tw + g, pos1 = pos0 + 8;  // positions of rows g and g + 8
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  const int qrow = T * hw + tw + (lane & 7) + 8 * ((lane >> 3) & 1), qcol = 8 * (lane >> 4);
  const int krow = (lane & 7) + 8 * (lane >> 4), kcol = 8 * ((lane >> 3) & 1);
  const int vrow = (lane & 7) + 8 * ((lane >> 3) & 1), vcol = 8 * (lane >> 4);

  // this split's key tiles [kt0, kt1).
  const int per = (n_tiles + a.splits - 1) / a.splits;
  const int kt0 = min(n_tiles, static_cast<int>(blockIdx.z) * per), kt1 = min(n_tiles, kt0 + per);
  if (kt0 < kt1) fill(kt0, kt0 & 1);
  if constexpr (kRows) CpAsyncWait<0>();
  __syncthreads();
  for (int kt = kt0; kt < kt1; ++kt) {
    if (kt + 1 < kt1) fill(kt + 1, (kt + 1) & 1);
    const int j0 = T * kt;
    if (active) {
      const __half* qsrc = (j0 >= in_sink && j0 < c) ? qcs : qs;
      const __half* kb = ks + (kt & 1) * T * kRow;
      const __half* vb = vs + (kt & 1) * T * kRow;
      // s (16 rows x 32 keys) = q k^T: 4 n-tiles of 8 keys.
      float sc[4][4];
#pragma unroll
      for (int n = 0; n < 4; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qa[4];
        tiled::LdMatrixX4(qa, qsrc + qrow * kRow + 16 * kk + qcol);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          uint32_t kf[4];
          tiled::LdMatrixX4(kf, kb + (16 * np + krow) * kRow + 16 * kk + kcol);
          Mma16816(sc[2 * np], qa[0], qa[1], qa[2], qa[3], kf[0], kf[1]);
          Mma16816(sc[2 * np + 1], qa[0], qa[1], qa[2], qa[3], kf[2], kf[3]);
        }
      }
      // causal mask where some key of the tile lies past one of the warp's rows.
      if (j0 + T - 1 > p0 + tw) {
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          const int key = j0 + 8 * n + 2 * t4;
          if (key > pos0) sc[n][0] = -INFINITY;
          if (key + 1 > pos0) sc[n][1] = -INFINITY;
          if (key > pos1) sc[n][2] = -INFINITY;
          if (key + 1 > pos1) sc[n][3] = -INFINITY;
        }
      }
      // online softmax: rows g (elements 0, 1) and g + 8 (2, 3); a quad of lanes shares a row.
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        mx[0] = fmaxf(mx[0], fmaxf(sc[n][0], sc[n][1]));
        mx[1] = fmaxf(mx[1], fmaxf(sc[n][2], sc[n][3]));
      }
      float alpha[2], mu[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float m_new = fmaxf(m_run[r], mx[r]);
        mu[r] = m_new == -INFINITY ? 0.0f : m_new;
        alpha[r] = exp2f(m_run[r] - mu[r]);
        m_run[r] = m_new;
      }
      float ls[2] = {0.0f, 0.0f};
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        sc[n][0] = exp2f(sc[n][0] - mu[0]);
        sc[n][1] = exp2f(sc[n][1] - mu[0]);
        sc[n][2] = exp2f(sc[n][2] - mu[1]);
        sc[n][3] = exp2f(sc[n][3] - mu[1]);
        ls[0] += sc[n][0] + sc[n][1];
        ls[1] += sc[n][2] + sc[n][3];
      }
      l_run[0] = l_run[0] * alpha[0] + ls[0];
      l_run[1] = l_run[1] * alpha[1] + ls[1];
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        o[i][0] *= alpha[0];
        o[i][1] *= alpha[0];
        o[i][2] *= alpha[1];
        o[i][3] *= alpha[1];
      }
      // o (16 rows x D) += p (16 x 32 keys) v (32 x D): two k-steps of 16 keys.
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const uint32_t pa0 = PackHalf2(sc[2 * kk][0], sc[2 * kk][1]);
        const uint32_t pa1 = PackHalf2(sc[2 * kk][2], sc[2 * kk][3]);
        const uint32_t pa2 = PackHalf2(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
        const uint32_t pa3 = PackHalf2(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
        for (int np = 0; np < D / 16; ++np) {
          uint32_t vf[4];
          tiled::LdMatrixX4Trans(vf, vb + (16 * kk + vrow) * kRow + 16 * np + vcol);
          Mma16816(o[2 * np], pa0, pa1, pa2, pa3, vf[0], vf[1]);
          Mma16816(o[2 * np + 1], pa0, pa1, pa2, pa3, vf[2], vf[3]);
        }
      }
    }
    if constexpr (kRows) CpAsyncWait<0>();
    __syncthreads();  // buffer kt & 1 is free for tile kt + 2; tile kt + 1 is visible
  }
  if (!active) return;
  float l[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] = l_run[r];
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  const int64_t rows_all = static_cast<int64_t>(s.num_tokens) * a.num_heads;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int tq = tw + g + 8 * r;
    if (tq >= nt) continue;
    float* dst;
    float inv;
    if (a.splits == 1) {  // the output
      dst = a.out + (t0 + tq) * a.out_stride + static_cast<int64_t>(h0 + hw) * D;
      inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    } else {  // split z's partial of row (token, head), see prefill_combine.h
      const int64_t at =
          blockIdx.z * rows_all + static_cast<int64_t>(t0 + tq) * a.num_heads + h0 + hw;
      dst = a.part + at * D;
      inv = 1.0f;
      if (t4 == 0) {
        reinterpret_cast<float2*>(a.part + a.splits * rows_all * D)[at] =
            make_float2(m_run[r], l[r]);
      }
    }
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      *reinterpret_cast<float2*>(dst + 8 * i + 2 * t4) =
          make_float2(o[i][2 * r] * inv, o[i][2 * r + 1] * inv);
    }
  }
}

// heads per block for TiledPrefillKernel: the largest divisor of the group size <= 4.
inline int TiledPrefillHeadsPerBlock(int num_heads, int num_kv_heads) {
  const int group = num_heads / num_kv_heads;
  for (int hb = 4; hb > 1; --hb) {
    if (group % hb == 0) return hb;
  }
  return 1;
}

// whether TiledPrefillKernel takes the step: query tiles planned, head_dim 64 or 128, pages
// of 32 tokens.
inline bool TiledPrefillFits(const PagedKvStep& step, const TiledPrefillArgs& a) {
  return a.tiles != nullptr && a.num_tiles > 0 && (step.head_dim == 64 || step.head_dim == 128) &&
         step.page_tokens == kPrefillTileTokens && step.num_kv_heads > 0 &&
         a.num_heads % step.num_kv_heads == 0;
}

// the key splits of a launch of `blocks` blocks (PagedKvStep::prefill_splits, else
// PrefillKeySplits for the gpu's sms), as many as prefill_work holds.
inline int TiledPrefillSplits(const PagedKvStep& step, const TiledPrefillArgs& a, int blocks) {
  const int64_t per_split =
      PrefillWorkFloats(step.num_tokens, a.num_heads, step.head_dim, /*splits=*/1);
  const int64_t room = step.prefill_work == nullptr || per_split <= 0
                           ? 1
                           : step.prefill_work_floats / per_split;
  int want = step.prefill_splits;
  if (want <= 0) {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      return 1;
    }
    want = PrefillKeySplits(blocks, sms,
                            (step.max_seq_len + kPrefillTileTokens - 1) / kPrefillTileTokens);
  }
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, room)));
}

// launches TiledPrefillKernel<D, Reader> (a.hb and the splits set here), and the combine of the
// splits; the caller checks TiledPrefillFits.
template <class Reader>
cudaError_t LaunchTiledPrefill(const PagedKvStep& step, const Reader& rd, TiledPrefillArgs a,
                               cudaStream_t stream) {
  a.hb = TiledPrefillHeadsPerBlock(a.num_heads, step.num_kv_heads);
  const bool two_q = a.qc != a.q;
  const int groups = a.num_heads / step.num_kv_heads / a.hb, threads = 64 * a.hb;
  const auto go = [&](auto kernel, int bytes) {
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e != cudaSuccess) return e;
    const int blocks = a.num_tiles * step.num_kv_heads * groups;
    a.splits = TiledPrefillSplits(step, a, blocks);
    a.part = a.splits > 1 ? step.prefill_work : nullptr;
    LastTiledPrefillSplits() = a.splits;
    const dim3 grid(a.num_tiles, step.num_kv_heads * groups, a.splits);
    kernel<<<grid, threads, bytes, stream>>>(step, rd, a);
    e = cudaGetLastError();
    if (e != cudaSuccess || a.splits == 1) return e;
    return LaunchPrefillCombine(a.part, a.splits, step.num_tokens, a.num_heads, step.head_dim,
                                a.out, a.out_stride, stream);
  };
  if (step.head_dim == 64) {
    return go(TiledPrefillKernel<64, Reader>, tiled::Smem<64>::Bytes(a.hb, two_q));
  }
  return go(TiledPrefillKernel<128, Reader>, tiled::Smem<128>::Bytes(a.hb, two_q));
}

// causal attention of a multi-token step over a coded cache: TiledPrefillKernel where it fits
// (step.q_tiles planned, see TiledPrefillFits), else the reference CodedPrefillKernel; the
// arguments as LaunchCodedPrefill's. the caller checks CodedPrefillShapeError.
template <class Reader>
cudaError_t LaunchPrefill(const PagedKvStep& step, const Reader& rd, int residual, const float* q,
                          const float* qc, int64_t q_stride, const float* k, const float* v,
                          int64_t kv_stride, const int32_t* seq_tok_start, float* out,
                          int64_t out_stride, int num_heads, float scale, cudaStream_t stream) {
  TiledPrefillArgs a;
  a.tiles = step.q_tiles;
  a.num_tiles = step.num_q_tiles;
  a.residual = residual;
  a.q = q;
  a.qc = qc;
  a.q_stride = q_stride;
  a.knew = k;
  a.vnew = v;
  a.kv_stride = kv_stride;
  a.seq_tok_start = seq_tok_start;
  a.out = out;
  a.out_stride = out_stride;
  a.num_heads = num_heads;
  a.scale = scale;
  if (TiledPrefillFits(step, a)) return LaunchTiledPrefill(step, rd, a, stream);
  LaunchCodedPrefill(step, rd, residual, q, qc, q_stride, k, v, kv_stride, seq_tok_start, out,
                     out_stride, num_heads, scale, stream);
  return cudaGetLastError();
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_PREFILL_TILED_PREFILL_CUH_
