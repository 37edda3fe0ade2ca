// the host's sampling of one sequence's next token (runtime/model/sampler.h), as the engine
// does once per sequence a step: greedy with and without the log-probabilities, with a
// repetition penalty, and temperature + top-p (flat logits and 3x steeper ones), over the
// default model's vocabulary (49152) and Llama 3's (128256); and a step's 16 steep top-p rows
// drawn as the engine draws them, one after another (1 thread) or in parallel (OpenMP).
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

// 16 rows of 128256 steep logits, each its own sampler, drawn by state.range(0) threads
// (engine.cc's loop: schedule(dynamic, 1)).
void BM_SixteenSteepRows(benchmark::State& state) {
  std::vector<float> logits = Logits(128256);
  for (float& v : logits) v *= 3.0f;
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  std::vector<Sampler> samplers(16, Sampler(p));
  std::vector<int32_t> ids(16);
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int j = 0; j < 16; ++j) ids[j] = samplers[j].Sample(logits, {}).id;
    benchmark::DoNotOptimize(ids.data());
  }
}

BENCHMARK(BM_Greedy)->Arg(49152)->Arg(128256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GreedyLogprobs)->Arg(49152)->Arg(128256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GreedyRepetitionPenalty)->Arg(49152)->Arg(128256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TemperatureTopP)->Arg(49152)->Arg(128256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TemperatureTopPSteep)->Arg(49152)->Arg(128256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SixteenSteepRows)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace vqserve

BENCHMARK_MAIN();
