// vecinfer decode attention v7 (head_dim 128, 4-dim key and value sub-vectors, 8-bit codes):
// score sums and value products both run on the tensor cores, and the 8-byte shared-memory
// gathers are laid out so that their banks do not depend on the (random) codes.
//
// grid (splits, kv heads x head groups, batch), 512 threads (16 warps), hb <= 4 query heads of
// one kv head per block; the last split also folds the fp16 residual ring (workspace slot
// splits). smem (MakeLayout): lut and Cv fp16 [256 codes][32 sub-vectors][4] (64 KB each,
// code-major: entry (code, m) sits in bank pair m mod 16; the lut at a 64 KB-aligned window
// address so one prmt builds a gather address), per warp 3 stages of one 32-token page (k
// codes [32][32] then v codes [32][32]), scaled queries. warp w takes pages w, w + 16, ...
//   scores S (16 x 8) = L (16 x 16) . E (16 x 8), 8 k-steps per 16-token tile: lane (gid, tig)
//     gathers lut[code][m] = (q_h . Ck[m][code])_{h < 4} of sub-vector m = 4 tig + 16 (o ^ gid
//     / 4) + ((j + gid) & 3) at step (o, j) for tokens gid (a0 = heads 0, 1, a1 = heads 2, 3)
//     and gid + 8 (a2, a3); E (0/1) sums k = 2 tig + e into col e and k = 2 tig + 8 + e into
//     col 2 + e, so D row gid / gid + 8 = heads 0, 1 / 2, 3 and lane tig < 2 ends with heads
//     0..3 of token 16 t + gid + 8 tig (lanes tig >= 2: zeros). fp32 sums of fp16 entries.
//   values O^T (16 dims x 8) += V^T (16 dims x 16 tokens) . P (16 x 8): group gid owns
//     sub-vectors 4 gid .. 4 gid + 3; at slot i lane (gid, tig) gathers sub-vector 4 gid + (i ^
//     2 (gid / 4) ^ (tig / 2)) for its tokens 2 tig + {0, 1, 8, 9}; A rows of lanes tig < 2 and
//     tig >= 2 are then different sub-vectors, so P is split by k lane instead: col h < 4 =
//     fp16 p of head h for the k of lanes tig < 2 (0 for the others), col 4 + h likewise for
//     lanes tig >= 2; lanes tig and tig ^ 2 are summed once at the end. 8-byte gathers are
//     served per half warp, which here sees 8 distinct bank pairs: 2-way conflicts. kRoute
//     (v7r) gives the 4 lanes of a group 4 different sub-vectors and swaps registers back: no
//     conflicts, 64 more selects per page, measured no faster (docs/performance.md).
// the block's 16 warp partials are merged into one workspace slot.

#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/decode_attention_instances.h"
#include "kernels/cuda/dense_attention.cuh"
#include "kernels/cuda/vecinfer_mma7_block.cuh"
#include "kernels/cuda/vecinfer_mma7_page.cuh"

// the kernel's dynamic shared memory; at file scope so that inline ptx can name it.
extern __shared__ float4 vq_mma7_smem[];

namespace vqserve::cuda {
namespace mma7 {
namespace {

// books, 16 warps x 3 stages, queries, and the alignment gap of the books (MakeLayout: fits at
// dynamic-base window address 0x400, the sm_90 one, and at 0).
static_assert(2 * kBookBytes + kWarps * kWStages * kStageBytes + 4 * kDim * 4 + 0x400 <= kSmemBytes, "smem");
static_assert(DenseSmem<kDim, 4, kThreads>::kFloats * 4 <= kSmemBytes, "residual smem");

// where things live, in bytes from the dynamic base whose shared-window address is `win`: the
// lut starts at a window address that is a multiple of 64 KB (so one prmt of a code byte with a
// per-lane constant is a whole gather address), Cv right after it; below the lut the queries
// and the stages of warps < nlow, after Cv the stages of the other warps.
struct Layout {
  uint32_t lut, q, high;
  int nlow;
};
constexpr uint32_t kQBytes = 4 * kDim * 4;
__device__ inline Layout MakeLayout(uint32_t win) {
  Layout l;
  l.lut = (0x10000u - (win & 0xFFFFu)) & 0xFFFFu;
  if (l.lut >= kQBytes) {
    l.q = l.lut - kQBytes;
    l.nlow = l.q / kWarpStage;
    l.high = l.lut + 2 * kBookBytes;
  } else {
    l.q = l.lut + 2 * kBookBytes;
    l.nlow = 0;
    l.high = l.q + kQBytes;
  }
  return l;
}

// coded tokens [t0, t1) of sequence b, query heads h0 .. h0 + hb - 1 of kv head kvh ->
// workspace slot `split`. kRoute: see the value gathers.
template <bool kRoute>
__device__ __forceinline__ void CodedPartial(const DecodeAttentionParams& p, int hb, int split, int b,
                                             int kvh, int h0, int t0, int t1, uint8_t* smem) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
  uint32_t win;
  asm("mov.u32 %0, vq_mma7_smem;\n" : "=r"(win));
  const Layout lay = MakeLayout(win);
  if (lay.high + (kWarps - lay.nlow) * kWarpStage > kSmemBytes) __trap();  // cannot happen at win 0x400 or 0
  uint2* lut_s = reinterpret_cast<uint2*>(smem + lay.lut);  // [256][32] x 4 halves (heads)
  uint2* cv_s = lut_s + kSubs * 256;                        // [256][32] x 4 halves (dims)
  const uint32_t lut_hi = (win + lay.lut) >> 16;            // window address bits 16.. of the lut
  const WarpPages pages = MakeWarpPages(p, b, kvh, t0, t1, warp, lane, smem, lay.nlow, lay.high);
  pages.Issue(0, pages.Id(0));
  pages.Issue(1, pages.Id(1));
  int next_id = pages.Id(2);

