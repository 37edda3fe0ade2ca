// request features working end to end over grpc (not only their rejections): logprobs against
// the model's own log-softmax, repetition penalty against a reference loop, stop token ids,
// chat prompts against a hand-written chatml rendering, seeded sampling, priority order, and
// api keys on Tokenize and Abort. references run the same model directly on an fp16 cache
// while no server exists (the model's scratch is not shared with an engine thread).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/kv/codec_factory.h"
#include "runtime/kv/paged_kv_cache.h"
#include "server/api_key_auth.h"
#include "tests/util/model_compare.h"
#include "tests/util/prerequisite.h"
#include "tests/util/test_server.h"

namespace vqserve::testing {
namespace {

class GrpcFeaturesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (SharedDefaultModel() == nullptr) VQ_SKIP_UNLESS_CI << "default model missing";
  }
};

// greedy (or penalized greedy) generation of `n` tokens after `prompt` on a fresh fp16 cache,
// one token a step: *rows gets the logits each token was picked from.
std::vector<int32_t> ReferenceGenerate(const std::vector<int32_t>& prompt, int n, double penalty,
                                       std::vector<std::vector<float>>* rows) {
  LlamaModel& model = *SharedDefaultModel();
  auto codec = MakeCodec("fp16", model.kv_shape(), nullptr);
  EXPECT_TRUE(codec.ok());
  std::unique_ptr<KvCache> cache = MakePagedKvCache(std::move(*codec), 64, 1);
  std::vector<int32_t> table(64);
  for (int i = 0; i < 64; ++i) table[i] = i;
  std::vector<int32_t> seq, out;
  std::vector<float> logits;
  auto step = [&](std::span<const int32_t> tokens) {
    ForwardSeq f;
    f.tokens = tokens;
    f.cache = cache.get();
    f.kv.slot = 0;
    f.kv.block_table = table.data();
    f.kv.num_blocks = 64;
    f.kv.num_cached = static_cast<int>(seq.size());
    seq.insert(seq.end(), tokens.begin(), tokens.end());
    logits.clear();  // Forward appends
    model.Forward(std::span<const ForwardSeq>(&f, 1), &logits);
  };
  step(prompt);
  for (int i = 0; i < n; ++i) {
    rows->push_back(logits);
    // the ctrl penalty, written out here: each distinct token seen so far once.
    std::vector<double> x(logits.begin(), logits.end());
    std::vector<bool> seen(x.size(), false);
    for (int32_t id : seq) {
      if (penalty == 1.0 || seen[id]) continue;
      seen[id] = true;
      x[id] = x[id] > 0 ? x[id] / penalty : x[id] * penalty;
    }
    const int32_t pick = static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
    out.push_back(pick);
    step(std::span<const int32_t>(&pick, 1));
  }
  return out;
}

std::vector<double> LogSoftmax(const std::vector<float>& row) {
  const double m = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (float v : row) sum += std::exp(v - m);
  std::vector<double> out(row.size());
  for (size_t i = 0; i < row.size(); ++i) out[i] = row[i] - m - std::log(sum);
  return out;
}

std::vector<int32_t> Ids(const std::string& text) {
  return SharedDefaultModel()->tokenizer().Encode(text, /*add_bos=*/true, false);
}

v1::GenerateRequest IdsRequest(const std::vector<int32_t>& ids, int max_tokens) {
  v1::GenerateRequest r;
  for (int32_t id : ids) r.mutable_token_ids()->add_ids(id);
  r.set_max_tokens(max_tokens);
  r.set_temperature(0.0f);
  r.set_ignore_eos(true);
  return r;
}

// every streamed message of one Generate call (for the logprobs).
std::vector<v1::GenerateResponse> ReadAll(v1::Inference::Stub* stub,
                                          const v1::GenerateRequest& req, grpc::Status* st) {
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, req);
  std::vector<v1::GenerateResponse> out;
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) out.push_back(msg);
  *st = reader->Finish();
  return out;
}

TEST_F(GrpcFeaturesTest, LogprobsAreTheModelsLogSoftmax) {
  const std::vector<int32_t> prompt = Ids("The three primary colours are");
  constexpr int kN = 6, kTop = 5;
  std::vector<std::vector<float>> rows;
  const std::vector<int32_t> want = ReferenceGenerate(prompt, kN, 1.0, &rows);
  TestServer server(TestServerConfig{});
  auto stub = server.Stub();
  v1::GenerateRequest req = IdsRequest(prompt, kN);
  req.set_logprobs(kTop);
  grpc::Status st;
  std::vector<v1::GenerateResponse> msgs = ReadAll(stub.get(), req, &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::vector<int32_t> got;
  std::vector<v1::TokenLogprob> lps;
  for (const auto& m : msgs) {
    ASSERT_EQ(m.logprobs_size(), m.token_ids_size()) << "one logprob entry per token";
    got.insert(got.end(), m.token_ids().begin(), m.token_ids().end());
    lps.insert(lps.end(), m.logprobs().begin(), m.logprobs().end());
  }
  ASSERT_EQ(got, want);
  for (int i = 0; i < kN; ++i) {
    const std::vector<double> ref = LogSoftmax(rows[i]);
    EXPECT_EQ(lps[i].token_id(), got[i]);
    EXPECT_NEAR(lps[i].logprob(), ref[got[i]], 2e-3) << "token " << i;
    EXPECT_LT(lps[i].logprob(), 0.0f);
    ASSERT_EQ(lps[i].top_size(), kTop);
    // the top entries are the kTop largest of the reference, in order (near-ties aside).
    std::vector<int> order(ref.size());
    for (size_t k = 0; k < ref.size(); ++k) order[k] = static_cast<int>(k);
    std::partial_sort(order.begin(), order.begin() + kTop, order.end(),
                      [&](int a, int b) { return ref[a] > ref[b]; });
    for (int k = 0; k < kTop; ++k) {
      const auto& t = lps[i].top(k);
      EXPECT_NEAR(t.logprob(), ref[t.token_id()], 2e-3) << "token " << i << " top " << k;
      EXPECT_NEAR(t.logprob(), ref[order[k]], 2e-3) << "token " << i << " top " << k;
      if (k > 0) EXPECT_LE(t.logprob(), lps[i].top(k - 1).logprob());
    }
    EXPECT_EQ(lps[i].top(0).token_id(), got[i]);
  }
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(GrpcFeaturesTest, RepetitionPenaltyFollowsTheReferenceLoop) {
  // a prompt the greedy model keeps repeating.
  const std::vector<int32_t> prompt = Ids("one two one two one two one two one two one two");
  constexpr int kN = 10;
  std::vector<std::vector<float>> rows_plain, rows_pen;
  const std::vector<int32_t> plain = ReferenceGenerate(prompt, kN, 1.0, &rows_plain);
  const std::vector<int32_t> penalized = ReferenceGenerate(prompt, kN, 1.8, &rows_pen);
  ASSERT_NE(plain, penalized) << "the penalty must change this greedy continuation";
  TestServer server(TestServerConfig{});
  auto stub = server.Stub();
  v1::GenerateRequest req = IdsRequest(prompt, kN);
  StreamResult a = RunGenerate(stub.get(), req);
  req.set_repetition_penalty(1.8f);
  StreamResult b = RunGenerate(stub.get(), req);
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  ASSERT_TRUE(b.status.ok()) << b.status.error_message();
  EXPECT_EQ(a.token_ids, plain);
  EXPECT_EQ(b.token_ids, penalized);
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(GrpcFeaturesTest, StopTokenIdsEndTheStreamUnstreamed) {
  const std::vector<int32_t> prompt = Ids("Count: one, two, three, four, five, six,");
  TestServer server(TestServerConfig{});
  auto stub = server.Stub();
  StreamResult full = RunGenerate(stub.get(), IdsRequest(prompt, 10));
  ASSERT_TRUE(full.status.ok());
  ASSERT_EQ(full.token_ids.size(), 10u);
  // stop at the first occurrence of the 5th token (not streamed, finish STOP).
  const int32_t stop = full.token_ids[4];
  const size_t first = std::find(full.token_ids.begin(), full.token_ids.end(), stop) -
                       full.token_ids.begin();
  v1::GenerateRequest req = IdsRequest(prompt, 10);
  req.add_stop_token_ids(stop);
  StreamResult stopped = RunGenerate(stub.get(), req);
  ASSERT_TRUE(stopped.status.ok()) << stopped.status.error_message();
  EXPECT_EQ(stopped.finish_reason, v1::FINISH_REASON_STOP);
  EXPECT_EQ(stopped.token_ids,
            std::vector<int32_t>(full.token_ids.begin(), full.token_ids.begin() + first));
  EXPECT_EQ(stopped.usage.completion_tokens(), static_cast<int>(first) + 1)
      << "the stop token was generated (counted), not streamed";
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(GrpcFeaturesTest, ChatPromptIsTheChatMlRendering) {
  // the default model's template is chatml: written out by hand here.
  const std::string rendered =
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
      "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
  const std::vector<int32_t> ids =
      SharedDefaultModel()->tokenizer().Encode(rendered, /*add_bos=*/false, true);
  TestServer server(TestServerConfig{});
  auto stub = server.Stub();
  v1::GenerateRequest chat;
  auto* m = chat.mutable_chat()->add_messages();
  m->set_role("system");
  m->set_content("You are a helpful assistant.");
  m = chat.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("What is the capital of France?");
  chat.set_temperature(0.0f);
  chat.set_max_tokens(16);
  StreamResult a = RunGenerate(stub.get(), chat);
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_EQ(a.usage.prompt_tokens(), static_cast<int>(ids.size()));
  v1::GenerateRequest by_ids = IdsRequest(ids, 16);
  by_ids.set_ignore_eos(false);
  StreamResult b = RunGenerate(stub.get(), by_ids);
  ASSERT_TRUE(b.status.ok());
  EXPECT_EQ(a.token_ids, b.token_ids);
  EXPECT_FALSE(a.text.empty());
  // (what the 135M model answers is its own business: greedily, in French, without "Paris".)
  // Tokenize answers the same ids for the chat.
  grpc::ClientContext ctx;
  v1::TokenizeRequest treq;
  *treq.mutable_chat() = chat.chat();
  v1::TokenizeResponse tresp;
  ASSERT_TRUE(stub->Tokenize(&ctx, treq, &tresp).ok());
  EXPECT_EQ(std::vector<int32_t>(tresp.token_ids().begin(), tresp.token_ids().end()), ids);
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(GrpcFeaturesTest, SeededSamplingIsReproducibleAndTopKOneIsGreedy) {
  const std::vector<int32_t> prompt = Ids("Once upon a time, in a small village,");
  constexpr int kN = 12;
  std::vector<std::vector<float>> rows;
  const std::vector<int32_t> greedy = ReferenceGenerate(prompt, kN, 1.0, &rows);
  std::vector<StreamResult> runs;
  {
    TestServer server(TestServerConfig{});
    auto stub = server.Stub();
    auto sampled = [&](uint64_t seed, int top_k) {
      v1::GenerateRequest req = IdsRequest(prompt, kN);
      req.set_temperature(1.5f);
      req.set_seed(seed);
      if (top_k > 0) req.set_top_k(top_k);
      return RunGenerate(stub.get(), req);
    };
    runs = {sampled(7, 0), sampled(7, 0), sampled(8, 0), sampled(9, 0), sampled(7, 1),
            sampled(11, 3)};
    for (const auto& r : runs) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_TRUE(server.WaitAllFree());
  }
  EXPECT_EQ(runs[0].token_ids, runs[1].token_ids) << "same seed, same tokens";
  EXPECT_TRUE(runs[2].token_ids != runs[0].token_ids || runs[3].token_ids != runs[0].token_ids)
      << "at temperature 1.5 three seeds gave one continuation";
  EXPECT_NE(runs[0].token_ids, greedy) << "sampling at temperature 1.5 picked greedily 12 times";
  EXPECT_EQ(runs[4].token_ids, greedy) << "top_k 1 samples the argmax";
  // top_k 3: every token is among the 3 largest logits of the row it was sampled from (the
  // server's own tokens fed to the reference; the server no longer exists).
  LlamaModel& model = *SharedDefaultModel();
  auto codec = MakeCodec("fp16", model.kv_shape(), nullptr);
  ASSERT_TRUE(codec.ok());
  std::unique_ptr<KvCache> cache = MakePagedKvCache(std::move(*codec), 64, 1);
  const std::vector<int32_t>& forced = runs[5].token_ids;
  std::vector<std::vector<float>> fed =
      RunSeq(model, *cache, 0, 0, 64, prompt, 0, kN, &forced, nullptr);
  for (int i = 0; i < kN; ++i) {
    const std::vector<float>& row = fed[i];
    int larger = 0;
    for (float v : row) larger += v > row[forced[i]];
    EXPECT_LT(larger, 3) << "token " << i << " is not in the top 3";
  }
}

// seeded sampled requests run together (every step draws their 6 rows at once, in parallel on
// the host) give the tokens each gives alone: each row's logits do not depend on the batch
// (q8 path) and each request has its own sampler.
TEST_F(GrpcFeaturesTest, SampledRequestsTogetherDrawAsAlone) {
  const std::vector<int32_t> prompt = Ids("Once upon a time, in a small village,");
  constexpr int kN = 10, kR = 6;
  auto request = [&](int i) {
    v1::GenerateRequest req = IdsRequest(prompt, kN);
    req.set_temperature(1.2f);
    req.set_top_p(0.95f);
    req.set_seed(100 + i);
    return req;
  };
  std::vector<StreamResult> alone(kR), together(kR);
  {
    TestServer server(TestServerConfig{});
    auto stub = server.Stub();
    for (int i = 0; i < kR; ++i) alone[i] = RunGenerate(stub.get(), request(i));
    EXPECT_TRUE(server.WaitAllFree());
  }
  {
    TestServerConfig cfg;
    cfg.start_engine = false;  // all queued first: they run in the same steps
    TestServer server(cfg);
    std::vector<std::thread> threads;
    for (int i = 0; i < kR; ++i) {
      threads.emplace_back([&, i] {
        auto stub = server.Stub();
        together[i] = RunGenerate(stub.get(), request(i));
      });
      ASSERT_TRUE(WaitUntil([&] { return server.engine().Snapshot().num_active == i + 1; }));
    }
    server.StartEngine();
    for (auto& t : threads) t.join();
    EXPECT_TRUE(server.WaitAllFree());
  }
  std::set<std::vector<int32_t>> distinct;
  for (int i = 0; i < kR; ++i) {
    ASSERT_TRUE(alone[i].status.ok()) << alone[i].status.error_message();
    ASSERT_TRUE(together[i].status.ok()) << together[i].status.error_message();
    EXPECT_EQ(together[i].token_ids, alone[i].token_ids) << "request " << i;
    distinct.insert(alone[i].token_ids);
  }
  EXPECT_GT(distinct.size(), 1u) << "six seeds gave one continuation";
}

TEST_F(GrpcFeaturesTest, HigherPriorityRunsFirst) {
  TestServerConfig cfg;
  cfg.scheduler.max_num_seqs = 1;  // one at a time: the order is the scheduler's choice
  cfg.start_engine = false;
  TestServer server(cfg);
  // submitted in the order priority 0, 1, 5, each seen queued before the next is sent.
  const int priorities[3] = {0, 1, 5};
  std::vector<StreamResult> results(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      auto stub = server.Stub();
      v1::GenerateRequest req = GreedyRequest("Tell me about the sea.", 3);
      req.set_priority(priorities[i]);
      results[i] = RunGenerate(stub.get(), req);
    });
    ASSERT_TRUE(WaitUntil([&] { return server.engine().Snapshot().num_active == i + 1; }));
  }
  server.StartEngine();
  for (auto& t : threads) t.join();
  for (const auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  // run in the order 5, 1, 0 against the submit order 0, 1, 5: each later-run request was
  // submitted earlier, so it waited strictly longer (server-side times; fifo would run the
  // priority-0 request first, with the shortest wait).
  const double q0 = results[0].usage.queue_time_seconds();
  const double q1 = results[1].usage.queue_time_seconds();
  const double q5 = results[2].usage.queue_time_seconds();
  std::printf("queue times: priority 5 %.3f s, 1 %.3f s, 0 %.3f s\n", q5, q1, q0);
  EXPECT_LT(q5, q1);
  EXPECT_LT(q1, q0);
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(GrpcFeaturesTest, ApiKeysGuardTokenizeAndAbort) {
  TestServerConfig cfg;
  cfg.server.auth = ApiKeyAuth({"k-123"});
  TestServer server(cfg);
  auto stub = server.Stub();
  auto tokenize = [&](const std::string& key) {
    grpc::ClientContext ctx;
    if (!key.empty()) ctx.AddMetadata("authorization", key);
    v1::TokenizeRequest req;
    req.set_text("Hello");
    v1::TokenizeResponse resp;
    return stub->Tokenize(&ctx, req, &resp).error_code();
  };
  EXPECT_EQ(tokenize(""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(tokenize("Bearer wrong"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(tokenize("Bearer k-123"), grpc::StatusCode::OK);

  auto abort = [&](const std::string& key, const std::string& id, bool* found) {
    grpc::ClientContext ctx;
    if (!key.empty()) ctx.AddMetadata("authorization", key);
    v1::AbortRequest req;
    req.set_request_id(id);
    v1::AbortResponse resp;
    grpc::Status st = stub->Abort(&ctx, req, &resp);
    *found = resp.found();
    return st.error_code();
  };
  // a keyed client's request, running; unauthenticated aborts of it are refused and it finishes.
  constexpr int kN = 24;
  grpc::ClientContext victim_ctx;
  victim_ctx.AddMetadata("authorization", "Bearer k-123");
  v1::GenerateRequest victim = GreedyRequest("Tell me a story.", kN);
  victim.set_request_id("victim");
  auto reader = stub->Generate(&victim_ctx, victim);
  v1::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  int tokens = msg.token_ids_size();
  bool found = true;
  EXPECT_EQ(abort("", "victim", &found), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(found);
  EXPECT_EQ(abort("Bearer wrong", "victim", &found), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(found);
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  while (reader->Read(&msg)) {
    tokens += msg.token_ids_size();
    if (msg.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) reason = msg.finish_reason();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(tokens, kN);
  // a keyed abort of a running request cancels it.
  grpc::ClientContext ctx2;
  ctx2.AddMetadata("authorization", "Bearer k-123");
  v1::GenerateRequest target = GreedyRequest("Tell me a story.", 1500);
  target.set_request_id("target");
  auto reader2 = stub->Generate(&ctx2, target);
  ASSERT_TRUE(reader2->Read(&msg));
  EXPECT_EQ(abort("Bearer k-123", "target", &found), grpc::StatusCode::OK);
  EXPECT_TRUE(found);
  reason = v1::FINISH_REASON_UNSPECIFIED;
  while (reader2->Read(&msg)) reason = msg.finish_reason();
  ASSERT_TRUE(reader2->Finish().ok());
  EXPECT_EQ(reason, v1::FINISH_REASON_ABORT);
  EXPECT_GE(server.metrics().request_errors_total().WithLabels({"UNAUTHENTICATED"}).Value(), 4);
  EXPECT_TRUE(server.WaitAllFree());
}

}  // namespace
}  // namespace vqserve::testing
