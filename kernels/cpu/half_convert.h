#ifndef VQSERVE_KERNELS_CPU_HALF_CONVERT_H_
#define VQSERVE_KERNELS_CPU_HALF_CONVERT_H_

#include <cstdint>

namespace vqserve::cpu {

// dst = fp16(src), round to nearest even (f16c). src, dst are (n).
void FloatToHalfRow(const float* src, uint16_t* dst, int64_t n);
// dst = fp32(src). src, dst are (n).
void HalfToFloatRow(const uint16_t* src, float* dst, int64_t n);

}  // namespace vqserve::cpu

#endif  // VQSERVE_KERNELS_CPU_HALF_CONVERT_H_
