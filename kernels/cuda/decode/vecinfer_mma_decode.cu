// vecinfer decode attention on the tensor cores (head_dim 128 or 64, 8-bit codes with (key,
// value) sub-vectors of (4, 4), (8, 8) or (4, 8) dims, PageShape<D, DK, DV>; -pca keys also of
// 17 to 32 codes at head_dim 64, 33 to 40 at 128, with 4-dim values, PageShape<D, 4, 4, true>):
// lut scores and
// values both on the tensor cores with code-independent shared-memory banks (the page loop and
// the fragment layout: vecinfer_mma_page.cuh), and the fixed per-launch costs cut:
//  - books: every thread owns one sub-vector m and 16 codes, so its 16 query floats come
//    straight from global memory (no query staging, no barrier before the build), and it loads
//    its codebook rows 8 at a time before using them; blocks start at different rows so that
//    128 blocks do not queue on one l2 slice. with the caller's fp16 books
//    (p.vq_v_codebook_f16, vecinfer_half_books.h), Cv is one 64 KB cp.async copy (the same
//    bits) and the lut build loads 16 fp32 Ck rows at a time (or, with p.vq_k_codebook_f16,
//    fp16 Ck: half the bytes, Ck rounded before the product).
//  - 3 pages per warp are in flight during the book build; page i + 3 is issued after page i
//    is done.
//  - the residual ring + sink (last split) run block-parallel (block_residual.cuh: one round of
//    global loads per 128 tokens), their rows asked into l2 at the start; with one split
//    before the book build, else after the pages.
//  - with several splits, the last one (it also attends the residual) takes fewer pages.
//
// grid (splits, kv heads x head groups, batch), 512 threads (16 warps), hb <= 4 query heads of
// one kv head per block. smem: lut and Cv fp16 [256 codes][32 sub-vectors][4] (64 KB each,
// code-major, the lut at a 64 KB-aligned window address; at head_dim 64 the first 16 entries
// of each code row are used), per warp 3 stages of one 32-token page (k codes [32][D / DK],
// padded to the probabilities' 320 bytes, then v codes [32][D / DV]: PageShape). warp w takes
// pages w, w + 16, ...; the value gathers are kQuad at head_dim 128, kPlain at 64; the page loop
// is the lean one.

#include <string>

#include "kernels/cuda/decode/block_residual.cuh"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/decode/decode_attention_common.cuh"
#include "kernels/cuda/decode/decode_attention_instances.h"
#include "kernels/cuda/decode/vecinfer_mma_block.cuh"
#include "kernels/cuda/decode/vecinfer_mma_page.cuh"

// the kernel's dynamic shared memory; at file scope so that inline ptx can name it.
extern __shared__ float4 vq_mma_smem[];

