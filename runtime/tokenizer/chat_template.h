#ifndef VQSERVE_RUNTIME_TOKENIZER_CHAT_TEMPLATE_H_
#define VQSERVE_RUNTIME_TOKENIZER_CHAT_TEMPLATE_H_

#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_vocab.h"

namespace vqserve {

// prompt formats we can render; recognised from the jinja template text.
enum class ChatStyle {
  kChatMl,  // <|im_start|>role\ncontent<|im_end|>\n
  kLlama2,  // <s>[INST] <<SYS>>\n...\n<</SYS>>\n\nuser [/INST] assistant </s>
  kLlama3,  // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
};

// renders chat messages the way the model's template does, without a jinja engine.
class ChatTemplate {
 public:
  ChatTemplate() = default;
  // recognises the style of vocab.chat_template (chatml when empty or unknown), its
  // default system prompt and the bos/eos texts.
  static ChatTemplate FromVocab(const TokenizerVocab& vocab);
  // recognises a template text directly.
  static ChatTemplate FromText(std::string_view jinja, std::string bos_text,
                               std::string eos_text);

  ChatStyle style() const { return style_; }
  // system prompt the template adds when the first message is not a system message.
  const std::string& default_system() const { return default_system_; }

  std::string Apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

 private:
  std::string ApplyChatMl(const std::vector<ChatMessage>& messages, bool add_gen) const;
  std::string ApplyLlama2(const std::vector<ChatMessage>& messages) const;
  std::string ApplyLlama3(const std::vector<ChatMessage>& messages, bool add_gen) const;

  ChatStyle style_ = ChatStyle::kChatMl;
  std::string default_system_;
  std::string bos_text_;
  std::string eos_text_;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_TOKENIZER_CHAT_TEMPLATE_H_
