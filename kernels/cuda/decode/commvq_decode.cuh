#ifndef VQSERVE_KERNELS_CUDA_DECODE_COMMVQ_DECODE_CUH_
#define VQSERVE_KERNELS_CUDA_DECODE_COMMVQ_DECODE_CUH_

// commvq decode attention reading the 12-bit commutative key codes and 8-bit residual value
// codes directly (page format: docs/kv_formats.md, "commvq-R"): the cluster kernel, fp32 books
// split over the blocks of a cluster. LaunchDecodeAttention runs it where the warp kernel's
// fp16 books do not fit in one sm (commvq-2 at head_dim 128); the
// warp kernel of commvq_warp_decode.h runs elsewhere.
//
// keys: code (A, B) of round r reconstructs pair j as zeta_{r,A,j} + i zeta_{r,B,j}; the
// entries commute with rope, so token t (position p_t, scale s_t) scores
//   s_t * scale * sum_j Re(conj(Q_j) e^{i p_t theta_j} W_j),  W_j = sum_r zeta_{r,A_r,j} + i zeta_{r,B_r,j}
// i.e. table gathers summed in registers, then one 2-d rotation per pair, then the dot with
// every query head of the block. the gathers read the kv head's books, not a per-query-head
// table q R C^T: the same bytes per query head, so with g query heads per kv head the per-head
// lut would cost g times the gathers (and for head_dim 128 it does not fit in shared memory).
// values: per-code probability mass hist[h][r][m][c] += p_t (shared-memory atomics), then
// one product with the value books at the end: o[8m .. 8m+7] = sum_r sum_c hist * Cv[r][m][c].
//
// grid (clusters of C = head_dim / 32 blocks) x (splits + 1), kv heads x head groups, batch;
// 256 threads. block `rank` of a cluster scores rope pairs [16 rank, 16 rank + 16) of every
// token and accumulates value sub-vectors [4 rank, 4 rank + 4); per tile of 128 tokens the
// blocks swap partial scores through distributed shared memory (one cluster barrier per tile),
// each runs the same online softmax, and each writes its 32 output dims of the split's partial.
// the cluster of x index `splits` folds the fp16 residual ring instead.

#include <cooperative_groups.h>

#include <string>

#include "kernels/cuda/common/code12.cuh"
#include "kernels/cuda/decode/commvq_decode_layout.cuh"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/dense_attention.cuh"
#include "kernels/cuda/common/rope_rotation.cuh"

