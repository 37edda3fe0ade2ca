// causal attention over the fp16 paged cache for multi-token steps (see prefill_attention.h).
#include "kernels/cuda/prefill/prefill_attention.h"

#include <cuda_fp16.h>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/prefill/tiled_prefill.cuh"

namespace vqserve::cuda {
namespace {

constexpr int kWarps = 4;        // warps per block, one (token, head) each
constexpr int kMaxPerLane = 4;   // head_dim <= 128

__device__ inline float HalfBits(uint16_t b) { return __half2float(__ushort_as_half(b)); }

// grid (ceil(num_tokens * num_heads / kWarps)), kWarps * 32 threads. lane l holds dims
// l, l + 32, ... of the query, the accumulator and each key / value row.
__global__ void PrefillAttentionKernel(const PagedKvStep s, const float* q, int64_t q_stride,
                                       float* out, int64_t out_stride, int num_heads,
                                       float scale) {
  const int warp = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= s.num_tokens * num_heads) return;
  const int t = warp / num_heads, h = warp % num_heads;
  const int b = s.tok_seq[t], pos = s.tok_pos[t];
  const int D = s.head_dim, per = D / 32, H = s.num_kv_heads;
  const int kvh = h / (num_heads / H);
  float qv[kMaxPerLane], acc[kMaxPerLane];
  for (int e = 0; e < per; ++e) {
    qv[e] = q[t * q_stride + h * D + lane + 32 * e] * scale;
    acc[e] = 0.0f;
  }
  const int coded = s.coded_after[b];
  const int32_t* table = s.block_tables + b * s.block_table_stride;
  const uint16_t* ring_k = s.ring_k + s.slots[b] * s.ring_slot_stride + kvh * D;
  const uint16_t* ring_v = s.ring_v + s.slots[b] * s.ring_slot_stride + kvh * D;
  float m = -INFINITY, l = 0.0f;
  for (int j = 0; j <= pos; ++j) {
    const uint16_t *kr, *vr;
    if (j < coded) {
      const uint16_t* slice = reinterpret_cast<const uint16_t*>(
          s.pages + table[j / s.page_tokens] * s.page_stride + s.layer_offset);
      const int jj = j % s.page_tokens;
      kr = slice + (static_cast<int64_t>(kvh) * s.page_tokens + jj) * D;
      vr = slice + (static_cast<int64_t>(H + kvh) * s.page_tokens + jj) * D;
    } else {
      const int64_t r = static_cast<int64_t>(j % s.ring_tokens) * H * D;
      kr = ring_k + r;
      vr = ring_v + r;
    }
    float dot = 0.0f;
    for (int e = 0; e < per; ++e) dot += qv[e] * HalfBits(kr[lane + 32 * e]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    const float m_new = fmaxf(m, dot);
    const float corr = expf(m - m_new), w = expf(dot - m_new);
    l = l * corr + w;
    for (int e = 0; e < per; ++e) acc[e] = acc[e] * corr + w * HalfBits(vr[lane + 32 * e]);
    m = m_new;
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int e = 0; e < per; ++e) out[t * out_stride + h * D + lane + 32 * e] = acc[e] * inv;
}

// fp16 page rows for TiledPrefillKernel (copied by cp.async): K[H][P][D] then V[H][P][D] of
// the layer slice.
struct Fp16PageReader {
  static constexpr bool kFp16Rows = true;
  int num_kv_heads, head_dim, page_tokens;
  __device__ void Rows(const uint8_t* slice, int kvh, int jj, const uint16_t** k,
                       const uint16_t** v) const {
    *k = reinterpret_cast<const uint16_t*>(slice) +
         (static_cast<int64_t>(kvh) * page_tokens + jj) * head_dim;
    *v = *k + static_cast<int64_t>(num_kv_heads) * page_tokens * head_dim;
  }
};

}  // namespace

std::string LaunchPrefillAttention(const PagedKvStep& step, const float* q,
                                   int64_t q_token_stride, float* out, int64_t out_token_stride,
                                   int num_heads, float scale, cudaStream_t stream) {
  if (step.head_dim % 32 != 0 || step.head_dim > 32 * kMaxPerLane) {
    return "prefill attention: head_dim must be a multiple of 32 and at most 128";
  }
  if (step.num_kv_heads <= 0 || num_heads % step.num_kv_heads != 0) {
    return "prefill attention: num_heads must be a multiple of num_kv_heads";
  }
  const int64_t warps = static_cast<int64_t>(step.num_tokens) * num_heads;
  if (warps <= 0) return "";
  TiledPrefillArgs a;
  a.tiles = step.q_tiles;
  a.num_tiles = step.num_q_tiles;
  a.after_append = true;
  a.q = a.qc = q;
  a.q_stride = q_token_stride;
  a.out = out;
  a.out_stride = out_token_stride;
  a.num_heads = num_heads;
  a.scale = scale;
  if (TiledPrefillFits(step, a)) {
    PagedKvStep s = step;
    s.sink_tokens = 0;  // fp16 pages hold every token
    VQ_CUDA_RETURN_IF_ERROR(LaunchTiledPrefill(
        s, Fp16PageReader{step.num_kv_heads, step.head_dim, step.page_tokens}, a, stream));
    return "";
  }
  const int blocks = static_cast<int>((warps + kWarps - 1) / kWarps);
  PrefillAttentionKernel<<<blocks, kWarps * 32, 0, stream>>>(step, q, q_token_stride, out,
                                                             out_token_stride, num_heads, scale);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda
