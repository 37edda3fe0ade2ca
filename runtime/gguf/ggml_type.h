#ifndef VQSERVE_RUNTIME_GGUF_GGML_TYPE_H_
#define VQSERVE_RUNTIME_GGUF_GGML_TYPE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vqserve {

// tensor element types of the gguf format (values as stored in the file).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

// elements per block and bytes per block of a type; block_size 0 for unknown types.
struct GgmlTypeTraits {
  const char* name;
  int64_t block_size;
  size_t type_size;
  bool can_dequantize;
};

// traits of `type`; name "unknown" and block_size 0 when the value is not a known type.
GgmlTypeTraits GetTypeTraits(uint32_t type);

// bytes taken by `n` elements of `type` (n a multiple of the block size).
size_t TensorBytes(GgmlType type, int64_t n);

// dequantizes `n` elements of `type` from `src` into fp32 `dst`; n is a multiple of the block size.
void Dequantize(GgmlType type, const void* src, float* dst, int64_t n);

// fp16 <-> fp32 (ieee binary16), and bf16 -> fp32.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_GGUF_GGML_TYPE_H_
