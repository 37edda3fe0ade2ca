// the serving engine on the gpu: CudaLlamaModel with kv pools of CudaKvCache built by
// MakeKvPools (fp16 and vecinfer-k2v2), behind the real grpc server.
// greedy requests answer what the cuda model gives one sequence alone, per codec, and
// concurrent requests of both codecs (mixed pools in one engine step) answer the same as
// sequential ones. skips itself without a cuda device or the model (VQSERVE_MODEL); fails
// without a vecinfer-k2v2 artifact (VQSERVE_VQCB, else tests/util CodebookPath, which the
// ctest fixture test_codebooks trains).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/kv/codebook_file.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_kv_cache.h"
#include "runtime/cuda/cuda_llama_model.h"
#include "server/engine.h"
#include "server/inference_server.h"
#include "server/kv_pools.h"
#include "tests/test_paths.h"
#include "tests/util/test_server.h"
#include "tests/util/cuda_device.h"

namespace vqserve {
namespace {

constexpr int kMaxTokens = 24;

std::string VqcbPath() {
  const char* env = std::getenv("VQSERVE_VQCB");
  if (env != nullptr && *env != '\0') return env;
  return testing::CodebookPath("vecinfer-k2v2");
}

class CudaServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    VQ_SKIP_WITHOUT_CUDA_DEVICE();
    const std::string path = testing::DefaultModelPath();
    if (path.empty()) GTEST_SKIP() << "no model in models/ (and VQSERVE_MODEL unset)";
    auto model = LoadCudaLlamaModel(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    codecs_ = {"fp16", "vecinfer-k2v2"};
    const std::string vqcb = VqcbPath();
    ASSERT_FALSE(vqcb.empty()) << "no vecinfer-k2v2 codebooks: run through ctest (fixture "
                                  "test_codebooks) or set VQSERVE_VQCB";
    auto loaded = CodebookFile::Load(vqcb);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    book_ = std::make_shared<CodebookFile>(std::move(*loaded));
    const KvShape shape = model_->kv_shape();
    std::shared_ptr<const CodebookFile> book = book_;
    maker_ = [shape, book](const std::string& name, int pages,
                           int slots) -> absl::StatusOr<std::unique_ptr<KvCache>> {
      auto c = MakeCudaKvCacheForCodec(name, shape, name == "fp16" ? nullptr : book.get(), pages,
                                       slots);
      if (!c.ok()) return c.status();
      return std::unique_ptr<KvCache>(std::move(*c));
    };
    StartServer(/*prefix_cache=*/false);
    const Tokenizer& tok = model_->tokenizer();
    std::string text = "A paged key-value cache stores the keys and values of every token. ";
    std::string longer;
    while (static_cast<int>(tok.Encode(longer, true, false).size()) < 260) longer += text;
    for (int want : {40, 260}) {
      std::vector<int32_t> ids = tok.Encode(longer, /*add_bos=*/true, false);
      ids.resize(want);
      prompts_.push_back(ids);
    }
  }
  void TearDown() override {
    server_.reset();
    engine_.reset();
  }

