#include "runtime/tokenizer/spm_tokenizer.h"

#include <cstdio>
#include <queue>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vqserve {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, sentencepiece's space

// length of the utf-8 sequence announced by lead byte `b` (1 for continuation bytes).
size_t LeadByteLength(uint8_t b) {
  if (b < 0xC0) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

// the byte of a "<0xXX>" token text; -1 if it is not one.
int ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return -1;
    value = value * 16 + d;
  }
  return value;
}

// `s` with every occurrence of `from` replaced by `to`.
std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t start = 0;
  while (true) {
    const size_t hit = s.find(from, start);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(start, hit - start));
    out.append(to);
    start = hit + from.size();
  }
  out.append(s.substr(start));
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SpmTokenizer>> SpmTokenizer::Create(TokenizerVocab vocab) {
  std::unique_ptr<SpmTokenizer> t(new SpmTokenizer(std::move(vocab)));
  if (absl::Status s = t->Init(); !s.ok()) return s;
  return t;
}

absl::Status SpmTokenizer::Init() {
  special_ = std::make_unique<SpecialTokens>(vocab_);
  chat_template_ = ChatTemplate::FromVocab(vocab_);
  const int32_t n = static_cast<int32_t>(vocab_.tokens.size());
  token_ids_.reserve(n);
  for (int32_t i = 0; i < n; ++i) token_ids_[vocab_.tokens[i]] = i;  // last duplicate wins

  for (int b = 0; b < 256; ++b) byte_token_[b] = vocab_.unk_id;
  token_bytes_.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    const std::string& text = vocab_.tokens[i];
    const int byte = ParseByteToken(text);
    if (vocab_.types[i] == TokenType::kByte && byte >= 0) {
      byte_token_[byte] = i;
      token_bytes_[i] = std::string(1, static_cast<char>(byte));
    } else if (vocab_.types[i] == TokenType::kControl || vocab_.types[i] == TokenType::kUnknown) {
      token_bytes_[i] = text;
    } else {
      token_bytes_[i] = ReplaceAll(text, kSpace, " ");
    }
  }
  return absl::OkStatus();
}

void SpmTokenizer::EncodeEscaped(std::string_view text, std::vector<int32_t>* out) const {
  struct Sym {
    size_t offset;
    size_t len;  // 0 once merged into its left neighbour
    int prev;
    int next;
  };
  std::vector<Sym> syms;
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = std::min(text.size() - pos, LeadByteLength(static_cast<uint8_t>(text[pos])));
    const int i = static_cast<int>(syms.size());
    syms.push_back({pos, len, i - 1, pos + len < text.size() ? i + 1 : -1});
    pos += len;
  }
  struct Bigram {
    float score;
    int left;
    int right;
    size_t len;
    bool operator<(const Bigram& o) const {  // priority_queue pops the largest
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Bigram> queue;
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t len = syms[left].len + syms[right].len;
    auto it = token_ids_.find(text.substr(syms[left].offset, len));
    if (it == token_ids_.end()) return;
    queue.push({vocab_.scores[it->second], left, right, len});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) consider(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Sym& l = syms[b.left];
    Sym& r = syms[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    consider(l.prev, b.left);
    consider(b.left, l.next);
  }
  for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    const std::string_view piece = text.substr(syms[i].offset, syms[i].len);
    auto it = token_ids_.find(piece);
    if (it != token_ids_.end()) {
      out->push_back(it->second);
      continue;
    }
    for (char c : piece) {
      const int32_t id = byte_token_[static_cast<uint8_t>(c)];
      if (id >= 0) out->push_back(id);
    }
  }
}

std::vector<int32_t> SpmTokenizer::Encode(std::string_view text, bool add_bos,
                                          bool parse_special) const {
  std::vector<int32_t> ids;
  if (add_bos && vocab_.add_bos && vocab_.bos_id >= 0) ids.push_back(vocab_.bos_id);
  bool after_special = true;  // the first fragment and those after a special token get "▁"
  for (const TextFragment& f : special_->Partition(text, parse_special)) {
    if (f.token >= 0) {
      ids.push_back(f.token);
      after_special = true;
      continue;
    }
    std::string escaped;
    if (vocab_.add_space_prefix && after_special) escaped = kSpace;
    escaped += ReplaceAll(f.text, " ", kSpace);
    EncodeEscaped(escaped, &ids);
    after_special = false;
  }
  return ids;
}

std::string SpmTokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return token_bytes_[id];
}

}  // namespace vqserve
