#ifndef VQSERVE_RUNTIME_MODEL_LLAMA_WEIGHTS_H_
#define VQSERVE_RUNTIME_MODEL_LLAMA_WEIGHTS_H_

// reading llama tensors from a gguf file as fp32, shared by the cpu and cuda models.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/model/model_config.h"

namespace vqserve {

// reads `name` as fp32 and checks that its gguf dims equal `dims`.
absl::Status ReadChecked(const GgufFile& file, const std::string& name,
                         std::vector<int64_t> dims, std::vector<float>* out);

// reads tensors one after another into a single row-stacked matrix of `cols` columns.
absl::Status ReadStacked(const GgufFile& file, const std::vector<std::string>& names,
                         const std::vector<int64_t>& rows, int64_t cols, std::vector<float>* out);

// rope_dim / 2 rotation frequencies of the model (scaling and llama3 divisors applied).
absl::StatusOr<std::vector<float>> LlamaRopeFrequencies(const ModelConfig& c,
                                                        const GgufFile& file);

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_MODEL_LLAMA_WEIGHTS_H_
