// a real server on 127.0.0.1 with the default model: concurrency with mixed codecs against
// solo runs, cancellations, a kv budget far too small, deadlines and slow readers.
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "tests/test_paths.h"
#include "tests/util/test_server.h"
#include "tests/util/prerequisite.h"

namespace vqserve::testing {
namespace {

// prompts of varied lengths; the long one passes the 128-token residual window so compressed
// codecs flush pages.
std::string Prompt(int i) {
  static const char* kTopics[] = {"the sea", "a small robot", "bread", "winter in the mountains",
                                  "a red bicycle", "the moon", "old libraries", "rain"};
  std::string p = std::string("Write a few words about ") + kTopics[i % 8] + ".";
  if (i % 16 == 3) {
    for (int k = 0; k < 17; ++k) p += " The quick brown fox jumps over the lazy dog.";
  }
  return p;
}

class ServerIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (SharedDefaultModel() == nullptr) VQ_SKIP_UNLESS_CI << "default model missing";
  }
};

TEST_F(ServerIntegrationTest, ConcurrentMixedCodecsMatchSoloRuns) {
  TestServerConfig cfg;
  cfg.pools.clear();
  // vecinfer always takes part: ctest's fixture test_codebooks trains its codebook first.
  std::vector<std::string> codecs = {"fp16", "kivi-k2v2", "kivi-k4v4", "vecinfer-k2v2"};
  ASSERT_TRUE(CodecAvailable("vecinfer-k2v2"))
      << "no vecinfer-k2v2.vqcb in " << VQSERVE_TEST_VQCB_DIR
      << " or data/vqcb: run through ctest (fixture test_codebooks) or tests/make_test_codebook.sh";
  for (const auto& c : codecs) cfg.pools.push_back({c, 96});
  cfg.num_slots = 32;
  cfg.scheduler.max_num_seqs = 32;
  // every prompt is prefilled in one chunk, as when run alone: with a compressed codec a chunk
  // boundary changes which earlier prompt tokens a prefill query sees as codes rather than fp16
  // (for fp16 chunking changes nothing: LlamaModelTest.ChunkedPrefillEqualsOneShot).
  cfg.scheduler.max_batched_tokens = 4096;
  TestServer server(cfg);
  constexpr int kStreams = 32;
  std::vector<v1::GenerateRequest> reqs;
  for (int i = 0; i < kStreams; ++i) {
    reqs.push_back(GreedyRequest(Prompt(i), 1 + (i * 5) % 4, codecs[i % codecs.size()]));
  }
  std::vector<StreamResult> together(kStreams);
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < kStreams; ++i) {
      threads.emplace_back([&, i] {
        auto stub = server.Stub();
        together[i] = RunGenerate(stub.get(), reqs[i]);
      });
    }
    for (auto& t : threads) t.join();
  }
  auto stub = server.Stub();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE("stream " + std::to_string(i) + " codec " + reqs[i].kv_codec());
    ASSERT_TRUE(together[i].status.ok()) << together[i].status.error_message();
    EXPECT_EQ(together[i].finish_reason, v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(static_cast<int>(together[i].token_ids.size()), reqs[i].max_tokens());
    EXPECT_EQ(together[i].usage.kv_codec(), reqs[i].kv_codec());
    StreamResult alone = RunGenerate(stub.get(), reqs[i]);
    ASSERT_TRUE(alone.status.ok());
    EXPECT_EQ(together[i].token_ids, alone.token_ids);
    EXPECT_EQ(together[i].text, alone.text);
  }
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(ServerIntegrationTest, RandomCancellationsReturnAllPages) {
  TestServerConfig cfg;
  cfg.pools = {{"kivi-k2v2", 64}, {"fp16", 64}};
  TestServer server(cfg);
  constexpr int kStreams = 8;
  std::atomic<int> cancelled{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937 rng(i);
      auto stub = server.Stub();
      grpc::ClientContext ctx;
      auto req = GreedyRequest(Prompt(i), 100, i % 2 ? "fp16" : "kivi-k2v2");
      auto reader = stub->Generate(&ctx, req);
      int cancel_after = 1 + rng() % 3;
      v1::GenerateResponse msg;
      int n = 0;
      while (reader->Read(&msg)) {
        if (++n == cancel_after) {
          ctx.TryCancel();
          ++cancelled;
        }
      }
      reader->Finish();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(cancelled.load(), kStreams);
  EXPECT_TRUE(server.WaitAllFree());
  // still serving.
  auto stub = server.Stub();
  StreamResult r = RunGenerate(stub.get(), GreedyRequest("Hello", 3));
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.token_ids.size(), 3u);
  EXPECT_TRUE(server.WaitAllFree());
}

