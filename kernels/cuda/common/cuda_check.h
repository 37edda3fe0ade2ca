#ifndef VQSERVE_KERNELS_CUDA_COMMON_CUDA_CHECK_H_
#define VQSERVE_KERNELS_CUDA_COMMON_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>

// aborts with file:line when a cuda runtime call fails (tools, tests and benchmarks).
#define VQ_CUDA_CHECK(expr)                                                               \
  do {                                                                                    \
    cudaError_t vq_err_ = (expr);                                                         \
    if (vq_err_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr,           \
                   cudaGetErrorString(vq_err_));                                          \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

// returns a "file:line: call: error" string from the enclosing function when a call fails
// (library code that returns std::string errors, empty on success).
#define VQ_CUDA_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                    \
    cudaError_t vq_err_ = (expr);                                                         \
    if (vq_err_ != cudaSuccess) {                                                         \
      return std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + #expr +      \
             ": " + cudaGetErrorString(vq_err_);                                          \
    }                                                                                     \
  } while (0)

#endif  // VQSERVE_KERNELS_CUDA_COMMON_CUDA_CHECK_H_
