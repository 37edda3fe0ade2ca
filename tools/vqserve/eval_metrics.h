#ifndef VQSERVE_TOOLS_VQSERVE_EVAL_METRICS_H_
#define VQSERVE_TOOLS_VQSERVE_EVAL_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/calibration/calibration_recorder.h"
#include "runtime/kv/kv_codec.h"
#include "runtime/model/llama_model.h"

namespace vqserve::cli {

// builds a fresh codec (one per window / trial).
using CodecFactory = std::function<std::unique_ptr<KvCodec>()>;

struct PerplexityResult {
  double nll_sum = 0;
  int64_t predictions = 0;
  double perplexity() const;
};
// perplexity of the model over `windows` windows of `ctx` tokens of ids (bos + ctx-1 text
// tokens each), the kv cache in the codec for the whole window; fed in chunks of `chunk`.
// sink_tokens: oldest tokens kept fp16 (PagedKvCache's attention sink).
PerplexityResult WindowPerplexity(LlamaModel& model, const CodecFactory& codec,
                                  const std::vector<int32_t>& ids, int ctx, int windows,
                                  int chunk, int sink_tokens);

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
  double depth = 0;   // where the key sits (0 start .. 1 end)
  std::string key, answer;
  bool correct = false;
};
// hides a 5-digit key at each depth of filler text of each length, asks for it, and checks the
// greedy answer (8 tokens) gives it (PasskeyAnswerCorrect).
std::vector<PasskeyTrial> RunPasskey(LlamaModel& model, const CodecFactory& codec,
                                     const std::vector<int>& lengths,
                                     const std::vector<double>& depths, uint64_t seed,
                                     int sink_tokens);

}  // namespace vqserve::cli

#endif  // VQSERVE_TOOLS_VQSERVE_EVAL_METRICS_H_
