// gguf reader: metadata of every type, tensors, the real model, and corrupt files.
#include "runtime/gguf/gguf_file.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/model/model_config.h"
#include "tests/test_paths.h"
#include "tests/util/gguf_writer.h"
#include "tests/util/prerequisite.h"

namespace vqserve {
namespace {

using testing::GgufWriter;

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("vqserve_gguf_" + name)).string();
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

GgufWriter SmallFile() {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("u32", 7);
  w.AddInt32("i32", -5);
  w.AddUint64("u64", 1ull << 40);
  w.AddFloat32("f32", 0.25f);
  w.AddFloat64("f64", -1.5);
  w.AddBool("flag", true);
  w.AddStringArray("names", {"a", "bc", ""});
  w.AddInt32Array("ints", {1, -2, 3});
  w.AddNestedArray("nested", {{1, 2}, {3}});
  std::vector<uint8_t> t0(4 * 6);
  for (int i = 0; i < 6; ++i) { float v = i * 0.5f; std::memcpy(&t0[4 * i], &v, 4); }
  w.AddTensor("t0", {3, 2}, GgmlType::kF32, t0);
  std::vector<uint8_t> t1(2 * 4);
  for (int i = 0; i < 4; ++i) { uint16_t h = FloatToHalf(i - 1.0f); std::memcpy(&t1[2 * i], &h, 2); }
  w.AddTensor("t1", {4}, GgmlType::kF16, t1);
  return w;
}

TEST(GgufFileTest, ReadsEveryMetadataTypeAndTensors) {
  std::string path = TempPath("small.gguf");
  SmallFile().WriteFile(path);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.GetString("general.architecture", ""), "llama");
  EXPECT_EQ(f.GetInt("u32", 0), 7);
  EXPECT_EQ(f.GetInt("i32", 0), -5);
  EXPECT_EQ(f.GetInt("u64", 0), int64_t{1} << 40);
  EXPECT_FLOAT_EQ(f.GetFloat("f32", 0), 0.25);
  EXPECT_DOUBLE_EQ(f.GetFloat("f64", 0), -1.5);
  EXPECT_EQ(f.GetInt("flag", 0), 1);
  EXPECT_EQ(f.GetInt("absent", 42), 42);
  const auto& names = f.Find("names")->AsArray();
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[1].AsString(), "bc");
  EXPECT_EQ(f.Find("ints")->AsArray()[1].AsInt(), -2);
  const auto& nested = f.Find("nested")->AsArray();
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(nested[0].AsArray()[1].AsInt(), 2);
  auto t0 = f.ReadTensorF32("t0");
  ASSERT_TRUE(t0.ok());
  EXPECT_EQ(*t0, (std::vector<float>{0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f}));
  auto t1 = f.ReadTensorF32("t1");
  ASSERT_TRUE(t1.ok());
  EXPECT_EQ(*t1, (std::vector<float>{-1.0f, 0.0f, 1.0f, 2.0f}));  // fp16, exact
  EXPECT_FALSE(f.ReadTensorF32("nope").ok());
}

