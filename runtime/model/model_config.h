#ifndef VQSERVE_RUNTIME_MODEL_MODEL_CONFIG_H_
#define VQSERVE_RUNTIME_MODEL_MODEL_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/gguf/gguf_file.h"

namespace vqserve {

// hyper-parameters of a llama-family model, read from gguf metadata.
struct ModelConfig {
  std::string architecture;  // "llama"
  std::string name;
  int num_layers = 0;
  int hidden_size = 0;
  int ffn_size = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int rope_dim = 0;  // rotated dims per head (== head_dim for llama)
  int vocab_size = 0;
  int context_length = 0;
  float rope_theta = 10000.0f;
  // rope scaling: "none", "linear" or "llama3" (with its factors).
  std::string rope_scaling = "none";
  float rope_scaling_factor = 1.0f;
  float rope_low_freq_factor = 1.0f;
  float rope_high_freq_factor = 4.0f;
  int rope_original_context = 0;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;

  // reads and validates the hyper-parameters; errors name the file and the key.
  static absl::StatusOr<ModelConfig> FromGguf(const GgufFile& file);
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_MODEL_MODEL_CONFIG_H_
