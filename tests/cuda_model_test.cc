// the cuda llama model against the cpu one on the default model: greedy tokens of 3 prompts x
// 32 steps are equal, logits agree within a tolerance (the gpu's weights resident as the file's
// q4_1/q8_0 blocks, or dequantized to fp16 at load, with fp16 activations; q4_1/q8_0 blocks with
// q8 activations or fp32 weights on the cpu), alone and batched, and with fp16 weights a
// batched step equals steps alone.
// skips itself without a cuda device or without the model (VQSERVE_MODEL picks another file).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_kv_cache.h"
#include "runtime/cuda/cuda_llama_model.h"
#include "runtime/kv/fp16_codec.h"
#include "runtime/model/llama_model.h"
#include "runtime/kv/paged_kv_cache.h"
#include "tests/test_paths.h"
#include "tests/util/cuda_device.h"

namespace vqserve {
namespace {

constexpr int kSteps = 32;
// cpu (q4_1 blocks, q8 activations) vs gpu (fp16): max |Δlogit| as a fraction of the logit
// range (max - min of the cpu's logits) of the same step.
constexpr double kCpuRelTolerance = 0.05;
// gpu batched vs alone (fp32 accumulation in a different order; fp16 roundings may flip).
constexpr double kBatchAbsTolerance = 0.05;

// greedy continuation of each prompt: the argmax of each step and its logits.
struct Continuation {
  std::vector<int32_t> argmax;
  std::vector<std::vector<float>> logits;
};

int ArgMax(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }

// kSteps greedy steps of every prompt on `model` over `cache` (slot j, pages of its own for
// prompt j, in reverse order). batched: one step for all prompts at once; else one prompt after
// another. forced: feed these tokens (per prompt) instead of the model's own argmax.
std::vector<Continuation> Greedy(LlamaModel& model, KvCache& cache,
                        const std::vector<std::vector<int32_t>>& prompts, bool batched,
                        const std::vector<Continuation>* forced = nullptr) {
  const int vocab = model.config().vocab_size, b = static_cast<int>(prompts.size());
  const int per_seq = cache.num_pages() / b;
  std::vector<std::vector<int32_t>> tables(b), seqs = prompts;
  for (int j = 0; j < b; ++j) {
    for (int i = 0; i < per_seq; ++i) tables[j].push_back((j + 1) * per_seq - 1 - i);
  }
  std::vector<Continuation> runs(b);
  auto step = [&](const std::vector<int>& which, int s) {
    std::vector<ForwardSeq> batch;
    for (int j : which) {
      ForwardSeq f;
      const int new_tokens = s == 0 ? static_cast<int>(seqs[j].size()) : 1;
      f.tokens = std::span<const int32_t>(seqs[j].data() + seqs[j].size() - new_tokens,
                                          new_tokens);
      f.cache = &cache;
      f.kv.slot = j;
      f.kv.block_table = tables[j].data();
      f.kv.num_blocks = per_seq;
      f.kv.num_cached = static_cast<int>(seqs[j].size()) - new_tokens;
      batch.push_back(f);
    }
    std::vector<float> logits;
    model.Forward(batch, &logits);
    for (size_t i = 0; i < which.size(); ++i) {
      const int j = which[i];
      const float* row = logits.data() + i * vocab;
      runs[j].logits.emplace_back(row, row + vocab);
      runs[j].argmax.push_back(ArgMax(row, vocab));
      seqs[j].push_back(forced != nullptr ? (*forced)[j].argmax[s] : runs[j].argmax.back());
    }
  };
  if (batched) {
    std::vector<int> all;
    for (int j = 0; j < b; ++j) all.push_back(j);
    for (int s = 0; s < kSteps; ++s) step(all, s);
  } else {
    // alone: each prompt's whole continuation before the next prompt starts.
    for (int j = 0; j < b; ++j) {
      for (int s = 0; s < kSteps; ++s) step({j}, s);
    }
  }
  return runs;
}

// max |x - y| of one step's logits.
double StepMaxDiff(const std::vector<float>& x, const std::vector<float>& y) {
  double diff = 0.0;
  for (size_t i = 0; i < x.size(); ++i) diff = std::max(diff, double(std::fabs(x[i] - y[i])));
  return diff;
}

// largest |a - b| over all steps of all prompts; *range: the largest logit range of `a`.
double MaxDiff(const std::vector<Continuation>& a, const std::vector<Continuation>& b, double* range) {
  double diff = 0.0;
  *range = 0.0;
  for (size_t j = 0; j < a.size(); ++j) {
    for (size_t s = 0; s < a[j].logits.size(); ++s) {
      const std::vector<float>& x = a[j].logits[s];
      const std::vector<float>& y = b[j].logits[s];
      diff = std::max(diff, StepMaxDiff(x, y));
      const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
      *range = std::max(*range, double(*hi - *lo));
    }
  }
  return diff;
}

class CudaModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    VQ_SKIP_WITHOUT_CUDA_DEVICE();
    path_ = testing::DefaultModelPath();
    if (path_.empty()) GTEST_SKIP() << "no model in models/ (and VQSERVE_MODEL unset)";
    auto gpu = LoadCudaLlamaModel(path_, CudaWeights::kBlocks);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = std::move(*gpu);
    const Tokenizer& tok = gpu_->tokenizer();
    const char* texts[] = {
        "What is a cache?",
        "Write a short poem about the sea, the wind and the old lighthouse keeper who lived "
        "alone on the rocks for forty years, counting ships and storms and keeping the light.",
        "Explain, step by step, how a paged key-value cache lets a language model server batch "
        "many requests of different lengths without wasting memory, and why quantizing that "
        "cache to two bits per value helps with long contexts."};
    for (const char* t : texts) {
      prompts_.push_back(
          tok.Encode(tok.ApplyChatTemplate({{"user", t}}, true), /*add_bos=*/true, true));
    }
    int longest = 0;
    for (const auto& p : prompts_) longest = std::max(longest, static_cast<int>(p.size()));
    KvCacheSpec fp16;  // page 32, no residual: the fp16 codec's policy
    fp16.page_tokens = 32;
    fp16.residual_tokens = 0;
    pages_per_seq_ = PagesForTokens(fp16, longest + kSteps) + 1;
  }

