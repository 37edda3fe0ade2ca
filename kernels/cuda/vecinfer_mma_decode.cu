// vecinfer decode attention (head_dim 128, 4-dim key and value sub-vectors, 8-bit codes) on
// the tensor cores: values (and, in the kLut = false variant, keys) are dequantized from fp16
// codebooks in shared memory straight into mma.m16n8k16 fragments, and every warp runs its
// own online softmax over its own pages, so the main loop has no block barrier. the default
// (kLut = true) scores through an fp16 query lookup table instead of the key mma.
//
// grid (splits + 1, kv heads x head groups, batch), 512 threads (16 warps), hb <= 4 query
// heads of one kv head per block. smem: Ck, Cv fp16 [32 sub-vectors][256 codes][4] (64 KB
// each), then per warp 3 stages of one 32-token page (k codes [32][32] then v codes [32][32]).
// warp w takes pages w, w + 16, ... of the split.
//   scores S^T (16 tokens x 8 cols) = K (16 tokens x 16 dims) . Qb (16 dims x 8 cols): cols
//     0..3 hold q_hi of heads 0..3, cols 4..7 q_lo = q - q_hi (fp16 pair, ~fp32 query); the
//     dims of k-step ks for lane group tig are those of sub-vector tig * 8 + ks, so one 8-byte
//     codebook row is one lane's half of an A fragment row.
//   values O^T (16 dims x 8 cols) += V^T (16 dims x 16 tokens) . Pb (16 tokens x 8 cols): cols
//     0..3 p_hi, 4..7 p_lo = p - p_hi; lane group gid owns sub-vectors 4 gid .. 4 gid + 3, so
//     m-tile 2 s (+1) rows gid / gid + 8 are dims 0 / 1 (2 / 3) of sub-vector 4 gid + s.
// the block's 16 warp partials are merged into one workspace slot; block x == splits folds
// the fp16 residual ring.

#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/decode_attention_instances.h"
#include "kernels/cuda/dense_attention.cuh"
#include "kernels/cuda/mma_ops.cuh"

