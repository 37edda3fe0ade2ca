#include "runtime/tokenizer/tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "runtime/tokenizer/spm_tokenizer.h"
#include "runtime/tokenizer/tokenizer_vocab.h"
#include "runtime/tokenizer/utf8.h"

namespace vqserve {

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file) {
  absl::StatusOr<TokenizerVocab> vocab = ReadTokenizerVocab(file);
  if (!vocab.ok()) return vocab.status();
  const std::string model = vocab->model;
  absl::StatusOr<std::unique_ptr<Tokenizer>> result;
  if (model == "gpt2") {
    auto t = BpeTokenizer::Create(*std::move(vocab));
    if (t.ok()) result = std::unique_ptr<Tokenizer>(std::move(*t)); else result = t.status();
  } else if (model == "llama") {
    auto t = SpmTokenizer::Create(*std::move(vocab));
    if (t.ok()) result = std::unique_ptr<Tokenizer>(std::move(*t)); else result = t.status();
  } else {
    return absl::UnimplementedError(
        absl::StrCat(file.path(), ": unsupported tokenizer.ggml.model '", model, "'"));
  }
  if (!result.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", result.status().message()));
  }
  return result;
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += TokenBytes(id);
  return out;
}

std::string StreamDecoder::Push(int32_t id) {
  pending_ += tokenizer_.TokenBytes(id);
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const Utf8Char c = DecodeUtf8(pending_, pos);
    if (c.incomplete) break;  // wait for the rest of the character
    if (c.valid) {
      out.append(pending_, pos, c.length);
    } else {
      AppendUtf8(kReplacementChar, &out);  // no continuation can make these bytes valid
    }
    pos += c.length;
  }
  pending_.erase(0, pos);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const Utf8Char c = DecodeUtf8(pending_, pos);
    if (c.valid) {
      out.append(pending_, pos, c.length);
    } else {
      AppendUtf8(kReplacementChar, &out);
    }
    pos += c.length;
  }
  pending_.clear();
  return out;
}

}  // namespace vqserve
