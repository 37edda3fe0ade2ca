#include "kernels/cpu/softmax.h"

#include <cmath>

namespace vqserve::cpu {

void Softmax(float* x, int n) {
  if (n <= 0) return;
  float m = x[0];
  for (int i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

void LogSoftmax(const float* x, float* out, int n) {
  if (n <= 0) return;
  float m = x[0];
  for (int i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i] - m));
  const float lse = m + static_cast<float>(std::log(sum));
  for (int i = 0; i < n; ++i) out[i] = x[i] - lse;
}

}  // namespace vqserve::cpu
