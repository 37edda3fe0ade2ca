// vecinfer ring appends, flush gathers, query transform and multi-token attention (see
// vecinfer_kv_step.h).
#include "kernels/cuda/vecinfer_kv_step.h"

#include <cuda_fp16.h>

#include "kernels/cuda/cuda_check.h"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = 4;       // prefill: warps per block, one (token, head) each
constexpr int kMaxPerLane = 4;  // head_dim <= 128

__device__ inline float HalfBits(uint16_t b) { return __half2float(__ushort_as_half(b)); }
__device__ inline uint16_t ToHalfBits(float x) { return __half_as_ushort(__float2half_rn(x)); }
__device__ inline float RoundHalf(float x) { return __half2float(__float2half_rn(x)); }

// CodedTokens() of runtime/kv_cache.h.
__device__ inline int CodedTokensDev(int residual, int page, int n) {
  return n < residual + page ? 0 : ((n - residual) / page) * page;
}

// grid (num_tokens), kThreads threads over the H * D elements of a row.
__global__ void RingAppendKernel(const PagedKvStep s, const float* k, const float* v,
                                 int64_t token_stride) {
  const int t = blockIdx.x, b = s.tok_seq[t], pos = s.tok_pos[t];
  if (pos < s.coded_after[b]) return;
  const int row = s.num_kv_heads * s.head_dim;
  const int64_t dst = s.slots[b] * s.ring_slot_stride + static_cast<int64_t>(pos % s.ring_tokens) * row;
  for (int i = threadIdx.x; i < row; i += kThreads) {
    s.ring_k[dst + i] = ToHalfBits(k[t * token_stride + i]);
    s.ring_v[dst + i] = ToHalfBits(v[t * token_stride + i]);
  }
}

// grid (count, page_tokens), kThreads threads over the H * D elements of a row.
__global__ void GatherFlushKernel(const PagedKvStep s, const int32_t* flush, const float* k,
                                  const float* v, int64_t token_stride, float* out_k,
                                  float* out_v) {
  const int f = blockIdx.x, tt = blockIdx.y;
  const int b = flush[3 * f], pos = flush[3 * f + 1] + tt, tok0 = flush[3 * f + 2];
  const int row = s.num_kv_heads * s.head_dim;
  const int64_t o = (static_cast<int64_t>(f) * s.page_tokens + tt) * row;
  if (pos < s.num_cached[b]) {
    const int64_t r = s.slots[b] * s.ring_slot_stride + static_cast<int64_t>(pos % s.ring_tokens) * row;
    for (int i = threadIdx.x; i < row; i += kThreads) {
      out_k[o + i] = HalfBits(s.ring_k[r + i]);
      out_v[o + i] = HalfBits(s.ring_v[r + i]);
    }
  } else {
    const int64_t r = static_cast<int64_t>(tok0 + pos - s.num_cached[b]) * token_stride;
    for (int i = threadIdx.x; i < row; i += kThreads) {
      out_k[o + i] = RoundHalf(k[r + i]);
      out_v[o + i] = RoundHalf(v[r + i]);
    }
  }
}

// grid (n, num_heads), kThreads threads; x: head_dim floats of dynamic smem.
__global__ void QueryTransformKernel(const float* q, int64_t q_stride, int num_heads, int group,
                                     int D, const VecInferLayerCodec c, float* out) {
  extern __shared__ float x[];
  const int t = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const float* lam = c.lambda + static_cast<int64_t>(h / group) * D;
  const int64_t base = t * q_stride + static_cast<int64_t>(h) * D;
  for (int i = tid; i < D; i += kThreads) x[i] = q[base + i] * lam[i];
  if (c.hadamard) {
    for (int len = 1; len < D; len <<= 1) {
      __syncthreads();
      for (int idx = tid; idx < D / 2; idx += kThreads) {
        const int i = (idx / len) * 2 * len + idx % len;
        const float a = x[i], bb = x[i + len];
        x[i] = a + bb;
        x[i + len] = a - bb;
      }
    }
  }
  __syncthreads();
  const float norm = c.hadamard ? rsqrtf(static_cast<float>(D)) : 1.0f;
  for (int i = tid; i < D; i += kThreads) out[base + i] = x[i] * norm;
}

