#ifndef VQSERVE_RUNTIME_TOKENIZER_TOKENIZER_VOCAB_H_
#define VQSERVE_RUNTIME_TOKENIZER_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/gguf/gguf_file.h"

namespace vqserve {

// gguf tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5,
  kByte = 6,
};

// everything a tokenizer needs from gguf metadata, independent of the file.
struct TokenizerVocab {
  std::string model;  // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;    // tokenizer.ggml.pre (gpt2 only)
  std::vector<std::string> tokens;
  std::vector<TokenType> types;     // same size as tokens (kNormal when absent)
  std::vector<float> scores;        // same size as tokens (0 when absent)
  std::vector<std::string> merges;  // "left right", best first (gpt2)
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t eot_id = -1;
  int32_t eom_id = -1;
  bool add_bos = false;
  bool add_space_prefix = false;
  std::string chat_template;  // jinja text, may be empty
};

// reads the tokenizer.* metadata of `file`; errors name the file and the bad key.
absl::StatusOr<TokenizerVocab> ReadTokenizerVocab(const GgufFile& file);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_TOKENIZER_TOKENIZER_VOCAB_H_
