#ifndef VQSERVE_KERNELS_CUDA_DECODE_VECINFER_DECODE_CUH_
#define VQSERVE_KERNELS_CUDA_DECODE_VECINFER_DECODE_CUH_

// vecinfer decode attention reading 8-bit product-quantization codes directly.
//
// grid (splits + 1, kv heads x head groups, batch), 512 threads. a block serves hb (<= HBP)
// query heads of one kv head, so each code byte is read from memory once for all of them.
// smem: lut[256 codes][kHv][Mk][kVw] fp32 = q~_{h,m} . Ck[m][code] * scale (query-codebook
// lookup table; m varies fastest within a code so that lanes reading different m hit different
// banks), Cv[256][Mv][DV] fp16, kStages code tiles of 128 tokens filled by cp.async, scores and
// probabilities. per tile: scores by lut gathers (lane = token; warps split the m range; m
// visited in a lane-rotated order so a quarter warp's 16-byte gathers hit distinct banks),
// online softmax (warp = head), values by centroid gathers (lane = sub-vector) with fp32 fma. the block's partial goes to a workspace slot; block x == splits
// folds the fp16 residual ring instead.

#include <string>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/dense_attention.cuh"

namespace vqserve::cuda {

inline constexpr int kSmemLimitBytes = 232448;  // 227 KB of dynamic shared memory (sm_90)

inline constexpr int kVqThreads = 512;  // threads of a vecinfer block (16 warps)
inline constexpr int kVqWarps = kVqThreads / 32;

template <int D, int DK, int DV, int HBP>
struct VecInferConfig {
  static constexpr int kMk = D / DK, kMv = D / DV;
  static constexpr int kTile = 128, kPages = kTile / 32;
  static constexpr int kHv = HBP == 8 ? 2 : 1;  // lut vectors per (code, m)
  static constexpr int kVw = HBP / kHv;         // heads per lut vector (<= 4 floats)
  static constexpr int kWords = kMk / 4;        // 32-bit code words per token
  // m splits: 4 token groups x kHv x kMs scoring warps; each warp's quarter-warp gathers want
  // 8 / kVw distinct code words.
  static constexpr int kNeedWords = 8 / kVw;
  static constexpr int kMsMax = kMk >= 64 ? 1 : 4 / kHv;  // 64 sub-vectors: smem is full
  static constexpr int kMsByWords = kWords / kNeedWords > 0 ? kWords / kNeedWords : 1;
  static constexpr int kMs = kMsByWords < kMsMax ? kMsByWords : kMsMax;
  static constexpr int kWpw = kWords / kMs;  // code words per scoring warp
  static constexpr int kSpl = kMv >= 32 ? kMv / 32 : 1;  // value sub-vectors per lane
  static constexpr int kTpi = kMv >= 32 ? 1 : 32 / kMv;  // tokens per warp step (values)
  static constexpr size_t kLutBytes = size_t{256} * kMk * HBP * 4;
  static constexpr size_t kReduceBytes = size_t{kVqWarps} * kTpi * HBP * D * 4;
  static constexpr size_t kDenseBytes = DenseSmem<D, HBP, kVqThreads>::kFloats * 4;
  static constexpr size_t kMax01 = kLutBytes > kReduceBytes ? kLutBytes : kReduceBytes;
  static constexpr size_t kRegion0 = kMax01 > kDenseBytes ? kMax01 : kDenseBytes;
  static constexpr size_t kCvBytes = size_t{256} * D * 2;
  static constexpr size_t kStageBytes = size_t{kTile} * (kMk + kMv);
  static constexpr size_t kSmallBytes = ((kMs + 1) * HBP * kTile + 4 * HBP) * 4;
  static constexpr size_t kFixed = kRegion0 + kCvBytes + kSmallBytes;
  static constexpr int kStagesFit = static_cast<int>((kSmemLimitBytes - kFixed) / kStageBytes);
  static constexpr int kStages = kStagesFit > 4 ? 4 : kStagesFit;
  static constexpr size_t kSmemBytes = kFixed + kStages * kStageBytes;
  static_assert(kFixed < kSmemLimitBytes && kStagesFit >= 2, "vecinfer config does not fit smem");
  static_assert(kTile % (kVqWarps * kTpi) == 0, "value steps must tile the tile");
};

// adds N floats at smem address e to a.
template <int N>
__device__ inline void AddVec(const float* e, float* a) {
  if constexpr (N == 1) {
    a[0] += e[0];
  } else if constexpr (N == 2) {
    const float2 v = *reinterpret_cast<const float2*>(e);
    a[0] += v.x;
    a[1] += v.y;
  } else {
    const float4 v = *reinterpret_cast<const float4*>(e);
    a[0] += v.x;
    a[1] += v.y;
    a[2] += v.z;
    a[3] += v.w;
  }
}

// q_tilde (batch, num_heads, D) fp32 (heads h0 .. h0+hb-1 read); k codebook (Mk, 256, DK) and
// v codebook (Mv, 256, DV) fp32; pages per docs/kv_formats.md (Kcodes[H][32][Mk] then
// Vcodes[H][32][Mv], one byte per code); ring (slots, ring, H, D) fp16; writes workspace
// partials (batch, num_heads, splits + 1, D + 2).
template <int D, int DK, int DV, int HBP>
__global__ void __launch_bounds__(kVqThreads, 1)
    VecInferDecodeKernel(const DecodeAttentionParams p, int hb, int num_splits) {
  using C = VecInferConfig<D, DK, DV, HBP>;
  constexpr int kMk = C::kMk, kMv = C::kMv, kTile = C::kTile, kVw = C::kVw, kHv = C::kHv;
  extern __shared__ float4 vq_smem4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(vq_smem4);
  const int split = blockIdx.x, b = blockIdx.z;
  int kvh, h0, t0, t1;
  float* const fsmem = reinterpret_cast<float*>(smem);
  if (!BeginSplitBlock<D, HBP, kVqThreads>(p, hb, num_splits, split, fsmem, &kvh, &h0, &t0, &t1)) return;
  float* lut = reinterpret_cast<float*>(smem);                 // [256][kHv][kMk][kVw]
  __half* cv = reinterpret_cast<__half*>(smem + C::kRegion0);  // [256][kMv][DV]
  uint8_t* stages = smem + C::kRegion0 + C::kCvBytes;          // kStages x [kTile][kMk + kMv]
  float* s_sm = reinterpret_cast<float*>(stages + C::kStages * C::kStageBytes);  // [kMs][HBP][kTile]
  float* p_sm = s_sm + C::kMs * HBP * kTile;                   // [kTile][HBP]
  float* alpha_sm = p_sm + kTile * HBP;                        // [HBP]
  float* m_sm = alpha_sm + HBP;
  float* l_sm = m_sm + HBP;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int H = p.num_kv_heads;
  const uint8_t* base = p.pages + p.layer_offset;
  const int32_t* table = p.block_tables + b * p.block_table_stride;
  const int ntiles = (t1 - t0 + kTile - 1) / kTile;
  const int page0 = t0 / 32, page_end = (t1 + 31) / 32;

  // a tile is 4 pages: their k codes, then their v codes. thread tid copies the 16-byte chunks
  // tid + j * kVqThreads; the page ids of the next tile are fetched one iteration early so
  // that the block-table load latency stays off the copy issue.
  constexpr int kKChunks = 32 * kMk / 16, kVChunks = 32 * kMv / 16;
  constexpr int kChunks = C::kPages * (kKChunks + kVChunks);
  constexpr int kPerThread = (kChunks + kVqThreads - 1) / kVqThreads;
  auto chunk_page = [&](int c) {
    return c < C::kPages * kKChunks ? c / kKChunks : (c - C::kPages * kKChunks) / kVChunks;
  };
  auto fetch_ids = [&](int tile, int32_t* ids) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int c = tid + j * kVqThreads;
      const int idx = page0 + tile * C::kPages + (c < kChunks ? chunk_page(c) : 0);
      ids[j] = (c < kChunks && tile < ntiles && idx < page_end) ? table[idx] : -1;
    }
  };
  auto issue_tile = [&](int stage, const int32_t* ids) {
    uint8_t* dst = stages + stage * C::kStageBytes;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int c = tid + j * kVqThreads;
      if (c >= kChunks || ids[j] < 0) continue;
      int dst_off;
      int64_t src_off;
      if (c < C::kPages * kKChunks) {
        const int pg = c / kKChunks, w = c % kKChunks;
        src_off = static_cast<int64_t>(kvh) * 32 * kMk + w * 16;
        dst_off = pg * 32 * kMk + w * 16;
      } else {
        const int c2 = c - C::kPages * kKChunks;
        const int pg = c2 / kVChunks, w = c2 % kVChunks;
        src_off = static_cast<int64_t>(H) * 32 * kMk + static_cast<int64_t>(kvh) * 32 * kMv + w * 16;
        dst_off = kTile * kMk + pg * 32 * kMv + w * 16;
      }
      CpAsync16(dst + dst_off, base + ids[j] * p.page_stride + src_off);
    }
  };
  // l2 prefetch of the tile kL2Ahead tiles beyond the newest copy: more bytes in flight than
  // the shared-memory stages hold.
  constexpr int kL2Ahead = 4;
  auto prefetch_tile = [&](const int32_t* far) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int c = tid + j * kVqThreads;
      if (c >= kChunks || far[j] < 0 || (c & 7) != 0) continue;  // one per 128-byte line
      int64_t src_off;
      if (c < C::kPages * kKChunks) {
        src_off = static_cast<int64_t>(kvh) * 32 * kMk + (c % kKChunks) * 16;
      } else {
        const int c2 = c - C::kPages * kKChunks;
        src_off = static_cast<int64_t>(H) * 32 * kMk + static_cast<int64_t>(kvh) * 32 * kMv + (c2 % kVChunks) * 16;
      }
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(base + far[j] * p.page_stride + src_off));
    }
  };
  int32_t ids[kPerThread], far_ids[kPerThread];

  // start the copies, then build the lut and the fp16 value codebook while they fly.
  for (int i = tid; i < HBP * D; i += kVqThreads) {
    const int h = i / D;
    s_sm[i] = h < hb ? p.q_tilde[b * p.q_batch_stride + (h0 + h) * p.q_head_stride + i % D] : 0.0f;
  }
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    fetch_ids(s, ids);
    issue_tile(s, ids);
    CpAsyncCommit();
  }
  fetch_ids(C::kStages - 1, ids);
  for (int t = C::kStages - 1; t < C::kStages - 1 + kL2Ahead; ++t) {
    fetch_ids(t, far_ids);
    prefetch_tile(far_ids);
  }
  fetch_ids(C::kStages - 1 + kL2Ahead, far_ids);
  __syncthreads();
  const float* ck = p.vq_k_codebook + kvh * p.vq_k_codebook_head_stride;
  for (int e = tid; e < 256 * kMk; e += kVqThreads) {
    const int m = e % kMk, code = e / kMk;
    float c[DK];
#pragma unroll
    for (int j = 0; j < DK; ++j) c[j] = ck[(m * 256 + code) * DK + j];
#pragma unroll
    for (int hv = 0; hv < kHv; ++hv) {
      float vals[kVw];
#pragma unroll
      for (int v = 0; v < kVw; ++v) {
        const float* qm = s_sm + (hv * kVw + v) * D + m * DK;
        float d = 0.0f;
#pragma unroll
        for (int j = 0; j < DK; ++j) d += qm[j] * c[j];
        vals[v] = d * p.scale;
      }
      float* dst = lut + ((code * kHv + hv) * kMk + m) * kVw;
#pragma unroll
      for (int v = 0; v < kVw; ++v) dst[v] = vals[v];
    }
  }
  const float* cvg = p.vq_v_codebook + kvh * p.vq_v_codebook_head_stride;
  for (int e = tid; e < 256 * kMv; e += kVqThreads) {
    const int m = e % kMv, code = e / kMv;
#pragma unroll
    for (int j = 0; j < DV; ++j) cv[(code * kMv + m) * DV + j] = __float2half_rn(cvg[(m * 256 + code) * DV + j]);
  }

  float m_run = -INFINITY, l_run = 0.0f;  // softmax state of head `warp` (warps < HBP)
  float acc[C::kSpl][DV][HBP];
