#include "tests/util/decode_case.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

namespace vqserve::testing {

uint16_t FloatToHalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    f = mant ? NAN : INFINITY;
  } else {
    f = std::ldexp(static_cast<float>(mant | 0x400u), exp - 25);
  }
  uint32_t x;
  std::memcpy(&x, &f, 4);
  x |= sign;
  std::memcpy(&f, &x, 4);
  return f;
}

int CodedTokensFor(int n, int residual_tokens, int page_tokens) {
  const int window = residual_tokens + page_tokens;
  if (n < window) return residual_tokens == 0 ? (n / page_tokens) * page_tokens : 0;
  return ((n - residual_tokens) / page_tokens) * page_tokens;
}

size_t LayerPageBytesFor(const DecodeCaseSpec& s) {
  const size_t H = s.num_kv_heads, D = s.head_dim, P = 32;
  switch (s.format) {
    case KvPageFormat::kFp16:
      return 4 * H * P * D;
    case KvPageFormat::kKivi:
      return 4 * H * D + 4 * H * P * (D / 32) + 2 * H * D * P * s.kivi_bits / 8;
    case KvPageFormat::kVecInfer:
      return H * P * ((D / s.vq_k_sub_dim) * s.vq_k_code_bits / 8 +
                      (D / s.vq_v_sub_dim) * s.vq_v_code_bits / 8);
  }
  return 0;
}

DecodeCase MakeDecodeCase(const DecodeCaseSpec& spec) {
  DecodeCase c;
  c.spec = spec;
  c.batch = static_cast<int>(spec.lens.size());
  std::mt19937_64 rng(spec.seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const int H = spec.num_kv_heads, D = spec.head_dim, P = c.page_tokens;
  c.layer_page_bytes = LayerPageBytesFor(spec);
  c.page_bytes = c.layer_page_bytes * c.num_layers;
  c.ring_tokens = spec.residual_tokens + P;
  int max_pages = 0, total_pages = 0;
  for (int b = 0; b < c.batch; ++b) {
    const int coded = CodedTokensFor(spec.lens[b], spec.residual_tokens, P);
    c.coded_lens.push_back(coded);
    c.res_lens.push_back(spec.lens[b] - coded);
    max_pages = std::max(max_pages, coded / P);
    total_pages += coded / P;
  }
  c.num_pages = total_pages + 3;  // a few unused pages
  c.block_table_stride = max_pages + 1;
  std::vector<int32_t> ids(c.num_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  c.block_tables.assign(static_cast<size_t>(c.batch) * c.block_table_stride, 0);
  int next = 0;
  for (int b = 0; b < c.batch; ++b) {
    for (int j = 0; j < c.coded_lens[b] / P; ++j) c.block_tables[b * c.block_table_stride + j] = ids[next++];
  }
  c.pages.resize(c.page_bytes * c.num_pages);
  uint8_t* pg = c.pages.data();
  const size_t n = c.pages.size();
  switch (spec.format) {
    case KvPageFormat::kFp16:
      for (size_t i = 0; i + 1 < n; i += 2) {
        const uint16_t h = FloatToHalfBits(1.7f * unit(rng));
        std::memcpy(pg + i, &h, 2);
      }
      break;
    case KvPageFormat::kVecInfer:
      for (size_t i = 0; i < n; ++i) pg[i] = static_cast<uint8_t>(rng());
      break;
    case KvPageFormat::kKivi: {
      for (size_t i = 0; i < n; ++i) pg[i] = static_cast<uint8_t>(rng());
      const size_t halves = 2 * H * D + 2 * H * P * (D / 32);  // min/scale headers
      for (int page = 0; page < c.num_pages * c.num_layers; ++page) {
        uint16_t* hdr = reinterpret_cast<uint16_t*>(pg + page * c.layer_page_bytes);
        for (size_t i = 0; i < halves; ++i) {
          const bool is_scale = (i >= static_cast<size_t>(H * D) && i < static_cast<size_t>(2 * H * D)) ||
                                i >= static_cast<size_t>(2 * H * D + H * P * (D / 32));
          const float levels = static_cast<float>((1 << spec.kivi_bits) - 1);
          const float v = is_scale ? (0.5f + 0.5f * unit(rng)) * 3.0f / levels : -1.5f + 0.3f * unit(rng);
          const uint16_t h = FloatToHalfBits(v);
          std::memcpy(hdr + i, &h, 2);
        }
      }
      break;
    }
  }
  // rings: slots are a permutation inside batch + 1 slots.
  std::vector<int32_t> slot_ids(c.batch + 1);
  std::iota(slot_ids.begin(), slot_ids.end(), 0);
  std::shuffle(slot_ids.begin(), slot_ids.end(), rng);
  c.slots.assign(slot_ids.begin(), slot_ids.begin() + c.batch);
  const size_t ring_elems = static_cast<size_t>(c.batch + 1) * c.ring_tokens * H * D;
  c.ring_k.resize(ring_elems);
  c.ring_v.resize(ring_elems);
  for (size_t i = 0; i < ring_elems; ++i) {
    c.ring_k[i] = FloatToHalfBits(1.7f * unit(rng));
    c.ring_v[i] = FloatToHalfBits(1.7f * unit(rng));
  }
  const size_t qn = static_cast<size_t>(c.batch) * spec.num_heads * D;
  c.q.resize(qn);
  c.q_tilde.resize(qn);
  for (size_t i = 0; i < qn; ++i) c.q[i] = 1.7f * unit(rng);
  for (size_t i = 0; i < qn; ++i) c.q_tilde[i] = 1.7f * unit(rng);
  if (spec.format == KvPageFormat::kVecInfer) {
    c.codebook_heads = spec.vq_per_head ? H : 1;
    c.k_codebook.resize((static_cast<size_t>(c.codebook_heads) * D) << spec.vq_k_code_bits);
    c.v_codebook.resize((static_cast<size_t>(c.codebook_heads) * D) << spec.vq_v_code_bits);
    for (float& x : c.k_codebook) x = 1.2f * unit(rng);
    for (float& x : c.v_codebook) x = 1.7f * unit(rng);
  }
  return c;
}

}  // namespace vqserve::testing
