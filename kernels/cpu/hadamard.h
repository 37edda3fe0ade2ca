#ifndef VQSERVE_KERNELS_CPU_HADAMARD_H_
#define VQSERVE_KERNELS_CPU_HADAMARD_H_

namespace vqserve::kernels {

// true when n is a power of two (n >= 1).
bool IsPowerOfTwo(int n);

// orthonormal fast walsh-hadamard transform, in place: x <- H_n x with H_n = H_n^T = H_n^-1.
// x is (n) with n a power of two; O(n log n).
void FastWalshHadamard(float* x, int n);

// the same transform on each of `rows` contiguous vectors. x is (rows, n).
void FastWalshHadamardRows(float* x, int rows, int n);

}  // namespace vqserve::kernels

#endif  // VQSERVE_KERNELS_CPU_HADAMARD_H_
