#include "runtime/gguf/ggml_type.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/half_convert.h"

namespace vqserve {
namespace {

// block layouts (ggml): d/m are fp16 scale/min; qs packs quants.
constexpr int kQK = 32;   // block size of the 4/5/8-bit legacy types
constexpr int kQKK = 256;  // block size of the k-quants

uint16_t Load16(const uint8_t* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }

void DequantQ4_0(const uint8_t* b, float* y) {  // 2 + 16 bytes
  float d = HalfToFloat(Load16(b));
  const uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = ((qs[j] & 0x0F) - 8) * d;
    y[j + kQK / 2] = ((qs[j] >> 4) - 8) * d;
  }
}
void DequantQ4_1(const uint8_t* b, float* y) {  // 2 + 2 + 16 bytes
  float d = HalfToFloat(Load16(b)), m = HalfToFloat(Load16(b + 2));
  const uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = (qs[j] & 0x0F) * d + m;
    y[j + kQK / 2] = (qs[j] >> 4) * d + m;
  }
}
void DequantQ5_0(const uint8_t* b, float* y) {  // 2 + 4 + 16 bytes
  float d = HalfToFloat(Load16(b));
  uint32_t qh; std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < kQK / 2; ++j) {
    int x0 = (qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
    int x1 = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    y[j] = (x0 - 16) * d;
    y[j + kQK / 2] = (x1 - 16) * d;
  }
}
void DequantQ5_1(const uint8_t* b, float* y) {  // 2 + 2 + 4 + 16 bytes
  float d = HalfToFloat(Load16(b)), m = HalfToFloat(Load16(b + 2));
  uint32_t qh; std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < kQK / 2; ++j) {
    int x0 = (qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
    int x1 = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    y[j] = x0 * d + m;
    y[j + kQK / 2] = x1 * d + m;
  }
}
void DequantQ8_0(const uint8_t* b, float* y) {  // 2 + 32 bytes
  float d = HalfToFloat(Load16(b));
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < kQK; ++j) y[j] = qs[j] * d;
}
void DequantQ6_K(const uint8_t* b, float* y) {  // ql[128] qh[64] scales[16] d
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  float d = HalfToFloat(Load16(b + 208));
  for (int n = 0; n < kQKK; n += 128) {
    for (int l = 0; l < 32; ++l) {
      int is = l / 16;
      int q1 = static_cast<int>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      int q2 = static_cast<int>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      int q3 = static_cast<int>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      int q4 = static_cast<int>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[is] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128; ql += 64; qh += 32; sc += 8;
  }
}
// scale/min of sub-block j of a q4_k / q5_k block (6-bit packed).
void ScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63; *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
void DequantQ4_K(const uint8_t* b, float* y) {  // d dmin scales[12] qs[128]
  float d = HalfToFloat(Load16(b)), min = HalfToFloat(Load16(b + 2));
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  int is = 0;
  for (int j = 0; j < kQKK; j += 64) {
    uint8_t sc, m;
    ScaleMinK4(is, scales, &sc, &m);
    float d1 = d * sc, m1 = min * m;
    ScaleMinK4(is + 1, scales, &sc, &m);
    float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    q += 32; is += 2;
  }
}
void DequantQ5_K(const uint8_t* b, float* y) {  // d dmin scales[12] qh[32] qs[128]
  float d = HalfToFloat(Load16(b)), min = HalfToFloat(Load16(b + 2));
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  int is = 0;
  for (int j = 0; j < kQKK; j += 64) {  // sub-blocks is, is + 1: qh bits is, is + 1
    uint8_t sc, m;
    ScaleMinK4(is, scales, &sc, &m);
    float d1 = d * sc, m1 = min * m;
    ScaleMinK4(is + 1, scales, &sc, &m);
    float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) | (((qh[l] >> is) & 1) << 4)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) | (((qh[l] >> (is + 1)) & 1) << 4)) - m2;
    ql += 32; is += 2;
  }
}

constexpr GgmlTypeTraits kUnknown{"unknown", 0, 0, false};

}  // namespace