namespace vqserve::cuda {
namespace vq_mma {
namespace {

constexpr int kBuildBatch = 8;  // codebook rows loaded before use, per thread
// books, 16 warps x 3 stages and the alignment gap of the books (MakeLayout: fits at the
// sm_90 dynamic-base window address 0x400 and at 0).
static_assert(2 * kBookBytes + kWarps * kWarpStage + 0x400 <= kSmemBytes, "smem");
static_assert(kBlockResidualFloats * 4 <= kBookBytes, "residual smem");
static_assert(VecInferMmaTakesKeyCodes(64, PageShape<64, 4, 4, true>::kMaxKCodes) &&
                  !VecInferMmaTakesKeyCodes(64, PageShape<64, 4, 4, true>::kMaxKCodes + 1) &&
                  VecInferMmaTakesKeyCodes(128, PageShape<128, 4, 4, true>::kMaxKCodes) &&
                  !VecInferMmaTakesKeyCodes(128, PageShape<128, 4, 4, true>::kMaxKCodes + 1),
              "the launch's key-code counts are the page shapes'");
static_assert(2 * kBookBytes + PageShape<128, 4, 4, true>::kXLutBytes + kWarps * PageShape<128, 4, 4, true>::kWarpStage +
                      0x400 <= kSmemBytes,
              "smem, runtime key codes");

__device__ inline float4 Ldg4(const float4* p) {
  float4 v;
  asm volatile("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p));
  return v;
}

// where things live, in bytes from the dynamic base whose shared-window address is `win`: the
// lut starts at a window address that is a multiple of 64 KB (so one prmt of a code byte with a
// per-lane constant is a whole gather address), Cv right after it; below the lut the stages of
// warps < nlow, after Cv the stages of the other warps.
// S::kXLutBytes of extra lut follow Cv (at xlut).
struct Layout {
  uint32_t lut, xlut, high;
  int nlow;
};
template <class S>
__device__ inline Layout MakeLayout(uint32_t win) {
  Layout l;
  l.lut = (0x10000u - (win & 0xFFFFu)) & 0xFFFFu;
  l.nlow = l.lut / S::kWarpStage;
  l.xlut = l.lut + 2 * kBookBytes;
  l.high = l.xlut + S::kXLutBytes;
  return l;
}

// one lut entry: (q . k) in fp32, one product and three fmas in a fixed order (every build path
// rounds the same sum).
__device__ __forceinline__ float LutDot(const float4& q, const float4& k) {
  return __fmaf_rn(q.w, k.w, __fmaf_rn(q.z, k.z, __fmaf_rn(q.y, k.y, __fmul_rn(q.x, k.x))));
}
// an 8-dim entry: the 4-dim sum of the first half, then four more fmas.
__device__ __forceinline__ float LutDot(const float4 (&q)[2], const float4 (&k)[2]) {
  const float d = LutDot(q[0], k[0]);
  return __fmaf_rn(q[1].w, k[1].w, __fmaf_rn(q[1].z, k[1].z, __fmaf_rn(q[1].y, k[1].y, __fmaf_rn(q[1].x, k[1].x, d))));
}

// Cv fp16 <- the caller's code-major copy (p.vq_v_codebook_f16, [256][D / 4][4]): 16-byte
// cp.async chunks (8 per thread at D 128, 4 at 64) into 256-byte code rows, blocks starting at
// different chunks; commits one group (empty when `copy` is false).
template <int D>
__device__ __forceinline__ void CopyHalfValues(const DecodeAttentionParams& p, int kvh, bool copy, uint2* cv_s) {
  constexpr int kRowChunks = D / 4 / 2, kPerThread = 256 * kRowChunks / kThreads;
  if (copy) {
    const uint8_t* src = reinterpret_cast<const uint8_t*>(p.vq_v_codebook_f16 + kvh * p.vq_v_codebook_head_stride);
    uint8_t* dst = reinterpret_cast<uint8_t*>(cv_s);
    const int rot = blockIdx.x * 3 + blockIdx.y * 5 + blockIdx.z;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int c = threadIdx.x + kThreads * ((j + rot) % kPerThread);
      // full 256-byte rows (D 128): chunk c lands at 16 c, written so to keep that code as it was
      CpAsync16(dst + (kRowChunks == 16 ? 16 * c : 256 * (c / kRowChunks) + 16 * (c % kRowChunks)), src + 16 * c);
    }
  }
  CpAsyncCommit();
}

// -pca keys: the block's lut image, built by LaunchVecInferPcaLut ([256][row] 8-byte entries,
// row = VecInferPcaLutRow(Mk), at p.vq_pca_lut + block (b, blockIdx.y)), copied into the lut rows
// (entries past kBookRow into the extra lut's 8-entry rows at xlut_s) by 16-byte cp.async
// chunks; commits nothing (the chunks join the next group: CopyHalfValues').
__device__ __forceinline__ void CopyPcaLut(const DecodeAttentionParams& p, int b, int row, uint2* lut_s,
                                           uint2* xlut_s) {
  const int row_chunks = row / 2, chunks = 256 * row_chunks;
  const uint8_t* src = reinterpret_cast<const uint8_t*>(p.vq_pca_lut) +
                       (static_cast<int64_t>(b) * gridDim.y + blockIdx.y) * 256 * row * 8;
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    const int code = c / row_chunks, part = c % row_chunks;
    uint8_t* dst = part < kBookRow / 2 ? reinterpret_cast<uint8_t*>(lut_s) + code * kBookRow * 8 + part * 16
                                       : reinterpret_cast<uint8_t*>(xlut_s) + code * 64 + (part - kBookRow / 2) * 16;
    CpAsync16(dst, src + 16 * c);
  }
}

// lut[code][m] = fp16 (q_h . Ck[m][code]) for h < 4 (0 past hb), and (kWithV, S::kDK = S::kDV =
// 4 only) Cv code-major fp16. thread (warp, lane) owns key sub-vector m = lane / 2 + 16 (warp & 1)
// and codes 2 (warp / 2) + (lane & 1) + 16 j (16 key sub-vectors: m = lane / 2, codes 2 warp +
// (lane & 1) + 32 j): per warp runs of 32 global bytes per 4 dims (kHalfK: Ck from the fp16
// copy, runs of 128), conflict-free 8-byte stores. kBatch 4-dim rows are loaded before use.
template <int kBatch, bool kHalfK, bool kWithV, class S>
__device__ __forceinline__ void BuildBooks(const DecodeAttentionParams& p, int b, int kvh, int h0,
                                           int hb, uint2* lut_s, uint2* cv_s) {
  static_assert(!kWithV || (S::kDK == 4 && S::kDV == 4), "values built beside the lut: 4-dim sub-vectors");
  constexpr int kP = S::kDK / 4;                       // float4s of a key sub-vector
  constexpr int kSubsD = S::kKSubs;
  constexpr int kMG = kSubsD >= 16 ? kSubsD / 16 : 1;  // sub-vector groups of 16 lanes' pairs
  constexpr int kCodes = kSubsD * 256 / kThreads;      // codes per thread: 16, 8 or 4
  constexpr int kStep = 256 / kCodes, kB = kBatch / kP < kCodes ? kBatch / kP : kCodes;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // 8 key sub-vectors (head_dim 64, 8 dims): m = (lane / 2) & 7, codes 2 (2 warp + lane / 16) +
  // (lane & 1) + 64 j.
  const int m = kSubsD == 8 ? (lane >> 1) & 7 : (lane >> 1) + 16 * (warp & (kMG - 1));
  const int code0 = kSubsD == 8 ? 2 * (2 * warp + (lane >> 4)) + (lane & 1) : 2 * (warp >> (kMG - 1)) + (lane & 1);
  const float qs = p.scale * 1.4426950408889634f;  // scores in log2 units
  float4 q[4][kP];
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const float* qg = p.q_tilde + b * p.q_batch_stride + (h0 + min(h, hb - 1)) * p.q_head_stride + S::kDK * m;
    const float f = h < hb ? qs : 0.0f;  // any q strides: scalar loads
#pragma unroll
    for (int i = 0; i < kP; ++i) q[h][i] = make_float4(qg[4 * i] * f, qg[4 * i + 1] * f, qg[4 * i + 2] * f, qg[4 * i + 3] * f);
  }
  const float4* ckg = reinterpret_cast<const float4*>(p.vq_k_codebook + kvh * p.vq_k_codebook_head_stride) + m * 256 * kP;
  const float4* cvg = reinterpret_cast<const float4*>(p.vq_v_codebook + kvh * p.vq_v_codebook_head_stride) + m * 256;
  const uint2* ckh = reinterpret_cast<const uint2*>(p.vq_k_codebook_f16 + kvh * p.vq_k_codebook_head_stride) + m * kP;
  const int rot = (blockIdx.x * 5 + blockIdx.y * 3 + blockIdx.z * 7) & (kCodes - 1);
#pragma unroll
  for (int j0 = 0; j0 < kCodes; j0 += kB) {
    float4 k[kB][kP], v[kWithV ? kB : 1];
    int code[kB];
#pragma unroll
    for (int j = 0; j < kB; ++j) {
      code[j] = code0 + kStep * ((j0 + j + rot) & (kCodes - 1));
#pragma unroll
      for (int i = 0; i < kP; ++i) {
        if constexpr (kHalfK) {
          uint2 r;
          asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];\n" : "=r"(r.x), "=r"(r.y) : "l"(ckh + code[j] * kSubsD * kP + i));
          const float2 lo = Half2BitsToFloat2(r.x), hi = Half2BitsToFloat2(r.y);
          k[j][i] = make_float4(lo.x, lo.y, hi.x, hi.y);
        } else {
          k[j][i] = Ldg4(ckg + code[j] * kP + i);
        }
      }
      if constexpr (kWithV) v[j] = Ldg4(cvg + code[j]);
    }
#pragma unroll
    for (int j = 0; j < kB; ++j) {
      float d[4];
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        if constexpr (kP == 1) {
          d[h] = LutDot(q[h][0], k[j][0]);
        } else {
          d[h] = LutDot(q[h], k[j]);
        }
      }
      lut_s[code[j] * kBookRow + m] = make_uint2(PackHalf2(d[0], d[1]), PackHalf2(d[2], d[3]));
      if constexpr (kWithV) {
        cv_s[code[j] * kBookRow + m] = make_uint2(PackHalf2(v[j].x, v[j].y), PackHalf2(v[j].z, v[j].w));
      }
    }
  }
}

