#ifndef VQSERVE_KERNELS_CUDA_COMMON_DENSE_ATTENTION_CUH_
#define VQSERVE_KERNELS_CUDA_COMMON_DENSE_ATTENTION_CUH_

// attention of one block's query heads over a token range whose keys and values a "source"
// hands out element-wise (fp16 pages, kivi pages, the fp16 residual ring). online softmax in
// chunks of 64 tokens; the block's partial result goes to one workspace slot.

#include "kernels/cuda/decode/decode_attention_common.cuh"

namespace vqserve::cuda {

// fp16 page slices: K[H][32][D] then V[H][32][D].
template <int D>
struct Fp16PageSource {
  const uint8_t* base;  // pages + layer_offset
  int64_t page_stride;
  const int32_t* table;
  int num_kv_heads, kvh;
  __device__ const __half* Row(int t, bool value) const {
    const __half* slice = reinterpret_cast<const __half*>(base + table[t >> 5] * page_stride);
    const int64_t head_rows = static_cast<int64_t>(value ? num_kv_heads + kvh : kvh) * 32;
    return slice + (head_rows + (t & 31)) * D;
  }
  // k[0 .. N) = key dims d0 .. d0+N of token t.
  template <int N>
  __device__ void LoadK(int t, int d0, float* k) const {
    const __half* r = Row(t, false) + d0;
#pragma unroll
    for (int i = 0; i < N; i += 2) {
      float2 f = Half2BitsToFloat2(*reinterpret_cast<const uint32_t*>(r + i));
      k[i] = f.x;
      k[i + 1] = f.y;
    }
  }
  // value dims d0, d0+1 of token t.
  __device__ float2 LoadV2(int t, int d0) const {
    return Half2BitsToFloat2(*reinterpret_cast<const uint32_t*>(Row(t, true) + d0));
  }
};

// the fp16 residual ring of one sequence and kv head; token t is residual token t.
struct RingSource {
  const uint16_t* k;  // already offset to (slot, kv head)
  const uint16_t* v;
  int64_t token_stride;
  int ring, first;  // index of residual token t = (first + t) % ring
  __device__ int64_t Off(int t) const { return static_cast<int64_t>((first + t) % ring) * token_stride; }
  template <int N>
  __device__ void LoadK(int t, int d0, float* out) const {
    const uint16_t* r = k + Off(t) + d0;
#pragma unroll
    for (int i = 0; i < N; i += 2) {
      float2 f = Half2BitsToFloat2(*reinterpret_cast<const uint32_t*>(r + i));
      out[i] = f.x;
      out[i + 1] = f.y;
    }
  }
  __device__ float2 LoadV2(int t, int d0) const {
    return Half2BitsToFloat2(*reinterpret_cast<const uint32_t*>(v + Off(t) + d0));
  }
};

// kivi page slices (docs/kv_formats.md): Kmin[H][D], Kscale[H][D], Vmin[H][32][D/32],
// Vscale[H][32][D/32] fp16, then K codes [H][D][32] and V codes [H][32][D], `bits` bits each,
// little-endian packed.
template <int D>
struct KiviPageSource {
  const uint8_t* base;
  int64_t page_stride;
  const int32_t* table;
  int num_kv_heads, kvh, bits;
  __device__ const uint8_t* Slice(int t) const { return base + table[t >> 5] * page_stride; }
  __device__ static float Hf(const uint8_t* p, int64_t byte_off, int64_t i) {
    return __half2float(reinterpret_cast<const __half*>(p + byte_off)[i]);
  }
  __device__ static int Code(const uint8_t* codes, int i, int bits) {
    const int bit = i * bits;
    return (codes[bit >> 3] >> (bit & 7)) & ((1 << bits) - 1);
  }
  template <int N>
  __device__ void LoadK(int t, int d0, float* out) const {
    const uint8_t* s = Slice(t);
    const int H = num_kv_heads, tt = t & 31, ng = D / 32;
    const int64_t kscale = 2 * H * D, kcode = 4 * H * D + 4 * H * 32 * ng;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int c = kvh * D + d0 + i;
      const int code = Code(s + kcode + static_cast<int64_t>(c) * 32 * bits / 8, tt, bits);
      out[i] = Hf(s, 0, c) + Hf(s, kscale, c) * static_cast<float>(code);
    }
  }
  __device__ float2 LoadV2(int t, int d0) const {
    const uint8_t* s = Slice(t);
    const int H = num_kv_heads, tt = t & 31, ng = D / 32;
    const int64_t vmin = 4 * H * D, vscale = vmin + 2 * H * 32 * ng;
    const int64_t vcode = vscale + 2 * H * 32 * ng + static_cast<int64_t>(H) * D * 32 * bits / 8;
    const int64_t at = (static_cast<int64_t>(kvh) * 32 + tt) * ng + d0 / 32;
    const float mn = Hf(s, vmin, at), sc = Hf(s, vscale, at);
    const uint8_t* codes = s + vcode + (static_cast<int64_t>(kvh) * 32 + tt) * D * bits / 8;
    return make_float2(mn + sc * static_cast<float>(Code(codes, d0, bits)),
                       mn + sc * static_cast<float>(Code(codes, d0 + 1, bits)));
  }
};

