// a real vqserve grpc server on 127.0.0.1 (ephemeral port) over the default model, for tests.
#ifndef VQSERVE_TESTS_UTIL_TEST_SERVER_H_
#define VQSERVE_TESTS_UTIL_TEST_SERVER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "proto/vqserve.grpc.pb.h"
#include "runtime/model/llama_model.h"
#include "server/engine.h"
#include "server/inference_server.h"
#include "server/metrics_registry.h"
#include "server/server_metrics.h"

namespace vqserve::testing {

// the default model, loaded once per test binary on the production path (q8-activation
// matmuls for every step size: batch-independent arithmetic); null when models/ lacks it.
LlamaModel* SharedDefaultModel();
// the .vqcb artifact of `codec`: <build>/test_vqcb/<codec>.vqcb (written by the ctest fixture
// test_codebooks) when it exists, else data/vqcb/<codec>.vqcb; empty when neither exists.
std::string CodebookPath(const std::string& codec);
// true when `codec` needs no codebooks or CodebookPath finds its artifact.
bool CodecAvailable(const std::string& codec);

struct TestServerConfig {
  // codec name and page count of each pool (pool 0 is the default codec).
  std::vector<std::pair<std::string, int>> pools = {{"fp16", 64}};
  int num_slots = 32;
  // > 0: every pool over one shared kv memory of this many bytes (MakeKvPools, the served
  // layout); the page counts and num_slots above are then ignored.
  size_t kv_memory = 0;
  SchedulerConfig scheduler;
  ServerOptions server;        // host/port are forced to 127.0.0.1:0
  // false: the engine loop waits for StartEngine(), so tests can queue requests first.
  bool start_engine = true;
};

// engine + grpc server; Drain or the destructor shuts it down.
class TestServer {
 public:
  explicit TestServer(TestServerConfig config);
  ~TestServer();

  Engine& engine() { return *engine_; }
  // starts the engine loop of a server made with start_engine = false (once).
  void StartEngine();
  InferenceServer& server() { return *server_; }
  ServerMetrics& metrics() { return *metrics_; }
  MetricsRegistry& registry() { return registry_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(server_->port()); }
  // a plaintext channel to the server.
  std::shared_ptr<grpc::Channel> Channel() const;
  std::unique_ptr<v1::Inference::Stub> Stub() const;
  // polls until every pool has all pages and slots free and nothing is active (true) or 10 s
  // pass (false).
  bool WaitAllFree() const;

 private:
  MetricsRegistry registry_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<InferenceServer> server_;
};

// polls `done` (every 2 ms) until it holds (true) or `timeout` passes (false): tests wait on
// the event itself, never on a fixed sleep.
bool WaitUntil(const std::function<bool()>& done,
               std::chrono::milliseconds timeout = std::chrono::seconds(60));

// the result of one streamed Generate call.
struct StreamResult {
  grpc::Status status;
  std::vector<int32_t> token_ids;
  std::string text;
  int num_messages = 0;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  v1::Usage usage;
};

// runs Generate to the end; `metadata` pairs go into the call (e.g. authorization).
StreamResult RunGenerate(v1::Inference::Stub* stub, const v1::GenerateRequest& request,
                         const std::vector<std::pair<std::string, std::string>>& metadata = {});

// a greedy request for `text` with `max_tokens` (ignore_eos keeps the length fixed).
v1::GenerateRequest GreedyRequest(const std::string& text, int max_tokens,
                                  const std::string& codec = "", bool ignore_eos = true);

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_TEST_SERVER_H_
