// the chat template renderer: a template text and messages from arbitrary bytes, every style;
// the rendering holds each message's content (chatml keeps it verbatim).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "runtime/tokenizer/chat_template.h"

namespace {

// splits `s` at the byte 0x00 into at most `max` pieces.
std::vector<std::string> Split(std::string_view s, size_t max) {
  std::vector<std::string> out;
  size_t start = 0;
  while (out.size() + 1 < max) {
    size_t end = s.find('\0', start);
    if (end == std::string_view::npos) break;
    out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  out.emplace_back(s.substr(start));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  // pieces: template, bos, eos, then (role, content) pairs.
  std::vector<std::string> p =
      Split(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), 64);
  p.resize(std::max<size_t>(p.size(), 3));
  static const char* kRoles[] = {"system", "user", "assistant"};
  std::vector<vqserve::ChatMessage> messages;
  for (size_t i = 3; i + 1 < p.size(); i += 2) {
    // a role byte picks a known role; anything else keeps the fuzzed role text.
    std::string role = p[i].size() == 1 && static_cast<uint8_t>(p[i][0]) < 3
                           ? kRoles[static_cast<uint8_t>(p[i][0])]
                           : p[i];
    messages.push_back({role, p[i + 1]});
  }
  vqserve::ChatTemplate t = vqserve::ChatTemplate::FromText(p[0], p[1], p[2]);
  const std::string out = t.Apply(messages, flags & 1);
  if (t.style() == vqserve::ChatStyle::kChatMl) {
    for (const vqserve::ChatMessage& m : messages) {
      FUZZ_CHECK(out.find("<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n") !=
                     std::string::npos,
                 "chatml rendering lost a message");
    }
  }
  return 0;
}
