#ifndef VQSERVE_TESTS_UTIL_DECODE_CASE_H_
#define VQSERVE_TESTS_UTIL_DECODE_CASE_H_

// random decode-attention inputs in the page formats of docs/kv_formats.md (fp16, kivi,
// vecinfer 8- or 12-bit codes): a page pool with two layers, shuffled block tables, fp16 residual
// rings, queries and codebooks. plain c++ so that gpu checks and benchmarks can share it.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kv_page_format.h"

namespace vqserve::testing {

struct DecodeCaseSpec {
  KvPageFormat format = KvPageFormat::kFp16;
  int num_heads = 8;
  int num_kv_heads = 2;
  int head_dim = 128;
  std::vector<int> lens;     // total tokens of each sequence (pages + residual ring)
  int residual_tokens = 128;  // newest tokens kept in the ring (flush policy of kv_cache.h)
  int kivi_bits = 2;
  int vq_k_sub_dim = 4;
  int vq_v_sub_dim = 4;
  int vq_k_code_bits = 8;  // 8 or 12
  int vq_v_code_bits = 8;
  bool vq_per_head = false;  // one codebook per kv head
  int layer = 1;             // the layer attended (of 2) so that layer offsets are exercised
  uint64_t seed = 1;
};

struct DecodeCase {
  DecodeCaseSpec spec;
  int batch = 0;
  int page_tokens = 32;
  int num_layers = 2;
  size_t layer_page_bytes = 0;
  size_t page_bytes = 0;  // all layers
  int num_pages = 0;
  std::vector<uint8_t> pages;           // num_pages * page_bytes
  int block_table_stride = 0;
  std::vector<int32_t> block_tables;    // (batch, block_table_stride)
  std::vector<int32_t> coded_lens;      // (batch)
  std::vector<int32_t> res_lens;        // (batch)
  std::vector<int32_t> slots;           // (batch)
  int ring_tokens = 0;                  // residual_tokens + page_tokens
  std::vector<uint16_t> ring_k, ring_v;  // (slots, ring_tokens, kv heads, head_dim) fp16 bits
  std::vector<float> q;                  // (batch, num_heads, head_dim)
  std::vector<float> q_tilde;            // vecinfer: stand-in transformed queries, same shape
  std::vector<float> k_codebook;         // vecinfer: (g, Mk, 2^k_code_bits, dk)
  std::vector<float> v_codebook;         // (g, Mv, 2^v_code_bits, dv)
  int codebook_heads = 1;                // g
};

// tokens of a sequence of n tokens held in pages under the flush policy.
int CodedTokensFor(int n, int residual_tokens, int page_tokens);
// bytes of one layer's page slice of `spec`'s format.
size_t LayerPageBytesFor(const DecodeCaseSpec& spec);
// random inputs for spec (deterministic in spec.seed).
DecodeCase MakeDecodeCase(const DecodeCaseSpec& spec);

// float <-> fp16 bits (round to nearest even).
uint16_t FloatToHalfBits(float f);
float HalfBitsToFloat(uint16_t h);

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_DECODE_CASE_H_
