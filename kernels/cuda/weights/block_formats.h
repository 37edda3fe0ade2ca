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

// the ieee binary16 with bits h as fp32.
VQ_HOST_DEVICE float HalfBitsToFloat(uint16_t h) {
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

// the ieee binary16 at p (2-byte aligned or not) as fp32.
VQ_HOST_DEVICE float LoadHalf(const uint8_t* p) {
  return HalfBitsToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8)));
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

// scale and min of sub-block j (0..7) of a q4_k / q5_k block from its scale bytes as the words
// s0 = scales[0, 4), s1 = scales[4, 8), s2 = scales[8, 12) (ScaleMinK4 on registers).
VQ_HOST_DEVICE void ScaleMinK4Words(int j, uint32_t s0, uint32_t s1, uint32_t s2, int* d,
                                    int* m) {
  const int sh = 8 * (j & 3);
  const int a = (s0 >> sh) & 0xFF, b = (s1 >> sh) & 0xFF, c = (s2 >> sh) & 0xFF;
  if (j < 4) {
    *d = a & 63;
    *m = b & 63;
  } else {
    *d = (c & 0xF) | ((a >> 6) << 4);
    *m = (c >> 4) | ((b >> 6) << 4);
  }
}

// scale and min (6 bits each) of sub-block j (0..7) of a q4_k / q5_k block's 12 scale bytes.
VQ_HOST_DEVICE void ScaleMinK4(int j, const uint8_t* q, int* d, int* m) {
  uint32_t s[3];
  for (int i = 0; i < 3; ++i) {
    s[i] = q[4 * i] | (q[4 * i + 1] << 8) | (q[4 * i + 2] << 16) | (uint32_t{q[4 * i + 3]} << 24);
  }
  ScaleMinK4Words(j, s[0], s[1], s[2], d, m);
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

// ---- 32-element vectors: the gemv's unit of load (block_weights.cu) ----
// vector v of a row (v < cols / 32) is 32 of its elements whose quant bytes one thread loads in
// one or two 16-byte pieces, with the few header bytes they need: LoadVec<F> loads them into
// registers (RawVec); part p (0..3) of them is the row's elements [VecPartStart<F>(v, p), + 8),
// parts 0, 1 one run of 16 consecutive elements, parts 2, 3 another (RunInts below). q4_0 /
// q4_1 / q8_0: vector v is block v. q4_k / q5_k: vectors 8b .. 8b + 7 lie in super-block b;
// vector w of it holds qs[32g + l0, + 16) (g = w / 2, l0 = 16 (w % 2)): low nibbles are
// elements 64g + l0 + [0, 16) (sub-block 2g), high ones those + 32 (2g + 1).
// q6_k: vector w holds ql[64h + 32k + l0, + 16) and qh[32h + l0, + 16) (h = w / 4,
// k = (w / 2) % 2, l0 = 16 (w % 2)): elements 128h + 32k + l0 + [0, 16) (low nibbles, qh bits
// 2k) and those + 64 (high nibbles, qh bits 2k + 4).

struct RawVec {
  // quant bytes, little-endian words: the nibbles of 4-bit formats in q[0, 4) (q5_k's fifth
  // bits and q6_k's top two in q[4, 8)); q8_0's 32 int8s in q[0, 8).
  uint32_t q[8];
  // q4_k / q5_k: the block's first 16 bytes (d, dmin, scales[12]); q6_k: d | the vector's two
  // int8 scales << 16, << 24; q4_0 / q8_0: d; q4_1: d | m << 16.
  uint32_t head[4];
};

// the 4 bytes at p (4-byte aligned), 2 bytes (2-byte aligned), 1 byte: weights are read once,
// so the device loads stream past the caches.
VQ_HOST_DEVICE uint32_t LoadU32(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldcs(reinterpret_cast<const unsigned int*>(p));
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
VQ_HOST_DEVICE uint32_t LoadU16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldcs(reinterpret_cast<const unsigned short*>(p));
#else
  return static_cast<uint32_t>(p[0] | (p[1] << 8));
#endif
}
VQ_HOST_DEVICE uint32_t LoadU8(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldcs(reinterpret_cast<const unsigned char*>(p));
#else
  return p[0];
#endif
}

// out[0, 4) = the 16 bytes at p, p kAlign-byte aligned (16, 4 or 2). kAlign 16: one vector
// load; 4: four word loads; 2: the four words from p rounded down to 4 bytes, plus the two
// bytes past them when p was not 4-aligned, shifted into place (never a byte outside
// [p - 2, p + 16)).
template <int kAlign>
VQ_HOST_DEVICE void Load16(const uint8_t* p, uint32_t* out) {
  if constexpr (kAlign == 16) {
#ifdef __CUDA_ARCH__
    const uint4 v = __ldcs(reinterpret_cast<const uint4*>(p));
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
#else
    std::memcpy(out, p, 16);
#endif
  } else if constexpr (kAlign == 4) {
    for (int i = 0; i < 4; ++i) out[i] = LoadU32(p + 4 * i);
  } else {
    const int misalign = static_cast<int>(reinterpret_cast<uintptr_t>(p) & 3);  // 0 or 2
    const uint8_t* base = p - misalign;
    uint32_t w[5];
    for (int i = 0; i < 4; ++i) w[i] = LoadU32(base + 4 * i);
    w[4] = misalign != 0 ? LoadU16(base + 16) : 0u;
    for (int i = 0; i < 4; ++i) {
#ifdef __CUDA_ARCH__
      out[i] = __funnelshift_r(w[i], w[i + 1], 8 * misalign);
#else
      out[i] = static_cast<uint32_t>(((uint64_t{w[i + 1]} << 32) | w[i]) >> (8 * misalign));
#endif
    }
  }
}

// u - offset as fp32, u < 2^22, exactly: on the device the integer is placed in the mantissa
// of 2^23 (an or and a subtraction instead of a slower int-to-float conversion).
VQ_HOST_DEVICE float BiasedToFloat(uint32_t u, int offset) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(0x4B000000u | u) - (8388608.0f + static_cast<float>(offset));
#else
  return static_cast<float>(static_cast<int>(u) - offset);
#endif
}

// first element (within the row) of part p (0..3) of vector v.
template <BlockFormat F>
VQ_HOST_DEVICE int VecPartStart(int v, int p) {
  const int run = p >> 1, in_run = 8 * (p & 1);
  if constexpr (BlockTraits<F>::kBlock == 32) {
    return 32 * v + 16 * run + in_run;
  } else {
    const int b = v >> 3, w = v & 7;
    if constexpr (F == BlockFormat::kQ6_K) {
      return 256 * b + 128 * (w >> 2) + 32 * ((w >> 1) & 1) + 16 * (w & 1) + 64 * run + in_run;
    } else {
      return 256 * b + 64 * (w >> 1) + 16 * (w & 1) + 32 * run + in_run;
    }
  }
}

// vector v of the row whose blocks start at `row` (16-byte aligned), loaded.
template <BlockFormat F>
VQ_HOST_DEVICE RawVec LoadVec(const uint8_t* row, int v) {
  RawVec r{};
  const int w = v & 7;
  if constexpr (F == BlockFormat::kQ8_0) {
    const uint8_t* b = row + int64_t{v} * 34;
    r.head[0] = LoadU16(b);
    Load16<2>(b + 2, r.q);
    Load16<2>(b + 18, r.q + 4);
  } else if constexpr (F == BlockFormat::kQ4_0) {
    const uint8_t* b = row + int64_t{v} * 18;
    r.head[0] = LoadU16(b);
    Load16<2>(b + 2, r.q);
  } else if constexpr (F == BlockFormat::kQ4_1) {
    const uint8_t* b = row + int64_t{v} * 20;
    r.head[0] = LoadU32(b);
    Load16<4>(b + 4, r.q);
  } else if constexpr (F == BlockFormat::kQ4_K) {
    const uint8_t* b = row + int64_t{v >> 3} * 144;
    Load16<16>(b, r.head);
    Load16<16>(b + 16 + 32 * (w >> 1) + 16 * (w & 1), r.q);
  } else if constexpr (F == BlockFormat::kQ5_K) {
    const uint8_t* b = row + int64_t{v >> 3} * 176;
    Load16<16>(b, r.head);
    Load16<16>(b + 16 + 16 * (w & 1), r.q + 4);
    Load16<16>(b + 48 + 32 * (w >> 1) + 16 * (w & 1), r.q);
  } else {  // q6_k
    const uint8_t* b = row + int64_t{v >> 3} * 210;
    const int h = w >> 2, k = (w >> 1) & 1, l0 = 16 * (w & 1);
    Load16<2>(b + 64 * h + 32 * k + l0, r.q);
    Load16<2>(b + 128 + 32 * h + l0, r.q + 4);
    const uint8_t* sc = b + 192 + 8 * h + (w & 1) + 2 * k;
    r.head[0] = LoadU16(b + 208) | (LoadU8(sc) << 16) | (LoadU8(sc + 4) << 24);
  }
  return r;
}

// ---- 16-element runs as integers: the gemvs' unit of work (block_weights.cu) ----
// run r (0, 1) of vector v is its parts 2r, 2r + 1: the 16 row elements
// [VecPartStart<F>(v, 2r), + 16). RunInts<F> gives their quants as 16 int8 (byte i of
// q[i / 4] is element i's, 0..63 or q8_0's signed byte) and the run's factors with
// element_i = a q_i + b, so that sum_i w_i x_i = a sum_i q_i x_i + b sum_i x_i.
struct IntRun {
  uint32_t q[4];
  float a, b;
};

// word i (0..3) of run r's quants: elements 4i .. 4i + 3 of the run, one a byte.
template <BlockFormat F>
VQ_HOST_DEVICE uint32_t RunWord(const RawVec& q, int v, int r, int i) {
  if constexpr (F == BlockFormat::kQ8_0) {
    return q.q[4 * r + i];
  } else if constexpr (F == BlockFormat::kQ4_0 || F == BlockFormat::kQ4_1 ||
                       F == BlockFormat::kQ4_K) {
    return (q.q[i] >> (4 * r)) & 0x0F0F0F0Fu;
  } else if constexpr (F == BlockFormat::kQ5_K) {
    const int s = 2 * ((v & 7) >> 1) + r;  // sub-block: its fifth bits are qh bit s
    return ((q.q[i] >> (4 * r)) & 0x0F0F0F0Fu) | (((q.q[4 + i] >> s) & 0x01010101u) << 4);
  } else {  // q6_k: qh bits 2k of the quarter k
    const int k = ((v >> 1) & 1) + 2 * r;
    return ((q.q[i] >> (4 * r)) & 0x0F0F0F0Fu) | (((q.q[4 + i] >> (2 * k)) & 0x03030303u) << 4);
  }
}

// run r's factors: element_i = a q_i + b.
struct RunFactors {
  float a, b;
};

template <BlockFormat F>
VQ_HOST_DEVICE RunFactors RunScale(const RawVec& q, int v, int r) {
  const float d = HalfBitsToFloat(static_cast<uint16_t>(q.head[0]));
  if constexpr (F == BlockFormat::kQ8_0) {
    return {d, 0.0f};
  } else if constexpr (F == BlockFormat::kQ4_0) {
    return {d, -8.0f * d};
  } else if constexpr (F == BlockFormat::kQ4_1) {
    return {d, HalfBitsToFloat(static_cast<uint16_t>(q.head[0] >> 16))};
  } else if constexpr (F == BlockFormat::kQ4_K || F == BlockFormat::kQ5_K) {
    int sc, mn;
    ScaleMinK4Words(2 * ((v & 7) >> 1) + r, q.head[1], q.head[2], q.head[3], &sc, &mn);
    return {d * sc, -(HalfBitsToFloat(static_cast<uint16_t>(q.head[0] >> 16)) * mn)};
  } else {  // q6_k: values q - 32
    const float a = d * static_cast<int8_t>(q.head[0] >> (16 + 8 * r));
    return {a, -32.0f * a};
  }
}

template <BlockFormat F>
VQ_HOST_DEVICE IntRun RunInts(const RawVec& q, int v, int r) {
  IntRun out;
  for (int i = 0; i < 4; ++i) out.q[i] = RunWord<F>(q, v, r, i);
  const RunFactors f = RunScale<F>(q, v, r);
  out.a = f.a;
  out.b = f.b;
  return out;
}

}  // namespace vqserve::cuda

#endif  // VQSERVE_KERNELS_CUDA_WEIGHTS_BLOCK_FORMATS_H_
