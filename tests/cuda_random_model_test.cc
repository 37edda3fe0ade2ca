// the cuda model against the cpu model on small random-weight llamas written as ggufs, at the
// attention shapes the default model's tests do not reach: head_dim 128 with 1, 4 and 8 query
// heads per kv head, head_dim 64 with 8, and the 8-dim sub-vectors of vecinfer-k1v1 / -k2v1 at
// either. the runtime picks their decode kernels on its own (v8's lean loop for 8-dim
// sub-vectors with the runtime's fp16 books, v8z's at head_dim 128; two head groups when a kv
// head has more than 4 query heads), so the whole path is checked: the gpu encode kernel, the books,
// the dispatch and the fused decode kernel. per codec (fp16, vecinfer with books trained on the
// cpu model's own keys and values): greedy picks equal (or cpu ties) and logits close, over
// prompts long enough that prefill codes pages and decode flushes more. skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/calibration/calibration_recorder.h"
#include "runtime/kv/codec_factory.h"
#include "runtime/cuda/cuda_kv_cache.h"
#include "runtime/cuda/cuda_llama_model.h"
#include "runtime/model/llama_model.h"
#include "runtime/kv/paged_kv_cache.h"
#include "runtime/kv/vecinfer_codec.h"
#include "runtime/calibration/vecinfer_trainer.h"
#include "tests/util/model_compare.h"
#include "tests/util/random_llama_gguf.h"
#include "tests/util/cuda_device.h"

namespace vqserve {
namespace {

using testing::CompareGreedyWithCpu;
using testing::GreedyComparison;
using testing::RandomLlamaShape;

constexpr int kSteps = 32;
constexpr int kCalibrationTokens = 768;
// as cuda_vecinfer_model_test: max |dlogit| over the logit range, and a different pick within
// this cpu lead is a tie.
constexpr double kCpuRelTolerance = 0.05;
constexpr double kTieMargin = 0.1;

struct Case {
  const char* name;
  int head_dim, num_heads, num_kv_heads;
  const char* codec;
};

class CudaRandomModelTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    VQ_SKIP_WITHOUT_CUDA_DEVICE();
    const Case& c = GetParam();
    RandomLlamaShape shape;
    shape.head_dim = c.head_dim;
    shape.num_heads = c.num_heads;
    shape.num_kv_heads = c.num_kv_heads;
    path_ = ::testing::TempDir() + absl::StrCat("random_llama_", c.name, ".gguf");
    testing::WriteRandomLlamaGguf(path_, shape, 11);
    LoadOptions options;
    options.quantized_decode = false;  // fp32 weights: the closest cpu path to the gpu's fp16
    auto cpu = LlamaModel::Load(path_, options);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = std::move(*cpu);
    auto gpu = LoadCudaLlamaModel(path_);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = std::move(*gpu);
    std::mt19937 rng(5);
    for (int len : {150, 200, 330}) {
      std::vector<int32_t> p = {1};  // bos
      while (static_cast<int>(p.size()) < len) p.push_back(3 + static_cast<int32_t>(rng() % (shape.vocab_size - 3)));
      prompts_.push_back(std::move(p));
    }
  }

  // vecinfer books of `codec` trained on the cpu model's keys and values over random tokens.
  std::shared_ptr<const VecInferCodebooks> TrainBooks(const std::string& codec) {
    auto options = VecInferOptionsForName(codec);
    EXPECT_TRUE(options.ok()) << options.status();
    if (!options.ok()) return nullptr;
    options->iterations = 8;
    const KvShape shape = cpu_->kv_shape();
    CalibrationRecorder rec(shape, cpu_->config().rope_theta, kCalibrationTokens);
    std::mt19937 rng(9);
    std::vector<int32_t> ids(kCalibrationTokens);
    for (int32_t& t : ids) t = 3 + static_cast<int32_t>(rng() % (cpu_->config().vocab_size - 3));
    std::vector<float> logits;
    for (int done = 0; done < kCalibrationTokens; done += 256) {
      ForwardSeq seq;
      seq.tokens = std::span<const int32_t>(ids.data() + done, 256);
      seq.cache = &rec;
      seq.kv = KvSeqRef{0, nullptr, 0, done};
      seq.want_logits = false;
      cpu_->Forward(std::span<const ForwardSeq>(&seq, 1), &logits);
    }
    auto books = TrainVecInfer(rec.data(), *options);
    EXPECT_TRUE(books.ok()) << books.status();
    if (!books.ok()) return nullptr;
    return std::make_shared<const VecInferCodebooks>(std::move(*books));
  }

  std::string path_;
  std::unique_ptr<LlamaModel> cpu_, gpu_;
  std::vector<std::vector<int32_t>> prompts_;
};

