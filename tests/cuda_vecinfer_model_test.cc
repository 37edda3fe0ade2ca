// the cuda model over a vecinfer CudaKvCache (vecinfer-k2v2, or the codec of the artifact
// VQSERVE_VQCB names: any width, 12-bit codes too; and vecinfer-k2v2-pca, the artifact of the
// fixture test_pca_codebooks or VQSERVE_PCA_VQCB) (code pages + fp16 ring on the device, pages
// encoded by the gpu encode kernel, fused decode kernel) against the cpu model (fp32 weights)
// over a PagedKvCache of the same codec and codebooks: prompts long enough that prefill codes
// pages and decode flushes more, greedy picks equal (or cpu ties) and logits close; chunked
// prefill equals token-by-token decode; the same with the attention sink (32 tokens); a step
// mixing an fp16 and a vecinfer cache equals the two alone. skips itself without a cuda device, the model (VQSERVE_MODEL) or a
// vecinfer-k2v2 artifact for it (VQSERVE_VQCB, else tests/util CodebookPath).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/kv/codebook_file.h"
#include "runtime/kv/codec_factory.h"
#include "runtime/cuda/cuda_kv_cache.h"
#include "runtime/cuda/cuda_llama_model.h"
#include "runtime/model/llama_model.h"
#include "runtime/kv/paged_kv_cache.h"
#include "tests/test_paths.h"
#include "tests/util/model_compare.h"
#include "tests/util/test_server.h"
#include "tests/util/cuda_device.h"

namespace vqserve {
namespace {

using testing::CompareGreedyWithCpu;
using testing::GreedyComparison;
using testing::MaxDiff;
using testing::RunSeq;

constexpr char kDefaultCodec[] = "vecinfer-k2v2";
constexpr int kSteps = 40;
// gpu (fp16 weights, fp16 lut scores in decode) vs cpu (fp32): max |Δlogit| over the logit
// range of the step; a code picked differently at a near-tie of two centroids moves a logit a
// little more than fp16 rounding alone.
constexpr double kCpuRelTolerance = 0.05;
constexpr double kTieMargin = 0.1;  // a different pick within this cpu lead is a tie
// chunked prefill vs one token at a time, both on the gpu.
constexpr double kChunkRelTolerance = 0.02;

// the artifact for the test's codec: VQSERVE_VQCB overrides the default codec's,
// VQSERVE_PCA_VQCB the -pca one's.
std::string VqcbPath(const std::string& codec) {
  const char* env = std::getenv(codec == kDefaultCodec ? "VQSERVE_VQCB" : "VQSERVE_PCA_VQCB");
  if (env != nullptr && *env != '\0') return env;
  return testing::CodebookPath(codec);
}

class CudaVecInferModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    VQ_SKIP_WITHOUT_CUDA_DEVICE();
    path_ = testing::DefaultModelPath();
    if (path_.empty()) GTEST_SKIP() << "no model in models/ (and VQSERVE_MODEL unset)";
    const std::string vqcb = VqcbPath(GetParam());
    ASSERT_FALSE(vqcb.empty()) << "no " << GetParam() << " codebooks: run through ctest "
                                  "(fixtures test_codebooks, test_pca_codebooks) or set VQSERVE_VQCB "
                                  "/ VQSERVE_PCA_VQCB";
    auto book = CodebookFile::Load(vqcb);
    ASSERT_TRUE(book.ok()) << book.status();
    book_ = std::make_unique<CodebookFile>(std::move(*book));
    codec_ = book_->codec;
    auto gpu = LoadCudaLlamaModel(path_);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = std::move(*gpu);
    const Tokenizer& tok = gpu_->tokenizer();
    // ~150, ~200 and ~330 prompt tokens: no page coded at prefill, one, several; decode then
    // crosses flush boundaries (every 32 tokens past 160).
    std::string text =
        "Explain, step by step, how a paged key-value cache lets a language model server batch "
        "many requests of different lengths without wasting memory, and why quantizing that "
        "cache to two bits per value helps with long contexts. ";
    prompts_ = testing::PromptsOfLengths(tok, text, std::vector<int>{150, 200, 330});
    KvCacheSpec vi;  // page 32 after a residual of 128: vecinfer's policy
    pages_per_seq_ = PagesForTokens(vi, 330 + kSteps + 1) + 1;
  }

  std::unique_ptr<KvCache> GpuCache(const std::string& codec, int sink = 0) {
    auto c = MakeCudaKvCacheForCodec(codec, gpu_->kv_shape(), codec == "fp16" ? nullptr : book_.get(),
                                     pages_per_seq_ * 3, 3, sink);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::unique_ptr<KvCache>(std::move(*c)) : nullptr;
  }

  // the gpu cache against a PagedKvCache of the same codec and sink.
  void CompareWithCpu(int sink);

  std::string path_;
  std::unique_ptr<CodebookFile> book_;
  std::string codec_;  // the artifact's codec
  std::unique_ptr<LlamaModel> gpu_;
  std::vector<std::vector<int32_t>> prompts_;
  int pages_per_seq_ = 0;
};

void CudaVecInferModelTest::CompareWithCpu(int sink) {
  LoadOptions options;
  options.quantized_decode = false;  // fp32 weights: the closest cpu path to the gpu's fp16
  auto cpu = LlamaModel::Load(path_, options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto codec = MakeCodec(codec_, (*cpu)->kv_shape(), book_.get());
  ASSERT_TRUE(codec.ok()) << codec.status();
  auto cpu_cache = MakePagedKvCache(std::move(*codec), pages_per_seq_ * 3, 3, sink);
  auto gpu_cache = GpuCache(codec_, sink);
  ASSERT_NE(gpu_cache, nullptr);
  EXPECT_EQ(cpu_cache->spec().page_bytes, gpu_cache->spec().page_bytes);
  EXPECT_EQ(cpu_cache->spec().slot_bytes, gpu_cache->spec().slot_bytes);
  EXPECT_EQ(cpu_cache->spec().fixed_bytes, gpu_cache->spec().fixed_bytes);
  EXPECT_EQ(cpu_cache->spec().sink_tokens, gpu_cache->spec().sink_tokens);
  const GreedyComparison r =
      CompareGreedyWithCpu(**cpu, *cpu_cache, *gpu_, *gpu_cache, prompts_, pages_per_seq_, kSteps,
                           kTieMargin, absl::StrCat(codec_, " sink ", sink));
  EXPECT_LE(r.worst, kCpuRelTolerance);
}

TEST_P(CudaVecInferModelTest, MatchesCpuPagedCache) { CompareWithCpu(0); }

// the attention sink (one fp16 page, the serve default) on the gpu as on the cpu.
TEST_P(CudaVecInferModelTest, MatchesCpuPagedCacheWithSink) { CompareWithCpu(32); }

TEST_P(CudaVecInferModelTest, ChunkedPrefillEqualsTokenByToken) {
  auto a = GpuCache(codec_);
  auto b = GpuCache(codec_);
  ASSERT_NE(a, nullptr);
  const std::vector<int32_t>& prompt = prompts_[2];
  std::vector<int32_t> picks_a, picks_b;
  auto whole = RunSeq(*gpu_, *a, 0, 0, pages_per_seq_, prompt, 0, kSteps, nullptr, &picks_a);
  auto chunks = RunSeq(*gpu_, *b, 1, pages_per_seq_, pages_per_seq_, prompt, 1, kSteps, &picks_a,
                       &picks_b);
  EXPECT_EQ(picks_a, picks_b);
  double range = 0.0;
  const double diff = MaxDiff(whole, chunks, &range);
  std::printf("[%s gpu] one prefill step vs %zu single-token steps: max |dlogit| %.5f (range "
              "%.2f)\n",
              codec_.c_str(), prompt.size(), diff, range);
  EXPECT_LE(diff, kChunkRelTolerance * range);
  // 64-token chunks as well (the engine's chunked prefill).
  auto c = GpuCache(codec_);
  std::vector<int32_t> picks_c;
  auto chunk64 = RunSeq(*gpu_, *c, 2, 2 * pages_per_seq_, pages_per_seq_, prompt, 64, kSteps,
                        &picks_a, &picks_c);
  const double diff64 = MaxDiff(whole, chunk64, &range);
  std::printf("[%s gpu] one prefill step vs 64-token chunks: max |dlogit| %.5f\n", codec_.c_str(), diff64);
  EXPECT_LE(diff64, kChunkRelTolerance * range);
}

TEST_P(CudaVecInferModelTest, MixedCachesInOneStepEqualAlone) {
  auto fp16_a = GpuCache("fp16"), vi_a = GpuCache(codec_);
  auto fp16_b = GpuCache("fp16"), vi_b = GpuCache(codec_);
  ASSERT_NE(fp16_a, nullptr);
  ASSERT_NE(vi_a, nullptr);
  const std::vector<int32_t>& p0 = prompts_[1];
  const std::vector<int32_t>& p1 = prompts_[2];
  std::vector<int32_t> t0(pages_per_seq_), t1(pages_per_seq_);
  for (int i = 0; i < pages_per_seq_; ++i) t0[i] = t1[i] = i;
  auto fwd = [&](std::vector<ForwardSeq> batch) {
    std::vector<float> logits;
    gpu_->Forward(batch, &logits);
    return logits;
  };
  auto seq = [&](KvCache& cache, const std::vector<int32_t>& p, std::vector<int32_t>& t) {
    ForwardSeq f;
    f.tokens = std::span<const int32_t>(p);
    f.cache = &cache;
    f.kv.slot = 0;
    f.kv.block_table = t.data();
    f.kv.num_blocks = pages_per_seq_;
    f.kv.num_cached = 0;
    return f;
  };
  // batch order vecinfer, fp16, vecinfer-less: rows come back in batch order.
  const std::vector<float> mixed = fwd({seq(*vi_a, p1, t1), seq(*fp16_a, p0, t0)});
  const std::vector<float> alone_vi = fwd({seq(*vi_b, p1, t1)});
  const std::vector<float> alone_fp16 = fwd({seq(*fp16_b, p0, t0)});
  const size_t vocab = gpu_->config().vocab_size;
  ASSERT_EQ(mixed.size(), 2 * vocab);
  double diff = 0.0;
  for (size_t i = 0; i < vocab; ++i) {
    diff = std::max(diff, double(std::fabs(mixed[i] - alone_vi[i])));
    diff = std::max(diff, double(std::fabs(mixed[vocab + i] - alone_fp16[i])));
  }
  std::printf("[mixed fp16 + %s step] max |dlogit| vs alone %.6f\n", codec_.c_str(), diff);
  EXPECT_LE(diff, 1e-3);
}

// the default 2-bit codec and its -pca keys (score-whitened principal axes, lut built outside
// the decode kernel).
INSTANTIATE_TEST_SUITE_P(Codecs, CudaVecInferModelTest,
                         ::testing::Values(std::string(kDefaultCodec), std::string("vecinfer-k2v2-pca")),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == kDefaultCodec ? std::string("k2v2") : std::string("k2v2_pca");
                         });

