#ifndef VQSERVE_RUNTIME_TOKENIZER_UNICODE_TABLES_H_
#define VQSERVE_RUNTIME_TOKENIZER_UNICODE_TABLES_H_

#include <cstdint>

namespace vqserve {

// codepoint classes used by the pre-tokenizer regexes.
enum UnicodeFlag : uint8_t {
  kUnicodeLetter = 1,      // \p{L}
  kUnicodeNumber = 2,      // \p{N}
  kUnicodeWhitespace = 4,  // \s (unicode White_Space)
};

// one run of codepoints sharing the same flags.
struct UnicodeRange {
  uint32_t first;
  uint32_t last;
  uint8_t flags;
};

// the UnicodeFlag bits of `cp` (0 for everything else, including invalid codepoints).
uint8_t CodepointFlags(uint32_t cp);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_TOKENIZER_UNICODE_TABLES_H_
