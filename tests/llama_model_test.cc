// the cpu llama forward pass against transformers and llama.cpp on the same gguf
// (tests/data/hf_logits_fixture.json and logits_fixture.json, made by tools/make_hf_logits_
// fixture.py and tools/make_logits_fixture.py), batched against alone, chunked against one-shot.
#include "runtime/model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "kernels/cpu/argmax.h"
#include "runtime/kv/fp16_codec.h"
#include "runtime/kv/kivi_codec.h"
#include "runtime/kv/paged_kv_cache.h"
#include "tests/test_paths.h"
#include "tests/util/prerequisite.h"

namespace vqserve {
namespace {

// a sequence with its own slot and pages in a shared cache.
struct TestSequence {
  std::vector<int32_t> blocks;
  KvSeqRef kv;
};

TestSequence MakeSequence(int slot, int first_page, int num_pages) {
  TestSequence s;
  for (int i = 0; i < num_pages; ++i) s.blocks.push_back(first_page + i);
  s.kv.slot = slot;
  s.kv.block_table = s.blocks.data();
  s.kv.num_blocks = num_pages;
  return s;
}

std::unique_ptr<LlamaModel> LoadOrSkip(bool quantized_decode) {
  const std::string path = testing::DefaultModelPath();
  if (path.empty()) return nullptr;
  LoadOptions options;
  options.quantized_decode = quantized_decode;
  options.num_threads = 1;  // ctest runs tests side by side on 2 cores
  auto model = LlamaModel::Load(path, options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

// what one reference fixture comparison measured.
struct FixtureStats {
  int compared = 0;
  int same = 0;                  // steps whose greedy token equals the reference's
  int prompts_identical = 0;     // prompts with the same greedy token at every step
  double worst_rel = 0;          // max over steps of max |dlogit| (top-20) / logit range
  double mean_rel = 0;
  double worst_flip_margin = 0;  // largest reference top-1 margin (/ range) where we differ
};

// teacher-forces the reference's tokens through `model` and compares, step by step, our
// logits with the reference's top-20 and our greedy pick with its pick.
FixtureStats CompareWithFixture(LlamaModel& model, const std::string& fixture_path,
                                const char* name) {
  FixtureStats st;
  nlohmann::json fixture = nlohmann::json::parse(std::ifstream(fixture_path));
  const int vocab = model.config().vocab_size;
  EXPECT_EQ(fixture["vocab_size"].get<int>(), vocab);
  double sum_rel = 0;
  for (const auto& c : fixture["cases"]) {
    std::vector<int32_t> tokens = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto& steps = c["steps"];
    const int total = static_cast<int>(tokens.size() + steps.size());
    auto cache = MakePagedKvCache(MakeFp16Codec(model.kv_shape()), total / 32 + 2, 1);
    TestSequence seq = MakeSequence(0, 0, total / 32 + 2);
    std::vector<float> logits;
    ForwardSeq fs{tokens, cache.get(), seq.kv};
    model.Forward({&fs, 1}, &logits);
    bool identical = true;
    for (size_t s = 0; s < steps.size(); ++s) {
      EXPECT_EQ(logits.size(), size_t(vocab));
      const auto& step = steps[s];
      const int ref_token = step["token"].get<int>();
      const int mine = static_cast<int>(std::max_element(logits.begin(), logits.end()) -
                                        logits.begin());
      const double range = step["max"].get<double>() - step["min"].get<double>();
      const auto ids = step["top_ids"].get<std::vector<int>>();
      const auto ref = step["top_logits"].get<std::vector<double>>();
      double worst = 0;
      for (size_t i = 0; i < ids.size(); ++i) {
        worst = std::max(worst, std::abs(logits[ids[i]] - ref[i]));
      }
      if (mine == ref_token) {
        ++st.same;
      } else {
        identical = false;
        // how close the reference itself was to choosing ours (1e9: ours not in its top-20).
        auto it = std::find(ids.begin(), ids.end(), mine);
        const double margin = it == ids.end() ? 1e9 : ref[0] - ref[it - ids.begin()];
        std::printf("%s step %zu: ours %d, reference %d, reference margin %.3f\n", name, s,
                    mine, ref_token, margin);
        st.worst_flip_margin = std::max(st.worst_flip_margin, margin / range);
      }
      st.worst_rel = std::max(st.worst_rel, worst / range);
      sum_rel += worst / range;
      ++st.compared;
      // feed the reference's token so that every step compares the same context.
      tokens.push_back(ref_token);
      fs.tokens = std::span<const int32_t>(&tokens.back(), 1);
      fs.kv.num_cached = static_cast<int>(tokens.size()) - 1;
      logits.clear();
      model.Forward({&fs, 1}, &logits);
    }
    if (identical) ++st.prompts_identical;
  }
  st.mean_rel = st.compared ? sum_rel / st.compared : 0;
  std::printf("logits vs %s over %d steps: max |dlogit|/range %.5f, mean %.5f; same greedy "
              "token at %d of %d steps; %d prompts identical throughout\n",
              name, st.compared, st.worst_rel, st.mean_rel, st.same, st.compared,
              st.prompts_identical);
  return st;
}

TEST(LlamaModelTest, GreedyDecodeMatchesTransformersFp32) {
  // transformers runs the same gguf's weights, dequantized to float32, in float32 with a
  // float32 kv cache; our fp32 path differs by summation order and by the fp16 kv cache.
  // measured: max |dlogit|/range 3.7e-4 (mean 1.1e-4); the greedy token equal at all 256 steps.
  const std::string path = testing::TestDataPath("hf_logits_fixture.json");
  if (!std::filesystem::exists(path)) VQ_SKIP_UNLESS_CI << "no " << path;
  std::unique_ptr<LlamaModel> model = LoadOrSkip(/*quantized_decode=*/false);
  if (!model) VQ_SKIP_UNLESS_CI << "default model missing";
  FixtureStats st = CompareWithFixture(*model, path, "transformers");
  EXPECT_EQ(st.compared, 256);
  EXPECT_EQ(st.same, st.compared);
  EXPECT_EQ(st.prompts_identical, 4);
  EXPECT_LT(st.worst_rel, 2e-3);
}

TEST(LlamaModelTest, GreedyDecodeMatchesLlamaCpp) {
  // llama.cpp and our production path both multiply q8-rounded activations by the q4_1 / q8_0
  // blocks, in different summation orders, and llama.cpp attends with flash attention over an
  // f16 cache. measured: max |dlogit|/range 0.040, mean 0.009; 251 of 256 greedy tokens equal,
  // the 5 others only where llama.cpp's own top two were within 0.06-0.28 logits (<= 1% of the
  // range); 2 of 4 prompts identical throughout.
  const std::string path = testing::TestDataPath("logits_fixture.json");
  if (!std::filesystem::exists(path)) VQ_SKIP_UNLESS_CI << "no " << path;
  std::unique_ptr<LlamaModel> model = LoadOrSkip(/*quantized_decode=*/true);
  if (!model) VQ_SKIP_UNLESS_CI << "default model missing";
  FixtureStats st = CompareWithFixture(*model, path, "llama.cpp");
  EXPECT_EQ(st.compared, 256);
  EXPECT_LT(st.worst_rel, 0.05);
  EXPECT_LT(st.worst_flip_margin, 0.02);  // a different pick only at llama.cpp's near-ties
  EXPECT_GE(st.same, 248);
}

// runs `steps` forward passes; each step gives every sequence its next chunk of tokens.
// returns the logits of every step in order.
std::vector<float> RunSteps(LlamaModel& model, KvCache& cache, std::vector<TestSequence>& seqs,
                            const std::vector<std::vector<int32_t>>& tokens,
                            const std::vector<std::vector<int>>& chunks, bool batched) {
  std::vector<float> all;
  std::vector<int> done(seqs.size(), 0);
  for (size_t step = 0; step < chunks[0].size(); ++step) {
    std::vector<ForwardSeq> batch;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int n = chunks[i][step];
      if (n == 0) continue;
      seqs[i].kv.num_cached = done[i];
      seqs[i].kv.block_table = seqs[i].blocks.data();
      batch.push_back(ForwardSeq{std::span<const int32_t>(tokens[i].data() + done[i], n), &cache,
                                 seqs[i].kv, true, false});
      done[i] += n;
    }
    if (batched) {
      model.Forward(batch, &all);
    } else {
      for (const ForwardSeq& f : batch) model.Forward({&f, 1}, &all);
    }
  }
  return all;
}

void CheckBatchedEqualsAlone(bool quantized_decode, double tolerance) {
  std::unique_ptr<LlamaModel> model = LoadOrSkip(quantized_decode);
  if (!model) VQ_SKIP_UNLESS_CI << "default model missing";
  const Tokenizer& tok = model->tokenizer();
  std::vector<std::vector<int32_t>> tokens = {
      tok.Encode("The quick brown fox jumps over the lazy dog. It was a sunny day and the children "
                 "were playing in the park near the old stone bridge by the river, laughing loudly.", true, false),
      tok.Encode("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,", true, false),
      tok.Encode("Paris is the capital of", true, false)};
  // prefill chunks and single-token decodes interleaved: step 2 mixes a prefill chunk of the
  // second sequence with decodes of the others; the first crosses a page boundary while
  // decoding, the second inside a prefill chunk.
  std::vector<std::vector<int>> chunks = {{20, 10, 1, 1, 1}, {20, 15, 1, 1, 1}, {3, 0, 0, 1, 0}};
  for (size_t i = 0; i < tokens.size(); ++i) {
    int need = 0;
    for (int n : chunks[i]) need += n;
    ASSERT_GE(static_cast<int>(tokens[i].size()), need) << i;
  }
  auto cache_a = MakePagedKvCache(MakeFp16Codec(model->kv_shape()), 12, 3);
  auto cache_b = MakePagedKvCache(MakeFp16Codec(model->kv_shape()), 12, 3);
  std::vector<TestSequence> alone = {MakeSequence(0, 0, 4), MakeSequence(1, 4, 4),
                                     MakeSequence(2, 8, 4)};
  std::vector<TestSequence> batched = {MakeSequence(2, 8, 4), MakeSequence(0, 4, 4),
                                       MakeSequence(1, 0, 4)};
  std::vector<float> a = RunSteps(*model, *cache_a, alone, tokens, chunks, false);
  std::vector<float> b = RunSteps(*model, *cache_b, batched, tokens, chunks, true);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), size_t(12) * model->config().vocab_size);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  std::printf("batched vs alone (quantized decode %d): max |dlogit| %.2e\n", quantized_decode,
              worst);
  EXPECT_LT(worst, tolerance);
}

TEST(LlamaModelTest, BatchedForwardEqualsEachSequenceAloneFp32) {
  // fp32 everywhere: only the summation order of sgemm vs sgemv differs; through 30 layers
  // that moves logits spanning ~30 by ~1e-2 (3e-4 of the range). a wrong position, page or
  // slot would move them by whole units.
  CheckBatchedEqualsAlone(/*quantized_decode=*/false, 3e-2);
}

TEST(LlamaModelTest, BatchedForwardEqualsEachSequenceAloneQuantizedDecode) {
  // every step takes the q8 path whatever its size, and each row's arithmetic is independent
  // of the others: batched and alone must agree to rounding of the summation (measured 0).
  CheckBatchedEqualsAlone(/*quantized_decode=*/true, 1e-4);
}

// greedy rows (ForwardSeq::argmax): the model writes the argmax of the row it would have
// appended and appends only the other rows, the same floats.
TEST(LlamaModelTest, ArgmaxRowsGiveTheRowsArgmaxAndOmitTheRow) {
  std::unique_ptr<LlamaModel> model = LoadOrSkip(/*quantized_decode=*/true);
  if (!model) VQ_SKIP_UNLESS_CI << "default model missing";
  const Tokenizer& tok = model->tokenizer();
  const std::vector<std::vector<int32_t>> prompts = {tok.Encode("Paris is the capital of", true, false),
                                                     tok.Encode("1, 2, 3, 4,", true, false),
                                                     tok.Encode("The quick brown fox", true, false)};
  const size_t vocab = model->config().vocab_size;
  auto run = [&](bool greedy_rows, std::vector<int32_t>* ids) {
    auto cache = MakePagedKvCache(MakeFp16Codec(model->kv_shape()), 12, 3);
    std::vector<TestSequence> seqs = {MakeSequence(0, 0, 4), MakeSequence(1, 4, 4),
                                      MakeSequence(2, 8, 4)};
    std::vector<ForwardSeq> batch;
    ids->assign(3, -1);
    for (int i = 0; i < 3; ++i) {
      ForwardSeq f{std::span<const int32_t>(prompts[i]), cache.get(), seqs[i].kv, true, false};
      if (greedy_rows && i != 1) f.argmax = &(*ids)[i];
      batch.push_back(f);
    }
    std::vector<float> logits;
    model->Forward(batch, &logits);
    return logits;
  };
  std::vector<int32_t> unused, ids;
  const std::vector<float> all = run(false, &unused);
  const std::vector<float> one = run(true, &ids);
  ASSERT_EQ(all.size(), 3 * vocab);
  ASSERT_EQ(one.size(), vocab);
  double worst = 0;
  for (size_t k = 0; k < vocab; ++k) worst = std::max(worst, double(std::abs(one[k] - all[vocab + k])));
  EXPECT_LT(worst, 1e-4);  // each row's arithmetic is independent of the others (q8 path)
  EXPECT_EQ(ids[0], cpu::ArgMax(all.data(), static_cast<int64_t>(vocab)));
  EXPECT_EQ(ids[1], -1);
  EXPECT_EQ(ids[2], cpu::ArgMax(all.data() + 2 * vocab, static_cast<int64_t>(vocab)));
}

// the logits after a prompt fed as `chunks` and then one decode token; fp16 kv unless a cache
// is given.
std::vector<float> LogitsAfterChunks(LlamaModel& model, const std::vector<int32_t>& tokens,
                                     std::vector<int> chunks,
                                     std::unique_ptr<PagedKvCache> cache = nullptr) {
  if (!cache) cache = MakePagedKvCache(MakeFp16Codec(model.kv_shape()), 8, 1);
  std::vector<TestSequence> seqs = {MakeSequence(0, 0, 8)};
  chunks.push_back(1);
  std::vector<float> all = RunSteps(model, *cache, seqs, {tokens}, {chunks}, false);
  const size_t vocab = model.config().vocab_size;
  return std::vector<float>(all.end() - vocab, all.end());
}

TEST(LlamaModelTest, ChunkedPrefillEqualsOneShot) {
  // every chunk appends its k/v to the cache and then attends over the cache, so the split of
  // a prompt into chunks changes nothing but the matmul row count (row-independent q8 path).
  std::unique_ptr<LlamaModel> model = LoadOrSkip(/*quantized_decode=*/true);
  if (!model) VQ_SKIP_UNLESS_CI << "default model missing";
  std::vector<int32_t> tokens = model->tokenizer().Encode(
      "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
      "age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was "
      "the season of Light, it was the season of Darkness.", true, false);
  ASSERT_GE(tokens.size(), 46u);
  tokens.resize(46);
  std::vector<float> one = LogitsAfterChunks(*model, tokens, {45});
  for (const std::vector<int>& chunks :
       std::vector<std::vector<int>>{{20, 25}, {31, 1, 13}, {5, 5, 5, 5, 5, 5, 5, 5, 5}}) {
    std::vector<float> split = LogitsAfterChunks(*model, tokens, chunks);
    double worst = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      worst = std::max(worst, double(std::abs(one[i] - split[i])));
    }
    std::printf("chunks of %d...: max |dlogit| vs one-shot %.2e\n", chunks[0], worst);
    EXPECT_LT(worst, 1e-4) << chunks.size() << " chunks";
  }
}

