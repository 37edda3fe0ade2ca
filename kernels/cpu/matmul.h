#ifndef VQSERVE_KERNELS_CPU_MATMUL_H_
#define VQSERVE_KERNELS_CPU_MATMUL_H_

namespace vqserve::cpu {

// y = x · wᵀ (+ y when accumulate) through openblas sgemm.
// x is (n, in), w is (out, in) row-major (a gguf weight), y is (n, out).
void MatMul(const float* x, const float* w, float* y, int n, int in, int out,
            bool accumulate = false);

// sets the threads openblas uses (0: leave as is).
void SetBlasThreads(int num_threads);

}  // namespace vqserve::cpu

#endif  // VQSERVE_KERNELS_CPU_MATMUL_H_