  std::unique_ptr<KvCache> GpuCache() {
    auto c = MakeCudaKvCache(gpu_->kv_shape(), pages_per_seq_ * 3, 3);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::unique_ptr<KvCache>(std::move(*c)) : nullptr;
  }
  std::unique_ptr<KvCache> CpuCache(const LlamaModel& m) {
    return MakePagedKvCache(MakeFp16Codec(m.kv_shape()), pages_per_seq_ * 3, 3);
  }

  std::string path_;
  std::unique_ptr<LlamaModel> gpu_;
  std::vector<std::vector<int32_t>> prompts_;
  int pages_per_seq_ = 0;
};

// the gpu's continuation `got` (fed the cpu's tokens) against the cpu's `ref`: greedy picks
// equal but where the step's logit error explains the difference, logits within
// kCpuRelTolerance of the range.
void ExpectMatchesCpu(const std::vector<Continuation>& ref, const std::vector<Continuation>& got,
                      const std::string& label) {
  double range = 0.0;
  const double diff = MaxDiff(ref, got, &range);
  int equal = 0, total = 0;
  for (size_t j = 0; j < ref.size(); ++j) {
    for (int s = 0; s < kSteps; ++s) {
      ++total;
      if (ref[j].argmax[s] == got[j].argmax[s]) {
        ++equal;
        continue;
      }
      // a different pick is acceptable only where the step's own logit error explains it:
      // with every |cpu - gpu| logit <= e, the picks can differ only if the cpu's top-1 lead
      // over the gpu's pick is <= 2 e (and e is held to kCpuRelTolerance below). the full
      // default model flipped once in 192 steps, at a cpu lead of 8e-5 logits.
      const std::vector<float>& cl = ref[j].logits[s];
      const double step_diff = StepMaxDiff(cl, got[j].logits[s]);
      const double margin = cl[ref[j].argmax[s]] - cl[got[j].argmax[s]];
      std::printf("prompt %zu step %d: cpu %d gpu %d (cpu lead %.2e, step max |dlogit| %.2e)\n",
                  j, s, ref[j].argmax[s], got[j].argmax[s], margin, step_diff);
      EXPECT_LE(margin, 2.0 * step_diff) << label << ": prompt " << j << " step " << s;
    }
  }
  std::printf("[%s] greedy tokens equal %d/%d; max |dlogit| %.4f, logit range %.2f, ratio "
              "%.5f\n", label.c_str(), equal, total, diff, range, diff / range);
  EXPECT_LE(diff, kCpuRelTolerance * range) << label;
}

