// fp16 code-major copies of vecinfer codebooks (vecinfer_half_books.h).

#include "kernels/cuda/common/vecinfer_half_books.h"

#include <cuda_fp16.h>

#include "kernels/cuda/common/cuda_check.h"

namespace vqserve::cuda {
namespace {

// src (books, subs, 256, 4 kP) fp32 -> dst (books, 256, subs, 4 kP) fp16; one thread per centroid.
template <int kP>
__global__ void VecInferHalfBooksKernel(const float4* src, int64_t centroids, int subs, uint2* dst) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < centroids;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t book = e / (256 * subs);
    const int r = static_cast<int>(e % (256 * subs));
    const int code = r / subs, m = r % subs;  // e is (book, code, m): coalesced stores
#pragma unroll
    for (int i = 0; i < kP; ++i) {
      const float4 v = src[(book * 256 * subs + m * 256 + code) * kP + i];
      const __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
      dst[e * kP + i] = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    }
  }
}

}  // namespace

std::string LaunchVecInferHalfBooks(const float* src, int num_books, int head_dim, int sub_dim, uint16_t* dst,
                                    cudaStream_t stream) {
  if ((sub_dim != 4 && sub_dim != 8) || head_dim % sub_dim != 0 || num_books <= 0) {
    return "vecinfer half books: sub_dim 4 or 8 dividing head_dim, books > 0";
  }
  const int subs = head_dim / sub_dim;
  const int64_t centroids = int64_t{num_books} * 256 * subs;
  const int blocks = static_cast<int>((centroids + 255) / 256 < 1024 ? (centroids + 255) / 256 : 1024);
  const float4* s4 = reinterpret_cast<const float4*>(src);
  uint2* d2 = reinterpret_cast<uint2*>(dst);
  if (sub_dim == 8) {
    VecInferHalfBooksKernel<2><<<blocks, 256, 0, stream>>>(s4, centroids, subs, d2);
  } else {
    VecInferHalfBooksKernel<1><<<blocks, 256, 0, stream>>>(s4, centroids, subs, d2);
  }
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda
