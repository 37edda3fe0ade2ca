// the bpe (default model) and sentencepiece (tests/data) tokenizers on arbitrary bytes: ids
// stay in the vocabulary, stream decoding of any id sequence emits valid utf-8.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  const vqserve::Tokenizer& tok = vqserve::fuzz::LoadTokenizer(
      flags & 1 ? vqserve::fuzz::kSpmModel : vqserve::fuzz::kBpeModel);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool add_bos = flags & 2;
  const bool parse_special = flags & 4;
  std::vector<int32_t> ids = tok.Encode(text, add_bos, parse_special);
  for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < tok.vocab_size(), "id outside the vocabulary");
  (void)tok.Decode(ids);
  // the bytes themselves, read as ids, through the stream decoder.
  vqserve::StreamDecoder stream(tok);
  std::string streamed;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    const int32_t id = (static_cast<uint8_t>(text[i]) << 8 | static_cast<uint8_t>(text[i + 1])) %
                       tok.vocab_size();
    streamed += stream.Push(id);
  }
  streamed += stream.Flush();
  FUZZ_CHECK(vqserve::FindInvalidUtf8(streamed) == std::string_view::npos,
             "stream decoder emitted invalid utf-8");
  return 0;
}
