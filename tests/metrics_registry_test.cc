// text exposition format details of our prometheus registry, and ServerMetrics arithmetic.
#include "server/metrics_registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

#include "server/server_metrics.h"

namespace vqserve {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool HasLine(const std::string& text, const std::string& line) {
  for (const auto& l : Lines(text)) {
    if (l == line) return true;
  }
  return false;
}

TEST(MetricsRegistryTest, CounterHasHelpTypeAndValue) {
  MetricsRegistry r;
  auto& c = r.AddCounter("vqserve:things_total", "Things seen.");
  c.Get().Inc();
  c.Get().Inc(2.5);
  c.Get().Inc(-7);  // ignored: counters only go up
  EXPECT_EQ(r.Render(),
            "# HELP vqserve:things_total Things seen.\n"
            "# TYPE vqserve:things_total counter\n"
            "vqserve:things_total 3.5\n");
}

TEST(MetricsRegistryTest, GaugeGoesUpAndDown) {
  MetricsRegistry r;
  auto& g = r.AddGauge("g", "A gauge.");
  g.Get().Set(10);
  g.Get().Dec(4);
  g.Get().Inc(0.25);
  EXPECT_DOUBLE_EQ(g.Get().Value(), 6.25);
  EXPECT_TRUE(HasLine(r.Render(), "g 6.25"));
  EXPECT_TRUE(HasLine(r.Render(), "# TYPE g gauge"));
}

TEST(MetricsRegistryTest, LabelsAreSortedByValueAndEscaped) {
  MetricsRegistry r;
  auto& c = r.AddCounter("req_total", "Requests.", {"code", "path"});
  c.WithLabels({"b", "x"}).Inc();
  c.WithLabels({"a", "quote\" back\\slash\nnewline"}).Inc(2);
  c.WithLabels({"b", "x"}).Inc();
  std::vector<std::string> lines = Lines(r.Render());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2], "req_total{code=\"a\",path=\"quote\\\" back\\\\slash\\nnewline\"} 2");
  EXPECT_EQ(lines[3], "req_total{code=\"b\",path=\"x\"} 2");
}

// found by fuzz/metrics_exposition_fuzzer: the exposition format is utf-8, so a label value
// with invalid bytes must not make the whole scrape unparsable.
TEST(MetricsRegistryTest, InvalidUtf8LabelValuesBecomeReplacementCharacters) {
  EXPECT_EQ(EscapeLabelValue("ok \xC3\xA9 \xFF x \xE2\x82"), "ok \xC3\xA9 \xEF\xBF\xBD x \xEF\xBF\xBD");
  MetricsRegistry r;
  r.AddCounter("bad_total", "Bad.", {"v"}).WithLabels({"a\xC0\xAF\"\n"}).Inc();
  EXPECT_TRUE(HasLine(r.Render(), "bad_total{v=\"a\xEF\xBF\xBD\xEF\xBF\xBD\\\"\\n\"} 1"));
}

TEST(MetricsRegistryTest, HelpEscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(EscapeHelp("a\\b\nc\"d"), "a\\\\b\\nc\"d");
  MetricsRegistry r;
  r.AddGauge("h", "line one\nline \"two\" \\").Get();
  EXPECT_TRUE(HasLine(r.Render(), "# HELP h line one\\nline \"two\" \\\\"));
}

TEST(MetricsRegistryTest, FamilyWithoutChildrenRendersOnlyHeaders) {
  MetricsRegistry r;
  r.AddCounter("errors_total", "Errors.", {"code"});
  EXPECT_EQ(r.Render(), "# HELP errors_total Errors.\n# TYPE errors_total counter\n");
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulativeWithInclusiveUpperBounds) {
  MetricsRegistry r;
  auto& h = r.AddHistogram("lat_seconds", "Latency.", {0.1, 0.5, 2}, {"codec"});
  Histogram& x = h.WithLabels({"fp16"});
  // 0.1 sits exactly on a bound: le is inclusive, so it counts in le="0.1".
  for (double v : {0.05, 0.1, 0.3, 0.5, 1.0, 3.0, 100.0}) x.Observe(v);
  std::string text = r.Render();
  EXPECT_TRUE(HasLine(text, "# TYPE lat_seconds histogram"));
  EXPECT_TRUE(HasLine(text, "lat_seconds_bucket{codec=\"fp16\",le=\"0.1\"} 2"));
  EXPECT_TRUE(HasLine(text, "lat_seconds_bucket{codec=\"fp16\",le=\"0.5\"} 4"));
  EXPECT_TRUE(HasLine(text, "lat_seconds_bucket{codec=\"fp16\",le=\"2\"} 5"));
  EXPECT_TRUE(HasLine(text, "lat_seconds_bucket{codec=\"fp16\",le=\"+Inf\"} 7"));
  EXPECT_TRUE(HasLine(text, "lat_seconds_count{codec=\"fp16\"} 7"));
  double sum = 0.05 + 0.1 + 0.3 + 0.5 + 1.0 + 3.0 + 100.0;
  EXPECT_TRUE(HasLine(text, "lat_seconds_sum{codec=\"fp16\"} " + FormatSampleValue(sum)));
  // bucket lines come before _sum and _count.
  EXPECT_LT(text.find("le=\"+Inf\""), text.find("lat_seconds_sum"));
  EXPECT_LT(text.find("lat_seconds_sum"), text.find("lat_seconds_count"));
}

TEST(MetricsRegistryTest, HistogramWithoutLabelsHasOnlyLe) {
  MetricsRegistry r;
  r.AddHistogram("h_seconds", "H.", {1}).Get().Observe(0.5);
  std::string text = r.Render();
  EXPECT_TRUE(HasLine(text, "h_seconds_bucket{le=\"1\"} 1"));
  EXPECT_TRUE(HasLine(text, "h_seconds_bucket{le=\"+Inf\"} 1"));
  EXPECT_TRUE(HasLine(text, "h_seconds_sum 0.5"));
  EXPECT_TRUE(HasLine(text, "h_seconds_count 1"));
}

TEST(MetricsRegistryTest, SpecialValuesUseTextFormatSpelling) {
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatSampleValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(1e21), "1e+21");
  // shortest form that reads back as the same double.
  for (double v : {0.1, 1.0 / 3.0, 123456789.123, 2e-300}) {
    EXPECT_EQ(std::stod(FormatSampleValue(v)), v);
  }
}

TEST(MetricsRegistryTest, NameValidation) {
  EXPECT_TRUE(IsValidMetricName("vqserve:kv_cache_bytes"));
  EXPECT_TRUE(IsValidMetricName("_x9"));
  EXPECT_FALSE(IsValidMetricName("9x"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_TRUE(IsValidLabelName("finished_reason"));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
}

TEST(MetricsRegistryDeathTest, MisuseAborts) {
  EXPECT_DEATH(
      {
        MetricsRegistry r;
        r.AddGauge("dup", "x");
        r.AddCounter("dup", "y");
      },
      "duplicate metric name");
  EXPECT_DEATH(
      {
        MetricsRegistry r;
        r.AddCounter("c_total", "x", {"a"}).WithLabels({"1", "2"});
      },
      "expected 1 label values");
  EXPECT_DEATH(
      {
        MetricsRegistry r;
        r.AddHistogram("h", "x", {1, 1});
      },
      "strictly increasing");
  EXPECT_DEATH(
      {
        MetricsRegistry r;
        r.AddHistogram("h", "x", {1}, {"le"});
      },
      "may not use the label 'le'");
}

TEST(MetricsRegistryTest, ConcurrentUpdatesAreNotLost) {
  MetricsRegistry r;
  auto& c = r.AddCounter("c_total", "C.", {"t"});
  auto& h = r.AddHistogram("h", "H.", {0.5});
  constexpr int kThreads = 8, kIters = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        c.WithLabels({t % 2 ? "odd" : "even"}).Inc();
        h.Get().Observe(i % 2 ? 1.0 : 0.0);
        if (i % 1000 == 0) r.Render();  // scrapes race with updates
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(c.WithLabels({"odd"}).Value(), kThreads / 2 * kIters);
  EXPECT_EQ(c.WithLabels({"even"}).Value(), kThreads / 2 * kIters);
  Histogram::Snapshot s = h.Get().Snap();
  EXPECT_EQ(s.count, static_cast<uint64_t>(kThreads * kIters));
  EXPECT_EQ(s.cumulative_counts[0], static_cast<uint64_t>(kThreads * kIters / 2));
  EXPECT_DOUBLE_EQ(s.sum, kThreads * kIters / 2);
}

TEST(MetricsRegistryTest, BucketHelpers) {
  EXPECT_EQ(ExponentialBuckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(LinearBuckets(0.5, 0.5, 3), (std::vector<double>{0.5, 1.0, 1.5}));
}

TEST(ServerMetricsTest, KvStateDerivesSavingsRatioAndUsageAcrossPools) {
  MetricsRegistry r;
  ServerMetrics m(r);
  m.SetKvState("fp16", 1000, 1000, 6, 10);          // 4 of 10 pages used
  m.SetKvState("vecinfer-2b", 250, 2000, 25, 30);   // 5 of 30 pages used
  EXPECT_DOUBLE_EQ(m.kv_cache_bytes_saved().WithLabels({"vecinfer-2b"}).Value(), 1750);
  EXPECT_DOUBLE_EQ(m.kv_compression_ratio().WithLabels({"vecinfer-2b"}).Value(), 8.0);
  EXPECT_DOUBLE_EQ(m.kv_compression_ratio().WithLabels({"fp16"}).Value(), 1.0);
  EXPECT_DOUBLE_EQ(m.kv_cache_usage_perc().Get().Value(), 9.0 / 40.0);
  // a later report for one pool replaces only that pool's share.
  m.SetKvState("fp16", 0, 0, 10, 10);
  EXPECT_DOUBLE_EQ(m.kv_cache_usage_perc().Get().Value(), 5.0 / 40.0);
  EXPECT_DOUBLE_EQ(m.kv_compression_ratio().WithLabels({"fp16"}).Value(), 1.0);  // empty pool
  std::string text = r.Render();
  EXPECT_TRUE(HasLine(text, "vqserve:kv_pages_total{codec=\"vecinfer-2b\"} 30"));
  EXPECT_TRUE(HasLine(text, "vqserve:kv_cache_fp16_equivalent_bytes{codec=\"vecinfer-2b\"} 2000"));
}

TEST(ServerMetricsTest, EventsLandInTheirSeries) {
  MetricsRegistry r;
  ServerMetrics m(r);
  m.SetCacheConfig(32, "commvq-1b", 128);
  m.SetRequestsRunning(3);
  m.SetRequestsWaiting(7);
  m.IncSuccess("stop");
  m.IncSuccess("stop");
  m.IncSuccess("length");
  m.IncError("INVALID_ARGUMENT");
  m.IncPreemptions(2);
  m.AddPromptTokens(100);
  m.AddGenerationTokens(40);
  m.ObserveTtft(0.03);
  m.ObserveInterToken(0.012);
  m.ObserveE2e(1.2);
  m.ObserveQueueTime(0.2);
  m.ObserveEngineStep("forward", 0.006);
  std::string text = r.Render();
  EXPECT_TRUE(HasLine(text,
      "vqserve:cache_config_info{page_size=\"32\",codec=\"commvq-1b\",residual=\"128\"} 1"));
  EXPECT_TRUE(HasLine(text, "vqserve:num_requests_running 3"));
  EXPECT_TRUE(HasLine(text, "vqserve:num_requests_waiting 7"));
  EXPECT_TRUE(HasLine(text, "vqserve:request_success_total{finished_reason=\"stop\"} 2"));
  EXPECT_TRUE(HasLine(text, "vqserve:request_success_total{finished_reason=\"length\"} 1"));
  EXPECT_TRUE(HasLine(text, "vqserve:request_errors_total{code=\"INVALID_ARGUMENT\"} 1"));
  EXPECT_TRUE(HasLine(text, "vqserve:num_preemptions_total 2"));
  EXPECT_TRUE(HasLine(text, "vqserve:prompt_tokens_total 100"));
  EXPECT_TRUE(HasLine(text, "vqserve:generation_tokens_total 40"));
  EXPECT_TRUE(HasLine(text, "vqserve:time_to_first_token_seconds_bucket{le=\"0.04\"} 1"));
  EXPECT_TRUE(HasLine(text, "vqserve:time_to_first_token_seconds_bucket{le=\"0.02\"} 0"));
  EXPECT_TRUE(HasLine(text, "vqserve:inter_token_latency_seconds_count 1"));
  EXPECT_TRUE(HasLine(text, "vqserve:e2e_request_latency_seconds_sum 1.2"));
  EXPECT_TRUE(HasLine(text, "vqserve:request_queue_time_seconds_bucket{le=\"0.3\"} 1"));
  EXPECT_TRUE(HasLine(text, "vqserve:engine_step_seconds_bucket{phase=\"forward\",le=\"0.0075\"} 1"));
  EXPECT_TRUE(HasLine(text, "vqserve:engine_step_seconds_bucket{phase=\"forward\",le=\"0.005\"} 0"));
  EXPECT_TRUE(HasLine(text, "vqserve:engine_step_seconds_count{phase=\"sample\"} 0"));
}

TEST(ServerMetricsTest, ZeroValuedSeriesExistBeforeAnyEvent) {
  MetricsRegistry r;
  ServerMetrics m(r);
  std::string text = r.Render();
  EXPECT_TRUE(HasLine(text, "vqserve:num_requests_waiting 0"));
  EXPECT_TRUE(HasLine(text, "vqserve:prompt_tokens_total 0"));
  EXPECT_TRUE(HasLine(text, "vqserve:time_to_first_token_seconds_count 0"));
  for (std::string_view phase : kEngineStepPhases) {
    EXPECT_TRUE(HasLine(text, "vqserve:engine_step_seconds_count{phase=\"" + std::string(phase) +
                                  "\"} 0"))
        << phase;
  }
}

}  // namespace
}  // namespace vqserve
