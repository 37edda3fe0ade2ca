// pseudo-random buffer fills (see random_fill.h): a splitmix64 hash of (seed, index).
#include "kernels/cuda/model/random_fill.h"

#include "kernels/cuda/common/cuda_check.h"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 65536;

__device__ __forceinline__ uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// uniform in [-1, 1) from the top 24 bits of h.
__device__ __forceinline__ float Unit(uint64_t h) {
  return static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

int Blocks(int64_t count) {
  const int64_t b = (count + kThreads - 1) / kThreads;
  return static_cast<int>(b < kMaxBlocks ? (b > 0 ? b : 1) : kMaxBlocks);
}

// grid-stride loops over the elements.
__global__ void FillHalfKernel(__half* out, int64_t count, float scale, float offset,
                               uint64_t seed) {
  const uint64_t key = Mix(seed);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __float2half_rn(offset + scale * Unit(Mix(key ^ static_cast<uint64_t>(i))));
  }
}

__global__ void FillFloatKernel(float* out, int64_t count, float scale, float offset,
                                uint64_t seed) {
  const uint64_t key = Mix(seed);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = offset + scale * Unit(Mix(key ^ static_cast<uint64_t>(i)));
  }
}

// eight bytes per hash; the tail (bytes % 8) byte by byte.
__global__ void FillBytesKernel(uint8_t* out, int64_t bytes, uint64_t seed) {
  const uint64_t key = Mix(seed);
  const int64_t words = bytes / 8;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < words;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t h = Mix(key ^ static_cast<uint64_t>(i));
    for (int j = 0; j < 8; ++j) out[i * 8 + j] = static_cast<uint8_t>(h >> (8 * j));
  }
  const int64_t t = words * 8 + blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t < bytes) out[t] = static_cast<uint8_t>(Mix(key ^ ~static_cast<uint64_t>(t)));
}

}  // namespace

std::string LaunchFillRandomHalf(__half* out, int64_t count, float scale, float offset,
                                 uint64_t seed, cudaStream_t stream) {
  if (count <= 0) return "";
  FillHalfKernel<<<Blocks(count), kThreads, 0, stream>>>(out, count, scale, offset, seed);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchFillRandomFloat(float* out, int64_t count, float scale, float offset,
                                  uint64_t seed, cudaStream_t stream) {
  if (count <= 0) return "";
  FillFloatKernel<<<Blocks(count), kThreads, 0, stream>>>(out, count, scale, offset, seed);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchFillRandomBytes(uint8_t* out, int64_t bytes, uint64_t seed,
                                  cudaStream_t stream) {
  if (bytes <= 0) return "";
  FillBytesKernel<<<Blocks(bytes / 8 + 1), kThreads, 0, stream>>>(out, bytes, seed);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda
