#ifndef VQSERVE_KERNELS_CUDA_DECODE_VECINFER_MMA_PAGE_CUH_
#define VQSERVE_KERNELS_CUDA_DECODE_VECINFER_MMA_PAGE_CUH_

// the warp page loop of the tensor-core vecinfer decode kernel (vecinfer_mma_decode.cu): the
// cp.async page stages, the per-lane constants, one page's lut scores (ScorePage), online
// softmax (SoftmaxPage) and value mma (ValuePage), AttendPage doing the three in turn (the merge
// of the block's warp partials and the launch: vecinfer_mma_block.cuh).
//
// fragment layout (head_dim 128, 4-dim sub-vectors; m16n8k16 mma, lane = (gid, tig)):
//   scores S (16 x 8) = L (16 x 16) . E (16 x 8), 8 k-steps per 16-token tile: lane (gid, tig)
//     gathers lut[code][m] = (q_h . Ck[m][code])_{h < 4} of sub-vector m = 4 tig + 16 (o ^ gid
//     / 4) + ((j + gid) & 3) at step (o, j) for tokens gid (a0 = heads 0, 1, a1 = heads 2, 3)
//     and gid + 8 (a2, a3); E (0/1) sums k = 2 tig + e into col e and k = 2 tig + 8 + e into
//     col 2 + e, so D row gid / gid + 8 = heads 0, 1 / 2, 3 and lane tig < 2 ends with heads
//     0..3 of token 16 t + gid + 8 tig (lanes tig >= 2: zeros). fp32 sums of fp16 entries.
//   values O^T (16 dims x 8) += V^T (16 dims x 16 tokens) . P (16 x 8): group gid owns
//     sub-vectors 4 gid .. 4 gid + 3; P is split by k lane: col h < 4 = fp16 p of head h for
//     the k of lanes tig < 2 (0 for the others), col 4 + h likewise for lanes tig >= 2; lanes
//     tig and tig ^ 2 are summed once at the end.
// ValueGather picks how the value gathers meet the banks (kPlain at head_dim 64, kQuad at 128);
// kLean is the lean page loop (see kLeanSlack), the one the launcher runs.
// D = head_dim, 128 or 64 (PageShape): at 64 the 16 sub-vectors take one score step o
// (m = 4 tig + ((j + gid) & 3)) and two value slots (group gid owns sub-vectors 2 gid, 2 gid +
// 1; slot i takes 2 gid + (i ^ tig / 2)); the books keep the 128 layout's 256-byte code rows.

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/decode/decode_attention.h"
#include "kernels/cuda/decode/decode_attention_common.cuh"
#include "kernels/cuda/common/mma_ops.cuh"

