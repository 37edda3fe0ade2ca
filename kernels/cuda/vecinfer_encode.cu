// vecinfer page encoding (nearest codeword per sub-vector) on the gpu.
#include "kernels/cuda/vecinfer_encode.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_check.h"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kPageTokens = 32;

// x (d) against centroids (256, d): lane-parallel argmin, ties to the lower index. returns the
// index in every lane.
__device__ int NearestCode(const float* x, const float* centroids, int d) {
  const int lane = threadIdx.x & 31;
  float best = INFINITY;
  int best_i = 0;
  for (int c = lane; c < 256; c += 32) {
    float dist = 0.0f;
    for (int e = 0; e < d; ++e) {
      const float diff = x[e] - centroids[c * d + e];
      dist = fmaf(diff, diff, dist);
    }
    if (dist < best) {
      best = dist;
      best_i = c;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (ob < best || (ob == best && oi < best_i)) {
      best = ob;
      best_i = oi;
    }
  }
  return best_i;
}

// byte offsets from params.dst of the pages of one launch.
struct PageOffsets {
  int64_t at[kMaxEncodePagesPerLaunch];
};

// grid (32 tokens, kv heads, pages), 128 threads; x: head_dim floats of dynamic smem. page z
// reads rows at p.k / p.v + z * 32 * H * D and writes at p.dst + offsets.at[z].
__global__ void VecInferEncodeKernel(VecInferEncodeParams p, const PageOffsets offsets) {
  extern __shared__ float x[];
  const int t = blockIdx.x, h = blockIdx.y, H = p.num_kv_heads, D = p.head_dim;
  const int tid = threadIdx.x, warp = tid >> 5;
  const int mk = D / p.k_sub_dim, mv = D / p.v_sub_dim;
  const int64_t page_floats = static_cast<int64_t>(kPageTokens) * H * D;
  p.k += blockIdx.z * page_floats;
  p.v += blockIdx.z * page_floats;
  p.dst += offsets.at[blockIdx.z];
  const float* kin = p.k + (static_cast<int64_t>(t) * H + h) * D;
  for (int i = tid; i < D; i += kThreads) x[i] = kin[i] / p.lambda[h * D + i];
  if (p.hadamard) {
    for (int len = 1; len < D; len <<= 1) {
      __syncthreads();
      for (int idx = tid; idx < D / 2; idx += kThreads) {
        const int i = (idx / len) * 2 * len + idx % len;
        const float a = x[i], b = x[i + len];
        x[i] = a + b;
        x[i + len] = a - b;
      }
    }
    __syncthreads();
    const float norm = rsqrtf(static_cast<float>(D));
    for (int i = tid; i < D; i += kThreads) x[i] *= norm;
  }
  __syncthreads();
  const float* ck = p.k_codebook + h * p.k_codebook_head_stride;
  uint8_t* kdst = p.dst + (static_cast<int64_t>(h) * kPageTokens + t) * mk;
  for (int m = warp; m < mk; m += kThreads / 32) {
    const int code = NearestCode(x + m * p.k_sub_dim, ck + static_cast<int64_t>(m) * 256 * p.k_sub_dim, p.k_sub_dim);
    if ((tid & 31) == 0) kdst[m] = static_cast<uint8_t>(code);
  }
  __syncthreads();
  const float* vin = p.v + (static_cast<int64_t>(t) * H + h) * D;
  for (int i = tid; i < D; i += kThreads) x[i] = vin[i];
  __syncthreads();
  const float* cv = p.v_codebook + h * p.v_codebook_head_stride;
  uint8_t* vdst = p.dst + static_cast<int64_t>(H) * kPageTokens * mk + (static_cast<int64_t>(h) * kPageTokens + t) * mv;
  for (int m = warp; m < mv; m += kThreads / 32) {
    const int code = NearestCode(x + m * p.v_sub_dim, cv + static_cast<int64_t>(m) * 256 * p.v_sub_dim, p.v_sub_dim);
    if ((tid & 31) == 0) vdst[m] = static_cast<uint8_t>(code);
  }
}

}  // namespace

std::string LaunchVecInferEncodePages(const VecInferEncodeParams& p, const int64_t* dst_offsets,
                                      int count, cudaStream_t stream) {
  const int D = p.head_dim;
  if (D <= 0 || D > 256 || (D & (D - 1)) != 0) return "vecinfer encode: head_dim must be a power of two <= 256";
  for (int d : {p.k_sub_dim, p.v_sub_dim}) {
    if (d != 2 && d != 4 && d != 8) return "vecinfer encode: sub-vector sizes must be 2, 4 or 8 (8-bit codes)";
  }
  if (p.k == nullptr || p.v == nullptr || p.lambda == nullptr || p.k_codebook == nullptr ||
      p.v_codebook == nullptr || p.dst == nullptr || p.num_kv_heads <= 0) {
    return "vecinfer encode: missing inputs";
  }
  const int64_t page_floats = static_cast<int64_t>(kPageTokens) * p.num_kv_heads * D;
  for (int first = 0; first < count; first += kMaxEncodePagesPerLaunch) {
    const int n = std::min(count - first, kMaxEncodePagesPerLaunch);
    PageOffsets offsets;
    for (int i = 0; i < n; ++i) offsets.at[i] = dst_offsets[first + i];
    VecInferEncodeParams chunk = p;
    chunk.k += first * page_floats;
    chunk.v += first * page_floats;
    VecInferEncodeKernel<<<dim3(kPageTokens, p.num_kv_heads, n), kThreads, D * sizeof(float),
                           stream>>>(chunk, offsets);
    VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return "";
}

std::string LaunchVecInferEncodePage(const VecInferEncodeParams& p, cudaStream_t stream) {
  const int64_t at_dst = 0;
  return LaunchVecInferEncodePages(p, &at_dst, 1, stream);
}

}  // namespace vqserve::cuda
