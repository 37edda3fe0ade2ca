#ifndef VQSERVE_KERNELS_CPU_QUANT_MATMUL_H_
#define VQSERVE_KERNELS_CPU_QUANT_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vqserve::cpu {

// weight block formats, byte-compatible with ggml's (32 weights a block):
// q8_0: fp16 d, int8 q[32]; w = d·q.
// q4_0: fp16 d, u8 qs[16] (low nibbles weights 0-15, high nibbles 16-31); w = d·(q − 8).
// q4_1: fp16 d, fp16 m, u8 qs[16] (as q4_0); w = d·q + m.
enum class QuantFormat { kQ8_0, kQ4_0, kQ4_1 };

// bytes of one 32-weight block of `format`.
size_t QuantBlockBytes(QuantFormat format);

// a (rows, cols) weight matrix in a block format, rows contiguous; cols % 32 == 0.
struct QuantMatrix {
  QuantFormat format = QuantFormat::kQ8_0;
  int rows = 0;
  int cols = 0;
  std::vector<uint8_t> data;  // rows · cols / 32 blocks
  size_t row_bytes() const { return QuantBlockBytes(format) * (cols / 32); }
};

// quantizes fp32 rows (rows, cols) to q8_0 (round to nearest, scale amax / 127).
QuantMatrix QuantizeQ8_0(const float* w, int rows, int cols);

// y = x · wᵀ with x rounded to q8 blocks (as llama.cpp's cpu backend does).
// x is (n, w.cols), y is (n, w.rows); accumulate adds to y. meant for small n (decode).
void QuantMatMul(const float* x, const QuantMatrix& w, float* y, int n, bool accumulate = false);

}  // namespace vqserve::cpu

#endif  // VQSERVE_KERNELS_CPU_QUANT_MATMUL_H_
