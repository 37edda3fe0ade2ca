// stop-string matching over a streamed completion: text that could begin a stop string is held
// back until it is known not to, so a matched stop string is never streamed.
#ifndef VQSERVE_SERVER_STOP_CHECKER_H_
#define VQSERVE_SERVER_STOP_CHECKER_H_

#include <string>
#include <vector>

namespace vqserve {

class StopChecker {
 public:
  explicit StopChecker(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // adds decoded text; returns the part safe to stream now. sets *matched once a stop string
  // appears (the returned text then ends just before it).
  std::string Add(const std::string& text, bool* matched);
  // everything still held back (at the end of generation without a match).
  std::string Flush();

 private:
  std::vector<std::string> stops_;
  std::string held_;
};

}  // namespace vqserve

#endif  // VQSERVE_SERVER_STOP_CHECKER_H_
