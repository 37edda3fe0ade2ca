#include "runtime/model/model_config.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vqserve {

absl::StatusOr<ModelConfig> ModelConfig::FromGguf(const GgufFile& file) {
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", what));
  };
  ModelConfig c;
  c.architecture = file.GetString("general.architecture", "");
  if (c.architecture.empty()) return fail("missing general.architecture");
  if (c.architecture != "llama") {
    return fail(absl::StrCat("unsupported architecture '", c.architecture, "' (vqserve runs llama-family models)"));
  }
  c.name = file.GetString("general.name", c.architecture);
  const std::string a = c.architecture + ".";
  auto required = [&](const std::string& key, int* out) -> absl::Status {
    int64_t v = file.GetInt(a + key, -1);
    if (v <= 0 || v > (1 << 30)) return fail(absl::StrCat("missing or invalid ", a, key));
    *out = static_cast<int>(v);
    return absl::OkStatus();
  };
  for (auto [key, out] : {std::pair<const char*, int*>{"block_count", &c.num_layers},
                          {"embedding_length", &c.hidden_size},
                          {"feed_forward_length", &c.ffn_size},
                          {"attention.head_count", &c.num_heads},
                          {"context_length", &c.context_length}}) {
    if (absl::Status s = required(key, out); !s.ok()) return s;
  }
  c.num_kv_heads = static_cast<int>(file.GetInt(a + "attention.head_count_kv", c.num_heads));
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) {
    return fail(absl::StrCat(a, "attention.head_count_kv (", c.num_kv_heads, ") does not divide head_count (", c.num_heads, ")"));
  }
  c.head_dim = static_cast<int>(file.GetInt(a + "attention.key_length", c.hidden_size / c.num_heads));
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) return fail("invalid head dimension");
  c.rope_dim = static_cast<int>(file.GetInt(a + "rope.dimension_count", c.head_dim));
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) return fail("invalid rope.dimension_count");
  c.rope_theta = static_cast<float>(file.GetFloat(a + "rope.freq_base", 10000.0));
  c.rms_eps = static_cast<float>(file.GetFloat(a + "attention.layer_norm_rms_epsilon", 1e-5));
  if (!(c.rope_theta > 0) || !(c.rms_eps > 0)) return fail("invalid rope.freq_base or layer_norm_rms_epsilon");

  std::string scaling = file.GetString(a + "rope.scaling.type", "none");
  float factor = static_cast<float>(file.GetFloat(a + "rope.scaling.factor", 1.0));
  if (scaling == "none" || factor == 1.0f) {
    c.rope_scaling = "none";
  } else if (scaling == "linear") {
    c.rope_scaling = "linear";
    c.rope_scaling_factor = factor;
  } else {
    return fail(absl::StrCat("unsupported rope scaling '", scaling, "'"));
  }
  c.rope_original_context = static_cast<int>(file.GetInt(a + "rope.scaling.original_context_length", c.context_length));
  // llama3-style scaling arrives as per-frequency factors in the rope_freqs tensor.
  if (file.FindTensor("rope_freqs.weight") != nullptr) c.rope_scaling = "llama3";

  const GgufValue* tokens = file.Find("tokenizer.ggml.tokens");
  int64_t vocab = file.GetInt(a + "vocab_size", tokens != nullptr && tokens->type == GgufValueType::kArray
                                                     ? static_cast<int64_t>(tokens->AsArray().size()) : -1);
  if (vocab <= 0) return fail("vocabulary size unknown (no vocab_size, no tokenizer.ggml.tokens)");
  c.vocab_size = static_cast<int>(vocab);
  const GgufTensor* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) return fail("missing tensor 'token_embd.weight'");
  if (embd->dims.size() != 2 || embd->dims[0] != c.hidden_size || embd->dims[1] != c.vocab_size) {
    return fail("token_embd.weight shape does not match embedding_length x vocab_size");
  }
  c.tied_embeddings = file.FindTensor("output.weight") == nullptr;
  return c;
}

}  // namespace vqserve
