#include "kernels/cpu/matmul.h"

#include <cblas.h>

namespace vqserve::cpu {

void MatMul(const float* x, const float* w, float* y, int n, int in, int out, bool accumulate) {
  const float beta = accumulate ? 1.0f : 0.0f;
  if (n == 1) {
    // (out, in) · (in) -> (out)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, w, in, x, 1, beta, y, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, beta, y,
              out);
}

void SetBlasThreads(int num_threads) {
  if (num_threads > 0) openblas_set_num_threads(num_threads);
}

}  // namespace vqserve::cpu