TEST(CudaKvCacheForCodec, RefusesWhatTheGpuCannotHold) {
  KvShape shape{2, 2, 4, 64};
  auto odd = MakeCudaKvCacheForCodec("kivi-k3v3", shape, nullptr, 1, 1);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("cuda runtime"), std::string::npos) << odd.status();
  for (const char* ok : {"fp16", "kivi-k2v2", "kivi-k4v4", "vecinfer-k2v2", "vecinfer-k4v4",
                         "vecinfer-k2v1", "vecinfer-k1v1", "vecinfer-k2v2-perhead",
                         "vecinfer-k2v2-nohadamard", "vecinfer-k3v3", "vecinfer-k4v2",
                         "vecinfer-k1.5v1.5", "vecinfer-k2v1.5-perhead", "commvq-2", "commvq-1"}) {
    EXPECT_TRUE(CudaKvCodecSupported(ok, 64).ok()) << ok;
  }
  for (const char* bad : {"kivi-k3v3", "commvq-3", "vecinfer-k5v5", "nonsense"}) {
    EXPECT_FALSE(CudaKvCodecSupported(bad, 128).ok()) << bad;
  }
  // -pca keys: the tensor-core kernel's widths (4- or 8-dim key codes of 8 bits), not 4-bit keys
  // (2-dim sub-vectors), refused in one line naming the widths it takes.
  for (const char* ok : {"vecinfer-k2v2-pca", "vecinfer-k2v1-pca", "vecinfer-k1v1-pca"}) {
    EXPECT_TRUE(CudaKvCodecSupported(ok, 64).ok()) << ok;
    EXPECT_TRUE(CudaKvCodecSupported(ok, 128).ok()) << ok;
  }
  absl::Status pca = CudaKvCodecSupported("vecinfer-k4v4-pca", 64);
  EXPECT_FALSE(pca.ok());
  EXPECT_NE(pca.message().find("-pca for k2v2, k2v1 and k1v1"), std::string::npos) << pca;
  EXPECT_FALSE(CudaKvCodecSupported("fp16", 96).ok());
}

}  // namespace
}  // namespace vqserve