namespace vqserve::cuda {
namespace {

constexpr int kMmaThreads = 512, kMmaWarps = kMmaThreads / 32;
constexpr int kDim = 128, kSubs = 32;            // head dims, sub-vectors of 4 dims
constexpr int kWStages = 3;                      // page stages per warp
constexpr int kPageCodes = 32 * kSubs;           // code bytes of one kv head's page (k or v)
constexpr int kStageBytes = 2 * kPageCodes;      // k codes then v codes
constexpr int kBookBytes = kSubs * 256 * 8;      // fp16 codebook
constexpr int kPRow = 40;                        // halves per probability row (32 + pad)
constexpr size_t kQOffset = 2 * size_t{kBookBytes} + size_t{kMmaWarps} * kWStages * kStageBytes;
constexpr size_t kMmaSmemBytes = kQOffset + 4 * kDim * 4;  // + scaled queries [4][128] fp32
static_assert(kMmaSmemBytes <= 232448, "vecinfer mma smem");
static_assert(DenseSmem<kDim, 4, kMmaThreads>::kFloats * 4 <= kMmaSmemBytes, "residual smem");
static_assert(kMmaWarps * 4 * (kDim + 2) * 4 <= kMmaWarps * kWStages * kStageBytes, "merge smem");
static_assert(8 * kPRow * 2 <= kPageCodes, "probabilities fit the k-code half of a stage");

// fp16 rounding of x, or the fp16 rounding of what that rounding missed.
__device__ inline float HiOrLo(float x, bool lo) {
  const float hi = __half2float(__float2half_rn(x));
  return lo ? x - hi : hi;
}
// byte k of w (zero-extended).
__device__ inline uint32_t ByteOf(uint32_t w, int k) { return __byte_perm(w, 0u, 0x4440 + k); }


// q_tilde (batch, num_heads, 128) fp32; codebooks (32, 256, 4) fp32 per kv head; pages per
// docs/kv_formats.md; writes workspace partials (batch, num_heads, splits + 1, 128 + 2).
// kLut: scores from an fp16 lookup table lut[code][sub-vector] = (q_h . Ck[m][code])_{h < 4}
// (lane = token, sub-vectors visited in a lane-rotated order so that a half warp's 8-byte
// gathers hit 16 distinct bank pairs; fp32 sums) instead of the key mma, whose gathers of
// random codes conflict.
template <bool kLut>
__global__ void __launch_bounds__(kMmaThreads, 1)
    VecInferMmaDecodeKernel(const DecodeAttentionParams p, int hb, int num_splits) {
  extern __shared__ float4 mma_smem4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(mma_smem4);
  const int split = blockIdx.x, b = blockIdx.z;
  int kvh, h0, t0, t1;
  float* const fsmem = reinterpret_cast<float*>(smem);
  if (!BeginSplitBlock<kDim, 4, kMmaThreads>(p, hb, num_splits, split, fsmem, &kvh, &h0, &t0, &t1)) return;
  uint2* ck_s = reinterpret_cast<uint2*>(smem);  // [32][256] x 4 halves
  uint2* cv_s = ck_s + kSubs * 256;
  uint8_t* stages = smem + 2 * kBookBytes;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
  const uint8_t* base = p.pages + p.layer_offset;
  const int32_t* table = p.block_tables + b * p.block_table_stride;
  const int page0 = t0 / 32, page_end = (t1 + 31) / 32;
  const int npages = page_end - page0 > warp ? (page_end - page0 - warp + kMmaWarps - 1) / kMmaWarps : 0;
  uint8_t* wst = stages + warp * kWStages * kStageBytes;
  const int64_t koff = static_cast<int64_t>(kvh) * kPageCodes;
  const int64_t voff = static_cast<int64_t>(p.num_kv_heads) * kPageCodes + koff;
  auto page_id = [&](int i) { return i < npages ? table[page0 + warp + kMmaWarps * i] : -1; };
  auto issue = [&](int stage, int id) {
    if (id >= 0) {
      const uint8_t* src = base + static_cast<int64_t>(id) * p.page_stride;
      uint8_t* dst = wst + stage * kStageBytes;
      CpAsync16(dst + lane * 16, src + koff + lane * 16);
      CpAsync16(dst + 512 + lane * 16, src + koff + 512 + lane * 16);
      CpAsync16(dst + kPageCodes + lane * 16, src + voff + lane * 16);
      CpAsync16(dst + kPageCodes + 512 + lane * 16, src + voff + 512 + lane * 16);
    }
    CpAsyncCommit();
  };
  issue(0, page_id(0));
  issue(1, page_id(1));
  int next_id = page_id(2);

  // fp16 codebooks, and this lane's query fragments (col gid: head gid & 3, hi or lo part).
  const float4* ckg = reinterpret_cast<const float4*>(p.vq_k_codebook + kvh * p.vq_k_codebook_head_stride);
  const float4* cvg = reinterpret_cast<const float4*>(p.vq_v_codebook + kvh * p.vq_v_codebook_head_stride);
  const float qs = p.scale * 1.4426950408889634f;  // scores in log2 units
  float* q_s = reinterpret_cast<float*>(smem + kQOffset);  // [4][128] scaled, 0 past hb
  if constexpr (kLut) {
    for (int i = tid; i < 4 * kDim; i += kMmaThreads) {
      const int h = i / kDim;
      q_s[i] = h < hb ? p.q_tilde[b * p.q_batch_stride + (h0 + h) * p.q_head_stride + i % kDim] * qs : 0.0f;
    }
    __syncthreads();
  }
  for (int e = tid; e < kSubs * 256; e += kMmaThreads) {
    const float4 k = ckg[e], v = cvg[e];
    if constexpr (kLut) {
      const int m = e / 256, code = e % 256;
      float d[4];
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const float4 q = *reinterpret_cast<const float4*>(q_s + h * kDim + 4 * m);
        d[h] = q.x * k.x + q.y * k.y + q.z * k.z + q.w * k.w;
      }
      ck_s[code * kSubs + m] = make_uint2(PackHalf2(d[0], d[1]), PackHalf2(d[2], d[3]));
    } else {
      ck_s[e] = make_uint2(PackHalf2(k.x, k.y), PackHalf2(k.z, k.w));
    }
    cv_s[e] = make_uint2(PackHalf2(v.x, v.y), PackHalf2(v.z, v.w));
  }
  uint32_t qb[8][2];
  {
    const int qh = gid & 3;
    const bool lo = gid >= 4, valid = qh < hb;
    const float* qrow = p.q_tilde + b * p.q_batch_stride + (h0 + (valid ? qh : 0)) * p.q_head_stride;
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      const int d = (tig * 8 + ks) * 4;
      float x[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) x[j] = valid && !kLut ? HiOrLo(qrow[d + j] * qs, lo) : 0.0f;
      qb[ks][0] = PackHalf2(x[0], x[1]);
      qb[ks][1] = PackHalf2(x[2], x[3]);
    }
  }
  __syncthreads();