// Cv fp16 code-major from the fp32 books (D / DV, 256, DV): chunk c of code row `code` is part
// c % (DV / 4) of sub-vector c / (DV / 4) (see PageShape). for the shapes BuildBooks cannot
// build beside the lut; callers with fp16 books copy them instead (CopyHalfValues).
template <class S>
__device__ __forceinline__ void BuildValues(const DecodeAttentionParams& p, int kvh, uint2* cv_s) {
  constexpr int kParts = S::kDV / 4;
  const float4* cvg = reinterpret_cast<const float4*>(p.vq_v_codebook + kvh * p.vq_v_codebook_head_stride);
  for (int e = threadIdx.x; e < 256 * S::kSubs; e += kThreads) {
    const int code = e / S::kSubs, c = e % S::kSubs;
    const float4 v = Ldg4(cvg + ((c / kParts) * 256 + code) * kParts + c % kParts);
    cv_s[code * kBookRow + c] = make_uint2(PackHalf2(v.x, v.y), PackHalf2(v.z, v.w));
  }
}

// coded tokens [t0, t1) of sequence b, query heads h0 .. h0 + hb - 1 of kv head kvh ->
// workspace slot `split`.
// residual_first: attends the sink + residual ring into slot `split` + 1 first, before any copy
// is issued (the lut space is its scratch). measured with one split at 16 x 32K: 2-8 us faster
// than after the pages. the ring step (block_residual.cuh) takes ~7 us of it
// (timed), 3.8 us of that in its one round of loads + scores.
template <class S, ValueGather kG, bool kLean>
__device__ __forceinline__ void CodedPartial(const DecodeAttentionParams& p, int hb, int split, int b,
                                             int kvh, int h0, int t0, int t1, bool residual_first,
                                             uint8_t* smem) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
  uint32_t win;
  asm("mov.u32 %0, vq_mma_smem;\n" : "=r"(win));
  constexpr int D = S::kDim;
  const Layout lay = MakeLayout<S>(win);
  if (lay.high + (kWarps - lay.nlow) * S::kWarpStage > kSmemBytes) __trap();  // cannot happen at win 0x400 or 0
  uint2* lut_s = reinterpret_cast<uint2*>(smem + lay.lut);  // [256][32] x 4 halves (heads)
  uint2* cv_s = lut_s + kBookRow * 256;                     // [256][32] x 4 halves (dims)
  const uint32_t lut_hi = (win + lay.lut) >> 16;            // window address bits 16.. of the lut
  uint2* xlut_s = reinterpret_cast<uint2*>(smem + lay.xlut);  // S::kXLutBytes: [256][8] x 4 halves
  const int mk = p.vq_k_codes;  // set by the launch
  WarpPages<S> pages = MakeWarpPages<S>(p, b, kvh, t0, t1, warp, lane, smem, lay.nlow, lay.high, 32 * mk);
  if constexpr (kLean) Pin(&pages.table);  // kept, not recomputed per page
  if (residual_first) {
    BlockResidual<D>(p, b, kvh, h0, hb, split + 1, reinterpret_cast<float*>(lut_s));
    __syncthreads();  // its merge has read the scratch: the copies and the lut build may write
  }
  const bool pca = S::kVarK || p.vq_k_dims != nullptr, half_v = p.vq_v_codebook_f16 != nullptr;
  if (pca) CopyPcaLut(p, b, VecInferPcaLutRow(mk), lut_s, xlut_s);
  CopyHalfValues<D>(p, kvh, half_v, cv_s);  // one group, before the page groups
  constexpr int kStages = S::kStages;
  {
    int ids[kStages];
#pragma unroll
    for (int i = 0; i < kStages; ++i) ids[i] = pages.Id(i);
#pragma unroll
    for (int i = 0; i < kStages; ++i) pages.Issue(i, ids[i]);
  }
  int next_id = pages.Id(kStages);

  if (pca) {
    if (!half_v) BuildValues<S>(p, kvh, cv_s);
  } else if constexpr (!S::kVarK) {
    if (!half_v) {
      if constexpr (S::kDK == 4 && S::kDV == 4) {
        BuildBooks<kBuildBatch, false, true, S>(p, b, kvh, h0, hb, lut_s, cv_s);
      } else {
        BuildBooks<2 * kBuildBatch, false, false, S>(p, b, kvh, h0, hb, lut_s, cv_s);
        BuildValues<S>(p, kvh, cv_s);
      }
    } else if (p.vq_k_codebook_f16 == nullptr) {
      BuildBooks<2 * kBuildBatch, false, false, S>(p, b, kvh, h0, hb, lut_s, cv_s);
    } else {
      BuildBooks<2 * kBuildBatch, true, false, S>(p, b, kvh, h0, hb, lut_s, cv_s);
    }
  }
  CpAsyncWait<kStages>();  // the Cv copy has landed (the page groups may be in flight)
  __syncthreads();

  const LaneConsts<S> lc = MakeLaneConsts<kG, S, kLean>(gid, tig, lut_hi, mk, win + lay.xlut);
  WarpPartial<D> part;
  part.Init();
  const int page0 = t0 / 32;
  int st_use = 0;
  for (int i = 0; i < pages.npages; ++i) {
    CpAsyncWait<kStages - 1>();  // page i has landed (the next kStages - 1 may be in flight)
    __syncwarp();
    uint8_t* kc = pages.wst + st_use * S::kStageBytes;
    const uint8_t* vc = kc + S::kKRegion;
    AttendPage<kG, S, kLean>(p, lc, kc, vc, (page0 + warp + kWarps * i) * 32, t1, &part);
    __syncwarp();  // every lane is done with this stage: page i + 3 may land in it
    pages.Issue(st_use, next_id);
    next_id = pages.Id(i + kStages + 1);
    st_use = st_use == kStages - 1 ? 0 : st_use + 1;
  }
  MergeBlock<kG, S, kLean>(p, lc, part, b, h0, hb, split, warp, lane, lut_s);
}

