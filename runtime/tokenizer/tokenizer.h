#ifndef VQSERVE_RUNTIME_TOKENIZER_TOKENIZER_H_
#define VQSERVE_RUNTIME_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/gguf/gguf_file.h"

namespace vqserve {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// the model's tokenizer from gguf metadata: gpt-2 byte-level bpe ("gpt2") or
// sentencepiece-style bpe with byte fallback ("llama").
class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);
  virtual ~Tokenizer() = default;

  // token ids of `text`; special tokens written in the text are matched when parse_special.
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_bos,
                                      bool parse_special) const = 0;
  // the raw bytes of one token (may be part of a utf-8 character).
  virtual std::string TokenBytes(int32_t id) const = 0;
  // bytes of a token sequence (may end inside a utf-8 character).
  std::string Decode(const std::vector<int32_t>& ids) const;

  virtual int vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  // true for end-of-generation tokens (eos, <|im_end|>, <|eot_id|> ...).
  virtual bool IsEndOfGeneration(int32_t id) const = 0;
  // the prompt text for chat messages from the model's template (chatml for the default model).
  virtual std::string ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt) const = 0;
};

// turns a token stream into text deltas that never split a utf-8 character.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // text completed by `id` (possibly empty while a character is incomplete).
  std::string Push(int32_t id);
  // whatever is still pending (invalid bytes become U+FFFD).
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_TOKENIZER_TOKENIZER_H_
