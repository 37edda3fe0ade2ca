#ifndef VQSERVE_RUNTIME_MODEL_LLAMA_MODEL_H_
#define VQSERVE_RUNTIME_MODEL_LLAMA_MODEL_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/model/model_config.h"
#include "runtime/tokenizer/tokenizer.h"

namespace vqserve {

// one sequence of a forward step: its new tokens and where its kv lives.
struct ForwardSeq {
  std::span<const int32_t> tokens;  // new tokens, at positions kv.num_cached ...
  KvCache* cache = nullptr;         // the codec's cache this sequence uses
  KvSeqRef kv;
  bool want_logits = true;          // logits of the last new token
  bool want_all_logits = false;     // logits of every new token (evaluation)
  // with want_logits and not want_all_logits (greedy sampling): the first index of the largest
  // of those logits (NaNs skipped: cpu::ArgMax) is written here instead of appending the row.
  int32_t* argmax = nullptr;
};

// logit rows Forward appends for `s`.
inline int LogitRows(const ForwardSeq& s) {
  if (s.tokens.empty()) return 0;
  if (s.want_all_logits) return static_cast<int>(s.tokens.size());
  return s.want_logits && s.argmax == nullptr ? 1 : 0;
}

struct LoadOptions {
  int num_threads = 0;  // 0: all cores
  // true: every step multiplies by the file's q4_0/q4_1/q8_0 blocks with q8 activations (as
  // llama.cpp does), so a row's arithmetic is independent of the step's other rows; false:
  // fp32 sgemm on weights dequantized at load.
  bool quantized_decode = true;
};

// a llama-family transformer on the cpu; weights dequantized to fp32 at load (and, with
// quantized_decode, the q4/q8 blocks kept for decode steps).
class LlamaModel {
 public:
  // loads weights, hyper-parameters and tokenizer; errors name the file and the problem.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(const std::string& path,
                                                          const LoadOptions& options = {});
  virtual ~LlamaModel() = default;

  virtual const ModelConfig& config() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  KvShape kv_shape() const;

  // runs one step for a batch of sequences (prefill chunks and decode tokens mixed).
  // logits: vocab floats for each requested position (LogitRows), in batch order, appended;
  // the argmax of the sequences that ask for it written where they say.
  virtual void Forward(std::span<const ForwardSeq> batch, std::vector<float>* logits) = 0;
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_MODEL_LLAMA_MODEL_H_
