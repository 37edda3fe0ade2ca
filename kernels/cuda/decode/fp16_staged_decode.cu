// fp16 paged decode attention that streams whole pages through shared memory: the baseline the
// coded kernels are compared with, built to run at the memory wall.
//
// grid (splits + 1, kv heads x head groups, batch), 256 threads (8 warps); block x < splits
// folds its split of the pages in tiles of 64 tokens (two 32-token pages), block x == splits
// folds the fp16 residual ring. per tile:
//   copy     pages k (32, D), v (32, D) of the block's kv head -> stage (cp.async, 3 deep)
//   scores   thread (token tid & 63, part tid >> 6): q . k over its D / 4 dims for every head,
//            k rows padded to 2 D + 16 bytes so a warp's 16-byte reads hit distinct banks
//   softmax  warp h takes head h: s = sum of the 4 parts, online max / sum in log2 units
//   values   thread (dim pair tid % (D / 2), token group tid / (D / 2)) accumulates p . v
// the block's token groups are summed at the end into one workspace slot.

#include <string>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/dense_attention.cuh"
#include "kernels/cuda/decode/fp16_staged_decode.h"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 256, kTile = 64;
constexpr int kParts = kThreads / kTile;  // threads per token in the score step

template <int D, int HBP, int kStages>
struct StagedSmem {
  static constexpr int kRowK = 2 * D + 16;                   // bytes per padded k row
  static constexpr int kStageBytes = kTile * kRowK + kTile * 2 * D;
  static constexpr int kGroups = kThreads / (D / 2);         // token groups of the value step
  static constexpr int kQ = kStages * kStageBytes;           // q [HBP][D] fp32
  static constexpr int kS = kQ + HBP * D * 4;                // scores [kParts][HBP][kTile]
  static constexpr int kP = kS + kParts * HBP * kTile * 4;   // probabilities [kTile][HBP]
  static constexpr int kAlpha = kP + kTile * HBP * 4;        // [HBP]
  static constexpr int kM = kAlpha + HBP * 4;                // running max [HBP] (log2 units)
  static constexpr int kL = kM + HBP * 4;                    // running sum [HBP]
  static constexpr int kBytes = kL + HBP * 4;
  // after the loop the stages hold the token groups' accumulators [kGroups][HBP][D].
  static_assert(kGroups * HBP * D * 4 <= kStages * kStageBytes, "reduction fits the stages");
  static_assert(DenseSmem<D, HBP, kThreads>::kFloats * 4 <= kBytes, "ring fits");
  static_assert(HBP <= kThreads / 32, "one warp per head in the softmax and the ring");
};