  // the engine (one shared kv memory for every codec) and the grpc server in front of it.
  void StartServer(bool prefix_cache) {
    server_.reset();
    engine_.reset();
    const KvShape shape = model_->kv_shape();
    std::shared_ptr<const CodebookFile> book = book_;
    KvCacheMakers makers;
    makers.probe = maker_;
    makers.memory = [](size_t bytes) { return MakeCudaKvMemory(bytes); };
    makers.over = [shape, book](const std::string& name, std::shared_ptr<const KvMemory> memory) {
      return MakeCudaKvCacheOver(name, shape, name == "fp16" ? nullptr : book.get(),
                                 std::move(memory));
    };
    auto pools = MakeKvPools(codecs_, makers, size_t{256} << 20);
    ASSERT_TRUE(pools.ok()) << pools.status();
    registry_ = std::make_unique<MetricsRegistry>();
    metrics_ = std::make_unique<ServerMetrics>(*registry_);
    EngineOptions eo;
    eo.scheduler.max_num_seqs = 8;
    eo.scheduler.max_model_len = 2048;
    eo.scheduler.prefix_cache = prefix_cache;
    eo.scheduler.prefix_checkpoint_tokens = 128;
    eo.default_codec = "fp16";
    eo.device = "cuda";
    eo.shared_memory = pools->memory;
    engine_ = std::make_unique<Engine>(model_.get(), std::move(pools->caches), eo, metrics_.get());
    engine_->Start();
    ServerOptions so;
    so.host = "127.0.0.1";
    auto server = InferenceServer::Start(engine_.get(), metrics_.get(), std::move(so));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // greedy tokens of `prompt` from the cuda model alone over a fresh cache of `codec`.
  std::vector<int32_t> Direct(const std::string& codec, const std::vector<int32_t>& prompt) {
    auto cache = maker_(codec, 64, 1);
    EXPECT_TRUE(cache.ok()) << cache.status();
    if (!cache.ok()) return {};
    std::vector<int32_t> table(64), seq = prompt, out;
    for (int i = 0; i < 64; ++i) table[i] = i;
    int cached = 0;
    for (int s = 0; s < kMaxTokens; ++s) {
      ForwardSeq f;
      f.tokens = std::span<const int32_t>(seq.data() + cached, seq.size() - cached);
      f.cache = cache->get();
      f.kv.slot = 0;
      f.kv.block_table = table.data();
      f.kv.num_blocks = 64;
      f.kv.num_cached = cached;
      std::vector<float> logits;
      model_->Forward(std::span<const ForwardSeq>(&f, 1), &logits);
      cached = static_cast<int>(seq.size());
      const int32_t next =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(next);
      seq.push_back(next);
    }
    return out;
  }

  testing::StreamResult Serve(const std::string& codec, const std::vector<int32_t>& prompt) {
    v1::GenerateRequest req = testing::GreedyRequest("", kMaxTokens, codec);
    for (int32_t id : prompt) req.mutable_token_ids()->add_ids(id);
    auto stub = v1::Inference::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
    return testing::RunGenerate(stub.get(), req);
  }

  std::unique_ptr<LlamaModel> model_;
  std::shared_ptr<CodebookFile> book_;
  std::vector<std::string> codecs_;
  KvCacheMaker maker_;
  std::unique_ptr<MetricsRegistry> registry_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<InferenceServer> server_;
  std::vector<std::vector<int32_t>> prompts_;
};

TEST_F(CudaServeTest, GreedyRequestsMatchTheModelAlone) {
  EXPECT_EQ(engine_->ModelInfo().device(), "cuda");
  for (const std::string& codec : codecs_) {
    for (size_t p = 0; p < prompts_.size(); ++p) {
      testing::StreamResult r = Serve(codec, prompts_[p]);
      ASSERT_TRUE(r.status.ok()) << codec << ": " << r.status.error_message();
      EXPECT_EQ(r.token_ids, Direct(codec, prompts_[p])) << codec << " prompt " << p;
      std::printf("[serve --device cuda] %s prompt %zu (%zu tokens): %zu tokens streamed, kv "
                  "compression %.2fx\n",
                  codec.c_str(), p, prompts_[p].size(), r.token_ids.size(),
                  r.usage.kv_compression_ratio());
    }
  }
}

TEST_F(CudaServeTest, ConcurrentMixedCodecsMatchSequential) {
  struct Job {
    std::string codec;
    size_t prompt;
    testing::StreamResult result;
  };
  std::vector<Job> jobs;
  for (int rep = 0; rep < 2; ++rep) {
    for (const std::string& codec : codecs_) {
      for (size_t p = 0; p < prompts_.size(); ++p) jobs.push_back({codec, p, {}});
    }
  }
  std::vector<std::thread> threads;
  for (Job& j : jobs) {
    threads.emplace_back([this, &j] { j.result = Serve(j.codec, prompts_[j.prompt]); });
  }
  for (std::thread& t : threads) t.join();
  int equal = 0;
  for (Job& j : jobs) {
    ASSERT_TRUE(j.result.status.ok()) << j.result.status.error_message();
    const testing::StreamResult alone = Serve(j.codec, prompts_[j.prompt]);
    EXPECT_EQ(j.result.token_ids, alone.token_ids) << j.codec << " prompt " << j.prompt;
    equal += j.result.token_ids == alone.token_ids;
  }
  std::printf("[serve --device cuda] %zu concurrent requests (%zu codecs): %d equal to "
              "sequential\n",
              jobs.size(), codecs_.size(), equal);
}

// a vecinfer-k2v2 pool of 8 pages for 10 requests of 150-token prompts + 24 tokens: each needs
// no page at prefill (150 < 128 ring + 32) and one from token 160 on, so 10 sequences past it
// need 10 pages: some are preempted (recompute) and all still complete.
TEST_F(CudaServeTest, CodedPoolPreemptsAndAllComplete) {
  auto cache = maker_("vecinfer-k2v2", 8, 10);
  ASSERT_TRUE(cache.ok()) << cache.status();
  std::vector<std::unique_ptr<KvCache>> caches;
  caches.push_back(std::move(*cache));
  MetricsRegistry registry;
  ServerMetrics metrics(registry);
  EngineOptions eo;
  eo.scheduler.max_num_seqs = 10;
  eo.scheduler.max_model_len = 2048;
  eo.default_codec = "vecinfer-k2v2";
  eo.device = "cuda";
  Engine engine(model_.get(), std::move(caches), eo, &metrics);
  engine.Start();
  ServerOptions so;
  so.host = "127.0.0.1";
  auto server = InferenceServer::Start(&engine, &metrics, std::move(so));
  ASSERT_TRUE(server.ok()) << server.status();
  const std::vector<int32_t> prompt(prompts_[1].begin(), prompts_[1].begin() + 150);
  constexpr int kRequests = 10;
  std::vector<testing::StreamResult> results(kRequests);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      v1::GenerateRequest req = testing::GreedyRequest("", kMaxTokens, "vecinfer-k2v2");
      for (int32_t id : prompt) req.mutable_token_ids()->add_ids(id);
      req.mutable_token_ids()->set_ids(149, prompt[149 - i]);  // 10 different prompts
      auto stub = v1::Inference::NewStub(grpc::CreateChannel(
          "127.0.0.1:" + std::to_string((*server)->port()), grpc::InsecureChannelCredentials()));
      results[i] = testing::RunGenerate(stub.get(), req);
    });
  }
  for (std::thread& t : threads) t.join();
  int64_t preemptions = 0;
  for (const testing::StreamResult& r : results) {
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.finish_reason, v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(r.token_ids.size(), static_cast<size_t>(kMaxTokens));
    preemptions += r.usage.num_preemptions();
  }
  std::printf("[serve --device cuda] coded pool of 8 pages, %d requests: %lld preemptions\n",
              kRequests, static_cast<long long>(preemptions));
  EXPECT_GT(preemptions, 0);
  EXPECT_TRUE(testing::WaitUntil([&] {
    EngineSnapshot snap = engine.Snapshot();
    return snap.num_active == 0 && snap.pools[0].pages_free == snap.pools[0].pages_total;
  }));
  (*server)->Drain(absl::Seconds(5));
}

// prefix caching on the gpu: prompts sharing a 400-token prefix give the same greedy tokens
// with the cache as without it (pages shared; for vecinfer the fp16 ring restored from a
// device-memory snapshot at a 128-token checkpoint), and Usage reports the cached tokens.
TEST_F(CudaServeTest, PrefixCacheGivesTheSameGreedyTokens) {
  const std::vector<int32_t>& base = prompts_[1];  // 260 tokens of text
  std::vector<int32_t> prefix = base;
  while (prefix.size() < 400) prefix.insert(prefix.end(), base.begin() + 1, base.end());
  prefix.resize(400);
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t tail : {1000, 2000}) {
    std::vector<int32_t> p = prefix;
    for (int i = 0; i < 9; ++i) p.push_back(tail + 37 * i);
    prompts.push_back(p);
  }
  std::vector<int32_t> half(prefix.begin(), prefix.begin() + 200);
  for (int i = 0; i < 9; ++i) half.push_back(3000 + 11 * i);
  prompts.push_back(half);
  for (const std::string& codec : codecs_) {
    std::vector<testing::StreamResult> runs[2];
    for (bool cache : {true, false}) {
      StartServer(cache);
      for (const auto& p : prompts) {
        runs[cache].push_back(Serve(codec, p));
        ASSERT_TRUE(runs[cache].back().status.ok()) << runs[cache].back().status.error_message();
      }
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(runs[1][i].token_ids, runs[0][i].token_ids) << codec << " prompt " << i;
      std::printf("[serve --device cuda, prefix cache] %s prompt %zu: %d of %zu prompt tokens "
                  "cached\n",
                  codec.c_str(), i, runs[1][i].usage.cached_prompt_tokens(), prompts[i].size());
    }
    EXPECT_EQ(runs[1][1].usage.cached_prompt_tokens(), 384) << codec;
    EXPECT_GT(runs[1][2].usage.cached_prompt_tokens(), 0) << codec;
  }
}

}  // namespace
}  // namespace vqserve