// coded tokens [*t0, *t1) of split `split`: as SplitRange, but the splits are cut as if there
// were kResidualDebt more tokens, so the last split, which also attends the residual ring
// (128 tokens: ~7 us at 1 x 128K, ~3 pages per warp), gets that many fewer coded
// tokens (none when there are few); one split takes everything.
constexpr int kResidualDebt = 1536;
__device__ inline void MmaSplitRange(int len, int num_splits, int split, int* t0, int* t1) {
  const int padded = num_splits > 1 ? len + kResidualDebt : len;
  int per = (padded + num_splits - 1) / num_splits;
  per = (per + kSplitAlign - 1) / kSplitAlign * kSplitAlign;
  *t0 = min(len, split * per);
  *t1 = min(len, *t0 + per);
}

// q_tilde (batch, num_heads, D) fp32; codebooks (D / d, 256, d) fp32 per kv head; pages per
// docs/kv_formats.md; writes workspace partials (batch, num_heads, splits + 1, D + 2).
// DK, DV: key / value sub-vector dims (PageShape).
// VK: -pca keys of p.vq_k_codes = 17 .. 32 codes a token at head_dim 64, 33 .. 40 at 128 (PageShape).
template <int D, ValueGather kG = ValueGather::kPlain, bool kLean = false, int DK = 4, int DV = 4, bool VK = false>
__global__ void __launch_bounds__(kThreads, 1)
    VecInferMmaDecodeKernel(const DecodeAttentionParams p, int hb, int num_splits) {
  LaunchDependents();  // the split combine may be scheduled (on free sms) now; it waits for us
  uint8_t* smem = reinterpret_cast<uint8_t*>(vq_mma_smem);
  const int split = blockIdx.x, b = blockIdx.z;
  int kvh, h0;
  BlockHeads(p, hb, &kvh, &h0);
  const bool residual = split == num_splits - 1;
  int t0, t1;
  MmaSplitRange(p.coded_lens[b], num_splits, split, &t0, &t1);
  // one split: the ring first (see CodedPartial); several: the last split (fewest tokens)
  // attends it after its pages, its rows asked into l2 now.
  const bool first = residual && num_splits == 1 && t0 < t1;
  if (residual && !first) PrefetchResidualL2<kThreads, D>(p, b, kvh);
  if (t0 < t1) {
    CodedPartial<PageShape<D, DK, DV, VK>, kG, kLean>(p, hb, split, b, kvh, h0, t0, t1, first, smem);
  } else {
    WriteEmptyPartial(p, b, h0, hb, split);
  }
  // the last split also attends the sink + residual ring into slot num_splits.
  if (split == num_splits - 1 && !first) {
    __syncthreads();
    if (residual) {
      BlockResidual<D>(p, b, kvh, h0, hb, num_splits, reinterpret_cast<float*>(smem));
    } else {
      WriteEmptyPartial(p, b, h0, hb, num_splits);
    }
  }
}

}  // namespace
}  // namespace vq_mma

