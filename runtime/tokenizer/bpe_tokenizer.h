#ifndef VQSERVE_RUNTIME_TOKENIZER_BPE_TOKENIZER_H_
#define VQSERVE_RUNTIME_TOKENIZER_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/special_tokens.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_vocab.h"

namespace vqserve {

// gpt-2 style byte-level bpe: bytes map to printable codepoints, words from the
// pre-tokenizer are merged by rank (lowest merge index first, leftmost on ties).
class BpeTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(TokenizerVocab vocab);

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

  // the ids of one pre-tokenized word (raw bytes), without the cache.
  std::vector<int32_t> EncodeWord(std::string_view word) const;

 private:
  explicit BpeTokenizer(TokenizerVocab vocab) : vocab_(std::move(vocab)) {}
  absl::Status Init();
  void AppendWord(std::string_view word, std::vector<int32_t>* out) const;

  // a merge of two adjacent tokens.
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  TokenizerVocab vocab_;
  PreTokenizerKind pre_ = PreTokenizerKind::kGpt2;
  std::unique_ptr<SpecialTokens> special_;
  ChatTemplate chat_template_;
  absl::flat_hash_map<std::string, int32_t> token_ids_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  int32_t byte_token_[256];            // token of each byte's printable codepoint; -1 if none
  std::vector<std::string> token_bytes_;  // decoded raw bytes of every token

  mutable std::mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_TOKENIZER_BPE_TOKENIZER_H_
