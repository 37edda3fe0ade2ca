// tokenizer tests: ids against llama.cpp fixtures (tools/make_tokenizer_fixture.py), round
// trips, streaming decode, special tokens and chat templates.
#include "runtime/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/utf8.h"
#include "tests/test_paths.h"
#include "tests/util/gguf_writer.h"
#include "tests/util/prerequisite.h"

namespace vqserve {
namespace {

using ::nlohmann::json;
using ::vqserve::testing::DefaultModelPath;
using ::vqserve::testing::TestDataPath;

std::vector<json> ReadJsonl(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(json::parse(line));
  }
  return out;
}

// true when every byte of `s` survives encoding: the default vocab has no token for some
// ascii control bytes, and llama.cpp (like us) drops them.
bool AllBytesHaveTokens(const Tokenizer& t, std::string_view s) {
  for (char c : s) {
    if (static_cast<uint8_t>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r' &&
        t.Encode(std::string(1, c), false, false).empty()) {
      return false;
    }
  }
  return true;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Char c = DecodeUtf8(s, pos);
    if (!c.valid) return false;
    pos += c.length;
  }
  return true;
}

std::string Printable(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// the id of the token whose bytes are exactly `bytes`; -1 if none.
int32_t FindToken(const Tokenizer& t, std::string_view bytes) {
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    if (t.TokenBytes(id) == bytes) return id;
  }
  return -1;
}

// a tokenizer loaded from a gguf file with its fixture records.
struct Loaded {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<json> records;
};

Loaded Load(const std::string& model, const std::string& fixture) {
  Loaded l;
  auto file = GgufFile::Open(model);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return l;
  l.file = std::move(*file);
  auto tok = Tokenizer::FromGguf(*l.file);
  EXPECT_TRUE(tok.ok()) << tok.status();
  if (tok.ok()) l.tokenizer = std::move(*tok);
  // VQSERVE_TOKENIZER_FIXTURE_DIR points at larger fixtures made the same way (manual runs).
  const char* dir = std::getenv("VQSERVE_TOKENIZER_FIXTURE_DIR");
  l.records = ReadJsonl(dir != nullptr ? std::string(dir) + "/" + fixture : TestDataPath(fixture));
  EXPECT_FALSE(l.records.empty()) << fixture;
  return l;
}

// every text record's ids equal llama.cpp's; returns the number of text records.
int ExpectFixtureIds(const Loaded& l) {
  int n = 0, mismatches = 0;
  for (const json& r : l.records) {
    if (!r.contains("text")) continue;
    ++n;
    const std::string text = r["text"];
    const std::vector<int32_t> want = r["ids"];
    const std::vector<int32_t> got = l.tokenizer->Encode(text, r["add_bos"], r["special"]);
    if (got != want) {
      ++mismatches;
      size_t at = 0;
      while (at < want.size() && at < got.size() && want[at] == got[at]) ++at;
      const size_t from = at > 3 ? at - 3 : 0;
      auto window = [&](const std::vector<int32_t>& v) {
        return Printable(std::vector<int32_t>(v.begin() + std::min(from, v.size()),
                                              v.begin() + std::min(at + 8, v.size())));
      };
      ADD_FAILURE() << "text: " << json(text).dump().substr(0, 300) << " special=" << r["special"]
                    << "\n first difference at id #" << at << "\n want: ... " << window(want)
                    << "\n got:  ... " << window(got);
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << n << " texts";
  return n;
}

class Gpt2TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (DefaultModelPath().empty()) return;
    loaded_ = new Loaded(Load(DefaultModelPath(), "tokenizer_fixture.jsonl"));
  }
  static void TearDownTestSuite() { delete loaded_; }
  void SetUp() override {
    if (loaded_ == nullptr) VQ_SKIP_UNLESS_CI << "default model missing";
    ASSERT_NE(loaded_->tokenizer, nullptr);
  }
  const Tokenizer& tok() const { return *loaded_->tokenizer; }
  static Loaded* loaded_;
};
Loaded* Gpt2TokenizerTest::loaded_ = nullptr;

TEST_F(Gpt2TokenizerTest, IdsMatchLlamaCpp) {
  EXPECT_GT(ExpectFixtureIds(*loaded_), 250);
  EXPECT_EQ(tok().vocab_size(), 49152);
}

TEST_F(Gpt2TokenizerTest, DecodeRoundTrips) {
  int lossy = 0;
  for (const json& r : loaded_->records) {
    if (!r.contains("text") || r["special"]) continue;
    const std::string text = r["text"];
    if (!AllBytesHaveTokens(tok(), text)) {
      ++lossy;
      continue;
    }
    EXPECT_EQ(tok().Decode(tok().Encode(text, false, false)), text);
  }
  EXPECT_LE(lossy, 2);
}