// grid (ceil(num_tokens * num_heads / kWarps)), kWarps * 32 threads. lane l holds dims
// l, l + 32, ... of the queries, the accumulator and each key / value row; a coded key or value
// is read as its centroids' entries for those dims (codes only, no dequantized buffer).
__global__ void VecInferPrefillKernel(const PagedKvStep s, const VecInferLayerCodec c,
                                      int residual, const float* q, const float* qt,
                                      int64_t q_stride, const float* knew, const float* vnew,
                                      int64_t kv_stride, const int32_t* seq_tok_start, float* out,
                                      int64_t out_stride, int num_heads, float scale) {
  const int warp = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= s.num_tokens * num_heads) return;
  const int t = warp / num_heads, h = warp % num_heads;
  const int b = s.tok_seq[t], pos = s.tok_pos[t];
  const int D = s.head_dim, per = D / 32, H = s.num_kv_heads, P = s.page_tokens;
  const int kvh = h / (num_heads / H);
  const int dk = c.k_sub_dim, dv = c.v_sub_dim, mk = D / dk, mv = D / dv;
  float qv[kMaxPerLane], qtv[kMaxPerLane], acc[kMaxPerLane];
  for (int e = 0; e < per; ++e) {
    const int64_t i = t * q_stride + static_cast<int64_t>(h) * D + lane + 32 * e;
    qv[e] = q[i] * scale;
    qtv[e] = qt[i] * scale;
    acc[e] = 0.0f;
  }
  const float* ck = c.k_codebook + kvh * c.k_codebook_head_stride;
  const float* cv = c.v_codebook + kvh * c.v_codebook_head_stride;
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
  // codes: positions [0, CodedTokens(pos + 1)).
  const int in_pages = CodedTokensDev(residual, P, pos + 1);
  for (int j = 0; j < in_pages; ++j) {
    const uint8_t* slice = s.pages + table[j / P] * s.page_stride + s.layer_offset;
    const int jj = j % P;
    const uint8_t* kc = slice + (static_cast<int64_t>(kvh) * P + jj) * mk;
    const uint8_t* vc = slice + static_cast<int64_t>(H) * P * mk + (static_cast<int64_t>(kvh) * P + jj) * mv;
    float dot = 0.0f, vals[kMaxPerLane];
    for (int e = 0; e < per; ++e) {
      const int d = lane + 32 * e;
      const int km = d / dk, vm = d / dv;
      dot += qtv[e] * ck[(static_cast<int64_t>(km) * 256 + kc[km]) * dk + d % dk];
      vals[e] = cv[(static_cast<int64_t>(vm) * 256 + vc[vm]) * dv + d % dv];
    }
    fold(dot, vals);
  }
  // fp16: positions [in_pages, pos], from the ring or from the step's new rows.
  const int row = H * D, cached = s.num_cached[b];
  const uint16_t* ring_k = s.ring_k + s.slots[b] * s.ring_slot_stride + kvh * D;
  const uint16_t* ring_v = s.ring_v + s.slots[b] * s.ring_slot_stride + kvh * D;
  for (int j = in_pages; j <= pos; ++j) {
    float dot = 0.0f, vals[kMaxPerLane];
    if (j < cached) {
      const int64_t r = static_cast<int64_t>(j % s.ring_tokens) * row;
      for (int e = 0; e < per; ++e) {
        dot += qv[e] * HalfBits(ring_k[r + lane + 32 * e]);
        vals[e] = HalfBits(ring_v[r + lane + 32 * e]);
      }
    } else {
      const int64_t r = static_cast<int64_t>(seq_tok_start[b] + j - cached) * kv_stride + kvh * D;
      for (int e = 0; e < per; ++e) {
        dot += qv[e] * RoundHalf(knew[r + lane + 32 * e]);
        vals[e] = RoundHalf(vnew[r + lane + 32 * e]);
      }
    }
    fold(dot, vals);
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int e = 0; e < per; ++e) out[t * out_stride + h * D + lane + 32 * e] = acc[e] * inv;
}

}  // namespace

std::string LaunchRingAppend(const PagedKvStep& step, const float* k, const float* v,
                             int64_t token_stride, cudaStream_t stream) {
  if (step.num_tokens <= 0) return "";
  RingAppendKernel<<<step.num_tokens, kThreads, 0, stream>>>(step, k, v, token_stride);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchGatherFlushPages(const PagedKvStep& step, const int32_t* flush, int count,
                                   const float* k, const float* v, int64_t token_stride,
                                   float* out_k, float* out_v, cudaStream_t stream) {
  if (count <= 0) return "";
  GatherFlushKernel<<<dim3(count, step.page_tokens), kThreads, 0, stream>>>(
      step, flush, k, v, token_stride, out_k, out_v);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchVecInferQueryTransform(const float* q, int64_t q_stride, int n, int num_heads,
                                         int num_kv_heads, int head_dim,
                                         const VecInferLayerCodec& codec, float* out,
                                         cudaStream_t stream) {
  const int D = head_dim;
  if (D <= 0 || D > 256 || (D & (D - 1)) != 0) {
    return "vecinfer query transform: head_dim must be a power of two <= 256";
  }
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0) {
    return "vecinfer query transform: num_heads must be a multiple of num_kv_heads";
  }
  if (n <= 0) return "";
  QueryTransformKernel<<<dim3(n, num_heads), kThreads, D * sizeof(float), stream>>>(
      q, q_stride, num_heads, num_heads / num_kv_heads, D, codec, out);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchVecInferPrefillAttention(const PagedKvStep& step, const VecInferLayerCodec& codec,
                                           int residual_tokens, const float* q,
                                           const float* q_tilde, int64_t q_stride,
                                           const float* k, const float* v, int64_t kv_stride,
                                           const int32_t* seq_tok_start, float* out,
                                           int64_t out_stride, int num_heads, float scale,
                                           cudaStream_t stream) {
  if (step.head_dim % 32 != 0 || step.head_dim > 32 * kMaxPerLane) {
    return "vecinfer prefill attention: head_dim must be a multiple of 32 and at most 128";
  }
  if (step.num_kv_heads <= 0 || num_heads % step.num_kv_heads != 0) {
    return "vecinfer prefill attention: num_heads must be a multiple of num_kv_heads";
  }
  for (int d : {codec.k_sub_dim, codec.v_sub_dim}) {
    if (d != 2 && d != 4 && d != 8) return "vecinfer prefill attention: sub-vectors of 2, 4 or 8";
  }
  const int64_t warps = static_cast<int64_t>(step.num_tokens) * num_heads;
  if (warps <= 0) return "";
  const int blocks = static_cast<int>((warps + kWarps - 1) / kWarps);
  VecInferPrefillKernel<<<blocks, kWarps * 32, 0, stream>>>(step, codec, residual_tokens, q,
                                                            q_tilde, q_stride, k, v, kv_stride,
                                                            seq_tok_start, out, out_stride,
                                                            num_heads, scale);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda
