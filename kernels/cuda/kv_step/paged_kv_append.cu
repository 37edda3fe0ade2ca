// kv append and page flush for the fp16 paged cache (see paged_kv_append.h).
#include "kernels/cuda/kv_step/paged_kv_append.h"

#include <cuda_fp16.h>

#include "kernels/cuda/common/cuda_check.h"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 256;

// element (head h, dim i) of position pos of sequence b in its page: k (value = false) or v.
__device__ inline uint16_t* PageElem(const PagedKvStep& s, int b, int pos, bool value, int h,
                                     int i) {
  const int32_t page = s.block_tables[b * s.block_table_stride + pos / s.page_tokens];
  uint16_t* slice = reinterpret_cast<uint16_t*>(s.pages + page * s.page_stride + s.layer_offset);
  const int64_t head_rows =
      static_cast<int64_t>(value ? s.num_kv_heads + h : h) * s.page_tokens + pos % s.page_tokens;
  return slice + head_rows * s.head_dim + i;
}

// grid (batch, rows), kThreads threads: ring rows -> pages for the completed pages' older
// tokens of sequence blockIdx.x, row j of them in block (b, j % rows), a thread per (kv head,
// dim) element.
__global__ void PagedKvFlushKernel(const PagedKvStep s) {
  const int b = blockIdx.x;
  const int first = s.coded_before[b];
  const int last = min(s.num_cached[b], s.coded_after[b]);
  const int row = s.num_kv_heads * s.head_dim;
  const int64_t slot = s.slots[b];
  for (int pos = first + blockIdx.y; pos < last; pos += gridDim.y) {
    const int64_t r = slot * s.ring_slot_stride + static_cast<int64_t>(pos % s.ring_tokens) * row;
    for (int e = threadIdx.x; e < row; e += blockDim.x) {
      const int h = e / s.head_dim, i = e - h * s.head_dim;
      *PageElem(s, b, pos, false, h, i) = s.ring_k[r + e];
      *PageElem(s, b, pos, true, h, i) = s.ring_v[r + e];
    }
  }
}

// grid (num_tokens), kThreads threads over the token's (kv head, dim) elements.
__global__ void PagedKvAppendKernel(const PagedKvStep s, const float* k, const float* v,
                                    int64_t token_stride) {
  const int t = blockIdx.x, b = s.tok_seq[t], pos = s.tok_pos[t];
  const int row = s.num_kv_heads * s.head_dim;
  const bool in_page = pos < s.coded_after[b];
  const int64_t ring_row =
      s.slots[b] * s.ring_slot_stride + static_cast<int64_t>(pos % s.ring_tokens) * row;
  for (int e = threadIdx.x; e < row; e += blockDim.x) {
    const __half hk = __float2half_rn(k[t * token_stride + e]);
    const __half hv = __float2half_rn(v[t * token_stride + e]);
    const uint16_t bk = __half_as_ushort(hk), bv = __half_as_ushort(hv);
    if (in_page) {
      const int h = e / s.head_dim, i = e % s.head_dim;
      *PageElem(s, b, pos, false, h, i) = bk;
      *PageElem(s, b, pos, true, h, i) = bv;
    } else {
      s.ring_k[ring_row + e] = bk;
      s.ring_v[ring_row + e] = bv;
    }
  }
}

}  // namespace

std::string LaunchPagedKvFlush(const PagedKvStep& step, int max_flush, cudaStream_t stream) {
  if (max_flush <= 0 || step.batch <= 0) return "";
  constexpr int kMaxRows = 1024;  // grid y; more rows take several per block
  PagedKvFlushKernel<<<dim3(step.batch, max_flush < kMaxRows ? max_flush : kMaxRows), kThreads, 0,
                       stream>>>(step);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchPagedKvAppend(const PagedKvStep& step, const float* k, const float* v,
                                int64_t token_stride, cudaStream_t stream) {
  if (step.num_tokens <= 0) return "";
  PagedKvAppendKernel<<<step.num_tokens, kThreads, 0, stream>>>(step, k, v, token_stride);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda
