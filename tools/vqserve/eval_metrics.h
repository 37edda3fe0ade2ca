#ifndef VQSERVE_TOOLS_VQSERVE_EVAL_METRICS_H_
#define VQSERVE_TOOLS_VQSERVE_EVAL_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/calibration/calibration_recorder.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/kv/kv_codec.h"
#include "runtime/model/llama_model.h"

namespace vqserve::cli {

// builds a fresh one-sequence kv cache able to hold `tokens` tokens (a PagedKvCache over a
// codec on the cpu, or a device cache for the cuda model).
using CacheFactory = std::function<std::unique_ptr<KvCache>(int tokens)>;
// builds a fresh codec (one per window / trial).
using CodecFactory = std::function<std::unique_ptr<KvCodec>()>;
// the cache factory of PagedKvCaches over `codec`'s codecs, with `sink_tokens` fp16 sink tokens.
CacheFactory HostCacheFactory(CodecFactory codec, int sink_tokens);

struct PerplexityResult {
  double nll_sum = 0;
  int64_t predictions = 0;
  double perplexity() const;
};

// one evaluation window: ctx tokens (bos + ctx-1 text tokens from `begin`) of text `text`.
struct EvalWindow {
  int text = 0;
  size_t begin = 0;
};
// `per_text` windows of `ctx` tokens spread evenly over each text (non-overlapping; a text too
// short for them gives as many as fit, at least one if it has ctx-1 tokens).
std::vector<EvalWindow> SpreadWindows(const std::vector<size_t>& text_tokens, int ctx,
                                      int per_text);

// called after each window / trial: (done, total, tokens fed so far, seconds so far).
using EvalProgress = std::function<void(int done, int total, int64_t tokens, double seconds)>;

// the negative log-likelihood of each window with the kv cache from `cache` for the whole
// window, fed in chunks of `chunk` (each query sees what token-by-token decoding would).
std::vector<PerplexityResult> WindowNll(LlamaModel& model, const CacheFactory& cache,
                                        const std::vector<std::vector<int32_t>>& texts,
                                        const std::vector<EvalWindow>& windows, int ctx,
                                        int chunk, const EvalProgress& progress = nullptr);

// perplexity of the model over `windows` consecutive windows of `ctx` tokens of ids (bos +
// ctx-1 text tokens each), the kv cache in the codec for the whole window; fed in chunks of
// `chunk`. sink_tokens: oldest tokens kept fp16 (PagedKvCache's attention sink).
PerplexityResult WindowPerplexity(LlamaModel& model, const CodecFactory& codec,
                                  const std::vector<int32_t>& ids, int ctx, int windows,
                                  int chunk, int sink_tokens);

// ---- statistics of paired per-window comparisons ----

// the p-quantile of Student's t distribution with `dof` degrees of freedom (dof >= 1,
// 0 < p < 1); dof <= 0 gives the normal quantile.
double StudentTQuantile(double p, double dof);
// the regularized incomplete beta function I_x(a, b).
double RegularizedIncompleteBeta(double a, double b, double x);

struct MeanInterval {
  int n = 0;
  double mean = 0, sd = 0, se = 0;  // sd: sample standard deviation (n - 1)
  double lo = 0, hi = 0;            // the two-sided t interval at `level`
  double level = 0.95;
};
// mean, standard error and t interval (n - 1 degrees of freedom) of x; for n < 2 the interval
// is the mean itself and se is 0.
MeanInterval MeanWithTInterval(const std::vector<double>& x, double level = 0.95);

// the per-window relative perplexity change in percent, 100 (ppl_codec / ppl_base - 1), of
// windows evaluated with a codec and with the baseline (paired: the same windows, in order).
std::vector<double> RelativePerplexityDeltaPct(const std::vector<PerplexityResult>& codec,
                                               const std::vector<PerplexityResult>& base);

// the Wilson score interval of a proportion (successes of n) at the normal quantile z.
void WilsonInterval(int successes, int n, double z, double* lo, double* hi);

struct CodecErrors {
  double k_rel = 0;     // ||K - decode(encode(K))|| / ||K|| over all layers
  double v_rel = 0;
  double attn_rel = 0;  // mean over layers, heads and sampled positions of ||o - o_ref|| / ||o_ref||
};
// reconstruction and attention-output errors of `codec` on keys/values/queries recorded by a
// CalibrationRecorder over one sequence (fp32 exact attention is the reference).
CodecErrors MeasureCodecErrors(const KvCodec& codec, const CalibrationRecorder& rec,
                               int query_samples);

// true when the first run of digits in `answer` is exactly `key` (" 86806." yes; " 868066."
// and " 8680 6" no).
bool PasskeyAnswerCorrect(const std::string& answer, const std::string& key);

struct PasskeyTrial {
  int length = 0;     // prompt tokens
  int target = 0;     // the length asked for
  double depth = 0;   // where the key sits (0 start .. 1 end)
  std::string key, answer;
  bool correct = false;
};
// `trials` evenly spread depths (i + 0.5) / trials, i = 0..trials-1.
std::vector<double> SpreadDepths(int trials);
// the 5-digit key of a trial: a function of (seed, length, trial index) only, so that every
// codec and every run sees the same keys.
std::string PasskeyKey(uint64_t seed, int length, int trial);
// hides a 5-digit key at each depth of filler text of each length, asks for it, and checks the
// greedy answer (8 tokens) gives it (PasskeyAnswerCorrect).
std::vector<PasskeyTrial> RunPasskey(LlamaModel& model, const CacheFactory& cache,
                                     const std::vector<int>& lengths,
                                     const std::vector<double>& depths, uint64_t seed,
                                     const EvalProgress& progress = nullptr);
std::vector<PasskeyTrial> RunPasskey(LlamaModel& model, const CodecFactory& codec,
                                     const std::vector<int>& lengths,
                                     const std::vector<double>& depths, uint64_t seed,
                                     int sink_tokens);

}  // namespace vqserve::cli

#endif  // VQSERVE_TOOLS_VQSERVE_EVAL_METRICS_H_
