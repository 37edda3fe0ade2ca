// cuda graphs for decode steps (runtime/cuda/cuda_graph_cache.h): three sequences of different
// prompt lengths, prefilled, then decoded greedily together for 210 steps (crossing page
// flushes of every sequence at different steps, which replay graphs too), give the same tokens
// and logits with graphs as without (bitwise; commvq within 1e-3 of the logit range, its decode
// kernel's atomics being order-dependent), over fp16, kivi-k2v2, vecinfer-k2v2 (sink 0 and 32)
// and commvq-2 (sink 32) kv caches, and all steps but the first sight and capture of each graph
// key replayed one. skips itself without a cuda device or the model (VQSERVE_MODEL); fails
// without the vecinfer / commvq artifact (VQSERVE_VQCB / VQSERVE_CVQCB, else tests/util
// CodebookPath, which the ctest fixtures test_codebooks / test_commvq_codebooks train).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/kv/codebook_file.h"
#include "runtime/cuda/cuda_kv_cache.h"
#include "runtime/cuda/cuda_llama_model.h"
#include "runtime/model/llama_model.h"
#include "tests/test_paths.h"
#include "tests/util/model_compare.h"
#include "tests/util/test_server.h"
#include "tests/util/cuda_device.h"

namespace vqserve {
namespace {

constexpr int kSteps = 210;
constexpr int kPromptLens[] = {40, 150, 290};

struct Decoded {
  std::vector<int32_t> tokens;  // (steps, batch) greedy picks
  std::vector<float> logits;    // (steps, batch, vocab)
};

int32_t ArgMax(const float* row, int n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// prefills each prompt alone, then decodes all of them one token a step together.
Decoded Decode(LlamaModel& model, KvCache& cache, const std::vector<std::vector<int32_t>>& prompts,
               int pages_per_seq) {
  const int b = static_cast<int>(prompts.size()), vocab = model.config().vocab_size;
  std::vector<int32_t> tables(size_t(b) * pages_per_seq), next(b), cached(b);
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<int32_t>(i);
  std::vector<ForwardSeq> batch(b);
  for (int j = 0; j < b; ++j) {
    batch[j].cache = &cache;
    batch[j].kv.slot = j;
    batch[j].kv.block_table = tables.data() + size_t(j) * pages_per_seq;
    batch[j].kv.num_blocks = pages_per_seq;
    batch[j].tokens = prompts[j];
    std::vector<float> logits;
    model.Forward(std::span<const ForwardSeq>(&batch[j], 1), &logits);
    next[j] = ArgMax(logits.data(), vocab);
    cached[j] = static_cast<int32_t>(prompts[j].size());
  }
  Decoded out;
  std::vector<float> logits;
  for (int s = 0; s < kSteps; ++s) {
    for (int j = 0; j < b; ++j) {
      batch[j].tokens = std::span<const int32_t>(&next[j], 1);
      batch[j].kv.num_cached = cached[j]++;
    }
    logits.clear();
    model.Forward(batch, &logits);
    out.logits.insert(out.logits.end(), logits.begin(), logits.end());
    for (int j = 0; j < b; ++j) {
      next[j] = ArgMax(logits.data() + size_t(j) * vocab, vocab);
      out.tokens.push_back(next[j]);
    }
  }
  return out;
}

// (codec, sink tokens)
class CudaGraphTest : public ::testing::TestWithParam<std::pair<std::string, int>> {
 protected:
  void SetUp() override {
    VQ_SKIP_WITHOUT_CUDA_DEVICE();
    const std::string path = testing::DefaultModelPath();
    if (path.empty()) GTEST_SKIP() << "no model in models/ (and VQSERVE_MODEL unset)";
    codec_ = GetParam().first;
    if (codec_ != "fp16" && codec_.rfind("kivi-", 0) != 0) {
      const char* var = codec_.rfind("commvq-", 0) == 0 ? "VQSERVE_CVQCB" : "VQSERVE_VQCB";
      const char* env = std::getenv(var);
      const std::string vqcb =
          env != nullptr && *env != '\0' ? std::string(env) : testing::CodebookPath(codec_);
      // the ctest fixtures test_codebooks / test_commvq_codebooks train them.
      ASSERT_FALSE(vqcb.empty()) << "no " << codec_ << " codebooks: run through ctest "
                                 << "(fixtures test_codebooks, test_commvq_codebooks) or set "
                                 << var;
      auto book = CodebookFile::Load(vqcb);
      ASSERT_TRUE(book.ok()) << book.status();
      book_ = std::make_unique<CodebookFile>(std::move(*book));
    }
    auto model = LoadCudaLlamaModel(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    const Tokenizer& tok = model_->tokenizer();
    const std::string text =
        "A paged key-value cache lets a language model server batch requests of different "
        "lengths; quantizing it to two bits per value helps with long contexts. ";
    prompts_ = testing::PromptsOfLengths(
        tok, text, std::vector<int>(std::begin(kPromptLens), std::end(kPromptLens)));
  }

  std::unique_ptr<CudaKvCache> MakeCache(int pages_per_seq) {
    auto c = MakeCudaKvCacheForCodec(codec_, model_->kv_shape(), book_.get(),
                                     pages_per_seq * static_cast<int>(prompts_.size()),
                                     static_cast<int>(prompts_.size()), GetParam().second);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::string codec_;
  std::unique_ptr<CodebookFile> book_;
  std::unique_ptr<LlamaModel> model_;
  std::vector<std::vector<int32_t>> prompts_;
};

TEST_P(CudaGraphTest, DecodeWithGraphsEqualsEager) {
  std::unique_ptr<CudaKvCache> probe = MakeCache(1);
  ASSERT_NE(probe, nullptr);
  const int pages_per_seq = PagesForTokens(probe->spec(), kPromptLens[2] + kSteps + 1) + 1;
  probe.reset();
  std::unique_ptr<CudaKvCache> eager_cache = MakeCache(pages_per_seq);
  std::unique_ptr<CudaKvCache> graph_cache = MakeCache(pages_per_seq);
  ASSERT_NE(eager_cache, nullptr);
  ASSERT_NE(graph_cache, nullptr);
  ASSERT_TRUE(SetCudaGraphs(*model_, false));
  const int64_t replays0 = CudaGraphReplays(*model_);
  const Decoded eager = Decode(*model_, *eager_cache, prompts_, pages_per_seq);
  EXPECT_EQ(CudaGraphReplays(*model_), replays0);
  ASSERT_TRUE(SetCudaGraphs(*model_, true));
  const Decoded graph = Decode(*model_, *graph_cache, prompts_, pages_per_seq);
  const int64_t replays = CudaGraphReplays(*model_) - replays0;
  // keys: the decode split count (stable past a few hundred tokens) times flush or no flush;
  // each is run eagerly once and captured once. before flush steps replayed, 177-180 did.
  EXPECT_GE(replays, kSteps - 20) << "decode steps, flushing or not, replay a graph";
  ASSERT_EQ(eager.logits.size(), graph.logits.size());
  int equal = 0;
  for (size_t i = 0; i < eager.tokens.size(); ++i) equal += eager.tokens[i] == graph.tokens[i];
  double worst = 0.0, range = 0.0;
  for (size_t i = 0; i < eager.logits.size(); ++i) {
    worst = std::max(worst, double(std::fabs(eager.logits[i] - graph.logits[i])));
    range = std::max(range, double(std::fabs(eager.logits[i])));
  }
  std::printf(
      "%s sink %d: %zu steps x %zu seqs, %lld graph replays, picks equal %d/%zu, max "
      "|dlogit| %.3g (max |logit| %.3g)%s\n",
      codec_.c_str(), GetParam().second, size_t(kSteps), prompts_.size(),
      static_cast<long long>(replays), equal, eager.tokens.size(), worst, range,
      worst == 0.0 ? ", bitwise equal" : "");
  EXPECT_EQ(equal, static_cast<int>(eager.tokens.size()));
  // the commvq decode kernel sums its value histograms with shared-memory float atomics, so two
  // eager runs differ in the last bits as well, and an fp16 rounding or a near-tied code of a
  // later flush can carry that on (runCV1: 0.0142 over a max |logit| of 78).
  const double tolerance = codec_.rfind("commvq-", 0) == 0 ? 1e-3 : 1e-4;
  EXPECT_LE(worst, tolerance * std::max(range, 1.0));
}

INSTANTIATE_TEST_SUITE_P(Codecs, CudaGraphTest,
                         ::testing::Values(std::make_pair(std::string("fp16"), 0),
                                           std::make_pair(std::string("kivi-k2v2"), 32),
                                           std::make_pair(std::string("vecinfer-k2v2"), 0),
                                           std::make_pair(std::string("vecinfer-k2v2"), 32),
                                           std::make_pair(std::string("commvq-2"), 32)),
                         [](const auto& info) {
                           std::string name =
                               info.param.first + "_sink" + std::to_string(info.param.second);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace vqserve
