#ifndef VQSERVE_KERNELS_CUDA_DECODE_COMMVQ_DECODE_LAYOUT_CUH_
#define VQSERVE_KERNELS_CUDA_DECODE_COMMVQ_DECODE_LAYOUT_CUH_

// shared-memory layout of the commvq decode kernel (commvq_decode.cuh), computable on the host
// so that the dispatcher can pick the query heads per block that fit.

#include <cstddef>

namespace vqserve::cuda {

inline constexpr int kCvqThreads = 256;       // threads of a commvq block (8 warps)
inline constexpr int kCvqPairs = 16;          // rope pairs (key dims / 2) one block scores
inline constexpr int kCvqLanesPerToken = 8;   // threads scoring one token (2 pairs each)
inline constexpr int kCvqTile = 128;          // tokens per tile (4 pages)
inline constexpr int kCvqTilePages = kCvqTile / 32;
inline constexpr int kCvqSubs = 4;            // 8-dim value sub-vectors one block accumulates
inline constexpr int kCvqStages = 3;          // cp.async tiles in flight
inline constexpr int kCvqSmemLimit = 232448;  // 227 KB of dynamic shared memory (sm_90)
inline constexpr int kCvqIdsPerThread = 3;    // 16-byte tile copies per thread, at most

// 16-byte copies of one page: 4 of scales, 3 R of key codes, 8 rv of a block's value codes.
__host__ __device__ constexpr int CvqChunksPerPage(int rounds, int vrounds) {
  return 4 + 3 * rounds + 8 * vrounds;
}

// blocks of one cluster: each scores kCvqPairs pairs and accumulates kCvqSubs sub-vectors.
__host__ __device__ constexpr int CvqClusterSize(int head_dim) { return head_dim / (2 * kCvqPairs); }

// byte offsets of the regions; R key rounds, rv value rounds, hbp query heads (padded).
struct CvqSmemLayout {
  size_t book = 0;     // [R][64 entries][kCvqPairs] float2: this block's pairs of the key books
  size_t hist = 0;     // [hbp][rv][kCvqSubs][256] float: probability mass per value code
  size_t stages = 0;   // kCvqStages x stage_bytes
  size_t stage_bytes = 0;
  size_t stage_kcodes = 0;  // in a stage: scales [4 pages][32] fp16, kcodes [4][R][48 B],
  size_t stage_vcodes = 0;  // vcodes [4][rv][kCvqSubs][32] u8
  size_t codes = 0;    // [R][kCvqTile] u32: book row offsets (float4 units) of entries A | B << 16
  size_t part = 0;     // [2][hbp][kCvqTile] float: partial scores over this block's pairs
  size_t prob = 0;     // [kCvqTile][hbp] float: softmax numerators
  size_t tscale = 0;   // [kCvqTile] float: token scale * softmax scale
  size_t step = 0;     // [32][kCvqPairs] float2: exp(i t theta_j), t < 32
  size_t base = 0;     // [4][kCvqPairs] float2: exp(i p0 theta_j) of the tile's pages
  size_t alpha = 0;    // [hbp] float + rescale flag
  size_t total = 0;
};

__host__ __device__ constexpr CvqSmemLayout CvqLayout(int hbp, int rounds, int vrounds) {
  CvqSmemLayout l;
  size_t o = 0;
  l.book = o;
  o += size_t{8} * rounds * 64 * kCvqPairs;
  l.hist = o;
  o += size_t{4} * hbp * vrounds * kCvqSubs * 256;
  l.stage_kcodes = size_t{64} * kCvqTilePages;
  l.stage_vcodes = l.stage_kcodes + size_t{48} * kCvqTilePages * rounds;
  l.stage_bytes = l.stage_vcodes + size_t{32} * kCvqTilePages * vrounds * kCvqSubs;
  l.stages = o;
  o += kCvqStages * l.stage_bytes;
  l.codes = o;
  o += size_t{4} * rounds * kCvqTile;
  l.part = o;
  o += size_t{4} * 2 * hbp * kCvqTile;
  l.prob = o;
  o += size_t{4} * kCvqTile * hbp;
  l.tscale = o;
  o += size_t{4} * kCvqTile;
  l.step = o;
  o += size_t{8} * 32 * kCvqPairs;
  l.base = o;
  o += size_t{8} * kCvqTilePages * kCvqPairs;
  l.alpha = o;
  o += size_t{4} * (hbp + 4);
  l.total = o;
  return l;
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_COMMVQ_DECODE_LAYOUT_CUH_
