#ifndef VQSERVE_RUNTIME_MODEL_SAMPLER_H_
#define VQSERVE_RUNTIME_MODEL_SAMPLER_H_

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace vqserve {

// sampling parameters of one request. temperature 0 means greedy.
struct SamplingParams {
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;  // 0: off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;
  int logprobs = 0;  // top-n log-probabilities to report
};

// one token and the log-probabilities that go with it.
struct SampledToken {
  int32_t id = 0;
  // with SamplingParams::logprobs > 0 (else 0 and empty): the chosen token's log-probability
  // (full softmax of the raw logits) and the n most likely.
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

// draws tokens for one sequence; the same seed and logits give the same tokens.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // picks the next token from `logits` (vocab floats); `history` (prompt and output) feeds the
  // repetition penalty.
  SampledToken Sample(std::span<const float> logits, std::span<const int32_t> history);
  // whether Sample takes the plain argmax of the logits (greedy, no repetition penalty, no
  // log-probabilities): a caller may then ask the model for that id alone (ForwardSeq::argmax).
  bool argmax_only() const;

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> scratch_;
  std::vector<float> penalized_;  // the logits after the repetition penalty
  std::vector<float> weights_;    // exp(x / temperature - max)
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_MODEL_SAMPLER_H_