// every truncation of a valid file fails cleanly with the file's path in the message.
TEST(GgufFileTest, EveryTruncationFailsWithOneLine) {
  std::vector<uint8_t> bytes = SmallFile().Bytes();
  std::string path = TempPath("trunc.gguf");
  // the last tensor (t1, 8 bytes) is followed by 24 bytes of alignment padding, which a
  // file may lack; any cut before the end of its data must be refused.
  size_t data_end = bytes.size() - 24;
  for (size_t n = 0; n < data_end; n += (n < 400 ? 1 : 7)) {
    WriteBytes(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + n));
    auto file = GgufFile::Open(path);
    ASSERT_FALSE(file.ok()) << "truncated at " << n;
    std::string msg(file.status().message());
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(GgufFileTest, RandomCorruptionNeverCrashes) {
  std::vector<uint8_t> good = SmallFile().Bytes();
  std::string path = TempPath("fuzz.gguf");
  std::mt19937 rng(7);
  int refused = 0, tensors_read = 0;
  for (int iter = 0; iter < 400; ++iter) {
    std::vector<uint8_t> b = good;
    int flips = 1 + iter % 4;
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    WriteBytes(path, b);
    auto file = GgufFile::Open(path);
    if (!file.ok()) {
      ++refused;
      const std::string msg(file.status().message());
      EXPECT_EQ(msg.rfind(path, 0), 0u) << "iteration " << iter << ": " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "iteration " << iter << ": " << msg;
      continue;
    }
    // still valid: every tensor lies in the mapping and reads as its element count, or its
    // read is refused (an unknown type) with one line naming the file.
    for (const auto& t : (*file)->tensors()) {
      auto values = (*file)->ReadTensorF32(t.name);
      if (values.ok()) {
        ++tensors_read;
        EXPECT_EQ(static_cast<int64_t>(values->size()), t.num_elements()) << t.name;
      } else {
        const std::string msg(values.status().message());
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      }
    }
  }
  // both outcomes were exercised: the check above ran on files that opened.
  std::printf("random corruption: %d of 400 refused, %d tensors read from the rest\n", refused,
              tensors_read);
  EXPECT_GT(refused, 0);
  EXPECT_LT(refused, 400);
  EXPECT_GT(tensors_read, 0);
}

TEST(GgufFileTest, NamesTheProblem) {
  std::string path = TempPath("bad.gguf");
  std::vector<uint8_t> b = SmallFile().Bytes();
  b[0] = 'X';
  WriteBytes(path, b);
  EXPECT_NE(std::string(GgufFile::Open(path).status().message()).find("bad magic"), std::string::npos);

  GgufWriter v1 = SmallFile();
  v1.set_version(1);
  v1.WriteFile(path);
  EXPECT_NE(std::string(GgufFile::Open(path).status().message()).find("unsupported gguf version 1"),
            std::string::npos);

  GgufWriter unk;
  unk.AddTensor("weird", {32}, static_cast<GgmlType>(99), std::vector<uint8_t>(64));
  unk.WriteFile(path);
  EXPECT_NE(std::string(GgufFile::Open(path).status().message()).find("unsupported type 99"),
            std::string::npos);

  // a tensor whose data lies past the end (file cut inside the data section).
  GgufWriter big;
  big.AddTensor("w", {1024}, GgmlType::kF32, std::vector<uint8_t>(4096));
  std::vector<uint8_t> bb = big.Bytes();
  bb.resize(bb.size() - 100);
  WriteBytes(path, bb);
  EXPECT_NE(std::string(GgufFile::Open(path).status().message()).find("past the end"), std::string::npos);

  EXPECT_FALSE(GgufFile::Open(TempPath("does_not_exist.gguf")).ok());
}

// the default model's tensors dequantize to the values the independent gguf-py reader gives.
TEST(GgufFileTest, DefaultModelMatchesGgufPy) {
  std::string model = testing::DefaultModelPath();
  if (model.empty()) VQ_SKIP_UNLESS_CI << "default model not present (run scripts/setup)";
  auto file = GgufFile::Open(model);
  ASSERT_TRUE(file.ok()) << file.status();
  std::ifstream in(testing::TestDataPath("dequant_fixture.json"));
  nlohmann::json fx = nlohmann::json::parse(in);
  for (const auto& t : fx["tensors"]) {
    std::string name = t["name"];
    auto values = (*file)->ReadTensorF32(name);
    ASSERT_TRUE(values.ok()) << values.status();
    ASSERT_EQ(static_cast<int64_t>(values->size()), t["num_elements"].get<int64_t>()) << name;
    const auto& first = t["first"];
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_NEAR((*values)[i], first[i].get<double>(), 1e-6) << name << "[" << i << "]";
    }
    double sum = 0, sum_abs = 0;
    for (float v : *values) { sum += v; sum_abs += std::fabs(v); }
    EXPECT_NEAR(sum_abs, t["sum_abs"].get<double>(), 1e-6 * t["sum_abs"].get<double>()) << name;
    EXPECT_NEAR(sum, t["sum"].get<double>(), 1e-6 * t["sum_abs"].get<double>()) << name;
  }
}

TEST(ModelConfigTest, DefaultModelHyperParameters) {
  std::string model = testing::DefaultModelPath();
  if (model.empty()) VQ_SKIP_UNLESS_CI << "default model not present (run scripts/setup)";
  auto file = GgufFile::Open(model);
  ASSERT_TRUE(file.ok());
  auto c = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(c.ok()) << c.status();
  // compared against the file's own metadata keys, read independently here.
  const GgufFile& f = **file;
  EXPECT_EQ(c->num_layers, f.Find("llama.block_count")->AsInt());
  EXPECT_EQ(c->num_heads, f.Find("llama.attention.head_count")->AsInt());
  EXPECT_EQ(c->num_kv_heads, f.Find("llama.attention.head_count_kv")->AsInt());
  EXPECT_EQ(c->head_dim, f.Find("llama.embedding_length")->AsInt() / c->num_heads);
  EXPECT_EQ(c->context_length, f.Find("llama.context_length")->AsInt());
  EXPECT_FLOAT_EQ(c->rope_theta, f.Find("llama.rope.freq_base")->AsDouble());
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->vocab_size, static_cast<int>(f.Find("tokenizer.ggml.tokens")->AsArray().size()));
}

