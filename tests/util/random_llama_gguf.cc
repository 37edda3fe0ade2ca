#include "tests/util/random_llama_gguf.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/util/gguf_writer.h"

namespace vqserve::testing {
namespace {

// n fp32 values uniform in [-scale, scale), as raw bytes.
std::vector<uint8_t> Uniform(std::mt19937_64& rng, int64_t n, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  std::vector<uint8_t> bytes(n * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

std::vector<uint8_t> Ones(int64_t n) {
  std::vector<float> v(n, 1.0f);
  std::vector<uint8_t> bytes(n * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

}  // namespace

void WriteRandomLlamaGguf(const std::string& path, const RandomLlamaShape& s, uint64_t seed) {
  const int hid = s.num_heads * s.head_dim;
  const int kvd = s.num_kv_heads * s.head_dim;
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("general.name", absl::StrCat("random-llama-d", s.head_dim, "-h", s.num_heads, "-kv", s.num_kv_heads));
  w.AddUint32("llama.block_count", s.num_layers);
  w.AddUint32("llama.embedding_length", hid);
  w.AddUint32("llama.feed_forward_length", s.ffn_size);
  w.AddUint32("llama.attention.head_count", s.num_heads);
  w.AddUint32("llama.attention.head_count_kv", s.num_kv_heads);
  w.AddUint32("llama.context_length", s.context_length);
  w.AddFloat32("llama.rope.freq_base", s.rope_theta);
  w.AddFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};  // unknown, control, control
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(absl::StrFormat("<0x%02X>", b));
    types.push_back(6);  // byte
  }
  while (static_cast<int>(tokens.size()) < s.vocab_size) {
    tokens.push_back(absl::StrCat("p", tokens.size()));
    types.push_back(1);  // normal
  }
  tokens.resize(s.vocab_size);
  types.resize(s.vocab_size);
  std::vector<float> scores(s.vocab_size);
  for (int i = 0; i < s.vocab_size; ++i) scores[i] = -float(i);
  w.AddString("tokenizer.ggml.model", "llama");
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddFloat32Array("tokenizer.ggml.scores", scores);
  w.AddInt32Array("tokenizer.ggml.token_type", types);

  std::mt19937_64 rng(seed);
  const float in_hid = 1.0f / std::sqrt(float(hid));
  w.AddTensor("token_embd.weight", {hid, s.vocab_size}, GgmlType::kF32, Uniform(rng, int64_t{hid} * s.vocab_size, 1.0f));
  w.AddTensor("output_norm.weight", {hid}, GgmlType::kF32, Ones(hid));
  w.AddTensor("output.weight", {hid, s.vocab_size}, GgmlType::kF32, Uniform(rng, int64_t{hid} * s.vocab_size, in_hid));
  for (int l = 0; l < s.num_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    w.AddTensor(p + "attn_norm.weight", {hid}, GgmlType::kF32, Ones(hid));
    w.AddTensor(p + "ffn_norm.weight", {hid}, GgmlType::kF32, Ones(hid));
    w.AddTensor(p + "attn_q.weight", {hid, hid}, GgmlType::kF32, Uniform(rng, int64_t{hid} * hid, 3 * in_hid));
    w.AddTensor(p + "attn_k.weight", {hid, kvd}, GgmlType::kF32, Uniform(rng, int64_t{hid} * kvd, 3 * in_hid));
    w.AddTensor(p + "attn_v.weight", {hid, kvd}, GgmlType::kF32, Uniform(rng, int64_t{hid} * kvd, in_hid));
    w.AddTensor(p + "attn_output.weight", {hid, hid}, GgmlType::kF32, Uniform(rng, int64_t{hid} * hid, in_hid));
    w.AddTensor(p + "ffn_gate.weight", {hid, s.ffn_size}, GgmlType::kF32, Uniform(rng, int64_t{hid} * s.ffn_size, in_hid));
    w.AddTensor(p + "ffn_up.weight", {hid, s.ffn_size}, GgmlType::kF32, Uniform(rng, int64_t{hid} * s.ffn_size, in_hid));
    const float in_ffn = 1.0f / std::sqrt(float(s.ffn_size));
    w.AddTensor(p + "ffn_down.weight", {s.ffn_size, hid}, GgmlType::kF32, Uniform(rng, int64_t{s.ffn_size} * hid, in_ffn));
  }
  w.WriteFile(path);
}

}  // namespace vqserve::testing
