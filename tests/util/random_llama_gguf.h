#ifndef VQSERVE_TESTS_UTIL_RANDOM_LLAMA_GGUF_H_
#define VQSERVE_TESTS_UTIL_RANDOM_LLAMA_GGUF_H_

#include <cstdint>
#include <string>

namespace vqserve::testing {

// the shape of a small llama written with random weights: attention shapes the default model
// lacks (head_dim 128, more query heads per kv head) for the gpu-vs-cpu model tests.
struct RandomLlamaShape {
  int num_layers = 2;
  int num_heads = 8;
  int num_kv_heads = 2;
  int head_dim = 128;
  int ffn_size = 1024;
  int vocab_size = 512;  // spm pieces: <unk>, <s>, </s>, 256 byte pieces, then "p<i>"
  int context_length = 4096;
  float rope_theta = 500000.0f;
};

// writes a gguf v3 llama of `shape` with fp32 weights: projections uniform in ±1 / sqrt(fan
// in) (q and k ±3 / sqrt: peaked attention), embeddings uniform in ±1, norms 1; untied output.
// deterministic in `seed`.
void WriteRandomLlamaGguf(const std::string& path, const RandomLlamaShape& shape, uint64_t seed);

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_RANDOM_LLAMA_GGUF_H_
