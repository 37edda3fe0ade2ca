// the grpc surface of a real server on 127.0.0.1: bad-input matrix, invalid utf-8, queue bound,
// api keys, tls, health, model info, tokenize and the graceful drain.
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/test_paths.h"
#include "tests/util/test_server.h"
#include "tools/vqctl/health_client.h"
#include "tests/util/prerequisite.h"

namespace vqserve::testing {
namespace {

class ServerApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (SharedDefaultModel() == nullptr) VQ_SKIP_UNLESS_CI << "default model missing";
  }
};

struct BadCase {
  const char* name;
  std::function<void(v1::GenerateRequest*)> edit;
  std::string field;  // the message names it (the whole message, for invalid utf-8)
};

TEST_F(ServerApiTest, BadInputIsInvalidArgumentNamingTheField) {
  TestServerConfig cfg;
  cfg.pools = {{"fp16", 16}, {"kivi-k2v2", 16}};
  cfg.scheduler.max_model_len = 64;
  TestServer server(cfg);
  auto stub = server.Stub();
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "word ";
  std::vector<BadCase> cases = {
      {"empty text", [](auto* r) { r->set_text(""); }, "text"},
      {"no prompt", [](auto* r) { r->clear_prompt(); }, "prompt"},
      {"empty token ids", [](auto* r) { r->mutable_token_ids(); }, "token_ids"},
      {"prompt longer than context", [&](auto* r) { r->set_text(long_text + long_text); },
       "prompt"},
      {"top_p zero", [](auto* r) { r->set_top_p(0); }, "top_p"},
      {"top_p above one", [](auto* r) { r->set_top_p(1.5f); }, "top_p"},
      {"negative temperature", [](auto* r) { r->set_temperature(-0.5f); }, "temperature"},
      {"max_tokens zero", [](auto* r) { r->set_max_tokens(0); }, "max_tokens"},
      {"max_tokens beyond context", [](auto* r) { r->set_max_tokens(64); }, "max_tokens"},
      {"prompt + max_tokens beyond context", [&](auto* r) {
         r->set_text(long_text);
         r->set_max_tokens(40);
       }, "max_tokens"},
      {"unknown codec", [](auto* r) { r->set_kv_codec("vecinfer-k9v9"); }, "kv_codec"},
      {"token id out of vocabulary", [](auto* r) {
         r->mutable_token_ids()->add_ids(1);
         r->mutable_token_ids()->add_ids(49152);
       }, "token_ids"},
      {"negative token id", [](auto* r) { r->mutable_token_ids()->add_ids(-1); }, "token_ids"},
      {"bad chat role", [](auto* r) {
         auto* m = r->mutable_chat()->add_messages();
         m->set_role("robot");
         m->set_content("hi");
       }, "role"},
      {"negative logprobs", [](auto* r) { r->set_logprobs(-1); }, "logprobs"},
      {"empty stop string", [](auto* r) { r->add_stop(""); }, "stop[0]"},
      {"stop token out of vocabulary", [](auto* r) { r->add_stop_token_ids(1 << 20); },
       "stop_token_ids"},
      {"zero repetition penalty", [](auto* r) { r->set_repetition_penalty(0); },
       "repetition_penalty"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    v1::GenerateRequest req = GreedyRequest("Hello", 4);
    c.edit(&req);
    StreamResult r = RunGenerate(stub.get(), req);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << r.status.error_message();
    EXPECT_NE(r.status.error_message().find(c.field), std::string::npos)
        << r.status.error_message();
    EXPECT_EQ(r.num_messages, 0);
  }
  // the same request with good fields works.
  EXPECT_TRUE(RunGenerate(stub.get(), GreedyRequest("Hello", 2, "kivi-k2v2")).status.ok());
  EXPECT_TRUE(server.WaitAllFree());
}

// request text is proto `bytes`: invalid utf-8 reaches the server, which names field and offset.
TEST_F(ServerApiTest, InvalidUtf8IsInvalidArgumentNamingTheField) {
  TestServer server(TestServerConfig{});
  auto stub = server.Stub();
  const std::string bad("caf\xC3(", 5);  // a 2-byte lead followed by '(' at byte 3
  std::vector<BadCase> cases = {
      {"text", [&](auto* r) { r->set_text(bad); }, "text: invalid UTF-8 at byte 3"},
      {"chat role", [&](auto* r) {
         auto* m = r->mutable_chat()->add_messages();
         m->set_role(bad);
         m->set_content("hi");
       }, "chat.messages[0].role: invalid UTF-8 at byte 3"},
      {"chat content", [&](auto* r) {
         auto* m = r->mutable_chat()->add_messages();
         m->set_role("system");
         m->set_content("be brief");
         m = r->mutable_chat()->add_messages();
         m->set_role("user");
         m->set_content("ok " + bad);
       }, "chat.messages[1].content: invalid UTF-8 at byte 6"},
      {"stop", [&](auto* r) {
         r->add_stop("end");
         r->add_stop(bad);
       }, "stop[1]: invalid UTF-8 at byte 3"},
      {"request_id", [&](auto* r) { r->set_request_id(bad); },
       "request_id: invalid UTF-8 at byte 3"},
      {"kv_codec", [&](auto* r) { r->set_kv_codec(bad); }, "kv_codec: invalid UTF-8 at byte 3"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    v1::GenerateRequest req = GreedyRequest("Hello", 4);
    c.edit(&req);
    StreamResult r = RunGenerate(stub.get(), req);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << r.status.error_message();
    EXPECT_EQ(r.status.error_message(), c.field);
    EXPECT_EQ(r.num_messages, 0);
  }
  // tokenize: text and chat.
  auto tokenize = [&](const v1::TokenizeRequest& req) {
    grpc::ClientContext ctx;
    v1::TokenizeResponse resp;
    return stub->Tokenize(&ctx, req, &resp);
  };
  {
    v1::TokenizeRequest req;
    req.set_text(bad);
    grpc::Status st = tokenize(req);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.error_message(), "text: invalid UTF-8 at byte 3");
  }
  {
    v1::TokenizeRequest req;
    auto* m = req.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(bad);
    grpc::Status st = tokenize(req);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.error_message(), "chat.messages[0].content: invalid UTF-8 at byte 3");
  }
  // abort.
  {
    grpc::ClientContext ctx;
    v1::AbortRequest req;
    req.set_request_id(bad);
    v1::AbortResponse resp;
    grpc::Status st = stub->Abort(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.error_message(), "request_id: invalid UTF-8 at byte 3");
  }
  // valid multi-byte text in every field still works.
  v1::GenerateRequest good = GreedyRequest("caf\xC3\xA9 \xE2\x82\xAC", 2);
  good.add_stop("\xF0\x9F\x98\x80");
  good.set_request_id("r\xC3\xA9q");
  StreamResult ok = RunGenerate(stub.get(), good);
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_GE(server.metrics().request_errors_total().WithLabels({"INVALID_ARGUMENT"}).Value(),
            static_cast<double>(cases.size() + 3));
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(ServerApiTest, QueueBoundIsResourceExhausted) {
  TestServerConfig cfg;
  cfg.scheduler.max_num_seqs = 1;
  cfg.scheduler.max_waiting = 2;
  TestServer server(cfg);
  // hold the only running slot and fill the queue with slow requests.
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>>> readers;
  auto stub = server.Stub();
  int exhausted = 0;
  for (int i = 0; i < 8; ++i) {
    ctxs.push_back(std::make_unique<grpc::ClientContext>());
    ctxs.back()->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    readers.push_back(stub->Generate(ctxs.back().get(), GreedyRequest("Hello", 1000)));
    if (i == 0) {
      // wait until the first is running (it streamed a token), so exactly two can wait.
      v1::GenerateResponse first;
      ASSERT_TRUE(readers[0]->Read(&first));
    } else {
      // request i is queued or refused before request i + 1 is sent.
      ASSERT_TRUE(WaitUntil([&] {
        const double refused =
            server.metrics().request_errors_total().WithLabels({"RESOURCE_EXHAUSTED"}).Value();
        return server.engine().Snapshot().num_active - 1 + refused == i;
      })) << "request " << i << " was neither queued nor refused";
    }
  }
  // the first is running and two wait; the rest were refused at once.
  for (size_t i = readers.size(); i-- > 0;) {
    v1::GenerateResponse msg;
    if (i < 3) ctxs[i]->TryCancel();
    while (readers[i]->Read(&msg)) {
    }
    grpc::Status st = readers[i]->Finish();
    if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) ++exhausted;
    std::printf("queue bound: request %zu -> %s %s\n", i, StatusCodeName(st.error_code()),
                st.error_message().c_str());
  }
  EXPECT_EQ(exhausted, 5);
  EXPECT_TRUE(server.WaitAllFree());
}

