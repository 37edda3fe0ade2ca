#include "server/stop_checker.h"

#include <algorithm>
#include <string_view>

namespace vqserve {

std::string StopChecker::Add(const std::string& text, bool* matched) {
  *matched = false;
  held_ += text;
  if (stops_.empty()) {
    std::string out;
    out.swap(held_);
    return out;
  }
  // earliest complete match wins.
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    if (s.empty()) continue;
    size_t pos = held_.find(s);
    if (pos < best) best = pos;
  }
  if (best != std::string::npos) {
    *matched = true;
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }
  // hold back the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  std::string_view h(held_);
  for (const auto& s : stops_) {
    if (s.empty()) continue;
    size_t max_len = std::min(h.size(), s.size() - 1);
    for (size_t len = max_len; len > keep; --len) {
      if (h.substr(h.size() - len) == std::string_view(s).substr(0, len)) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopChecker::Flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace vqserve