namespace vqserve::cuda::vq_mma {

inline constexpr int kThreads = 512, kWarps = kThreads / 32;
inline constexpr int kWStages = 3;                  // page stages per warp
inline constexpr int kBookRow = 32;                 // book entries (8 bytes) per code: 256 bytes
inline constexpr int kBookBytes = kBookRow * 256 * 8;  // fp16 lut or codebook
inline constexpr int kPRow = 40;                    // halves per probability row (32 + pad)
inline constexpr size_t kSmemBytes = 232448;        // all of the sm_90 opt-in maximum

// the value gathers of a lane group gid (head_dim 128; AttendPage). kPlain: lanes tig < 2 and
// tig >= 2 take 2 sub-vectors per slot, a half warp sees 8 bank pairs (2-way conflicts).
// kQuad: 4 sub-vectors per slot (4 gid + (slot ^ tig)), each A fragment used by two mmas whose
// P keeps the k of one tig each (tig = col / 4, tig = col / 4 + 2): no conflicts, no selects,
// 32 value mmas a page instead of 16.
enum class ValueGather { kPlain, kQuad };
// the page loop's shape at head_dim D with key / value sub-vectors of DK / DV dims (8-bit codes).
// book rows stay kBookRow entries per code at either D (the first kSubs used), so that a gather
// address is one prmt. values are gathered as 4-dim chunks whatever DV: a DV = 8 code row of
// the fp16 book ([256][D / 8][8]) is the DV = 4 row ([256][D / 4][4]) of the same bytes, chunk
// 2 m + i being half i of sub-vector m (its code the token's byte m).
// head_dim 64 with 8-dim keys (8 codes a token): one score step whose lanes tig >= 2 gather
// nothing (kKLanes = 2); the stage's k part is padded to hold the probabilities (kKRegion).
// VK (-pca keys, DK = DV = 4): a runtime number Mk of key codes a token (LaneConsts::mk), 17 to
// 32 at head_dim 64, 33 to 40 at 128: rows of Mk bytes, the stage's k part sized for the most;
// the score steps o take codes 0..D / 4 - 1 as the D / 4-code shape does, an extra step the rest
// (ScorePageVarK): at head_dim 64 from lut entries 16.., at 128 from an extra lut of 8 entries a
// code (kXLutBytes, after Cv), with 2 page stages a warp instead of 3 to make room for it.
template <int D, int DK = 4, int DV = 4, bool VK = false>
struct PageShape {
  static_assert(D == 128 || D == 64, "head_dim 128 or 64");
  static_assert((DK == 4 || DK == 8) && (DV == 4 || DV == 8), "sub-vectors of 4 or 8 dims");
  static_assert(!VK || (DK == 4 && DV == 4), "runtime key codes: 4-dim values");
  static constexpr int kDim = D, kDK = DK, kDV = DV;
  static constexpr bool kVarK = VK;
  static constexpr int kSubs = D / 4;            // 4-dim value chunks (Cv book entries of a code)
  static constexpr int kMaxKCodes = VK ? (D == 64 ? 32 : 40) : D / DK;  // key codes of a token, at most
  static constexpr int kKSubs = VK ? D / 4 : D / DK, kVSubs = D / DV;  // key codes of the steps o / value codes
  static constexpr int kStages = VK && D == 128 ? 2 : kWStages;        // page stages per warp
  static constexpr int kXLutBytes = VK && D == 128 ? 256 * 8 * 8 : 0;  // extra lut [256][8] entries
  static constexpr int kO = kKSubs >= 16 ? kKSubs / 16 : 1;  // score steps o of 16 key sub-vectors
  static constexpr int kKLanes = kKSubs >= 16 ? 4 : kKSubs / 4;  // lanes tig < kKLanes gather scores
  static constexpr int kSlots = kSubs / 8;       // value chunks of a lane group
  static constexpr int kKCodes = 32 * kMaxKCodes, kVCodes = 32 * kVSubs;  // code bytes of a page (VK: at most)
  static constexpr int kKRegion = kKCodes > 4 * kPRow * 2 ? kKCodes : 4 * kPRow * 2;  // k codes or probabilities
  static constexpr int kStageBytes = kKRegion + kVCodes;              // k codes then v codes
  static constexpr uint32_t kWarpStage = kStages * kStageBytes;       // stage bytes of one warp
  static_assert(kKRegion % 16 == 0 && kStageBytes % 16 == 0, "16-byte copies");
};
// head_dim 128 with 4-dim key and value sub-vectors.
inline constexpr int kDim = PageShape<128>::kDim, kSubs = PageShape<128>::kSubs;
inline constexpr int kPageCodes = PageShape<128>::kKCodes, kStageBytes = PageShape<128>::kStageBytes;
inline constexpr uint32_t kWarpStage = PageShape<128>::kWarpStage;
static_assert(kWarps * 4 * (kDim + 2) * 4 <= kBookBytes, "merge smem");
static_assert(4 * kPRow * 2 <= kPageCodes, "probabilities fit the k-code half of a stage");



// byte offset code * 256 + moff of entry (code, m) in a code-major book, code = byte `b` of
// word w: one prmt with sel = 0x7604 | b << 4 and moff = m * 8 (< 256) in the low byte.
__device__ __forceinline__ uint32_t EntryOffset(uint32_t w, uint32_t moff, uint32_t sel) {
  return __byte_perm(w, moff, sel);
}
// *x, opaque to the compiler (which then keeps it in a register rather than recompute it).
__device__ __forceinline__ void Pin(uint32_t* x) { asm volatile("mov.b32 %0, %0;\n" : "+r"(*x)); }
template <typename T>
__device__ __forceinline__ void Pin(const T** x) {
  asm volatile("mov.b64 %0, %0;\n" : "+l"(*reinterpret_cast<uint64_t*>(x)));
}
// 8 bytes at shared-window address `addr` + kOff.
template <int kOff = 0>
__device__ __forceinline__ uint2 Lds64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2+%3];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr), "n"(kOff));
  return v;
}

