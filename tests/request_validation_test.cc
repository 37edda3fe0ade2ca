// request validation without a model: utf-8 of every request text field (field and offset in
// the message), and that good multi-byte text passes.
#include "server/request_validation.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/tokenizer/utf8.h"

namespace vqserve {
namespace {

// one token per byte; chat messages concatenated as "role: content\n".
class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> Encode(std::string_view text, bool add_bos, bool) const override {
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(bos_id());
    for (char c : text) ids.push_back(static_cast<uint8_t>(c));
    return ids;
  }
  std::string TokenBytes(int32_t id) const override {
    return std::string(1, static_cast<char>(id));
  }
  int vocab_size() const override { return 256; }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }
  bool IsEndOfGeneration(int32_t id) const override { return id == 2; }
  std::string ApplyChatTemplate(const std::vector<ChatMessage>& messages, bool) const override {
    std::string text;
    for (const ChatMessage& m : messages) text += m.role + ": " + m.content + "\n";
    return text;
  }
};

RequestLimits Limits() {
  RequestLimits l;
  l.max_model_len = 512;
  l.vocab_size = 256;
  l.codecs = {"fp16", "kivi-k2v2"};
  l.default_codec = "fp16";
  return l;
}

v1::GenerateRequest Good() {
  v1::GenerateRequest r;
  r.set_text("Hello");
  r.set_max_tokens(4);
  return r;
}

TEST(FindInvalidUtf8Test, OffsetOfTheFirstBadSequence) {
  constexpr size_t kOk = std::string_view::npos;
  EXPECT_EQ(FindInvalidUtf8(""), kOk);
  EXPECT_EQ(FindInvalidUtf8("plain ascii"), kOk);
  EXPECT_EQ(FindInvalidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), kOk);
  EXPECT_EQ(FindInvalidUtf8(std::string("a\0b", 3)), kOk);   // nul is valid utf-8
  EXPECT_EQ(FindInvalidUtf8("caf\xC3("), 3u);                  // lead without continuation
  EXPECT_EQ(FindInvalidUtf8("\x80"), 0u);                      // stray continuation
  EXPECT_EQ(FindInvalidUtf8("ab\xC0\xAF"), 2u);                // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("x\xED\xA0\x80"), 1u);             // surrogate U+D800
  EXPECT_EQ(FindInvalidUtf8("\xF4\x90\x80\x80"), 0u);          // past U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("\xC3\xA9\xE2\x82"), 2u);          // truncated at the end
  EXPECT_EQ(FindInvalidUtf8("ok\xFF"), 2u);                    // never a lead byte
}

TEST(CheckUtf8Test, MessageNamesFieldAndByte) {
  EXPECT_TRUE(CheckUtf8("text", "caf\xC3\xA9").ok());
  absl::Status st = CheckUtf8("text", "abcdefg\xC3");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "text: invalid UTF-8 at byte 7");
}

struct Utf8Case {
  const char* name;
  void (*edit)(v1::GenerateRequest*, const std::string& bad);
  const char* message;
};

TEST(ValidateRequestTest, InvalidUtf8InEachTextFieldNamesTheField) {
  ByteTokenizer tok;
  const std::string bad("ab\xE2\x28\xA1", 5);  // a 3-byte lead at byte 2 cut by '('
  const std::vector<Utf8Case> cases = {
      {"text", [](auto* r, const std::string& b) { r->set_text(b); },
       "text: invalid UTF-8 at byte 2"},
      {"chat role", [](auto* r, const std::string& b) {
         auto* m = r->mutable_chat()->add_messages();
         m->set_role(b);
         m->set_content("hi");
       }, "chat.messages[0].role: invalid UTF-8 at byte 2"},
      {"chat content", [](auto* r, const std::string& b) {
         auto* m = r->mutable_chat()->add_messages();
         m->set_role("user");
         m->set_content("hi");
         m = r->mutable_chat()->add_messages();
         m->set_role("assistant");
         m->set_content(b);
       }, "chat.messages[1].content: invalid UTF-8 at byte 2"},
      {"stop", [](auto* r, const std::string& b) { r->add_stop(b); },
       "stop[0]: invalid UTF-8 at byte 2"},
      {"request_id", [](auto* r, const std::string& b) { r->set_request_id(b); },
       "request_id: invalid UTF-8 at byte 2"},
      {"kv_codec", [](auto* r, const std::string& b) { r->set_kv_codec(b); },
       "kv_codec: invalid UTF-8 at byte 2"},
  };
  for (const Utf8Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::GenerateRequest r = Good();
    c.edit(&r, bad);
    absl::StatusOr<EngineRequest> got = ValidateRequest(r, tok, Limits());
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(got.status().message(), c.message);
  }
  // PromptTokens (the Tokenize rpc's path) refuses the same prompt fields.
  v1::GenerateRequest r;
  r.set_text(bad);
  EXPECT_EQ(PromptTokens(r, tok, 256).status().message(), "text: invalid UTF-8 at byte 2");
}

TEST(ValidateRequestTest, MultiByteTextPasses) {
  ByteTokenizer tok;
  v1::GenerateRequest r = Good();
  r.set_text("caf\xC3\xA9 \xF0\x9F\x98\x80");
  r.add_stop("\xE2\x82\xAC");
  r.set_request_id("r\xC3\xA9q");
  r.set_kv_codec("kivi-k2v2");
  absl::StatusOr<EngineRequest> got = ValidateRequest(r, tok, Limits());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->prompt.size(), 1u + 10u);  // bos + bytes
  EXPECT_EQ(got->stop, std::vector<std::string>{"\xE2\x82\xAC"});
  EXPECT_EQ(got->request_id, "r\xC3\xA9q");
  EXPECT_EQ(got->pool, 1);
  r.clear_text();
  auto* m = r.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("\xE4\xBD\xA0\xE5\xA5\xBD");
  EXPECT_TRUE(ValidateRequest(r, tok, Limits()).ok());
}

}  // namespace
}  // namespace vqserve