#pragma unroll
  for (int s = 0; s < C::kSpl; ++s)
#pragma unroll
    for (int j = 0; j < DV; ++j)
#pragma unroll
      for (int h = 0; h < HBP; ++h) acc[s][j][h] = 0.0f;
  const int tsub = kMv >= 32 ? 0 : lane / kMv;
  const int sub0 = kMv >= 32 ? lane : lane % kMv;

  for (int i = 0; i < ntiles; ++i) {
    CpAsyncWait<C::kStages - 2>();
    __syncthreads();
    issue_tile((i + C::kStages - 1) % C::kStages, ids);  // ids are -1 past the last tile
    CpAsyncCommit();
    fetch_ids(i + C::kStages, ids);
    prefetch_tile(far_ids);  // tile i + kStages - 1 + kL2Ahead
    fetch_ids(i + C::kStages + kL2Ahead, far_ids);
    const uint8_t* kc = stages + (i % C::kStages) * C::kStageBytes;
    const uint8_t* vc = kc + kTile * kMk;
    const int tile_t0 = t0 + i * kTile;

    // scores: warp w = ((ms * kHv + hv) * 4 + tg) scores tokens tg * 32 + lane over code words
    // [ms * kWpw, (ms + 1) * kWpw) for lut vector hv; partial sums per m split.
    if (warp < 4 * kHv * C::kMs) {
      const int tg = warp & 3, hv = (warp >> 2) % kHv, ms = (warp >> 2) / kHv;
      const int tl = tg * 32 + lane;
      const uint32_t* row = reinterpret_cast<const uint32_t*>(kc + tl * kMk) + ms * C::kWpw;
      float sacc[kVw];
#pragma unroll
      for (int v = 0; v < kVw; ++v) sacc[v] = 0.0f;
#pragma unroll
      for (int J = 0; J < C::kWpw; ++J) {
        const int wi = (J + (lane >> 2)) & (C::kWpw - 1);
        const uint32_t word = row[wi];
        const int mbase = (ms * C::kWpw + wi) * 4;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int kk = (k + lane) & 3;
          const uint32_t code = (word >> (kk * 8)) & 0xFFu;
          AddVec<kVw>(lut + ((code * kHv + hv) * kMk + mbase + kk) * kVw, sacc);
        }
      }
      const bool valid = tile_t0 + tl < t1;
#pragma unroll
      for (int v = 0; v < kVw; ++v) {
        s_sm[(ms * HBP + hv * kVw + v) * kTile + tl] = valid ? sacc[v] : -INFINITY;
      }
    }
    __syncthreads();
    // online softmax: warp h owns head h.
    if (warp < HBP) {
      const int h = warp;
      float sv[kTile / 32];
      float cmax = -INFINITY;
#pragma unroll
      for (int j = 0; j < kTile / 32; ++j) {
        sv[j] = 0.0f;
#pragma unroll
        for (int ms = 0; ms < C::kMs; ++ms) sv[j] += s_sm[(ms * HBP + h) * kTile + lane + 32 * j];
        cmax = fmaxf(cmax, sv[j]);
      }
      cmax = WarpMax(cmax);
      const float m_new = fmaxf(m_run, cmax);
      const float alpha = m_run == -INFINITY ? 0.0f : __expf(m_run - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kTile / 32; ++j) {
        const float pv = h < hb ? __expf(sv[j] - m_new) : 0.0f;
        p_sm[(lane + 32 * j) * HBP + h] = pv;
        sum += pv;
      }
      l_run = l_run * alpha + sum;  // this lane's share; summed over the warp at the end
      m_run = m_new;
      if (lane == 0) alpha_sm[h] = alpha;
    }
    __syncthreads();
    // values: lane owns sub-vectors sub0 + 32 s of tokens (step * 8 + warp) * kTpi + tsub.
    float alpha[HBP];
