#include "tests/util/model_compare.h"

#include <algorithm>
#include <cmath>
#include <span>

namespace vqserve::testing {

int ArgMax(const std::vector<float>& x) {
  return static_cast<int>(std::max_element(x.begin(), x.end()) - x.begin());
}

std::vector<std::vector<float>> RunSeq(LlamaModel& model, KvCache& cache, int slot,
                                       int first_page, int pages,
                                       const std::vector<int32_t>& prompt, int chunk, int steps,
                                       const std::vector<int32_t>* forced,
                                       std::vector<int32_t>* picks) {
  std::vector<int32_t> table(pages), seq;
  for (int i = 0; i < pages; ++i) table[i] = first_page + pages - 1 - i;
  std::vector<std::vector<float>> out;
  auto step = [&](std::span<const int32_t> tokens) {
    ForwardSeq f;
    f.tokens = tokens;
    f.cache = &cache;
    f.kv.slot = slot;
    f.kv.block_table = table.data();
    f.kv.num_blocks = pages;
    f.kv.num_cached = static_cast<int>(seq.size());
    seq.insert(seq.end(), tokens.begin(), tokens.end());
    std::vector<float> logits;
    model.Forward(std::span<const ForwardSeq>(&f, 1), &logits);
    return logits;
  };
  std::vector<float> last;
  const int n = static_cast<int>(prompt.size()), c = chunk > 0 ? chunk : n;
  for (int i = 0; i < n; i += c) {
    last = step(std::span<const int32_t>(prompt.data() + i, std::min(c, n - i)));
  }
  out.push_back(last);
  for (int s = 0; s < steps; ++s) {
    const int32_t pick = ArgMax(out.back());
    if (picks != nullptr) picks->push_back(pick);
    const int32_t next = forced != nullptr ? (*forced)[s] : pick;
    out.push_back(step(std::span<const int32_t>(&next, 1)));
  }
  return out;
}

double MaxDiff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
               double* range) {
  double diff = 0.0;
  *range = 0.0;
  for (size_t r = 0; r < a.size(); ++r) {
    for (size_t i = 0; i < a[r].size(); ++i) {
      diff = std::max(diff, double(std::fabs(a[r][i] - b[r][i])));
    }
    const auto [lo, hi] = std::minmax_element(a[r].begin(), a[r].end());
    *range = std::max(*range, double(*hi - *lo));
  }
  return diff;
}

}  // namespace vqserve::testing
