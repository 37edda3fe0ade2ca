// a real prometheus server on loopback scrapes our /metrics every second; its http query api
// must then return the values we exported (and a value we change afterwards).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "server/metrics_http.h"
#include "server/server_metrics.h"
#include "tests/util/metrics_fixture.h"
#include "tests/util/prerequisite.h"

namespace vqserve {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// a child prometheus process; killed (TERM, then KILL) when this goes away.
class PrometheusProcess {
 public:
  ~PrometheusProcess() { Kill(); }
  // listens on an ephemeral loopback port (no free-port race): WaitForWebPort reads it back.
  bool Start(const fs::path& dir, int metrics_port) {
    fs::path config = dir / "prometheus.yml";
    std::ofstream(config) << "global:\n"
                             "  scrape_interval: 1s\n"
                             "  scrape_timeout: 1s\n"
                             "scrape_configs:\n"
                             "  - job_name: vqserve\n"
                             "    static_configs:\n"
                             "      - targets: ['127.0.0.1:" << metrics_port << "']\n";
    std::string config_arg = "--config.file=" + config.string();
    std::string storage_arg = "--storage.tsdb.path=" + (dir / "data").string();
    std::string listen_arg = "--web.listen-address=127.0.0.1:0";
    log_ = dir / "prometheus.log";
    std::string log = log_.string();
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stdout);
      (void)f;
      dup2(fileno(stdout), fileno(stderr));
      execlp("prometheus", "prometheus", config_arg.c_str(), storage_arg.c_str(),
             listen_arg.c_str(), "--log.level=info", static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid_ > 0;
  }
  // the web port from prometheus' `msg="Listening on" address=127.0.0.1:PORT` log line (it logs
  // the bound address); -1 when it exits or `timeout` passes first.
  int WaitForWebPort(std::chrono::seconds timeout) {
    const std::string key = "msg=\"Listening on\" address=127.0.0.1:";
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline && !Exited()) {
      std::ifstream in(log_);
      for (std::string line; std::getline(in, line);) {
        if (size_t at = line.find(key); at != std::string::npos) {
          return std::atoi(line.c_str() + at + key.size());
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }
  bool Exited() {
    if (pid_ <= 0) return true;
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return false;
  }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!Exited() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  fs::path log_;
};

// value of vqserve:kv_pages_total{codec=...} from prometheus' instant query api, or -1.
double QueryPagesTotal(int web_port, const std::string& codec) {
  auto r = testing::HttpGet(web_port, "/api/v1/query?query=vqserve:kv_pages_total");
  if (!r.ok() || r->status != 200) return -1;
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return -1;
  for (const auto& series : j["data"]["result"]) {
    if (series["metric"].value("codec", "") == codec &&
        series["metric"].value("job", "") == "vqserve") {
      return std::stod(series["value"][1].get<std::string>());
    }
  }
  return -1;
}

// polls until `want` comes back or `timeout` passes.
bool WaitForPagesTotal(int web_port, const std::string& codec, double want,
                       std::chrono::seconds timeout, PrometheusProcess& p) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (p.Exited()) return false;
    if (QueryPagesTotal(web_port, codec) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return false;
}

TEST(PrometheusScrapeTest, RealPrometheusScrapesAndReturnsOurValues) {
  if (testing::RunCommand("command -v prometheus").exit_code != 0) {
    VQ_SKIP_UNLESS_CI << "prometheus binary not installed (debian package prometheus)";
  }
  MetricsRegistry registry;
  ServerMetrics metrics(registry);
  testing::PopulateAllMetrics(metrics);  // kv_pages_total{codec="vecinfer-2b"} = 4096
  MetricsHttpServer http(registry);
  ASSERT_TRUE(http.Start("127.0.0.1", 0).ok());

  fs::path dir = fs::temp_directory_path() / ("vqserve_prom." + std::to_string(getpid()));
  fs::create_directories(dir);
  PrometheusProcess prom;
  ASSERT_TRUE(prom.Start(dir, http.port()));
  const int web_port = prom.WaitForWebPort(std::chrono::seconds(60));
  ASSERT_GT(web_port, 0) << "prometheus did not report its listening address";

  bool first = WaitForPagesTotal(web_port, "vecinfer-2b", 4096, std::chrono::seconds(30), prom);
  // a changed value must arrive through a later scrape.
  metrics.SetKvState("vecinfer-2b", 1.0e6, 8.0e6, 100, 5000);
  bool second =
      first && WaitForPagesTotal(web_port, "vecinfer-2b", 5000, std::chrono::seconds(15), prom);
  prom.Kill();
  std::string log;
  {
    std::ifstream in(dir / "prometheus.log");
    log.assign(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_TRUE(first) << "prometheus never returned kv_pages_total=4096; its log:\n" << log;
  EXPECT_TRUE(second) << "prometheus did not pick up the new value 5000; its log:\n" << log;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace vqserve