#pragma unroll
    for (int h = 0; h < HBP; ++h) alpha[h] = alpha_sm[h];
#pragma unroll
    for (int s = 0; s < C::kSpl; ++s)
#pragma unroll
      for (int j = 0; j < DV; ++j)
#pragma unroll
        for (int h = 0; h < HBP; ++h) acc[s][j][h] *= alpha[h];
    constexpr int kSteps = kTile / (kVqWarps * C::kTpi);
#pragma unroll 4
    for (int st = 0; st < kSteps; ++st) {
      const int tl = (st * kVqWarps + warp) * C::kTpi + tsub;
      float pr[HBP];
#pragma unroll
      for (int h = 0; h < HBP; h += (HBP >= 4 ? 4 : HBP)) {
        if constexpr (HBP >= 4) {
          const float4 v4 = *reinterpret_cast<const float4*>(p_sm + tl * HBP + h);
          pr[h] = v4.x;
          pr[h + 1] = v4.y;
          pr[h + 2] = v4.z;
          pr[h + 3] = v4.w;
        } else {
#pragma unroll
          for (int x = 0; x < HBP; ++x) pr[x] = p_sm[tl * HBP + x];
        }
      }
#pragma unroll
      for (int s = 0; s < C::kSpl; ++s) {
        const int sub = sub0 + 32 * s;
        const uint32_t code = vc[tl * kMv + sub];
        const __half* e = cv + (code * kMv + sub) * DV;
        float val[DV];
        if constexpr (DV == 2) {
          const float2 f = Half2BitsToFloat2(*reinterpret_cast<const uint32_t*>(e));
          val[0] = f.x;
          val[1] = f.y;
        } else if constexpr (DV == 4) {
          const uint2 u = *reinterpret_cast<const uint2*>(e);
          const float2 a = Half2BitsToFloat2(u.x), c2 = Half2BitsToFloat2(u.y);
          val[0] = a.x;
          val[1] = a.y;
          val[2] = c2.x;
          val[3] = c2.y;
        } else {
          const uint4 u = *reinterpret_cast<const uint4*>(e);
          const float2 a = Half2BitsToFloat2(u.x), c2 = Half2BitsToFloat2(u.y);
          const float2 c3 = Half2BitsToFloat2(u.z), c4 = Half2BitsToFloat2(u.w);
          val[0] = a.x;
          val[1] = a.y;
          val[2] = c2.x;
          val[3] = c2.y;
          val[4] = c3.x;
          val[5] = c3.y;
          val[6] = c4.x;
          val[7] = c4.y;
        }
#pragma unroll
        for (int j = 0; j < DV; ++j)
#pragma unroll
          for (int h = 0; h < HBP; ++h) acc[s][j][h] += pr[h] * val[j];
      }
    }
  }
  CpAsyncWait<0>();
  __syncthreads();
  // reduce the kVqWarps * kTpi partial accumulators (the lut is no longer needed).
  if (warp < HBP) {
    const float l_tot = WarpSum(l_run);
    if (lane == 0) {
      m_sm[warp] = m_run;
      l_sm[warp] = l_tot;
    }
  }
  float* red = lut;  // [kVqWarps * kTpi][HBP][D]
  const int part = warp * C::kTpi + tsub;
