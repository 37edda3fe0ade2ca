// helpers of the gpu-vs-cpu model tests: one sequence fed through a model and a kv cache, and
// how far two runs' logits are apart.
#ifndef VQSERVE_TESTS_UTIL_MODEL_COMPARE_H_
#define VQSERVE_TESTS_UTIL_MODEL_COMPARE_H_

#include <cstdint>
#include <vector>

#include "runtime/kv_cache.h"
#include "runtime/llama_model.h"

namespace vqserve::testing {

int ArgMax(const std::vector<float>& x);

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

}  // namespace vqserve::testing

#endif  // VQSERVE_TESTS_UTIL_MODEL_COMPARE_H_
