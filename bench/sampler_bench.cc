// the host's sampling of one sequence's next token (runtime/model/sampler.h), as the engine
// does once per sequence a step: greedy with and without the log-probabilities, with a
// repetition penalty, and temperature + top-p (flat logits and 3x steeper ones), over the
// default model's vocabulary (49152) and Llama 3's (128256).
// usage: build/bin/sampler_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/model/sampler.h"

namespace vqserve {
namespace {

// logits spread evenly over [-5, 5) with one at 12, the same for every run.
std::vector<float> Logits(int vocab) {
  std::vector<float> x(vocab);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (float& v : x) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<float>((s >> 40) % 10000) * 1e-3f - 5.0f;
  }
  x[vocab / 3] = 12.0f;
  return x;
}

void Sample(benchmark::State& state, SamplingParams params, float scale = 1.0f) {
  std::vector<float> logits = Logits(static_cast<int>(state.range(0)));
  for (float& v : logits) v *= scale;
  const std::vector<int32_t> history = {1, 2, 3, 500, 4000};
  Sampler sampler(params);
  for (auto _ : state) benchmark::DoNotOptimize(sampler.Sample(logits, history).id);
}

void BM_Greedy(benchmark::State& state) { Sample(state, SamplingParams{}); }
void BM_GreedyLogprobs(benchmark::State& state) {
  SamplingParams p;
  p.logprobs = 1;
  Sample(state, p);
}
void BM_GreedyRepetitionPenalty(benchmark::State& state) {
  SamplingParams p;
  p.repetition_penalty = 1.1f;
  Sample(state, p);
}
void BM_TemperatureTopP(benchmark::State& state) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  Sample(state, p);
}

// the same logits 3x steeper: the top-p set is a few thousand tokens.
void BM_TemperatureTopPSteep(benchmark::State& state) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  Sample(state, p, 3.0f);
}

BENCHMARK(BM_Greedy)->Arg(49152)->Arg(128256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GreedyLogprobs)->Arg(49152)->Arg(128256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GreedyRepetitionPenalty)->Arg(49152)->Arg(128256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TemperatureTopP)->Arg(49152)->Arg(128256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TemperatureTopPSteep)->Arg(49152)->Arg(128256)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace vqserve

BENCHMARK_MAIN();
