// vecinfer decode attention v8 (head_dim 128, 4-dim key and value sub-vectors, 8-bit codes):
// v7's page loop (lut scores and values on the tensor cores, code-independent banks; see
// vecinfer_mma7_decode.cu for the fragment layout) with the fixed per-launch costs cut:
//  - books: every thread owns one sub-vector m and 16 codes, so its 16 query floats come
//    straight from global memory (no query staging, no barrier before the build), and it loads
//    its codebook rows 8 at a time before using them (v7's loop kept ~1 load pair in flight per
//    thread); blocks start at different rows so that 128 blocks do not queue on one l2 slice.
//  - 3 pages per warp are in flight during the book build (v7: 2); page i + 3 is issued after
//    page i is done.
//  - the residual ring + sink (last split) run warp-parallel (warp_residual.cuh: one merge, no
//    per-chunk barriers; v7: DenseAttendRange, 3 barriers per 64 tokens), their rows asked
//    into l2 at the start.
//
// grid (splits, kv heads x head groups, batch), 512 threads (16 warps), hb <= 4 query heads of
// one kv head per block. smem: lut and Cv fp16 [256 codes][32 sub-vectors][4] (64 KB each,
// code-major, the lut at a 64 KB-aligned window address), per warp 3 stages of one 32-token
// page (k codes [32][32] then v codes [32][32]). warp w takes pages w, w + 16, ...
// bench_skip_stages (benchmarks only): 1 score gathers, 2 value gathers, 4 book build, 8 residual
// (wrong results); 16 skips only the l2 prefetch of the residual rows (results stay right).
//  - with several splits, the last one (it also attends the residual) takes fewer pages.

#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/decode_attention_common.cuh"
#include "kernels/cuda/decode_attention_instances.h"
#include "kernels/cuda/warp_residual.cuh"

// the kernel's dynamic shared memory; at file scope so that inline ptx can name it.
extern __shared__ float4 vq_v8_smem[];

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 512, kWarps = kThreads / 32;
constexpr int kDim = 128, kSubs = 32;            // head dims, sub-vectors of 4 dims
constexpr int kWStages = 3;                      // page stages per warp
constexpr int kPageCodes = 32 * kSubs;           // code bytes of one kv head's page (k or v)
constexpr int kStageBytes = 2 * kPageCodes;      // k codes then v codes
constexpr int kBookBytes = kSubs * 256 * 8;      // fp16 lut or codebook
constexpr int kPRow = 40;                        // halves per probability row (32 + pad)
constexpr int kWarpStage = kWStages * kStageBytes;
constexpr int kBuildBatch = 8;                   // codebook rows loaded before use, per thread
// books, 16 warps x 3 stages and the alignment gap of the books (MakeLayout: fits at the
// sm_90 dynamic-base window address 0x400 and at 0).
constexpr size_t kSmemBytes = 232448;
static_assert(2 * kBookBytes + kWarps * kWarpStage + 0x400 <= kSmemBytes, "smem");
static_assert(kWarpResidualFloats * 4 <= kBookBytes, "residual smem");
static_assert(kWarps * 4 * (kDim + 2) * 4 <= kBookBytes, "merge smem");
static_assert(4 * kPRow * 2 <= kPageCodes, "probabilities fit the k-code half of a stage");
static_assert(kSubs * 256 == 16 * kThreads, "book build: 16 entries per thread");

__device__ inline uint32_t PackHalf2(float x, float y) {
  __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&h);
}

// c (16 x 8 fp32) += a (16 x 16 fp16, row) . b (16 x 8 fp16, col).
__device__ inline void Mma16816(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// byte offset code * 256 + moff of entry (code, m) in a code-major book, code = byte `b` of
// word w: one prmt with sel = 0x7604 | b << 4 and moff = m * 8 (< 256) in the low byte.
__device__ inline uint32_t EntryOffset(uint32_t w, uint32_t moff, uint32_t sel) {
  return __byte_perm(w, moff, sel);
}
// 8 bytes at shared-window address `addr`.
__device__ inline uint2 Lds64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}
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
struct Layout {
  uint32_t lut, high;
  int nlow;
};
__device__ inline Layout MakeLayout(uint32_t win) {
  Layout l;
  l.lut = (0x10000u - (win & 0xFFFFu)) & 0xFFFFu;
  l.nlow = l.lut / kWarpStage;
  l.high = l.lut + 2 * kBookBytes;
  return l;
}

