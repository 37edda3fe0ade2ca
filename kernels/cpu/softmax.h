#ifndef VQSERVE_KERNELS_CPU_SOFTMAX_H_
#define VQSERVE_KERNELS_CPU_SOFTMAX_H_

namespace vqserve::cpu {

// x = softmax(x) in place, max-subtracted. x is (n).
void Softmax(float* x, int n);
// out = log_softmax(x). x, out are (n); out may alias x.
void LogSoftmax(const float* x, float* out, int n);

}  // namespace vqserve::cpu

#endif  // VQSERVE_KERNELS_CPU_SOFTMAX_H_
