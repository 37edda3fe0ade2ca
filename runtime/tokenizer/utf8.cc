#include "runtime/tokenizer/utf8.h"

namespace vqserve {

Utf8Char DecodeUtf8(std::string_view s, size_t pos) {
  Utf8Char r;
  if (pos >= s.size()) {
    r.length = 0;
    return r;
  }
  const uint8_t b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) {
    r.cp = b0;
    r.valid = true;
    return r;
  }
  int need;
  uint32_t cp;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return r;  // stray continuation byte or invalid lead byte
  }
  int got = 0;
  for (; got < need; ++got) {
    const size_t p = pos + 1 + got;
    if (p >= s.size()) {
      r.length = 1 + got;
      r.incomplete = true;
      return r;
    }
    const uint8_t b = static_cast<uint8_t>(s[p]);
    const uint8_t min = got == 0 ? lo : 0x80;
    const uint8_t max = got == 0 ? hi : 0xBF;
    if (b < min || b > max) {
      r.length = 1 + got;
      return r;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  r.cp = cp;
  r.length = 1 + need;
  r.valid = true;
  return r;
}

size_t FindInvalidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Char c = DecodeUtf8(s, pos);
    if (!c.valid) return pos;
    pos += c.length;
  }
  return std::string_view::npos;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace vqserve
