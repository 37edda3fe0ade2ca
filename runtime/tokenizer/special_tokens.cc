#include "runtime/tokenizer/special_tokens.h"

#include <algorithm>
#include <string>

namespace vqserve {

SpecialTokens::SpecialTokens(const TokenizerVocab& vocab) {
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    const TokenType t = vocab.types[i];
    if (vocab.tokens[i].empty()) continue;
    if (t != TokenType::kControl && t != TokenType::kUserDefined && t != TokenType::kUnknown) {
      continue;
    }
    entries_.push_back({vocab.tokens[i], static_cast<int32_t>(i), t == TokenType::kUserDefined});
  }
  std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    return a.text.size() > b.text.size();
  });

  for (int32_t id : {vocab.eos_id, vocab.eot_id, vocab.eom_id}) {
    if (id >= 0) eog_.insert(id);
  }
  static constexpr std::string_view kEndOfTurn[] = {
      "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<|end_of_text|>",
      "<|end|>",    "<end_of_turn>", "<|return|>", "<|call|>"};
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    if (vocab.types[i] != TokenType::kControl && vocab.types[i] != TokenType::kUserDefined) {
      continue;
    }
    for (std::string_view t : kEndOfTurn) {
      if (vocab.tokens[i] == t) eog_.insert(static_cast<int32_t>(i));
    }
  }
}

std::vector<TextFragment> SpecialTokens::Partition(std::string_view text,
                                                   bool parse_special) const {
  std::vector<TextFragment> frags;
  if (text.empty()) return frags;
  frags.push_back({text, -1});
  std::vector<TextFragment> next;
  for (const Entry& e : entries_) {
    if (!parse_special && !e.always) continue;
    next.clear();
    for (const TextFragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t start = 0;
      while (true) {
        const size_t hit = f.text.find(e.text, start);
        if (hit == std::string_view::npos) break;
        if (hit > start) next.push_back({f.text.substr(start, hit - start), -1});
        next.push_back({std::string_view(), e.id});
        start = hit + e.text.size();
      }
      if (start < f.text.size()) next.push_back({f.text.substr(start), -1});
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace vqserve
