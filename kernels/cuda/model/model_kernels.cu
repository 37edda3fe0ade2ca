// the llama forward pass's small ops (see model_kernels.h); the cpu kernels are the reference.
// each is launched after the previous kernel (dependent_launch.cuh): its launch overlaps that
// kernel's tail and it waits for it before reading what it wrote.
#include "kernels/cuda/model/model_kernels.h"

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/dependent_launch.cuh"

namespace vqserve::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t count) { return static_cast<int>((count + kThreads - 1) / kThreads); }
// heads of a RopeKernel block: one (head, pair) a thread.
__host__ __device__ inline int RopeHeadsPerBlock(int rope_half) { return rope_half < kThreads ? kThreads / rope_half : 1; }
bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// 1 / sqrt(row sum / dim + eps) of a kThreads block whose threads hold partial sums `sum`
// (double, as cpu::RmsNorm); every thread gets it. partial: kThreads / 32 shared doubles.
__device__ float RowInvRms(double sum, double* partial, int dim, float eps) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  return static_cast<float>(1.0 / sqrt(total / dim + eps));
}

// grid (n), kThreads threads.
__global__ void EmbeddingGatherKernel(const int32_t* ids, const float* table, float* out,
                                      int dim) {
  GridDependencyWait();
  const float* src = table + static_cast<int64_t>(ids[blockIdx.x]) * dim;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
}

// grid (n), kThreads threads: the generic row loop (any dim, any alignment).
__global__ void RmsNormHalfKernel(const float* x, const int32_t* rows, const float* weight,
                                  __half* out, int dim, float eps) {
  __shared__ double partial[kThreads / 32];
  GridDependencyWait();
  const int r = rows != nullptr ? rows[blockIdx.x] : blockIdx.x;
  const float* xr = x + static_cast<int64_t>(r) * dim;
  double sum = 0.0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += static_cast<double>(xr[i]) * xr[i];
  const float inv = RowInvRms(sum, partial, dim, eps);
  __half* o = out + static_cast<int64_t>(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = __float2half_rn(xr[i] * inv * weight[i]);
}

// float4s of a row each thread keeps in registers in RmsNormHalfVecKernel: dim <= 4 * kNormVec
// * kThreads (8192).
constexpr int kNormVec = 8;

// grid (n), kThreads threads; dim % 4 == 0, dim <= 4 * kNormVec * kThreads, x / weight 16-byte
// and out 8-byte aligned: thread i holds float4s i, i + kThreads, ... of the row between the
// sum and the scaling (one pass over x).
__global__ void RmsNormHalfVecKernel(const float* __restrict__ x, const int32_t* __restrict__ rows,
                                     const float* __restrict__ weight, __half* __restrict__ out, int dim,
                                     float eps) {
  __shared__ double partial[kThreads / 32];
  GridDependencyWait();
  const int r = rows != nullptr ? rows[blockIdx.x] : blockIdx.x;
  const float4* xr = reinterpret_cast<const float4*>(x + static_cast<int64_t>(r) * dim);
  const int nv = dim / 4;
  float4 v[kNormVec];
  double sum = 0.0;
#pragma unroll
  for (int k = 0; k < kNormVec; ++k) {
    const int i = threadIdx.x + k * kThreads;
    v[k] = i < nv ? xr[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
#pragma unroll
  for (int k = 0; k < kNormVec; ++k) {
    sum += static_cast<double>(v[k].x) * v[k].x + static_cast<double>(v[k].y) * v[k].y +
           static_cast<double>(v[k].z) * v[k].z + static_cast<double>(v[k].w) * v[k].w;
  }
  const float inv = RowInvRms(sum, partial, dim, eps);
  const float4* w4 = reinterpret_cast<const float4*>(weight);
  uint2* o = reinterpret_cast<uint2*>(out + static_cast<int64_t>(blockIdx.x) * dim);
#pragma unroll
  for (int k = 0; k < kNormVec; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i < nv) {
      const float4 w = w4[i];
      const __half2 lo = __floats2half2_rn(v[k].x * inv * w.x, v[k].y * inv * w.y);
      const __half2 hi = __floats2half2_rn(v[k].z * inv * w.z, v[k].w * inv * w.w);
      o[i] = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    }
  }
}

// grid (n, ceil(heads / RopeHeadsPerBlock)), kThreads threads, rope_half float2 of shared
// memory: the cos / sin of token blockIdx.x's rope_half angles (double, as cpu::ApplyRope),
// then the (head, pair)s of heads RopeHeadsPerBlock * blockIdx.y ...
__global__ void RopeKernel(float* x, int64_t row_stride, int heads, int head_dim, int rope_half,
                           const int32_t* pos, const float* freqs) {
  extern __shared__ float2 cs[];  // (cos, sin) of pair i
  float* row = x + blockIdx.x * row_stride;
  const double p = static_cast<double>(pos[blockIdx.x]);
  for (int i = threadIdx.x; i < rope_half; i += blockDim.x) {
    double s, c;
    sincos(p * static_cast<double>(freqs[i]), &s, &c);
    cs[i] = make_float2(static_cast<float>(c), static_cast<float>(s));
  }
  GridDependencyWait();  // the angles (positions are step metadata) overlapped the kernel ahead
  __syncthreads();
  const int hpb = RopeHeadsPerBlock(rope_half), h0 = blockIdx.y * hpb;
  const int h1 = h0 + hpb < heads ? h0 + hpb : heads;
  for (int j = h0 * rope_half + threadIdx.x; j < h1 * rope_half; j += blockDim.x) {
    const int h = j / rope_half, i = j % rope_half;
    const float cf = cs[i].x, sf = cs[i].y;
    float* v = row + h * head_dim + 2 * i;
    const float a = v[0], b = v[1];
    v[0] = a * cf - b * sf;
    v[1] = a * sf + b * cf;
  }
}

__global__ void SiluMulHalfKernel(const float* gate_up, __half* out, int n, int f) {
  GridDependencyWait();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<int64_t>(n) * f) return;
  const int64_t r = i / f, c = i % f;
  const float g = gate_up[r * 2 * f + c], u = gate_up[r * 2 * f + f + c];
  out[i] = __float2half_rn(g / (1.0f + expf(-g)) * u);
}

__global__ void FloatToHalfKernel(const float* x, __half* out, int64_t count) {
  GridDependencyWait();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) out[i] = __float2half_rn(x[i]);
}