// shared memory of DenseAttendRange, in floats.
template <int D, int HBP, int NT = kDecodeThreads>
struct DenseSmem {
  static constexpr int kChunk = 64;             // tokens per softmax step
  static constexpr int kGroups = NT / (D / 2);  // token groups in the value phase
  static constexpr int kMain = (2 * HBP * kChunk > kGroups * HBP * D) ? 2 * HBP * kChunk
                                                                        : kGroups * HBP * D;
  static constexpr int kFloats = kMain + 3 * HBP;
};

// folds tokens [t_begin, t_end) (t_begin < t_end) of `src` into the partial result of query
// heads h0 .. h0+hb-1 of sequence b and writes it to workspace slot `slot`.
// q (b, h0 + h, :) (of `queries`, laid out as p.q; null: p.q) is read pre-scaled; smem:
// DenseSmem<D, HBP, NT>::kFloats floats; NT threads.
template <int D, int HBP, class Src, int NT = kDecodeThreads>
__device__ void DenseAttendRange(const DecodeAttentionParams& p, const Src& src, int b, int h0,
                                 int hb, int t_begin, int t_end, int slot, float* smem,
                                 const float* queries = nullptr) {
  using S = DenseSmem<D, HBP, NT>;
  constexpr int kWarps = NT / 32;
  constexpr int kChunk = S::kChunk, kDpl = D / 32, kTpw = kChunk / kWarps;
  constexpr int kGroups = S::kGroups, kTpg = kChunk / kGroups;
  float* s_sm = smem;                    // [HBP][kChunk] scores
  float* p_sm = smem + HBP * kChunk;     // [kChunk][HBP] probabilities
  float* red = smem;                     // [kGroups][HBP][D] after the loop
  float* alpha_sm = smem + S::kMain;     // [HBP]
  float* m_sm = alpha_sm + HBP;          // [HBP]
  float* l_sm = m_sm + HBP;              // [HBP]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int dp = tid % (D / 2), tg = tid / (D / 2);

  float qr[HBP][kDpl];
#pragma unroll
  for (int h = 0; h < HBP; ++h) {
    const float* q = (queries != nullptr ? queries : p.q) + b * p.q_batch_stride +
                     (h0 + min(h, hb - 1)) * p.q_head_stride;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) qr[h][i] = h < hb ? q[lane * kDpl + i] * p.scale : 0.0f;
  }
  float m_run = -INFINITY, l_run = 0.0f;
  float acc[HBP][2];
#pragma unroll
  for (int h = 0; h < HBP; ++h) acc[h][0] = acc[h][1] = 0.0f;

  for (int c0 = t_begin; c0 < t_end; c0 += kChunk) {
    // scores: warp w takes tokens c0 + w + kWarps j, each lane kDpl dims.
    float kr[kTpw][kDpl];
#pragma unroll
    for (int j = 0; j < kTpw; ++j) {
      const int t = c0 + warp + kWarps * j;
      if (t < t_end) {
        src.template LoadK<kDpl>(t, lane * kDpl, kr[j]);
      } else {
#pragma unroll
        for (int i = 0; i < kDpl; ++i) kr[j][i] = 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < kTpw; ++j) {
      const bool valid = c0 + warp + kWarps * j < t_end;
#pragma unroll
      for (int h = 0; h < HBP; ++h) {
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < kDpl; ++i) d += qr[h][i] * kr[j][i];
        d = WarpSum(d);
        if (lane == 0) s_sm[h * kChunk + warp + kWarps * j] = valid ? d : -INFINITY;
      }
    }
    __syncthreads();
    // online softmax: warp h owns head h.
    if (warp < HBP) {
      const int h = warp;
      float sv[kChunk / 32];
      float cmax = -INFINITY;
#pragma unroll
      for (int i = 0; i < kChunk / 32; ++i) {
        sv[i] = s_sm[h * kChunk + lane + 32 * i];
        cmax = fmaxf(cmax, sv[i]);
      }
      cmax = WarpMax(cmax);
      const float m_new = fmaxf(m_run, cmax);
      const float alpha = m_run == -INFINITY ? 0.0f : __expf(m_run - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kChunk / 32; ++i) {
        const float pv = h < hb ? __expf(sv[i] - m_new) : 0.0f;
        p_sm[(lane + 32 * i) * HBP + h] = pv;
        sum += pv;
      }
      sum = WarpSum(sum);
      l_run = l_run * alpha + sum;
      m_run = m_new;
      if (lane == 0) alpha_sm[h] = alpha;
    }
    __syncthreads();
    // values: thread (tg, dp) owns dims 2dp, 2dp+1 of tokens c0 + tg + kGroups * j.
#pragma unroll
    for (int h = 0; h < HBP; ++h) {
      acc[h][0] *= alpha_sm[h];
      acc[h][1] *= alpha_sm[h];
    }
    float2 vr[kTpg];
#pragma unroll
    for (int j = 0; j < kTpg; ++j) {
      const int t = c0 + tg + kGroups * j;
      vr[j] = t < t_end ? src.LoadV2(t, 2 * dp) : make_float2(0.0f, 0.0f);
    }
#pragma unroll
    for (int j = 0; j < kTpg; ++j) {
      const float* pj = p_sm + (tg + kGroups * j) * HBP;
#pragma unroll
      for (int h = 0; h < HBP; ++h) {
        acc[h][0] += pj[h] * vr[j].x;
        acc[h][1] += pj[h] * vr[j].y;
      }
    }
    __syncthreads();
  }
  if (warp < HBP && lane == 0) {
    m_sm[warp] = m_run;
    l_sm[warp] = l_run;
  }
#pragma unroll
  for (int h = 0; h < HBP; ++h) {
    red[(tg * HBP + h) * D + 2 * dp] = acc[h][0];
    red[(tg * HBP + h) * D + 2 * dp + 1] = acc[h][1];
  }
  __syncthreads();
  for (int i = tid; i < hb * D; i += NT) {
    const int h = i / D, d = i % D;
    float s = 0.0f;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) s += red[(g * HBP + h) * D + d];
    PartialAcc(p, b, h0 + h, slot)[d] = s;
  }
  if (tid < hb) *PartialMl(p, b, h0 + tid, slot) = make_float2(m_sm[tid], l_sm[tid]);
}

// the attention sink (fp16 rows, tokens t < n_sink) followed by the residual ring (token
// n_sink + i is residual token i) of one sequence and kv head.
struct SinkRingSource {
  RingSource ring;
  const uint16_t* k;  // sink rows, already offset to (slot, kv head)
  const uint16_t* v;
  int64_t token_stride;
  int n_sink;
  template <int N>
  __device__ void LoadK(int t, int d0, float* out) const {
    if (t >= n_sink) {
      ring.template LoadK<N>(t - n_sink, d0, out);
      return;
    }
    const uint16_t* r = k + t * token_stride + d0;
#pragma unroll
    for (int i = 0; i < N; i += 2) {
      float2 f = Half2BitsToFloat2(*reinterpret_cast<const uint32_t*>(r + i));
      out[i] = f.x;
      out[i + 1] = f.y;
    }
  }
  __device__ float2 LoadV2(int t, int d0) const {
    if (t >= n_sink) return ring.LoadV2(t - n_sink, d0);
    return Half2BitsToFloat2(*reinterpret_cast<const uint32_t*>(v + t * token_stride + d0));
  }
};

// the residual ring of sequence b, after its attention sink when p.sink_lens is set, as
// workspace slot `slot` (empty when both hold no tokens).
template <int D, int HBP, int NT = kDecodeThreads>
__device__ void ResidualPartial(const DecodeAttentionParams& p, int b, int kvh, int h0, int hb,
                                int slot, float* smem) {
  const int n_ring = p.res_lens != nullptr ? p.res_lens[b] : 0;
  const int n_sink = p.sink_lens != nullptr ? p.sink_lens[b] : 0;
  if (n_ring + n_sink <= 0) {
    WriteEmptyPartial(p, b, h0, hb, slot);
    return;
  }
  const int64_t off = p.slots[b] * p.res_slot_stride + kvh * p.res_head_stride;
  RingSource ring{p.res_k + off, p.res_v + off, p.res_token_stride, p.res_ring_tokens,
                  (p.coded_lens[b] + n_sink) % p.res_ring_tokens};
  if (n_sink == 0) {
    DenseAttendRange<D, HBP, RingSource, NT>(p, ring, b, h0, hb, 0, n_ring, slot, smem);
    return;
  }
  const int64_t soff = p.slots[b] * p.sink_slot_stride + kvh * p.res_head_stride;
  SinkRingSource src{ring, p.sink_k + soff, p.sink_v + soff, p.res_token_stride, n_sink};
  DenseAttendRange<D, HBP, SinkRingSource, NT>(p, src, b, h0, hb, 0, n_sink + n_ring, slot, smem);
}

// the start of a split-kv decode block of split `split` (grid (splits + 1, kv heads x head
// groups, batch), blockIdx.x = split unless blocks cluster): sets *kvh, *h0 and the split's coded
// tokens [*t0, *t1) of sequence blockIdx.z; false when the block is done: split == num_splits
// folded the sink + residual ring (ResidualPartial, NT threads, smem), or the split holds no
// tokens (an empty partial written).
template <int D, int HBP, int NT = kDecodeThreads>
__device__ inline bool BeginSplitBlock(const DecodeAttentionParams& p, int hb, int num_splits, int split,
                                       float* smem, int* kvh, int* h0, int* t0, int* t1) {
  const int b = blockIdx.z;
  BlockHeads(p, hb, kvh, h0);
  if (split == num_splits) {
    ResidualPartial<D, HBP, NT>(p, b, *kvh, *h0, hb, split, smem);
    return false;
  }
  SplitRange(p.coded_lens[b], num_splits, split, t0, t1);
  if (*t0 >= *t1) {
    WriteEmptyPartial(p, b, *h0, hb, split);
    return false;
  }
  return true;
}

// the block of an element-wise decode kernel (grid (splits + 1, kv heads x head groups,
// batch)): block x == num_splits folds the sink and the residual ring against p.q; block x <
// num_splits its split of the coded pages, the source make_source(b, kvh) hands out, against
// `queries` (null: p.q). smem: DenseSmem<D, HBP>::kFloats floats.
template <int D, int HBP, class MakeSource>
__device__ void DenseDecodeBlock(const DecodeAttentionParams& p, int hb, int num_splits,
                                 float* smem, const MakeSource& make_source,
                                 const float* queries = nullptr) {
  const int b = blockIdx.z, split = blockIdx.x;
  int kvh, h0, t0, t1;
  if (!BeginSplitBlock<D, HBP>(p, hb, num_splits, split, smem, &kvh, &h0, &t0, &t1)) return;
  DenseAttendRange<D, HBP>(p, make_source(b, kvh), b, h0, hb, t0, t1, split, smem, queries);
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_COMMON_DENSE_ATTENTION_CUH_
