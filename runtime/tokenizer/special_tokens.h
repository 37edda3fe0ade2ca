#ifndef VQSERVE_RUNTIME_TOKENIZER_SPECIAL_TOKENS_H_
#define VQSERVE_RUNTIME_TOKENIZER_SPECIAL_TOKENS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "runtime/tokenizer/tokenizer_vocab.h"

namespace vqserve {

// a piece of input text: either raw text to tokenize or one special token already matched.
struct TextFragment {
  std::string_view text;  // empty for a matched token
  int32_t token = -1;     // >= 0 for a matched token
};

// special tokens of a vocab: matching them in text and end-of-generation ids.
class SpecialTokens {
 public:
  explicit SpecialTokens(const TokenizerVocab& vocab);

  // splits `text` at special tokens written in it, longest token text first. user-defined
  // tokens always match; control and unknown tokens only when parse_special.
  std::vector<TextFragment> Partition(std::string_view text, bool parse_special) const;

  // eos, eot, eom and known end-of-turn tokens present in the vocab.
  bool IsEndOfGeneration(int32_t id) const { return eog_.contains(id); }

 private:
  struct Entry {
    std::string_view text;
    int32_t id;
    bool always;  // user-defined: matched even without parse_special
  };
  std::vector<Entry> entries_;  // longest text first
  absl::flat_hash_set<int32_t> eog_;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_TOKENIZER_SPECIAL_TOKENS_H_
