#ifndef VQSERVE_KERNELS_CUDA_WEIGHTS_BLOCK_FORMATS_H_
#define VQSERVE_KERNELS_CUDA_WEIGHTS_BLOCK_FORMATS_H_

// the ggml block formats the gpu keeps resident (q8_0, q4_0, q4_1, q4_k, q5_k, q6_k): their
// sizes and the dequantization of 8 consecutive elements of a row, for host and device alike
// (the cpu test checks these against runtime/gguf's Dequantize). a row of `cols` elements is
// cols / kBlock blocks of kBytes bytes; chunk c of a row is its elements [8c, 8c + 8).

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define VQ_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define VQ_HOST_DEVICE inline
#endif

namespace vqserve::cuda {

// ggml type ids (runtime/gguf/ggml_type.h) of the resident formats.
enum class BlockFormat : int { kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13,
                               kQ6_K = 14 };

// whether ggml type id `type` is a resident block format.
VQ_HOST_DEVICE bool IsBlockFormat(int type) {
  return type == 2 || type == 3 || type == 8 || type == 12 || type == 13 || type == 14;
}

template <BlockFormat F> struct BlockTraits;
template <> struct BlockTraits<BlockFormat::kQ4_0> { static constexpr int kBlock = 32, kBytes = 18; };
template <> struct BlockTraits<BlockFormat::kQ4_1> { static constexpr int kBlock = 32, kBytes = 20; };
template <> struct BlockTraits<BlockFormat::kQ8_0> { static constexpr int kBlock = 32, kBytes = 34; };
template <> struct BlockTraits<BlockFormat::kQ4_K> { static constexpr int kBlock = 256, kBytes = 144; };
template <> struct BlockTraits<BlockFormat::kQ5_K> { static constexpr int kBlock = 256, kBytes = 176; };
template <> struct BlockTraits<BlockFormat::kQ6_K> { static constexpr int kBlock = 256, kBytes = 210; };

// bytes of one row of `cols` elements (cols a multiple of the block size).
VQ_HOST_DEVICE int64_t BlockRowBytes(BlockFormat f, int64_t cols) {
  switch (f) {
    case BlockFormat::kQ4_0: return cols / 32 * 18;
    case BlockFormat::kQ4_1: return cols / 32 * 20;
    case BlockFormat::kQ8_0: return cols / 32 * 34;
    case BlockFormat::kQ4_K: return cols / 256 * 144;
    case BlockFormat::kQ5_K: return cols / 256 * 176;
    case BlockFormat::kQ6_K: return cols / 256 * 210;
  }
  return 0;
}
// elements per block of `f`.
VQ_HOST_DEVICE int BlockElements(BlockFormat f) {
  return f == BlockFormat::kQ4_K || f == BlockFormat::kQ5_K || f == BlockFormat::kQ6_K ? 256 : 32;
}

// the ieee binary16 at p (2-byte aligned or not) as fp32.
VQ_HOST_DEVICE float LoadHalf(const uint8_t* p) {
  const uint16_t h = static_cast<uint16_t>(p[0] | (p[1] << 8));
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  // normals and subnormals exactly: the bits moved into fp32 place, rescaled by 2^112;
  // inf / nan become large finite values (never in a sane weight file).
  const uint32_t bits = static_cast<uint32_t>(h & 0x7FFF) << 13;
  float f;
  std::memcpy(&f, &bits, 4);
  f *= 5.192296858534828e33f;  // 2^112
  return (h & 0x8000) ? -f : f;
#endif
}

// the 8 bytes at p, p 8-byte aligned (q4_k / q5_k quants: their blocks are multiples of 16
// bytes and rows start 16-byte aligned): one load on the device.
VQ_HOST_DEVICE uint64_t Load8Aligned(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const unsigned long long*>(p);
#else
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
#endif
}

// scale and min (6 bits each) of sub-block j (0..7) of a q4_k / q5_k block's 12 scale bytes.
VQ_HOST_DEVICE void ScaleMinK4(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// out[0..8) = elements [8c, 8c + 8) of the row whose blocks start at `row`.
template <BlockFormat F>
VQ_HOST_DEVICE void Dequant8(const uint8_t* row, int64_t c, float* out) {
  constexpr int kBlock = BlockTraits<F>::kBlock, kBytes = BlockTraits<F>::kBytes;
  const uint8_t* b = row + (c / (kBlock / 8)) * kBytes;
  const int e = static_cast<int>(c % (kBlock / 8)) * 8;  // first element within the block
  if constexpr (F == BlockFormat::kQ8_0) {  // d, qs[32] int8
    const float d = LoadHalf(b);
    for (int i = 0; i < 8; ++i) out[i] = d * static_cast<int8_t>(b[2 + e + i]);
  } else if constexpr (F == BlockFormat::kQ4_0 || F == BlockFormat::kQ4_1) {
    // d (, m), qs[16]: element i < 16 the low nibble of qs[i], else the high one of qs[i - 16].
    const float d = LoadHalf(b);
    const uint8_t* qs = b + (F == BlockFormat::kQ4_1 ? 4 : 2) + (e & 15);
    const int shift = e >= 16 ? 4 : 0;
    if constexpr (F == BlockFormat::kQ4_1) {
      const float m = LoadHalf(b + 2);
      for (int i = 0; i < 8; ++i) out[i] = d * ((qs[i] >> shift) & 0xF) + m;
    } else {
      for (int i = 0; i < 8; ++i) out[i] = d * (((qs[i] >> shift) & 0xF) - 8);
    }
  } else if constexpr (F == BlockFormat::kQ4_K || F == BlockFormat::kQ5_K) {
    // d, dmin, scales[12] (, qh[32]), qs[128]: group g = e / 64 of 64 elements uses qs[32g ..
    // 32g + 32), low nibbles for its first 32 (sub-block 2g), high for the rest (2g + 1);
    // q5_k's fifth bit of element l of sub-block s is bit s of qh[l].
    const int g = e / 64, hi = (e / 32) & 1, l = e & 31, s = 2 * g + hi;
    int sc, mn;
    ScaleMinK4(s, b + 4, &sc, &mn);
    const float d = LoadHalf(b) * sc, m = LoadHalf(b + 2) * mn;
    const uint64_t qs = Load8Aligned(b + (F == BlockFormat::kQ5_K ? 48 : 16) + 32 * g + l);
    const uint64_t qh = F == BlockFormat::kQ5_K ? Load8Aligned(b + 16 + l) : 0;
    for (int i = 0; i < 8; ++i) {
      int q = static_cast<int>(qs >> (8 * i + 4 * hi)) & 0xF;
      if constexpr (F == BlockFormat::kQ5_K) q |= static_cast<int>((qh >> (8 * i + s)) & 1) << 4;
      out[i] = d * q - m;
    }
  } else {  // q6_k: ql[128], qh[64], scales[16] int8, d
    // half h = e / 128; within it quarter k = (e % 128) / 32 and l = e % 32: low 4 bits from
    // ql[64h + l + 32 (k & 1)] (high nibble when k >= 2), top 2 from bits 2k of qh[32h + l],
    // scale scales[8h + l / 16 + 2k]; value d * scale * (q - 32).
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t* ql = b + 64 * h + l + 32 * (k & 1);
    const uint8_t* qh = b + 128 + 32 * h + l;
    const float d = LoadHalf(b + 208) * static_cast<int8_t>(b[192 + 8 * h + l / 16 + 2 * k]);
    for (int i = 0; i < 8; ++i) {
      const int q = (((ql[i] >> (4 * (k >> 1))) & 0xF) | (((qh[i] >> (2 * k)) & 3) << 4)) - 32;
      out[i] = d * q;
    }
  }
}

// Dequant8 of the runtime format `f`.
VQ_HOST_DEVICE void Dequant8Of(BlockFormat f, const uint8_t* row, int64_t c, float* out) {
  switch (f) {
    case BlockFormat::kQ4_0: Dequant8<BlockFormat::kQ4_0>(row, c, out); return;
    case BlockFormat::kQ4_1: Dequant8<BlockFormat::kQ4_1>(row, c, out); return;
    case BlockFormat::kQ8_0: Dequant8<BlockFormat::kQ8_0>(row, c, out); return;
    case BlockFormat::kQ4_K: Dequant8<BlockFormat::kQ4_K>(row, c, out); return;
    case BlockFormat::kQ5_K: Dequant8<BlockFormat::kQ5_K>(row, c, out); return;
    case BlockFormat::kQ6_K: Dequant8<BlockFormat::kQ6_K>(row, c, out); return;
  }
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_WEIGHTS_BLOCK_FORMATS_H_