// the pages of one warp, table[kWarps * i] for i < npages, and their cp.async into the warp's
// kWStages stages at wst (k codes [32][kKSubs] then v codes [32][kVSubs]).
template <class S = PageShape<128>>
struct WarpPages {
  const DecodeAttentionParams& p;
  const int32_t* table;
  int npages, lane;
  uint8_t* wst;
  const uint8_t* lsrc;  // this lane's 16 bytes of the kv head's k codes in a page
  int64_t dv;           // k codes -> v codes
  int kbytes;           // k code bytes of a kv head's page (S::kKCodes unless S::kVarK)
  __device__ __forceinline__ int Id(int i) const { return i < npages ? table[kWarps * i] : -1; }
  // stage <- page `id` (nothing when id < 0); commits one group either way.
  __device__ __forceinline__ void Issue(int stage, int id) const {
    if (id >= 0) {
      const uint8_t* src = lsrc + static_cast<int64_t>(id) * p.page_stride;
      uint8_t* dst = wst + stage * S::kStageBytes + lane * 16;
      // 256-byte parts (head_dim 64, 8-dim sub-vectors): lanes < 16 copy them
      if constexpr (S::kVarK) {  // 32 Mk bytes: 34 to 64 chunks (head_dim 64), 66 to 80 (128)
        CpAsync16(dst, src);
        if (lane + 32 < kbytes / 16) CpAsync16(dst + 512, src + 512);
        if (S::kDim == 128 && lane + 64 < kbytes / 16) CpAsync16(dst + 1024, src + 1024);
      } else {
        if (S::kKCodes >= 512 || lane < S::kKCodes / 16) CpAsync16(dst, src);
        if constexpr (S::kKCodes == 1024) CpAsync16(dst + 512, src + 512);
      }
      if (S::kVCodes >= 512 || lane < S::kVCodes / 16) CpAsync16(dst + S::kKRegion, src + dv);
      if constexpr (S::kVCodes == 1024) CpAsync16(dst + S::kKRegion + 512, src + dv + 512);
    }
    CpAsyncCommit();
  }
};
// warp `warp`'s pages w, w + 16, ... of coded tokens [t0, t1) of sequence b, kv head kvh; its
// stages at smem + warp * kWarpStage for warps < nlow, else at high + (warp - nlow) * kWarpStage.
// kbytes: the k code bytes of a kv head's page (32 Mk).
template <class S = PageShape<128>>
__device__ __forceinline__ WarpPages<S> MakeWarpPages(const DecodeAttentionParams& p, int b, int kvh, int t0,
                                                   int t1, int warp, int lane, uint8_t* smem, int nlow,
                                                   uint32_t high, int kbytes = S::kKCodes) {
  const int32_t* table = p.block_tables + b * p.block_table_stride + t0 / 32 + warp;
  const int page_end = (t1 + 31) / 32, page0 = t0 / 32;
  const int npages = page_end - page0 > warp ? (page_end - page0 - warp + kWarps - 1) / kWarps : 0;
  uint8_t* wst = smem + (warp < nlow ? warp * S::kWarpStage : high + (warp - nlow) * S::kWarpStage);
  const uint8_t* lsrc = p.pages + p.layer_offset + static_cast<int64_t>(kvh) * kbytes + lane * 16;
  // Kcodes[H][32][Mk] then Vcodes[H][32][kVSubs] (docs/kv_formats.md)
  const int64_t dv = static_cast<int64_t>(p.num_kv_heads) * kbytes + static_cast<int64_t>(kvh) * (S::kVCodes - kbytes);
  return WarpPages<S>{p, table, npages, lane, wst, lsrc, dv, kbytes};
}