GgmlTypeTraits GetTypeTraits(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return {"F32", 1, 4, true};
    case GgmlType::kF16: return {"F16", 1, 2, true};
    case GgmlType::kBF16: return {"BF16", 1, 2, true};
    case GgmlType::kQ4_0: return {"Q4_0", 32, 18, true};
    case GgmlType::kQ4_1: return {"Q4_1", 32, 20, true};
    case GgmlType::kQ5_0: return {"Q5_0", 32, 22, true};
    case GgmlType::kQ5_1: return {"Q5_1", 32, 24, true};
    case GgmlType::kQ8_0: return {"Q8_0", 32, 34, true};
    case GgmlType::kQ8_1: return {"Q8_1", 32, 36, false};
    case GgmlType::kQ2_K: return {"Q2_K", 256, 84, false};
    case GgmlType::kQ3_K: return {"Q3_K", 256, 110, false};
    case GgmlType::kQ4_K: return {"Q4_K", 256, 144, true};
    case GgmlType::kQ5_K: return {"Q5_K", 256, 176, true};
    case GgmlType::kQ6_K: return {"Q6_K", 256, 210, true};
    case GgmlType::kQ8_K: return {"Q8_K", 256, 292, false};
    case GgmlType::kI8: return {"I8", 1, 1, false};
    case GgmlType::kI16: return {"I16", 1, 2, false};
    case GgmlType::kI32: return {"I32", 1, 4, false};
    case GgmlType::kI64: return {"I64", 1, 8, false};
    case GgmlType::kF64: return {"F64", 1, 8, true};
  }
  return kUnknown;
}

size_t TensorBytes(GgmlType type, int64_t n) {
  GgmlTypeTraits t = GetTypeTraits(static_cast<uint32_t>(type));
  if (t.block_size == 0) return 0;
  return static_cast<size_t>(n / t.block_size) * t.type_size;
}

void Dequantize(GgmlType type, const void* src, float* dst, int64_t n) {
  const uint8_t* s = static_cast<const uint8_t*>(src);
  GgmlTypeTraits t = GetTypeTraits(static_cast<uint32_t>(type));
  if (t.block_size == 0) return;
  // large tensors in chunks of whole blocks across the cores (a 16 GB F16 8B file: a minute on
  // one core, element by element).
  constexpr int64_t kChunk = int64_t{1} << 20;
  if (n > kChunk && n % t.block_size == 0 && kChunk % t.block_size == 0) {
    const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t first = c * kChunk, count = std::min(kChunk, n - first);
      Dequantize(type, s + first / t.block_size * t.type_size, dst + first, count);
    }
    return;
  }
  int64_t blocks = n / t.block_size;
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, s, n * 4); return;
    case GgmlType::kF16:  // f16c: exact, as HalfToFloat
      cpu::HalfToFloatRow(reinterpret_cast<const uint16_t*>(s), dst, n);
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = BFloat16ToFloat(Load16(s + 2 * i));
      return;
    case GgmlType::kF64:
      for (int64_t i = 0; i < n; ++i) { double v; std::memcpy(&v, s + 8 * i, 8); dst[i] = static_cast<float>(v); }
      return;
    default: break;
  }
  void (*fn)(const uint8_t*, float*) = nullptr;
  switch (type) {
    case GgmlType::kQ4_0: fn = DequantQ4_0; break;
    case GgmlType::kQ4_1: fn = DequantQ4_1; break;
    case GgmlType::kQ5_0: fn = DequantQ5_0; break;
    case GgmlType::kQ5_1: fn = DequantQ5_1; break;
    case GgmlType::kQ8_0: fn = DequantQ8_0; break;
    case GgmlType::kQ4_K: fn = DequantQ4_K; break;
    case GgmlType::kQ5_K: fn = DequantQ5_K; break;
    case GgmlType::kQ6_K: fn = DequantQ6_K; break;
    default: return;  // callers check can_dequantize first
  }
  for (int64_t b = 0; b < blocks; ++b) fn(s + b * t.type_size, dst + b * t.block_size);
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { mant <<= 1; ++e; } while (!(mant & 0x400));
      bits = sign | ((127 - 15 - e) << 23) | ((mant & 0x3FF) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  // round to nearest even, with overflow to inf and subnormals.
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to inf
  if (abs < 0x38800000u) {  // subnormal half or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t e = abs >> 23;
    uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126 - e;  // 113 - e + 13
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half_mant & 1))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t h = ((abs >> 13) - ((127 - 15) << 10));
  uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float BFloat16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace vqserve
