#ifndef VQSERVE_KERNELS_CUDA_DECODE_KIVI_STAGED_DECODE_CUH_
#define VQSERVE_KERNELS_CUDA_DECODE_KIVI_STAGED_DECODE_CUH_

// kivi paged decode attention on the tensor cores (instantiated per head_dim in
// kivi_staged_decode_d64.cu / _d128.cu).
//
// grid (splits + 1, kv heads x head groups, batch), 256 threads (8 warps), hb <= 8 query heads
// of one kv head per block; block x == splits folds the fp16 residual ring and the sink
// (BlockResidual for hb <= 4, else ResidualPartial). in a split, warp w takes pages w, w + 8,
// ... and streams each kv head page slice (headers kmin, kscale [D], vmin, vscale [32][D / 32];
// k codes [D][32]; v codes [32][D], B bits) through kStages private shared-memory buffers
// (cp.async, __syncwarp only).
// per page, with lane = (g = lane / 4, q = lane % 4) and fragments of mma.m16n8k16 (f16 in,
// f32 accumulate):
//   scores S (16 x 8 tokens) = Q (16 x 16 channels) . K (16 channels x 8 tokens), 4 token
//     tiles x D / 16 k-steps: Q rows 0..7 = fp16 hi parts of the heads' scaled queries, rows
//     8..15 the lo parts (q = hi + lo to ~2^-22), so row g + row g + 8 = head g's score. the K
//     fragment (channels 2 of lane q, token g of the tile) comes from the code words of two
//     channels: (w >> B * slot) & mask | 0x6400 gives 1024 + code in both fp16 halves, a
//     byte permute pairs the channels, then (x - 1024) * kscale + kmin (one fp16 fma).
//   softmax  lane holds head g of its 8 tokens: online max / sum in log2 units per warp.
//   values   O (16 channels x 8 heads) += V (16 channels x 16 tokens) . P (16 tokens x 8 heads):
//     P is the score accumulator repacked as fp16 (the flash-attention register reuse), V is
//     dequantized like K from two tokens' code words: (x - 1024) * vscale + vmin.
// token and channel orders inside a tile follow the bit layout (TileToken, KeyChannel,
// ValueChannel) so that every lane shifts its words by one constant. value code rows are
// swizzled in 16-byte chunks (ValueSwizzle) so that a quarter warp's 16-byte reads hit distinct
// banks. the warps' partials are merged into one workspace slot at the end.

#include <cuda_fp16.h>

#include <string>

#include "kernels/cuda/decode/block_residual.cuh"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/dense_attention.cuh"
#include "kernels/cuda/decode/kivi_staged_decode.h"
#include "kernels/cuda/common/mma_ops.cuh"
#include "kernels/cuda/decode/warp_flash_state.cuh"

