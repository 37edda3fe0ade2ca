#include "tests/util/model_kv_samples.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/fp16_codec.h"
#include "runtime/kv_cache.h"
#include "runtime/llama_model.h"
#include "runtime/paged_kv_cache.h"
#include "tests/test_paths.h"

namespace vqserve::testing {
namespace {

// records every appended key/value of one sequence and attends through an fp16 paged cache.
class RecordingCache : public KvCache {
 public:
  RecordingCache(const KvShape& shape, int max_tokens)
      : shape_(shape), pages_(max_tokens / 32 + 2),
        inner_(MakePagedKvCache(MakeFp16Codec(shape), pages_, 1)),
        table_(pages_), layers_(shape.num_layers) {
    for (int i = 0; i < pages_; ++i) table_[i] = i;
    spec_ = inner_->spec();
    spec_.needs_pre_rope_keys = true;
  }
  const KvCacheSpec& spec() const override { return spec_; }
  const KvShape& shape() const override { return shape_; }
  int num_pages() const override { return pages_; }
  int num_slots() const override { return 1; }
  void Append(int layer, const KvSeqRef& seq, int n, const float* k_pre_rope,
              const float* k_rope, const float* v) override {
    size_t row = size_t{1} * shape_.num_kv_heads * shape_.head_dim;
    LayerSamples& ls = layers_[layer];
    ls.k_pre_rope.insert(ls.k_pre_rope.end(), k_pre_rope, k_pre_rope + n * row);
    ls.k_rope.insert(ls.k_rope.end(), k_rope, k_rope + n * row);
    ls.v.insert(ls.v.end(), v, v + n * row);
    for (int i = 0; i < n; ++i) ls.positions.push_back(seq.num_cached + i);
    ls.num_tokens += n;
    inner_->Append(layer, Ref(seq), n, nullptr, k_rope, v);
  }
  void Attend(int layer, const KvSeqRef& seq, int n, const float* q, float* out) override {
    inner_->Attend(layer, Ref(seq), n, q, out);
  }
  std::vector<LayerSamples>& layers() { return layers_; }

 private:
  KvSeqRef Ref(const KvSeqRef& seq) const { return KvSeqRef{0, table_.data(), pages_, seq.num_cached}; }

  KvShape shape_;
  int pages_;
  std::unique_ptr<PagedKvCache> inner_;
  std::vector<int32_t> table_;
  std::vector<LayerSamples> layers_;
  KvCacheSpec spec_;
};

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
  RecordingCache cache(shape, tokens);
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
  data.shape = shape;
  data.shape.num_layers = static_cast<int>(layers.size());
  data.rope_theta = (*model)->config().rope_theta;
  for (int l : layers) data.layers.push_back(std::move(cache.layers()[l]));
  std::ofstream f(cache_path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&data.shape), sizeof(KvShape));
  f.write(reinterpret_cast<const char*>(&data.rope_theta), 4);
  for (const LayerSamples& ls : data.layers) {
    WriteVec(f, ls.k_pre_rope);
    WriteVec(f, ls.k_rope);
    WriteVec(f, ls.v);
    WriteVec(f, ls.positions);
  }
  return data;
}

}  // namespace vqserve::testing
