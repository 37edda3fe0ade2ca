#include "kernels/cpu/hadamard.h"

#include <cmath>

namespace vqserve::kernels {

bool IsPowerOfTwo(int n) { return n >= 1 && (n & (n - 1)) == 0; }

void FastWalshHadamard(float* x, int n) {
  // butterflies of growing span; each stage keeps the sum of squares times 2, so the final
  // scale 1/sqrt(n) makes the transform orthonormal.
  for (int span = 1; span < n; span <<= 1) {
    for (int block = 0; block < n; block += span << 1) {
      float* a = x + block;
      float* b = a + span;
      for (int i = 0; i < span; ++i) {
        float u = a[i];
        float v = b[i];
        a[i] = u + v;
        b[i] = u - v;
      }
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int i = 0; i < n; ++i) x[i] *= scale;
}

void FastWalshHadamardRows(float* x, int rows, int n) {
  for (int r = 0; r < rows; ++r) FastWalshHadamard(x + static_cast<long>(r) * n, n);
}

}  // namespace vqserve::kernels
