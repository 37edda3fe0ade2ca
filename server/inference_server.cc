#include "server/inference_server.h"

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"

namespace vqserve {
namespace {

// polls `done` every 10 ms until it holds or `timeout` passes; true when it held.
template <typename Fn>
bool WaitFor(Fn done, absl::Duration timeout) {
  absl::Time end = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::unique_ptr<InferenceServer>> InferenceServer::Start(Engine* engine,
                                                                        ServerMetrics* metrics,
                                                                        ServerOptions options) {
  std::unique_ptr<InferenceServer> s(new InferenceServer());
  s->engine_ = engine;
  s->options_ = std::move(options);
  s->service_ = std::make_unique<InferenceService>(engine, &s->options_.auth, metrics,
                                                   s->options_.limits);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::shared_ptr<grpc::ServerCredentials> creds;
  const ServerOptions& o = s->options_;
  if (!o.tls_cert_pem.empty() || !o.tls_key_pem.empty()) {
    if (o.tls_cert_pem.empty() || o.tls_key_pem.empty()) {
      return absl::InvalidArgumentError("tls needs both a certificate and a key");
    }
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({o.tls_key_pem, o.tls_cert_pem});
    creds = grpc::SslServerCredentials(ssl);
  } else {
    creds = grpc::InsecureServerCredentials();
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat(o.host, ":", o.port), creds, &s->port_);
  builder.RegisterService(s->service_.get());
  builder.SetMaxReceiveMessageSize(o.max_request_bytes);
  builder.SetMaxSendMessageSize(o.max_response_bytes);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", o.host, ":", o.port));
  }
  auto* health = s->server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus(true);
    health->SetServingStatus(v1::Inference::service_full_name(), true);
  }
  return s;
}

InferenceServer::~InferenceServer() {
  if (!shut_down_ && server_ != nullptr) {
    engine_->StopAdmission();
    engine_->AbortAll();
    WaitFor([&] { return engine_->Snapshot().num_active == 0; }, absl::Seconds(5));
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
}

int InferenceServer::Drain(absl::Duration timeout) {
  if (shut_down_) return 0;
  auto* health = server_->GetHealthCheckService();
  if (health != nullptr) health->SetServingStatus(false);
  engine_->StopAdmission();
  int aborted = 0;
  if (!WaitFor([&] { return engine_->Snapshot().num_active == 0; }, timeout)) {
    aborted = engine_->Snapshot().num_active;
    engine_->AbortAll();
    WaitFor([&] { return engine_->Snapshot().num_active == 0; }, absl::Seconds(5));
  }
  // streams are finished; give reactors a moment to send their last messages.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  shut_down_ = true;
  return aborted;
}

void InferenceServer::Wait() { server_->Wait(); }

}  // namespace vqserve
