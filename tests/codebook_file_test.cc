// .vqcb artifacts: round trip, corruption and model mismatch refused, factory wiring.
#include "runtime/kv/codebook_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "runtime/kv/codec_factory.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/calibration/vecinfer_trainer.h"
#include "tests/test_paths.h"
#include "tests/util/codec_check.h"
#include "tests/util/prerequisite.h"

namespace vqserve {
namespace {

CodebookFile SmallVecInferFile(const KvShape& s) {
  auto opts = *VecInferOptionsForName("vecinfer-k2v2");
  opts.iterations = 2;
  auto cb = TrainVecInfer(testing::SyntheticCalibration(s, 64, 3), opts);
  EXPECT_TRUE(cb.ok());
  CodebookFile f;
  f.model = ModelIdentity{"synthetic", s.num_layers, s.num_kv_heads, s.num_heads, s.head_dim, 42};
  f.codec = "vecinfer-k2v2";
  f.params = {{"seed", "1"}, {"iterations", "2"}};
  f.blobs = cb->ToBlobs();
  return f;
}

std::string TempPath(const std::string& name) {
  return testing::BinaryDir() + "/" + name;
}

TEST(CodebookFileTest, RoundTripsThroughDiskAndBuildsTheSameCodec) {
  KvShape s{2, 2, 4, 64};
  CodebookFile f = SmallVecInferFile(s);
  const std::string path = TempPath("codebook_file_test.vqcb");
  ASSERT_TRUE(f.Save(path).ok());
  auto g = CodebookFile::Load(path);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->codec, f.codec);
  EXPECT_EQ(g->params, f.params);
  EXPECT_EQ(g->blobs, f.blobs);
  EXPECT_EQ(g->model.metadata_hash, 42u);
  EXPECT_TRUE(g->CheckModel(f.model, path).ok());
  auto a = MakeCodec("vecinfer-k2v2", s, &f);
  auto b = MakeCodec("vecinfer-k2v2", s, &*g);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> k, v;
  testing::SyntheticKv(s, 32, 9, &k, &v);
  std::vector<uint8_t> pa((*a)->LayerPageBytes()), pb(pa.size());
  (*a)->EncodePage(1, 0, k.data(), v.data(), pa.data());
  (*b)->EncodePage(1, 0, k.data(), v.data(), pb.data());
  EXPECT_EQ(pa, pb);
  std::remove(path.c_str());
}

TEST(CodebookFileTest, RefusesCorruptionAndTruncation) {
  KvShape s{1, 1, 1, 64};
  const std::string bytes = SmallVecInferFile(s).Serialize();
  for (size_t pos : {size_t{0}, size_t{5}, size_t{20}, bytes.size() / 2, bytes.size() - 1}) {
    std::string bad = bytes;
    bad[pos] ^= 0x10;
    auto r = CodebookFile::Parse(bad, "x.vqcb");
    ASSERT_FALSE(r.ok()) << pos;
    EXPECT_NE(r.status().message().find("x.vqcb: "), std::string::npos);
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
  for (size_t len : {size_t{0}, size_t{3}, size_t{30}, bytes.size() - 8, bytes.size() - 1}) {
    EXPECT_FALSE(CodebookFile::Parse(bytes.substr(0, len), "x.vqcb").ok()) << len;
  }
  EXPECT_FALSE(CodebookFile::Load(TempPath("does_not_exist.vqcb")).ok());
}

// an artifact of another format version (checksum intact) is refused in one line naming it;
// today's version (1) is what every artifact so far was written with.
TEST(CodebookFileTest, RefusesAnotherVersionInOneLine) {
  KvShape s{1, 1, 1, 64};
  std::string bytes = SmallVecInferFile(s).Serialize();
  ASSERT_TRUE(CodebookFile::Parse(bytes, "x.vqcb").ok());
  const uint32_t v2 = 2;
  std::memcpy(bytes.data() + 4, &v2, 4);
  const uint64_t sum = Hash64(std::string_view(bytes).substr(0, bytes.size() - 8));
  std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
  auto r = CodebookFile::Parse(bytes, "x.vqcb");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("x.vqcb: "), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("version 2"), std::string::npos) << r.status();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
}

// keys written in order by Serialize; a file whose keys repeat or go back (found by the
// codebook_file fuzzer: two empty parameter keys parsed into one) is refused in one line.
TEST(CodebookFileTest, RefusesRepeatedOrUnorderedKeys) {
  KvShape s{1, 1, 1, 64};
  CodebookFile f = SmallVecInferFile(s);
  f.params = {{"aaaa", "1"}, {"bbbb", "2"}};
  const std::string good = f.Serialize();
  ASSERT_TRUE(CodebookFile::Parse(good, "x.vqcb").ok());
  for (auto [key, want] : {std::pair{"aaaa", "parameter keys repeat 'aaaa'"},
                           std::pair{"aaa0", "parameter keys out of order at 'aaa0'"}}) {
    std::string bytes = good;
    const size_t at = bytes.find("bbbb");
    ASSERT_NE(at, std::string::npos);
    bytes.replace(at, 4, key);
    const uint64_t sum = Hash64(std::string_view(bytes).substr(0, bytes.size() - 8));
    std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
    auto r = CodebookFile::Parse(bytes, "x.vqcb");
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_EQ(r.status().message(), std::string("x.vqcb: ") + want);
  }
}

TEST(CodebookFileTest, RefusesAnotherModel) {
  const std::string model = testing::DefaultModelPath();
  if (model.empty()) VQ_SKIP_UNLESS_CI << "default model missing";
  auto gguf = GgufFile::Open(model);
  ASSERT_TRUE(gguf.ok());
  auto id = ModelIdentity::FromGguf(**gguf);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->num_layers, 30);
  EXPECT_EQ(id->num_kv_heads, 3);
  EXPECT_EQ(id->num_heads, 9);
  EXPECT_EQ(id->head_dim, 64);
  CodebookFile f;
  f.model = *id;
  f.codec = "kivi-k2v2";
  EXPECT_TRUE(f.CheckModel(*id, "a.vqcb").ok());
  ModelIdentity other = *id;
  other.head_dim = 128;
  auto st = f.CheckModel(other, "a.vqcb");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("a.vqcb"), std::string::npos);
  EXPECT_NE(st.message().find("head_dim"), std::string::npos);
  other = *id;
  other.metadata_hash ^= 1;
  EXPECT_FALSE(f.CheckModel(other, "a.vqcb").ok());
}

