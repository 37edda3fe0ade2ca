#ifndef VQSERVE_RUNTIME_TOKENIZER_PRE_TOKENIZER_H_
#define VQSERVE_RUNTIME_TOKENIZER_PRE_TOKENIZER_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace vqserve {

// how text is cut into words before byte-level bpe.
enum class PreTokenizerKind {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // every \p{N} codepoint alone, then the gpt-2 pattern on the text between them
  // (smollm, starcoder, refact, command-r, codeshell).
  kDigitsThenGpt2,
};

// the pre-tokenizer named by gguf's tokenizer.ggml.pre; error for names we do not know.
absl::StatusOr<PreTokenizerKind> PreTokenizerFromName(std::string_view name);

// cuts `text` into consecutive non-empty words that together cover it exactly.
// invalid utf-8 bytes are treated as codepoints of no class.
std::vector<std::string_view> PreTokenize(PreTokenizerKind kind, std::string_view text);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_TOKENIZER_PRE_TOKENIZER_H_