// lut[code][m] = fp16 (q_h . Ck[m][code]) for h < 4 (0 past hb) and Cv code-major fp16. thread
// (warp, lane) owns sub-vector m = lane / 2 + 16 (warp & 1) and codes 2 (warp / 2) + (lane & 1)
// + 16 j: per warp 16 runs of 32 global bytes, conflict-free 8-byte stores.
__device__ __forceinline__ void BuildBooks(const DecodeAttentionParams& p, int b, int kvh, int h0,
                                           int hb, uint2* lut_s, uint2* cv_s) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int m = (lane >> 1) + 16 * (warp & 1), code0 = 2 * (warp >> 1) + (lane & 1);
  const float qs = p.scale * 1.4426950408889634f;  // scores in log2 units
  float4 q[4];
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const float* qg = p.q_tilde + b * p.q_batch_stride + (h0 + min(h, hb - 1)) * p.q_head_stride + 4 * m;
    const float f = h < hb ? qs : 0.0f;  // any q strides: 4 scalar loads
    q[h] = make_float4(qg[0] * f, qg[1] * f, qg[2] * f, qg[3] * f);
  }
  const float4* ckg = reinterpret_cast<const float4*>(p.vq_k_codebook + kvh * p.vq_k_codebook_head_stride) + m * 256;
  const float4* cvg = reinterpret_cast<const float4*>(p.vq_v_codebook + kvh * p.vq_v_codebook_head_stride) + m * 256;
  const int rot = (blockIdx.x * 5 + blockIdx.y * 3 + blockIdx.z * 7) & 15;
#pragma unroll
  for (int j0 = 0; j0 < 16; j0 += kBuildBatch) {
    float4 k[kBuildBatch], v[kBuildBatch];
    int code[kBuildBatch];
#pragma unroll
    for (int j = 0; j < kBuildBatch; ++j) {
      code[j] = code0 + 16 * ((j0 + j + rot) & 15);
      k[j] = Ldg4(ckg + code[j]);
      v[j] = Ldg4(cvg + code[j]);
    }
#pragma unroll
    for (int j = 0; j < kBuildBatch; ++j) {
      float d[4];
#pragma unroll
      for (int h = 0; h < 4; ++h) d[h] = q[h].x * k[j].x + q[h].y * k[j].y + q[h].z * k[j].z + q[h].w * k[j].w;
      lut_s[code[j] * kSubs + m] = make_uint2(PackHalf2(d[0], d[1]), PackHalf2(d[2], d[3]));
      cv_s[code[j] * kSubs + m] = make_uint2(PackHalf2(v[j].x, v[j].y), PackHalf2(v[j].z, v[j].w));
    }
  }
}

