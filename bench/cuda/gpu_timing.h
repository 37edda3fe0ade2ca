#ifndef VQSERVE_BENCH_CUDA_GPU_TIMING_H_
#define VQSERVE_BENCH_CUDA_GPU_TIMING_H_

// event timing shared by the cuda benchmarks (attention_bench, smem_floor_bench).

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda/common/cuda_check.h"

namespace vqserve::bench {

inline double Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// median milliseconds of launch(i) for i in [warm, warm + reps), each between two events on
// the default stream (launches 0 .. warm - 1 are not timed).
template <class Launch>
double MedianEventMs(int warm, int reps, Launch&& launch) {
  cudaEvent_t e0, e1;
  VQ_CUDA_CHECK(cudaEventCreate(&e0));
  VQ_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < warm + reps; ++i) {
    VQ_CUDA_CHECK(cudaEventRecord(e0));
    launch(i);
    VQ_CUDA_CHECK(cudaEventRecord(e1));
    VQ_CUDA_CHECK(cudaEventSynchronize(e1));
    float t;
    VQ_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (i >= warm) ms.push_back(t);
  }
  VQ_CUDA_CHECK(cudaEventDestroy(e0));
  VQ_CUDA_CHECK(cudaEventDestroy(e1));
  return Median(ms);
}

// the copy ceiling: a device-to-device copy of `bytes` (its source set to one byte value),
// median of 10 after 3; returns bytes read + written per second.
inline double CopyCeiling(size_t bytes) {
  void *a, *b;
  VQ_CUDA_CHECK(cudaMalloc(&a, bytes));
  VQ_CUDA_CHECK(cudaMalloc(&b, bytes));
  VQ_CUDA_CHECK(cudaMemset(a, 0x5a, bytes));
  const double ms = MedianEventMs(3, 10, [&](int) { VQ_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
  VQ_CUDA_CHECK(cudaFree(a));
  VQ_CUDA_CHECK(cudaFree(b));
  return 2.0 * bytes / (ms * 1e-3);
}

}  // namespace vqserve::bench

#endif  // VQSERVE_BENCH_CUDA_GPU_TIMING_H_
