#include "runtime/tokenizer/chat_template.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace vqserve {
namespace {

// undoes the escapes of a jinja string literal (\n, \t, \', \", \\).
std::string UnescapeJinja(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char c = s[++i];
      out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c);
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// the literal system prompt a chatml template inserts when messages[0] is not a system
// message: the text between "<|im_start|>system\n" and "<|im_end|>"; empty if none.
std::string FindChatMlDefaultSystem(std::string_view jinja) {
  constexpr std::string_view kOpen = "<|im_start|>system";
  const size_t open = jinja.find(kOpen);
  if (open == std::string_view::npos) return "";
  size_t start = open + kOpen.size();
  if (jinja.substr(start, 1) == "\n") {
    start += 1;
  } else if (jinja.substr(start, 2) == "\\n") {
    start += 2;
  } else {
    return "";
  }
  const size_t end = jinja.find("<|im_end|>", start);
  if (end == std::string_view::npos) return "";
  const std::string_view body = jinja.substr(start, end - start);
  // a jinja expression inside means the system text is not a fixed literal.
  if (body.find("{{") != std::string_view::npos || body.find("{%") != std::string_view::npos ||
      body.find('\'') != std::string_view::npos || body.find('"') != std::string_view::npos) {
    return "";
  }
  return UnescapeJinja(body);
}

std::string TokenText(const TokenizerVocab& vocab, int32_t id, std::string_view def) {
  if (id >= 0 && id < static_cast<int32_t>(vocab.tokens.size())) return vocab.tokens[id];
  return std::string(def);
}

}  // namespace

ChatTemplate ChatTemplate::FromVocab(const TokenizerVocab& vocab) {
  return FromText(vocab.chat_template, TokenText(vocab, vocab.bos_id, "<s>"),
                  TokenText(vocab, vocab.eos_id, "</s>"));
}

ChatTemplate ChatTemplate::FromText(std::string_view jinja, std::string bos_text,
                                    std::string eos_text) {
  ChatTemplate t;
  t.bos_text_ = std::move(bos_text);
  t.eos_text_ = std::move(eos_text);
  if (jinja.find("<|start_header_id|>") != std::string_view::npos) {
    t.style_ = ChatStyle::kLlama3;
  } else if (jinja.find("[INST]") != std::string_view::npos) {
    t.style_ = ChatStyle::kLlama2;
  } else {
    t.style_ = ChatStyle::kChatMl;
    t.default_system_ = FindChatMlDefaultSystem(jinja);
  }
  return t;
}

std::string ChatTemplate::Apply(const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt) const {
  switch (style_) {
    case ChatStyle::kLlama2:
      return ApplyLlama2(messages);
    case ChatStyle::kLlama3:
      return ApplyLlama3(messages, add_generation_prompt);
    case ChatStyle::kChatMl:
      break;
  }
  return ApplyChatMl(messages, add_generation_prompt);
}

std::string ChatTemplate::ApplyChatMl(const std::vector<ChatMessage>& messages,
                                      bool add_gen) const {
  std::string out;
  if (!default_system_.empty() && !messages.empty() && messages[0].role != "system") {
    absl::StrAppend(&out, "<|im_start|>system\n", default_system_, "<|im_end|>\n");
  }
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  }
  if (add_gen) out += "<|im_start|>assistant\n";
  return out;
}

// llama-2 chat: the system prompt is folded into the first user turn; the prompt always
// ends after a user turn's [/INST], so there is no separate generation prompt.
std::string ChatTemplate::ApplyLlama2(const std::vector<ChatMessage>& messages) const {
  std::string out;
  size_t first = 0;
  std::string system;
  if (!messages.empty() && messages[0].role == "system") {
    system = messages[0].content;
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    std::string content(absl::StripAsciiWhitespace(messages[i].content));
    if (i == first && first == 1) {
      content = absl::StrCat("<<SYS>>\n", system, "\n<</SYS>>\n\n",
                             absl::StripAsciiWhitespace(messages[i].content));
    }
    if (messages[i].role == "user") {
      absl::StrAppend(&out, bos_text_, "[INST] ", absl::StripAsciiWhitespace(content), " [/INST]");
    } else if (messages[i].role == "assistant") {
      absl::StrAppend(&out, " ", absl::StripAsciiWhitespace(content), " ", eos_text_);
    }
  }
  return out;
}

std::string ChatTemplate::ApplyLlama3(const std::vector<ChatMessage>& messages,
                                      bool add_gen) const {
  std::string out = messages.empty() ? "" : bos_text_;
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n",
                    absl::StripAsciiWhitespace(m.content), "<|eot_id|>");
  }
  if (add_gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace vqserve