TEST(LlamaModelTest, ChunkedPrefillOfCodedCacheEqualsTokenByToken) {
  // with a lossy codec (kivi 2-bit, first page kept as the fp16 sink) a prompt prefilled in
  // chunks must give the logits of feeding it one token at a time: every query sees codes only
  // where token-by-token decoding would (older than the 128-token fp16 window).
  std::unique_ptr<LlamaModel> model = LoadOrSkip(/*quantized_decode=*/true);
  if (!model) VQ_SKIP_UNLESS_CI << "default model missing";
  std::string text;
  for (int i = 0; i < 6; ++i) {
    text += "It was the best of times, it was the worst of times, it was the age of wisdom, it "
            "was the age of foolishness, it was the epoch of belief, it was the epoch of "
            "incredulity. ";
  }
  std::vector<int32_t> tokens = model->tokenizer().Encode(text, true, false);
  ASSERT_GE(tokens.size(), 231u);
  tokens.resize(231);
  auto kivi_cache = [&] { return MakePagedKvCache(MakeKiviCodec(model->kv_shape(), 2), 8, 1, 32); };
  std::vector<float> chunked = LogitsAfterChunks(*model, tokens, {200, 30}, kivi_cache());
  std::vector<float> stepped =
      LogitsAfterChunks(*model, tokens, std::vector<int>(230, 1), kivi_cache());
  std::vector<float> fp16 = LogitsAfterChunks(*model, tokens, {230});
  double worst = 0, vs_fp16 = 0;
  for (size_t i = 0; i < chunked.size(); ++i) {
    worst = std::max(worst, double(std::abs(chunked[i] - stepped[i])));
    vs_fp16 = std::max(vs_fp16, double(std::abs(chunked[i] - fp16[i])));
  }
  std::printf("coded cache: chunked vs token-by-token max |dlogit| %.2e (vs fp16 kv %.2e)\n",
              worst, vs_fp16);
  EXPECT_LT(worst, 1e-3);
  EXPECT_GT(vs_fp16, 1e-2);  // the codes are really in use
}

}  // namespace
}  // namespace vqserve