// per-lane constants of the page loop. scores: step (o, j) reads word tig + 4 (o ^ u) of a
// token's k codes (kLean: tig + 4 o; D 64: word tig), byte (j + gid) & 3. values: slot j takes byte j ^ 2 u ^ th
// (kQuad: j ^ tig) of the token's word gid (D 64: byte 2 (gid & 1) + (j ^ th)
// of word gid / 2). DK 8: 16 key codes, as D 64's. DV 8: value chunk 4 gid + sg is half sg & 1 of
// sub-vector 2 gid + sg / 2, byte 2 (gid & 1) + sg / 2 of word gid / 2. the prmt selector puts
// that byte at bits 8..15 of the address, the constant's bytes 0 and 2 (m * 8 and the book's
// 64 KB page) around it.
template <class S = PageShape<128>>
struct LaneConsts {
  int gid, tig, u, th;  // lane = 4 gid + tig, u = gid / 4, th = tig / 2
  uint32_t kmoff[S::kO][4], ksel[4], vmoff[S::kSlots], vsel[S::kSlots];
  uint32_t e0, e1;  // E: k = 2 tig + {0, 1} -> cols 0, 1, k = 2 tig + 8 + {0, 1} -> cols 2, 3
  uint32_t plo, phi;  // values: lanes tig >= 2 load tokens tb + 1 / tb + 9 first
  int ha;      // merge: lanes tig < 2 hold heads ha, ha + 1
  int my_tok;  // scores: lanes tig < 2 hold token 16 t + my_tok
  int mk, xl;  // S::kVarK: key codes a token; lanes tig < xl gather the extra step
  uint32_t xoff[4];  // S::kVarK at head_dim 128: extra lut entry (4 tig + (j + gid) & 3) of code 0
};
// lut_hi: window address bits 16.. of the lut (Cv is the next 64 KB page).
// xlut: window address of the extra lut (S::kVarK at head_dim 128).
template <ValueGather kG, class S = PageShape<128>, bool kLean = false>
__device__ __forceinline__ LaneConsts<S> MakeLaneConsts(int gid, int tig, uint32_t lut_hi, int mk = S::kMaxKCodes,
                                                      uint32_t xlut = 0) {
  static_assert(kG == ValueGather::kPlain || S::kDim == 128, "quad value gathers: head_dim 128 only");
  LaneConsts<S> c;
  const int u = gid >> 2, th = tig >> 1;
  c.gid = gid;
  c.tig = tig;
  c.u = u;
  c.th = th;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int bj = (j + gid) & 3;
    c.ksel[j] = 0x7604u | (bj << 4);
#pragma unroll
    for (int o = 0; o < S::kO; ++o) c.kmoff[o][j] = (4 * tig + (S::kO == 2 ? 16 * (kLean ? o : o ^ u) : 0) + bj) * 8 | lut_hi << 16;
    if constexpr (S::kDim == 128) {
      const int sg = kG == ValueGather::kQuad ? j ^ tig : j ^ (2 * u) ^ th;
      c.vsel[j] = 0x7604u | ((S::kDV == 8 ? 2 * (gid & 1) + (sg >> 1) : sg) << 4);
      c.vmoff[j] = (4 * gid + sg) * 8 | (lut_hi + 1) << 16;
    } else if (j < S::kSlots) {  // chunk 2 gid + sg: sub-vector gid at DV 8
      const int sg = j ^ th;
      c.vsel[j] = 0x7604u | ((S::kDV == 8 ? gid & 3 : 2 * (gid & 1) + sg) << 4);
      c.vmoff[j] = (2 * gid + sg) * 8 | (lut_hi + 1) << 16;
    }
  }
  c.e0 = (gid == 0 ? 0x3C00u : 0u) | (gid == 1 ? 0x3C000000u : 0u);
  c.e1 = (gid == 2 ? 0x3C00u : 0u) | (gid == 3 ? 0x3C000000u : 0u);
  c.plo = th ? 0x1054u : 0x5410u;
  c.phi = th ? 0x3276u : 0x7632u;
  c.ha = 2 * (tig & 1);
  c.my_tok = gid + 8 * (tig & 1);
  c.mk = mk;
  c.xl = (mk - S::kKSubs + 3) / 4;
#pragma unroll
  for (int j = 0; j < 4; ++j) c.xoff[j] = xlut + (4 * tig + ((j + gid) & 3)) * 8;
  if constexpr (kLean) {  // opaque: kept in registers, not recomputed in the page loop
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      Pin(&c.ksel[j]);
      Pin(&c.kmoff[0][j]);
      if (j < S::kSlots) {
        Pin(&c.vsel[j]);
        Pin(&c.vmoff[j]);
      }
    }
    Pin(&c.e0);
    Pin(&c.e1);
    Pin(reinterpret_cast<uint32_t*>(&c.my_tok));
  }
  return c;
}

// one warp's partial: O^T fragments acc[m-tile][c] and the softmax state of heads 0..3 (the
// same in every lane).
template <int D = 128>
struct WarpPartial {
  static constexpr int kTiles = 2 * PageShape<D>::kSlots;
  float acc[kTiles][4];
  float m_run[4], l_run[4];
  __device__ __forceinline__ void Init() {
#pragma unroll
    for (int i = 0; i < kTiles; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      m_run[h] = -INFINITY;
      l_run[h] = 0.0f;
    }
  }
};

// kLean: the lean page loop, the same sums with fewer instructions (the loop's sass, rare
// paths included: 531 instructions instead of 587; no lane constant is recomputed per page):
//  - the lazy max: the running max m of a head moves only when some score of the page is above
//    m + kLeanSlack (one vote; the exact page max, the l and acc rescale then run as before),
//    so most pages skip the max exchange. probabilities then reach 2^kLeanSlack: fp16 holds
//    them (<= 65504) with the same relative precision.
//  - lane constants pinned in registers (Pin), score step o as an lds offset (its code words
//    are read as word tig + 4 o: 2-way conflicts on those 8 loads a page, cheaper than the 8
//    selects that avoid them), zero score accumulators (lanes tig >= 2 keep zeros;
//    their probabilities are never stored and their l is dropped in MergeBlock).
//  - probabilities stored as half2 of tokens (q, q + 16); the value k-steps take tokens 8 kv ..
//    + 7 and 8 kv + 16 .. + 23, so the code word loads need no token swap.
inline constexpr float kLeanSlack = 8.0f;

// acc *= alpha of its heads (lanes tig even: heads 0, 1; odd: 2, 3), unless every alpha is 1
// (warp-uniform).
template <int D>
__device__ __forceinline__ void RescaleAcc(const float (&alpha)[4], bool odd, WarpPartial<D>* w) {
  if (alpha[0] != 1.0f || alpha[1] != 1.0f || alpha[2] != 1.0f || alpha[3] != 1.0f) {
    const float a0 = odd ? alpha[2] : alpha[0], a1 = odd ? alpha[3] : alpha[1];
#pragma unroll
    for (int mi = 0; mi < WarpPartial<D>::kTiles; ++mi) {
      w->acc[mi][0] *= a0;
      w->acc[mi][1] *= a1;
      w->acc[mi][2] *= a0;
      w->acc[mi][3] *= a1;
    }
  }
}

// 4 code bytes at any byte offset of shared memory (rows of Mk bytes): two aligned loads and a
// funnel shift.
__device__ __forceinline__ uint32_t LoadCodeWord(const uint8_t* at) {
  const uint32_t mis = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(at)) & 3u;
  const uint32_t* w = reinterpret_cast<const uint32_t*>(at - mis);
  return __funnelshift_r(w[0], w[1], 8 * mis);
}

// ScorePage of S::kVarK (the lean loop's layout): token rows of c.mk bytes; steps o < kO gather
// codes 4 tig + 16 o + (0..3) as the D / 4-code shape does, the extra step codes D / 4 + 4 tig +
// (0..3) in lanes tig < c.xl: lut entries 16 .. 16 + 4 xl - 1 at head_dim 64, the extra lut's
// (code * 64 + entry * 8 at c.xoff) at 128; entries >= mk are zeros, so the byte of the next row
// that a word past a row's end holds adds nothing.
template <class S>
__device__ __forceinline__ void ScorePageVarK(const LaneConsts<S>& c, const uint8_t* kc, float (&s)[2][4]) {
  constexpr int kO = S::kO;
  uint32_t kw[2][2][kO + 1];  // [tile][token gid / gid + 8][step]
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const uint8_t* row = kc + (16 * t + 8 * r + c.gid) * c.mk + 4 * c.tig;
#pragma unroll
      for (int o = 0; o <= kO; ++o) kw[t][r][o] = LoadCodeWord(row + 16 * o);
    }
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int h = 0; h < 4; ++h) s[t][h] = 0.0f;
  const bool extra = c.tig < c.xl;
#pragma unroll
  for (int o = 0; o <= kO; ++o)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        uint2 ea = make_uint2(0u, 0u), eb = ea;
        if (o < kO || S::kDim == 64) {
          const uint32_t xa = EntryOffset(kw[t][0][o], c.kmoff[0][j], c.ksel[j]);
          const uint32_t xb = EntryOffset(kw[t][1][o], c.kmoff[0][j], c.ksel[j]);
          if (o == 0) {
            ea = Lds64(xa);
            eb = Lds64(xb);
          } else if (o < kO || extra) {  // entries 16 o on: 128 o bytes past step 0's
            ea = Lds64<128>(xa);
            eb = Lds64<128>(xb);
          }
        } else if (extra) {  // head_dim 128: the extra lut, code * 64 + entry * 8
          const int bj = (j + c.gid) & 3;
          ea = Lds64(c.xoff[j] + (__byte_perm(kw[t][0][o], 0u, 0x4440u | bj) << 6));
          eb = Lds64(c.xoff[j] + (__byte_perm(kw[t][1][o], 0u, 0x4440u | bj) << 6));
        }
        Mma16816(s[t], ea.x, ea.y, eb.x, eb.y, c.e0, c.e1);
      }
}

// a page's lut scores from its k codes kc [32 tokens][kSubs]: tile t = tokens 16 t .. + 15;
// after the 8 k-steps lanes tig < 2 hold heads 0..3 (s[t][h]) of token 16 t + my_tok. the
// books sit at the window pages that c's constants name.
template <class S = PageShape<128>, bool kLean = false>
__device__ __forceinline__ void ScorePage(const LaneConsts<S>& c, const uint8_t* kc,
                                          float (&s)[2][4]) {
  if constexpr (S::kVarK) {
    static_assert(kLean, "runtime key codes: the lean page loop");
    ScorePageVarK<S>(c, kc, s);
    return;
  }
  const int gid = c.gid, tig = c.tig, u = c.u;
  uint32_t kw[2][2][S::kO];  // [tile][token gid / gid + 8][o]
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int o = 0; o < S::kO; ++o)
        kw[t][r][o] = *reinterpret_cast<const uint32_t*>(kc + (16 * t + 8 * r + gid) * S::kKSubs + 4 * (tig + (S::kO == 2 ? 4 * (kLean ? o : o ^ u) : 0)));
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int h = 0; h < 4; ++h) s[t][h] = 0.0f;
  {
#pragma unroll
    for (int o = 0; o < S::kO; ++o)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          uint2 ea, eb;
          if constexpr (S::kKLanes < 4) {  // 8 key codes: lanes tig >= kKLanes add zeros
            ea = eb = make_uint2(0u, 0u);
            if (tig < S::kKLanes) {
              ea = Lds64(EntryOffset(kw[t][0][o], c.kmoff[0][j], c.ksel[j]));
              eb = Lds64(EntryOffset(kw[t][1][o], c.kmoff[0][j], c.ksel[j]));
            }
          } else if constexpr (kLean) {  // step o's sub-vectors are 16 o past step 0's: 128 o bytes
            const uint32_t xa = EntryOffset(kw[t][0][o], c.kmoff[0][j], c.ksel[j]);
            const uint32_t xb = EntryOffset(kw[t][1][o], c.kmoff[0][j], c.ksel[j]);
            ea = o ? Lds64<128>(xa) : Lds64(xa);  // o is unrolled: one of the two
            eb = o ? Lds64<128>(xb) : Lds64(xb);
          } else {
            ea = Lds64(EntryOffset(kw[t][0][o], c.kmoff[o][j], c.ksel[j]));
            eb = Lds64(EntryOffset(kw[t][1][o], c.kmoff[o][j], c.ksel[j]));
          }
          Mma16816(s[t], ea.x, ea.y, eb.x, eb.y, c.e0, c.e1);
        }
  }
}

// online softmax of a page's scores s (tokens ptok0 .. + 31, those >= t1 masked) into *w; the
// fp16 probabilities go over the page's k codes kc, which every lane has read by then.
template <class S = PageShape<128>, bool kLean = false>
__device__ __forceinline__ void SoftmaxPage(const LaneConsts<S>& c, float (&s)[2][4], uint8_t* kc, int ptok0,
                                            int t1, WarpPartial<S::kDim>* w) {
  const bool score_lane = c.th == 0, odd = c.tig & 1;
  // page max per head: own tokens, then the pair of lanes tig, tig ^ 1 splits the heads
  // (ha, ha + 1 stay), then the other lanes; then the other pair back from tig ^ 1. kLean
  // skips it when no score is above m_run + kLeanSlack (m_run is then finite: every page has
  // a token < t1).
  float mh[4], alpha[4], m_use[4];
  // kLean: lanes tig >= 2 keep their zeros (their probabilities are never stored and their
  // l_run is dropped in MergeBlock), and only the last page has tokens >= t1.
  if (!kLean || ptok0 + 32 > t1) {
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const bool ok = (kLean || score_lane) && ptok0 + 16 * t + c.my_tok < t1;
#pragma unroll
      for (int h = 0; h < 4; ++h) s[t][h] = ok ? s[t][h] : -INFINITY;
    }
  }
#pragma unroll
  for (int h = 0; h < 4; ++h) mh[h] = fmaxf(s[0][h], s[1][h]);
  bool exact = true;
  if constexpr (kLean) {
    bool grow = false;
#pragma unroll
    for (int h = 0; h < 4; ++h) grow |= mh[h] > w->m_run[h] + kLeanSlack;  // m_run -inf: any finite
    grow = grow && score_lane;
    exact = __any_sync(0xffffffffu, grow);
  }
  if (exact) {
    if constexpr (kLean) {
#pragma unroll
      for (int h = 0; h < 4; ++h) mh[h] = score_lane ? mh[h] : -INFINITY;
    }
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
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const float m_new = fmaxf(w->m_run[h], pm[h]);
      m_use[h] = m_new == -INFINITY ? 0.0f : m_new;
      alpha[h] = exp2f(w->m_run[h] - m_use[h]);
      w->m_run[h] = m_new;
    }
    if constexpr (kLean) {  // only an exact page moves m_run (to a finite max: m_use = m_run)
#pragma unroll
      for (int h = 0; h < 4; ++h) w->l_run[h] *= alpha[h];
      RescaleAcc(alpha, odd, w);
    }
  }
  __syncwarp();  // every lane has read its k codes: the probabilities reuse that space
  __half* pb = reinterpret_cast<__half*>(kc);  // [4 heads][kPRow tokens]
  uint32_t* pw = reinterpret_cast<uint32_t*>(kc);  // kLean: [4 heads][kPRow / 2] (tokens q, q + 16)
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const float mu = kLean ? w->m_run[h] : m_use[h];
    const float p0 = exp2f(s[0][h] - mu), p1 = exp2f(s[1][h] - mu);
    w->l_run[h] = kLean ? w->l_run[h] + (p0 + p1) : w->l_run[h] * alpha[h] + (p0 + p1);
    if (score_lane) {
      if constexpr (kLean) {
        pw[h * (kPRow / 2) + c.my_tok] = PackHalf2(p0, p1);
      } else {
        pb[h * kPRow + c.my_tok] = __float2half_rn(p0);
        pb[h * kPRow + 16 + c.my_tok] = __float2half_rn(p1);
      }
    }
  }
  if (!kLean) RescaleAcc(alpha, odd, w);
  __syncwarp();
}

