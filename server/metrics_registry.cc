#include "server/metrics_registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <type_traits>

#include "runtime/tokenizer/utf8.h"

namespace vqserve {
namespace {

void AddAtomic(std::atomic<double>& a, double amount) {
  double old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, old + amount, std::memory_order_relaxed)) {
  }
}

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "metrics registry: %s\n", message.c_str());
  std::abort();
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

// appends {a="x",b="y"} (nothing when there are no labels); `extra` is an extra pre-escaped
// label such as le="0.5".
void AppendLabels(std::string& out, const std::vector<std::string>& names, const LabelValues& values,
                  const std::string& extra_name = "", const std::string& extra_value = "") {
  if (names.empty() && extra_name.empty()) return;
  out += '{';
  bool first = true;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!first) out += ',';
    first = false;
    out += names[i];
    out += "=\"";
    out += EscapeLabelValue(values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!first) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

void AppendSample(std::string& out, const std::string& name, const std::vector<std::string>& names,
                  const LabelValues& values, double value, const std::string& extra_name = "",
                  const std::string& extra_value = "") {
  out += name;
  AppendLabels(out, names, values, extra_name, extra_value);
  out += ' ';
  out += FormatSampleValue(value);
  out += '\n';
}

void AppendHeader(std::string& out, const std::string& name, const std::string& help,
                  MetricType type) {
  out += "# HELP " + name + ' ' + EscapeHelp(help) + '\n';
  out += "# TYPE " + name + ' ' + TypeName(type) + '\n';
}

}  // namespace

// ---- text helpers ----

bool IsValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size();) {
    const Utf8Char u = DecodeUtf8(value, i);
    const char c = value[i];
    if (!u.valid) out += "\xEF\xBF\xBD";  // the format is utf-8: U+FFFD for invalid bytes
    else if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out.append(value.substr(i, u.length));
    i += u.length;
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, end);
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

std::vector<double> LinearBuckets(double start, double width, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i) out.push_back(start + i * width);
  return out;
}

// ---- values ----

void Counter::Inc(double amount) {
  if (!(amount > 0)) return;  // also drops NaN
  AddAtomic(value_, amount);
}

void Gauge::Inc(double amount) { AddAtomic(value_, amount); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), bucket_counts_(upper_bounds_.size() + 1, 0) {
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    if (std::isnan(upper_bounds_[i]) || std::isinf(upper_bounds_[i]) ||
        (i > 0 && upper_bounds_[i] <= upper_bounds_[i - 1])) {
      Die("histogram buckets must be finite and strictly increasing");
    }
  }
}

void Histogram::Observe(double value) {
  // le is inclusive: the first bound >= value.
  size_t bucket = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) -
                  upper_bounds_.begin();
  if (std::isnan(value)) bucket = upper_bounds_.size();
  std::lock_guard<std::mutex> lock(mu_);
  ++bucket_counts_[bucket];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::Snap() const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t running = 0;
  for (uint64_t c : bucket_counts_) {
    running += c;
    s.cumulative_counts.push_back(running);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

// ---- families ----

template <typename T>
T& Family<T>::WithLabels(const LabelValues& values) {
  if (values.size() != label_names_.size()) {
    Die(name_ + ": expected " + std::to_string(label_names_.size()) + " label values, got " +
        std::to_string(values.size()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find(values);
  if (it != children_.end()) return *it->second;
  std::unique_ptr<T> child;
  if constexpr (std::is_same_v<T, Histogram>) {
    child = std::make_unique<Histogram>(buckets_);
  } else {
    child = std::make_unique<T>();
  }
  T& ref = *child;
  children_.emplace(values, std::move(child));
  return ref;
}

template <typename T>
void Family<T>::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  children_.clear();
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// ---- registry ----

void MetricsRegistry::CheckNewName(const std::string& name,
                                   const std::vector<std::string>& label_names) const {
  if (!IsValidMetricName(name)) Die("invalid metric name '" + name + "'");
  std::set<std::string> seen;
  for (const std::string& l : label_names) {
    if (!IsValidLabelName(l)) Die(name + ": invalid label name '" + l + "'");
    if (!seen.insert(l).second) Die(name + ": duplicate label name '" + l + "'");
  }
  for (const Entry& e : entries_) {
    const std::string& other = e.counter ? e.counter->name()
                               : e.gauge ? e.gauge->name()
                                         : e.histogram->name();
    if (other == name) Die("duplicate metric name '" + name + "'");
  }
}

Family<Counter>& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                             std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNewName(name, label_names);
  Entry e{MetricType::kCounter, nullptr, nullptr, nullptr};
  e.counter = std::make_unique<Family<Counter>>(name, help, std::move(label_names));
  entries_.push_back(std::move(e));
  return *entries_.back().counter;
}

Family<Gauge>& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                         std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNewName(name, label_names);
  Entry e{MetricType::kGauge, nullptr, nullptr, nullptr};
  e.gauge = std::make_unique<Family<Gauge>>(name, help, std::move(label_names));
  entries_.push_back(std::move(e));
  return *entries_.back().gauge;
}

Family<Histogram>& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                                 std::vector<double> buckets,
                                                 std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNewName(name, label_names);
  for (const std::string& l : label_names) {
    if (l == "le") Die(name + ": histograms may not use the label 'le'");
  }
  Histogram check(buckets);  // validates the bounds now rather than at first use
  (void)check;
  Entry e{MetricType::kHistogram, nullptr, nullptr, nullptr};
  e.histogram = std::make_unique<Family<Histogram>>(name, help, std::move(label_names),
                                                    std::move(buckets));
  entries_.push_back(std::move(e));
  return *entries_.back().histogram;
}

std::string MetricsRegistry::Render() const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    switch (e.type) {
      case MetricType::kCounter: {
        const auto& f = *e.counter;
        AppendHeader(out, f.name(), f.help(), e.type);
        f.ForEach([&](const LabelValues& v, const Counter& c) {
          AppendSample(out, f.name(), f.label_names(), v, c.Value());
        });
        break;
      }
      case MetricType::kGauge: {
        const auto& f = *e.gauge;
        AppendHeader(out, f.name(), f.help(), e.type);
        f.ForEach([&](const LabelValues& v, const Gauge& g) {
          AppendSample(out, f.name(), f.label_names(), v, g.Value());
        });
        break;
      }
      case MetricType::kHistogram: {
        const auto& f = *e.histogram;
        AppendHeader(out, f.name(), f.help(), e.type);
        f.ForEach([&](const LabelValues& v, const Histogram& h) {
          Histogram::Snapshot s = h.Snap();
          for (size_t i = 0; i <= s.upper_bounds.size(); ++i) {
            std::string le = i < s.upper_bounds.size() ? FormatSampleValue(s.upper_bounds[i])
                                                       : std::string("+Inf");
            AppendSample(out, f.name() + "_bucket", f.label_names(), v,
                         static_cast<double>(s.cumulative_counts[i]), "le", le);
          }
          AppendSample(out, f.name() + "_sum", f.label_names(), v, s.sum);
          AppendSample(out, f.name() + "_count", f.label_names(), v,
                       static_cast<double>(s.count));
        });
        break;
      }
    }
  }
  return out;
}

}  // namespace vqserve