// kStages >= 2 tiles in shared memory; kMinBlocks blocks per sm (the register bound).
template <int D, int HBP, int kStages, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    Fp16StagedDecodeKernel(const DecodeAttentionParams p, int hb, int num_splits) {
  using S = StagedSmem<D, HBP, kStages>;
  extern __shared__ float4 staged_smem4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(staged_smem4);
  const int split = blockIdx.x, b = blockIdx.z;
  int kvh, h0, t0, t1;
  float* const fsmem = reinterpret_cast<float*>(smem);
  if (!BeginSplitBlock<D, HBP, kThreads>(p, hb, num_splits, split, fsmem, &kvh, &h0, &t0, &t1)) return;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  float* q_s = reinterpret_cast<float*>(smem + S::kQ);
  float* s_s = reinterpret_cast<float*>(smem + S::kS);
  float* p_s = reinterpret_cast<float*>(smem + S::kP);
  float* alpha_s = reinterpret_cast<float*>(smem + S::kAlpha);
  float* m_s = reinterpret_cast<float*>(smem + S::kM);
  float* l_s = reinterpret_cast<float*>(smem + S::kL);

  const uint8_t* base = p.pages + p.layer_offset;
  const int32_t* table = p.block_tables + b * p.block_table_stride;
  const int64_t kslice = static_cast<int64_t>(kvh) * 32 * D * 2;
  const int64_t vslice = static_cast<int64_t>(p.num_kv_heads + kvh) * 32 * D * 2;
  const int ntiles = (t1 - t0 + kTile - 1) / kTile;
  const int page0 = t0 / 32, page_end = (t1 + 31) / 32;
  // tile i -> stage i % kStages: both pages' k rows (padded) and v rows.
  auto issue = [&](int i) {
    if (i < ntiles) {
      uint8_t* st = smem + (i % kStages) * S::kStageBytes;
      constexpr int kChunksPerRow = 2 * D / 16;
      for (int c = tid; c < 2 * kTile * kChunksPerRow; c += kThreads) {
        const bool value = c >= kTile * kChunksPerRow;
        const int cc = value ? c - kTile * kChunksPerRow : c;
        const int row = cc / kChunksPerRow, part = cc % kChunksPerRow;
        const int page = page0 + 2 * i + (row >> 5);
        if (page >= page_end) continue;
        const uint8_t* src = base + static_cast<int64_t>(table[page]) * p.page_stride +
                             (value ? vslice : kslice) + ((row & 31) * D * 2) + part * 16;
        uint8_t* dst = value ? st + kTile * S::kRowK + row * 2 * D + part * 16
                             : st + row * S::kRowK + part * 16;
        CpAsync16(dst, src);
      }
    }
    CpAsyncCommit();
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue(i);

  const float qscale = p.scale * 1.4426950408889634f;  // scores in log2 units
  for (int i = tid; i < HBP * D; i += kThreads) {
    const int h = i / D;
    q_s[i] = h < hb ? p.q[b * p.q_batch_stride + (h0 + h) * p.q_head_stride + i % D] * qscale : 0.0f;
  }
  if (tid < HBP) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
  }
  const int st_tok = tid & (kTile - 1), st_part = tid / kTile;  // score step
  const int dp = tid % (D / 2), grp = tid / (D / 2);          // value step
  constexpr int kTpg = kTile / S::kGroups;                    // tokens per value group
  float acc[HBP][2];
#pragma unroll
  for (int h = 0; h < HBP; ++h) acc[h][0] = acc[h][1] = 0.0f;

  for (int i = 0; i < ntiles; ++i) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();  // tile i landed for every thread; stage (i - 1) % kStages is free
    issue(i + kStages - 1);
    const uint8_t* st = smem + (i % kStages) * S::kStageBytes;
    const int valid = min(kTile, t1 - (t0 + i * kTile));

    // scores: this thread's part of token st_tok's row against every head.
    {
      constexpr int kPartDims = D / kParts;
      const uint8_t* krow = st + st_tok * S::kRowK + st_part * kPartDims * 2;
      const float* qh = q_s + st_part * kPartDims;
      float sc[HBP];
#pragma unroll
      for (int h = 0; h < HBP; ++h) sc[h] = 0.0f;
#pragma unroll
      for (int c = 0; c < kPartDims / 8; ++c) {
        const uint4 w = *reinterpret_cast<const uint4*>(krow + c * 16);
        const float2 k01 = Half2BitsToFloat2(w.x), k23 = Half2BitsToFloat2(w.y);
        const float2 k45 = Half2BitsToFloat2(w.z), k67 = Half2BitsToFloat2(w.w);
#pragma unroll
        for (int h = 0; h < HBP; ++h) {
          const float4 qa = *reinterpret_cast<const float4*>(qh + h * D + c * 8);
          const float4 qb = *reinterpret_cast<const float4*>(qh + h * D + c * 8 + 4);
          sc[h] += qa.x * k01.x + qa.y * k01.y + qa.z * k23.x + qa.w * k23.y + qb.x * k45.x +
                   qb.y * k45.y + qb.z * k67.x + qb.w * k67.y;
        }
      }
#pragma unroll
      for (int h = 0; h < HBP; ++h) s_s[(st_part * HBP + h) * kTile + st_tok] = sc[h];
    }
    __syncthreads();
    // online softmax: warp h owns head h; two tokens per lane.
    if (warp < HBP) {
      const int h = warp;
      float sv[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int t = lane + 32 * j;
        float v = 0.0f;
#pragma unroll
        for (int part = 0; part < kParts; ++part) v += s_s[(part * HBP + h) * kTile + t];
        sv[j] = t < valid && h < hb ? v : -INFINITY;
      }
      const float m_old = m_s[h];
      const float m_new = fmaxf(m_old, WarpMax(fmaxf(sv[0], sv[1])));
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = exp2f(m_old - m_use);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float pv = exp2f(sv[j] - m_use);
        p_s[(lane + 32 * j) * HBP + h] = pv;
        sum += pv;
      }
      sum = WarpSum(sum);
      __syncwarp();  // every lane has read m_s[h] and l_s[h] before lane 0 rewrites them.
      if (lane == 0) {
        alpha_s[h] = alpha;
        m_s[h] = m_new;
        l_s[h] = l_s[h] * alpha + sum;
      }
    }
    __syncthreads();
    // values: dims 2 dp, 2 dp + 1 of tokens grp * kTpg .. + kTpg (fewer in a short last tile).
