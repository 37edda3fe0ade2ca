// the grpc server around an engine: inference service, grpc.health.v1, reflection, optional
// tls and api keys, message size and per-client limits, and the sigterm drain.
#ifndef VQSERVE_SERVER_INFERENCE_SERVER_H_
#define VQSERVE_SERVER_INFERENCE_SERVER_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/api_key_auth.h"
#include "server/engine.h"
#include "server/grpc_service.h"
#include "server/server_metrics.h"

namespace vqserve {

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;                      // 0 picks a free port (see InferenceServer::port())
  std::string tls_cert_pem;          // both set: tls; both empty: plaintext
  std::string tls_key_pem;
  ApiKeyAuth auth;                   // no keys: no authentication
  int max_request_bytes = 4 << 20;   // largest request message (grpc answers RESOURCE_EXHAUSTED)
  int max_response_bytes = 4 << 20;  // largest response message
  CallLimits limits;                 // streams per client, server-side request deadline
};

class InferenceServer {
 public:
  // starts listening; `engine` (already started) and `metrics` (may be null) must outlive it.
  static absl::StatusOr<std::unique_ptr<InferenceServer>> Start(Engine* engine,
                                                                ServerMetrics* metrics,
                                                                ServerOptions options);
  ~InferenceServer();  // shuts down at once if Drain was not called

  int port() const { return port_; }
  const InferenceService& service() const { return *service_; }
  // health NOT_SERVING, admission stops, in-flight requests get `timeout` to finish, then are
  // aborted; then the grpc server shuts down. returns the number of requests aborted.
  int Drain(absl::Duration timeout);
  // blocks until the server is shut down (by Drain from another thread).
  void Wait();

 private:
  InferenceServer() = default;

  Engine* engine_ = nullptr;
  ServerOptions options_;
  std::unique_ptr<InferenceService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

// reads a whole file (pem certificates, keys); errors name the file.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace vqserve

#endif  // VQSERVE_SERVER_INFERENCE_SERVER_H_