  // lut[code][m] = fp16 (q_h . Ck[m][code]) for h < 4 (0 past hb), Cv code-major fp16. lanes
  // take 2 codes x 16 sub-vectors: 32-byte global runs, conflict-free 8-byte stores.
  const float4* ckg = reinterpret_cast<const float4*>(p.vq_k_codebook + kvh * p.vq_k_codebook_head_stride);
  const float4* cvg = reinterpret_cast<const float4*>(p.vq_v_codebook + kvh * p.vq_v_codebook_head_stride);
  const float qs = p.scale * 1.4426950408889634f;  // scores in log2 units
  float* q_s = reinterpret_cast<float*>(smem + lay.q);  // [4][128] scaled, 0 past hb
  for (int i = tid; i < 4 * kDim; i += kThreads) {
    const int h = i / kDim;
    q_s[i] = h < hb ? p.q_tilde[b * p.q_batch_stride + (h0 + h) * p.q_head_stride + i % kDim] * qs : 0.0f;
  }
  __syncthreads();
  for (int e = tid; e < kSubs * 256; e += kThreads) {
    const int g = e >> 5, l = e & 31;
    const int m = (l >> 1) + 16 * (g & 1), code = 2 * (g >> 1) + (l & 1);
    const float4 k = ckg[m * 256 + code], v = cvg[m * 256 + code];
    float d[4];
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const float4 q = *reinterpret_cast<const float4*>(q_s + h * kDim + 4 * m);
      d[h] = q.x * k.x + q.y * k.y + q.z * k.z + q.w * k.w;
    }
    lut_s[code * kSubs + m] = make_uint2(PackHalf2(d[0], d[1]), PackHalf2(d[2], d[3]));
    cv_s[code * kSubs + m] = make_uint2(PackHalf2(v.x, v.y), PackHalf2(v.z, v.w));
  }
  __syncthreads();

  constexpr ValueGather kG = kRoute ? ValueGather::kRouted : ValueGather::kPlain;
  const LaneConsts lc = MakeLaneConsts<kG>(gid, tig, lut_hi);
  WarpPartial part;
  part.Init();
  const int page0 = t0 / 32;
  int st_use = 0, st_issue = 2;
  for (int i = 0; i < pages.npages; ++i) {
    CpAsyncWait<1>();
    __syncwarp();
    pages.Issue(st_issue, next_id);
    next_id = pages.Id(i + 3);
    uint8_t* kc = pages.wst + st_use * kStageBytes;
    const uint8_t* vc = kc + kPageCodes;
    st_use = st_use == kWStages - 1 ? 0 : st_use + 1;
    st_issue = st_issue == kWStages - 1 ? 0 : st_issue + 1;
    AttendPage<kG>(p, lc, kc, vc, (page0 + warp + kWarps * i) * 32, t1, &part);
  }
  MergeBlock<kG>(p, lc, part, b, h0, hb, split, warp, lane, lut_s);
}

// q_tilde (batch, num_heads, 128) fp32; codebooks (32, 256, 4) fp32 per kv head; pages per
// docs/kv_formats.md; writes workspace partials (batch, num_heads, splits + 1, 128 + 2).
template <bool kRoute>
__global__ void __launch_bounds__(kThreads, 1)
    VecInferMma7DecodeKernel(const DecodeAttentionParams p, int hb, int num_splits) {
  uint8_t* smem = reinterpret_cast<uint8_t*>(vq_mma7_smem);
  const int split = blockIdx.x, b = blockIdx.z;
  int kvh, h0;
  BlockHeads(p, hb, &kvh, &h0);
  int t0, t1;
  SplitRange(p.coded_lens[b], num_splits, split, &t0, &t1);
  if (t0 < t1) {
    CodedPartial<kRoute>(p, hb, split, b, kvh, h0, t0, t1, smem);
  } else {
    WriteEmptyPartial(p, b, h0, hb, split);
  }
  // the last split (fewest tokens) also attends the residual ring into slot num_splits.
  if (split == num_splits - 1) {
    __syncthreads();
    ResidualPartial<kDim, 4, kThreads>(p, b, kvh, h0, hb, num_splits, reinterpret_cast<float*>(smem));
  }
}

}  // namespace
}  // namespace mma7

std::string LaunchVecInferMma7Decode(const DecodeAttentionParams& p, int hb, int num_splits,
                                     cudaStream_t stream) {
  if (p.head_dim != mma7::kDim || p.vq_k_sub_dim != 4 || p.vq_v_sub_dim != 4 || hb > 4) {
    return "vecinfer v7 decode: needs head_dim 128, 4-dim sub-vectors, <= 4 heads per block";
  }
  // vecinfer_version 5: the routed value gathers (v7r).
  if (p.vecinfer_version == 5) {
    return mma7::LaunchBlocks<mma7::VecInferMma7DecodeKernel<true>>(p, hb, num_splits, stream);
  }
  return mma7::LaunchBlocks<mma7::VecInferMma7DecodeKernel<false>>(p, hb, num_splits, stream);
}

}  // namespace vqserve::cuda
