#ifndef VQSERVE_KERNELS_CUDA_MODEL_RANDOM_FILL_H_
#define VQSERVE_KERNELS_CUDA_MODEL_RANDOM_FILL_H_

// deterministic pseudo-random contents for device buffers (benchmarks of random-weight models
// and caches): element i depends only on (seed, i). launchers return an empty string on
// success, else the cuda error.

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace vqserve::cuda {

// out (count) fp16 = offset + scale * u, u uniform in [-1, 1).
std::string LaunchFillRandomHalf(__half* out, int64_t count, float scale, float offset,
                                 uint64_t seed, cudaStream_t stream);

// out (count) fp32 = offset + scale * u, u uniform in [-1, 1).
std::string LaunchFillRandomFloat(float* out, int64_t count, float scale, float offset,
                                  uint64_t seed, cudaStream_t stream);

// out (bytes) uniform random bytes (e.g. 8-bit pq codes).
std::string LaunchFillRandomBytes(uint8_t* out, int64_t bytes, uint64_t seed,
                                  cudaStream_t stream);

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_MODEL_RANDOM_FILL_H_
