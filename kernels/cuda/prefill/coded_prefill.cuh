#ifndef VQSERVE_KERNELS_CUDA_PREFILL_CODED_PREFILL_CUH_
#define VQSERVE_KERNELS_CUDA_PREFILL_CODED_PREFILL_CUH_

// causal attention of a multi-token step over a coded paged cache with the cpu cache's rule
// (runtime/kv/paged_kv_cache.h): the query at position p sees positions below
// in_pages = CodedTokens(p + 1) as codes, except the attention sink (positions below
// min(sink_tokens, in_pages), fp16 sink rows), and positions in_pages .. p in fp16 (the ring
// before this step's append, or the step's own rows) -- exactly as if the tokens had been
// decoded one at a time. the codec comes in as a Reader:
//   __device__ void Token(const uint8_t* slice, int kvh, int jj, const float* qc, int lane,
//                         int per, float* dot, float* vals) const;
// token jj of the page layer slice: *dot = this lane's part of <qc, key> over dims
// lane + 32 e (e < per), vals[e] = the value's dim lane + 32 e. a reader with
// `static constexpr bool kTakesPosition = true` gets the token's absolute position instead of
// jj (its page index is position % page_tokens): codes whose keys rotate with it (commvq).

#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/kv_step/paged_kv_step.h"

namespace vqserve::cuda {

inline constexpr int kPrefillWarps = 4;       // warps per block, one (token, head) each
inline constexpr int kPrefillMaxPerLane = 4;  // head_dim <= 128

__device__ inline float PrefillHalfBits(uint16_t b) { return __half2float(__ushort_as_half(b)); }
__device__ inline float PrefillRoundHalf(float x) { return __half2float(__float2half_rn(x)); }

// whether a Reader takes absolute positions (Reader::kTakesPosition, see above).
template <class Reader, class = void>
struct ReaderTakesPosition : std::false_type {};
template <class Reader>
struct ReaderTakesPosition<Reader, std::void_t<decltype(Reader::kTakesPosition)>>
    : std::bool_constant<Reader::kTakesPosition> {};

// CodedTokens() of runtime/kv/kv_cache.h.
__device__ inline int CodedTokensDev(int residual, int page, int n) {
  return n < residual + page ? 0 : ((n - residual) / page) * page;
}

// grid (ceil(num_tokens * num_heads / kPrefillWarps)), kPrefillWarps * 32 threads. q: the
// queries for fp16 keys, qc: those the reader dots with codes (same layout, rows at
// + t * q_stride); knew, vnew: the step's rows; out rows at + t * out_stride. online softmax
// in fp32, lane l holding dims l, l + 32, ...
template <class Reader>
__global__ void CodedPrefillKernel(const PagedKvStep s, const Reader rd, int residual,
                                   const float* q, const float* qc, int64_t q_stride,
                                   const float* knew, const float* vnew, int64_t kv_stride,
                                   const int32_t* seq_tok_start, float* out, int64_t out_stride,
                                   int num_heads, float scale) {
  const int warp = blockIdx.x * kPrefillWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= s.num_tokens * num_heads) return;
  const int t = warp / num_heads, h = warp % num_heads;
  const int b = s.tok_seq[t], pos = s.tok_pos[t];
  const int D = s.head_dim, per = D / 32, H = s.num_kv_heads, P = s.page_tokens;
  const int kvh = h / (num_heads / H);
  float qv[kPrefillMaxPerLane], qcv[kPrefillMaxPerLane], acc[kPrefillMaxPerLane];
  for (int e = 0; e < per; ++e) {
    const int64_t i = t * q_stride + static_cast<int64_t>(h) * D + lane + 32 * e;
    qv[e] = q[i] * scale;
    qcv[e] = qc[i] * scale;
    acc[e] = 0.0f;
  }
  const int32_t* table = s.block_tables + b * s.block_table_stride;
  float m = -INFINITY, l = 0.0f;
  auto fold = [&](float dot, const float* vals) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    const float m_new = fmaxf(m, dot);
    const float corr = expf(m - m_new), w = expf(dot - m_new);
    l = l * corr + w;
    for (int e = 0; e < per; ++e) acc[e] = acc[e] * corr + w * vals[e];
    m = m_new;
  };
  // fp16 row r (H * D halves) of kv head kvh.
  auto fold_half = [&](const uint16_t* kr, const uint16_t* vr) {
    float dot = 0.0f, vals[kPrefillMaxPerLane];
    for (int e = 0; e < per; ++e) {
      dot += qv[e] * PrefillHalfBits(kr[lane + 32 * e]);
      vals[e] = PrefillHalfBits(vr[lane + 32 * e]);
    }
    fold(dot, vals);
  };
  const int row = H * D;
  const int in_pages = CodedTokensDev(residual, P, pos + 1);
  const int in_sink = min(s.sink_tokens, in_pages);
  // sink: positions [0, in_sink) in fp16.
  for (int j = 0; j < in_sink; ++j) {
    const int64_t r = s.slots[b] * s.sink_slot_stride + static_cast<int64_t>(j) * row + kvh * D;
    fold_half(s.sink_k + r, s.sink_v + r);
  }
  // codes: positions [in_sink, in_pages).
  for (int j = in_sink; j < in_pages; ++j) {
    const uint8_t* slice = s.pages + table[j / P] * s.page_stride + s.layer_offset;
    float dot = 0.0f, vals[kPrefillMaxPerLane];
    if constexpr (ReaderTakesPosition<Reader>::value) {
      rd.Token(slice, kvh, j, qcv, lane, per, &dot, vals);
    } else {
      rd.Token(slice, kvh, j % P, qcv, lane, per, &dot, vals);
    }
    fold(dot, vals);
  }
  // fp16: positions [in_pages, pos], from the ring or from the step's new rows.
  const int cached = s.num_cached[b];
  const uint16_t* ring_k = s.ring_k + s.slots[b] * s.ring_slot_stride + kvh * D;
  const uint16_t* ring_v = s.ring_v + s.slots[b] * s.ring_slot_stride + kvh * D;
  for (int j = in_pages; j <= pos; ++j) {
    if (j < cached) {
      const int64_t r = static_cast<int64_t>(j % s.ring_tokens) * row;
      fold_half(ring_k + r, ring_v + r);
    } else {
      const int64_t r = static_cast<int64_t>(seq_tok_start[b] + j - cached) * kv_stride + kvh * D;
      float dot = 0.0f, vals[kPrefillMaxPerLane];
      for (int e = 0; e < per; ++e) {
        dot += qv[e] * PrefillRoundHalf(knew[r + lane + 32 * e]);
        vals[e] = PrefillRoundHalf(vnew[r + lane + 32 * e]);
      }
      fold(dot, vals);
    }
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int e = 0; e < per; ++e) out[t * out_stride + h * D + lane + 32 * e] = acc[e] * inv;
}