// coded tokens [t0, t1) of sequence b, query heads h0 .. h0 + hb - 1 of kv head kvh ->
// workspace slot `split`.
__device__ __forceinline__ void CodedPartial(const DecodeAttentionParams& p, int hb, int split, int b,
                                             int kvh, int h0, int t0, int t1, uint8_t* smem) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
  uint32_t win;
  asm("mov.u32 %0, vq_v8_smem;\n" : "=r"(win));
  const Layout lay = MakeLayout(win);
  if (lay.high + (kWarps - lay.nlow) * kWarpStage > kSmemBytes) __trap();  // cannot happen at win 0x400 or 0
  uint2* lut_s = reinterpret_cast<uint2*>(smem + lay.lut);  // [256][32] x 4 halves (heads)
  uint2* cv_s = lut_s + kSubs * 256;                        // [256][32] x 4 halves (dims)
  const uint32_t lut_hi = (win + lay.lut) >> 16;            // window address bits 16.. of the lut
  const int32_t* table = p.block_tables + b * p.block_table_stride + t0 / 32 + warp;
  const int page_end = (t1 + 31) / 32, page0 = t0 / 32;
  const int npages = page_end - page0 > warp ? (page_end - page0 - warp + kWarps - 1) / kWarps : 0;
  uint8_t* wst = smem + (warp < lay.nlow ? warp * kWarpStage : lay.high + (warp - lay.nlow) * kWarpStage);
  const uint8_t* lsrc = p.pages + p.layer_offset + static_cast<int64_t>(kvh) * kPageCodes + lane * 16;
  const int64_t dv = static_cast<int64_t>(p.num_kv_heads) * kPageCodes;  // k codes -> v codes
  auto page_id = [&](int i) { return i < npages ? table[kWarps * i] : -1; };
  auto issue = [&](int stage, int id) {
    if (id >= 0) {
      const uint8_t* src = lsrc + static_cast<int64_t>(id) * p.page_stride;
      uint8_t* dst = wst + stage * kStageBytes + lane * 16;
      CpAsync16(dst, src);
      CpAsync16(dst + 512, src + 512);
      CpAsync16(dst + kPageCodes, src + dv);
      CpAsync16(dst + kPageCodes + 512, src + dv + 512);
    }
    CpAsyncCommit();
  };
  {
    const int id0 = page_id(0), id1 = page_id(1), id2 = page_id(2);
    issue(0, id0);
    issue(1, id1);
    issue(2, id2);
  }
  int next_id = page_id(3);

  if (!(p.bench_skip_stages & 4)) BuildBooks(p, b, kvh, h0, hb, lut_s, cv_s);
  __syncthreads();

  // per-lane constants. scores: step (o, j) reads word tig + 4 (o ^ u) of a token's k codes,
  // byte (j + gid) & 3. values: slot j takes byte j ^ 2 u ^ th of the token's word gid. the
  // prmt selector puts that byte at bits 8..15 of the address, the constant's bytes 0 and 2
  // (m * 8 and the book's 64 KB page) around it.
  const int u = gid >> 2, th = tig >> 1;
  uint32_t kmoff[2][4], ksel[4], vmoff[4], vsel[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int bj = (j + gid) & 3;
    ksel[j] = 0x7604u | (bj << 4);
#pragma unroll
    for (int o = 0; o < 2; ++o) kmoff[o][j] = (4 * tig + 16 * (o ^ u) + bj) * 8 | lut_hi << 16;
    const int sg = j ^ (2 * u) ^ th;
    vsel[j] = 0x7604u | (sg << 4);
    vmoff[j] = (4 * gid + sg) * 8 | (lut_hi + 1) << 16;
  }
  // E: k = 2 tig + {0, 1} -> cols 0, 1, k = 2 tig + 8 + {0, 1} -> cols 2, 3 (col gid of B).
  const uint32_t e0 = (gid == 0 ? 0x3C00u : 0u) | (gid == 1 ? 0x3C000000u : 0u);
  const uint32_t e1 = (gid == 2 ? 0x3C00u : 0u) | (gid == 3 ? 0x3C000000u : 0u);
  // values: lanes tig >= 2 load tokens tb + 1 / tb + 9 first (no bank conflict with tig - 2).
  const uint32_t plo = th ? 0x1054u : 0x5410u, phi = th ? 0x3276u : 0x7632u;
  const bool pkeep = u == th;  // B col gid carries p only for the k lanes of its half
  const bool score_lane = th == 0, odd = tig & 1;
  const int ha = 2 * (tig & 1);
  const int my_tok = gid + 8 * (tig & 1);  // scores: lanes tig < 2 hold token 16 t + my_tok

  float acc[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  // softmax state of heads 0..3, the same in every lane.
  float m_run[4], l_run[4];
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    m_run[h] = -INFINITY;
    l_run[h] = 0.0f;
  }

  int st_use = 0;
  for (int i = 0; i < npages; ++i) {
    CpAsyncWait<2>();  // page i has landed (i + 1, i + 2 may be in flight)
    __syncwarp();
    uint8_t* kc = wst + st_use * kStageBytes;
    const uint8_t* vc = kc + kPageCodes;
    const int ptok0 = (page0 + warp + kWarps * i) * 32;

    // scores: tile t = tokens 16 t .. + 15; after the 8 k-steps lanes tig < 2 hold heads
    // 0..3 (c = 0..3) of token 16 t + my_tok.
    float s[2][4];
    {
      uint32_t kw[2][2][2];  // [tile][token gid / gid + 8][o]
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int o = 0; o < 2; ++o)
            kw[t][r][o] = *reinterpret_cast<const uint32_t*>(kc + (16 * t + 8 * r + gid) * kSubs + 4 * (tig + 4 * (o ^ u)));
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int c = 0; c < 4; ++c) s[t][c] = 0.0f;
      if (!(p.bench_skip_stages & 1)) {
#pragma unroll
        for (int o = 0; o < 2; ++o)
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int t = 0; t < 2; ++t) {
              const uint2 ea = Lds64(EntryOffset(kw[t][0][o], kmoff[o][j], ksel[j]));
              const uint2 eb = Lds64(EntryOffset(kw[t][1][o], kmoff[o][j], ksel[j]));
              Mma16816(s[t], ea.x, ea.y, eb.x, eb.y, e0, e1);
            }
      }
    }
    // page max per head: own tokens, then the pair of lanes tig, tig ^ 1 splits the heads
    // (ha, ha + 1 stay), then the other lanes; then the other pair back from tig ^ 1.
    float mh[4];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const bool ok = score_lane && ptok0 + 16 * t + my_tok < t1;
