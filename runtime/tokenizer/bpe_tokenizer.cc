#include "runtime/tokenizer/bpe_tokenizer.h"

#include <queue>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/utf8.h"

namespace vqserve {
namespace {

constexpr size_t kMaxCacheEntries = 1 << 16;

// gpt-2's printable codepoint for each byte: printable latin-1 bytes stand for
// themselves, the rest map to 256, 257, ... in byte order.
void BuildByteCodepoints(uint32_t byte_to_cp[256]) {
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    byte_to_cp[b] = printable ? b : next++;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(TokenizerVocab vocab) {
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer(std::move(vocab)));
  if (absl::Status s = t->Init(); !s.ok()) return s;
  return t;
}

absl::Status BpeTokenizer::Init() {
  auto pre = PreTokenizerFromName(vocab_.pre.empty() ? "gpt2" : vocab_.pre);
  if (!pre.ok()) return pre.status();
  pre_ = *pre;
  special_ = std::make_unique<SpecialTokens>(vocab_);
  chat_template_ = ChatTemplate::FromVocab(vocab_);

  const int32_t n = static_cast<int32_t>(vocab_.tokens.size());
  token_ids_.reserve(n);
  for (int32_t i = 0; i < n; ++i) token_ids_[vocab_.tokens[i]] = i;  // last duplicate wins

  uint32_t byte_to_cp[256];
  BuildByteCodepoints(byte_to_cp);
  absl::flat_hash_map<uint32_t, uint8_t> cp_to_byte;
  for (int b = 0; b < 256; ++b) {
    cp_to_byte[byte_to_cp[b]] = static_cast<uint8_t>(b);
    std::string s;
    AppendUtf8(byte_to_cp[b], &s);
    auto it = token_ids_.find(s);
    // bytes without a token are dropped from the output, as llama.cpp does.
    byte_token_[b] = it == token_ids_.end() ? -1 : it->second;
  }

  // raw bytes of each token: printable codepoints back to bytes; others (and all
  // control / user-defined text) are kept as written.
  token_bytes_.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    const std::string& text = vocab_.tokens[i];
    const TokenType type = vocab_.types[i];
    if (type == TokenType::kControl || type == TokenType::kUserDefined) {
      token_bytes_[i] = text;
      continue;
    }
    std::string out;
    size_t pos = 0;
    while (pos < text.size()) {
      const Utf8Char c = DecodeUtf8(text, pos);
      auto it = c.valid ? cp_to_byte.find(c.cp) : cp_to_byte.end();
      if (it != cp_to_byte.end()) {
        out.push_back(static_cast<char>(it->second));
      } else {
        out.append(text, pos, c.length);
      }
      pos += c.length;
    }
    token_bytes_[i] = std::move(out);
  }

  merges_.reserve(vocab_.merges.size());
  for (size_t r = 0; r < vocab_.merges.size(); ++r) {
    const std::string& m = vocab_.merges[r];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("bad merge #", r, ": '", m, "'"));
    }
    auto l = token_ids_.find(m.substr(0, sp));
    auto rr = token_ids_.find(m.substr(sp + 1));
    auto res = token_ids_.find(std::string(m, 0, sp) + m.substr(sp + 1));
    // merges whose parts or result are not tokens can never produce a token; skip them.
    if (l == token_ids_.end() || rr == token_ids_.end() || res == token_ids_.end()) continue;
    merges_.try_emplace(PairKey(l->second, rr->second), Merge{static_cast<int32_t>(r), res->second});
  }
  return absl::OkStatus();
}

std::vector<int32_t> BpeTokenizer::EncodeWord(std::string_view word) const {
  struct Sym {
    int32_t id;
    int prev;
    int next;
  };
  std::vector<Sym> syms;
  syms.reserve(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    syms.push_back({byte_token_[static_cast<uint8_t>(word[i])], static_cast<int>(i) - 1,
                    i + 1 < word.size() ? static_cast<int>(i) + 1 : -1});
  }
  struct Candidate {
    int32_t rank;
    int left;
    int32_t left_id;
    int32_t right_id;
    bool operator<(const Candidate& o) const {  // priority_queue pops the largest
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate> queue;
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = syms[left].next;
    if (right < 0 || syms[left].id < 0 || syms[right].id < 0) return;
    auto it = merges_.find(PairKey(syms[left].id, syms[right].id));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, syms[left].id, syms[right].id});
  };
  for (int i = 0; i + 1 < static_cast<int>(syms.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Sym& l = syms[c.left];
    if (l.id != c.left_id || l.next < 0 || syms[l.next].id != c.right_id) continue;  // stale
    const int right = l.next;
    l.id = merges_.find(PairKey(c.left_id, c.right_id))->second.result;
    l.next = syms[right].next;
    if (l.next >= 0) syms[l.next].prev = c.left;
    syms[right].id = -2;  // removed
    consider(l.prev);
    consider(c.left);
  }
  std::vector<int32_t> ids;
  for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    if (syms[i].id >= 0) ids.push_back(syms[i].id);
  }
  return ids;
}

void BpeTokenizer::AppendWord(std::string_view word, std::vector<int32_t>* out) const {
  std::string key(word);
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids = EncodeWord(word);
  out->insert(out->end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::move(key), std::move(ids));
}

std::vector<int32_t> BpeTokenizer::Encode(std::string_view text, bool add_bos,
                                          bool parse_special) const {
  std::vector<int32_t> ids;
  if (add_bos && vocab_.add_bos && vocab_.bos_id >= 0) ids.push_back(vocab_.bos_id);
  for (const TextFragment& f : special_->Partition(text, parse_special)) {
    if (f.token >= 0) {
      ids.push_back(f.token);
      continue;
    }
    for (std::string_view word : PreTokenize(pre_, f.text)) AppendWord(word, &ids);
  }
  return ids;
}

std::string BpeTokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return token_bytes_[id];
}

}  // namespace vqserve
