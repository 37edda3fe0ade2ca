#include "runtime/tokenizer/tokenizer_vocab.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vqserve {
namespace {

absl::Status KeyError(const GgufFile& file, const std::string& key, const char* what) {
  return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", key, " ", what));
}

// the elements of array `key` when it holds `type`; nullptr (and ok) when absent.
absl::StatusOr<const std::vector<GgufValue>*> FindArray(const GgufFile& file,
                                                        const std::string& key,
                                                        bool want_string) {
  const GgufValue* v = file.Find(key);
  if (v == nullptr) return nullptr;
  if (v->type != GgufValueType::kArray) return KeyError(file, key, "is not an array");
  const auto& arr = v->AsArray();
  for (const GgufValue& e : arr) {
    const bool ok = want_string ? e.type == GgufValueType::kString : e.is_number();
    if (!ok) return KeyError(file, key, want_string ? "has non-string elements" : "has non-numbers");
  }
  return &arr;
}

}  // namespace

absl::StatusOr<TokenizerVocab> ReadTokenizerVocab(const GgufFile& file) {
  TokenizerVocab v;
  v.model = file.GetString("tokenizer.ggml.model", "");
  if (v.model.empty()) return KeyError(file, "tokenizer.ggml.model", "is missing");
  v.pre = file.GetString("tokenizer.ggml.pre", "");

  auto tokens = FindArray(file, "tokenizer.ggml.tokens", true);
  if (!tokens.ok()) return tokens.status();
  if (*tokens == nullptr || (*tokens)->empty()) {
    return KeyError(file, "tokenizer.ggml.tokens", "is missing or empty");
  }
  const size_t n = (*tokens)->size();
  v.tokens.reserve(n);
  for (const GgufValue& t : **tokens) v.tokens.push_back(t.AsString());

  v.types.assign(n, TokenType::kNormal);
  auto types = FindArray(file, "tokenizer.ggml.token_type", false);
  if (!types.ok()) return types.status();
  if (*types != nullptr) {
    if ((*types)->size() != n) return KeyError(file, "tokenizer.ggml.token_type", "size != tokens");
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = (**types)[i].AsInt();
      if (t < 0 || t > 6) return KeyError(file, "tokenizer.ggml.token_type", "has a bad value");
      v.types[i] = static_cast<TokenType>(t);
    }
  }

  v.scores.assign(n, 0.0f);
  auto scores = FindArray(file, "tokenizer.ggml.scores", false);
  if (!scores.ok()) return scores.status();
  if (*scores != nullptr) {
    if ((*scores)->size() != n) return KeyError(file, "tokenizer.ggml.scores", "size != tokens");
    for (size_t i = 0; i < n; ++i) v.scores[i] = static_cast<float>((**scores)[i].AsDouble());
  }

  auto merges = FindArray(file, "tokenizer.ggml.merges", true);
  if (!merges.ok()) return merges.status();
  if (*merges != nullptr) {
    v.merges.reserve((*merges)->size());
    for (const GgufValue& m : **merges) v.merges.push_back(m.AsString());
  }

  const bool spm = v.model == "llama";
  auto id = [&](const char* key, int64_t def) -> absl::StatusOr<int32_t> {
    const int64_t x = file.GetInt(key, def);
    if (x < -1 || x >= static_cast<int64_t>(n)) return KeyError(file, key, "is out of range");
    return static_cast<int32_t>(x);
  };
  struct IdKey { const char* key; int64_t def; int32_t* out; };
  for (const IdKey& k : {IdKey{"tokenizer.ggml.bos_token_id", spm ? 1 : -1, &v.bos_id},
                         IdKey{"tokenizer.ggml.eos_token_id", spm ? 2 : -1, &v.eos_id},
                         IdKey{"tokenizer.ggml.unknown_token_id", spm ? 0 : -1, &v.unk_id},
                         IdKey{"tokenizer.ggml.eot_token_id", -1, &v.eot_id},
                         IdKey{"tokenizer.ggml.eom_token_id", -1, &v.eom_id}}) {
    auto x = id(k.key, k.def);
    if (!x.ok()) return x.status();
    *k.out = *x;
  }
  v.add_bos = file.GetInt("tokenizer.ggml.add_bos_token", spm ? 1 : 0) != 0;
  v.add_space_prefix = file.GetInt("tokenizer.ggml.add_space_prefix", spm ? 1 : 0) != 0;
  v.chat_template = file.GetString("tokenizer.chat_template", "");
  return v;
}

}  // namespace vqserve
