// a small thread-safe prometheus registry: counters, gauges and histograms with label sets,
// rendered in the prometheus text exposition format (version 0.0.4).
#ifndef VQSERVE_SERVER_METRICS_REGISTRY_H_
#define VQSERVE_SERVER_METRICS_REGISTRY_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace vqserve {

// label values in the order of the family's label names.
using LabelValues = std::vector<std::string>;

// a monotonically increasing value; negative increments are ignored.
class Counter {
 public:
  void Inc(double amount = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// a value that goes up and down.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Inc(double amount = 1.0);
  void Dec(double amount = 1.0) { Inc(-amount); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// cumulative histogram over fixed upper bounds (strictly increasing, +Inf implied).
class Histogram {
 public:
  struct Snapshot {
    std::vector<double> upper_bounds;        // without +Inf
    std::vector<uint64_t> cumulative_counts; // one per upper bound, then one for +Inf
    double sum = 0.0;
    uint64_t count = 0;
  };

  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  Snapshot Snap() const;

 private:
  const std::vector<double> upper_bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> bucket_counts_;  // non-cumulative, size bounds + 1
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

enum class MetricType { kCounter, kGauge, kHistogram };

// all children of one metric name, one child per distinct label-value set.
template <typename T>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> buckets = {})
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)),
        buckets_(std::move(buckets)) {}

  // the child for these label values (created on first use); aborts on a wrong value count.
  T& WithLabels(const LabelValues& values);
  // the child of a family without labels.
  T& Get() { return WithLabels({}); }
  // drops every child (e.g. before re-publishing a label set that shrank).
  void Clear();

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // visits (label values, child) in label order under the family lock.
  template <typename Fn>
  void ForEach(Fn fn) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [values, child] : children_) fn(values, *child);
  }

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> buckets_;
  mutable std::mutex mu_;
  std::map<LabelValues, std::unique_ptr<T>> children_;
};

// owns metric families; renders them all for a scrape. names must be unique.
class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // families live as long as the registry; invalid or duplicate names abort (programming error).
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                          std::vector<std::string> label_names = {});
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<double> buckets,
                                  std::vector<std::string> label_names = {});

  // the whole registry in the text exposition format, families in registration order.
  std::string Render() const;

 private:
  struct Entry {
    MetricType type;
    std::unique_ptr<Family<Counter>> counter;
    std::unique_ptr<Family<Gauge>> gauge;
    std::unique_ptr<Family<Histogram>> histogram;
  };
  void CheckNewName(const std::string& name, const std::vector<std::string>& label_names) const;

  mutable std::mutex mu_;
  std::vector<Entry> entries_;
};

// text-format helpers (exposed for tests).
bool IsValidMetricName(std::string_view name);
bool IsValidLabelName(std::string_view name);
std::string EscapeHelp(std::string_view help);          // \ -> \\, newline -> \n
// \ -> \\, " -> \", newline -> \n; invalid utf-8 -> U+FFFD (the format is utf-8).
std::string EscapeLabelValue(std::string_view value);
std::string FormatSampleValue(double value);            // +Inf, -Inf, NaN, shortest round-trip
// bucket helpers: start, start*factor, ... (count bounds); start + i*width (count bounds).
std::vector<double> ExponentialBuckets(double start, double factor, int count);
std::vector<double> LinearBuckets(double start, double width, int count);

}  // namespace vqserve

#endif  // VQSERVE_SERVER_METRICS_REGISTRY_H_
