#ifndef VQSERVE_RUNTIME_CALIBRATION_CALIBRATION_RECORDER_H_
#define VQSERVE_RUNTIME_CALIBRATION_CALIBRATION_RECORDER_H_

#include <vector>

#include "runtime/calibration/calibration_data.h"
#include "runtime/kv/kv_cache.h"

namespace vqserve {

// a kv cache that keeps every appended token in fp32 and attends exactly, while recording
// keys (before and after rope), values, positions and optionally queries (raw, or their second
// moments in CalibrationData's q_moment) per layer into CalibrationData, so calibration runs the model's real forward pass. a sequence whose
// num_cached is 0 starts afresh in its slot.
class CalibrationRecorder : public HostKvCache {
 public:
  // records at most max_tokens tokens per layer (later tokens are still attended).
  CalibrationRecorder(const KvShape& shape, float rope_theta, int max_tokens, int num_slots = 1,
                      bool record_queries = false, bool record_query_moments = false);

  const KvCacheSpec& spec() const override { return spec_; }
  const KvShape& shape() const override { return shape_; }
  int num_pages() const override { return 0; }
  int num_slots() const override { return static_cast<int>(slots_.size()); }
  void CopySlot(int from, int to) override { slots_[to] = slots_[from]; }

  void Append(int layer, const KvSeqRef& seq, int n, const float* k_pre_rope,
              const float* k_rope, const float* v) override;
  void Attend(int layer, const KvSeqRef& seq, int n, const float* q, float* out) override;

  const CalibrationData& data() const { return data_; }
  // the recorded data; q_moment normalised to a mean.
  CalibrationData TakeData();
  // recorded queries of `layer`: (tokens, num_heads, head_dim), aligned with data().layers.
  const std::vector<float>& queries(int layer) const { return queries_[layer]; }
  // starts recording anew (keeps the shape).
  void ClearRecords();

 private:
  struct LayerStore {
    std::vector<float> k, v;  // (tokens, kv_heads, head_dim) post-rope keys, values
  };
  KvShape shape_;
  KvCacheSpec spec_;
  int max_tokens_;
  bool record_queries_, record_query_moments_;
  CalibrationData data_;
  std::vector<std::vector<float>> queries_;
  std::vector<int64_t> num_queries_;  // (layer) queries summed into q_moment, per kv head
  std::vector<int> queries_pending_;  // tokens of the layer's last append awaiting queries
  std::vector<std::vector<LayerStore>> slots_;  // (slot, layer)
};

}  // namespace vqserve

#endif  // VQSERVE_RUNTIME_CALIBRATION_CALIBRATION_RECORDER_H_
