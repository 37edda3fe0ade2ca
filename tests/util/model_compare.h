// helpers of the gpu-vs-cpu model tests: one sequence fed through a model and a kv cache, and
// how far two runs' logits are apart.
#ifndef VQSERVE_TESTS_UTIL_MODEL_COMPARE_H_
#define VQSERVE_TESTS_UTIL_MODEL_COMPARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/kv/kv_cache.h"
#include "runtime/model/llama_model.h"
#include "runtime/tokenizer/tokenizer.h"

namespace vqserve::testing {

int ArgMax(const std::vector<float>& x);

// prompts of exactly `lengths` tokens (bos first): `text` repeated until the longest fits,
// encoded, and cut to each length.
std::vector<std::vector<int32_t>> PromptsOfLengths(const Tokenizer& tok, const std::string& text,
                                                   const std::vector<int>& lengths);

// one sequence on `cache` (slot `slot`, pages [first_page, first_page + pages) in reverse
// order): feeds `prompt` in chunks of `chunk` tokens (0: all at once), then `steps` greedy
// steps, or the `forced` tokens. returns the logits of the last prompt token and of every
// step; *picks (if set) gets the greedy pick after each of those but the last.
std::vector<std::vector<float>> RunSeq(LlamaModel& model, KvCache& cache, int slot,
                                       int first_page, int pages,
                                       const std::vector<int32_t>& prompt, int chunk, int steps,
                                       const std::vector<int32_t>* forced,
                                       std::vector<int32_t>* picks);

// largest |a - b| over all rows; *range: the largest logit range of a's rows.
double MaxDiff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
               double* range);

// the gpu cache against the cpu cache over `prompts` (prompt j on slot j, pages
// [j * pages_per_seq, (j + 1) * pages_per_seq)): the cpu runs `steps` greedy steps after each
// prompt, the gpu is fed the cpu's tokens so that every step's logits are comparable. a pick
// that differs is expected within `tie_margin` of the cpu's lead (gtest expectations); prints
// one line per prompt and a summary, labelled `label`.
struct GreedyComparison {
  int equal = 0, total = 0;
  double worst = 0.0;  // largest max |dlogit| / logit range over the prompts
};
GreedyComparison CompareGreedyWithCpu(LlamaModel& cpu, KvCache& cpu_cache, LlamaModel& gpu,
                                      KvCache& gpu_cache,
                                      const std::vector<std::vector<int32_t>>& prompts,
                                      int pages_per_seq, int steps, double tie_margin,
                                      const std::string& label);

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_MODEL_COMPARE_H_