namespace vqserve::cuda {

// q (batch, num_heads, D) fp32 after rope; key books (R', 64, D/2, 2) and value books
// (Rv', D/8, 256, 8) fp32 per kv head; pages per docs/kv_formats.md; ring (slots, ring, H, D)
// fp16; writes workspace partials (batch, num_heads, splits + 1, D + 2).
template <int D, int HBP>
__global__ void __launch_bounds__(kCvqThreads, 1)
    CommVqDecodeKernel(const DecodeAttentionParams p, int hb, int num_splits) {
  namespace cg = cooperative_groups;
  constexpr int C = CvqClusterSize(D);
  constexpr int M = D / 8;
  extern __shared__ float4 cvq_smem4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(cvq_smem4);
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int split = blockIdx.x / C, b = blockIdx.z;
  int kvh, h0;
  BlockHeads(p, hb, &kvh, &h0);
  if (split == num_splits) {
    if (rank == 0) {
      ResidualPartial<D, HBP, kCvqThreads>(p, b, kvh, h0, hb, split, reinterpret_cast<float*>(smem));
    }
    return;
  }
  int t0, t1;
  SplitRange(p.coded_lens[b], num_splits, split, &t0, &t1);
  if (t0 >= t1) {
    if (rank == 0) WriteEmptyPartial(p, b, h0, hb, split);
    return;
  }
  const int R = p.commvq_key_rounds, RV = p.commvq_value_rounds, H = p.num_kv_heads;
  const CvqSmemLayout L = CvqLayout(HBP, R, RV);
  float4* book = reinterpret_cast<float4*>(smem + L.book);  // [R][64][kCvqPairs / 2]
  float* hist = reinterpret_cast<float*>(smem + L.hist);
  uint8_t* stages = smem + L.stages;
  uint32_t* codes = reinterpret_cast<uint32_t*>(smem + L.codes);
  float* part = reinterpret_cast<float*>(smem + L.part);
  float* prob = reinterpret_cast<float*>(smem + L.prob);
  float* tscale = reinterpret_cast<float*>(smem + L.tscale);
  float2* step = reinterpret_cast<float2*>(smem + L.step);
  float2* rbase = reinterpret_cast<float2*>(smem + L.base);
  float* alpha_sm = reinterpret_cast<float*>(smem + L.alpha);
  int* rescale_sm = reinterpret_cast<int*>(alpha_sm + HBP);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int ts = tid / kCvqLanesPerToken, l8 = tid % kCvqLanesPerToken;
  const uint8_t* pages = p.pages + p.layer_offset;
  const int32_t* table = p.block_tables + b * p.block_table_stride;
  const int ntiles = (t1 - t0 + kCvqTile - 1) / kCvqTile;
  const int page0 = t0 / 32, page_end = (t1 + 31) / 32;
  // with an attention sink the coded pages start at position sink_lens[b] (page-aligned): the
  // rotation angles use the true positions.
  const int pos0 = p.sink_lens != nullptr ? p.sink_lens[b] : 0;

  // a tile's copies: per page 4 chunks of scales, 3R of key codes, 8 rv of this block's value
  // codes (16 bytes each).
  const int chunks_pp = CvqChunksPerPage(R, RV);
  const int64_t koff = 64 * H + static_cast<int64_t>(kvh) * R * 48;
  const int64_t voff = 64 * H + static_cast<int64_t>(48) * H * R;
  // thread tid copies chunks tid + j * kCvqThreads (j < kCvqIdsPerThread); the page ids of the
  // next tile are fetched one iteration early so the block-table load stays off the issue.
  auto fetch_ids = [&](int tile, int32_t* ids) {
#pragma unroll
    for (int j = 0; j < kCvqIdsPerThread; ++j) {
      const int c = tid + j * kCvqThreads;
      const int idx = page0 + tile * kCvqTilePages + c / chunks_pp;
      ids[j] = (c < kCvqTilePages * chunks_pp && tile < ntiles && idx < page_end) ? table[idx] : -1;
    }
  };
  auto issue_tile = [&](int tile, const int32_t* ids) {
    uint8_t* dst = stages + (tile % kCvqStages) * L.stage_bytes;
#pragma unroll
    for (int j = 0; j < kCvqIdsPerThread; ++j) {
      const int c = tid + j * kCvqThreads;
      if (ids[j] < 0) continue;
      const int pg = c / chunks_pp, w = c % chunks_pp;
      const uint8_t* slice = pages + ids[j] * p.page_stride;
      if (w < 4) {
        CpAsync16(dst + pg * 64 + w * 16, slice + kvh * 64 + w * 16);
      } else if (w < 4 + 3 * R) {
        const int k = w - 4;
        CpAsync16(dst + L.stage_kcodes + (pg * R) * 48 + k * 16, slice + koff + k * 16);
      } else {
        const int k = w - 4 - 3 * R, r = k / 8, x = k % 8;
        CpAsync16(dst + L.stage_vcodes + ((pg * RV + r) * kCvqSubs) * 32 + x * 16,
                  slice + voff + ((static_cast<int64_t>(kvh) * RV + r) * M + rank * kCvqSubs) * 32 + x * 16);
      }
    }
  };
  int32_t ids[kCvqIdsPerThread];
#pragma unroll
  for (int s = 0; s < kCvqStages - 1; ++s) {
    fetch_ids(s, ids);
    issue_tile(s, ids);
    CpAsyncCommit();
  }
  fetch_ids(kCvqStages - 1, ids);

  // this block's pairs of the key books, rope steps, zeroed histograms, the block's queries.
  const float* kb = p.vq_k_codebook + kvh * p.vq_k_codebook_head_stride;
  for (int i = tid; i < R * 64 * (kCvqPairs / 2); i += kCvqThreads) {
    const int row = i / (kCvqPairs / 2), x = i % (kCvqPairs / 2);
    book[i] = *reinterpret_cast<const float4*>(kb + static_cast<int64_t>(row) * D + rank * 2 * kCvqPairs + 4 * x);
  }
  for (int i = tid; i < 32 * kCvqPairs; i += kCvqThreads) {
    const int t = i / kCvqPairs, j = rank * kCvqPairs + i % kCvqPairs;
    const double theta = static_cast<float>(pow(static_cast<double>(p.rope_theta), -2.0 * j / D));
    double s, c;
    sincos(t * theta, &s, &c);
    step[i] = make_float2(static_cast<float>(c), static_cast<float>(s));
  }
  for (int i = tid; i < HBP * RV * kCvqSubs * 256; i += kCvqThreads) hist[i] = 0.0f;
  if (tid == 0) *rescale_sm = 0;
  // q pairs 2 l8, 2 l8 + 1 of this block's chunk: dims rank * 32 + 4 l8 .. + 3.
  float qr[HBP][4];
#pragma unroll
  for (int h = 0; h < HBP; ++h) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (h < hb) {
      v = *reinterpret_cast<const float4*>(p.q + b * p.q_batch_stride + (h0 + h) * p.q_head_stride +
                                           rank * 2 * kCvqPairs + 4 * l8);
    }
    qr[h][0] = v.x;
    qr[h][1] = v.y;
    qr[h][2] = v.z;
    qr[h][3] = v.w;
  }
  // threads kCvqTile .. + 64 form the page rotations of each tile: their pair's theta_j.
  double base_theta = 0.0;
  if (tid >= kCvqTile && tid < kCvqTile + kCvqTilePages * kCvqPairs) {
    const int j = rank * kCvqPairs + (tid - kCvqTile) % kCvqPairs;
    base_theta = static_cast<float>(pow(static_cast<double>(p.rope_theta), -2.0 * j / D));
  }
  float m_run = -INFINITY, l_run = 0.0f;  // softmax state of head `warp` (warps < HBP)

  for (int i = 0; i < ntiles; ++i) {
    CpAsyncWait<kCvqStages - 2>();
    __syncthreads();
    issue_tile(i + kCvqStages - 1, ids);  // ids are -1 past the last tile
    CpAsyncCommit();
    fetch_ids(i + kCvqStages, ids);
    const uint8_t* st = stages + (i % kCvqStages) * L.stage_bytes;
    const int tile_t0 = t0 + i * kCvqTile;
    // unpack: book row offsets of (A, B) per round and token, token scales, page rotations.
    for (int e = tid; e < R * kCvqTile; e += kCvqThreads) {
      const int r = e / kCvqTile, t = e % kCvqTile, pg = t / 32, tt = t % 32;
      const uint32_t c = Code12(st + L.stage_kcodes + (pg * R + r) * 48, tt);
      codes[e] = ((r * 64 + (c & 63)) * (kCvqPairs / 2)) | (((r * 64 + (c >> 6)) * (kCvqPairs / 2)) << 16);
    }
    if (tid < kCvqTile) {
      const __half s = reinterpret_cast<const __half*>(st)[tid];
      tscale[tid] = __half2float(s) * p.scale;
    } else if (tid < kCvqTile + kCvqTilePages * kCvqPairs) {
      // p0 theta_j is exact in double (17 x 24 bits): RopeRotation keeps the slow large-argument
      // sincos off the tile's critical path.
      const int pg = (tid - kCvqTile) / kCvqPairs;
      rbase[tid - kCvqTile] = RopeRotation(static_cast<double>(pos0 + tile_t0 + pg * 32) * base_theta);
    }
    __syncthreads();

    // keys: thread (ts, l8) sums the rounds of pairs 2 l8, 2 l8 + 1 for tokens ts + 32 k.
    float* pbuf = part + (i & 1) * HBP * kCvqTile;
    {
      float w[kCvqTilePages][4];
#pragma unroll
      for (int k = 0; k < kCvqTilePages; ++k)
#pragma unroll
        for (int x = 0; x < 4; ++x) w[k][x] = 0.0f;
      const uint32_t* cr = codes + ts;
#pragma unroll 2
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int k = 0; k < kCvqTilePages; ++k) {
          const uint32_t u = cr[r * kCvqTile + 32 * k];
          const float4 a = book[(u & 0xffffu) + l8];
          const float4 c = book[(u >> 16) + l8];
          w[k][0] += a.x - c.y;
          w[k][1] += a.y + c.x;
          w[k][2] += a.z - c.w;
          w[k][3] += a.w + c.z;
        }
      }
#pragma unroll
      for (int k = 0; k < kCvqTilePages; ++k) {
        // token ts + 32 k sits at page k of the tile, index ts of the page.
        const float2 s0 = step[ts * kCvqPairs + 2 * l8], s1 = step[ts * kCvqPairs + 2 * l8 + 1];
        const float2 b0 = rbase[k * kCvqPairs + 2 * l8], b1 = rbase[k * kCvqPairs + 2 * l8 + 1];
        const float c0 = b0.x * s0.x - b0.y * s0.y, n0 = b0.y * s0.x + b0.x * s0.y;
        const float c1 = b1.x * s1.x - b1.y * s1.y, n1 = b1.y * s1.x + b1.x * s1.y;
        const float k0 = w[k][0] * c0 - w[k][1] * n0, k1 = w[k][0] * n0 + w[k][1] * c0;
        const float k2 = w[k][2] * c1 - w[k][3] * n1, k3 = w[k][2] * n1 + w[k][3] * c1;
        float mine = 0.0f;
#pragma unroll
        for (int h = 0; h < HBP; ++h) {
          float d = qr[h][0] * k0 + qr[h][1] * k1 + qr[h][2] * k2 + qr[h][3] * k3;
          d += __shfl_xor_sync(0xffffffffu, d, 1);
          d += __shfl_xor_sync(0xffffffffu, d, 2);
          d += __shfl_xor_sync(0xffffffffu, d, 4);
          if (l8 == h) mine = d;
        }
        if (l8 < HBP) pbuf[l8 * kCvqTile + ts + 32 * k] = mine;
      }
    }
    cluster.sync();

    // online softmax over the summed partials (same order in every block): warp h = head h.
    if (warp < HBP) {
      const int h = warp;
      float sv[kCvqTile / 32];
      float cmax = -INFINITY;
#pragma unroll
      for (int j = 0; j < kCvqTile / 32; ++j) {
        const int t = lane + 32 * j;
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < C; ++c) s += cluster.map_shared_rank(pbuf, c)[h * kCvqTile + t];
        sv[j] = tile_t0 + t < t1 ? s * tscale[t] : -INFINITY;
        cmax = fmaxf(cmax, sv[j]);
      }
      cmax = WarpMax(cmax);
      const float m_new = fmaxf(m_run, cmax);
      const float alpha = m_run == -INFINITY ? 0.0f : __expf(m_run - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kCvqTile / 32; ++j) {
        const float pv = h < hb ? __expf(sv[j] - m_new) : 0.0f;
        prob[(lane + 32 * j) * HBP + h] = pv;
        sum += pv;
      }
      l_run = l_run * alpha + sum;  // this lane's share; summed over the warp at the end
      m_run = m_new;
      if (lane == 0) {
        alpha_sm[h] = alpha;
        if (alpha != 1.0f && i > 0) atomicOr(rescale_sm, 1);
      }
    }
    __syncthreads();
    if (*rescale_sm) {
      for (int e = tid; e < HBP * RV * kCvqSubs * 256; e += kCvqThreads) {
        hist[e] *= alpha_sm[e / (RV * kCvqSubs * 256)];
      }
      __syncthreads();
      if (tid == 0) *rescale_sm = 0;
    }
    // values: probability mass per (head, round, sub-vector, code).
    const uint8_t* vst = st + L.stage_vcodes;
    for (int e = tid; e < kCvqTile * RV * kCvqSubs; e += kCvqThreads) {
      const int t = e % kCvqTile, rm = e / kCvqTile, r = rm / kCvqSubs, mi = rm % kCvqSubs;
      if (tile_t0 + t >= t1) continue;
      const int code = vst[((t / 32 * RV + r) * kCvqSubs + mi) * 32 + t % 32];
#pragma unroll
      for (int h = 0; h < HBP; ++h) {
        if (h < hb) atomicAdd(&hist[((h * RV + r) * kCvqSubs + mi) * 256 + code], prob[t * HBP + h]);
      }
    }
  }
  CpAsyncWait<0>();
  __syncthreads();
  cluster.sync();  // no block leaves while another may still read its partial scores

  // o[h][8 m + e] = sum_r sum_c hist[h][r][m][c] * Cv[r][m][c][e] for this block's 4 sub-vectors.
  const float* vb = p.vq_v_codebook + kvh * p.vq_v_codebook_head_stride;
  for (int o = tid; o < hb * kCvqSubs * 8; o += kCvqThreads) {
    const int h = o / (kCvqSubs * 8), mi = (o / 8) % kCvqSubs, e = o % 8, m = rank * kCvqSubs + mi;
    float acc = 0.0f;
    for (int r = 0; r < RV; ++r) {
      const float* hr = hist + ((h * RV + r) * kCvqSubs + mi) * 256;
      const float* cv = vb + (static_cast<int64_t>(r) * M + m) * 256 * 8 + e;
#pragma unroll 8
      for (int c = 0; c < 256; ++c) acc += hr[c] * cv[c * 8];
    }
    PartialAcc(p, b, h0 + h, split)[m * 8 + e] = acc;
  }
  if (warp < HBP) {
    const float l_tot = WarpSum(l_run);
    if (rank == 0 && lane == 0 && warp < hb) *PartialMl(p, b, h0 + warp, split) = make_float2(m_run, l_tot);
  }
}

// launches the kernel above (instantiated per head_dim in commvq_decode_d*.cu).
template <int D, int HBP>
std::string LaunchCommVqDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                               cudaStream_t stream) {
  const size_t dense = DenseSmem<D, HBP, kCvqThreads>::kFloats * sizeof(float);
  const size_t layout = CvqLayout(HBP, p.commvq_key_rounds, p.commvq_value_rounds).total;
  const size_t bytes = layout > dense ? layout : dense;
  if (bytes > static_cast<size_t>(kCvqSmemLimit)) return "commvq decode: shared memory does not fit";
  static size_t configured = 0;
  if (bytes > configured) {
    VQ_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(CommVqDecodeKernel<D, HBP>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(bytes)));
    configured = bytes;
  }
  const int group = p.num_heads / p.num_kv_heads;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((num_splits + 1) * CvqClusterSize(D), p.num_kv_heads * (group / hb), p.batch);
  cfg.blockDim = dim3(kCvqThreads);
  cfg.dynamicSmemBytes = bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CvqClusterSize(D);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  VQ_CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&cfg, CommVqDecodeKernel<D, HBP>, p, hb, num_splits));
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_DECODE_COMMVQ_DECODE_CUH_