  float acc[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  // softmax state: mma scores: heads 2 (tig & 1) + e (e < 2); lut scores: heads e (e < 4).
  constexpr int kNh = kLut ? 4 : 2;
  float m_run[kNh], l_run[kNh];
#pragma unroll
  for (int e = 0; e < kNh; ++e) {
    m_run[e] = -INFINITY;
    l_run[e] = 0.0f;
  }
  const bool lo_lane = tig >= 2;
  const int ha = 2 * (tig & 1);
  const uint2* ckt = ck_s + tig * 8 * 256;  // sub-vector tig * 8 + ks at + ks * 256
  const uint2* cvt = cv_s + gid * 4 * 256;  // sub-vector 4 gid + s at + s * 256

  for (int i = 0; i < npages; ++i) {
    CpAsyncWait<1>();
    __syncwarp();
    issue((i + 2) % kWStages, next_id);
    next_id = page_id(i + 3);
    uint8_t* kc = wst + (i % kWStages) * kStageBytes;
    const uint8_t* vc = kc + kPageCodes;
    const int ptok0 = (page0 + warp + kMmaWarps * i) * 32;

    __half* pb = reinterpret_cast<__half*>(kc);  // [8 cols][kPRow tokens], after the k codes
    if constexpr (kLut) {
      // lane = token; word wi, byte kk = sub-vector 4 wi + kk.
      const uint32_t* row = reinterpret_cast<const uint32_t*>(kc + lane * kSubs);
      float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int J = 0; J < 8; ++J) {
        const int wi = (J + (lane >> 2)) & 7;
        const uint32_t word = row[wi];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int kk = (k + lane) & 3;
          const uint32_t code = (word >> (kk * 8)) & 0xFFu;
          const uint2 e = ck_s[code * kSubs + wi * 4 + kk];
          const float2 a = Half2BitsToFloat2(e.x), c = Half2BitsToFloat2(e.y);
          sc[0] += a.x;
          sc[1] += a.y;
          sc[2] += c.x;
          sc[3] += c.y;
        }
      }
      const bool valid = ptok0 + lane < t1;
      float alpha[4];
      __syncwarp();  // every lane has read its k codes: the probabilities reuse that space
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const float v = valid ? sc[h] : -INFINITY;
        const float m_new = fmaxf(m_run[h], WarpMax(v));
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        alpha[h] = exp2f(m_run[h] - m_use);
        m_run[h] = m_new;
        const float pv = exp2f(v - m_use);
        l_run[h] = l_run[h] * alpha[h] + pv;
        pb[h * kPRow + lane] = __float2half_rn(pv);
        pb[(h + 4) * kPRow + lane] = __float2half_rn(HiOrLo(pv, true));
      }
      if (alpha[0] != 1.0f || alpha[1] != 1.0f || alpha[2] != 1.0f || alpha[3] != 1.0f) {  // warp-uniform
        const float a0 = (tig & 1) ? alpha[2] : alpha[0], a1 = (tig & 1) ? alpha[3] : alpha[1];
#pragma unroll
        for (int mi = 0; mi < 8; ++mi) {
          acc[mi][0] *= a0;
          acc[mi][1] *= a1;
          acc[mi][2] *= a0;
          acc[mi][3] *= a1;
        }
      }
      __syncwarp();
    } else {
    // scores: m-tile mt = tokens mt * 16 .. + 15; lane rows gid, gid + 8.
    float s[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) s[mt][j] = 0.0f;
      const uint2 wa = *reinterpret_cast<const uint2*>(kc + (mt * 16 + gid) * kSubs + tig * 8);
      const uint2 wb = *reinterpret_cast<const uint2*>(kc + (mt * 16 + gid + 8) * kSubs + tig * 8);
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        const uint2 ea = ckt[ks * 256 + ByteOf(ks < 4 ? wa.x : wa.y, ks & 3)];
        const uint2 eb = ckt[ks * 256 + ByteOf(ks < 4 ? wb.x : wb.y, ks & 3)];
        Mma16816(s[mt], ea.x, eb.x, ea.y, eb.y, qb[ks][0], qb[ks][1]);
      }
    }
    // hi + lo columns; lanes tig and tig ^ 2 then hold heads ha, ha + 1 of tokens
    // mt * 16 + gid (j < 2) and mt * 16 + gid + 8 (j >= 2).
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float v = s[mt][j] + __shfl_xor_sync(0xffffffffu, s[mt][j], 2);
        if (ptok0 + mt * 16 + gid + (j >= 2 ? 8 : 0) >= t1) v = -INFINITY;
        s[mt][j] = v;
        mx[j & 1] = fmaxf(mx[j & 1], v);
      }
    float alpha[2], m_use[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
#pragma unroll
      for (int o = 4; o < 32; o <<= 1) mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], o));
      const float m_new = fmaxf(m_run[e], mx[e]);
      m_use[e] = m_new == -INFINITY ? 0.0f : m_new;
      alpha[e] = exp2f(m_run[e] - m_use[e]);
      m_run[e] = m_new;
    }
    __syncwarp();  // every lane has read its k codes: the probabilities reuse that space
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float pv = exp2f(s[mt][j] - m_use[j & 1]);
        sum[j & 1] += pv;
        const int col = ha + (j & 1) + (lo_lane ? 4 : 0);
        pb[col * kPRow + mt * 16 + gid + (j >= 2 ? 8 : 0)] = __float2half_rn(HiOrLo(pv, lo_lane));
      }
#pragma unroll
    for (int e = 0; e < 2; ++e) l_run[e] = l_run[e] * alpha[e] + sum[e];
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
      for (int mi = 0; mi < 8; ++mi) {
        acc[mi][0] *= alpha[0];
        acc[mi][1] *= alpha[1];
        acc[mi][2] *= alpha[0];
        acc[mi][3] *= alpha[1];
      }
    }
    __syncwarp();

    }
    // values: k-step kv = tokens kv * 16 .. + 15; lane k rows are tokens tb, tb + 1, tb + 8, tb + 9.
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      const int tb = kv * 16 + 2 * tig;
      const uint32_t b0 = *reinterpret_cast<const uint32_t*>(pb + gid * kPRow + tb);
      const uint32_t b1 = *reinterpret_cast<const uint32_t*>(pb + gid * kPRow + tb + 8);
      const uint32_t c0 = *reinterpret_cast<const uint32_t*>(vc + tb * kSubs + 4 * gid);
      const uint32_t c1 = *reinterpret_cast<const uint32_t*>(vc + (tb + 1) * kSubs + 4 * gid);
      const uint32_t c2 = *reinterpret_cast<const uint32_t*>(vc + (tb + 8) * kSubs + 4 * gid);
      const uint32_t c3 = *reinterpret_cast<const uint32_t*>(vc + (tb + 9) * kSubs + 4 * gid);
