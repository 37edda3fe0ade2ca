#include "server/metrics_http.h"

#include <CivetServer.h>
#include <civetweb.h>

#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/civet_thread_stack.h"

namespace vqserve {

// answers GET /metrics with the registry rendered at request time.
class MetricsHttpServer::Handler : public CivetHandler {
 public:
  explicit Handler(const MetricsRegistry& registry) : registry_(registry) {}

  bool handleGet(CivetServer*, mg_connection* conn) override {
    const mg_request_info* info = mg_get_request_info(conn);
    std::string uri = info && info->local_uri ? info->local_uri : "";
    if (uri != "/metrics") {
      mg_send_http_error(conn, 404, "%s", "not found; metrics are at /metrics\n");
      return true;
    }
    std::string body = registry_.Render();
    mg_printf(conn,
              "HTTP/1.1 200 OK\r\n"
              "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
              "Content-Length: %zu\r\n"
              "Cache-Control: no-store\r\n"
              "Connection: close\r\n\r\n",
              body.size());
    mg_write(conn, body.data(), body.size());
    return true;
  }

 private:
  const MetricsRegistry& registry_;
};

MetricsHttpServer::MetricsHttpServer(const MetricsRegistry& registry) : registry_(registry) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

namespace {

// civetweb's own reason for a failed start (it reports errors only through this callback).
std::mutex last_error_mu;
std::string last_error;

int RecordCivetError(const mg_connection*, const char* message) {
  std::lock_guard<std::mutex> lock(last_error_mu);
  last_error = message;
  return 1;
}

}  // namespace

absl::Status MetricsHttpServer::Start(const std::string& host, int port) {
  if (server_) return absl::FailedPreconditionError("metrics http server already started");
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port out of range: ", port));
  }
  std::vector<std::string> options = {
      "listening_ports", absl::StrCat(host, ":", port),
      "num_threads", "2",
      "request_timeout_ms", "10000",
      "enable_keep_alive", "no",
  };
  handler_ = std::make_unique<Handler>(registry_);
  (void)CivetThreadStackFloorLinked();  // civetweb's 100 KB stacks vs the cuda libraries' tls
  CivetCallbacks callbacks;
  callbacks.log_message = &RecordCivetError;
  try {
    server_ = std::make_unique<CivetServer>(options, &callbacks);
  } catch (const std::exception& e) {
    handler_.reset();
    std::lock_guard<std::mutex> lock(last_error_mu);
    return absl::UnavailableError(absl::StrCat("metrics http server cannot listen on ", host,
                                               ":", port, ": ",
                                               last_error.empty() ? e.what() : last_error));
  }
  server_->addHandler("/", handler_.get());
  std::vector<int> ports = server_->getListeningPorts();
  port_ = ports.empty() ? 0 : ports[0];
  if (port_ == 0) {
    Stop();
    return absl::InternalError("metrics http server started but reports no listening port");
  }
  return absl::OkStatus();
}

void MetricsHttpServer::Stop() {
  if (server_) {
    server_->close();
    server_.reset();
  }
  handler_.reset();
  port_ = 0;
}

}  // namespace vqserve