#pragma unroll
      for (int c = 0; c < 4; ++c) s[t][c] = ok ? s[t][c] : -INFINITY;
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) mh[c] = fmaxf(s[0][c], s[1][c]);
    float k0 = odd ? mh[2] : mh[0], k1 = odd ? mh[3] : mh[1];
    k0 = fmaxf(k0, __shfl_xor_sync(0xffffffffu, odd ? mh[0] : mh[2], 1));
    k1 = fmaxf(k1, __shfl_xor_sync(0xffffffffu, odd ? mh[1] : mh[3], 1));
#pragma unroll
    for (int o = 2; o < 32; o <<= 1) {
      k0 = fmaxf(k0, __shfl_xor_sync(0xffffffffu, k0, o));
      k1 = fmaxf(k1, __shfl_xor_sync(0xffffffffu, k1, o));
    }
    const float q0 = __shfl_xor_sync(0xffffffffu, k0, 1), q1 = __shfl_xor_sync(0xffffffffu, k1, 1);
    const float pm[4] = {odd ? q0 : k0, odd ? q1 : k1, odd ? k0 : q0, odd ? k1 : q1};
    float alpha[4], m_use[4];
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const float m_new = fmaxf(m_run[h], pm[h]);
      m_use[h] = m_new == -INFINITY ? 0.0f : m_new;
      alpha[h] = exp2f(m_run[h] - m_use[h]);
      m_run[h] = m_new;
    }
    __syncwarp();  // every lane has read its k codes: the probabilities reuse that space
    __half* pb = reinterpret_cast<__half*>(kc);  // [4 heads][kPRow tokens]
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const float p0 = exp2f(s[0][h] - m_use[h]), p1 = exp2f(s[1][h] - m_use[h]);
      l_run[h] = l_run[h] * alpha[h] + (p0 + p1);
      if (score_lane) {
        pb[h * kPRow + my_tok] = __float2half_rn(p0);
        pb[h * kPRow + 16 + my_tok] = __float2half_rn(p1);
      }
    }
    if (alpha[0] != 1.0f || alpha[1] != 1.0f || alpha[2] != 1.0f || alpha[3] != 1.0f) {  // warp-uniform
      const float a0 = odd ? alpha[2] : alpha[0], a1 = odd ? alpha[3] : alpha[1];
#pragma unroll
      for (int mi = 0; mi < 8; ++mi) {
        acc[mi][0] *= a0;
        acc[mi][1] *= a1;
        acc[mi][2] *= a0;
        acc[mi][3] *= a1;
      }
    }
    __syncwarp();

    // values: k-step kv = tokens kv * 16 .. + 15; lane k cols are tokens tb, tb + 1, tb + 8, tb + 9.
    if (!(p.bench_skip_stages & 2)) {
#pragma unroll
      for (int kv = 0; kv < 2; ++kv) {
        const int tb = kv * 16 + 2 * tig;
        uint32_t b0 = *reinterpret_cast<const uint32_t*>(pb + (gid & 3) * kPRow + tb);
        uint32_t b1 = *reinterpret_cast<const uint32_t*>(pb + (gid & 3) * kPRow + tb + 8);
        b0 = pkeep ? b0 : 0u;
        b1 = pkeep ? b1 : 0u;
        const uint32_t c0 = *reinterpret_cast<const uint32_t*>(vc + (tb + th) * kSubs + 4 * gid);
        const uint32_t c1 = *reinterpret_cast<const uint32_t*>(vc + (tb + 1 - th) * kSubs + 4 * gid);
        const uint32_t c2 = *reinterpret_cast<const uint32_t*>(vc + (tb + 8 + th) * kSubs + 4 * gid);
        const uint32_t c3 = *reinterpret_cast<const uint32_t*>(vc + (tb + 9 - th) * kSubs + 4 * gid);
#pragma unroll
        for (int sv = 0; sv < 4; ++sv) {
          const uint2 v0 = Lds64(EntryOffset(c0, vmoff[sv], vsel[sv]));
          const uint2 v1 = Lds64(EntryOffset(c1, vmoff[sv], vsel[sv]));
          const uint2 v2 = Lds64(EntryOffset(c2, vmoff[sv], vsel[sv]));
          const uint2 v3 = Lds64(EntryOffset(c3, vmoff[sv], vsel[sv]));
          Mma16816(acc[2 * sv], __byte_perm(v0.x, v1.x, plo), __byte_perm(v0.x, v1.x, phi),
                   __byte_perm(v2.x, v3.x, plo), __byte_perm(v2.x, v3.x, phi), b0, b1);
          Mma16816(acc[2 * sv + 1], __byte_perm(v0.y, v1.y, plo), __byte_perm(v0.y, v1.y, phi),
                   __byte_perm(v2.y, v3.y, plo), __byte_perm(v2.y, v3.y, phi), b0, b1);
        }
      }
    }
    __syncwarp();  // every lane is done with this stage: page i + 3 may land in it
    issue(st_use, next_id);
    next_id = page_id(i + 4);
    st_use = st_use == kWStages - 1 ? 0 : st_use + 1;
  }
  CpAsyncWait<0>();
  __syncthreads();

  // merge the 16 warp partials. lane tig's slot sv holds sub-vector 4 gid + (sv ^ 2 u ^ th);
  // lane tig ^ 2 holds the same one in slot sv ^ 1.
  float* red = reinterpret_cast<float*>(lut_s);  // [warp][4 heads][128] over the books
  float* wm = red + kWarps * 4 * kDim;             // [warp][4]
  float* wl = wm + kWarps * 4;
  float tot[8][4];
