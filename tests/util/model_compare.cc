#include "tests/util/model_compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>

namespace vqserve::testing {

int ArgMax(const std::vector<float>& x) {
  return static_cast<int>(std::max_element(x.begin(), x.end()) - x.begin());
}

std::vector<std::vector<int32_t>> PromptsOfLengths(const Tokenizer& tok, const std::string& text,
                                                   const std::vector<int>& lengths) {
  const int longest = *std::max_element(lengths.begin(), lengths.end());
  std::string longer = text;
  while (static_cast<int>(tok.Encode(longer, true, false).size()) < longest) longer += text;
  const std::vector<int32_t> ids = tok.Encode(longer, /*add_bos=*/true, false);
  std::vector<std::vector<int32_t>> prompts;
  for (int n : lengths) prompts.emplace_back(ids.begin(), ids.begin() + n);
  return prompts;
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

GreedyComparison CompareGreedyWithCpu(LlamaModel& cpu, KvCache& cpu_cache, LlamaModel& gpu,
                                      KvCache& gpu_cache,
                                      const std::vector<std::vector<int32_t>>& prompts,
                                      int pages_per_seq, int steps, double tie_margin,
                                      const std::string& label) {
  GreedyComparison r;
  for (size_t j = 0; j < prompts.size(); ++j) {
    const int slot = static_cast<int>(j), first = slot * pages_per_seq;
    std::vector<int32_t> ref_picks, got_picks;
    auto ref = RunSeq(cpu, cpu_cache, slot, first, pages_per_seq, prompts[j], 0, steps, nullptr,
                      &ref_picks);
    auto got = RunSeq(gpu, gpu_cache, slot, first, pages_per_seq, prompts[j], 0, steps,
                      &ref_picks, &got_picks);
    for (int s = 0; s < steps; ++s) {
      ++r.total;
      if (ref_picks[s] == got_picks[s]) {
        ++r.equal;
        continue;
      }
      const double margin = ref[s][ref_picks[s]] - ref[s][got_picks[s]];
      std::printf("prompt %zu step %d: cpu %d gpu %d (cpu margin %.3e)\n", j, s, ref_picks[s],
                  got_picks[s], margin);
      EXPECT_LT(margin, tie_margin) << label << " prompt " << j << " step " << s;
    }
    double range = 0.0;
    const double diff = MaxDiff(ref, got, &range);
    std::printf("[%s gpu vs cpu] prompt %zu (%zu tokens): max |dlogit| %.4f, range %.2f, "
                "ratio %.5f\n",
                label.c_str(), j, prompts[j].size(), diff, range, diff / range);
    r.worst = std::max(r.worst, diff / range);
  }
  std::printf("[%s gpu vs cpu] greedy picks equal %d/%d; worst |dlogit|/range %.5f\n",
              label.c_str(), r.equal, r.total, r.worst);
  return r;
}

}  // namespace vqserve::testing