std::string LaunchVecInferMmaDecode(const DecodeAttentionParams& params, int hb, int num_splits,
                                    cudaStream_t stream) {
  DecodeAttentionParams p = params;
  p.vq_k_codes = VecInferKeyCodes(params);
  const int dk = p.vq_k_sub_dim, dv = p.vq_v_sub_dim, mk = p.vq_k_codes;
  const bool sub4 = dk == 4 && dv == 4, sub8 = (dk == 8 && dv == 8) || (dk == 4 && dv == 8);
  const bool var_k = mk != p.head_dim / dk;
  if ((p.head_dim != 128 && p.head_dim != 64) || !(sub4 || sub8) || hb > 4 ||
      (var_k && !VecInferMmaVarKeyCodes(p))) {
    return "vecinfer mma decode: needs head_dim 128 or 64 with (key, value) sub-vectors of "
           "(4, 4), (8, 8) or (4, 8) dims, or -pca keys of 17 to 32 codes at head_dim 64 (33 to "
           "40 at 128) with 4-dim values; <= 4 heads per block";
  }
  using vq_mma::ValueGather;
  using vq_mma::VecInferMmaDecodeKernel;
  if (var_k && p.head_dim == 128) {
    return vq_mma::LaunchBlocks<VecInferMmaDecodeKernel<128, ValueGather::kQuad, true, 4, 4, true>>(
        p, hb, num_splits, stream);
  }
  if (var_k) {
    return vq_mma::LaunchBlocks<VecInferMmaDecodeKernel<64, ValueGather::kPlain, true, 4, 4, true>>(
        p, hb, num_splits, stream);
  }
  // the lean page loop everywhere; the quad value gathers at head_dim 128.
  if (p.head_dim == 128) {
    if (dk == 8) {
      return vq_mma::LaunchBlocks<VecInferMmaDecodeKernel<128, ValueGather::kQuad, true, 8, 8>>(
          p, hb, num_splits, stream);
    }
    if (dv == 8) {
      return vq_mma::LaunchBlocks<VecInferMmaDecodeKernel<128, ValueGather::kQuad, true, 4, 8>>(
          p, hb, num_splits, stream);
    }
    return vq_mma::LaunchBlocks<VecInferMmaDecodeKernel<128, ValueGather::kQuad, true>>(
        p, hb, num_splits, stream);
  }
  if (dk == 8) {
    return vq_mma::LaunchBlocks<VecInferMmaDecodeKernel<64, ValueGather::kPlain, true, 8, 8>>(
        p, hb, num_splits, stream);
  }
  if (dv == 8) {
    return vq_mma::LaunchBlocks<VecInferMmaDecodeKernel<64, ValueGather::kPlain, true, 4, 8>>(
        p, hb, num_splits, stream);
  }
  return vq_mma::LaunchBlocks<VecInferMmaDecodeKernel<64, ValueGather::kPlain, true>>(
      p, hb, num_splits, stream);
}

}  // namespace vqserve::cuda
