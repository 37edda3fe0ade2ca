#ifndef VQSERVE_RUNTIME_TOKENIZER_SPM_TOKENIZER_H_
#define VQSERVE_RUNTIME_TOKENIZER_SPM_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/special_tokens.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_vocab.h"

namespace vqserve {

// sentencepiece-style bpe ("llama"): spaces become U+2581, adjacent pieces merge by highest
// token score (leftmost on ties), and pieces without a token fall back to <0xXX> byte tokens.
class SpmTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<SpmTokenizer>> Create(TokenizerVocab vocab);

  std::vector<int32_t> Encode(std::string_view text, bool add_bos,
                              bool parse_special) const override;
  std::string TokenBytes(int32_t id) const override;
  int vocab_size() const override { return static_cast<int>(vocab_.tokens.size()); }
  int32_t bos_id() const override { return vocab_.bos_id; }
  int32_t eos_id() const override { return vocab_.eos_id; }
  bool IsEndOfGeneration(int32_t id) const override { return special_->IsEndOfGeneration(id); }
  std::string ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt) const override {
    return chat_template_.Apply(messages, add_generation_prompt);
  }

 private:
  explicit SpmTokenizer(TokenizerVocab vocab) : vocab_(std::move(vocab)) {}
  absl::Status Init();
  // tokenizes already-escaped text (spaces are U+2581).
  void EncodeEscaped(std::string_view text, std::vector<int32_t>* out) const;

  TokenizerVocab vocab_;
  std::unique_ptr<SpecialTokens> special_;
  ChatTemplate chat_template_;
  absl::flat_hash_map<std::string_view, int32_t> token_ids_;
  int32_t byte_token_[256];
  std::vector<std::string> token_bytes_;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_TOKENIZER_SPM_TOKENIZER_H_
