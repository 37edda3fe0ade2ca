// the prometheus exposition of arbitrary label values and sample values: every line of the
// rendering is valid utf-8 and parses back (name, escaped labels, value), and each label set
// recorded comes back from the text (invalid utf-8 read as U+FFFD).
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "runtime/tokenizer/utf8.h"
#include "server/metrics_registry.h"

namespace {

// `s` with each invalid utf-8 sequence replaced by U+FFFD (what the exposition must show).
std::string Sanitized(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    vqserve::Utf8Char c = vqserve::DecodeUtf8(s, i);
    if (c.valid) out.append(s.substr(i, c.length));
    else out += "\xEF\xBF\xBD";
    i += c.length;
  }
  return out;
}

// parses one sample line; returns its label values (unescaped), aborting on malformed text.
std::vector<std::string> ParseSample(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
  FUZZ_CHECK(vqserve::IsValidMetricName(line.substr(0, i)), "bad metric name");
  std::vector<std::string> values;
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (true) {
      size_t eq = line.find('=', i);
      FUZZ_CHECK(eq != std::string_view::npos, "label without =");
      FUZZ_CHECK(vqserve::IsValidLabelName(line.substr(i, eq - i)), "bad label name");
      i = eq + 1;
      FUZZ_CHECK(i < line.size() && line[i] == '"', "label value not quoted");
      ++i;
      std::string v;
      while (true) {
        FUZZ_CHECK(i < line.size(), "unterminated label value");
        char c = line[i++];
        if (c == '"') break;
        FUZZ_CHECK(c != '\n', "raw newline in a label value");
        if (c == '\\') {
          FUZZ_CHECK(i < line.size(), "dangling escape");
          char e = line[i++];
          FUZZ_CHECK(e == '\\' || e == '"' || e == 'n', "unknown escape");
          v += e == 'n' ? '\n' : e;
        } else {
          v += c;
        }
      }
      values.push_back(v);
      FUZZ_CHECK(i < line.size(), "label set not closed");
      if (line[i] == '}') { ++i; break; }
      FUZZ_CHECK(line[i] == ',', "labels not separated by ,");
      ++i;
    }
  }
  FUZZ_CHECK(i < line.size() && line[i] == ' ', "no space before the value");
  std::string_view value = line.substr(i + 1);
  FUZZ_CHECK(!value.empty() && value.find(' ') == std::string_view::npos, "bad value");
  return values;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // pieces separated by 0x00: label values; 8-byte doubles come from the same bytes.
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> pieces;
  for (size_t start = 0; start <= in.size() && pieces.size() < 16;) {
    size_t end = in.find('\0', start);
    if (end == std::string_view::npos) end = in.size();
    pieces.emplace_back(in.substr(start, end - start));
    start = end + 1;
  }
  auto number = [&](size_t k) {
    double d = 0;
    if (size >= 8) std::memcpy(&d, data + (k * 8) % (size - 7), 8);
    return d;
  };
  vqserve::MetricsRegistry registry;
  auto& counter = registry.AddCounter("vqserve:fuzz_total", "help \\ with\nnewline", {"a", "b"});
  auto& gauge = registry.AddGauge("vqserve:fuzz_gauge", "gauge", {"codec"});
  auto& hist = registry.AddHistogram("vqserve:fuzz_seconds", "histogram",
                                     vqserve::ExponentialBuckets(0.001, 2, 8), {"reason"});
  std::set<std::vector<std::string>> expected;
  for (size_t k = 0; k + 1 < pieces.size(); k += 2) {
    counter.WithLabels({pieces[k], pieces[k + 1]}).Inc(number(k));
    gauge.WithLabels({pieces[k]}).Set(number(k + 1));
    hist.WithLabels({pieces[k + 1]}).Observe(number(k + 2));
    expected.insert({Sanitized(pieces[k]), Sanitized(pieces[k + 1])});
  }
  const std::string text = registry.Render();
  FUZZ_CHECK(vqserve::FindInvalidUtf8(text) == std::string_view::npos, "exposition not utf-8");
  std::set<std::vector<std::string>> seen;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    FUZZ_CHECK(end != std::string::npos, "last line not terminated");
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    if (line.rfind("# ", 0) == 0) continue;
    std::vector<std::string> values = ParseSample(line);
    if (line.rfind("vqserve:fuzz_total{", 0) == 0) seen.insert(values);
  }
  FUZZ_CHECK(seen == expected, "label sets do not come back from the text");
  return 0;
}
