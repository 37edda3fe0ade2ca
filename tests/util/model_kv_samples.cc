#include "tests/util/model_kv_samples.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <system_error>

#include <unistd.h>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/calibration/calibration_recorder.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/model/llama_model.h"
#include "tests/test_paths.h"

namespace vqserve::testing {
namespace {

template <typename T>
void WriteVec(std::ofstream& f, const std::vector<T>& v) {
  uint64_t n = v.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(reinterpret_cast<const char*>(v.data()), n * sizeof(T));
}

template <typename T>
bool ReadVec(std::ifstream& f, std::vector<T>* v) {
  uint64_t n = 0;
  if (!f.read(reinterpret_cast<char*>(&n), 8) || n > (uint64_t{1} << 32)) return false;
  v->resize(n);
  return static_cast<bool>(f.read(reinterpret_cast<char*>(v->data()), n * sizeof(T)));
}

}  // namespace

std::string RealTextPath() {
  const std::string path = "/usr/share/games/fortunes/fortunes";
  return std::filesystem::exists(path) ? path : "";
}

absl::StatusOr<CalibrationData> ModelKvSamples(const std::string& text_path, int tokens,
                                               const std::vector<int>& layers) {
  const std::string model_path = DefaultModelPath();
  if (model_path.empty()) return absl::NotFoundError("default model missing");
  std::ifstream text_file(text_path, std::ios::binary);
  if (!text_file) return absl::NotFoundError(text_path + ": cannot open");
  std::stringstream text;
  text << text_file.rdbuf();
  const std::string cache_path = absl::StrFormat(
      "%s/kv_samples_%x_%d_%s.bin", BinaryDir(),
      std::hash<std::string>()(text.str() + model_path), tokens, absl::StrJoin(layers, "-"));
  CalibrationData data;
  {
    std::ifstream f(cache_path, std::ios::binary);
    bool ok = static_cast<bool>(f);
    if (ok) {
      ok = static_cast<bool>(f.read(reinterpret_cast<char*>(&data.shape), sizeof(KvShape))) &&
           static_cast<bool>(f.read(reinterpret_cast<char*>(&data.rope_theta), 4));
      data.layers.resize(layers.size());
      for (LayerSamples& ls : data.layers) {
        ok = ok && ReadVec(f, &ls.k_pre_rope) && ReadVec(f, &ls.k_rope) && ReadVec(f, &ls.v) &&
             ReadVec(f, &ls.positions);
        ls.num_tokens = static_cast<int>(ls.positions.size());
      }
      if (ok && data.shape.num_layers == static_cast<int>(layers.size())) return data;
    }
  }
  absl::StatusOr<std::unique_ptr<LlamaModel>> model = LlamaModel::Load(model_path);
  if (!model.ok()) return model.status();
  std::vector<int32_t> ids = (*model)->tokenizer().Encode(text.str(), true, false);
  if (static_cast<int>(ids.size()) < tokens) {
    return absl::FailedPreconditionError(text_path + ": too short");
  }
  ids.resize(tokens);
  const KvShape shape = (*model)->kv_shape();
  CalibrationRecorder cache(shape, (*model)->config().rope_theta, tokens);
  std::vector<float> logits;
  for (int done = 0; done < tokens;) {
    int n = std::min(256, tokens - done);
    ForwardSeq seq;
    seq.tokens = std::span<const int32_t>(ids.data() + done, n);
    seq.cache = &cache;
    seq.kv = KvSeqRef{0, nullptr, 0, done};
    seq.want_logits = false;
    (*model)->Forward(std::span<const ForwardSeq>(&seq, 1), &logits);
    done += n;
  }
  CalibrationData recorded = cache.TakeData();
  data.shape = shape;
  data.shape.num_layers = static_cast<int>(layers.size());
  data.rope_theta = recorded.rope_theta;
  for (int l : layers) data.layers.push_back(std::move(recorded.layers[l]));
  // written under a temporary name and renamed, so tests running in parallel never read a
  // partial cache.
  std::string tmp_path = cache_path + ".tmp." + std::to_string(::getpid());
  std::ofstream f(tmp_path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&data.shape), sizeof(KvShape));
  f.write(reinterpret_cast<const char*>(&data.rope_theta), 4);
  for (const LayerSamples& ls : data.layers) {
    WriteVec(f, ls.k_pre_rope);
    WriteVec(f, ls.k_rope);
    WriteVec(f, ls.v);
    WriteVec(f, ls.positions);
  }
  f.close();
  std::error_code ec;
  std::filesystem::rename(tmp_path, cache_path, ec);
  return data;
}

}  // namespace vqserve::testing