// O^T += V^T . P of a page: P from kc (SoftmaxPage), v codes vc [32 tokens][kSubs].
// k-step kv = tokens kv * 16 .. + 15; lane k cols are tokens tb, tb + 1, tb + 8, tb + 9.
// kLean: k-step kv = tokens 8 kv .. + 7 and 8 kv + 16 .. + 23; lane k cols 2 tig + {0, 1} =
// tokens t0, t0 + 16 (t0 = 8 kv + tig), 2 tig + 8 + {0, 1} = t0 + 4, t0 + 20 (code word loads
// then see 4 distinct tokens mod 4 per group: no conflicts).
template <ValueGather kG, class S = PageShape<128>, bool kLean = false>
__device__ __forceinline__ void ValuePage(const LaneConsts<S>& c, const uint8_t* kc,
                                          const uint8_t* vc, WarpPartial<S::kDim>* w) {
  const int gid = c.gid, tig = c.tig, u = c.u, th = c.th;
  const bool pkeep = u == th;  // B col gid carries p only for the k lanes of its half
  const __half* pb = reinterpret_cast<const __half*>(kc);      // [4 heads][kPRow tokens]
  const uint32_t* pw = reinterpret_cast<const uint32_t*>(kc);  // kLean: [4 heads][kPRow / 2]
  {
    const uint32_t plo = kLean ? 0x5410u : c.plo, phi = kLean ? 0x7632u : c.phi;
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      const int tb = kv * 16 + 2 * tig, t0 = kv * 8 + tig;
      const uint32_t p0 = kLean ? pw[(gid & 3) * (kPRow / 2) + t0]
                                : *reinterpret_cast<const uint32_t*>(pb + (gid & 3) * kPRow + tb);
      const uint32_t p1 = kLean ? pw[(gid & 3) * (kPRow / 2) + t0 + 4]
                                : *reinterpret_cast<const uint32_t*>(pb + (gid & 3) * kPRow + tb + 8);
      const uint32_t b0 = pkeep ? p0 : 0u, b1 = pkeep ? p1 : 0u;
      const int vw = 4 * (gid * S::kVSubs / 32);  // the word of group gid's sub-vectors
      const int tk0 = kLean ? t0 : tb + th, tk1 = kLean ? t0 + 16 : tb + 1 - th;
      const int tk2 = kLean ? t0 + 4 : tb + 8 + th, tk3 = kLean ? t0 + 20 : tb + 9 - th;
      const uint32_t c0 = *reinterpret_cast<const uint32_t*>(vc + tk0 * S::kVSubs + vw);
      const uint32_t c1 = *reinterpret_cast<const uint32_t*>(vc + tk1 * S::kVSubs + vw);
      const uint32_t c2 = *reinterpret_cast<const uint32_t*>(vc + tk2 * S::kVSubs + vw);
      const uint32_t c3 = *reinterpret_cast<const uint32_t*>(vc + tk3 * S::kVSubs + vw);
      if constexpr (kG == ValueGather::kQuad) {
        // acc[sv] += A_sv . P_x + A_{sv ^ 2} . P_y, where P_x keeps the k of lanes tig = u (B
        // cols 4 u ..: lane tig 0 / 1's sub-vector 4 gid + sv / sv ^ 1) and P_y those of lanes
        // tig = u + 2 (their sub-vector at slot sv ^ 2 is the same). so each slot's A feeds
        // acc[sv] (P_x) and acc[sv ^ 2] (P_y).
        const bool kx = tig == u, ky = tig == u + 2;
        const uint32_t x0 = kx ? p0 : 0u, x1 = kx ? p1 : 0u, y0 = ky ? p0 : 0u, y1 = ky ? p1 : 0u;
#pragma unroll
        for (int sv = 0; sv < 4; ++sv) {
          const uint2 v0 = Lds64(EntryOffset(c0, c.vmoff[sv], c.vsel[sv]));
          const uint2 v1 = Lds64(EntryOffset(c1, c.vmoff[sv], c.vsel[sv]));
          const uint2 v2 = Lds64(EntryOffset(c2, c.vmoff[sv], c.vsel[sv]));
          const uint2 v3 = Lds64(EntryOffset(c3, c.vmoff[sv], c.vsel[sv]));
          const uint32_t a[2][4] = {  // [entry half .x / .y][A register]
              {__byte_perm(v0.x, v1.x, plo), __byte_perm(v0.x, v1.x, phi), __byte_perm(v2.x, v3.x, plo),
               __byte_perm(v2.x, v3.x, phi)},
              {__byte_perm(v0.y, v1.y, plo), __byte_perm(v0.y, v1.y, phi), __byte_perm(v2.y, v3.y, plo),
               __byte_perm(v2.y, v3.y, phi)}};
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            Mma16816(w->acc[2 * sv + e], a[e][0], a[e][1], a[e][2], a[e][3], x0, x1);
            Mma16816(w->acc[2 * (sv ^ 2) + e], a[e][0], a[e][1], a[e][2], a[e][3], y0, y1);
          }
        }
      } else {
#pragma unroll
        for (int sv = 0; sv < S::kSlots; ++sv) {
          const uint2 v0 = Lds64(EntryOffset(c0, c.vmoff[sv], c.vsel[sv]));
          const uint2 v1 = Lds64(EntryOffset(c1, c.vmoff[sv], c.vsel[sv]));
          const uint2 v2 = Lds64(EntryOffset(c2, c.vmoff[sv], c.vsel[sv]));
          const uint2 v3 = Lds64(EntryOffset(c3, c.vmoff[sv], c.vsel[sv]));
          Mma16816(w->acc[2 * sv], __byte_perm(v0.x, v1.x, plo), __byte_perm(v0.x, v1.x, phi),
                   __byte_perm(v2.x, v3.x, plo), __byte_perm(v2.x, v3.x, phi), b0, b1);
          Mma16816(w->acc[2 * sv + 1], __byte_perm(v0.y, v1.y, plo), __byte_perm(v0.y, v1.y, phi),
                   __byte_perm(v2.y, v3.y, plo), __byte_perm(v2.y, v3.y, phi), b0, b1);
        }
      }
    }
  }
}

// one page of the warp: lut scores of tokens ptok0 .. + 31 (those >= t1 masked), online
// softmax into *w, O^T += V^T . P. kc, vc: the stage's k and v codes; kc is reused for the
// probabilities.
template <ValueGather kG, class S = PageShape<128>, bool kLean = false>
__device__ __forceinline__ void AttendPage(const DecodeAttentionParams& p, const LaneConsts<S>& c, uint8_t* kc,
                                           const uint8_t* vc, int ptok0, int t1, WarpPartial<S::kDim>* w) {
  float s[2][4];
  ScorePage<S, kLean>(c, kc, s);
  SoftmaxPage<S, kLean>(c, s, kc, ptok0, t1, w);
  ValuePage<kG, S, kLean>(c, kc, vc, w);
}

}  // namespace vqserve::cuda::vq_mma

#endif  // VQSERVE_KERNELS_CUDA_DECODE_VECINFER_MMA_PAGE_CUH_
