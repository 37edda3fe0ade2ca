// ring appends, sink appends and flush gathers of coded caches (see ring_kv_step.h).
#include "kernels/cuda/kv_step/ring_kv_step.h"

#include <cuda_fp16.h>

#include "kernels/cuda/common/cuda_check.h"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 128;

__device__ inline float HalfBits(uint16_t b) { return __half2float(__ushort_as_half(b)); }
__device__ inline uint16_t ToHalfBits(float x) { return __half_as_ushort(__float2half_rn(x)); }
__device__ inline float RoundHalf(float x) { return __half2float(__float2half_rn(x)); }
// the fp16 bits of a.x .. a.w, in that order.
__device__ inline uint2 HalfBits4(float4 a) {
  return make_uint2(ToHalfBits(a.x) | uint32_t{ToHalfBits(a.y)} << 16, ToHalfBits(a.z) | uint32_t{ToHalfBits(a.w)} << 16);
}
bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
// RingAppendKernel<true> applies: every row start a multiple of 4 elements and aligned.
bool RingAppendVectors(const PagedKvStep& s, const float* k, const float* v, int64_t token_stride) {
  const int64_t row = int64_t{s.num_kv_heads} * s.head_dim;
  return row % 4 == 0 && token_stride % 4 == 0 && s.ring_slot_stride % 4 == 0 && Aligned(k, 16) &&
         Aligned(v, 16) && Aligned(s.ring_k, 8) && Aligned(s.ring_v, 8);
}

// grid (num_tokens), kThreads threads over the H * D elements of a row. kVec: 4 elements a
// thread at a time (float4 in, 4 halves out), for rows and strides of multiples of 4 elements
// on 16-byte aligned k, v and 8-byte aligned rings (RingAppendVectors).
template <bool kVec>
__global__ void RingAppendKernel(const PagedKvStep s, const float* __restrict__ k, const float* __restrict__ v,
                                 int64_t token_stride) {
  const int t = blockIdx.x, b = s.tok_seq[t], pos = s.tok_pos[t];
  if (pos < s.coded_after[b]) return;
  const int row = s.num_kv_heads * s.head_dim;
  const int64_t dst = s.slots[b] * s.ring_slot_stride + static_cast<int64_t>(pos % s.ring_tokens) * row;
  const float* kr = k + t * token_stride;
  const float* vr = v + t * token_stride;
  if constexpr (kVec) {
    for (int i = 4 * threadIdx.x; i < row; i += 4 * kThreads) {
      const float4 a = *reinterpret_cast<const float4*>(kr + i), c = *reinterpret_cast<const float4*>(vr + i);
      *reinterpret_cast<uint2*>(s.ring_k + dst + i) = HalfBits4(a);
      *reinterpret_cast<uint2*>(s.ring_v + dst + i) = HalfBits4(c);
    }
  } else {
    for (int i = threadIdx.x; i < row; i += kThreads) {
      s.ring_k[dst + i] = ToHalfBits(kr[i]);
      s.ring_v[dst + i] = ToHalfBits(vr[i]);
    }
  }
}

// grid (num_tokens), kThreads threads over the H * D elements of a row.
__global__ void SinkAppendKernel(const PagedKvStep s, const float* k, const float* v,
                                 int64_t token_stride) {
  const int t = blockIdx.x, b = s.tok_seq[t], pos = s.tok_pos[t];
  if (pos >= s.sink_tokens) return;
  const int row = s.num_kv_heads * s.head_dim;
  const int64_t dst = s.slots[b] * s.sink_slot_stride + static_cast<int64_t>(pos) * row;
  for (int i = threadIdx.x; i < row; i += kThreads) {
    s.sink_k[dst + i] = ToHalfBits(k[t * token_stride + i]);
    s.sink_v[dst + i] = ToHalfBits(v[t * token_stride + i]);
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

}  // namespace

std::string LaunchRingAppend(const PagedKvStep& step, const float* k, const float* v,
                             int64_t token_stride, cudaStream_t stream) {
  if (step.num_tokens <= 0) return "";
  if (RingAppendVectors(step, k, v, token_stride)) {
    RingAppendKernel<true><<<step.num_tokens, kThreads, 0, stream>>>(step, k, v, token_stride);
  } else {
    RingAppendKernel<false><<<step.num_tokens, kThreads, 0, stream>>>(step, k, v, token_stride);
  }
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchSinkAppend(const PagedKvStep& step, const float* k, const float* v,
                             int64_t token_stride, cudaStream_t stream) {
  if (step.num_tokens <= 0 || step.sink_tokens <= 0) return "";
  if (step.sink_k == nullptr || step.sink_v == nullptr) return "sink append: no sink rows";
  SinkAppendKernel<<<step.num_tokens, kThreads, 0, stream>>>(step, k, v, token_stride);
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

}  // namespace vqserve::cuda