#pragma unroll
      for (int sv = 0; sv < 4; ++sv) {
        const uint2 e0 = cvt[sv * 256 + ByteOf(c0, sv)], e1 = cvt[sv * 256 + ByteOf(c1, sv)];
        const uint2 e2 = cvt[sv * 256 + ByteOf(c2, sv)], e3 = cvt[sv * 256 + ByteOf(c3, sv)];
        Mma16816(acc[2 * sv], __byte_perm(e0.x, e1.x, 0x5410), __byte_perm(e0.x, e1.x, 0x7632),
                 __byte_perm(e2.x, e3.x, 0x5410), __byte_perm(e2.x, e3.x, 0x7632), b0, b1);
        Mma16816(acc[2 * sv + 1], __byte_perm(e0.y, e1.y, 0x5410), __byte_perm(e0.y, e1.y, 0x7632),
                 __byte_perm(e2.y, e3.y, 0x5410), __byte_perm(e2.y, e3.y, 0x7632), b0, b1);
      }
    }
  }
  CpAsyncWait<0>();
  __syncthreads();

  // merge the 16 warp partials (stage space is free now).
  float* red = reinterpret_cast<float*>(stages);  // [warp][4 heads][128]
  float* wm = red + kMmaWarps * 4 * kDim;         // [warp][4]
  float* wl = wm + kMmaWarps * 4;
  float l_tot[kNh];
#pragma unroll
  for (int e = 0; e < kNh; ++e) {
    l_tot[e] = l_run[e];
#pragma unroll
    for (int o = kLut ? 1 : 4; o < 32; o <<= 1) l_tot[e] += __shfl_xor_sync(0xffffffffu, l_tot[e], o);
  }
#pragma unroll
  for (int mi = 0; mi < 8; ++mi)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[mi][j] += __shfl_xor_sync(0xffffffffu, acc[mi][j], 2);
  if (!lo_lane) {
#pragma unroll
    for (int mi = 0; mi < 8; ++mi) {
      const int d = 4 * (4 * gid + mi / 2) + 2 * (mi & 1);
      red[(warp * 4 + ha) * kDim + d] = acc[mi][0];
      red[(warp * 4 + ha + 1) * kDim + d] = acc[mi][1];
      red[(warp * 4 + ha) * kDim + d + 1] = acc[mi][2];
      red[(warp * 4 + ha + 1) * kDim + d + 1] = acc[mi][3];
    }
    if (gid == 0 && !kLut) {
#pragma unroll
      for (int e = 0; e < kNh; ++e) {
        wm[warp * 4 + ha + e] = m_run[e];
        wl[warp * 4 + ha + e] = l_tot[e];
      }
    }
  }
  if (kLut && lane == 0) {
#pragma unroll
    for (int e = 0; e < kNh; ++e) {
      wm[warp * 4 + e] = m_run[e];
      wl[warp * 4 + e] = l_tot[e];
    }
  }
  __syncthreads();
  MergeWarpPartials<kDim, kMmaWarps, kMmaThreads>(p, b, h0, hb, split, wm, wl, red);
}

template <bool kLut>
std::string LaunchVariant(const DecodeAttentionParams& p, int hb, int num_splits, cudaStream_t stream) {
  if (p.head_dim != kDim || p.vq_k_sub_dim != 4 || p.vq_v_sub_dim != 4 || hb > 4) {
    return "vecinfer mma decode: needs head_dim 128, 4-dim sub-vectors, <= 4 heads per block";
  }
  static bool configured = false;
  if (!configured) {
    VQ_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(VecInferMmaDecodeKernel<kLut>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(kMmaSmemBytes)));
    configured = true;
  }
  const int group = p.num_heads / p.num_kv_heads;
  dim3 grid(num_splits + 1, p.num_kv_heads * (group / hb), p.batch);
  VecInferMmaDecodeKernel<kLut><<<grid, kMmaThreads, kMmaSmemBytes, stream>>>(p, hb, num_splits);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace

std::string LaunchVecInferMmaDecode(const DecodeAttentionParams& p, int hb, int num_splits,
                                    cudaStream_t stream) {
  // lut scores measured faster (docs/performance.md, run6); 2 keeps the key-mma scores.
  return p.vecinfer_version == 2 ? LaunchVariant<false>(p, hb, num_splits, stream)
                                 : LaunchVariant<true>(p, hb, num_splits, stream);
}

}  // namespace vqserve::cuda
