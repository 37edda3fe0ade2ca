#ifndef VQSERVE_KERNELS_CUDA_MODEL_MODEL_KERNELS_H_
#define VQSERVE_KERNELS_CUDA_MODEL_MODEL_KERNELS_H_

// element-wise and row-wise ops of the llama forward pass on the gpu; each mirrors the cpu
// reference kernel of the same name in kernels/cpu/. launchers return an empty string on
// success, else the cuda error.

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace vqserve::cuda {

// ids (n), table (vocab, dim) fp32 -> out (n, dim) fp32.
std::string LaunchEmbeddingGather(const int32_t* ids, const float* table, float* out, int n,
                                  int dim, cudaStream_t stream);

// out (n, dim) fp16 = rmsnorm(x row rows[i] (or i when rows is null)) * weight (dim); the row
// sum of squares in double, as cpu::RmsNorm. x is (*, dim) fp32.
std::string LaunchRmsNormHalf(const float* x, const int32_t* rows, const float* weight,
                              __half* out, int n, int dim, float eps, cudaStream_t stream);

// rotates x (n, heads, head_dim) in place, adjacent pairs (2i, 2i+1) of the first
// 2 * rope_half dims by pos[t] * freqs[i] (angles in double, as cpu::ApplyRope); token t's
// row starts at x + t * row_stride floats.
std::string LaunchRope(float* x, int64_t row_stride, int n, int heads, int head_dim,
                       int rope_half, const int32_t* pos, const float* freqs,
                       cudaStream_t stream);

// gate_up (n, 2f) fp32 (gate then up) -> out (n, f) fp16 = silu(gate) * up.
std::string LaunchSiluMulHalf(const float* gate_up, __half* out, int n, int f,
                              cudaStream_t stream);

// out (count) fp16 = x (count) fp32, round to nearest even.
std::string LaunchFloatToHalf(const float* x, __half* out, int64_t count, cudaStream_t stream);

// out[i] = the first index of the largest of row i of x (rows, cols) fp32, NaNs skipped (0 when
// all are NaN), as cpu::ArgMax: greedy sampling on the device.
std::string LaunchRowArgMax(const float* x, int rows, int cols, int32_t* out,
                            cudaStream_t stream);

// y (count) fp32 += x (count) fp32.
std::string LaunchResidualAdd(const float* x, float* y, int64_t count, cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_MODEL_MODEL_KERNELS_H_