TEST(ModelConfigTest, RejectsMissingOrInconsistentKeys) {
  std::string path = TempPath("cfg.gguf");
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.block_count", 2);
  w.AddUint32("llama.embedding_length", 64);
  w.AddUint32("llama.feed_forward_length", 128);
  w.AddUint32("llama.attention.head_count", 4);
  w.AddUint32("llama.attention.head_count_kv", 3);  // does not divide 4
  w.AddUint32("llama.context_length", 256);
  w.WriteFile(path);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  auto c = ModelConfig::FromGguf(**file);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("head_count_kv"), std::string::npos);

  GgufWriter other;
  other.AddString("general.architecture", "mamba");
  other.WriteFile(path);
  auto f2 = GgufFile::Open(path);
  ASSERT_TRUE(f2.ok());
  EXPECT_NE(std::string(ModelConfig::FromGguf(**f2).status().message()).find("unsupported architecture"),
            std::string::npos);
}

// found by fuzz/gguf_file_fuzzer: a metadata key holding a newline made the error two lines.
TEST(GgufFileTest, ErrorsStayOneLineWhenNamesHoldControlCharacters) {
  auto file = GgufFile::Open(testing::TestDataPath("fuzz/gguf_file_newline_key.gguf"));
  ASSERT_FALSE(file.ok());
  const std::string msg(file.status().message());
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_NE(msg.find("gguf_file_newline_key.gguf: "), std::string::npos) << msg;
  GgufWriter w;
  w.AddString("bad\nkey\x01", "x");
  w.AddString("bad\nkey\x01", "y");  // a duplicate key names the key
  const std::string path = testing::BinaryDir() + "/gguf_newline_key.gguf";
  w.WriteFile(path);
  auto dup = GgufFile::Open(path);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(std::string(dup.status().message()).find("duplicate metadata key 'bad\\nkey\\x01'"),
            std::string::npos)
      << dup.status();
  std::remove(path.c_str());
}

// found by fuzz/gguf_file_fuzzer (a timeout): an array count far beyond the file's size was
// allocated before any element was read; now the count must fit the bytes left.
TEST(GgufFileTest, RefusesArrayCountsLongerThanTheFile) {
  const std::string path = testing::TestDataPath("fuzz/gguf_file_huge_array.gguf");
  auto file = GgufFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(std::string(file.status().message()).find("is longer than the file (truncated?)"),
            std::string::npos)
      << file.status();
  // by hand: one key, an array of uint8 claiming 2^27 elements, 3 bytes present.
  std::string bytes("GGUF\x03\0\0\0", 8);
  auto put = [&](uint64_t v, int n) { bytes.append(reinterpret_cast<const char*>(&v), n); };
  put(0, 8);  // tensors
  put(1, 8);  // metadata keys
  put(1, 8);
  bytes += "k";
  put(static_cast<uint32_t>(GgufValueType::kArray), 4);
  put(static_cast<uint32_t>(GgufValueType::kUint8), 4);
  put(uint64_t{1} << 27, 8);
  bytes += "abc";
  const std::string tmp = testing::BinaryDir() + "/gguf_huge_array.gguf";
  std::ofstream(tmp, std::ios::binary).write(bytes.data(), bytes.size());
  auto lying = GgufFile::Open(tmp);
  ASSERT_FALSE(lying.ok());
  EXPECT_NE(std::string(lying.status().message()).find("metadata 'k': array of 134217728 elements"),
            std::string::npos)
      << lying.status();
  std::remove(tmp.c_str());
}

// found by fuzz/gguf_file_fuzzer (ubsan): a float32 hyper-parameter of 4.25e37 read as an int
// overflowed the double -> int64 conversion; floats now saturate.
TEST(GgufFileTest, FloatsReadAsIntsSaturate) {
  GgufWriter w;
  w.AddFloat32("huge", 4.25e37f);
  w.AddFloat32("tiny", -4.25e37f);
  w.AddFloat64("nan", std::nan(""));
  w.AddFloat32("plain", 7.9f);
  const std::string path = testing::BinaryDir() + "/gguf_float_as_int.gguf";
  w.WriteFile(path);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->GetInt("huge", 0), std::numeric_limits<int64_t>::max());
  EXPECT_EQ((*file)->GetInt("tiny", 0), std::numeric_limits<int64_t>::min());
  EXPECT_EQ((*file)->GetInt("nan", 1), 0);
  EXPECT_EQ((*file)->GetInt("plain", 0), 7);
  std::remove(path.c_str());
  // the fuzzer's input: refused by the model config, not undefined behaviour.
  auto fuzzed = GgufFile::Open(testing::TestDataPath("fuzz/gguf_file_float_block_count.gguf"));
  ASSERT_TRUE(fuzzed.ok()) << fuzzed.status();
  EXPECT_FALSE(ModelConfig::FromGguf(**fuzzed).ok());
}

}  // namespace
}  // namespace vqserve
