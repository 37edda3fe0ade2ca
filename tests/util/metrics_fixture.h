// helpers for tests of the metrics endpoint: a ServerMetrics with every series populated,
// a plain http get over loopback, a free tcp port, and running a shell command.
#ifndef VQSERVE_TESTS_UTIL_METRICS_FIXTURE_H_
#define VQSERVE_TESTS_UTIL_METRICS_FIXTURE_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "server/server_metrics.h"

namespace vqserve::testing {

// records at least one event into every ServerMetrics family (two codec pools, several
// finish reasons and error codes); kv_pages_total{codec="vecinfer-2b"} is 4096.
void PopulateAllMetrics(ServerMetrics& m);

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;
};
// GET http://127.0.0.1:port/path (http/1.0, connection closed by the server).
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path);

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// runs `command` with /bin/sh, waits for it.
CommandResult RunCommand(const std::string& command);

// sample names (the part before '{' or ' ') of a text-format exposition, comments skipped.
std::set<std::string> SampleNames(const std::string& exposition);

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_METRICS_FIXTURE_H_
