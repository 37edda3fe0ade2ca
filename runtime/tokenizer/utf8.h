#ifndef VQSERVE_RUNTIME_TOKENIZER_UTF8_H_
#define VQSERVE_RUNTIME_TOKENIZER_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vqserve {

// the replacement character U+FFFD.
inline constexpr uint32_t kReplacementChar = 0xFFFD;

// result of decoding one utf-8 sequence at the start of a buffer.
struct Utf8Char {
  uint32_t cp = kReplacementChar;  // U+FFFD when invalid or incomplete
  int length = 1;                  // bytes consumed (>= 1 unless the buffer is empty)
  bool valid = false;              // a complete, well-formed sequence
  bool incomplete = false;         // a valid prefix cut short by the end of the buffer
};

// decodes the sequence starting at s[pos] (rejects overlongs, surrogates, > U+10FFFF).
// an invalid sequence consumes its maximal valid prefix (at least one byte).
Utf8Char DecodeUtf8(std::string_view s, size_t pos);

// byte offset of the first ill-formed or truncated sequence in `s`; std::string_view::npos
// when all of `s` is well-formed utf-8.
size_t FindInvalidUtf8(std::string_view s);

// appends the utf-8 encoding of `cp` to `out`.
void AppendUtf8(uint32_t cp, std::string* out);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_TOKENIZER_UTF8_H_
