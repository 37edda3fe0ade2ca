// fp16 paged decode attention on the tensor cores: the baseline the coded kernels are compared
// with, built to run at the memory wall.
//
// grid (splits, kv heads x head groups, batch), 256 threads (8 warps), hb <= 8 query heads of
// one kv head per block; the last split's block (the shortest) then folds the fp16 residual
// ring and the sink into slot `splits` (BlockResidual for hb <= 4, else ResidualPartial): one
// block an sm at head_dim 128, so a ring block column of its own would take a second wave at
// 16 x 8 (batch x kv heads) blocks. in a split, warp w takes the 16-token units w, w + 8, ...
// (half a 32-token page each) and streams each unit's k rows (16, D) and v rows (16, D) of its
// kv head through kStages private shared-memory buffers (cp.async,
// __syncwarp only; 16-byte chunk c of row r stored at c ^ (r % 8), so that ldmatrix's 8 rows
// hit distinct banks). per unit, with lane = (g = lane / 4, q = lane % 4) and fragments of
// mma.m16n8k16 (f16 in, f32 accumulate):
//   scores S (16 x 8 tokens) = Q (16 x 16 channels) . K^T (16 channels x 8 tokens), 2 token
//     tiles x D / 16 k-steps: Q rows 0..7 = fp16 hi parts of the heads' scaled queries, rows
//     8..15 the lo parts (q = hi + lo to ~2^-22), so row g + row g + 8 = head g's score; the
//     K^T fragments come from ldmatrix of the k rows.
//   softmax  lane holds head g of its 4 tokens: online max / sum in log2 units per warp.
//   values   O^T (16 channels x 8 heads) += V^T (16 channels x 16 tokens) . P (16 tokens x 8
//     heads): V^T from ldmatrix.trans of the v rows, P the score accumulator repacked as fp16
//     (the flash-attention register reuse).
// the warps' partials are merged into one workspace slot at the end.

#include <cuda_fp16.h>

#include <string>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/dense_attention.cuh"
#include "kernels/cuda/common/mma_ops.cuh"
#include "kernels/cuda/decode/block_residual.cuh"
#include "kernels/cuda/decode/fp16_staged_decode.h"
#include "kernels/cuda/decode/warp_flash_state.cuh"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32, kUnit = 16, kMaxHeads = 8;

// shared memory of one block, in bytes: kStages unit buffers (k rows, then v rows) per warp.
template <int D>
struct Layout {
  static constexpr int kRows = kUnit * D * 2;    // bytes of one unit's k (or v) rows
  static constexpr int kUnitBytes = 2 * kRows;
  static constexpr int kStages = 3;
  static constexpr int kBytes = kWarps * kStages * kUnitBytes;
  static_assert(WarpMergeBytes<D, kWarps, kMaxHeads>() <= kBytes, "merge fits the stages");
  static_assert(DenseSmem<D, kMaxHeads, kThreads>::kFloats * 4 <= kBytes, "ring fits");
  static_assert(BlockResidualFloats<D, kThreads>() * 4 <= kBytes, "block ring fits");
};

// byte offset of 16-byte chunk c of row r in a unit's k or v rows.
template <int D>
__device__ __forceinline__ int ChunkOffset(int r, int c) {
  return r * 2 * D + ((c ^ (r & 7)) << 4);
}

