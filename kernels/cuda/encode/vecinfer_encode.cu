// vecinfer page encoding (nearest codeword per sub-vector) on the gpu.
#include "kernels/cuda/encode/vecinfer_encode.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/vecinfer_codes.cuh"

namespace vqserve::cuda {
namespace {

// 16 warps: a page flush is one block per (token, kv head), latency-bound.
constexpr int kThreads = 512;
constexpr int kPageTokens = 32;

// x (d) against centroids (n, d): lane-parallel argmin, ties to the lower index. returns the
// index in every lane.
__device__ int NearestCode(const float* x, const float* centroids, int d, int n) {
  const int lane = threadIdx.x & 31;
  float best = INFINITY;
  int best_i = 0;
  for (int c = lane; c < n; c += 32) {
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

// the m sub-vectors of x (smem, m * d floats) -> their nearest centroids of `book` (m, 2^bits,
// d), packed into the code row at dst; codes: m ints of smem. with `dims` (-pca keys) sub-vector
// j has dims[j] dims and its book (2^bits, dims[j]) follows those before it. ends with a barrier.
__device__ void EncodeRow(const float* x, const float* book, int d, int m, int bits, int* codes,
                          uint8_t* dst, const int32_t* dims = nullptr) {
  const int tid = threadIdx.x, warp = tid >> 5;
  for (int j = warp; j < m; j += kThreads / 32) {
    int off = j * d, dj = d;
    if (dims != nullptr) {
      off = 0;
      for (int i = 0; i < j; ++i) off += dims[i];
      dj = dims[j];
    }
    const int code = NearestCode(x + off, book + (static_cast<int64_t>(off) << bits), dj, 1 << bits);
    if ((tid & 31) == 0) codes[j] = code;
  }
  __syncthreads();
  if (bits == 8) {
    for (int j = tid; j < m; j += kThreads) dst[j] = static_cast<uint8_t>(codes[j]);
  } else {
    for (int j = tid; j < m / 2; j += kThreads) {
      const uint32_t w = codes[2 * j] | static_cast<uint32_t>(codes[2 * j + 1]) << 12;
      dst[3 * j] = w & 0xff;
      dst[3 * j + 1] = (w >> 8) & 0xff;
      dst[3 * j + 2] = w >> 16;
    }
  }
  __syncthreads();
}

// grid (32 tokens, kv heads, pages), kThreads threads; smem: x (head_dim floats), then codes
// (head_dim ints; -pca stages the key there first). page z reads rows at p.k / p.v + z * 32 * H * D and writes at p.dst +
// page_ids[z] * page_bytes (p.dst itself when page_ids is null).
__global__ void VecInferEncodeKernel(VecInferEncodeParams p, const int32_t* page_ids,
                                     int64_t page_bytes) {
  extern __shared__ float x[];
  int* codes = reinterpret_cast<int*>(x + p.head_dim);
  const int t = blockIdx.x, h = blockIdx.y, H = p.num_kv_heads, D = p.head_dim;
  const int tid = threadIdx.x;
  const int mk = p.k_codes > 0 ? p.k_codes : D / p.k_sub_dim, mv = D / p.v_sub_dim;
  const int64_t page_floats = static_cast<int64_t>(kPageTokens) * H * D;
  p.k += blockIdx.z * page_floats;
  p.v += blockIdx.z * page_floats;
  if (page_ids != nullptr) p.dst += page_ids[blockIdx.z] * page_bytes;
  const float* kin = p.k + (static_cast<int64_t>(t) * H + h) * D;
  if (p.k_transform != nullptr) {  // -pca: y_j = sum_i k_i T[i][j], k staged in the codes' smem
    float* ks = reinterpret_cast<float*>(codes);
    for (int i = tid; i < D; i += kThreads) ks[i] = kin[i];
    __syncthreads();
    const float* tr = p.k_transform + static_cast<int64_t>(h) * D * D;
    for (int j = tid; j < D; j += kThreads) {
      float s = 0.0f;
#pragma unroll 16
      for (int i = 0; i < D; ++i) s = fmaf(ks[i], tr[i * D + j], s);  // 16 loads in flight
      x[j] = s;
    }
  } else {
    for (int i = tid; i < D; i += kThreads) x[i] = kin[i] / p.lambda[h * D + i];
  }
  if (p.hadamard && p.k_transform == nullptr) {
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
  const int krow = VecInferRowBytes(mk, p.k_code_bits), vrow = VecInferRowBytes(mv, p.v_code_bits);
  EncodeRow(x, p.k_codebook + h * p.k_codebook_head_stride, p.k_sub_dim, mk, p.k_code_bits,
            codes, p.dst + (static_cast<int64_t>(h) * kPageTokens + t) * krow,
            p.k_dims == nullptr ? nullptr : p.k_dims + h * mk);
  const float* vin = p.v + (static_cast<int64_t>(t) * H + h) * D;
  for (int i = tid; i < D; i += kThreads) x[i] = vin[i];
  __syncthreads();
  EncodeRow(x, p.v_codebook + h * p.v_codebook_head_stride, p.v_sub_dim, mv, p.v_code_bits,
            codes, p.dst + static_cast<int64_t>(H) * kPageTokens * krow +
                       (static_cast<int64_t>(h) * kPageTokens + t) * vrow);
}

}  // namespace

std::string LaunchVecInferEncodePages(const VecInferEncodeParams& p, const int32_t* page_ids,
                                      int64_t page_bytes, int count, cudaStream_t stream) {
  const int D = p.head_dim;
  if (D <= 0 || D > 256 || (D & (D - 1)) != 0) return "vecinfer encode: head_dim must be a power of two <= 256";
  for (int d : {p.k_sub_dim, p.v_sub_dim}) {
    if (d != 2 && d != 4 && d != 8) return "vecinfer encode: sub-vector sizes must be 2, 4 or 8";
  }
  for (int bits : {p.k_code_bits, p.v_code_bits}) {
    if (bits != 8 && bits != 12) return "vecinfer encode: codes of 8 or 12 bits";
  }
  if ((p.k_transform == nullptr) != (p.k_dims == nullptr)) return "vecinfer encode: -pca needs k_transform and k_dims";
  if (p.k_codes != 0 && (p.k_codes < 1 || p.k_codes > D || (p.k_dims == nullptr && p.k_codes != D / p.k_sub_dim))) {
    return "vecinfer encode: k_codes other than head_dim / k_sub_dim needs -pca keys (1 .. head_dim codes)";
  }
  if (p.k == nullptr || p.v == nullptr || (p.lambda == nullptr && p.k_transform == nullptr) || p.k_codebook == nullptr ||
      p.v_codebook == nullptr || p.dst == nullptr || p.num_kv_heads <= 0) {
    return "vecinfer encode: missing inputs";
  }
  if (page_ids == nullptr && count > 1) return "vecinfer encode: page ids are required";
  constexpr int kMaxGridZ = 65535;
  const int64_t page_floats = static_cast<int64_t>(kPageTokens) * p.num_kv_heads * D;
  for (int first = 0; first < count; first += kMaxGridZ) {
    const int n = std::min(count - first, kMaxGridZ);
    VecInferEncodeParams chunk = p;
    chunk.k += first * page_floats;
    chunk.v += first * page_floats;
    VecInferEncodeKernel<<<dim3(kPageTokens, p.num_kv_heads, n), kThreads,
                           D * sizeof(float) + D * sizeof(int), stream>>>(
        chunk, page_ids == nullptr ? nullptr : page_ids + first, page_bytes);
    VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return "";
}

std::string LaunchVecInferEncodePage(const VecInferEncodeParams& p, cudaStream_t stream) {
  return LaunchVecInferEncodePages(p, nullptr, 0, 1, stream);
}

}  // namespace vqserve::cuda
