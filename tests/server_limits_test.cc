// the limits a deployment sets on a real server on 127.0.0.1: streams per client (peer or api
// key), the largest request, and request deadlines (the client's and --max-request-seconds)
// that free a request's kv pages even when its client stops reading.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/prerequisite.h"
#include "tests/util/test_server.h"

namespace vqserve::testing {
namespace {

class ServerLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (SharedDefaultModel() == nullptr) VQ_SKIP_UNLESS_CI << "default model missing";
  }
};

// a Generate call the test drives by hand.
struct OpenStream {
  std::unique_ptr<grpc::ClientContext> ctx = std::make_unique<grpc::ClientContext>();
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader;
  // reads to the end; returns the status and counts the tokens.
  grpc::Status Drain(int* tokens = nullptr) {
    v1::GenerateResponse msg;
    while (reader->Read(&msg)) {
      if (tokens != nullptr) *tokens += msg.token_ids_size();
    }
    return reader->Finish();
  }
};

OpenStream Open(v1::Inference::Stub* stub, const v1::GenerateRequest& req,
                const std::string& api_key = "") {
  OpenStream s;
  if (!api_key.empty()) s.ctx->AddMetadata("authorization", "Bearer " + api_key);
  s.reader = stub->Generate(s.ctx.get(), req);
  return s;
}

// polls `done` (the event itself) every 5 ms for up to 30 s.
template <typename Fn>
bool WaitUntil(Fn done) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// the /metrics view: every page free, no kv bytes held (pages or a residual ring), nothing
// running or waiting.
bool PagesFreeInMetrics(TestServer& server) {
  ServerMetrics& m = server.metrics();
  return m.kv_pages_free().WithLabels({"fp16"}).Value() ==
             m.kv_pages_total().WithLabels({"fp16"}).Value() &&
         m.kv_cache_bytes().WithLabels({"fp16"}).Value() == 0 &&
         m.requests_running().Get().Value() == 0 && m.requests_waiting().Get().Value() == 0;
}

// the request runs and holds kv (its residual ring; pages once it passes the sink).
bool HoldsKv(TestServer& server) {
  EngineSnapshot s = server.engine().Snapshot();
  return s.num_running == 1 && s.pools[0].slots_free < s.pools[0].slots_total;
}

TEST_F(ServerLimitsTest, StreamsPerPeerAreBoundedAndReleased) {
  TestServerConfig cfg;
  cfg.server.limits.max_streams_per_client = 2;
  TestServer server(cfg);
  auto stub = server.Stub();
  const std::string peer = "peer:ipv4:127.0.0.1";
  const ClientStreamLimiter& streams = server.server().service().streams();
  std::vector<OpenStream> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(Open(stub.get(), GreedyRequest("Once upon a time", 1000)));
    v1::GenerateResponse first;
    ASSERT_TRUE(held.back().reader->Read(&first));  // admitted and streaming
  }
  EXPECT_EQ(streams.open(peer), 2);
  // a third stream from the same address (another channel: the bound is per client, not per
  // connection) is refused, naming the limit.
  auto other_channel = server.Stub();
  StreamResult refused = RunGenerate(other_channel.get(), GreedyRequest("Hi", 2));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.status.error_message(),
            "max_streams_per_client: client ipv4:127.0.0.1 has 2 streams open (limit 2, "
            "--max-streams-per-client)");
  EXPECT_EQ(refused.num_messages, 0);
  // a cancelled stream gives its slot back (wait for the server to see the cancel).
  held[0].ctx->TryCancel();
  EXPECT_EQ(held[0].Drain().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(WaitUntil([&] { return streams.open(peer) == 1; }));
  // a stream that ends normally gives its slot back before the client sees its status, so the
  // next call right after it is admitted.
  StreamResult short_one = RunGenerate(stub.get(), GreedyRequest("Hi", 2));
  EXPECT_TRUE(short_one.status.ok()) << short_one.status.error_message();
  StreamResult again = RunGenerate(stub.get(), GreedyRequest("Hi", 2));
  EXPECT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_EQ(again.token_ids.size(), 2u);
  held[1].ctx->TryCancel();
  held[1].Drain();
  EXPECT_TRUE(WaitUntil([&] { return streams.open(peer) == 0; }));
  EXPECT_TRUE(server.WaitAllFree());
  EXPECT_GE(server.metrics().request_errors_total().WithLabels({"RESOURCE_EXHAUSTED"}).Value(),
            1);
}

