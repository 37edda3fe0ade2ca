#include "runtime/calibration/calibration_recorder.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vqserve {

CalibrationRecorder::CalibrationRecorder(const KvShape& shape, float rope_theta, int max_tokens,
                                         int num_slots, bool record_queries,
                                         bool record_query_moments)
    : shape_(shape),
      max_tokens_(max_tokens),
      record_queries_(record_queries),
      record_query_moments_(record_query_moments) {
  spec_.codec = "fp32-recorder";
  spec_.page_tokens = 32;
  spec_.residual_tokens = 0;
  spec_.needs_pre_rope_keys = true;
  spec_.bytes_per_token = 4.0 * 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim;
  data_.shape = shape;
  data_.rope_theta = rope_theta;
  data_.layers.resize(shape.num_layers);
  queries_.resize(shape.num_layers);
  num_queries_.assign(shape.num_layers, 0);
  queries_pending_.assign(shape.num_layers, 0);
  slots_.assign(num_slots, std::vector<LayerStore>(shape.num_layers));
}

void CalibrationRecorder::ClearRecords() {
  for (auto& l : data_.layers) l = LayerSamples{};
  for (auto& q : queries_) q.clear();
  std::fill(num_queries_.begin(), num_queries_.end(), 0);
  std::fill(queries_pending_.begin(), queries_pending_.end(), 0);
}

CalibrationData CalibrationRecorder::TakeData() {
  const int D = shape_.head_dim;
  for (int l = 0; l < shape_.num_layers; ++l) {
    std::vector<double>& mom = data_.layers[l].q_moment;
    const double n = static_cast<double>(std::max<int64_t>(num_queries_[l], 1));
    for (size_t at = 0; at < mom.size(); at += static_cast<size_t>(D) * D) {
      double* m = mom.data() + at;
      for (int a = 0; a < D; ++a) {
        for (int b = 0; b <= a; ++b) m[a * D + b] = m[b * D + a] = m[a * D + b] / n;
      }
    }
  }
  return std::move(data_);
}

void CalibrationRecorder::Append(int layer, const KvSeqRef& seq, int n, const float* k_pre_rope,
                                 const float* k_rope, const float* v) {
  const size_t row = static_cast<size_t>(shape_.num_kv_heads) * shape_.head_dim;
  LayerStore& st = slots_[seq.slot][layer];
  st.k.resize(static_cast<size_t>(seq.num_cached) * row);  // drops tokens of an older sequence
  st.v.resize(st.k.size());
  st.k.insert(st.k.end(), k_rope, k_rope + n * row);
  st.v.insert(st.v.end(), v, v + n * row);
  LayerSamples& ls = data_.layers[layer];
  const int take = std::max(0, std::min(n, max_tokens_ - ls.num_tokens));
  queries_pending_[layer] = take;
  if (take == 0) return;
  if (k_pre_rope) ls.k_pre_rope.insert(ls.k_pre_rope.end(), k_pre_rope, k_pre_rope + take * row);
  ls.k_rope.insert(ls.k_rope.end(), k_rope, k_rope + take * row);
  ls.v.insert(ls.v.end(), v, v + take * row);
  for (int i = 0; i < take; ++i) ls.positions.push_back(seq.num_cached + i);
  ls.num_tokens += take;
}

void CalibrationRecorder::Attend(int layer, const KvSeqRef& seq, int n, const float* q,
                                 float* out) {
  const int D = shape_.head_dim, H = shape_.num_kv_heads, QH = shape_.num_heads;
  const int group = QH / H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  if (record_queries_ && queries_pending_[layer] > 0) {
    queries_[layer].insert(queries_[layer].end(), q,
                           q + static_cast<size_t>(queries_pending_[layer]) * QH * D);
  }
  if (record_query_moments_ && queries_pending_[layer] > 0) {
    std::vector<double>& mom = data_.layers[layer].q_moment;
    mom.resize(static_cast<size_t>(H) * D * D, 0.0);
    for (int i = 0; i < queries_pending_[layer]; ++i) {
      for (int qh = 0; qh < QH; ++qh) {
        const float* qv = q + (static_cast<size_t>(i) * QH + qh) * D;
        double* m = mom.data() + static_cast<size_t>(qh / group) * D * D;
        for (int a = 0; a < D; ++a) {
          for (int b = 0; b <= a; ++b) m[a * D + b] += static_cast<double>(qv[a]) * qv[b];
        }
      }
    }
    num_queries_[layer] += static_cast<int64_t>(queries_pending_[layer]) * group;
  }
  queries_pending_[layer] = 0;
  const LayerStore& st = slots_[seq.slot][layer];
  std::vector<float> s;
  for (int i = 0; i < n; ++i) {
    const int len = seq.num_cached + i + 1;
    s.resize(len);
    for (int qh = 0; qh < QH; ++qh) {
      const int h = qh / group;
      const float* qv = q + (static_cast<size_t>(i) * QH + qh) * D;
      float mx = -std::numeric_limits<float>::infinity();
      for (int t = 0; t < len; ++t) {
        const float* kv = st.k.data() + (static_cast<size_t>(t) * H + h) * D;
        float d = 0;
        for (int j = 0; j < D; ++j) d += qv[j] * kv[j];
        s[t] = d * scale;
        mx = std::max(mx, s[t]);
      }
      double sum = 0;
      float* o = out + (static_cast<size_t>(i) * QH + qh) * D;
      std::fill(o, o + D, 0.0f);
      for (int t = 0; t < len; ++t) {
        const float p = std::exp(s[t] - mx);
        sum += p;
        const float* vv = st.v.data() + (static_cast<size_t>(t) * H + h) * D;
        for (int j = 0; j < D; ++j) o[j] += p * vv[j];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int j = 0; j < D; ++j) o[j] *= inv;
    }
  }
}

}  // namespace vqserve
