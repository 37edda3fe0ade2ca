#include "runtime/tokenizer/pre_tokenizer.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/unicode_tables.h"
#include "runtime/tokenizer/utf8.h"

namespace vqserve {
namespace {

// one codepoint of the input with its byte offset and class flags.
struct Cpt {
  uint32_t cp;
  uint32_t offset;
  uint8_t flags;
};

std::vector<Cpt> ToCodepoints(std::string_view text) {
  std::vector<Cpt> out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Char c = DecodeUtf8(text, pos);
    const uint8_t flags = c.valid ? CodepointFlags(c.cp) : 0;
    out.push_back({c.valid ? c.cp : kReplacementChar, static_cast<uint32_t>(pos), flags});
    pos += c.length;
  }
  return out;
}

bool IsLetter(const Cpt& c) { return c.flags & kUnicodeLetter; }
bool IsNumber(const Cpt& c) { return c.flags & kUnicodeNumber; }
bool IsSpace(const Cpt& c) { return c.flags & kUnicodeWhitespace; }
bool IsOther(const Cpt& c) { return c.flags == 0; }

// length in codepoints of the gpt-2 pattern's match at cps[pos] within [pos, end).
size_t Gpt2MatchLength(const std::vector<Cpt>& cps, size_t pos, size_t end) {
  const uint32_t c = cps[pos].cp;
  auto at = [&](size_t i) -> uint32_t { return i < end ? cps[i].cp : 0; };
  // contractions (case sensitive, as in the original pattern)
  if (c == '\'') {
    const uint32_t n1 = at(pos + 1);
    if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
    const uint32_t n2 = at(pos + 2);
    if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return 3;
  }
  // an optional leading ' ' followed by a run of one class
  const size_t body = (c == ' ' && pos + 1 < end) ? pos + 1 : pos;
  for (auto is_class : {IsLetter, IsNumber, IsOther}) {
    const size_t start = is_class(cps[pos]) ? pos : body;
    if (start >= end || !is_class(cps[start])) continue;
    size_t p = start;
    while (p < end && is_class(cps[p])) ++p;
    return p - pos;
  }
  // white space: \s+(?!\S) leaves the last space to prefix a following word; else \s+
  size_t p = pos;
  while (p < end && IsSpace(cps[p])) ++p;
  const size_t run = p - pos;
  if (p < end && run > 1) return run - 1;
  return run;
}

void SplitGpt2(const std::vector<Cpt>& cps, size_t begin, size_t end, std::string_view text,
               std::vector<std::string_view>* words) {
  auto offset = [&](size_t i) { return i < cps.size() ? cps[i].offset : text.size(); };
  size_t pos = begin;
  while (pos < end) {
    const size_t n = Gpt2MatchLength(cps, pos, end);
    words->push_back(text.substr(offset(pos), offset(pos + n) - offset(pos)));
    pos += n;
  }
}

}  // namespace

absl::StatusOr<PreTokenizerKind> PreTokenizerFromName(std::string_view name) {
  for (std::string_view n : {"gpt-2", "gpt2", "mpt", "olmo", "jais"}) {
    if (name == n) return PreTokenizerKind::kGpt2;
  }
  for (std::string_view n :
       {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"}) {
    if (name == n) return PreTokenizerKind::kDigitsThenGpt2;
  }
  return absl::UnimplementedError(absl::StrCat("unsupported pre-tokenizer '", std::string(name), "'"));
}

std::vector<std::string_view> PreTokenize(PreTokenizerKind kind, std::string_view text) {
  std::vector<std::string_view> words;
  const std::vector<Cpt> cps = ToCodepoints(text);
  if (kind == PreTokenizerKind::kGpt2) {
    SplitGpt2(cps, 0, cps.size(), text, &words);
    return words;
  }
  size_t begin = 0;
  for (size_t i = 0; i <= cps.size(); ++i) {
    if (i < cps.size() && !IsNumber(cps[i])) continue;
    SplitGpt2(cps, begin, i, text, &words);
    if (i < cps.size()) SplitGpt2(cps, i, i + 1, text, &words);
    begin = i + 1;
  }
  return words;
}

}  // namespace vqserve