// Usage.kv_bytes counts the request's own kv (its pages and the tokens in its ring), not the
// ring preallocated for its slot: with fp16 pages every cached token costs the fp16 bytes.
TEST_F(ServerIntegrationTest, UsageKvBytesCountsTheRequestsTokens) {
  TestServer server(TestServerConfig{});
  auto stub = server.Stub();
  for (int i : {1, 3}) {  // a short prompt (ring only), a long one (pages past the ring)
    StreamResult r = RunGenerate(stub.get(), GreedyRequest(Prompt(i), 8, "fp16"));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    const ModelConfig& c = SharedDefaultModel()->config();
    const int64_t per_token = int64_t{2} * c.num_layers * c.num_kv_heads * c.head_dim * 2;
    const int64_t tokens = r.usage.prompt_tokens() + r.usage.completion_tokens();
    // the last sampled token is not fed back, so the cache holds tokens - 1 of them.
    EXPECT_EQ(r.usage.kv_bytes(), (tokens - 1) * per_token) << "prompt " << i;
    EXPECT_DOUBLE_EQ(r.usage.kv_compression_ratio(), 1.0);
  }
  EXPECT_TRUE(server.WaitAllFree());
}

// vqserve:engine_step_seconds: every step that ran the model observes each phase once, and the
// phases lie within the whole step.
TEST_F(ServerIntegrationTest, EngineStepPhasesAreObservedOncePerStep) {
  TestServer server(TestServerConfig{});
  auto stub = server.Stub();
  StreamResult r = RunGenerate(stub.get(), GreedyRequest(Prompt(3), 8, "fp16"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_TRUE(server.WaitAllFree());
  Family<Histogram>& f = server.metrics().engine_step_seconds();
  const Histogram::Snapshot step = f.WithLabels({"step"}).Snap();
  // one prefill step at least, then a step per further token.
  EXPECT_GE(step.count, 8u);
  double phases = 0.0;
  for (const char* phase : {"schedule", "forward", "sample", "finish", "publish"}) {
    const Histogram::Snapshot s = f.WithLabels({phase}).Snap();
    EXPECT_EQ(s.count, step.count) << phase;
    EXPECT_GE(s.sum, 0.0) << phase;
    phases += s.sum;
  }
  EXPECT_GT(f.WithLabels({"forward"}).Snap().sum, 0.0);
  EXPECT_LE(phases, step.sum * 1.0001 + 1e-6);
}

TEST_F(ServerIntegrationTest, DeadlineAbortsAndFreesPages) {
  TestServer server(TestServerConfig{});
  auto stub = server.Stub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  auto reader = stub->Generate(&ctx, GreedyRequest(Prompt(1), 1500));
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(ServerIntegrationTest, TinyKvBudgetQueuesOrPreemptsAndAllComplete) {
  // fp16 keeps a sequence's newest (< 32) tokens in its slot and older ones in 32-token pages:
  // 6 requests of ~10 + 30 tokens each need a page from token 32 on, and the pool has 3.
  TestServerConfig cfg;
  cfg.pools = {{"fp16", 3}};
  cfg.num_slots = 6;
  cfg.scheduler.max_num_seqs = 6;
  cfg.start_engine = false;  // all six are queued before the first step: no timing luck
  TestServer server(cfg);
  constexpr int kStreams = 6;
  std::vector<v1::GenerateRequest> reqs;
  for (int i = 0; i < kStreams; ++i) reqs.push_back(GreedyRequest(Prompt(2 * i), 30));
  std::vector<StreamResult> together(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      auto stub = server.Stub();
      together[i] = RunGenerate(stub.get(), reqs[i]);
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return server.engine().Snapshot().num_active == kStreams; }));
  server.StartEngine();
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(together[i].status.ok()) << together[i].status.error_message();
    EXPECT_EQ(together[i].finish_reason, v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(together[i].token_ids.size(), 30u);
  }
  // 6 sequences past 32 tokens at once would need 6 pages: some were preempted (recompute).
  int64_t preemptions = 0;
  for (const auto& r : together) preemptions += r.usage.num_preemptions();
  std::printf("tiny kv budget: %lld preemptions over %d requests\n",
              static_cast<long long>(preemptions), kStreams);
  EXPECT_GT(preemptions, 0);
  EXPECT_EQ(server.engine().Snapshot().num_preemptions, preemptions);
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(ServerIntegrationTest, CodedPoolsPreemptAndAllComplete) {
  // vecinfer and kivi keep a sequence's newest 128 tokens (and the sink) in its slot and code
  // older ones into 32-token pages: prompts of ~180 tokens + 30 generated need 2 pages each,
  // and each pool has 4 for 3 requests.
  ASSERT_TRUE(CodecAvailable("vecinfer-k2v2")) << "run through ctest (fixture test_codebooks)";
  TestServerConfig cfg;
  cfg.pools = {{"vecinfer-k2v2", 4}, {"kivi-k2v2", 4}};
  cfg.num_slots = 6;
  cfg.scheduler.max_num_seqs = 6;
  cfg.start_engine = false;  // all six are queued before the first step
  TestServer server(cfg);
  constexpr int kStreams = 6;
  std::vector<StreamResult> together(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      std::string text = Prompt(2 * i);  // none of these is already long
      for (int k = 0; k < 17; ++k) text += " The quick brown fox jumps over the lazy dog.";
      auto stub = server.Stub();
      together[i] = RunGenerate(stub.get(), GreedyRequest(text, 30, i % 2 ? "kivi-k2v2"
                                                                          : "vecinfer-k2v2"));
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return server.engine().Snapshot().num_active == kStreams; }));
  server.StartEngine();
  for (auto& t : threads) t.join();
  int64_t preemptions = 0;
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(together[i].status.ok()) << together[i].status.error_message();
    EXPECT_EQ(together[i].finish_reason, v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(together[i].token_ids.size(), 30u);
    EXPECT_GT(together[i].usage.prompt_tokens(), 160) << "the prompt fills a page";
    EXPECT_EQ(together[i].usage.kv_codec(), i % 2 ? "kivi-k2v2" : "vecinfer-k2v2");
    preemptions += together[i].usage.num_preemptions();
  }
  std::printf("coded pools: %lld preemptions over %d requests\n",
              static_cast<long long>(preemptions), kStreams);
  EXPECT_GT(preemptions, 0);
  EXPECT_EQ(server.engine().Snapshot().num_preemptions, preemptions);
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(ServerIntegrationTest, SlowReaderDoesNotStallOthersAndGetsEverything) {
  TestServer server(TestServerConfig{});
  auto stub = server.Stub();
  auto req = GreedyRequest(Prompt(2), 12);
  StreamResult reference = RunGenerate(stub.get(), req);
  ASSERT_TRUE(reference.status.ok());

  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, req);
  v1::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  std::vector<int32_t> ids(msg.token_ids().begin(), msg.token_ids().end());
  int messages = 1;
  // while the slow reader sleeps, another request runs to completion.
  StreamResult other = RunGenerate(stub.get(), GreedyRequest(Prompt(5), 8));
  EXPECT_TRUE(other.status.ok());
  EXPECT_EQ(other.token_ids.size(), 8u);
  while (reader->Read(&msg)) {
    ids.insert(ids.end(), msg.token_ids().begin(), msg.token_ids().end());
    ++messages;
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(ids, reference.token_ids);
  EXPECT_LE(messages, 13);  // at most one per token plus the final one
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(ServerIntegrationTest, AbortByRequestIdAndStopStrings) {
  TestServer server(TestServerConfig{});
  auto stub = server.Stub();
  // stop strings: the reference text (no stop) contains the stop; with it, the text ends before.
  auto req = GreedyRequest("Count: one, two, three, four, five, six,", 8);
  StreamResult full = RunGenerate(stub.get(), req);
  ASSERT_TRUE(full.status.ok());
  ASSERT_GE(full.text.size(), 4u);
  std::string stop = full.text.substr(full.text.size() / 2, 2);
  req.add_stop(stop);
  StreamResult stopped = RunGenerate(stub.get(), req);
  ASSERT_TRUE(stopped.status.ok());
  EXPECT_EQ(stopped.finish_reason, v1::FINISH_REASON_STOP);
  EXPECT_EQ(stopped.text, full.text.substr(0, full.text.find(stop)));

  // abort by request id mid-stream.
  grpc::ClientContext ctx;
  auto long_req = GreedyRequest(Prompt(0), 1500);
  long_req.set_request_id("abort-me");
  auto reader = stub->Generate(&ctx, long_req);
  v1::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  {
    grpc::ClientContext actx;
    v1::AbortRequest areq;
    areq.set_request_id("abort-me");
    v1::AbortResponse aresp;
    ASSERT_TRUE(stub->Abort(&actx, areq, &aresp).ok());
    EXPECT_TRUE(aresp.found());
  }
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  while (reader->Read(&msg)) reason = msg.finish_reason();
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(reason, v1::FINISH_REASON_ABORT);
  EXPECT_TRUE(server.WaitAllFree());
}

}  // namespace
}  // namespace vqserve::testing