TEST_F(ServerApiTest, ApiKeysGuardEveryRpc) {
  TestServerConfig cfg;
  cfg.server.auth = ApiKeyAuth({"k-123", "k-456"});
  TestServer server(cfg);
  auto stub = server.Stub();
  auto req = GreedyRequest("Hi", 2);
  EXPECT_EQ(RunGenerate(stub.get(), req).status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(RunGenerate(stub.get(), req, {{"authorization", "Bearer nope"}}).status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(RunGenerate(stub.get(), req, {{"authorization", "k-123"}}).status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  StreamResult ok = RunGenerate(stub.get(), req, {{"authorization", "Bearer k-456"}});
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.token_ids.size(), 2u);
  {
    grpc::ClientContext ctx;
    v1::ModelInfo info;
    EXPECT_EQ(stub->GetModelInfo(&ctx, {}, &info).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_GE(server.metrics().request_errors_total().WithLabels({"UNAUTHENTICATED"}).Value(), 4);
}

TEST_F(ServerApiTest, TlsWithSelfSignedCertificate) {
  std::string dir = ::testing::TempDir() + "/vqserve_tls_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                    "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " + dir +
                    "/key.pem -out " + dir + "/cert.pem >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl failed";
  TestServerConfig cfg;
  cfg.server.tls_cert_pem = *ReadFileToString(dir + "/cert.pem");
  cfg.server.tls_key_pem = *ReadFileToString(dir + "/key.pem");
  TestServer server(cfg);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = cfg.server.tls_cert_pem;
  auto channel = grpc::CreateChannel(server.target(), grpc::SslCredentials(ssl));
  auto stub = v1::Inference::NewStub(channel);
  StreamResult r = RunGenerate(stub.get(), GreedyRequest("Hi", 2));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.token_ids.size(), 2u);
  // a plaintext client cannot talk to it.
  auto plain = server.Stub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ModelInfo info;
  EXPECT_FALSE(plain->GetModelInfo(&ctx, {}, &info).ok());
  std::filesystem::remove_all(dir);
}

TEST_F(ServerApiTest, HealthModelInfoAndTokenize) {
  TestServerConfig cfg;
  cfg.pools = {{"kivi-k2v2", 40}, {"fp16", 20}};
  TestServer server(cfg);
  {
    grpc::ClientContext ctx;
    std::string status;
    ASSERT_TRUE(CheckHealth(server.Channel(), &ctx, "", &status).ok());
    EXPECT_EQ(status, "SERVING");
  }
  {
    grpc::ClientContext ctx;
    std::string status;
    ASSERT_TRUE(CheckHealth(server.Channel(), &ctx, "vqserve.v1.Inference", &status).ok());
    EXPECT_EQ(status, "SERVING");
  }
  auto stub = server.Stub();
  const ModelConfig& mc = SharedDefaultModel()->config();
  {
    grpc::ClientContext ctx;
    v1::ModelInfo info;
    ASSERT_TRUE(stub->GetModelInfo(&ctx, {}, &info).ok());
    EXPECT_EQ(info.num_layers(), mc.num_layers);
    EXPECT_EQ(info.num_kv_heads(), mc.num_kv_heads);
    EXPECT_EQ(info.default_kv_codec(), "kivi-k2v2");
    ASSERT_EQ(info.codecs_size(), 2);
    EXPECT_EQ(info.codecs(0).num_pages(), 40);
    EXPECT_EQ(info.codecs(0).kv_capacity_tokens(), 40 * 32);
    EXPECT_DOUBLE_EQ(info.codecs(1).bits_per_value(), 16.0);
    EXPECT_GT(info.codecs(0).compression_ratio(), 3.0);  // 2-bit codes + fp16 scales
  }
  {
    grpc::ClientContext ctx;
    v1::TokenizeRequest req;
    req.set_text("Hello world");
    v1::TokenizeResponse resp;
    ASSERT_TRUE(stub->Tokenize(&ctx, req, &resp).ok());
    std::vector<int32_t> want =
        SharedDefaultModel()->tokenizer().Encode("Hello world", true, false);
    EXPECT_EQ(std::vector<int32_t>(resp.token_ids().begin(), resp.token_ids().end()), want);
  }
}

TEST_F(ServerApiTest, DrainFinishesInFlightThenRefuses) {
  TestServerConfig cfg;
  cfg.start_engine = false;  // the request stays in flight until the drain has begun
  TestServer server(cfg);
  auto stub = server.Stub();
  StreamResult in_flight;
  std::thread t([&] { in_flight = RunGenerate(stub.get(), GreedyRequest("Once upon", 6)); });
  ASSERT_TRUE(WaitUntil([&] { return server.engine().Snapshot().num_active == 1; }));
  int aborted = -1;
  std::thread drain([&] { aborted = server.server().Drain(absl::Seconds(60)); });
  // admission stops at once: health says NOT_SERVING and a new request is refused.
  ASSERT_TRUE(WaitUntil([&] { return !server.engine().admitting(); }));
  {
    grpc::ClientContext ctx;
    std::string status;
    ASSERT_TRUE(CheckHealth(server.Channel(), &ctx, "", &status).ok());
    EXPECT_EQ(status, "NOT_SERVING");
  }
  StreamResult refused = RunGenerate(stub.get(), GreedyRequest("Hi", 2));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused.status.error_message();
  // the request admitted before the drain still runs to its end.
  server.StartEngine();
  t.join();
  drain.join();
  EXPECT_TRUE(in_flight.status.ok()) << in_flight.status.error_message();
  EXPECT_EQ(in_flight.finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(in_flight.token_ids.size(), 6u);
  EXPECT_EQ(aborted, 0);
}

TEST_F(ServerApiTest, DrainTimeoutAbortsLongRequests) {
  TestServer server(TestServerConfig{});
  auto stub = server.Stub();
  StreamResult in_flight;
  std::thread t([&] { in_flight = RunGenerate(stub.get(), GreedyRequest("Once upon", 1500)); });
  ASSERT_TRUE(WaitUntil([&] { return server.engine().Snapshot().num_active == 1; }));
  int aborted = server.server().Drain(absl::Milliseconds(200));
  t.join();
  EXPECT_EQ(aborted, 1);
  EXPECT_TRUE(in_flight.status.ok()) << in_flight.status.error_message();
  EXPECT_EQ(in_flight.finish_reason, v1::FINISH_REASON_ABORT);
  EXPECT_TRUE(server.WaitAllFree());
}

}  // namespace
}  // namespace vqserve::testing