TEST(CodebookFileTest, FactoryChecksCodecNameAndShape) {
  KvShape s{2, 2, 4, 64};
  CodebookFile f = SmallVecInferFile(s);
  EXPECT_FALSE(MakeCodec("vecinfer-k2v2", s, nullptr).ok());
  EXPECT_FALSE(MakeCodec("vecinfer-k4v4", s, &f).ok());
  EXPECT_FALSE(MakeCodec("vecinfer-k2v2", KvShape{2, 2, 4, 128}, &f).ok());
  EXPECT_FALSE(MakeCodec("nonsense", s, nullptr).ok());
  // names read from an artifact stay one line in errors (codebook_file fuzzer finding: a codec
  // name starting with a newline).
  auto unknown = MakeCodec("\nivi-k2v", s, nullptr);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message().find('\n'), std::string::npos) << unknown.status();
  EXPECT_NE(unknown.status().message().find("'\\x0aivi-k2v'"), std::string::npos) << unknown.status();
  CodebookFile other = f;
  other.codec = "vecinfer\n";
  auto mismatch = MakeCodec("vecinfer-k2v2", s, &other);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().message().find('\n'), std::string::npos) << mismatch.status();
  f.blobs.erase("lambda");
  EXPECT_FALSE(MakeCodec("vecinfer-k2v2", s, &f).ok());
  for (const std::string& name : {"fp16", "kivi-k2v2", "kivi-k4v4"}) {
    auto c = MakeCodec(name, s, nullptr);
    ASSERT_TRUE(c.ok()) << name;
    EXPECT_EQ((*c)->name(), name);
  }
}

}  // namespace
}  // namespace vqserve
