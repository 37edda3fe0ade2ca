#include "runtime/model/llama_weights.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/rope.h"

namespace vqserve {

absl::Status ReadChecked(const GgufFile& file, const std::string& name,
                         std::vector<int64_t> dims, std::vector<float>* out) {
  const GgufTensor* t = file.FindTensor(name);
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat(file.path(), ": missing tensor '", name, "'"));
  }
  if (t->dims != dims) {
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": tensor '", name, "' has dims [",
                                                   absl::StrJoin(t->dims, ", "), "], expected [",
                                                   absl::StrJoin(dims, ", "), "]"));
  }
  absl::StatusOr<std::vector<float>> data = file.ReadTensorF32(name);
  if (!data.ok()) return data.status();
  *out = std::move(*data);
  return absl::OkStatus();
}

absl::Status ReadStacked(const GgufFile& file, const std::vector<std::string>& names,
                         const std::vector<int64_t>& rows, int64_t cols, std::vector<float>* out) {
  out->clear();
  for (size_t i = 0; i < names.size(); ++i) {
    std::vector<float> part;
    if (absl::Status s = ReadChecked(file, names[i], {cols, rows[i]}, &part); !s.ok()) return s;
    out->insert(out->end(), part.begin(), part.end());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> LlamaRopeFrequencies(const ModelConfig& c,
                                                        const GgufFile& file) {
  cpu::RopeParams rp;
  rp.rope_dim = c.rope_dim;
  rp.theta = c.rope_theta;
  rp.scaling = c.rope_scaling == "llama3" ? "none" : c.rope_scaling;
  rp.factor = c.rope_scaling_factor;
  rp.low_freq_factor = c.rope_low_freq_factor;
  rp.high_freq_factor = c.rope_high_freq_factor;
  rp.original_context = c.rope_original_context;
  std::vector<float> freqs = cpu::RopeFrequencies(rp);
  if (c.rope_scaling == "llama3") {
    // llama3 gguf files carry the per-frequency divisors as a tensor.
    if (file.FindTensor("rope_freqs.weight") != nullptr) {
      std::vector<float> div;
      if (absl::Status s = ReadChecked(file, "rope_freqs.weight", {c.rope_dim / 2}, &div);
          !s.ok()) {
        return s;
      }
      for (int i = 0; i < c.rope_dim / 2; ++i) freqs[i] /= div[i];
    } else {
      rp.scaling = "llama3";
      freqs = cpu::RopeFrequencies(rp);
    }
  }
  return freqs;
}

}  // namespace vqserve
