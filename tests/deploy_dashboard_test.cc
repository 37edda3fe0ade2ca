// every promql query in deploy/ (grafana dashboard, alert rules, autoscaling adapter rule) names
// only metrics that a live /metrics scrape of ServerMetrics really serves, and parses as promql.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/metrics_http.h"
#include "server/server_metrics.h"
#include "tests/util/metrics_fixture.h"
#include "tests/util/prerequisite.h"

namespace vqserve {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

fs::path DeployDir() { return fs::path(VQSERVE_SOURCE_DIR) / "deploy"; }

// vqserve metric names an expression references (string literals and [ranges] skipped).
std::set<std::string> MetricNames(const std::string& expr) {
  std::set<std::string> out;
  auto ident_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; };
  for (size_t i = 0; i < expr.size();) {
    char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {
      size_t j = i + 1;
      while (j < expr.size() && expr[j] != c) j += expr[j] == '\\' ? 2 : 1;
      i = j + 1;
    } else if (c == '[') {
      i = expr.find(']', i) + 1;
    } else if (ident_char(c)) {
      size_t j = i;
      while (j < expr.size() && ident_char(expr[j])) ++j;
      std::string tok = expr.substr(i, j - i);
      if (tok.rfind("vqserve:", 0) == 0) out.insert(tok);
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

// dashboard target expressions and templating queries.
std::vector<std::string> DashboardExprs(const nlohmann::json& dash) {
  std::vector<std::string> out;
  for (const auto& panel : dash.at("panels")) {
    for (const auto& t : panel.value("targets", nlohmann::json::array())) {
      out.push_back(t.at("expr").get<std::string>());
    }
  }
  for (const auto& v : dash.at("templating").at("list")) {
    if (v.value("type", "") == "query") out.push_back(v.at("query").get<std::string>());
  }
  return out;
}

// `expr:` values of a rules file (inline, or a `|` block of deeper-indented lines).
std::vector<std::string> RuleExprs(const std::string& yaml) {
  std::vector<std::string> out;
  std::istringstream in(yaml);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  for (size_t i = 0; i < lines.size(); ++i) {
    size_t k = lines[i].find("expr:");
    if (k == std::string::npos || lines[i].find_first_not_of(' ') != k) continue;
    std::string rest = lines[i].substr(k + 5);
    rest.erase(0, rest.find_first_not_of(' '));
    if (rest == "|" || rest == ">") {
      std::string block;
      while (i + 1 < lines.size() && (lines[i + 1].empty() || lines[i + 1].find_first_not_of(' ') > k)) {
        block += lines[++i] + "\n";
      }
      out.push_back(block);
    } else {
      out.push_back(rest);
    }
  }
  return out;
}

class DeployQueriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MetricsRegistry registry;
    ServerMetrics metrics(registry);
    testing::PopulateAllMetrics(metrics);
    MetricsHttpServer http(registry);
    ASSERT_TRUE(http.Start("127.0.0.1", 0).ok());
    auto r = testing::HttpGet(http.port(), "/metrics");
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, 200);
    served_ = testing::SampleNames(r->body);
    ASSERT_GT(served_.size(), 20u);
  }
  void ExpectServed(const std::string& where, const std::string& expr,
                    std::set<std::string>* used = nullptr) {
    std::set<std::string> names = MetricNames(expr);
    EXPECT_FALSE(names.empty()) << where << ": query names no vqserve metric: " << expr;
    for (const auto& n : names) {
      EXPECT_TRUE(served_.count(n)) << where << ": " << n << " is not served by /metrics (" << expr << ")";
      if (used) used->insert(n);
    }
  }
  std::set<std::string> served_;
};

TEST_F(DeployQueriesTest, DashboardQueriesNameServedMetricsAndCoverTheIssue) {
  std::string text = ReadFile(DeployDir() / "grafana" / "vqserve-dashboard.json");
  nlohmann::json dash = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(dash.is_discarded()) << "vqserve-dashboard.json is not valid json";
  std::vector<std::string> exprs = DashboardExprs(dash);
  ASSERT_GE(exprs.size(), 15u);
  std::set<std::string> used;
  for (const auto& e : exprs) ExpectServed("dashboard", e, &used);
  // what issue 6 asks the dashboard to show.
  for (const char* want :
       {"kv_cache_bytes", "kv_cache_fp16_equivalent_bytes", "kv_cache_bytes_saved",
        "kv_cache_usage_perc", "num_requests_waiting", "num_requests_running",
        "time_to_first_token_seconds_bucket", "inter_token_latency_seconds_bucket",
        "prompt_tokens_total", "generation_tokens_total", "num_preemptions_total",
        "request_errors_total", "kv_memory_bytes", "kv_memory_used_bytes",
        "prefix_cache_hits_total", "prefix_cache_queries_total", "prefix_cache_bytes"}) {
    EXPECT_TRUE(used.count(std::string("vqserve:") + want)) << "dashboard does not show " << want;
  }
}

TEST_F(DeployQueriesTest, AlertAndAutoscalingQueriesNameServedMetrics) {
  std::vector<std::string> alerts = RuleExprs(ReadFile(DeployDir() / "prometheus" / "alerts.yaml"));
  ASSERT_EQ(alerts.size(), 4u);
  for (const auto& e : alerts) ExpectServed("alerts.yaml", e);
  std::string adapter = ReadFile(DeployDir() / "examples" / "prometheus-adapter-rules.yaml");
  size_t k = adapter.find("seriesQuery:");
  ASSERT_NE(k, std::string::npos);
  std::string series = adapter.substr(k + 12, adapter.find('\n', k) - k - 12);
  series.erase(0, series.find_first_not_of(" '"));
  series.erase(series.find_last_not_of(" '") + 1);
  ExpectServed("prometheus-adapter-rules.yaml", series);
  // the hpa asks the custom metrics api for the name the adapter publishes.
  std::string hpa = ReadFile(DeployDir() / "examples" / "hpa.yaml");
  EXPECT_NE(adapter.find("as: \"vqserve_num_requests_waiting\""), std::string::npos);
  EXPECT_NE(hpa.find("name: vqserve_num_requests_waiting"), std::string::npos);
}

TEST_F(DeployQueriesTest, DashboardQueriesParseAsPromql) {
  if (testing::RunCommand("command -v promtool").exit_code != 0) {
    VQ_SKIP_UNLESS_CI << "promtool not installed (debian package prometheus)";
  }
  nlohmann::json dash =
      nlohmann::json::parse(ReadFile(DeployDir() / "grafana" / "vqserve-dashboard.json"));
  // each query becomes a recording rule; grafana variables get plausible values first.
  std::string rules = "groups:\n  - name: dashboard\n    rules:\n";
  int n = 0;
  for (std::string e : DashboardExprs(dash)) {
    if (e.rfind("label_values(", 0) == 0) continue;  // grafana function, not promql
    for (auto [from, to] : {std::pair<std::string, std::string>{"$__rate_interval", "5m"},
                            {"$namespace", ".*"}, {"$pod", ".*"}}) {
      for (size_t p; (p = e.find(from)) != std::string::npos;) e.replace(p, from.size(), to);
    }
    rules += "      - record: dashboard:query" + std::to_string(n++) + "\n        expr: " +
             nlohmann::json(e).dump() + "\n";
  }
  fs::path file = fs::temp_directory_path() / ("vqserve_dash_rules." + std::to_string(getpid()) + ".yaml");
  std::ofstream(file) << rules;
  testing::CommandResult r = testing::RunCommand("promtool check rules " + file.string());
  EXPECT_EQ(r.exit_code, 0) << r.output << "\n" << rules;
  fs::remove(file);
}

TEST(MetricNamesTest, SkipsStringsAndRanges) {
  EXPECT_EQ(MetricNames("sum(rate(vqserve:a_total{x=\"vqserve:no\"}[5m])) / vqserve:b"),
            (std::set<std::string>{"vqserve:a_total", "vqserve:b"}));
}

}  // namespace
}  // namespace vqserve