// the partial of coded tokens [t0, t1) (t0 < t1, t0 % 128 == 0) of sequence b, query heads
// h0 .. h0 + hb - 1 of kv head kvh, into workspace slot `split`; smem: Layout<D>::kBytes.
template <int D>
__device__ __forceinline__ void AttendUnits(const DecodeAttentionParams& p, int hb, int b, int kvh,
                                            int h0, int split, int t0, int t1, uint8_t* smem) {
  using L = Layout<D>;
  constexpr int kNs = D / 16;  // score k-steps = value m-tiles
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, qd = lane & 3;

  // unit buffers of this warp; its units are warp + kWarps i, i < mine, of the split.
  uint8_t* wst = smem + warp * L::kStages * L::kUnitBytes;
  const uint8_t* base = p.pages + p.layer_offset;
  const int32_t* table = p.block_tables + b * p.block_table_stride;
  const int64_t kslice = static_cast<int64_t>(kvh) * 32 * D * 2;
  const int64_t vslice = static_cast<int64_t>(p.num_kv_heads + kvh) * 32 * D * 2;
  const int page0 = t0 / 32, nunits = (t1 - t0 + kUnit - 1) / kUnit;  // t0 % 128 == 0
  const int mine = warp < nunits ? (nunits - warp + kWarps - 1) / kWarps : 0;
  auto issue = [&](int i) {
    if (i < mine) {
      const int u = warp + kWarps * i;
      const uint8_t* src = base + static_cast<int64_t>(table[page0 + (u >> 1)]) * p.page_stride +
                           (u & 1) * L::kRows;
      uint8_t* st = wst + (i % L::kStages) * L::kUnitBytes;
      constexpr int kRowChunks = D / 8;
#pragma unroll
      for (int c = lane; c < kUnit * kRowChunks; c += 32) {
        const int off = ChunkOffset<D>(c / kRowChunks, c % kRowChunks);
        CpAsync16(st + off, src + kslice + c * 16);
        CpAsync16(st + L::kRows + off, src + vslice + c * 16);
      }
    }
    CpAsyncCommit();
  };
#pragma unroll
  for (int i = 0; i < L::kStages - 1; ++i) issue(i);

  // query fragments of k-step s: (hi, lo) of channels 16 s + 2 q + {0, 1}, then of 16 s + 8 +
  // 2 q + {0, 1}; head g of the lane (0 if g >= hb).
  uint4 qf[kNs];
  {
    const float qscale = p.scale * 1.4426950408889634f;  // scores in log2 units
    const float* qh = p.q + b * p.q_batch_stride + (h0 + min(g, hb - 1)) * p.q_head_stride;
#pragma unroll
    for (int s = 0; s < kNs; ++s) {
      uint4 f = make_uint4(0u, 0u, 0u, 0u);
      if (g < hb) {
        const float2 x = *reinterpret_cast<const float2*>(qh + 16 * s + 2 * qd);
        const float2 y = *reinterpret_cast<const float2*>(qh + 16 * s + 8 + 2 * qd);
        SplitHalf2(x.x * qscale, x.y * qscale, &f.x, &f.y);
        SplitHalf2(y.x * qscale, y.y * qscale, &f.z, &f.w);
      }
      qf[s] = f;
    }
  }

  float acc[kNs][4];
#pragma unroll
  for (int m = 0; m < kNs; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.0f;
  float m_run = -INFINITY, l_run = 0.0f;
  const int lrow = lane & 7, lmat = lane >> 3;  // the row and matrix whose address lane gives

  for (int i = 0; i < mine; ++i) {
    CpAsyncWait<L::kStages - 2>();
    __syncwarp();  // unit i landed for every lane; buffer (i - 1) % kStages is free
    issue(i + L::kStages - 1);
    uint8_t* st = wst + (i % L::kStages) * L::kUnitBytes;
    const int valid = min(kUnit, t1 - (t0 + kUnit * (warp + kWarps * i)));
    if (valid < kUnit) {
      // rows past the end: zero v so that stale bytes (maybe NaN) add 0 x 0.
      uint4* v = reinterpret_cast<uint4*>(st + L::kRows);
      for (int c = valid * (D / 8) + lane; c < kUnit * (D / 8); c += 32) v[c] = make_uint4(0, 0, 0, 0);
      __syncwarp();
    }

    // scores: sc[nt] = rows (hi g, lo g) x tokens 8 nt + 2 q + {0, 1}.
    float sc[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
#pragma unroll
    for (int s = 0; s < kNs; s += 2) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        uint32_t kb[4];  // K^T fragments (b0, b1) of k-steps s and s + 1
        Ldmatrix4(kb, st + ChunkOffset<D>(8 * nt + lrow, 2 * s + lmat));
        Mma16816(sc[nt], qf[s].x, qf[s].y, qf[s].z, qf[s].w, kb[0], kb[1]);
        Mma16816(sc[nt], qf[s + 1].x, qf[s + 1].y, qf[s + 1].z, qf[s + 1].w, kb[2], kb[3]);
      }
    }

    // online softmax of head g (lanes 4 g .. 4 g + 3 hold its 16 tokens).
    uint32_t pb[2];  // P fragments: head g, tokens 8 nt + 2 q + {0, 1}
    float a_even, a_odd;
    const auto token = [&](int nt, int j) { return 8 * nt + 2 * qd + j; };
    WarpSoftmaxStep(sc, hb, valid, token, &m_run, &l_run, pb, &a_even, &a_odd);

    // values: m-tile m = channels 16 m .. 16 m + 15; the unit's 16 tokens are one k-step.
    const uint8_t* vrows = st + L::kRows;
#pragma unroll
    for (int m = 0; m < kNs; ++m) {
      uint32_t a[4];  // V^T fragments: matrices (tokens 0-7 | 8-15) x (channels lo | hi)
      Ldmatrix4<true>(a, vrows + ChunkOffset<D>(8 * (lmat >> 1) + lrow, 2 * m + (lmat & 1)));
      acc[m][0] *= a_even;
      acc[m][1] *= a_odd;
      acc[m][2] *= a_even;
      acc[m][3] *= a_odd;
      Mma16816(acc[m], a[0], a[1], a[2], a[3], pb[0], pb[1]);
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // every warp is done with its buffers: they hold the merge now

  MergeWarpPartials<D, kWarps, kMaxHeads>(p, b, h0, hb, split, m_run, l_run, acc, smem,
                                          [](int m, int g, int r) { return 16 * m + g + 8 * r; });
}

// q (batch, num_heads, D) fp32; pages per docs/kv_formats.md "fp16"; ring / sink fp16; writes
// workspace partials (batch, num_heads, splits + 1, D + 2).
template <int D>
__global__ void __launch_bounds__(kThreads, Fp16StagedBlocksPerSm(D))
    Fp16StagedDecodeKernel(const DecodeAttentionParams p, int hb, int num_splits) {
  extern __shared__ float4 fp16_staged_smem4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(fp16_staged_smem4);
  const int split = blockIdx.x, b = blockIdx.z;
  int kvh, h0, t0, t1;
  BlockHeads(p, hb, &kvh, &h0);
  SplitRange(p.coded_lens[b], num_splits, split, &t0, &t1);
  if (t0 < t1) {
    AttendUnits<D>(p, hb, b, kvh, h0, split, t0, t1, smem);
  } else {
    WriteEmptyPartial(p, b, h0, hb, split);
  }
  if (split == num_splits - 1) {
    __syncthreads();  // the merge is done with the shared memory
    float* f = reinterpret_cast<float*>(smem);
    if (hb <= 4) {
      BlockResidual<D, kThreads>(p, b, kvh, h0, hb, num_splits, f);
    } else {
      ResidualPartial<D, kMaxHeads, kThreads>(p, b, kvh, h0, hb, num_splits, f);
    }
  }
}

template <int D>
std::string LaunchFor(const DecodeAttentionParams& p, int hb, int num_splits, cudaStream_t stream) {
  constexpr int kBytes = Layout<D>::kBytes;
  static bool configured = false;
  if (!configured) {
    VQ_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        Fp16StagedDecodeKernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
    configured = true;
  }
  const int group = p.num_heads / p.num_kv_heads;
  dim3 grid(num_splits, p.num_kv_heads * (group / hb), p.batch);
  Fp16StagedDecodeKernel<D><<<grid, kThreads, kBytes, stream>>>(p, hb, num_splits);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace

std::string LaunchFp16StagedDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream) {
  if (hb > kFp16StagedMaxHeads) return "fp16 staged decode: at most 8 query heads per block";
  if (p.page_tokens != 32) return "fp16 staged decode: pages of 32 tokens";
  if (p.head_dim == 64) return LaunchFor<64>(p, hb, num_splits, stream);
  if (p.head_dim == 128) return LaunchFor<128>(p, hb, num_splits, stream);
  return "fp16 staged decode: head_dim 64 or 128";
}

}  // namespace vqserve::cuda