__global__ void ResidualAddKernel(const float* x, float* y, int64_t count) {
  GridDependencyWait();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) y[i] += x[i];
}

// the better of (value, index) candidates a and b: the larger value, the smaller index on a tie;
// a NaN value (or index -1: none yet) never wins.
__device__ __forceinline__ void BetterOf(float& v, int& i, float ov, int oi) {
  if (oi < 0 || ov != ov) return;
  if (i < 0 || ov > v || (ov == v && oi < i)) v = ov, i = oi;
}

constexpr int kArgMaxThreads = 1024;

// grid (rows), kArgMaxThreads threads: thread t scans elements t, t + blockDim, ... of its row
// (coalesced), then warp shuffles and one shared pass.
__global__ void RowArgMaxKernel(const float* __restrict__ x, int cols, int32_t* out) {
  __shared__ float sv[kArgMaxThreads / 32];
  __shared__ int si[kArgMaxThreads / 32];
  GridDependencyWait();
  const float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  float v = 0.0f;
  int i = -1;
  for (int k = threadIdx.x; k < cols; k += blockDim.x) BetterOf(v, i, row[k], k);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    BetterOf(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
  }
  if ((threadIdx.x & 31) == 0) sv[threadIdx.x >> 5] = v, si[threadIdx.x >> 5] = i;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kArgMaxThreads / 32; ++w) BetterOf(v, i, sv[w], si[w]);
    out[blockIdx.x] = i < 0 ? 0 : i;
  }
}

}  // namespace

std::string LaunchEmbeddingGather(const int32_t* ids, const float* table, float* out, int n,
                                  int dim, cudaStream_t stream) {
  if (n <= 0) return "";
  VQ_CUDA_RETURN_IF_ERROR(
      LaunchAfterPrevious(EmbeddingGatherKernel, dim3(n), dim3(kThreads), 0, stream, ids, table,
                          out, dim));
  return "";
}

std::string LaunchRmsNormHalf(const float* x, const int32_t* rows, const float* weight,
                              __half* out, int n, int dim, float eps, cudaStream_t stream) {
  if (n <= 0) return "";
  const bool vec = dim % 4 == 0 && dim <= 4 * kNormVec * kThreads && Aligned(x, 16) && Aligned(weight, 16) &&
                   Aligned(out, 8);
  VQ_CUDA_RETURN_IF_ERROR(LaunchAfterPrevious(vec ? RmsNormHalfVecKernel : RmsNormHalfKernel,
                                              dim3(n), dim3(kThreads), 0, stream, x, rows,
                                              weight, out, dim, eps));
  return "";
}

std::string LaunchRope(float* x, int64_t row_stride, int n, int heads, int head_dim,
                       int rope_half, const int32_t* pos, const float* freqs,
                       cudaStream_t stream) {
  if (n <= 0 || rope_half <= 0) return "";
  const int hpb = RopeHeadsPerBlock(rope_half);
  const dim3 grid(n, (heads + hpb - 1) / hpb);
  VQ_CUDA_RETURN_IF_ERROR(LaunchAfterPrevious(RopeKernel, grid, dim3(kThreads),
                                              rope_half * sizeof(float2), stream, x, row_stride,
                                              heads, head_dim, rope_half, pos, freqs));
  return "";
}

std::string LaunchSiluMulHalf(const float* gate_up, __half* out, int n, int f,
                              cudaStream_t stream) {
  const int64_t count = static_cast<int64_t>(n) * f;
  if (count <= 0) return "";
  VQ_CUDA_RETURN_IF_ERROR(LaunchAfterPrevious(SiluMulHalfKernel, dim3(Blocks(count)),
                                              dim3(kThreads), 0, stream, gate_up, out, n, f));
  return "";
}

std::string LaunchFloatToHalf(const float* x, __half* out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return "";
  VQ_CUDA_RETURN_IF_ERROR(LaunchAfterPrevious(FloatToHalfKernel, dim3(Blocks(count)),
                                              dim3(kThreads), 0, stream, x, out, count));
  return "";
}

std::string LaunchRowArgMax(const float* x, int rows, int cols, int32_t* out,
                            cudaStream_t stream) {
  if (rows <= 0) return "";
  VQ_CUDA_RETURN_IF_ERROR(LaunchAfterPrevious(RowArgMaxKernel, dim3(rows), dim3(kArgMaxThreads),
                                              0, stream, x, cols, out));
  return "";
}

std::string LaunchResidualAdd(const float* x, float* y, int64_t count, cudaStream_t stream) {
  if (count <= 0) return "";
  VQ_CUDA_RETURN_IF_ERROR(LaunchAfterPrevious(ResidualAddKernel, dim3(Blocks(count)),
                                              dim3(kThreads), 0, stream, x, y, count));
  return "";
}

}  // namespace vqserve::cuda