// launches CodedPrefillKernel<Reader>; the launcher checks shapes first.
template <class Reader>
void LaunchCodedPrefill(const PagedKvStep& step, const Reader& rd, int residual, const float* q,
                        const float* qc, int64_t q_stride, const float* k, const float* v,
                        int64_t kv_stride, const int32_t* seq_tok_start, float* out,
                        int64_t out_stride, int num_heads, float scale, cudaStream_t stream) {
  const int64_t warps = static_cast<int64_t>(step.num_tokens) * num_heads;
  if (warps <= 0) return;
  const int blocks = static_cast<int>((warps + kPrefillWarps - 1) / kPrefillWarps);
  CodedPrefillKernel<Reader><<<blocks, kPrefillWarps * 32, 0, stream>>>(
      step, rd, residual, q, qc, q_stride, k, v, kv_stride, seq_tok_start, out, out_stride,
      num_heads, scale);
}

// "" when the step's shape suits CodedPrefillKernel, else what is wrong (prefixed by `who`).
inline std::string CodedPrefillShapeError(const PagedKvStep& step, int num_heads,
                                          const char* who) {
  if (step.head_dim % 32 != 0 || step.head_dim > 32 * kPrefillMaxPerLane) {
    return std::string(who) + ": head_dim must be a multiple of 32 and at most 128";
  }
  if (step.num_kv_heads <= 0 || num_heads % step.num_kv_heads != 0) {
    return std::string(who) + ": num_heads must be a multiple of num_kv_heads";
  }
  if (step.sink_tokens > 0 && (step.sink_k == nullptr || step.sink_v == nullptr)) {
    return std::string(who) + ": a sink needs sink rows";
  }
  return "";
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_PREFILL_CODED_PREFILL_CUH_