#pragma unroll
  for (int s = 0; s < C::kSpl; ++s)
#pragma unroll
    for (int j = 0; j < DV; ++j)
#pragma unroll
      for (int h = 0; h < HBP; ++h) red[(part * HBP + h) * D + (sub0 + 32 * s) * DV + j] = acc[s][j][h];
  __syncthreads();
  for (int idx = tid; idx < hb * D; idx += kVqThreads) {
    const int h = idx / D, d = idx % D;
    float sum = 0.0f;
#pragma unroll
    for (int g = 0; g < kVqWarps * C::kTpi; ++g) sum += red[(g * HBP + h) * D + d];
    PartialAcc(p, b, h0 + h, split)[d] = sum;
  }
  if (tid < hb) *PartialMl(p, b, h0 + tid, split) = make_float2(m_sm[tid], l_sm[tid]);
}

// launches the kernel above (instantiated per (head_dim, k/v sub-vector size) in
// vecinfer_decode_d*_k*v*.cu).
template <int D, int DK, int DV, int HBP>
std::string LaunchVecInferDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                 cudaStream_t stream) {
  using C = VecInferConfig<D, DK, DV, HBP>;
  static bool configured = false;
  if (!configured) {
    VQ_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(VecInferDecodeKernel<D, DK, DV, HBP>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(C::kSmemBytes)));
    configured = true;
  }
  const int group = p.num_heads / p.num_kv_heads;
  dim3 grid(num_splits + 1, p.num_kv_heads * (group / hb), p.batch);
  VecInferDecodeKernel<D, DK, DV, HBP><<<grid, kVqThreads, C::kSmemBytes, stream>>>(p, hb, num_splits);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_VECINFER_DECODE_CUH_