#pragma unroll
    for (int h = 0; h < HBP; ++h) {
      acc[h][0] *= alpha_s[h];
      acc[h][1] *= alpha_s[h];
    }
    const uint8_t* vbase = st + kTile * S::kRowK + dp * 4;
    const int tb = grp * kTpg, te = min(tb + kTpg, valid);
#pragma unroll 4
    for (int t = tb; t < te; ++t) {
      const float2 v = Half2BitsToFloat2(*reinterpret_cast<const uint32_t*>(vbase + t * 2 * D));
      const float* pt = p_s + t * HBP;
#pragma unroll
      for (int h = 0; h < HBP; ++h) {
        acc[h][0] += pt[h] * v.x;
        acc[h][1] += pt[h] * v.y;
      }
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // every thread is done with the stages: they hold the group sums now
  float* red = reinterpret_cast<float*>(smem);  // [kGroups][HBP][D]
#pragma unroll
  for (int h = 0; h < HBP; ++h) {
    red[(grp * HBP + h) * D + 2 * dp] = acc[h][0];
    red[(grp * HBP + h) * D + 2 * dp + 1] = acc[h][1];
  }
  __syncthreads();
  for (int i = tid; i < hb * D; i += kThreads) {
    const int h = i / D, d = i % D;
    float s = 0.0f;
#pragma unroll
    for (int g = 0; g < S::kGroups; ++g) s += red[(g * HBP + h) * D + d];
    PartialAcc(p, b, h0 + h, split)[d] = s;
  }
  if (tid < hb) {
    *PartialMl(p, b, h0 + tid, split) = make_float2(m_s[tid] * 0.6931471805599453f, l_s[tid]);
  }
}

template <int D, int HBP, int kStages, int kMinBlocks>
std::string LaunchStaged(const DecodeAttentionParams& p, int hb, int num_splits,
                         cudaStream_t stream) {
  constexpr int kBytes = StagedSmem<D, HBP, kStages>::kBytes;
  static bool configured = false;
  if (!configured) {
    VQ_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        Fp16StagedDecodeKernel<D, HBP, kStages, kMinBlocks>,
        cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
    configured = true;
  }
  const int group = p.num_heads / p.num_kv_heads;
  dim3 grid(num_splits + 1, p.num_kv_heads * (group / hb), p.batch);
  Fp16StagedDecodeKernel<D, HBP, kStages, kMinBlocks>
      <<<grid, kThreads, kBytes, stream>>>(p, hb, num_splits);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

// 3 stages, 2 blocks per sm (2 stages with 3 blocks per sm measured no faster: runF3).
template <int D, int HBP>
std::string LaunchForHeads(const DecodeAttentionParams& p, int hb, int num_splits,
                           cudaStream_t stream) {
  return LaunchStaged<D, HBP, 3, 2>(p, hb, num_splits, stream);
}

template <int D>
std::string LaunchForDim(const DecodeAttentionParams& p, int hb, int num_splits,
                         cudaStream_t stream) {
  if (hb <= 1) return LaunchForHeads<D, 1>(p, hb, num_splits, stream);
  if (hb <= 2) return LaunchForHeads<D, 2>(p, hb, num_splits, stream);
  if (hb <= 4) return LaunchForHeads<D, 4>(p, hb, num_splits, stream);
  return LaunchForHeads<D, 8>(p, hb, num_splits, stream);
}

}  // namespace

std::string LaunchFp16StagedDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream) {
  if (hb > kFp16StagedMaxHeads) return "fp16 staged decode: at most 8 query heads per block";
  if (p.page_tokens != 32) return "fp16 staged decode: pages of 32 tokens";
  if (p.head_dim == 64) return LaunchForDim<64>(p, hb, num_splits, stream);
  if (p.head_dim == 128) return LaunchForDim<128>(p, hb, num_splits, stream);
  return "fp16 staged decode: head_dim 64 or 128";
}

}  // namespace vqserve::cuda