TEST_F(Gpt2TokenizerTest, StreamDecoderNeverSplitsCharacters) {
  int split_chars = 0;
  for (const json& r : loaded_->records) {
    if (!r.contains("text") || r["special"]) continue;
    const std::string text = r["text"];
    StreamDecoder dec(tok());
    std::string all;
    for (int32_t id : tok().Encode(text, false, false)) {
      if (!IsValidUtf8(tok().TokenBytes(id))) ++split_chars;
      const std::string delta = dec.Push(id);
      EXPECT_TRUE(IsValidUtf8(delta)) << json(text).dump();
      all += delta;
    }
    all += dec.Flush();
    if (AllBytesHaveTokens(tok(), text)) {
      EXPECT_EQ(all, text);
    }
  }
  EXPECT_GT(split_chars, 10);  // the fixture really has characters split across tokens
}

TEST_F(Gpt2TokenizerTest, StreamDecoderReplacesInvalidBytes) {
  const int32_t lead = FindToken(tok(), "\xE4");      // lead byte of a 3-byte character
  const int32_t cont = FindToken(tok(), "\xBD");      // a continuation byte
  const int32_t letter = FindToken(tok(), "a");
  ASSERT_GE(lead, 0);
  ASSERT_GE(cont, 0);
  ASSERT_GE(letter, 0);
  StreamDecoder dec(tok());
  EXPECT_EQ(dec.Push(lead), "");
  EXPECT_EQ(dec.Push(cont), "");
  EXPECT_EQ(dec.Flush(), "\xEF\xBF\xBD");  // one U+FFFD for the truncated sequence
  EXPECT_EQ(dec.Push(lead), "");
  EXPECT_EQ(dec.Push(letter), "\xEF\xBF\xBD" "a");  // cut short by an ascii letter
  EXPECT_EQ(dec.Push(cont), "\xEF\xBF\xBD");        // a stray continuation byte
  EXPECT_EQ(dec.Flush(), "");
}

TEST_F(Gpt2TokenizerTest, SpecialTokens) {
  const int32_t im_start = FindToken(tok(), "<|im_start|>");
  const int32_t im_end = FindToken(tok(), "<|im_end|>");
  const int32_t eot = FindToken(tok(), "<|endoftext|>");
  ASSERT_GE(im_start, 0);
  ASSERT_GE(im_end, 0);
  ASSERT_GE(eot, 0);
  EXPECT_TRUE(tok().IsEndOfGeneration(im_end));
  EXPECT_TRUE(tok().IsEndOfGeneration(eot));
  EXPECT_TRUE(tok().IsEndOfGeneration(tok().eos_id()));
  EXPECT_FALSE(tok().IsEndOfGeneration(im_start));
  EXPECT_FALSE(tok().IsEndOfGeneration(FindToken(tok(), "a")));
  EXPECT_EQ(tok().Encode("<|im_start|>", false, true), std::vector<int32_t>{im_start});
  const std::vector<int32_t> plain = tok().Encode("<|im_start|>", false, false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(tok().Decode(plain), "<|im_start|>");
  EXPECT_EQ(tok().Decode({im_start, im_end}), "<|im_start|><|im_end|>");
}

TEST_F(Gpt2TokenizerTest, ChatTemplateMatchesJinja) {
  int n = 0;
  for (const json& r : loaded_->records) {
    if (!r.contains("chat")) continue;
    ++n;
    std::vector<ChatMessage> msgs;
    for (const json& m : r["chat"]) msgs.push_back({m["role"], m["content"]});
    const std::string prompt = tok().ApplyChatTemplate(msgs, r["add_generation_prompt"]);
    EXPECT_EQ(prompt, r["rendered"].get<std::string>());
    EXPECT_EQ(tok().Encode(prompt, false, true), r["ids"].get<std::vector<int32_t>>());
  }
  EXPECT_GE(n, 2);
}

class SpmTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    loaded_ = new Loaded(Load(TestDataPath("spm_tokenizer.gguf"), "spm_tokenizer_fixture.jsonl"));
  }
  static void TearDownTestSuite() { delete loaded_; }
  void SetUp() override { ASSERT_NE(loaded_->tokenizer, nullptr); }
  const Tokenizer& tok() const { return *loaded_->tokenizer; }
  static Loaded* loaded_;
};
Loaded* SpmTokenizerTest::loaded_ = nullptr;

TEST_F(SpmTokenizerTest, IdsMatchLlamaCpp) { EXPECT_GT(ExpectFixtureIds(*loaded_), 250); }

TEST_F(SpmTokenizerTest, DecodeRoundTripsWithSpacePrefix) {
  int byte_fallbacks = 0;
  for (const json& r : loaded_->records) {
    if (!r.contains("text") || r["special"]) continue;
    const std::string text = r["text"];
    const std::vector<int32_t> ids = tok().Encode(text, false, false);
    for (int32_t id : ids) byte_fallbacks += tok().TokenBytes(id).size() == 1 &&
                                             static_cast<uint8_t>(tok().TokenBytes(id)[0]) >= 0x80;
    EXPECT_EQ(tok().Decode(ids), text.empty() ? "" : " " + text);
  }
  EXPECT_GT(byte_fallbacks, 10);  // rare characters went through <0xXX> tokens
}

TEST_F(SpmTokenizerTest, StreamDecoderOverByteTokens) {
  for (const json& r : loaded_->records) {
    if (!r.contains("text") || r["special"]) continue;
    const std::string text = r["text"];
    StreamDecoder dec(tok());
    std::string all;
    for (int32_t id : tok().Encode(text, false, false)) {
      const std::string delta = dec.Push(id);
      EXPECT_TRUE(IsValidUtf8(delta));
      all += delta;
    }
    EXPECT_EQ(all + dec.Flush(), text.empty() ? "" : " " + text);
  }
}

TEST_F(SpmTokenizerTest, BosAndEndOfGeneration) {
  const std::vector<int32_t> ids = tok().Encode("hello", true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], tok().bos_id());
  EXPECT_TRUE(tok().IsEndOfGeneration(tok().eos_id()));
  EXPECT_TRUE(tok().IsEndOfGeneration(FindToken(tok(), "<|im_end|>")));
  EXPECT_FALSE(tok().IsEndOfGeneration(tok().bos_id()));
}

TEST(PreTokenizerTest, DigitsSplitAndWordsCoverText) {
  using W = std::vector<std::string_view>;
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kDigitsThenGpt2, "abc 123"),
            (W{"abc", " ", "1", "2", "3"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kGpt2, "abc 123"), (W{"abc", " 123"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kGpt2, "Hi  there!\n\nit's"),
            (W{"Hi", " ", " there", "!", "\n", "\n", "it", "'s"}));
  EXPECT_EQ(PreTokenize(PreTokenizerKind::kGpt2, "caf\u00e9 \u4e16\u754c  "),
            (W{"caf\u00e9", " \u4e16\u754c", "  "}));
  EXPECT_TRUE(PreTokenize(PreTokenizerKind::kGpt2, "").empty());
  EXPECT_FALSE(PreTokenizerFromName("no-such-pre").ok());
}

TEST(ChatTemplateTest, RecognisesLlamaStyles) {
  const std::vector<ChatMessage> msgs = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}};
  ChatTemplate l3 = ChatTemplate::FromText(
      "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}", "<|begin_of_text|>",
      "<|eot_id|>");
  EXPECT_EQ(l3.style(), ChatStyle::kLlama3);
  EXPECT_EQ(l3.Apply(msgs, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  ChatTemplate l2 = ChatTemplate::FromText("{{ bos_token + '[INST] ' }}", "<s>", "</s>");
  EXPECT_EQ(l2.style(), ChatStyle::kLlama2);
  EXPECT_EQ(l2.Apply(msgs, true),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] Bye [/INST]");
  ChatTemplate ml = ChatTemplate::FromText(
      "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a "
      "bot.<|im_end|>\\n' }}{% endif %}",
      "", "");
  EXPECT_EQ(ml.style(), ChatStyle::kChatMl);
  EXPECT_EQ(ml.default_system(), "You are a bot.");
  EXPECT_EQ(ml.Apply({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a bot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(TokenizerFromGgufTest, RejectsUnknownModelNamingTheFile) {
  vqserve::testing::GgufWriter w;
  w.AddString("tokenizer.ggml.model", "bert-wordpiece");
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b"});
  const std::string path =
      (std::filesystem::temp_directory_path() / "vqserve_tok_bad_model.gguf").string();
  w.WriteFile(path);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto tok = Tokenizer::FromGguf(**file);
  EXPECT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find(path), std::string::npos) << tok.status();
  std::remove(path.c_str());
}

TEST(TokenizerFromGgufTest, TinyBpeMergesByRank) {
  // a 2-merge byte-level vocab: "a b" ranks before "ab c", so "abc" -> [abc], "ac" -> [a, c].
  vqserve::testing::GgufWriter w;
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", "gpt-2");
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "c", "ab", "abc", "\xC4\xA0"});
  w.AddStringArray("tokenizer.ggml.merges", {"a b", "ab c"});
  const std::string path =
      (std::filesystem::temp_directory_path() / "vqserve_tok_tiny_bpe.gguf").string();
  w.WriteFile(path);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->Encode("abc", false, false), (std::vector<int32_t>{4}));
  EXPECT_EQ((*tok)->Encode("ac", false, false), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ((*tok)->Encode("ab abc", false, false), (std::vector<int32_t>{3, 5, 4}));
  EXPECT_EQ((*tok)->Decode({3, 5, 4}), "ab abc");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace vqserve
