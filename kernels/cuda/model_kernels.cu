// the llama forward pass's small ops (see model_kernels.h); the cpu kernels are the reference.
#include "kernels/cuda/model_kernels.h"

#include "kernels/cuda/cuda_check.h"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t count) { return static_cast<int>((count + kThreads - 1) / kThreads); }

// grid (n), kThreads threads.
__global__ void EmbeddingGatherKernel(const int32_t* ids, const float* table, float* out,
                                      int dim) {
  const float* src = table + static_cast<int64_t>(ids[blockIdx.x]) * dim;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
}

// grid (n), kThreads threads.
__global__ void RmsNormHalfKernel(const float* x, const int32_t* rows, const float* weight,
                                  __half* out, int dim, float eps) {
  __shared__ double partial[kThreads / 32];
  const int r = rows != nullptr ? rows[blockIdx.x] : blockIdx.x;
  const float* xr = x + static_cast<int64_t>(r) * dim;
  double sum = 0.0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += static_cast<double>(xr[i]) * xr[i];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  const float inv = static_cast<float>(1.0 / sqrt(total / dim + eps));
  __half* o = out + static_cast<int64_t>(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = __float2half_rn(xr[i] * inv * weight[i]);
}

// grid (n), threads over (heads, rope_half) pairs.
__global__ void RopeKernel(float* x, int64_t row_stride, int heads, int head_dim, int rope_half,
                           const int32_t* pos, const float* freqs) {
  float* row = x + blockIdx.x * row_stride;
  const double p = static_cast<double>(pos[blockIdx.x]);
  for (int j = threadIdx.x; j < heads * rope_half; j += blockDim.x) {
    const int h = j / rope_half, i = j % rope_half;
    double s, c;
    sincos(p * static_cast<double>(freqs[i]), &s, &c);
    const float cf = static_cast<float>(c), sf = static_cast<float>(s);
    float* v = row + h * head_dim + 2 * i;
    const float a = v[0], b = v[1];
    v[0] = a * cf - b * sf;
    v[1] = a * sf + b * cf;
  }
}

__global__ void SiluMulHalfKernel(const float* gate_up, __half* out, int n, int f) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<int64_t>(n) * f) return;
  const int64_t r = i / f, c = i % f;
  const float g = gate_up[r * 2 * f + c], u = gate_up[r * 2 * f + f + c];
  out[i] = __float2half_rn(g / (1.0f + expf(-g)) * u);
}

__global__ void FloatToHalfKernel(const float* x, __half* out, int64_t count) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) out[i] = __float2half_rn(x[i]);
}

__global__ void ResidualAddKernel(const float* x, float* y, int64_t count) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) y[i] += x[i];
}

}  // namespace

std::string LaunchEmbeddingGather(const int32_t* ids, const float* table, float* out, int n,
                                  int dim, cudaStream_t stream) {
  if (n <= 0) return "";
  EmbeddingGatherKernel<<<n, kThreads, 0, stream>>>(ids, table, out, dim);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchRmsNormHalf(const float* x, const int32_t* rows, const float* weight,
                              __half* out, int n, int dim, float eps, cudaStream_t stream) {
  if (n <= 0) return "";
  RmsNormHalfKernel<<<n, kThreads, 0, stream>>>(x, rows, weight, out, dim, eps);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchRope(float* x, int64_t row_stride, int n, int heads, int head_dim,
                       int rope_half, const int32_t* pos, const float* freqs,
                       cudaStream_t stream) {
  if (n <= 0) return "";
  RopeKernel<<<n, kThreads, 0, stream>>>(x, row_stride, heads, head_dim, rope_half, pos, freqs);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchSiluMulHalf(const float* gate_up, __half* out, int n, int f,
                              cudaStream_t stream) {
  const int64_t count = static_cast<int64_t>(n) * f;
  if (count <= 0) return "";
  SiluMulHalfKernel<<<Blocks(count), kThreads, 0, stream>>>(gate_up, out, n, f);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchFloatToHalf(const float* x, __half* out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return "";
  FloatToHalfKernel<<<Blocks(count), kThreads, 0, stream>>>(x, out, count);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

std::string LaunchResidualAdd(const float* x, float* y, int64_t count, cudaStream_t stream) {
  if (count <= 0) return "";
  ResidualAddKernel<<<Blocks(count), kThreads, 0, stream>>>(x, y, count);
  VQ_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return "";
}

}  // namespace vqserve::cuda
