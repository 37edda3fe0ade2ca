// serves GET /metrics (prometheus text format) from a MetricsRegistry on its own port, with
// civetweb. any other path answers 404.
#ifndef VQSERVE_SERVER_METRICS_HTTP_H_
#define VQSERVE_SERVER_METRICS_HTTP_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "server/metrics_registry.h"

class CivetServer;

namespace vqserve {

class MetricsHttpServer {
 public:
  // `registry` must outlive the server.
  explicit MetricsHttpServer(const MetricsRegistry& registry);
  ~MetricsHttpServer();  // stops
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // listens on host:port (port 0 picks a free port; see port()). host "0.0.0.0" = all ipv4.
  absl::Status Start(const std::string& host, int port);
  // stops listening and waits for in-flight scrapes; safe to call twice.
  void Stop();
  // the port actually bound (after Start), 0 when not running.
  int port() const { return port_; }

 private:
  class Handler;
  const MetricsRegistry& registry_;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<CivetServer> server_;
  int port_ = 0;
};

}  // namespace vqserve

#endif  // VQSERVE_SERVER_METRICS_HTTP_H_