TEST_F(ServerLimitsTest, StreamsPerApiKeyAreBoundedSeparately) {
  TestServerConfig cfg;
  cfg.server.auth = ApiKeyAuth({"key-a", "key-b"});
  cfg.server.limits.max_streams_per_client = 1;
  TestServer server(cfg);
  auto stub = server.Stub();
  OpenStream a = Open(stub.get(), GreedyRequest("Once upon a time", 1000), "key-a");
  v1::GenerateResponse first;
  ASSERT_TRUE(a.reader->Read(&first));
  // key-a holds its one stream: refused, without the key in the message.
  StreamResult refused =
      RunGenerate(stub.get(), GreedyRequest("Hi", 2), {{"authorization", "Bearer key-a"}});
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.status.error_message().find("this api key has 1 streams open (limit 1"),
            std::string::npos)
      << refused.status.error_message();
  EXPECT_EQ(refused.status.error_message().find("key-a"), std::string::npos);
  // key-b, from the same address, has its own bound.
  StreamResult b =
      RunGenerate(stub.get(), GreedyRequest("Hi", 2), {{"authorization", "Bearer key-b"}});
  EXPECT_TRUE(b.status.ok()) << b.status.error_message();
  // an unauthenticated call takes no slot and is refused for its key.
  EXPECT_EQ(RunGenerate(stub.get(), GreedyRequest("Hi", 2)).status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  a.ctx->TryCancel();
  a.Drain();
  EXPECT_TRUE(WaitUntil(
      [&] { return server.server().service().streams().open("key:key-a") == 0; }));
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(ServerLimitsTest, RequestSizeIsBounded) {
  TestServerConfig cfg;
  cfg.server.max_request_bytes = 64 << 10;
  cfg.scheduler.max_model_len = 256;
  TestServer server(cfg);
  auto stub = server.Stub();
  // past the message bound: grpc refuses it before it is parsed.
  StreamResult big = RunGenerate(stub.get(), GreedyRequest(std::string(100 << 10, 'a'), 2));
  EXPECT_EQ(big.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << big.status.error_message();
  EXPECT_NE(big.status.error_message().find("larger than max"), std::string::npos)
      << big.status.error_message();
  // within it but longer than the context: INVALID_ARGUMENT naming the field.
  v1::GenerateRequest ids = GreedyRequest("", 2);
  for (int i = 0; i < 300; ++i) ids.mutable_token_ids()->add_ids(100 + i);
  StreamResult too_long = RunGenerate(stub.get(), ids);
  EXPECT_EQ(too_long.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(too_long.status.error_message().rfind("prompt: 300 tokens do not fit", 0), 0u)
      << too_long.status.error_message();
  // the server keeps serving.
  StreamResult ok = RunGenerate(stub.get(), GreedyRequest("Hi", 2));
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
}

std::string Describe(TestServer& server) {
  EngineSnapshot s = server.engine().Snapshot();
  return "active " + std::to_string(s.num_active) + ", running " +
         std::to_string(s.num_running) + ", waiting " + std::to_string(s.num_waiting) +
         ", pages free " + std::to_string(s.pools[0].pages_free) + "/" +
         std::to_string(s.pools[0].pages_total) + ", steps " + std::to_string(s.steps);
}

bool AllFree(TestServer& server) {
  EngineSnapshot s = server.engine().Snapshot();
  return s.num_active == 0 && s.pools[0].pages_free == s.pools[0].pages_total &&
         s.pools[0].slots_free == s.pools[0].slots_total;
}

// a request that cannot finish within any of the tests' deadlines (thousands of tokens), and
// a pool that holds it whole (126 pages of 32 tokens).
v1::GenerateRequest Endless() { return GreedyRequest("Once upon a time", 4000); }
constexpr int kEndlessPages = 128;

// --max-request-seconds: a client with no deadline that never reads; the engine ends the request
// at the server's limit and its pages come back while the client still reads nothing.
TEST_F(ServerLimitsTest, ServerDeadlineFreesPagesOfAClientThatNeverReads) {
  TestServerConfig cfg;
  cfg.server.limits.max_request_time = absl::Seconds(10);
  cfg.pools = {{"fp16", kEndlessPages}};
  TestServer server(cfg);
  auto stub = server.Stub();
  OpenStream s = Open(stub.get(), Endless());
  // running: it holds pages (the client has read nothing).
  ASSERT_TRUE(WaitUntil([&] { return HoldsKv(server); }))
      << "the request never ran before its deadline: " << Describe(server) << "; "
      << s.Drain().error_message();
  // the client still reads nothing; the pages come back at the deadline.
  ASSERT_TRUE(WaitUntil([&] { return AllFree(server); }));
  EXPECT_TRUE(WaitUntil([&] { return PagesFreeInMetrics(server); }));
  int tokens = 0;
  grpc::Status st = s.Drain(&tokens);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  EXPECT_NE(st.error_message().find("--max-request-seconds"), std::string::npos)
      << st.error_message();
  EXPECT_LT(tokens, 4000);
  EXPECT_EQ(server.metrics().request_errors_total().WithLabels({"DEADLINE_EXCEEDED"}).Value(),
            1);
}

// the client's grpc deadline, for a running request whose client never reads and for a
// request still waiting in the queue.
TEST_F(ServerLimitsTest, ClientDeadlineFreesPagesRunningOrQueued) {
  TestServerConfig cfg;
  cfg.scheduler.max_num_seqs = 1;
  cfg.pools = {{"fp16", kEndlessPages}};
  TestServer server(cfg);
  auto stub = server.Stub();
  OpenStream running;
  running.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  running.reader = stub->Generate(running.ctx.get(), Endless());
  ASSERT_TRUE(WaitUntil([&] { return HoldsKv(server); }))
      << "the request never ran before its deadline: " << Describe(server);
  // the only running slot is held: this one waits in the queue until its deadline.
  OpenStream queued;
  queued.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  queued.reader = stub->Generate(queued.ctx.get(), GreedyRequest("Hello", 4));
  grpc::Status qst = queued.Drain();
  EXPECT_EQ(qst.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << qst.error_message();
  // the running one's client never reads; its pages come back at its deadline.
  ASSERT_TRUE(WaitUntil([&] { return AllFree(server); }));
  EXPECT_TRUE(WaitUntil([&] { return PagesFreeInMetrics(server); }));
  int tokens = 0;
  grpc::Status st = running.Drain(&tokens);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  EXPECT_LT(tokens, 4000);
}

}  // namespace
}  // namespace vqserve::testing