namespace vqserve::cuda {
namespace kivi_staged {

constexpr int kThreads = 256, kWarps = kThreads / 32, kPage = 32, kMaxHeads = 8;

// shared memory of one block, in bytes: kStages page buffers per warp, then the query fragments.
template <int D, int B>
struct Layout {
  static constexpr int kHdr = 2 * D;            // one header segment of a kv head's page
  static constexpr int kCodes = 4 * B * D;      // k codes (or v codes) of a kv head's page
  static constexpr int kVRow = D * B / 8;       // v code bytes of one token
  static constexpr int kVChunks = kVRow / 16;   // 16-byte chunks per v row: 1, 2 or 4
  static constexpr int kKmin = 0, kKscale = kHdr, kVmin = 2 * kHdr, kVscale = 3 * kHdr;
  static constexpr int kKc = 4 * kHdr, kVc = kKc + kCodes;
  static constexpr int kPageBytes = kVc + kCodes;
  static constexpr int kQFragBytes = (D / 16) * 32 * 16;  // uint4 per (k-step, lane)
  static constexpr int kBudget = 110 * 1024;             // per block: two blocks per sm
  static constexpr int kFit = (kBudget - kQFragBytes) / (kWarps * kPageBytes);
  static constexpr int kStages = kFit < 4 ? kFit : 4;
  static constexpr int kStageBytes = kWarps * kStages * kPageBytes;
  static constexpr int kQ = kStageBytes;
  static constexpr int kBytes = kQ + kQFragBytes;
  static_assert(kStages >= 2, "two page buffers per warp");
  static_assert(WarpMergeBytes<D, kWarps, kMaxHeads>() <= kStageBytes, "merge fits the stages");
  static_assert(DenseSmem<D, kMaxHeads, kThreads>::kFloats * 4 <= kBytes, "ring fits");
  static_assert(BlockResidualFloats<D, kThreads>() * 4 <= kBytes, "block ring fits");
  static_assert(kHdr % 16 == 0 && kVRow % 16 == 0 && kPageBytes % 16 == 0, "16-byte chunks");
};

// token of slot j (0..7) of token tile nt (0..3) of a page: the key code word that lane g
// reads holds slots g of two tiles at bits B * (g % (16 / B)) and 16 + that.
template <int B>
__device__ __forceinline__ int TileToken(int nt, int j) {
  return B == 2 ? 8 * nt + j : 16 * (j >> 2) + 4 * nt + (j & 3);
}
// channel of k-step s for lane quad position q, j = 0, 1 (b0 / a0 pair), 2, 3 (b1 / a2 pair).
template <int B>
__device__ __forceinline__ int KeyChannel(int s, int q, int j) {
  return B == 2 ? 16 * s + 4 * q + j : 16 * s + 2 * q + (j & 1) + 8 * (j >> 1);
}
// channel of value m-tile m, row g (hi = 0) or g + 8 (hi = 1).
template <int D, int B>
__device__ __forceinline__ int ValueChannel(int m, int g, int hi) {
  return B == 2 ? 16 * m + g + 8 * hi : 8 * (m + (D / 16) * (g >> 2)) + (g & 3) + 4 * hi;
}
// 16-byte chunk permutation of v code row t (chunk c is stored at c ^ ValueSwizzle(t)).
template <int kChunks>
__device__ __forceinline__ int ValueSwizzle(int t) {
  if constexpr (kChunks == 1) return 0;
  if constexpr (kChunks == 2) return ((t >> 2) ^ (t >> 4)) & 1;
  return ((t >> 1) & 1) | (((t >> 4) & 1) << 1);
}

__device__ __forceinline__ __half2 AsHalf2(uint32_t x) { return *reinterpret_cast<__half2*>(&x); }
__device__ __forceinline__ uint32_t AsU32(__half2 h) { return *reinterpret_cast<uint32_t*>(&h); }
// two biased codes (1024 + c in each fp16 half) -> c * scale + min, per half.
__device__ __forceinline__ uint32_t Dequant(uint32_t biased, uint32_t scale, uint32_t mn) {
  const __half2 c = __hsub2(AsHalf2(biased), AsHalf2(0x64006400u));
  return AsU32(__hfma2(c, AsHalf2(scale), AsHalf2(mn)));
}
// codes at bits sh.. and 16 + sh.. of w as 1024 + code fp16 halves.
template <int B>
__device__ __forceinline__ uint32_t Biased(uint32_t w, int sh) {
  constexpr uint32_t kMask = B == 2 ? 0x00030003u : 0x000F000Fu;
  return ((w >> sh) & kMask) | 0x64006400u;
}


// copies kv head kvh's part of the page slice at `slice` (num_kv_heads H) into buffer st: the
// 4 header segments, k codes, v codes with swizzled rows. one warp; commits nothing.
template <int D, int B>
__device__ __forceinline__ void StagePage(uint8_t* st, const uint8_t* slice, int H, int kvh,
                                          int lane) {
  using L = Layout<D, B>;
  const int64_t hd = static_cast<int64_t>(H) * D;
  constexpr int kSegChunks = L::kHdr / 16;
#pragma unroll
  for (int c = lane; c < 4 * kSegChunks; c += 32) {
    const int seg = c / kSegChunks, i = c % kSegChunks;
    CpAsync16(st + seg * L::kHdr + i * 16, slice + seg * 2 * hd + kvh * L::kHdr + i * 16);
  }
  const uint8_t* kc = slice + 8 * hd + static_cast<int64_t>(kvh) * L::kCodes;
#pragma unroll
  for (int c = lane; c < L::kCodes / 16; c += 32) CpAsync16(st + L::kKc + c * 16, kc + c * 16);
  const uint8_t* vc = slice + 8 * hd + 4 * B * hd + static_cast<int64_t>(kvh) * L::kCodes;
#pragma unroll
  for (int c = lane; c < L::kCodes / 16; c += 32) {
    const int t = c / L::kVChunks, cc = c % L::kVChunks;
    CpAsync16(st + L::kVc + t * L::kVRow + (cc ^ ValueSwizzle<L::kVChunks>(t)) * 16, vc + c * 16);
  }
}

// q (batch, num_heads, D) fp32; pages per docs/kv_formats.md "kivi"; ring / sink fp16; writes
// workspace partials (batch, num_heads, splits + 1, D + 2).
template <int D, int B>
__global__ void __launch_bounds__(kThreads, kKiviStagedBlocksPerSm)
    KiviStagedDecodeKernel(const DecodeAttentionParams p, int hb, int num_splits) {
  using L = Layout<D, B>;
  constexpr int kNs = D / 16;  // score k-steps = value m-tiles
  extern __shared__ float4 kivi_staged_smem4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(kivi_staged_smem4);
  const int split = blockIdx.x, b = blockIdx.z;
  int kvh, h0;
  BlockHeads(p, hb, &kvh, &h0);
  if (split == num_splits) {
    float* f = reinterpret_cast<float*>(smem);
    if (hb <= 4) {
      BlockResidual<D, kThreads>(p, b, kvh, h0, hb, split, f);
    } else {
      ResidualPartial<D, 8, kThreads>(p, b, kvh, h0, hb, split, f);
    }
    return;
  }
  int t0, t1;
  SplitRange(p.coded_lens[b], num_splits, split, &t0, &t1);
  if (t0 >= t1) {
    WriteEmptyPartial(p, b, h0, hb, split);
    return;
  }
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, qd = lane & 3;

  // page buffers of this warp; its pages are page0 + warp + kWarps i, i < mine.
  uint8_t* wst = smem + warp * L::kStages * L::kPageBytes;
  const uint8_t* base = p.pages + p.layer_offset;
  const int32_t* table = p.block_tables + b * p.block_table_stride;
  const int page0 = t0 / kPage, npages = (t1 - t0 + kPage - 1) / kPage;
  const int mine = warp < npages ? (npages - warp + kWarps - 1) / kWarps : 0;
  auto issue = [&](int i) {
    if (i < mine) {
      const int pg = page0 + warp + kWarps * i;
      StagePage<D, B>(wst + (i % L::kStages) * L::kPageBytes,
                      base + static_cast<int64_t>(table[pg]) * p.page_stride, p.num_kv_heads, kvh,
                      lane);
    }
    CpAsyncCommit();
  };
#pragma unroll
  for (int i = 0; i < L::kStages - 1; ++i) issue(i);

  // query fragments of k-step s for lane l at qfrag[s * 32 + l]: (hi, lo) of channels
  // KeyChannel(s, q, 0..1), then of KeyChannel(s, q, 2..3); head g of the lane (0 if g >= hb).
  uint4* qfrag = reinterpret_cast<uint4*>(smem + L::kQ);
  {
    const float qscale = p.scale * 1.4426950408889634f;  // scores in log2 units
    for (int i = tid; i < kNs * 32; i += kThreads) {
      const int s = i >> 5, hg = (i & 31) >> 2, qq = i & 3;
      uint4 f = make_uint4(0u, 0u, 0u, 0u);
      if (hg < hb) {
        const float* qh = p.q + b * p.q_batch_stride + (h0 + hg) * p.q_head_stride;
        SplitHalf2(qh[KeyChannel<B>(s, qq, 0)] * qscale, qh[KeyChannel<B>(s, qq, 1)] * qscale, &f.x,
                   &f.y);
        SplitHalf2(qh[KeyChannel<B>(s, qq, 2)] * qscale, qh[KeyChannel<B>(s, qq, 3)] * qscale, &f.z,
                   &f.w);
      }
      qfrag[i] = f;
    }
  }
  __syncthreads();

  const int ksh = B == 2 ? 2 * g : 4 * (g & 3);  // bit offset of this lane's codes in a word
  const int koff = B == 2 ? 0 : 8 * (g >> 2);     // byte of this lane's 8 in a 4-bit k channel
  const int vc0 = B == 2 ? 0 : (D / 64) * (g >> 2);  // first 16-byte chunk of this lane's v words
  float acc[kNs][4];
#pragma unroll
  for (int m = 0; m < kNs; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.0f;
  float m_run = -INFINITY, l_run = 0.0f;

  for (int i = 0; i < mine; ++i) {
    CpAsyncWait<L::kStages - 2>();
    __syncwarp();  // page i landed for every lane; buffer (i - 1) % kStages is free
    issue(i + L::kStages - 1);
    uint8_t* st = wst + (i % L::kStages) * L::kPageBytes;
    const int valid = min(kPage, t1 - (page0 + warp + kWarps * i) * kPage);
    if (valid < kPage) {
      // tokens past the end: zero value mins / scales so that stale bytes dequantize to 0.
      uint16_t* vm = reinterpret_cast<uint16_t*>(st + L::kVmin);
      uint16_t* vs = reinterpret_cast<uint16_t*>(st + L::kVscale);
      for (int j = valid * (D / 32) + lane; j < kPage * (D / 32); j += 32) vm[j] = vs[j] = 0;
      __syncwarp();
    }

    // scores: sc[nt] = rows (hi g, lo g) x tokens TileToken(nt, 2 q + {0, 1}).
    float sc[4][4];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
    const uint8_t* kc = st + L::kKc;
#pragma unroll
    for (int s = 0; s < kNs; ++s) {
      const uint4 qa = qfrag[s * 32 + lane];
      uint2 w[4];  // this lane's code words of channels KeyChannel(s, qd, j)
      uint32_t km[2], ks[2];  // (min, scale) fp16 pairs of channels j = 0, 1 and j = 2, 3
      if constexpr (B == 2) {
        const int c = KeyChannel<B>(s, qd, 0);  // 4 consecutive channels, 8 bytes each
        const uint4 x = *reinterpret_cast<const uint4*>(kc + c * 8);
        const uint4 y = *reinterpret_cast<const uint4*>(kc + c * 8 + 16);
        w[0] = make_uint2(x.x, x.y);
        w[1] = make_uint2(x.z, x.w);
        w[2] = make_uint2(y.x, y.y);
        w[3] = make_uint2(y.z, y.w);
        const uint2 a = *reinterpret_cast<const uint2*>(st + L::kKmin + 2 * c);
        const uint2 z = *reinterpret_cast<const uint2*>(st + L::kKscale + 2 * c);
        km[0] = a.x, km[1] = a.y, ks[0] = z.x, ks[1] = z.y;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          w[j] = *reinterpret_cast<const uint2*>(kc + KeyChannel<B>(s, qd, j) * 16 + koff);
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int c = KeyChannel<B>(s, qd, 2 * j);
          km[j] = *reinterpret_cast<const uint32_t*>(st + L::kKmin + 2 * c);
          ks[j] = *reinterpret_cast<const uint32_t*>(st + L::kKscale + 2 * c);
        }
      }
      // word half e of channel pair j: tiles 2 e (low fp16 bits) and 2 e + 1 (high bits).
      uint32_t kb[2][4];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const uint32_t wa = e ? w[2 * j].y : w[2 * j].x, wb = e ? w[2 * j + 1].y : w[2 * j + 1].x;
          const uint32_t ma = Biased<B>(wa, ksh), mb = Biased<B>(wb, ksh);
          kb[j][2 * e] = Dequant(__byte_perm(ma, mb, 0x5410), ks[j], km[j]);
          kb[j][2 * e + 1] = Dequant(__byte_perm(ma, mb, 0x7632), ks[j], km[j]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) Mma16816(sc[nt], qa.x, qa.y, qa.z, qa.w, kb[0][nt], kb[1][nt]);
    }

    // online softmax of head g (lanes 4 g .. 4 g + 3 hold its 32 tokens).
    uint32_t pb[4];  // P fragments: head g, tokens TileToken(nt, 2 q + {0, 1})
    float a_even, a_odd;
    const auto token = [&](int nt, int j) { return TileToken<B>(nt, 2 * qd) + j; };
    WarpSoftmaxStep(sc, hb, valid, token, &m_run, &l_run, pb, &a_even, &a_odd);
#pragma unroll
    for (int m = 0; m < kNs; ++m) {
      acc[m][0] *= a_even;
      acc[m][1] *= a_odd;
      acc[m][2] *= a_even;
      acc[m][3] *= a_odd;
    }

    // values: k-step kv = tiles 2 kv (a0, a1) and 2 kv + 1 (a2, a3).
    const uint8_t* vc = st + L::kVc;
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      int tok[2];
      uint32_t vsw[2][4], vmw[2][4];  // (min, scale) words of tokens tok, tok + 1
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        tok[e] = TileToken<B>(2 * kv + e, 2 * qd);  // even: tok, tok + 1 are adjacent rows
        if constexpr (D == 128) {
          const uint4 a = *reinterpret_cast<const uint4*>(st + L::kVscale + tok[e] * 8);
          const uint4 z = *reinterpret_cast<const uint4*>(st + L::kVmin + tok[e] * 8);
          vsw[e][0] = a.x, vsw[e][1] = a.y, vsw[e][2] = a.z, vsw[e][3] = a.w;
          vmw[e][0] = z.x, vmw[e][1] = z.y, vmw[e][2] = z.z, vmw[e][3] = z.w;
        } else {
          const uint2 a = *reinterpret_cast<const uint2*>(st + L::kVscale + tok[e] * 4);
          const uint2 z = *reinterpret_cast<const uint2*>(st + L::kVmin + tok[e] * 4);
          vsw[e][0] = a.x, vsw[e][1] = a.y, vmw[e][0] = z.x, vmw[e][1] = z.y;
        }
      }
#pragma unroll
      for (int cc = 0; cc < D / 64; ++cc) {
        uint4 vw[2][2];  // [e][token tok + r] chunk vc0 + cc of the row: m-tiles 4 cc .. 4 cc + 3
#pragma unroll
        for (int e = 0; e < 2; ++e) {
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int t = tok[e] + r;
            vw[e][r] = *reinterpret_cast<const uint4*>(
                vc + t * L::kVRow + ((vc0 + cc) ^ ValueSwizzle<L::kVChunks>(t)) * 16);
          }
        }
#pragma unroll
        for (int mm = 0; mm < 4; ++mm) {
          const int m = 4 * cc + mm;
          // group of the m-tile's channels: (vscale, vmin) of tokens tok, tok + 1.
          const int grp = B == 2 ? m >> 1 : (m + (D / 16) * (g >> 2)) >> 2;
          uint32_t a[2][2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            uint32_t sw0, sw1, mw0, mw1;  // words of tok and tok + 1 holding group grp
            if constexpr (D == 128) {
              const bool up = grp >= 2;
              sw0 = up ? vsw[e][1] : vsw[e][0], sw1 = up ? vsw[e][3] : vsw[e][2];
              mw0 = up ? vmw[e][1] : vmw[e][0], mw1 = up ? vmw[e][3] : vmw[e][2];
            } else {
              sw0 = vsw[e][0], sw1 = vsw[e][1], mw0 = vmw[e][0], mw1 = vmw[e][1];
            }
            const uint32_t sel = (grp & 1) ? 0x7632u : 0x5410u;
            const uint32_t vs2 = __byte_perm(sw0, sw1, sel), vm2 = __byte_perm(mw0, mw1, sel);
            const uint32_t x0 = mm == 0 ? vw[e][0].x : mm == 1 ? vw[e][0].y : mm == 2 ? vw[e][0].z : vw[e][0].w;
            const uint32_t x1 = mm == 0 ? vw[e][1].x : mm == 1 ? vw[e][1].y : mm == 2 ? vw[e][1].z : vw[e][1].w;
            const uint32_t ma = Biased<B>(x0, ksh), mb = Biased<B>(x1, ksh);
            a[e][0] = Dequant(__byte_perm(ma, mb, 0x5410), vs2, vm2);  // row g
            a[e][1] = Dequant(__byte_perm(ma, mb, 0x7632), vs2, vm2);  // row g + 8
          }
          Mma16816(acc[m], a[0][0], a[0][1], a[1][0], a[1][1], pb[2 * kv], pb[2 * kv + 1]);
        }
      }
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // every warp is done with its buffers: they hold the merge now

  MergeWarpPartials<D, kWarps, kMaxHeads>(
      p, b, h0, hb, split, m_run, l_run, acc, smem,
      [](int m, int g, int r) { return ValueChannel<D, B>(m, g, r); });
}

}  // namespace kivi_staged

template <int D, int B>
std::string LaunchKiviStagedFor(const DecodeAttentionParams& p, int hb, int num_splits,
                                cudaStream_t stream) {
  using L = kivi_staged::Layout<D, B>;
  static bool configured = false;
  if (!configured) {
    VQ_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kivi_staged::KiviStagedDecodeKernel<D, B>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 L::kBytes));
    configured = true;
  }
  const int group = p.num_heads / p.num_kv_heads;
  dim3 grid(num_splits + 1, p.num_kv_heads * (group / hb), p.batch);
  kivi_staged::KiviStagedDecodeKernel<D, B>
      <<<grid, kivi_staged::kThreads, L::kBytes, stream>>>(p, hb, num_splits);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_KIVI_STAGED_DECODE_CUH_