TEST_P(CudaRandomModelTest, MatchesCpuPagedCache) {
  const std::string codec_name = GetParam().codec;
  std::shared_ptr<const VecInferCodebooks> books;
  std::unique_ptr<KvCodec> codec;
  if (codec_name == "fp16") {
    auto made = MakeCodec(codec_name, cpu_->kv_shape(), nullptr);
    ASSERT_TRUE(made.ok()) << made.status();
    codec = std::move(*made);
  } else {
    books = TrainBooks(codec_name);
    ASSERT_NE(books, nullptr);
    codec = MakeVecInferCodec(books);
  }
  // pages for the longest prompt and its steps under this codec's policy (fp16 keeps no ring).
  KvCacheSpec policy;
  policy.page_tokens = codec->page_tokens();
  policy.residual_tokens = codec->residual_tokens();
  const int pages_per_seq = PagesForTokens(policy, 330 + kSteps + 1) + 1;
  std::unique_ptr<KvCache> cpu_cache = MakePagedKvCache(std::move(codec), pages_per_seq * 3, 3);
  auto gpu_cache = books == nullptr ? MakeCudaKvCache(gpu_->kv_shape(), pages_per_seq * 3, 3)
                                    : MakeCudaVecInferKvCache(books, pages_per_seq * 3, 3);
  ASSERT_TRUE(gpu_cache.ok()) << gpu_cache.status();
  EXPECT_EQ(cpu_cache->spec().page_tokens, (*gpu_cache)->spec().page_tokens);
  EXPECT_EQ(cpu_cache->spec().page_bytes, (*gpu_cache)->spec().page_bytes);
  const GreedyComparison r =
      CompareGreedyWithCpu(*cpu_, *cpu_cache, *gpu_, **gpu_cache, prompts_, pages_per_seq, kSteps,
                           kTieMargin, absl::StrCat(GetParam().name, " ", codec_name));
  EXPECT_LE(r.worst, kCpuRelTolerance);
}

// needs no device: the written gguf loads on the cpu with the shape asked for, and the books
// train on it (what the gpu cases above start from).
TEST(RandomLlamaGguf, LoadsWithItsShapeAndTrainsBooks) {
  RandomLlamaShape shape;
  shape.num_heads = 8;
  shape.num_kv_heads = 1;
  const std::string path = ::testing::TempDir() + "random_llama_cpu.gguf";
  testing::WriteRandomLlamaGguf(path, shape, 3);
  auto cpu = LlamaModel::Load(path);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const ModelConfig& c = (*cpu)->config();
  EXPECT_EQ(c.num_layers, shape.num_layers);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, shape.vocab_size);
  CalibrationRecorder rec((*cpu)->kv_shape(), c.rope_theta, 300);
  std::vector<int32_t> ids(300);
  for (int i = 0; i < 300; ++i) ids[i] = 3 + (i * 37) % (shape.vocab_size - 3);
  ForwardSeq seq;
  seq.tokens = std::span<const int32_t>(ids);
  seq.cache = &rec;
  seq.kv = KvSeqRef{0, nullptr, 0, 0};
  std::vector<float> logits;
  (*cpu)->Forward(std::span<const ForwardSeq>(&seq, 1), &logits);
  ASSERT_EQ(logits.size(), size_t(shape.vocab_size));
  float lo = logits[0], hi = logits[0];
  for (float x : logits) {
    ASSERT_TRUE(std::isfinite(x));
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_GT(hi - lo, 0.5f);  // the random output layer separates tokens
  auto options = VecInferOptionsForName("vecinfer-k1v1");
  ASSERT_TRUE(options.ok());
  options->iterations = 2;
  auto books = TrainVecInfer(rec.data(), *options);
  ASSERT_TRUE(books.ok()) << books.status();
  EXPECT_EQ(books->k_centroids.size(), size_t(shape.num_layers) * 128 / 8 * 256 * 8);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaRandomModelTest,
    ::testing::Values(Case{"d128_gqa4_fp16", 128, 8, 2, "fp16"},
                      Case{"d128_gqa4_k2v2", 128, 8, 2, "vecinfer-k2v2"},
                      Case{"d128_gqa4_k1v1", 128, 8, 2, "vecinfer-k1v1"},
                      Case{"d128_gqa4_k2v1", 128, 8, 2, "vecinfer-k2v1"},
                      Case{"d128_gqa8_k1v1", 128, 8, 1, "vecinfer-k1v1"},
                      Case{"d128_gqa8_k2v1", 128, 8, 1, "vecinfer-k2v1"},
                      Case{"d128_gqa1_k1v1", 128, 4, 4, "vecinfer-k1v1"},
                      Case{"d64_gqa8_k2v2", 64, 8, 1, "vecinfer-k2v2"},
                      Case{"d64_gqa3_k1v1", 64, 6, 2, "vecinfer-k1v1"},
                      Case{"d64_gqa3_k2v1", 64, 6, 2, "vecinfer-k2v1"},
                      Case{"d64_gqa8_k1v1", 64, 8, 1, "vecinfer-k1v1"},
                      Case{"d64_gqa8_fp16", 64, 8, 1, "fp16"}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace vqserve
