#ifndef VQSERVE_TESTS_UTIL_CUDA_DEVICE_H_
#define VQSERVE_TESTS_UTIL_CUDA_DEVICE_H_

// the gpu tests' device check: skip where this machine has no cuda device (none, or no
// driver), fail on any other cuda error, so that a broken driver never passes as "no gpu".

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#define VQ_SKIP_WITHOUT_CUDA_DEVICE()                                                        \
  do {                                                                                       \
    int vq_devices_ = 0;                                                                     \
    const cudaError_t vq_err_ = cudaGetDeviceCount(&vq_devices_);                            \
    if (vq_err_ == cudaErrorNoDevice || vq_err_ == cudaErrorInsufficientDriver ||            \
        (vq_err_ == cudaSuccess && vq_devices_ == 0)) {                                      \
      GTEST_SKIP() << "no cuda device on this machine (" << cudaGetErrorString(vq_err_)     \
                   << ")";                                                                   \
    }                                                                                        \
    ASSERT_EQ(vq_err_, cudaSuccess) << "cuda error: " << cudaGetErrorString(vq_err_);       \
  } while (0)

#endif  // VQSERVE_TESTS_UTIL_CUDA_DEVICE_H_