TEST_F(CudaModelTest, GreedyTokensAndLogitsMatchCpu) {
  // gpu_: the blocks resident; then every tensor dequantized to fp16 at load (the default).
  auto fp16 = LoadCudaLlamaModel(path_, CudaWeights::kFp16);
  ASSERT_TRUE(fp16.ok()) << fp16.status();
  std::printf("gpu weight bytes: blocks resident %lld, fp16 %lld\n",
              static_cast<long long>(CudaWeightBytes(*gpu_)),
              static_cast<long long>(CudaWeightBytes(**fp16)));
  EXPECT_LT(CudaWeightBytes(*gpu_), CudaWeightBytes(**fp16) / 2);
  for (LlamaModel* gpu : {gpu_.get(), fp16->get()}) {
    for (bool quantized : {true, false}) {
      LoadOptions options;
      options.quantized_decode = quantized;
      auto cpu = LlamaModel::Load(path_, options);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      auto cpu_cache = CpuCache(**cpu);
      const std::vector<Continuation> ref = Greedy(**cpu, *cpu_cache, prompts_, /*batched=*/false);
      // the gpu alone (one column a decode step: the blocks' integer gemv) and batched (three
      // columns: their tensor-core kernel), fed the cpu's tokens.
      for (bool batched : {false, true}) {
        auto gpu_cache = GpuCache();
        ASSERT_NE(gpu_cache, nullptr);
        const std::vector<Continuation> got = Greedy(*gpu, *gpu_cache, prompts_, batched, &ref);
        ExpectMatchesCpu(ref, got,
                         std::string("cuda ") +
                             (gpu == gpu_.get() ? "blocks resident" : "fp16 weights") +
                             (batched ? " batched" : " alone") + " vs cpu " +
                             (quantized ? "q4_1/q8 (default)" : "fp32 weights"));
      }
    }
  }
}

// greedy rows (ForwardSeq::argmax) on the device: batched steps where prompts 0 and 2 take
// the argmax on the gpu and prompt 1 its logits give the argmax of the rows a plain batched
// run returns (the same kernels: the same floats), and prompt 1's rows bit for bit.
TEST_F(CudaModelTest, ArgmaxRowsOnTheDeviceEqualTheRowsArgmax) {
  auto plain_cache = GpuCache();
  auto argmax_cache = GpuCache();
  ASSERT_NE(plain_cache, nullptr);
  const std::vector<Continuation> plain = Greedy(*gpu_, *plain_cache, prompts_, /*batched=*/true);
  const int vocab = gpu_->config().vocab_size, b = static_cast<int>(prompts_.size());
  const int per_seq = argmax_cache->num_pages() / b;
  std::vector<std::vector<int32_t>> tables(b), seqs = prompts_;
  for (int j = 0; j < b; ++j) {
    for (int i = 0; i < per_seq; ++i) tables[j].push_back((j + 1) * per_seq - 1 - i);
  }
  for (int s = 0; s < kSteps; ++s) {
    std::vector<ForwardSeq> batch(b);
    std::vector<int32_t> ids(b, -1);
    for (int j = 0; j < b; ++j) {
      ForwardSeq& f = batch[j];
      const int new_tokens = s == 0 ? static_cast<int>(seqs[j].size()) : 1;
      f.tokens = std::span<const int32_t>(seqs[j].data() + seqs[j].size() - new_tokens,
                                          new_tokens);
      f.cache = argmax_cache.get();
      f.kv.slot = j;
      f.kv.block_table = tables[j].data();
      f.kv.num_blocks = per_seq;
      f.kv.num_cached = static_cast<int>(seqs[j].size()) - new_tokens;
      if (j != 1) f.argmax = &ids[j];
    }
    std::vector<float> logits;
    gpu_->Forward(batch, &logits);
    ASSERT_EQ(logits.size(), size_t(vocab)) << "step " << s;
    EXPECT_EQ(logits, plain[1].logits[s]) << "step " << s;
    EXPECT_EQ(ids[0], plain[0].argmax[s]) << "step " << s;
    EXPECT_EQ(ids[1], -1);
    EXPECT_EQ(ids[2], plain[2].argmax[s]) << "step " << s;
    for (int j = 0; j < b; ++j) seqs[j].push_back(plain[j].argmax[s]);
  }
}

// with the weights in fp16 (cublas at every batch size), so that a batched step and a step
// alone round alike up to fp32 summation order. the blocks take the integer gemv alone and the
// tensor cores batched (x rounded to int8 against the weights rounded to fp16): each checked
// against the cpu above, not against the other.
TEST_F(CudaModelTest, BatchedEqualsAlone) {
  auto fp16 = LoadCudaLlamaModel(path_, CudaWeights::kFp16);
  ASSERT_TRUE(fp16.ok()) << fp16.status();
  auto alone_cache = GpuCache();
  auto batch_cache = GpuCache();
  ASSERT_NE(alone_cache, nullptr);
  const std::vector<Continuation> alone = Greedy(**fp16, *alone_cache, prompts_, /*batched=*/false);
  const std::vector<Continuation> batched = Greedy(**fp16, *batch_cache, prompts_, /*batched=*/true);
  for (size_t j = 0; j < alone.size(); ++j) {
    EXPECT_EQ(alone[j].argmax, batched[j].argmax) << "prompt " << j;
  }
  double range = 0.0;
  const double diff = MaxDiff(alone, batched, &range);
  std::printf("[cuda batched vs alone] max |dlogit| %.6f (range %.2f)\n", diff, range);
  EXPECT_LE(diff, kBatchAbsTolerance);
}

}  // namespace
}  // namespace vqserve