#pragma unroll
  for (int mi = 0; mi < 8; ++mi)
#pragma unroll
    for (int j = 0; j < 4; ++j) tot[mi][j] = acc[mi][j] + __shfl_xor_sync(0xffffffffu, acc[mi ^ 2][j], 2);
  if (score_lane) {
#pragma unroll
    for (int mi = 0; mi < 8; ++mi) {
      const int d = 4 * (4 * gid + ((mi >> 1) ^ (2 * u))) + 2 * (mi & 1);
      red[(warp * 4 + ha) * kDim + d] = tot[mi][0];
      red[(warp * 4 + ha + 1) * kDim + d] = tot[mi][1];
      red[(warp * 4 + ha) * kDim + d + 1] = tot[mi][2];
      red[(warp * 4 + ha + 1) * kDim + d + 1] = tot[mi][3];
    }
  }
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const float l = WarpSum(l_run[h]);
    if (lane == 0) {
      wm[warp * 4 + h] = m_run[h];
      wl[warp * 4 + h] = l;
    }
  }
  __syncthreads();
  MergeWarpPartials<kDim, kWarps, kThreads>(p, b, h0, hb, split, wm, wl, red);
}

// coded tokens [*t0, *t1) of split `split`: as SplitRange, but the splits are cut as if there
// were kResidualDebt more tokens, so the last split, which also attends the residual ring
// (measured ~10-14 us, runV8a, ~5 pages per warp), gets that many fewer coded tokens (none
// when there are few); one split takes everything.
constexpr int kResidualDebt = 2560;
__device__ inline void V8SplitRange(int len, int num_splits, int split, int* t0, int* t1) {
  const int padded = num_splits > 1 ? len + kResidualDebt : len;
  int per = (padded + num_splits - 1) / num_splits;
  per = (per + kSplitAlign - 1) / kSplitAlign * kSplitAlign;
  *t0 = min(len, split * per);
  *t1 = min(len, *t0 + per);
}

// q_tilde (batch, num_heads, 128) fp32; codebooks (32, 256, 4) fp32 per kv head; pages per
// docs/kv_formats.md; writes workspace partials (batch, num_heads, splits + 1, 128 + 2).
__global__ void __launch_bounds__(kThreads, 1)
    VecInferV8DecodeKernel(const DecodeAttentionParams p, int hb, int num_splits) {
  uint8_t* smem = reinterpret_cast<uint8_t*>(vq_v8_smem);
  const int split = blockIdx.x, b = blockIdx.z;
  int kvh, h0;
  BlockHeads(p, hb, &kvh, &h0);
  const bool residual = split == num_splits - 1 && !(p.bench_skip_stages & 8);
  if (residual && !(p.bench_skip_stages & 16)) PrefetchResidualL2<kThreads>(p, b, kvh);
  int t0, t1;
  V8SplitRange(p.coded_lens[b], num_splits, split, &t0, &t1);
  if (t0 < t1) {
    CodedPartial(p, hb, split, b, kvh, h0, t0, t1, smem);
  } else {
    WriteEmptyPartial(p, b, h0, hb, split);
  }
  // the last split (fewest tokens) also attends the sink + residual ring into slot num_splits.
  if (split == num_splits - 1) {
    __syncthreads();
    if (residual) {
      WarpResidual(p, b, kvh, h0, hb, num_splits, reinterpret_cast<float*>(smem));
    } else {
      WriteEmptyPartial(p, b, h0, hb, num_splits);
    }
  }
}

}  // namespace

std::string LaunchVecInferV8Decode(const DecodeAttentionParams& p, int hb, int num_splits,
                                   cudaStream_t stream) {
  if (p.head_dim != kDim || p.vq_k_sub_dim != 4 || p.vq_v_sub_dim != 4 || hb > 4) {
    return "vecinfer v8 decode: needs head_dim 128, 4-dim sub-vectors, <= 4 heads per block";
  }
  static bool configured = false;
  if (!configured) {
    VQ_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(VecInferV8DecodeKernel,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(kSmemBytes)));
    configured = true;
  }
  const int group = p.num_heads / p.num_kv_heads;
  dim3 grid(num_splits, p.num_kv_heads * (group / hb), p.batch);
  VecInferV8DecodeKernel<<<grid, kThreads, kSmemBytes, stream>>>(p, hb, num_splits);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda
