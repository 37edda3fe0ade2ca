#include "runtime/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/argmax.h"
#include "kernels/cpu/scaled_exp.h"

namespace vqserve {
namespace {

// top-p sorts the most likely 512 candidates, then 4096, then 32768 (each prefix a selection
// of the rest, then a sort of it), until one reaches top_p; only then the whole vocabulary.
constexpr int kTopPPrefixes[] = {512, 4096, 32768};
// before those: the candidates of weight (probability / the best's) at least one of these,
// sorted, when at most kTopPPrefixes[1] of them (a model's usual, steep distribution).
constexpr float kTopPThresholds[] = {1e-4f, 1e-2f};

// a uniform double in [0, 1) from 53 random bits (the same on every platform).
double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// orders candidates by value, descending; ties by id.
struct Greater {
  bool operator()(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) const {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  }
};

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

bool Sampler::argmax_only() const {
  const bool penalty = params_.repetition_penalty != 1.0f && params_.repetition_penalty > 0;
  return params_.temperature <= 0.0f && !penalty && params_.logprobs <= 0;
}

SampledToken Sampler::Sample(std::span<const float> logits, std::span<const int32_t> history) {
  const int n = static_cast<int>(logits.size());
  // the logits as sampled: the model's, or a penalized copy.
  std::span<const float> x = logits;
  // repetition penalty (ctrl / hf / llama.cpp): each distinct seen token once, positive logits
  // divided, negative multiplied.
  if (params_.repetition_penalty != 1.0f && params_.repetition_penalty > 0) {
    penalized_.assign(logits.begin(), logits.end());
    std::vector<bool> seen(n, false);
    for (int32_t id : history) {
      if (id < 0 || id >= n || seen[id]) continue;
      seen[id] = true;
      float& v = penalized_[id];
      v = v > 0 ? v / params_.repetition_penalty : v * params_.repetition_penalty;
    }
    x = penalized_;
  }

  SampledToken result;
  if (params_.temperature <= 0.0f) {
    result.id = static_cast<int32_t>(cpu::ArgMax(x.data(), n));
  } else {
    // hf order: temperature, then top-k, top-p, min-p on the tempered distribution. weights
    // exp(x / t - max) (the best weighs 1) as candidates {weight, id}; exp keeps the order.
    const float inv_t = 1.0f / params_.temperature;
    const float mx = x[cpu::ArgMax(x.data(), n)] * inv_t;  // x * inv_t is monotonic in x
    weights_.resize(n);
    double z = cpu::ScaledExp(x.data(), inv_t, mx, weights_.data(), n);
    const int k = params_.top_k > 0 ? std::min(params_.top_k, n) : n;
    int kept = k;
    bool sorted = false;
    int done = 0;  // scratch_[0, done): the most likely, sorted
    auto all_candidates = [&] {
      scratch_.resize(n);
      for (int i = 0; i < n; ++i) scratch_[i] = {weights_[i], i};
    };
    if (k < n) {
      all_candidates();
      std::nth_element(scratch_.begin(), scratch_.begin() + k, scratch_.end(), Greater());
      scratch_.resize(k);
      std::sort(scratch_.begin(), scratch_.end(), Greater());
      sorted = true;
      done = k;
      z = 0.0;
      for (int i = 0; i < k; ++i) z += scratch_[i].first;
    } else if (params_.top_p < 1.0f) {
      // the candidates of weight >= tau come first in the full order: when they are few, they
      // go sorted to the front and the rest after them, unsorted (for the prefix search below).
      for (float tau : kTopPThresholds) {
        int count = 0;
        for (int i = 0; i < n; ++i) count += weights_[i] >= tau;
        if (count > kTopPPrefixes[1]) continue;
        scratch_.resize(n);
        int front = 0, back = count;
        for (int i = 0; i < n; ++i) {
          scratch_[weights_[i] >= tau ? front++ : back++] = {weights_[i], i};
        }
        std::sort(scratch_.begin(), scratch_.begin() + count, Greater());
        done = count;
        break;
      }
    }
    if (!sorted && done == 0) all_candidates();
    if (params_.top_p < 1.0f) {
      // the smallest most-likely prefix whose probability reaches top_p.
      const double target = params_.top_p * z;
      auto prefix_cut = [&](int upto, int* cut) {
        double cum = 0.0;
        for (int i = 0; i < upto; ++i) {
          cum += scratch_[i].first;
          if (cum >= target) {
            *cut = i + 1;
            return true;
          }
        }
        return false;
      };
      int cut = kept;
      bool found = done > 0 && prefix_cut(done, &cut);
      if (!found && !sorted) {
        for (int prefix : kTopPPrefixes) {
          if (prefix <= done) continue;
          if (prefix >= kept) break;
          std::nth_element(scratch_.begin() + done, scratch_.begin() + prefix,
                           scratch_.begin() + kept, Greater());
          std::sort(scratch_.begin() + done, scratch_.begin() + prefix, Greater());
          done = prefix;
          if ((found = prefix_cut(prefix, &cut))) break;
        }
      }
      if (!found) {
        if (!sorted) std::sort(scratch_.begin() + done, scratch_.begin() + kept, Greater());
        if (!prefix_cut(kept, &cut)) cut = kept;
      }
      kept = cut;
    }
    if (params_.min_p > 0.0f) {
      int w = 0;
      for (int i = 0; i < kept; ++i) {
        if (scratch_[i].first >= params_.min_p) scratch_[w++] = scratch_[i];
      }
      kept = w;
    }
    double mass = 0.0;
    for (int i = 0; i < kept; ++i) mass += scratch_[i].first;
    const double u = Uniform(rng_) * mass;
    double cum = 0.0;
    result.id = scratch_[kept - 1].second;
    for (int i = 0; i < kept; ++i) {
      cum += scratch_[i].first;
      if (u < cum) {
        result.id = scratch_[i].second;
        break;
      }
    }
  }

  // log-probabilities of the model's distribution (raw logits, full softmax), when asked: a
  // pass of exp and a partial sort over the vocabulary (bench/sampler_bench.cc).
  if (params_.logprobs <= 0) return result;
  const float mx = logits[cpu::ArgMax(logits.data(), n)];
  weights_.resize(n);
  const double z = cpu::ScaledExp(logits.data(), 1.0f, mx, weights_.data(), n);
  const float lse = mx + static_cast<float>(std::log(z));
  result.logprob = logits[result.id] - lse;
  const int top = std::min(params_.logprobs, n);
  scratch_.resize(n);
  for (int i = 0; i < n; ++i) scratch_[i] = {logits[i], i};
  std::partial_sort(scratch_.begin(), scratch_.begin() + top, scratch_.end(), Greater());
  for (int i = 0; i < top; ++i) {
    result.top_logprobs.emplace_back(scratch_[i].second, scratch_[i].first - lse);
  }
  return result;
}

}  // namespace vqserve
